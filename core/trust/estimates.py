"""A run's metrics in human units, from the judge and a few labels (PPI++, :mod:`ragmeter.trust.ppi`):
what ``result.summary(labels=...)``, ``ragmeter compare --labels`` and the trust card show.

The labels that count for a run are those given on its answers (:func:`ragmeter.labels.match_labels`);
the judge's value is read in human units (:func:`ragmeter.labels.scales.in_human_units`). The
estimate assumes the labeled samples are a uniform random sample of the run's (the labeling
export's "random sample" part is; its review-queue picks, chosen for disagreement or a score
near the threshold, are not).
"""

from __future__ import annotations

from typing import Any, Iterable

from ragmeter.labels.matching import COMPOSITE, OVERALL_THRESHOLD, MatchedLabels, match_labels
from ragmeter.labels.scales import in_human_units, span
from ragmeter.trust.ppi import MIN_LABELS, PPIEstimate, ppi_mean, ppi_mean_diff

__all__ = ["human_estimates", "difference_estimates", "judged_in_human_units"]


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
        value = composite_score(r.scores) if metric == COMPOSITE else (
            r.scores[metric].value if metric in r.scores else None)
        if value is not None:
            out[sid] = in_human_units(value, scale, threshold)
    return out


def _estimate(result: Any, matched: MatchedLabels, metric: str, min_labels: int) -> PPIEstimate:
    items, scale = matched.items[metric], matched.scales[metric]
    judged = judged_in_human_units(result, metric, scale)
    ids = [s for s in items if s in judged]
    return ppi_mean([items[s].human for s in ids], [judged[s] for s in ids],
                    [v for s, v in judged.items() if s not in items], min_labels=min_labels)


def human_estimates(result: Any, labels: Any, *, metrics: Iterable[str] | None = None,
                    min_labels: int = MIN_LABELS) -> dict[str, dict[str, Any]]:
    """Per labeled metric of ``result``: ``{"scale", **PPIEstimate.to_dict()}``, the metric's
    mean in human units from every judged sample and the labeled ones (labels: a file, Label
    objects or :class:`~ragmeter.labels.MatchedLabels`)."""
    from ragmeter.trust.card import load_labels

    matched = labels if isinstance(labels, MatchedLabels) else match_labels(result, load_labels(labels)[0],
                                                                             metrics=metrics)
    return {m: {"scale": matched.scales[m], **_estimate(result, matched, m, min_labels).to_dict()}
            for m in matched.items}


def difference_estimates(a: Any, b: Any, labels: Any, *, paired: bool, metrics: Iterable[str] | None = None,
                         tolerance: Any = 0.05, min_labels: int = MIN_LABELS) -> dict[str, dict[str, Any]]:
    """Per metric labeled in both runs: the change from run ``a`` to run ``b`` in human units
    (:func:`ragmeter.trust.ppi.ppi_mean_diff`: on the per-sample differences when ``paired`` and
    enough samples are labeled on both answers, else the difference of the runs' own estimates),
    with the tolerance in human units (the metric's tolerance times the scale's span) and the
    verdict by the rule the gate uses (regressed: the change is below minus the tolerance and
    its interval excludes zero)."""
    from ragmeter.comparison import IMPROVED, NO_CHANGE, REGRESSED, _tolerance
    from ragmeter.trust.card import load_labels

    read = load_labels(labels)[0]
    ma, mb = match_labels(a, read, metrics=metrics), match_labels(b, read, metrics=metrics)
    out: dict[str, dict[str, Any]] = {}
    for metric in (m for m in ma.items if m in mb.items):
        scale = ma.scales[metric]
        if mb.scales[metric] != scale:
            continue
        ea, eb = _estimate(a, ma, metric, min_labels), _estimate(b, mb, metric, min_labels)
        pairs = None
        if paired:
            ja, jb = judged_in_human_units(a, metric, scale), judged_in_human_units(b, metric, scale)
            ia, ib = ma.items[metric], mb.items[metric]
            both = [s for s in ia if s in ib and s in ja and s in jb]
            rest = [s for s in ja if s in jb and s not in set(both)]
            pairs = ([ib[s].human - ia[s].human for s in both], [jb[s] - ja[s] for s in both],
                     [jb[s] - ja[s] for s in rest])
        est = ppi_mean_diff(ea, eb, paired=pairs, min_labels=min_labels)
        tol = _tolerance(tolerance, metric) * span(scale)
        if est.mean is not None and est.ci is not None and est.mean < -tol and est.ci[1] < 0:
            verdict = REGRESSED
        elif est.mean is not None and est.ci is not None and est.mean > tol and est.ci[0] > 0:
            verdict = IMPROVED
        else:
            verdict = NO_CHANGE
        out[metric] = {"scale": scale, "tolerance": tol, "verdict": verdict if est.mean is not None else None,
                       "baseline": ea.to_dict(), "current": eb.to_dict(), **est.to_dict()}
    return out
