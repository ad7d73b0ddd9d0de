"""Internal: The agreement report: per criterion, how the annotators agree with each other and how the
judge agrees with them (what ``ragmeter labels agreement`` prints)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from ragmeter.labels import scales
from ragmeter.labels.agreement import alpha_with_ci, judge_vs_humans, kappa_with_ci
from ragmeter.labels.io import Label
from ragmeter.labels.matching import COMPOSITE, OVERALL_THRESHOLD, match_labels, metric_of
from ragmeter.result import EvaluationResult
from ragmeter.verdicts import composite_score

__all__ = [
    "agreement_report",
    "format_report",
    "judge_leniency",
    "format_leniency",
    "OVERALL_THRESHOLD",
    "HUMAN_PASS_AT",
]

_SCALE = (1, 2, 3, 4, 5)  # kappa weights count steps on the whole scale, used or not
#: A human rating (mean over annotators) at or above this is a pass (on the 1-5 scale).
HUMAN_PASS_AT = scales.HUMAN_PASS_AT


def _judge_values(result: EvaluationResult, metric: str) -> dict[str, float]:
    out = {}
    for r in result:
        value = (
            composite_score(r.scores)
            if metric == COMPOSITE
            else (r.scores[metric].value if metric in r.scores else None)
        )
        if value is not None and r.sample.id is not None:
            out[str(r.sample.id)] = value
    return out


def _threshold(result: EvaluationResult, metric: str) -> float:
    return OVERALL_THRESHOLD if metric == COMPOSITE else result.thresholds.get(metric, (0.5, 0.5))[0]


def _pass_level(scale: str, threshold: float, human_pass_at: float) -> float:
    """The human rating that passes on ``scale`` (``human_pass_at`` on 1-5)."""
    return human_pass_at if scale == "1-5" else (0.5 if scale == "binary" else threshold)


def agreement_report(
    labels: Iterable[Label],
    result: EvaluationResult | None = None,
    *,
    human_pass_at: float = HUMAN_PASS_AT,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """Per criterion: the annotators, the number of labelled items (a sample's answer: labels of
    another answer of the same sample id are another item), Krippendorff's alpha with its
    bootstrap interval (ordinal on 1-5, nominal on binary, interval on 0-1 labels), Cohen's
    kappa of each pair of annotators with its interval (quadratic-weighted by steps on the 1-5
    scale, unweighted on binary; not on 0-1 labels), and, with ``result``, judge vs humans for
    the criterion's metric (:func:`ragmeter.labels.match_labels`: only labels of the run's
    answers count; :func:`ragmeter.labels.agreement.judge_vs_humans`; the human rating of an item
    is the mean of its labels, the threshold the metric's own, or :data:`OVERALL_THRESHOLD` for
    the composite score; a human passes at ``human_pass_at`` on 1-5, 0.5 on binary, the threshold
    on 0-1)."""
    labels = list(labels)
    by_criterion: dict[str, dict[tuple[tuple[str, str | None], str], Any]] = defaultdict(dict)
    for label in labels:
        by_criterion[label.criterion][((label.sample_id, label.answer_hash), label.annotator)] = label.value
    matched = match_labels(result, labels) if result is not None else None
    report: dict[str, Any] = {}
    for criterion, cells in sorted(by_criterion.items()):
        annotators = sorted({a for _, a in cells})
        items = sorted({s for s, _ in cells}, key=lambda k: (k[0], k[1] or ""))
        ratings = [[cells.get((s, a)) for s in items] for a in annotators]
        try:
            scale = scales.infer_scale(
                [v for v in cells.values() if v is not None],
                [lb.scale for lb in labels if lb.criterion == criterion],
                criterion,
            )
        except ValueError:
            continue  # mixed scales: reported by match_labels, never averaged
        level = {"1-5": "ordinal", "binary": "nominal", "0-1": "interval"}[scale]
        entry: dict[str, Any] = {
            "annotators": annotators,
            "items": len(items),
            "scale": scale,
            "alpha": alpha_with_ci(ratings, level, n_boot=n_boot, seed=seed),
            "kappa": {},
        }
        if scale != "0-1":
            weights, cats = ("quadratic", _SCALE) if scale == "1-5" else (None, (0, 1))
            for (i, a), (j, b) in combinations(enumerate(annotators), 2):
                try:
                    entry["kappa"][f"{a} / {b}"] = kappa_with_ci(
                        ratings[i], ratings[j], weights, labels=cats, n_boot=n_boot, seed=seed
                    )
                except ValueError:
                    pass  # no item labelled by both
        metric = metric_of(criterion)
        found = matched.items.get(metric, {}) if matched is not None else {}
        if result is not None and matched is not None and found:
            judge = _judge_values(result, metric)
            ids = sorted(s for s in found if s in judge)
            if ids:
                threshold = _threshold(result, metric)
                entry["judge"] = {
                    "metric": metric,
                    **judge_vs_humans(
                        [judge[s] for s in ids],
                        [found[s].human for s in ids],
                        threshold,
                        human_pass_at=_pass_level(matched.scales[metric], threshold, human_pass_at),
                        n_boot=n_boot,
                        seed=seed,
                    ),
                }
        report[criterion] = entry
    return report


def judge_leniency(
    store: Any, criterion: str = "overall", *, human_pass_at: float = HUMAN_PASS_AT
) -> list[dict[str, Any]]:
    """Judge strictness over time: for each evaluation run in ``store`` (oldest first) that scored
    samples labelled on ``criterion`` (labels given on the run's own answers, see
    :func:`ragmeter.labels.match_labels`), the share of those samples the judge passes (its
    metric's value >= the run's threshold, see :func:`agreement_report`), the share the humans
    pass (mean label >= ``human_pass_at`` on 1-5) and ``leniency`` = judge pass rate - human pass
    rate (above 0: the judge passes more than people do; rising between judge versions: drift
    towards leniency)."""
    metric = metric_of(criterion)
    labels = store.labels(criterion=criterion)
    rows = []
    for run in sorted(store.runs(limit=None, kind="evaluate"), key=lambda r: (r.created_at, r.id)):
        result = store.run(run.id)
        matched = match_labels(result, labels)
        human = matched.items.get(metric, {})
        judge = {s: v for s, v in _judge_values(result, metric).items() if s in human}
        if not judge:
            continue
        threshold = _threshold(result, metric)
        level = _pass_level(matched.scales[metric], threshold, human_pass_at)
        judge_rate = sum(v >= threshold for v in judge.values()) / len(judge)
        human_rate = sum(human[s].human >= level for s in judge) / len(judge)
        rows.append(
            {
                "run_id": run.id,
                "created_at": run.created_at,
                "judge": run.judge,
                "app_version": run.app_version,
                "metric": metric,
                "threshold": threshold,
                "items": len(judge),
                "judge_pass_rate": judge_rate,
                "human_pass_rate": human_rate,
                "leniency": judge_rate - human_rate,
            }
        )
    return rows


def format_leniency(criterion: str, rows: list[dict[str, Any]]) -> str:
    """:func:`judge_leniency` as text, one line per run."""
    lines = [f"{criterion}: judge leniency by run (judge pass rate - human pass rate on the labelled samples)"]
    for r in rows:
        lines.append(
            f"  run {r['run_id']} {r['created_at']:%Y-%m-%d %H:%M} judge {r['judge']}: {r['items']} items, "
            f"judge passes {r['judge_pass_rate']:.0%}, humans {r['human_pass_rate']:.0%}, "
            f"leniency {r['leniency']:+.2f}"
        )
    return "\n".join(lines)


def _num(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _ci(ci: Sequence[float]) -> str:
    return f"[{_num(ci[0])}, {_num(ci[1])}]"


def format_report(report: dict[str, Any]) -> str:
    """The agreement report as text, one block per criterion."""
    lines = []
    for criterion, e in report.items():
        lines.append(
            f"{criterion}: {e['items']} items, {len(e['annotators'])} annotators ({', '.join(e['annotators'])})"
        )
        a = e["alpha"]
        lines.append(f"  Krippendorff alpha (ordinal) {_num(a['alpha'])} 95% CI {_ci(a['ci'])} over {a['items']} items")
        for pair, k in e["kappa"].items():
            lines.append(
                f"  Cohen kappa (quadratic) {pair}: {_num(k['kappa'])} 95% CI {_ci(k['ci'])} over {k['items']} items"
            )
        j = e.get("judge")
        if j:
            c = j["confusion"]
            lines.append(
                f"  judge {j['metric']} vs humans ({j['items']} items): Spearman {_num(j['spearman'])}, "
                f"Kendall {_num(j['kendall'])}, balanced accuracy {_num(j['balanced_accuracy'])} "
                f"at threshold {j['threshold']:.2f} (tp {c['tp']} fp {c['fp']} fn {c['fn']} tn {c['tn']}); "
                f"suggested threshold {_num(j['suggested_threshold'])} 95% CI {_ci(j['suggested_ci'])}"
            )
    return "\n".join(lines)
