"""Scoring one sample: a :class:`Scorer` runs a sample's metrics and returns their Scores.

One judge is a :class:`JudgeScorer` (one :class:`ScoringContext`, so the metrics share their
judge calls); an :class:`~ragmeter.judges.EnsembleJudge` is an :class:`EnsembleScorer` (each
member scores every metric, the ensemble combines). :func:`score_sample` is what the runner,
the inline scorer and the framework integrations call: none of them treats an ensemble
specially.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, Sequence

from ragmeter.data import Sample, Score
from ragmeter.judges.base import Embedder, Judge, Usage
from ragmeter.judges.ensemble import EnsembleJudge
from ragmeter.metrics.base import Metric
from ragmeter.metrics.requests import Limits, RequestSettings, ScoringContext
from ragmeter.result import SampleResult

__all__ = ["Scorer", "JudgeScorer", "EnsembleScorer", "scorer_for", "score_sample"]


class Scorer(Protocol):
    """Scores ``metrics`` on ``sample``: per metric name a Score, and what it cost."""

    async def score(self, sample: Sample, metrics: Sequence[Metric]) -> tuple[dict[str, Score], Usage]:
        ...


class JudgeScorer:
    """All metrics of a sample with one judge (or none, for deterministic metrics), sharing
    each judge task through one :class:`ScoringContext`. ``limits``: the run's
    :class:`~ragmeter.metrics.requests.Limits` (None: the defaults)."""

    def __init__(self, judge: Judge | None, embedder: Embedder | None = None, limits: Limits | None = None):
        self.judge = judge
        self.embedder = embedder
        self.limits = limits

    async def score(self, sample: Sample, metrics: Sequence[Metric]) -> tuple[dict[str, Score], Usage]:
        """Scores of ``metrics`` on ``sample``; never raises (errors are on the Scores)."""
        settings = RequestSettings.for_metrics(metrics, self.limits)
        ctx = ScoringContext(sample, self.judge, self.embedder, metrics, settings)
        results = await asyncio.gather(*(m.ascore(sample, ctx) for m in metrics))
        return {m.name: s for m, s in zip(metrics, results)}, ctx.usage


class EnsembleScorer:
    """Every member judge scores every metric (each with its own calls); the ensemble's
    :meth:`~ragmeter.judges.EnsembleJudge.combine` turns the members' Scores into one."""

    def __init__(self, ensemble: EnsembleJudge, embedder: Embedder | None = None, limits: Limits | None = None):
        self.ensemble = ensemble
        self.members = [JudgeScorer(j, embedder, limits) for j in ensemble.members]

    async def score(self, sample: Sample, metrics: Sequence[Metric]) -> tuple[dict[str, Score], Usage]:
        """Combined Scores of ``metrics`` on ``sample`` and the members' total usage."""
        usage = Usage()
        per_member = []
        for member in self.members:
            scores, cost = await member.score(sample, metrics)
            per_member.append(scores)
            usage = usage + cost
        return {m.name: self.ensemble.combine(m, [s[m.name] for s in per_member]) for m in metrics}, usage


def scorer_for(judge: Judge | None, embedder: Embedder | None = None, limits: Limits | None = None) -> Scorer:
    """The scorer of a judge: an :class:`EnsembleScorer` for an ensemble, the judge's own
    ``scorer(embedder, limits)`` when it has one (a :class:`~ragmeter.judges.cascade.CascadeJudge`),
    else a :class:`JudgeScorer`."""
    if isinstance(judge, EnsembleJudge):
        return EnsembleScorer(judge, embedder, limits)
    own = getattr(judge, "scorer", None)
    if callable(own):
        return own(embedder, limits)
    return JudgeScorer(judge, embedder, limits)


async def score_sample(sample: Sample, metrics: Sequence[Metric], judge: Judge | None = None,
                       embedder: Embedder | None = None, *, limits: Limits | None = None) -> SampleResult:
    """All ``metrics`` on one ``sample``; judge tasks are shared between metrics. Never raises.
    ``limits``: the run's :class:`~ragmeter.metrics.requests.Limits` (None: the defaults)."""
    start = time.perf_counter()
    scores, usage = await scorer_for(judge, embedder, limits).score(sample, metrics)
    return SampleResult(sample=sample, scores=scores, usage=usage, duration_s=time.perf_counter() - start)
