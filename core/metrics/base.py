"""Metric base class and the per-sample scoring context that shares judge work between metrics."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from ..data import Sample, Score
from ..judges.base import Embedder, Judge, JudgeError, TaskResult, Usage

__all__ = ["Metric", "ScoringContext", "label_for"]


def label_for(value: float | None, threshold: float, warn: float) -> str | None:
    """``"pass"`` when value >= threshold, ``"warn"`` when value >= warn, else ``"fail"``; None for None."""
    if value is None:
        return None
    if value >= threshold:
        return "pass"
    if value >= warn:
        return "warn"
    return "fail"


def _key(name: str, inputs: Any) -> str:
    return name + ":" + json.dumps(inputs, sort_keys=True, ensure_ascii=False, default=str)


class ScoringContext:
    """Everything the metrics of one sample share: the judge, the embedder, and a memo of task
    results, so each judge task runs at most once per sample whatever the number of metrics.

    ``usage`` totals what this sample cost (each call counted once). ``embeddings()`` makes one
    embedding call for all texts the sample's metrics declared via ``Metric.embedding_inputs``.
    """

    def __init__(self, sample: Sample, judge: Judge | None = None, embedder: Embedder | None = None,
                 metrics: Sequence["Metric"] = ()):
        self.sample = sample
        self.judge = judge
        self.embedder = embedder if embedder is not None else getattr(judge, "embedder", None)
        self.metrics = list(metrics)
        self.usage = Usage()
        self._memo: dict[str, asyncio.Future] = {}

    async def shared(self, key: str, factory: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``factory()`` once per ``key`` for this sample; concurrent callers await the same result."""
        fut = self._memo.get(key)
        if fut is None:
            fut = asyncio.ensure_future(factory())
            self._memo[key] = fut
        return await asyncio.shield(fut)

    async def task(self, name: str, inputs: dict) -> TaskResult:
        """The judge's answer to task ``name`` on ``inputs`` (asked once per sample)."""
        if self.judge is None:
            raise JudgeError(f"task {name!r} needs a judge; pass judge=... (e.g. OfflineJudge())", task=name)

        async def call() -> TaskResult:
            try:
                result = await self.judge.run(name, inputs)
            except JudgeError as err:
                self.usage = self.usage + err.usage
                raise
            self.usage = self.usage + result.usage
            return result

        return await self.shared(_key(name, inputs), call)

    async def embeddings(self) -> dict[str, np.ndarray]:
        """Vectors for every text any metric of this sample declared, from one embedding call."""
        async def compute() -> dict[str, np.ndarray]:
            if self.embedder is None:
                raise JudgeError("no embedder: pass embedder=... or use a judge that has one")
            texts: list[str] = []
            for metric in self.metrics:
                for t in await metric.embedding_inputs(self.sample, self):
                    if t not in texts:
                        texts.append(t)
            if not texts:
                return {}
            vectors, usage = await self.embedder.embed(texts)
            self.usage = self.usage + usage
            vectors = np.asarray(vectors, dtype=float)
            if vectors.shape[0] != len(texts):
                raise JudgeError(f"embedder returned {vectors.shape[0]} vectors for {len(texts)} texts")
            return dict(zip(texts, vectors))

        return await self.shared("__embeddings__", compute)


class _Recorder:
    """A view of a ScoringContext that records which tasks one metric used (for Score.details)."""

    def __init__(self, ctx: ScoringContext):
        self._ctx = ctx
        self.used: dict[str, Usage] = {}
        self.notes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    async def task(self, name: str, inputs: dict) -> TaskResult:
        try:
            result = await self._ctx.task(name, inputs)
        except JudgeError as err:
            self.used[name] = err.usage  # a failed task still cost something: show it on the Score
            raise
        self.used[name] = result.usage
        if result.note and result.note not in self.notes:
            self.notes.append(result.note)
        return result


