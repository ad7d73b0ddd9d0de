"""Internal: The trust card: how far a run's scores can be trusted, measured against human labels.

:func:`trust_card` (CLI: ``ragmeter trust RESULTS --labels LABELS``) matches the labels to the
run (:func:`ragmeter.labels.match_labels`: a label counts only for the answer it was given on)
and gives, per labeled metric:

* ``n`` labeled items (and how many clusters);
* the judge against the humans, each statistic with a 95% percentile bootstrap interval that
  resamples whole clusters when the labels name them (:func:`ragmeter.labels.bootstrap_ci`):
  AUROC of the judge's value for the humans' pass (binary labels), balanced accuracy and Cohen's
  kappa of the judge's pass / fail at the metric's threshold against the humans', Spearman's
  rank correlation with the human rating (graded labels: 1-5 or 0-1), the bias (judge mean
  minus human mean in human units, :mod:`ragmeter.labels.scales`) and the calibration (expected
  calibration error over 10 reliability bins of the judge's value against the humans' pass);
* the confusion table at the threshold;
* the mean in human units over the whole run from the judge and the labels together, corrected
  for the judge's bias (PPI++, :mod:`ragmeter.trust.ppi`), next to the judge's own mean and the
  labels' own;
* the worst disagreements: the items where judge and humans differ most, with both verdicts and
  the judge's evidence (no text of a sample captured without content);
* the items whose repeated judge calls disagreed (``repeats``, see :mod:`ragmeter.trust.repeats`);
* the **fitness verdict**: for each use (:data:`USES`) whether the judge is fit for it, by a
  rule on the lower interval bounds and ``n``, printed beside it.

A statistic with too few labels, or without both classes, is n/a with the reason, never a
number. The card is a JSON-ready dict underneath (:meth:`TrustCard.to_dict`): the store keeps it
with its run and the dashboard shows it from there.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.labels.agreement import (
    STATISTICS,
    auroc,
    balanced_accuracy,
    bootstrap_ci,
    cohen_kappa,
    confusion,
    reliability,
    spearman,
)
from ragmeter.labels.io import load_labels
from ragmeter.labels.matching import COMPOSITE, OVERALL_THRESHOLD, MatchedLabels, match_labels
from ragmeter.labels.scales import human_pass, in_human_units
from ragmeter.trust.estimates import estimate
from ragmeter.trust.ppi import MIN_LABELS

__all__ = ["TrustCard", "trust_card", "USES"]

#: The uses a judge may be fit for, strictest first: (use, the rule, why that rule). A judge is
#: fit for the first use whose rule holds; "exploration only" always does.
USES = (
    (
        "release gate",
        "kappa's 95% lower bound >= 0.6 on >= 100 labeled items",
        "a gate acts on pass / fail calls: they must agree with people's well beyond chance (0.6 is "
        "'substantial' on Landis and Koch's scale), with 95% confidence, on enough items for the bound to mean something",
    ),
    (
        "trend monitoring",
        "rank agreement's 95% lower bound (AUROC >= 0.7 on binary labels, Spearman >= 0.4 on "
        "graded ones) on >= 50 labeled items",
        "a trend follows a mean over many items: each call need not be right, but the judge's scores must order "
        "items the way people do",
    ),
    ("exploration only", "always", "below both: read the judge's numbers as hints and look at the items yourself"),
)
_GATE_KAPPA, _GATE_N = 0.6, 100
_TREND_AUROC, _TREND_SPEARMAN, _TREND_N = 0.7, 0.4, 50
_CONFIDENCE = 0.95


def _finite(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _stat(value: float | None, ci: tuple[float, float] | None, reason: str | None = None) -> dict[str, Any]:
    value = _finite(value)
    if value is None:
        return {"value": None, "ci": None, "reason": reason or "undefined on these labels"}
    low, high = ci if ci is not None else (float("nan"), float("nan"))
    ok = not (math.isnan(low) or math.isnan(high))
    return {"value": value, "ci": [low, high] if ok else None, "reason": None}


def _threshold(result: Any, metric: str) -> float:
    return OVERALL_THRESHOLD if metric == COMPOSITE else result.thresholds.get(metric, (0.5, 0.5))[0]


def _judge_scores(result: Any, metric: str) -> dict[str, Any]:
    """Sample id -> (value, the Score or None, the SampleResult) for the metric's scores with a value."""
    from ragmeter.verdicts import composite_score

    out = {}
    for r in result:
        sid = str(r.sample.id)
        if sid in out:
            continue
        if metric == COMPOSITE:
            value = composite_score(r.scores)
            if value is not None:
                out[sid] = (value, None, r)
        elif metric in r.scores and r.scores[metric].value is not None:
            out[sid] = (r.scores[metric].value, r.scores[metric], r)
    return out


