"""Internal: The dashboard's "Trust" panel: a run's trust card (:mod:`ragmeter.trust.card`) per metric
(statistics with their intervals, the confusion at the threshold, the calibration, the mean in
human units, the fitness verdict with its rules, the worst disagreements) and the judge's drift
on the anchor set (:mod:`ragmeter.trust.anchors`). Plain HTML and inline SVG: readable without
JavaScript; rendered from the card's dict, as the store keeps it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ragmeter.dashboard.shell import page_html
from ragmeter.labels.agreement import STATISTICS

__all__ = ["trust_section", "metric_panel", "card_page", "drift_panel"]


def _num(x: Any, digits: int = 3, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _ci(ci: Sequence[float] | None, signed: bool = False) -> str:
    return f'<span class="muted">[{_num(ci[0], signed=signed)}, {_num(ci[1], signed=signed)}]</span>' if ci else ""


def _reliability_svg(bins: Sequence[Mapping[str, Any]]) -> str:
    """Pass rate against the judge's value per bin (the diagonal is perfect calibration)."""
    w, h, pad = 180, 180, 24
    size = w - 2 * pad

    def x(v: float) -> float:
        return pad + v * size

    def y(v: float) -> float:
        return h - pad - v * size

    parts = [
        f'<svg class="reliability" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
        'aria-label="reliability diagram: share of items people pass against the judge\'s value">',
        f'<rect x="{pad}" y="{pad}" width="{size}" height="{size}" class="frame" fill="none" stroke="#d0d7de"/>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" stroke="#8c959f" stroke-dasharray="4 3"/>',
    ]
    for b in bins:
        bx, bw = x(b["low"]), size * (b["high"] - b["low"])
        top = y(b["pass_rate"])
        parts.append(
            f'<rect class="bin" x="{bx + 1:.1f}" y="{top:.1f}" width="{bw - 2:.1f}" height="{y(0) - top:.1f}" '
            f'fill="#0969da" fill-opacity="0.55"><title>judge {b["low"]:.1f}-{b["high"]:.1f}: {b["n"]} items, '
            f'people pass {b["pass_rate"]:.0%}</title></rect>'
        )
    parts += [
        f'<text x="{pad}" y="{h - 6}" class="tick" font-size="10">judge 0</text>',
        f'<text x="{w - pad}" y="{h - 6}" class="tick" font-size="10" text-anchor="end">1</text>',
        f'<text x="4" y="{pad - 8}" class="tick" font-size="10">people pass</text></svg>',
    ]
    return "".join(parts)


def metric_panel(m: Mapping[str, Any]) -> str:
    """One metric's card as HTML (a ``div.trust-metric`` with ``data-metric`` and ``data-verdict``)."""
    clusters = f" in {m['clusters']} clusters" if m.get("clusters") else ""
    rows = []
    for key, s in m["statistics"].items():
        signed = key == "bias"
        value = _num(s["value"], signed=signed) if s["value"] is not None else "n/a"
        why = "" if s["value"] is not None else f'<span class="muted">{escape(s["reason"])}</span>'
        rows.append(
            f'<tr data-stat="{key}"><th scope="row">{escape(STATISTICS[key][0])}</th><td class="num">{value}</td>'
            f'<td>{_ci(s["ci"], signed)}{why}</td></tr>'
        )
    c = m["confusion"]
    confusion = (
        '<table class="confusion"><tr><th></th><th>people pass</th><th>people fail</th></tr>'
        f'<tr><th>judge passes</th><td data-cell="tp">{c["tp"]}</td><td data-cell="fp">{c["fp"]}</td></tr>'
        f'<tr><th>judge fails</th><td data-cell="fn">{c["fn"]}</td><td data-cell="tn">{c["tn"]}</td></tr></table>'
    )
    p = m["ppi"]
    if p["mean"] is not None:
        ppi = (
            f'<b data-ppi="mean">{_num(p["mean"])}</b> {_ci(p["ci"])} PPI++ from {p["n"]} labeled + {p["N"]} judged '
            f'items (lambda {_num(p["lam"], 2)})'
        )
    else:
        ppi = f'PPI++ n/a: {escape(p["reason"] or "")}'
    ppi += f'; judge alone {_num(p["judge"])}' if p.get("judge") is not None else ""
    ppi += f'; labels alone {_num(p["labels"])} {_ci(p["labels_ci"])}' if p.get("labels") is not None else ""
    fit = "".join(
        f'<tr data-use="{escape(f["use"])}" data-fit="{str(f["fit"]).lower()}"><th scope="row">{escape(f["use"])}</th>'
        f'<td class="{"pass" if f["fit"] else "fail"}">{"fit" if f["fit"] else "not fit"}</td>'
        f'<td>{escape(f["rule"])}</td><td class="muted">{escape(f["because"])}</td></tr>'
        for f in m["fitness"]
    )
    worst = []
    for row in m["worst"]:
        j, h = row["judge"], row["human"]
        bits = [
            f'<b class="sid">{escape(row["sample_id"])}</b>: judge {_num(j["value"], 2)} '
            f'<span class="lab {"pass" if j["pass"] else "fail"}">{"pass" if j["pass"] else "fail"}</span>, people '
            f'{_num(h["value"], 2)} <span class="lab {"pass" if h["pass"] else "fail"}">{"pass" if h["pass"] else "fail"}</span>'
        ]
        if row.get("question"):
            bits.append(f'<div class="q-full">{escape(row["question"])}</div>')
        if row.get("answer"):
            bits.append(f'<div class="q-full"><b>answer:</b> {escape(row["answer"])}</div>')
        if j.get("explanation"):
            bits.append(f'<div class="muted">{escape(j["explanation"])}</div>')
        bits += [f'<div class="evidence">{escape(e)}</div>' for e in (j.get("evidence") or [])[:4]]
        worst.append(f'<li data-sample="{escape(row["sample_id"])}">{"".join(bits)}</li>')
    unstable = ""
    if m.get("unstable"):
        unstable = (
            '<p class="unstable">unstable under repeated judge calls: '
            + ", ".join(escape(u["sample_id"]) for u in m["unstable"])
            + "</p>"
        )
    pr = m["pass_rates"]
    return (
        f'<div class="trust-metric" data-metric="{escape(m["metric"])}" data-verdict="{escape(m["verdict"])}">'
        f'<h3>{escape(m["metric"])} <span class="fit-badge">fit for {escape(m["verdict"])}</span> '
        f'<span class="muted">({escape(m["scale"])} labels, threshold {m["threshold"]:g}, {m["n"]} labeled items'
        f'{clusters})</span></h3><div class="cards"><div><table class="stats"><thead><tr><th>statistic</th>'
        f'<th>value</th><th>95% CI</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
        f'<p class="small">pass rate: judge {_num(pr["judge"])}, people {_num(pr["humans"])}</p></div>'
        f'<div><p class="small">at threshold {m["threshold"]:g}</p>{confusion}</div>'
        f'<figure class="card"><figcaption>calibration</figcaption>{_reliability_svg(m["reliability"])}</figure></div>'
        f'<p>mean in human units: {ppi}</p>'
        f'<table class="fitness"><thead><tr><th>use</th><th>verdict</th><th>rule</th><th>why</th></tr></thead>'
        f'<tbody>{fit}</tbody></table>'
        + (f'<h4>Worst disagreements</h4><ol class="worst">{"".join(worst)}</ol>' if worst else "")
        + unstable
        + "</div>"
    )


