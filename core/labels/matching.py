"""Internal: Which labels count for a run: :func:`match_labels`.

A label counts for a run's sample when the run has the sample, the metric the label's criterion
is compared with (:data:`ragmeter.labels.CRITERION_METRICS`, or the criterion itself when it
names a metric), and the same answer: a label that carries the hash of the answer it was given
on (:func:`ragmeter.labels.answer_hash`) is not counted for a run whose answer differs. Every
label left out is reported with the reason, naming where it was read; none is guessed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ragmeter.labels.criteria import COMPOSITE, criterion_metrics
from ragmeter.labels.io import Label, answer_hash
from ragmeter.labels.scales import check_value, infer_scale

__all__ = ["LabeledItem", "MatchedLabels", "match_labels", "metric_of", "COMPOSITE", "OVERALL_THRESHOLD"]

#: The pass level of the composite score (grade C).
OVERALL_THRESHOLD = 0.7


def metric_of(criterion: str) -> str:
    """The metric a criterion is compared with: :data:`ragmeter.labels.CRITERION_METRICS` for
    the labeling page's criteria, else the criterion itself (a label given on a metric)."""
    return criterion_metrics().get(criterion, criterion)


@dataclass
class LabeledItem:
    """One labeled sample of a run on one metric: the human rating (``human``, the mean of its
    annotators' ``values``), the ``cluster`` (None when not given), and ``hashed``: whether every
    label named the answer it was given on."""

    sample_id: str
    metric: str
    human: float
    values: list[float]
    annotators: list[str]
    cluster: str | None = None
    hashed: bool = True


@dataclass
class MatchedLabels:
    """The labels that count for a run (``items``: metric -> sample id -> :class:`LabeledItem`),
    each metric's ``scales``, and ``skipped``: one line per label left out, with its reason."""

    items: dict[str, dict[str, LabeledItem]] = field(default_factory=dict)
    scales: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    blank: int = 0

    @property
    def unhashed(self) -> int:
        """Items counted by sample id alone (a label without the answer's hash)."""
        return sum(not it.hashed for per in self.items.values() for it in per.values())


def _where(label: Label) -> str:
    return f"{label.where}: " if label.where else ""


def match_labels(result: Any, labels: Iterable[Label], *, metrics: Iterable[str] | None = None) -> MatchedLabels:
    """The labels of ``labels`` that count for ``result`` (an :class:`~ragmeter.EvaluationResult`),
    grouped per metric and sample (see the module doc). ``metrics``: only these (default: every
    metric the labels name). A blank label (value None) is counted in ``blank``; one annotator's
    second label for the same sample and metric replaces the first."""
    wanted = set(metrics) if metrics is not None else None
    answers: dict[str, str] = {}
    for r in result:
        answers.setdefault(str(r.sample.id), answer_hash(r.sample.answer))
    known = set(result.metrics) | {COMPOSITE}
    out = MatchedLabels()
    kept: dict[str, dict[str, dict[str, Label]]] = {}
    for label in labels:
        metric = metric_of(label.criterion)
        if wanted is not None and metric not in wanted:
            continue
        if label.value is None:
            out.blank += 1
            continue
        where = _where(label)
        if label.sample_id not in answers:
            out.skipped.append(f"{where}sample {label.sample_id!r} is not in the run")
        elif metric not in known:
            out.skipped.append(
                f"{where}the run has no metric {metric!r}"
                + (f" (criterion {label.criterion!r})" if metric != label.criterion else "")
            )
        elif label.answer_hash is not None and label.answer_hash != answers[label.sample_id]:
            out.skipped.append(
                f"{where}sample {label.sample_id!r}: the answer changed since it was labeled "
                f"(labeled answer {label.answer_hash}, the run's {answers[label.sample_id]})"
            )
        else:
            kept.setdefault(metric, {}).setdefault(label.sample_id, {})[label.annotator] = label
    for metric, per_sample in kept.items():
        every = [lb for per in per_sample.values() for lb in per.values()]
        try:
            scale = infer_scale(
                [lb.value for lb in every],
                [lb.scale for lb in every],
                next((lb.criterion for lb in every if lb.criterion != metric), metric),
            )
        except ValueError as exc:
            out.skipped.append(f"{metric}: {len(every)} labels left out: {exc}")
            continue
        out.scales[metric] = scale
        items = {}
        for sid, per in per_sample.items():
            ls = []
            for lb in per.values():
                try:
                    check_value(lb.value, scale)
                    ls.append(lb)
                except ValueError as exc:
                    out.skipped.append(f"{_where(lb)}sample {sid!r}, {metric} ({scale} scale): {exc}")
            if not ls:
                continue
            values = [float(lb.value) for lb in ls]  # type: ignore[arg-type]
            items[sid] = LabeledItem(
                sid,
                metric,
                sum(values) / len(values),
                values,
                [lb.annotator for lb in ls],
                next((lb.cluster for lb in ls if lb.cluster), None),
                all(lb.answer_hash is not None for lb in ls),
            )
        out.items[metric] = items
    return out
