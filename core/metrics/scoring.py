"""Internal: Scoring one sample: a :class:`Scorer` runs a sample's metrics and returns their Scores, and
:func:`score_sample` gives them as a :class:`SampleResult` (what a run is made of).

The metrics are :class:`~ragmeter.metrics.base.Metric` objects (typed ``Any`` here: this module
is below the base class, whose ``Metric.score`` scores through :func:`score_sample`). One judge
is a :class:`JudgeScorer` (one :class:`ScoringContext`, so the metrics share their
judge calls); an :class:`~ragmeter.judges.EnsembleJudge` is an :class:`EnsembleScorer` (each
member scores every metric, the ensemble combines). :func:`score_sample` is what the runner,
the inline scorer and the framework integrations call: none of them treats an ensemble
specially.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragmeter.data import Sample, Score
from ragmeter.fileio import finite_number
from ragmeter.judges.base import Embedder, Judge, Usage
from ragmeter.judges.ensemble import EnsembleJudge
from ragmeter.metrics.requests import Limits, RequestSettings, ScoringContext
from ragmeter.privacy import content_scope, for_output, without_content

__all__ = ["SampleResult", "Scorer", "JudgeScorer", "EnsembleScorer", "scorer_for", "score_sample", "sample_scorer"]


@dataclass
class SampleResult:
    """The Scores of one sample (``scores[metric_name]``), what the judge work cost, and how long
    scoring took."""

    sample: Sample
    scores: dict[str, Score]
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0

    def __getitem__(self, metric: str) -> Score:
        return self.scores[metric]

    def to_dict(self) -> dict:
        """Plain-dict form: one JSONL line of a results file, as every writer writes it
        (:func:`ragmeter.privacy.for_output`: no secrets; no content when captured without)."""
        out = for_output(self)
        return {
            "sample": out.sample.to_dict(),
            "scores": {k: s.to_dict() for k, s in out.scores.items()},
            "usage": self.usage.to_dict(),
            "duration_s": round(self.duration_s, 6),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> SampleResult:
        """Inverse of :meth:`to_dict`; raises ValueError naming what is malformed."""
        if not isinstance(d, Mapping):
            raise ValueError(f"expected an object, got {type(d).__name__}")
        scores, usage = d.get("scores"), d.get("usage") or {}
        if not isinstance(scores, Mapping) or not all(isinstance(v, Mapping) for v in scores.values()):
            raise ValueError("'scores' must be an object of metric -> score objects")
        if not isinstance(usage, Mapping):
            raise ValueError(f"'usage' must be an object, got {type(usage).__name__}")
        for k, v in usage.items():
            if v is not None or k != "cost_usd":
                finite_number(v, f"usage.{k}")
        return cls(
            sample=Sample.from_dict(d.get("sample")),
            scores={k: Score.from_dict(v) for k, v in scores.items()},
            usage=Usage.from_dict(usage),
            duration_s=finite_number(d.get("duration_s", 0.0), "duration_s"),
        )


class Scorer(Protocol):
    """Scores ``metrics`` on ``sample``: per metric name a Score, and what it cost."""

    async def score(self, sample: Sample, metrics: Sequence[Any]) -> tuple[dict[str, Score], Usage]: ...


class JudgeScorer:
    """All metrics of a sample with one judge (or none, for deterministic metrics), sharing
    each judge task through one :class:`ScoringContext`. ``limits``: the run's
    :class:`~ragmeter.metrics.requests.Limits` (None: the defaults)."""

    def __init__(self, judge: Judge | None, embedder: Embedder | None = None, limits: Limits | None = None):
        self.judge = judge
        self.embedder = embedder
        self.limits = limits

    async def score(self, sample: Sample, metrics: Sequence[Any]) -> tuple[dict[str, Score], Usage]:
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

    async def score(self, sample: Sample, metrics: Sequence[Any]) -> tuple[dict[str, Score], Usage]:
        """Combined Scores of ``metrics`` on ``sample`` and the members' total usage."""
        usage = Usage()
        per_member = []
        for member in self.members:
            scores, cost = await member.score(sample, metrics)
            per_member.append(scores)
            usage = usage + cost
        return {m.name: self.ensemble.combine(m, [s[m.name] for s in per_member]) for m in metrics}, usage


def scorer_for(
    judge: Judge | None,
    embedder: Embedder | None = None,
    limits: Limits | None = None,
    *,
    repeats: int = 1,
    repeat_band: float | None = None,
) -> Scorer:
    """The scorer of a judge: an :class:`EnsembleScorer` for an ensemble, the judge's own
    ``scorer(embedder, limits)`` when it has one (a :class:`~ragmeter.judges.cascade.CascadeJudge`),
    else a :class:`JudgeScorer`; wrapped in a :class:`~ragmeter.trust.repeats.RepeatScorer` when
    ``repeats`` > 1."""
    own = getattr(judge, "scorer", None)
    if isinstance(judge, EnsembleJudge):
        scorer: Scorer = EnsembleScorer(judge, embedder, limits)
    elif callable(own):
        scorer = own(embedder, limits)
    else:
        scorer = JudgeScorer(judge, embedder, limits)
    if repeats > 1:
        from ragmeter.trust.repeats import RepeatScorer

        scorer = RepeatScorer(scorer, repeats, repeat_band, deterministic=getattr(judge, "kind", "CODE") == "CODE")
    return scorer


async def score_sample(
    sample: Sample,
    metrics: Sequence[Any],
    judge: Judge | None = None,
    embedder: Embedder | None = None,
    *,
    limits: Limits | None = None,
    repeats: int = 1,
    repeat_band: float | None = None,
    capture_content: bool = True,
) -> SampleResult:
    """All ``metrics`` on one ``sample``; judge tasks are shared between metrics. Never raises.
    ``limits``: the run's :class:`~ragmeter.metrics.requests.Limits` (None: the defaults);
    ``repeats`` / ``repeat_band``: ask the judge again (see :mod:`ragmeter.trust.repeats`).
    ``capture_content=False``: scored on the content, but the result carries none
    (:func:`ragmeter.privacy.without_content`) and log lines written meanwhile quote none."""
    start = time.perf_counter()
    scorer = scorer_for(judge, embedder, limits, repeats=repeats, repeat_band=repeat_band)
    if capture_content:
        scores, usage = await scorer.score(sample, metrics)
    else:
        with content_scope(sample):
            scores, usage = await scorer.score(sample, metrics)
    result = SampleResult(sample=sample, scores=scores, usage=usage, duration_s=time.perf_counter() - start)
    return result if capture_content else without_content(result)


def sample_scorer(
    metrics: Sequence[Any],
    judge: Judge | None,
    embedder: Embedder | None = None,
    limits: Limits | None = None,
    repeats: int = 1,
    repeat_band: float | None = None,
    capture_content: bool = True,
) -> Any:
    """``fn(sample) -> SampleResult`` for an :class:`~ragmeter.executors.Executor`: :func:`score_sample`
    with the run's metrics, judge, embedder, limits, repeats and content setting (a picklable
    ``functools.partial``, for executors that score in other processes)."""
    return functools.partial(
        score_sample,
        metrics=metrics,
        judge=judge,
        embedder=embedder,
        limits=limits,
        repeats=repeats,
        repeat_band=repeat_band,
        capture_content=capture_content,
    )
