"""Internal: The evaluation runner: ``evaluate`` / ``aevaluate`` score samples with metrics and a judge.

Work is scheduled per sample through an :class:`Executor` (the default runs coroutines on
asyncio with a concurrency cap), so another engine can take over large offline runs without
touching metrics or judges. One failing sample or metric never stops the run: its Score carries
the error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

from ragmeter.executors import AsyncioExecutor, Executor, default_concurrency
from ragmeter.judges.base import Embedder, Judge
from ragmeter.judges.spec import resolve_judge
from ragmeter.loops import run_sync
from ragmeter.metrics import resolve_metrics
from ragmeter.metrics.requests import Limits
from ragmeter.metrics.scoring import SampleResult, sample_scorer
from ragmeter.privacy import capture_content_setting
from ragmeter.profiles import Profile, get_profile
from ragmeter.readers import as_dataset
from ragmeter.result import EvaluationResult
from ragmeter.streaming import stream_evaluate
from ragmeter.verdicts import RESPONSE_TIME, RESPONSE_TIME_LEVELS, add_response_time

__all__ = ["evaluate", "aevaluate"]


async def aevaluate(
    samples: Any,
    metrics: Iterable[Any] | None = None,
    judge: Judge | str | None = None,
    *,
    embedder: Embedder | None = None,
    concurrency: int | None = None,
    progress: bool = True,
    executor: Executor | None = None,
    limits: Limits | None = None,
    response_time: tuple[float, float] | None = RESPONSE_TIME_LEVELS,
    profile: str | Profile | None = None,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    recorder: Any = None,
    repeats: int = 1,
    repeat_band: float | None = None,
    capture_content: bool | None = None,
) -> EvaluationResult:
    """Score ``samples`` (Samples, dicts, a Dataset, a DataFrame or a file path) with ``metrics``.

    ``judge`` is a Judge, a spec such as ``"openai:gpt-4o-mini"`` / ``"offline"``, or None for
    the default (``RAGMETER_JUDGE``, else OpenAI / Anthropic when their key is set, else the
    offline judge; only resolved when a metric needs a judge). ``concurrency`` caps samples in
    flight (None: :func:`default_concurrency`, the judge's own cap on requests in flight, 64 for
    an LLM judge by default, else 8); the judge's requests are capped by the judge. Invalid records are reported on the result (``result.invalid``), not dropped.
    ``limits`` (:class:`~ragmeter.metrics.requests.Limits`; None: the defaults) bounds the size of
    a record: one past a limit gets a ``LimitError`` on each score that reads text, the others
    are scored as usual.

    When samples carry the app's captured latency (``metadata["latency"]["total_s"]``, as the
    LangChain / LlamaIndex captures record it), a ``response_time`` score is added next to the
    metrics, without a judge call: pass at most ``response_time[0]`` seconds (3), warn at most
    ``response_time[1]`` (5), fail beyond (see :func:`ragmeter.verdicts.response_time_score`);
    samples without a latency get a not-applicable one. ``response_time=None`` adds none.

    ``profile`` (``"legal"``, ``"medical"``, ``"default"`` or a :class:`~ragmeter.profiles.Profile`)
    sets the domain's pass / warn levels on the metrics and adds its checks (see
    :mod:`ragmeter.profiles`); ``result.profile`` names it (None without one).

    ``out`` (a ``.jsonl`` path) streams the run for datasets larger than memory: a ``.jsonl``
    input is read a line at a time, each result is appended to ``out`` as it finishes and
    dropped, so memory is bounded by the samples in flight, not by the dataset; ``resume=True``
    skips the samples already in ``out`` (a re-run of an interrupted job). It returns a
    :class:`~ragmeter.streaming.StreamedResult` that reads ``out`` back (see
    :func:`ragmeter.streaming.stream_evaluate`).

    ``recorder`` follows the run as it goes (``evaluate --db`` records into a store this way, see
    :class:`ragmeter.store.recorder.RunRecorder`): ``recorder.start(info)`` once the metrics and
    judge are resolved, before any is scored (``info``: ``judge``, ``metrics``, ``thresholds``,
    ``profile``; it may raise to refuse the run), then ``recorder.add(result)`` with each
    :class:`SampleResult` as it is scored, on the event loop (it must not block).

    ``repeats`` (> 1) asks an LLM judge that many times per score, optionally only for scores
    within ``repeat_band`` of the threshold; each Score keeps every value, their mean (its value)
    and spread, and is flagged when unstable (see :mod:`ragmeter.trust.repeats`).

    ``capture_content=False`` (default: ``RAGMETER_CAPTURE_CONTENT``, else True): samples are
    scored on their content, but the results carry none, so no report, results file, store or
    log written from them holds a question, chunk, answer, reference, claim, quote or
    explanation (see :mod:`ragmeter.privacy`).
    """
    from ragmeter.trust.repeats import check_repeats

    check_repeats(repeats, repeat_band)
    capture_content = capture_content_setting(capture_content)
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise ValueError(f"concurrency must be a whole number of at least 1 (None: the default), got {concurrency!r}")
    if out is not None or resume:
        return await stream_evaluate(
            samples,
            metrics,
            judge,
            out=out,
            resume=resume,
            embedder=embedder,
            concurrency=concurrency,
            progress=progress,
            executor=executor,
            limits=limits,
            response_time=response_time,
            profile=profile,
            recorder=recorder,
            repeats=repeats,
            repeat_band=repeat_band,
            capture_content=capture_content,
        )
    dataset = as_dataset(samples)
    metric_list = resolve_metrics(metrics, dataset)
    profile_obj = get_profile(profile) if profile is not None else None
    if profile_obj is not None:
        metric_list = profile_obj.metrics(metric_list)
    judge_obj = resolve_judge(judge, metric_list)
    if judge_obj is not None:
        _ = judge_obj.fingerprint  # made here, once: the Scores carry its id (also when scored in other processes)
    if recorder is not None:
        recorder.start(
            {
                "judge": getattr(judge_obj, "name", None) or "code",
                "metrics": [m.name for m in metric_list],
                "thresholds": {m.name: (m.threshold, m.warn) for m in metric_list},
                "profile": profile_obj.name if profile_obj is not None else None,
            }
        )
    executor = executor or AsyncioExecutor(concurrency or default_concurrency(judge_obj))
    results: list[SampleResult | None] = [None] * len(dataset)
    bar = None
    if progress and len(dataset) > 1:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(dataset), desc="ragmeter", unit="sample", disable=None)

    def done(i: int, result: SampleResult) -> None:
        results[i] = result
        if recorder is not None:
            recorder.add(result)
        if bar is not None:
            bar.update(1)

    start = time.perf_counter()
    try:
        await executor.map(
            sample_scorer(metric_list, judge_obj, embedder, limits, repeats, repeat_band, capture_content),
            list(dataset),
            done,
        )
    finally:
        if bar is not None:
            bar.close()
    done_results = [r for r in results if r is not None]
    names = [m.name for m in metric_list]
    thresholds = {m.name: (m.threshold, m.warn) for m in metric_list}
    if response_time is not None and add_response_time(done_results, *response_time):
        names.append(RESPONSE_TIME)
        thresholds[RESPONSE_TIME] = (1.0, 0.5)  # the value's levels, as response_time_score defines them
    result = EvaluationResult(
        results=done_results,
        metrics=names,
        judge=getattr(judge_obj, "name", None) or "code",
        invalid=list(dataset.errors),
        duration_s=time.perf_counter() - start,
        thresholds=thresholds,
    )
    result.profile = profile_obj.name if profile_obj is not None else None
    return result


def evaluate(
    samples: Any,
    metrics: Iterable[Any] | None = None,
    judge: Judge | str | None = None,
    *,
    embedder: Embedder | None = None,
    concurrency: int | None = None,
    progress: bool = True,
    executor: Executor | None = None,
    limits: Limits | None = None,
    response_time: tuple[float, float] | None = RESPONSE_TIME_LEVELS,
    profile: str | Profile | None = None,
    out: str | os.PathLike | None = None,
    resume: bool = False,
    recorder: Any = None,
    repeats: int = 1,
    repeat_band: float | None = None,
    capture_content: bool | None = None,
) -> EvaluationResult:
    """Synchronous :func:`aevaluate`; also works inside a running event loop (Jupyter).

    >>> import ragmeter as rm
    >>> s = rm.Sample("Who wrote Dune?", [{"id": "a", "text": "Dune is by Frank Herbert."}],
    ...               relevant_ids=["a"])
    >>> rm.evaluate([s], metrics=["precision@1", "mrr"], progress=False).summary()["mrr"]["mean"]
    1.0
    """
    return run_sync(
        aevaluate(
            samples,
            metrics,
            judge,
            embedder=embedder,
            concurrency=concurrency,
            progress=progress,
            executor=executor,
            limits=limits,
            response_time=response_time,
            profile=profile,
            out=out,
            resume=resume,
            recorder=recorder,
            repeats=repeats,
            repeat_band=repeat_band,
            capture_content=capture_content,
        )
    )
