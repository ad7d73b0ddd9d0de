"""The agreement report: per criterion, how the annotators agree with each other and how the
judge agrees with them (what ``ragmeter labels agreement`` prints)."""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import combinations
from typing import Any, Iterable, Sequence

from ragmeter.labels.agreement import alpha_with_ci, judge_vs_humans, kappa_with_ci
from ragmeter.labels.io import Label
from ragmeter.labels.tasks import CRITERION_METRICS
from ragmeter.result import EvaluationResult
from ragmeter.verdicts import composite_score

__all__ = ["agreement_report", "format_report", "judge_leniency", "format_leniency", "OVERALL_THRESHOLD", "HUMAN_PASS_AT"]

#: The pass level of the composite score the ``overall`` criterion is compared with (grade C).
OVERALL_THRESHOLD = 0.7
_SCALE = (1, 2, 3, 4, 5)  # kappa weights count steps on the whole scale, used or not
#: A human rating (mean over annotators) at or above this is a pass.
HUMAN_PASS_AT = 4.0


def _judge_values(result: EvaluationResult, metric: str) -> dict[str, float]:
    out = {}
    for r in result:
        value = composite_score(r.scores) if metric == "composite" else (r.scores[metric].value if metric in r.scores else None)
        if value is not None and r.sample.id is not None:
            out[str(r.sample.id)] = value
    return out


def agreement_report(labels: Iterable[Label], result: EvaluationResult | None = None, *,
                     human_pass_at: float = HUMAN_PASS_AT, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Per criterion: the annotators, the number of labelled items, Krippendorff's ordinal alpha
    with its bootstrap interval, the quadratic-weighted Cohen's kappa of each pair of annotators
    with its interval (weights by steps on the 1-5 scale), and, with ``result``, judge vs humans for the criterion's metric
    (:data:`ragmeter.labels.tasks.CRITERION_METRICS`, :func:`ragmeter.labels.agreement.judge_vs_humans`;
    the human rating of an item is the mean of its labels, the threshold the metric's own, or
    :data:`OVERALL_THRESHOLD` for the composite score)."""
    by_criterion: dict[str, dict[tuple[str, str], int | None]] = defaultdict(dict)
    for label in labels:
        by_criterion[label.criterion][(label.sample_id, label.annotator)] = label.value
    report: dict[str, Any] = {}
    for criterion, cells in sorted(by_criterion.items()):
        annotators = sorted({a for _, a in cells})
        items = sorted({s for s, _ in cells})
        ratings = [[cells.get((s, a)) for s in items] for a in annotators]
        entry: dict[str, Any] = {"annotators": annotators, "items": len(items),
                                 "alpha": alpha_with_ci(ratings, "ordinal", n_boot=n_boot, seed=seed), "kappa": {}}
        for (i, a), (j, b) in combinations(enumerate(annotators), 2):
            try:
                entry["kappa"][f"{a} / {b}"] = kappa_with_ci(ratings[i], ratings[j], "quadratic", labels=_SCALE,
                                                                  n_boot=n_boot, seed=seed)
            except ValueError:
                pass  # no item labelled by both
        metric = CRITERION_METRICS.get(criterion)
        if result is not None and metric:
            judge = _judge_values(result, metric)
            human = {}
            for n, s in enumerate(items):
                values = [r[n] for r in ratings if r[n] is not None]
                if values and s in judge:
                    human[s] = sum(values) / len(values)
            if human:
                threshold = OVERALL_THRESHOLD if metric == "composite" else result.thresholds.get(metric, (0.5, 0.5))[0]
                ids = sorted(human)
                entry["judge"] = {"metric": metric, **judge_vs_humans([judge[s] for s in ids], [human[s] for s in ids],
                                                                      threshold, human_pass_at=human_pass_at,
                                                                      n_boot=n_boot, seed=seed)}
        report[criterion] = entry
    return report


def judge_leniency(store: Any, criterion: str = "overall", *, human_pass_at: float = HUMAN_PASS_AT) -> list[dict[str, Any]]:
    """Judge strictness over time: for each evaluation run in ``store`` (oldest first) that scored
    samples labelled on ``criterion``, the share of those samples the judge passes (its metric's
    value >= the run's threshold, see :func:`agreement_report`), the share the humans pass (mean
    label >= ``human_pass_at``) and ``leniency`` = judge pass rate - human pass rate (above 0: the
    judge passes more than people do; rising between judge versions: drift towards leniency)."""
    metric = CRITERION_METRICS[criterion]
    ratings: dict[str, list[int]] = defaultdict(list)
    for label in store.labels(criterion=criterion):
        if label.value is not None:
            ratings[label.sample_id].append(label.value)
    human = {s: sum(v) / len(v) for s, v in ratings.items()}
    rows = []
    for run in sorted(store.runs(limit=None, kind="evaluate"), key=lambda r: (r.created_at, r.id)):
        result = store.run(run.id)
        judge = {s: v for s, v in _judge_values(result, metric).items() if s in human}
        if not judge:
            continue
        threshold = OVERALL_THRESHOLD if metric == "composite" else result.thresholds.get(metric, (0.5, 0.5))[0]
        judge_rate = sum(v >= threshold for v in judge.values()) / len(judge)
        human_rate = sum(human[s] >= human_pass_at for s in judge) / len(judge)
        rows.append({"run_id": run.id, "created_at": run.created_at, "judge": run.judge, "app_version": run.app_version,
                     "metric": metric, "threshold": threshold, "items": len(judge), "judge_pass_rate": judge_rate,
                     "human_pass_rate": human_rate, "leniency": judge_rate - human_rate})
    return rows


def format_leniency(criterion: str, rows: list[dict[str, Any]]) -> str:
    """:func:`judge_leniency` as text, one line per run."""
    lines = [f"{criterion}: judge leniency by run (judge pass rate - human pass rate on the labelled samples)"]
    for r in rows:
        lines.append(f"  run {r['run_id']} {r['created_at']:%Y-%m-%d %H:%M} judge {r['judge']}: {r['items']} items, "
                     f"judge passes {r['judge_pass_rate']:.0%}, humans {r['human_pass_rate']:.0%}, "
                     f"leniency {r['leniency']:+.2f}")
    return "\n".join(lines)


def _num(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _ci(ci: Sequence[float]) -> str:
    return f"[{_num(ci[0])}, {_num(ci[1])}]"


def format_report(report: dict[str, Any]) -> str:
    """The agreement report as text, one block per criterion."""
    lines = []
    for criterion, e in report.items():
        lines.append(f"{criterion}: {e['items']} items, {len(e['annotators'])} annotators ({', '.join(e['annotators'])})")
        a = e["alpha"]
        lines.append(f"  Krippendorff alpha (ordinal) {_num(a['alpha'])} 95% CI {_ci(a['ci'])} over {a['items']} items")
        for pair, k in e["kappa"].items():
            lines.append(f"  Cohen kappa (quadratic) {pair}: {_num(k['kappa'])} 95% CI {_ci(k['ci'])} over {k['items']} items")
        j = e.get("judge")
        if j:
            c = j["confusion"]
            lines.append(f"  judge {j['metric']} vs humans ({j['items']} items): Spearman {_num(j['spearman'])}, "
                         f"Kendall {_num(j['kendall'])}, balanced accuracy {_num(j['balanced_accuracy'])} "
                         f"at threshold {j['threshold']:.2f} (tp {c['tp']} fp {c['fp']} fn {c['fn']} tn {c['tn']}); "
                         f"suggested threshold {_num(j['suggested_threshold'])} 95% CI {_ci(j['suggested_ci'])}")
    return "\n".join(lines)
