"""Internal: The drill-down of one sample: its verdict, the question, the answer with each claim and
citation coloured by its verdict, the claims with their supporting quotes, the chunks with their
relevance, the reference statements and every Score. All text is escaped.

The evidence is read from the Scores' ``details`` of the metrics whose class says they hold it
(:attr:`ragmeter.metrics.base.Metric.evidence`: claims, citations, chunk relevance and usefulness,
reference statements); a section whose details are absent is left out, and one whose details
have an unexpected shape says so instead of breaking the page.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any

from ragmeter.citations import parse_citations
from ragmeter.dashboard.model import SampleView
from ragmeter.guard import never_raise
from ragmeter.metrics import metric_classes

__all__ = ["drilldown", "claims_of", "fmt"]


def _sources(evidence: str) -> tuple[str, ...]:
    """The registered metrics whose Scores hold ``evidence`` (:data:`ragmeter.metrics.base.EVIDENCE`),
    in registry order."""
    return tuple(name for name, cls in metric_classes().items() if evidence in cls.evidence)


_VERDICT_TEXT = {
    "supported": "supported",
    "contradicted": "contradicted",
    "not_found": "not found",
    "supports": "supports",
    "partially": "partially supports",
    "does_not_support": "does not support",
    "invalid": "invalid",
    "no_claim": "no claim",
    "unscored": "not scored",
}


def fmt(value: float | None, digits: int = 4) -> str:
    """A value as the summary shows it: 4 decimals, ``-`` for None."""
    return "-" if value is None else f"{value:.{digits}f}"


def _details(view: SampleView, names: tuple[str, ...], key: str) -> tuple[str, list] | None:
    """(metric, list) of the first Score among ``names`` whose details hold a list under ``key``."""
    for name in names:
        s = view.scores.get(name)
        if s is not None and isinstance(s.details.get(key), list):
            return name, s.details[key]
    return None


def claims_of(view: SampleView) -> tuple[str | None, list[dict]]:
    """The answer's claims as ``{text, unit, verdict, evidence: [{chunk, quote, quote_found}], reason}``
    from faithfulness (else a citation metric), with the metric they come from."""
    found = _details(view, _sources("claims"), "claims")
    if found is None:
        return None, []
    metric, raw = found
    out = []
    for c in raw:
        if not isinstance(c, dict):
            continue
        text = c.get("text") if isinstance(c.get("text"), str) else c.get("claim")
        evidence = [e for e in (c.get("evidence") or []) if isinstance(e, dict)]
        out.append(
            {
                "text": str(text or ""),
                "unit": c.get("unit"),
                "verdict": str(c.get("verdict") or "unscored"),
                "evidence": evidence,
                "reason": str(c.get("reason") or ""),
            }
        )
    return metric, out


def _chip(verdict: str) -> str:
    return f'<span class="badge v-{escape(verdict)}">{escape(_VERDICT_TEXT.get(verdict, verdict))}</span>'


def _chunk_name(view: SampleView, i: Any) -> str:
    contexts = view.result.sample.contexts
    if not isinstance(i, int) or not 0 <= i < len(contexts):
        return f"chunk {escape(str(i))}"
    cid = contexts[i].id
    return f'<a href="#{_anchor(view, i)}">chunk {i + 1}</a>' + (f" ({escape(cid)})" if cid else "")


def _anchor(view: SampleView, chunk: int) -> str:
    return f"s{view.index}-c{chunk}"


# --------------------------------------------------------------------------- sections


#: How each composite form reads on the page.
_FORMS = {"harmonic": "harmonic mean", "weighted": "weighted mean", "geometric": "geometric mean", "min": "minimum"}


def _verdict(view: SampleView) -> str:
    d = view.diagnosis
    used = ", ".join(f"{escape(m)} {v:.2f}" for m, v in view.used.items()) or "none"
    excluded = "".join(f"<li>{escape(m)}: {escape(why)}</li>" for m, why in view.excluded.items())
    grade = (
        f'<span class="grade g-{view.grade}">{view.grade}</span>'
        if view.grade
        else '<span class="grade g-none">-</span>'
    )
    method, weights = view.verdicts.method, view.verdicts.weights
    how = _FORMS.get(method, method) + (
        ", equal weights"
        if weights is None
        else ", weights " + ", ".join(f"{escape(m)} {w:g}" for m, w in weights.items())
    )
    zero = [m for m, v in view.used.items() if v == 0.0]
    note = (
        f" A value of 0 ({escape(', '.join(zero))}) makes a {_FORMS[method]} 0."
        if zero and method in ("harmonic", "geometric")
        else ""
    )
    weakest = (
        f' Weakest: <b class="weakest">{escape(view.weakest[0])} {view.weakest[1]:.2f}</b>.'
        if view.weakest and len(view.used) > 1
        else ""
    )
    parts = [
        f'<div class="verdict"><p>{grade} composite <b>{fmt(view.composite)}</b> ({how}) over {used}.{weakest}'
        f'{note}</p>'
    ]
    if excluded:
        parts.append(f"<p>Left out of the composite:</p><ul>{excluded}</ul>")
    parts.append(f'<p>Diagnosis: <span class="diag d-{d.kind}">{escape(d.kind)}</span></p><ul class="reasons">')
    parts += [f"<li>{escape(r)}</li>" for r in d.reasons]
    parts.append(f'</ul><p class="rule">Rule: {escape(d.rule)}</p></div>')
    return "".join(parts)


def _unit_verdict(claims: list[dict]) -> str:
    verdicts = {c["verdict"] for c in claims}
    for v in ("contradicted", "not_found"):
        if v in verdicts:
            return v
    return "supported" if verdicts == {"supported"} else ("unscored" if not verdicts else next(iter(verdicts)))


def _answer(view: SampleView, claims: list[dict]) -> str:
    sample = view.result.sample
    if not sample.answer:
        return "<p class='muted'>No answer.</p>"
    parsed = parse_citations(sample.answer, sample.contexts)
    cited = _details(view, _sources("citations"), "citations")
    records = [r for r in (cited[1] if cited else []) if isinstance(r, dict)]
    parts = ['<p class="answer">']
    for ui, unit in enumerate(parsed.units):
        mine = [c for c in claims if c["unit"] == ui]
        verdict = _unit_verdict(mine) if mine else "none"
        title = "; ".join(f"{_VERDICT_TEXT.get(c['verdict'], c['verdict'])}: {c['text']}" for c in mine) or "no claim"
        parts.append(f'<span class="unit v-{escape(verdict)}" title="{escape(title)}">{escape(unit.text)}</span>')
        chips = (
            [r for r in records if r.get("unit") == ui]
            if records
            else [
                {"marker": c.marker, "verdict": "unscored" if c.valid else "invalid", "chunk": c.chunk}
                for c in unit.citations
            ]
        )
        for r in chips:
            quote = r.get("quote") or ""
            tip = _VERDICT_TEXT.get(str(r.get("verdict")), str(r.get("verdict"))) + (f": “{quote}”" if quote else "")
            label = f"[{r['target']}]" if r.get("target") is not None else str(r.get("marker") or "[?]")
            parts.append(
                f'<span class="cite v-{escape(str(r.get("verdict")))}" title="{escape(tip)}">{escape(label)}</span>'
            )
        parts.append(" ")
    parts.append("</p>")
    if parsed.reference_list:
        parts.append(
            '<p class="muted">Reference list (not scored): ' + escape(" · ".join(parsed.reference_list)) + "</p>"
        )
    return "".join(parts)


def _claims(view: SampleView, metric: str | None, claims: list[dict]) -> str:
    if not claims:
        return ""
    parts = [
        f'<h4>Claims <span class="muted">({len(claims)}, verdicts from {escape(metric or "")})</span></h4>'
        '<ol class="claims">'
    ]
    for c in claims:
        parts.append(f'<li class="claim v-{escape(c["verdict"])}">{_chip(c["verdict"])} {escape(c["text"])}')
        for e in c["evidence"]:
            found = e.get("quote_found")
            mark = (
                ""
                if found is None
                else (
                    ' <span class="ok" title="the quote appears verbatim in the chunk">✓ verbatim</span>'
                    if found
                    else ' <span class="warn-text" title="the quote is not in the chunk">⚠ not in the chunk</span>'
                )
            )
            quote = escape(str(e.get("quote") or ""))
            parts.append(
                f'<div class="evidence">{_chunk_name(view, e.get("chunk"))}'
                f'{": <q>" + quote + "</q>" if quote else ""}{mark}</div>'
            )
        if c["reason"]:
            parts.append(f'<div class="muted small">{escape(c["reason"])}</div>')
        parts.append("</li>")
    parts.append("</ol>")
    return "".join(parts)


def _citations(view: SampleView) -> str:
    found = _details(view, _sources("citations"), "citations")
    if not found or not found[1]:
        return ""
    rows = []
    for r in found[1]:
        if not isinstance(r, dict):
            continue
        v = str(r.get("verdict"))
        quote = escape(str(r.get("quote") or ""))
        rows.append(
            f'<tr class="v-{escape(v)}"><td>{escape(str(r.get("marker") or ""))}</td>'
            f'<td>{escape(str(r.get("statement") or ""))}</td><td>{_chunk_name(view, r.get("chunk"))}</td>'
            f'<td>{_chip(v)}</td><td>{"<q>" + quote + "</q>" if quote else ""}</td></tr>'
        )
    return (
        "<h4>Citations</h4><table class='mini'><tr><th>marker</th><th>statement</th><th>cites</th><th>verdict</th>"
        "<th>quote from the cited chunk</th></tr>" + "".join(rows) + "</table>"
    )


def _marked(text: str, statements: list[str]) -> str:
    """``text`` escaped, with each statement found in it wrapped in ``<mark>``."""
    spans = []
    for st in statements:
        if isinstance(st, str) and st:
            at = text.find(st)
            if at >= 0:
                spans.append((at, at + len(st)))
    out, pos = [], 0
    for a, b in sorted(spans):
        if a < pos:
            continue
        out += [escape(text[pos:a]), f"<mark>{escape(text[a:b])}</mark>"]
        pos = b
    out.append(escape(text[pos:]))
    return "".join(out)


def _chunks(view: SampleView, claims: list[dict]) -> str:
    contexts = view.result.sample.contexts
    if not contexts:
        return "<h4>Chunks</h4><p class='muted'>No chunk was retrieved.</p>"
    rel = _details(view, _sources("chunk_relevance"), "chunks")
    useful = _details(view, _sources("chunk_usefulness"), "chunks")
    rel_by = {c.get("chunk"): c for c in (rel[1] if rel else []) if isinstance(c, dict)}
    use_by = {c.get("chunk"): c for c in (useful[1] if useful else []) if isinstance(c, dict)}
    parts = [
        '<h4>Chunks <span class="muted">(in retrieval order; marked: statements relevant to the question)</span>'
        '</h4><ol class="chunks">'
    ]
    for i, ctx in enumerate(contexts):
        facts = [f"rank {i + 1}"]
        if ctx.id:
            facts.append(f"id {escape(ctx.id)}")
        if ctx.score is not None:
            facts.append(f"retriever score {ctx.score:.3g}")
        r = rel_by.get(i)
        cls = ""
        if r is not None and isinstance(r.get("score"), (int, float)):
            facts.append(
                f'relevance <b>{r["score"]:.2f}</b> ({int(r.get("relevant") or 0)} of '
                f'{int(r.get("statements") or 0)} statements)'
            )
            cls = " rel" if r.get("relevant") else " irrel"
        u = use_by.get(i)
        if u is not None and "useful" in u:
            facts.append("useful" if u["useful"] else "not useful")
        backing = sorted({n + 1 for n, c in enumerate(claims) for e in c["evidence"] if e.get("chunk") == i})
        if backing:
            facts.append("evidence for claim" + ("s " if len(backing) > 1 else " ") + ", ".join(map(str, backing)))
        marked = _marked(ctx.text, list(r.get("relevant_statements") or []) if r else [])
        parts.append(
            f'<li id="{_anchor(view, i)}" class="chunk{cls}"><div class="facts">{" · ".join(facts)}</div>'
            f'<div class="text">{marked}</div></li>'
        )
    parts.append("</ol>")
    return "".join(parts)


def _recall(view: SampleView) -> str:
    found = _details(view, _sources("statements"), "statements")
    if not found or not found[1]:
        return ""
    items = []
    for st in found[1]:
        if not isinstance(st, dict):
            continue
        ok = bool(st.get("attributed"))
        where = ", ".join(_chunk_name(view, c) for c in st.get("chunks") or []) if ok else "in no chunk"
        items.append(
            f'<li class="{"v-supported" if ok else "v-not_found"}">{_chip("supported" if ok else "not_found")} '
            f'{escape(str(st.get("statement") or ""))} <span class="muted">({where})</span></li>'
        )
    return (
        "<h4>Reference statements <span class='muted'>(context recall: found in the chunks?)</span></h4>"
        f"<ul class='claims'>{''.join(items)}</ul>"
    )


def _scores(view: SampleView) -> str:
    rows = []
    for name, s in view.scores.items():
        label = s.label or ("error" if s.error else "n/a")
        why = s.error or s.explanation
        rows.append(
            f'<tr><td>{escape(name)}</td><td class="num">{fmt(s.value)}</td>'
            f'<td><span class="lab {escape(label.replace("/", ""))}">{escape(label)}</span></td>'
            f'<td>{escape(s.judge or "")}</td><td>{escape(why)}</td></tr>'
        )
    return (
        "<h4>Scores</h4><table class='mini'><tr><th>metric</th><th>value</th><th>label</th><th>judge</th>"
        "<th>explanation</th></tr>" + "".join(rows) + "</table>"
    )


def _facts(view: SampleView) -> str:
    sample = view.result.sample
    facts = [f"sample <code>{escape(view.id)}</code>"]
    if view.run_id is not None:
        facts.append(f"run {escape(view.run_id)}")
    if view.created_at is not None:
        facts.append(escape(view.created_at.isoformat(timespec="seconds")))
    latency = sample.metadata.get("latency")
    if isinstance(latency, dict) and latency:
        facts.append(
            "latency "
            + ", ".join(
                f"{escape(str(k))} {v:.2f} s"
                for k, v in latency.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            )
        )
    elif view.latency_s is not None:
        facts.append(f"latency {view.latency_s:.2f} s")
    if view.tags:
        facts.append("tags " + ", ".join(f'<span class="tag">{escape(t)}</span>' for t in view.tags))
    return f'<p class="muted">{" · ".join(facts)}</p>'


def _safe(fn: Callable[..., str], *args: Any) -> str:
    """A section's HTML, or a note when its details have a shape this page does not know."""
    failed: list[BaseException] = []
    with never_raise(f"dashboard: {fn.__name__.strip('_')} section", on_error=failed.append):
        return fn(*args)
    return f"<p class='muted'>(this section could not be shown: {escape(type(failed[0]).__name__)})</p>"


def drilldown(view: SampleView) -> str:
    """The drill-down HTML of one sample."""
    sample = view.result.sample
    metric, claims = claims_of(view)
    parts = [
        '<div class="drill">',
        _safe(_verdict, view),
        _safe(_facts, view),
        f'<h4>Question</h4><p class="question">{escape(sample.question)}</p>',
    ]
    if sample.reference:
        parts.append(f'<h4>Reference</h4><p class="reference">{escape(sample.reference)}</p>')
    parts += [
        '<h4>Answer <span class="muted">(coloured by claim verdict: supported, not found, contradicted; '
        'citations by citation verdict)</span></h4>',
        _safe(_answer, view, claims),
        _safe(_claims, view, metric, claims),
        _safe(_citations, view),
        _safe(_chunks, view, claims),
        _safe(_recall, view),
        _safe(_scores, view),
        "</div>",
    ]
    return "".join(parts)
