"""Internal: What people rate on the labeling page: the criteria, each with its question and a 1-5 guide, and
the judge metric each is compared with.

A metric's criterion is a fact of its class (:attr:`~ragmeter.metrics.base.Metric.criterion`):
the built-in ones are faithfulness (``faithfulness``), relevance (``answer_relevancy``),
completeness (``response_completeness``) and citation correctness (``citation_accuracy``), then
``overall``, compared with the sample's composite score. :data:`CRITERIA` and
:data:`CRITERION_METRICS` are read from the registered metrics when asked.
"""

from __future__ import annotations

from typing import Any

from ragmeter.metrics import metric_classes
from ragmeter.metrics.base import LabelingCriterion

__all__ = ["CRITERIA", "CRITERION_METRICS", "OVERALL", "COMPOSITE", "criteria", "criterion_metrics"]

#: The criteria people rate on a 1-5 scale: name -> ``{"question", "anchors"}`` (for 1, 3 and 5), the
#: registered metrics' own (:attr:`~ragmeter.metrics.base.Metric.criterion`) and ``overall``; read
#: when asked (:func:`criteria`).
CRITERIA: dict[str, dict[str, Any]]
#: The judge metric each criterion is compared with (``overall``: :data:`COMPOSITE`); read when
#: asked (:func:`criterion_metrics`).
CRITERION_METRICS: dict[str, str]

#: The "metric" the ``overall`` criterion is compared with: the composite score of the sample.
COMPOSITE = "composite"

#: The criterion of no single metric: the answer as a whole, compared with the composite score.
OVERALL = LabelingCriterion(
    "overall",
    "Would you accept this answer for a user?",
    {"1": "unacceptable: wrong or harmful", "3": "acceptable with reservations", "5": "good as it is"},
)


def _criteria() -> list[tuple[LabelingCriterion, str]]:
    """(criterion, metric) in registry order, then ``overall``; a criterion name taken by an earlier
    metric is not taken again."""
    out: dict[str, tuple[LabelingCriterion, str]] = {}
    for name, cls in metric_classes().items():
        if cls.criterion is not None and cls.criterion.name not in out:
            out[cls.criterion.name] = (cls.criterion, name)
    out.setdefault(OVERALL.name, (OVERALL, COMPOSITE))
    return list(out.values())


def criteria() -> dict[str, dict[str, Any]]:
    """The criteria people rate on a 1-5 scale: name -> ``{"question", "anchors"}`` (for 1, 3 and 5)."""
    return {c.name: c.to_dict() for c, _ in _criteria()}


def criterion_metrics() -> dict[str, str]:
    """The judge metric each criterion is compared with (``overall``: :data:`COMPOSITE`)."""
    return {c.name: metric for c, metric in _criteria()}


def __getattr__(name: str) -> Any:
    """``CRITERIA`` (:func:`criteria`) and ``CRITERION_METRICS`` (:func:`criterion_metrics`), read from
    the registered metrics when asked."""
    if name == "CRITERIA":
        return criteria()
    if name == "CRITERION_METRICS":
        return criterion_metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