def drift_panel(drift: Mapping[str, Any] | None) -> str:
    """The judge's shift on the anchor set between its last two fingerprints (see
    :func:`ragmeter.trust.anchors.judge_drift`), or "" without one."""
    if not drift or not drift.get("metrics"):
        return ""
    rows = []
    for metric, d in drift["metrics"].items():
        rows.append(
            f'<tr data-metric="{escape(metric)}"><th scope="row">{escape(metric)}</th>'
            f'<td class="num">{_num(d.get("before"))}</td><td class="num">{_num(d.get("after"))}</td>'
            f'<td class="num" data-shift>{_num(d.get("shift"), signed=True)}</td><td>{_ci(d.get("ci"), True)}</td>'
            f'<td class="num">{d.get("n", 0)}</td><td>{escape(d.get("note") or "")}</td></tr>'
        )
    changes = "; ".join(drift.get("changes") or []) or "no field recorded"
    return (
        f'<div class="drift" data-anchor="{escape(drift["anchor_set"])}"><h3>Judge drift on the anchor set '
        f'<span class="muted">{escape(drift["anchor_set"])}: {escape(drift["before"])} &rarr; '
        f'{escape(drift["after"])} ({escape(changes)})</span></h3>'
        '<table><thead><tr><th>metric</th><th>mean before</th><th>mean after</th><th>shift</th><th>95% CI</th>'
        f'<th>anchors</th><th></th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
    )


def trust_section(card: Mapping[str, Any] | None, drift: Mapping[str, Any] | None = None) -> str:
    """The "Trust" section of a page: the run's card (one panel per metric) and the judge's
    drift on the anchors; "" when there is neither."""
    if not card and not (drift and drift.get("metrics")):
        return ""
    parts = [
        '<section id="trust"><h2>Trust <span class="muted">(the judge against human labels; 95% bootstrap '
        'intervals; the verdict\'s rule beside it)</span></h2>'
    ]
    if card:
        lab = card["labels"]
        parts.append(
            f'<p class="small">{escape(str(card["run"]))}: {lab["counted"]} labels counted, '
            f'{len(lab["left_out"])} left out, {lab["blank"]} blank, {len(lab["errors"])} unreadable</p>'
        )
        if lab["left_out"] or lab["errors"]:
            items = "".join(f"<li>{escape(x)}</li>" for x in (lab["errors"] + lab["left_out"])[:50])
            parts.append(f'<details><summary>labels left out</summary><ul class="small">{items}</ul></details>')
        if not card["metrics"]:
            parts.append('<p class="muted">No metric of the run has labels that count for it.</p>')
        parts += [metric_panel(m) for m in card["metrics"].values()]
    parts.append(drift_panel(drift))
    parts.append("</section>")
    return "".join(parts)


def card_page(card: Mapping[str, Any], title: str = "ragmeter trust card") -> str:
    """A trust card as one self-contained HTML page (the dashboard's style, no script)."""
    body = (
        f'<header><h1>{escape(title)}</h1><p class="facts">{escape(str(card.get("run")))} · judge '
        f'{escape(str(card.get("judge")))} · {card.get("samples")} samples</p></header><main>'
        f'{trust_section(card)}</main>'
    )
    return page_html(title, body)