def _evidence(score: Any, r: Any) -> dict[str, Any]:
    """The judge's side of a disagreement: label, explanation and evidence lines (none of them
    for a sample captured without content)."""
    from ragmeter.capture import content_captured
    from ragmeter.testing import _evidence as evidence_lines

    if score is None:
        return {"label": None, "explanation": "composite of the sample's scores", "evidence": []}
    if not content_captured(r.sample):
        return {"label": score.label, "explanation": None, "evidence": []}
    return {"label": score.label, "explanation": score.explanation or None, "evidence": evidence_lines(score.details)}


def _metric_card(
    result: Any, metric: str, matched: MatchedLabels, *, n_boot: int, seed: int, worst: int, min_labels: int
) -> dict[str, Any]:
    from ragmeter.capture import content_captured

    scale, threshold = matched.scales[metric], _threshold(result, metric)
    items = matched.items[metric]
    judged = _judge_scores(result, metric)
    ids = [s for s in items if s in judged]
    no_value = sorted(s for s in items if s not in judged)
    v = np.array([judged[s][0] for s in ids], dtype=float)
    h = np.array([items[s].human for s in ids], dtype=float)
    hpass = np.array([human_pass(x, scale, threshold) for x in h], dtype=bool)
    jpass = v >= threshold
    jh = np.array([in_human_units(x, scale, threshold) for x in v], dtype=float)
    given = [items[s].cluster for s in ids]
    clusters = [c if c is not None else f"\x00{s}" for c, s in zip(given, ids)] if any(given) else None
    n = len(ids)

    def interval(fn: Callable[[np.ndarray], float]) -> tuple[float, float]:
        return bootstrap_ci(fn, n, n_boot=n_boot, seed=seed, clusters=clusters, confidence=_CONFIDENCE)

    def kappa(idx: np.ndarray) -> float:
        return cohen_kappa(list(jpass[idx]), list(hpass[idx]), labels=[False, True])

    def ba(idx: np.ndarray) -> float:
        return balanced_accuracy(confusion(list(jpass[idx]), list(hpass[idx])))

    fns: dict[str, Callable[[np.ndarray], float]] = {
        "auroc": lambda idx: auroc(v[idx], hpass[idx]),
        "balanced_accuracy": lambda idx: ba(idx) if 0 < hpass[idx].sum() < len(idx) else float("nan"),
        "kappa": kappa,
        "spearman": lambda idx: spearman(v[idx], h[idx]),
        "bias": lambda idx: float(jh[idx].mean() - h[idx].mean()),
        "ece": lambda idx: reliability(v[idx], hpass[idx])["ece"],
    }
    stats: dict[str, dict[str, Any]] = {}
    both = 0 < int(hpass.sum()) < n
    for key, (_name, applies) in STATISTICS.items():
        if applies == "binary" and scale != "binary":
            stats[key] = _stat(None, None, f"for binary labels ({scale} labels: see Spearman)")
        elif applies == "graded" and scale == "binary":
            stats[key] = _stat(None, None, "for graded labels (binary labels: see AUROC)")
        elif n < min_labels:
            stats[key] = _stat(None, None, f"too few labels: {n} < {min_labels}")
        elif key in ("auroc", "balanced_accuracy", "kappa") and not both:
            stats[key] = _stat(
                None,
                None,
                f"people {'pass' if hpass.all() else 'fail'} all {n} items: "
                "it needs items they pass and items they fail",
            )
        else:
            full = np.arange(n)
            stats[key] = _stat(
                fns[key](full),
                interval(fns[key]),
                "the judge gives every item the same verdict" if key == "kappa" else None,
            )
    table = confusion(list(jpass), list(hpass))
    rel = reliability(v, hpass) if n else {"bins": [], "ece": None}
    ppi = estimate(result, matched, metric, min_labels)  # the mean over the whole run, in human units
    # the worst disagreements: opposite verdicts first, then the widest gap between the judge's
    # value and the human rating on 0-1
    h01 = (h - 1) / 4 if scale == "1-5" else h
    order = sorted(range(n), key=lambda i: (jpass[i] == hpass[i], -abs(v[i] - h01[i]), ids[i]))[:worst]
    rows = []
    for i in order:
        value, score, r = judged[ids[i]]
        shown = content_captured(r.sample)
        rows.append(
            {
                "sample_id": ids[i],
                "question": r.sample.question if shown else None,
                "answer": r.sample.answer if shown else None,
                "judge": {"value": float(value), "pass": bool(jpass[i]), **_evidence(score, r)},
                "human": {"value": float(h[i]), "pass": bool(hpass[i]), "annotators": len(items[ids[i]].values)},
                "gap": float(abs(v[i] - h01[i])),
            }
        )
    unstable = [
        {"sample_id": s, **judged[s][1].details["repeats"]}
        for s in ids
        if judged[s][1] is not None and (judged[s][1].details.get("repeats") or {}).get("unstable")
    ]
    card = {
        "metric": metric,
        "scale": scale,
        "threshold": threshold,
        "n": n,
        "clusters": len(set(clusters)) if clusters else None,
        "without_value": no_value,
        "statistics": stats,
        "confusion": table,
        "reliability": rel["bins"],
        "pass_rates": {"judge": float(jpass.mean()) if n else None, "humans": float(hpass.mean()) if n else None},
        "ppi": ppi.to_dict(),
        "worst": rows,
        "unstable": unstable,
    }
    card["fitness"], card["verdict"] = fitness(card)
    return card