class Metric:
    """Base class of every metric.

    Subclasses set ``name``, default ``threshold`` / ``warn`` levels, the sample fields they
    ``require`` and whether they ``use_judge``, and implement :meth:`compute`. :meth:`ascore`
    wraps it: a missing field gives a not-applicable Score, an exception gives a Score with the
    error (a metric never raises into the run), and the label and judge name are filled in.
    """

    name: str = "metric"
    threshold: float = 0.7
    warn: float = 0.5
    requires: tuple[str, ...] = ()
    uses_judge: bool = True

    def __init__(self, *, threshold: float | None = None, warn: float | None = None):
        self._set_levels(threshold, warn)

    def with_levels(self, threshold: float | None = None, warn: float | None = None) -> "Metric":
        """This metric with other pass / warn levels: a copy when either is given, else itself.
        Raises ValueError unless 0 <= warn <= threshold <= 1."""
        if threshold is None and warn is None:
            return self
        metric = copy.copy(self)
        metric._set_levels(threshold, warn)
        return metric

    def _set_levels(self, threshold: float | None, warn: float | None) -> None:
        if threshold is not None:
            self.threshold = float(threshold)
        if warn is not None:
            self.warn = float(warn)
        if not 0.0 <= self.warn <= self.threshold <= 1.0:
            raise ValueError(f"{self.name}: need 0 <= warn ({self.warn}) <= threshold ({self.threshold}) <= 1")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        """Compute the Score (without label); raise on failure. Implemented by subclasses."""
        raise NotImplementedError

    async def embedding_inputs(self, sample: Sample, ctx: ScoringContext) -> list[str]:
        """Texts this metric needs embedded (collected into one embedding call per sample)."""
        return []

    def missing_fields(self, sample: Sample) -> list[str]:
        """The required sample fields that are absent."""
        missing = []
        for f in self.requires:
            value = getattr(sample, f)
            if value is None or (f == "contexts" and not value) or (isinstance(value, str) and not value.strip()):
                missing.append(f)
        return missing

    def judge_name(self, ctx: ScoringContext) -> str:
        """Who judged: the judge's name, or ``"code"`` for metrics that need none."""
        if not self.uses_judge or ctx.judge is None:
            return "code"
        return ctx.judge.name

    async def ascore(self, sample: Sample, ctx: ScoringContext | None = None) -> Score:
        """Score one sample; never raises (errors are returned on the Score)."""
        ctx = ctx if ctx is not None else ScoringContext(sample, metrics=[self])
        judge = self.judge_name(ctx)
        missing = self.missing_fields(sample)
        if missing:
            return Score(self.name, None, explanation=f"not applicable: the sample has no {' / '.join(missing)}",
                         details={"missing": missing}, judge=judge)
        rec = _Recorder(ctx)
        try:
            score = await self.compute(sample, rec)  # type: ignore[arg-type]
        except JudgeError as err:
            score = Score(self.name, None, error=f"{type(err).__name__}: {err}", details={"task": err.task, "attempts": err.attempts})
        except Exception as err:  # a metric bug or bad data must not stop the run
            score = Score(self.name, None, error=f"{type(err).__name__}: {err}")
        if rec.used:
            score.details.setdefault("judge_usage", {k: v.to_dict() for k, v in rec.used.items()})
        if rec.notes:
            score.details.setdefault("judge_notes", rec.notes)
        score.judge = score.judge or judge
        score.label = label_for(score.value, self.threshold, self.warn)
        score.details.setdefault("threshold", self.threshold)
        score.details.setdefault("warn", self.warn)
        return score

    def score(self, sample: Sample, judge: Judge | None = None, embedder: Embedder | None = None) -> Score:
        """Synchronous convenience: score one sample with ``judge`` (an ensemble works too)."""
        from ..runner import run_sync, score_sample

        return run_sync(score_sample(sample, [self], judge, embedder)).scores[self.name]
