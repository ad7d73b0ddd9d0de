"""Internal: A run's metrics in human units, from the judge and a few labels (PPI++,
:mod:`ragmeter.trust.ppi`):
what ``result.summary(labels=...)``, ``ragmeter compare --labels``
(:func:`ragmeter.comparison.difference_estimates`) and the trust card show.

The labels that count for a run are those given on its answers (:func:`ragmeter.labels.match_labels`);
the judge's value is read in human units (:func:`ragmeter.labels.scales.in_human_units`). The
estimate assumes the labeled samples are a uniform random sample of the run's (the labeling
export's "random sample" part is; its review-queue picks, chosen for disagreement or a score
near the threshold, are not).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ragmeter.labels.io import load_labels
from ragmeter.labels.matching import COMPOSITE, OVERALL_THRESHOLD, MatchedLabels, match_labels
from ragmeter.labels.scales import in_human_units
from ragmeter.trust.ppi import MIN_LABELS, PPIEstimate, ppi_mean

__all__ = ["human_estimates", "judged_in_human_units", "estimate"]


def _threshold(result: Any, metric: str) -> float:
    return OVERALL_THRESHOLD if metric == COMPOSITE else result.thresholds.get(metric, (0.5, 0.5))[0]


def judged_in_human_units(result: Any, metric: str, scale: str) -> dict[str, float]:
    """Sample id -> the judge's value of ``metric`` in human units on ``scale`` (samples with a value)."""
    from ragmeter.verdicts import composite_score

    threshold = _threshold(result, metric)
    out: dict[str, float] = {}
    for r in result:
        sid = str(r.sample.id)
        if sid in out:
            continue
        value = (
            composite_score(r.scores)
            if metric == COMPOSITE
            else (r.scores[metric].value if metric in r.scores else None)
        )
        if value is not None:
            out[sid] = in_human_units(value, scale, threshold)
    return out


def estimate(result: Any, matched: MatchedLabels, metric: str, min_labels: int) -> PPIEstimate:
    """The PPI++ mean of ``metric`` in human units (:func:`ragmeter.trust.ppi.ppi_mean`): its
    labeled samples' human values against the judge's, and the judge's values on the rest."""
    items, scale = matched.items[metric], matched.scales[metric]
    judged = judged_in_human_units(result, metric, scale)
    ids = [s for s in items if s in judged]
    return ppi_mean(
        [items[s].human for s in ids],
        [judged[s] for s in ids],
        [v for s, v in judged.items() if s not in items],
        min_labels=min_labels,
    )


def human_estimates(
    result: Any, labels: Any, *, metrics: Iterable[str] | None = None, min_labels: int = MIN_LABELS
) -> dict[str, dict[str, Any]]:
    """Per labeled metric of ``result``: ``{"scale", **PPIEstimate.to_dict()}``, the metric's
    mean in human units from every judged sample and the labeled ones (labels: a file, Label
    objects or :class:`~ragmeter.labels.MatchedLabels`)."""
    matched = (
        labels if isinstance(labels, MatchedLabels) else match_labels(result, load_labels(labels)[0], metrics=metrics)
    )
    return {
        m: {"scale": matched.scales[m], **estimate(result, matched, m, min_labels).to_dict()} for m in matched.items
    }