def fitness(card: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Per use of :data:`USES`: ``{"use", "rule", "why", "fit", "because"}``, and the use the
    judge is fit for (the first whose rule holds), decided on the lower interval bounds and ``n``."""
    n, stats = card["n"], card["statistics"]

    def bound(key: str) -> tuple[float | None, str]:
        s = stats[key]
        if s["value"] is None:
            return None, f"{STATISTICS[key][0]} n/a ({s['reason']})"
        if s["ci"] is None:
            return None, f"{STATISTICS[key][0]} has no interval"
        return s["ci"][0], ""

    checks = []
    low, why = bound("kappa")
    if n < _GATE_N:
        gate = (False, f"{n} labeled items < {_GATE_N}")
    elif low is None:
        gate = (False, why)
    else:
        gate = (
            low >= _GATE_KAPPA,
            f"kappa's lower bound {low:.3f} {'>=' if low >= _GATE_KAPPA else '<'} {_GATE_KAPPA}",
        )
    checks.append(gate)
    key, floor = ("auroc", _TREND_AUROC) if card["scale"] == "binary" else ("spearman", _TREND_SPEARMAN)
    low, why = bound(key)
    name = STATISTICS[key][0]
    if n < _TREND_N:
        trend = (False, f"{n} labeled items < {_TREND_N}")
    elif low is None:
        trend = (False, why)
    else:
        trend = (low >= floor, f"{name}'s lower bound {low:.3f} {'>=' if low >= floor else '<'} {floor}")
    checks.append(trend)
    checks.append((True, "always"))
    rules = [USES[0][1], f"{name}'s 95% lower bound >= {floor} on >= {_TREND_N} labeled items", USES[2][1]]
    out = [
        {"use": use, "rule": rule, "why": reason, "fit": fit, "because": because}
        for (use, _, reason), rule, (fit, because) in zip(USES, rules, checks)
    ]
    return out, next(str(o["use"]) for o in out if o["fit"])


def _load_result(result: Any, db: Any = None) -> tuple[Any, str, int | None]:
    """(result, its name, its store run id or None) from a result, a results file or a store ref."""
    from ragmeter.result import EvaluationResult
    from ragmeter.store.store import load_run

    if isinstance(result, EvaluationResult):
        return result, "run", None
    loaded, name = load_run(result, db)
    run_id = int(name.split()[1]) if name.startswith("run ") and name.split()[1].isdigit() else None
    return loaded, name, run_id


def trust_card(
    result: Any,
    labels: Any,
    *,
    metrics: Iterable[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    worst: int = 5,
    min_labels: int = MIN_LABELS,
    db: Any = None,
) -> TrustCard:
    """The trust card of ``result`` (an :class:`~ragmeter.EvaluationResult`, a results file, or a
    run id / tag in the store at ``db``) against ``labels`` (a labels file, or
    :class:`~ragmeter.labels.Label` objects); see the module doc. ``metrics``: only these;
    ``n_boot`` / ``seed``: the bootstrap; ``worst``: disagreements listed per metric;
    ``min_labels``: the fewest labeled items a statistic is computed from."""
    run, name, run_id = _load_result(result, db)
    read, errors = load_labels(labels)
    matched = match_labels(run, read, metrics=metrics)
    from ragmeter.report import judge_lines

    data: dict[str, Any] = {
        "ragmeter": "trust card",
        "run": name,
        "run_id": run_id,
        "judge": run.judge,
        "judges": judge_lines(run),
        "samples": len(run),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "labels": {
            "read": len(read),
            "counted": sum(len(it.values) for per in matched.items.values() for it in per.values()),
            "blank": matched.blank,
            "unhashed": matched.unhashed,
            "left_out": matched.skipped,
            "errors": errors,
        },
        "bootstrap": {"draws": n_boot, "seed": seed, "confidence": _CONFIDENCE},
        "metrics": {
            m: _metric_card(run, m, matched, n_boot=n_boot, seed=seed, worst=worst, min_labels=min_labels)
            for m in matched.items
        },
    }
    return TrustCard(data)


# --------------------------------------------------------------------------- rendering


def _num(x: Any, digits: int = 3, signed: bool = False) -> str:
    x = _finite(x)
    if x is None:
        return "n/a"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _ci(ci: Sequence[float] | None, signed: bool = False) -> str:
    return f"[{_num(ci[0], signed=signed)}, {_num(ci[1], signed=signed)}]" if ci else ""


def _stat_cells(key: str, s: Mapping[str, Any]) -> tuple[str, str, str]:
    signed = key == "bias"
    if s["value"] is None:
        return STATISTICS[key][0], "n/a", s["reason"]
    return STATISTICS[key][0], _num(s["value"], signed=signed), _ci(s["ci"], signed)


def _scale_text(m: Mapping[str, Any]) -> str:
    clusters = f" in {m['clusters']} clusters" if m.get("clusters") else ""
    return f"{m['metric']} ({m['scale']} labels, threshold {m['threshold']:g}): {m['n']} labeled items{clusters}" + (
        f", {len(m['without_value'])} without a judge value" if m["without_value"] else ""
    )


def _ppi_lines(p: Mapping[str, Any]) -> list[str]:
    """The mean in human units: PPI++ (or why not), then the judge's and the labels' own."""
    labels = (
        f"labels alone {_num(p['labels'])} {_ci(p['labels_ci'])} ({p['n']} items)"
        if p.get("labels") is not None
        else "labels alone n/a"
    )
    judge = f"judge alone {_num(p['judge'])}" if p.get("judge") is not None else "judge alone n/a"
    first = (
        f"PPI++ n/a: {p['reason']}"
        if p["mean"] is None
        else f"PPI++ {_num(p['mean'])} {_ci(p['ci'])} ({p['n']} labeled + {p['N']} judged items, "
        f"lambda {_num(p['lam'], 2)})"
    )
    return [first, f"{judge}; {labels}"]


def _confusion_text(c: Mapping[str, int]) -> str:
    return (
        f"both pass {c['tp']}, judge passes what people fail {c['fp']}, judge fails what people pass "
        f"{c['fn']}, both fail {c['tn']}"
    )


def _disagreement_lines(row: Mapping[str, Any]) -> list[str]:
    j, h = row["judge"], row["human"]
    who = f"{h['annotators']} annotators" if h["annotators"] > 1 else "1 annotator"
    lines = [
        f"{row['sample_id']}: judge {_num(j['value'], 2)} ({'pass' if j['pass'] else 'fail'}), people "
        f"{_num(h['value'], 2)} ({'pass' if h['pass'] else 'fail'}, {who})"
    ]
    if row.get("question"):
        lines.append(f"  question: {_short(row['question'])}")
    if row.get("answer"):
        lines.append(f"  answer: {_short(row['answer'])}")
    if j.get("explanation"):
        lines.append(f"  judge: {_short(j['explanation'])}")
    lines += [f"  {_short(e)}" for e in j.get("evidence") or []][:4]
    return lines


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class TrustCard:
    """A trust card (see the module doc): ``data`` is its JSON-ready dict (:meth:`to_dict`);
    ``metrics`` the per-metric cards; :meth:`to_text`, :meth:`to_markdown`, :meth:`to_html`
    and :meth:`save` render it."""

    def __init__(self, data: Mapping[str, Any]):
        self.data = dict(data)

    @property
    def metrics(self) -> dict[str, dict[str, Any]]:
        """Metric -> its card (statistics, confusion, PPI++ estimate, worst items, fitness)."""
        return self.data.get("metrics") or {}

    def verdict(self, metric: str) -> str:
        """The use the judge is fit for on ``metric`` (see :data:`USES`)."""
        return self.metrics[metric]["verdict"]

    def to_dict(self) -> dict[str, Any]:
        """The card as a JSON-ready dict."""
        return self.data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrustCard:
        """A card from :meth:`to_dict` (as the store keeps it)."""
        return cls(data)

    def __repr__(self) -> str:
        verdicts = {m: c["verdict"] for m, c in self.metrics.items()}
        return f"TrustCard({self.data.get('run')!r}, {verdicts})"

    def _header(self) -> list[str]:
        d, lab = self.data, self.data["labels"]
        lines = [
            f"trust card: {d['run']}, {d['samples']} samples, judge {d['judge']}",
            f"labels: {lab['counted']} counted, {len(lab['left_out'])} left out, {lab['blank']} blank, "
            f"{len(lab['errors'])} unreadable"
            + (f"; {lab['unhashed']} items matched by sample id alone (no answer hash)" if lab["unhashed"] else ""),
        ]
        return lines

    def to_text(self, *, max_notes: int = 10) -> str:
        """The card as plain text (what ``ragmeter trust`` prints)."""
        from ragmeter.report import text_table

        lines = self._header()
        lab = self.data["labels"]
        for note in (lab["errors"] + lab["left_out"])[:max_notes]:
            lines.append(f"  left out: {note}")
        if len(lab["errors"]) + len(lab["left_out"]) > max_notes:
            lines.append(
                f"  ... {len(lab['errors']) + len(lab['left_out']) - max_notes} more (--out card.json lists all)"
            )
        if not self.metrics:
            lines.append("no metric of the run has labels that count for it")
        for m in self.metrics.values():
            lines += ["", _scale_text(m)]
            rows = [list(_stat_cells(k, s)) for k, s in m["statistics"].items()]
            lines += ["  " + line for line in text_table(["statistic", "value", "95% CI"], rows).split("\n")]
            pr = m["pass_rates"]
            lines.append(f"  pass rate: judge {_num(pr['judge'])}, people {_num(pr['humans'])}")
            lines.append(f"  at threshold {m['threshold']:g}: {_confusion_text(m['confusion'])}")
            first, second = _ppi_lines(m["ppi"])
            lines += [f"  mean in human units: {first}", f"                       {second}"]
            lines.append("  fitness (on the 95% lower bounds):")
            width = max(len(f["use"]) for f in m["fitness"])
            for f in m["fitness"]:
                status = "fit" if f["fit"] else "not fit"
                if f["because"] == "always":
                    lines.append(f"    {f['use']:<{width}}  {status:<7}  always")
                else:
                    lines += [
                        f"    {f['use']:<{width}}  {status:<7}  {f['because']}",
                        f"    {'':<{width}}  {'':<7}  rule: {f['rule']}",
                    ]
            lines.append(f"  -> fit for {m['verdict']}")
            if m["worst"]:
                lines.append("  worst disagreements:")
                for row in m["worst"]:
                    lines += ["    " + x for x in _disagreement_lines(row)]
            if m["unstable"]:
                lines.append(f"  unstable under repeats: {', '.join(u['sample_id'] for u in m['unstable'])}")
        b = self.data["bootstrap"]
        lines += [
            "",
            f"intervals: {b['confidence']:.0%} percentile bootstrap, {b['draws']} draws (seed {b['seed']}), "
            "resampling clusters when the labels name them",
        ]
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """The card as Markdown."""
        from ragmeter.report import _md_cell

        out = ["# ragmeter trust card", "", *[f"- {_md_cell(x)}" for x in self._header()]]
        lab = self.data["labels"]
        if lab["errors"] or lab["left_out"]:
            out += ["", "Labels left out:", ""] + [f"- {_md_cell(x)}" for x in lab["errors"] + lab["left_out"]]
        for m in self.metrics.values():
            out += [
                "",
                f"## {_md_cell(m['metric'])}",
                "",
                _md_cell(_scale_text(m)),
                "",
                "| statistic | value | 95% CI |",
                "|---|---|---|",
            ]
            out += [
                "| " + " | ".join(_md_cell(c) for c in _stat_cells(k, s)) + " |" for k, s in m["statistics"].items()
            ]
            out += [
                "",
                f"- at threshold {m['threshold']:g}: {_confusion_text(m['confusion'])}",
                f"- mean in human units: {_md_cell('; '.join(_ppi_lines(m['ppi'])))}",
                "",
                "| use | fit | rule | why |",
                "|---|---|---|---|",
            ]
            out += [
                f"| {f['use']} | {'**fit**' if f['fit'] else 'not fit'} | {_md_cell(f['rule'])} | "
                f"{_md_cell(f['because'])} |"
                for f in m["fitness"]
            ]
            out += ["", f"**Fit for {m['verdict']}.**"]
            if m["worst"]:
                out += ["", "Worst disagreements:", ""]
                for row in m["worst"]:
                    first, *rest = _disagreement_lines(row)
                    out.append(f"- {_md_cell(first)}" + "".join(f"<br>{_md_cell(x.strip())}" for x in rest))
        return "\n".join(out) + "\n"

    def to_html(self) -> str:
        """The card as one self-contained HTML page (the dashboard's style and panel)."""
        from ragmeter.dashboard.trust import card_page

        return card_page(self.data)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the card as ``.html``, ``.md``, ``.json`` or ``.txt`` (from the suffix), atomically."""
        from ragmeter.fileio import json_text, write_text_atomic

        path = Path(path)
        writers = {
            ".html": self.to_html,
            ".htm": self.to_html,
            ".md": self.to_markdown,
            ".markdown": self.to_markdown,
            ".json": lambda: json_text(self.data, indent=1),
            ".txt": self.to_text,
        }
        suffix = path.suffix.lower()
        if suffix not in writers:
            raise ValueError(f"unknown trust card type {suffix or '(none)'!r} (use .html, .md, .json or .txt)")
        write_text_atomic(path, writers[suffix]())
        return path
