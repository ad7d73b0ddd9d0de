"""Capture: the framework-neutral half of every integration.

An integration (the LangChain callback, the LlamaIndex instrumentation) only translates its
framework's events into :class:`~ragmeter.Sample` objects and hands each to a
:class:`CaptureRecorder`, which does the rest::

    recorder = CaptureRecorder(["faithfulness"], judge="offline", write_trace=link.write)
    recorder.record(sample, target)      # keep, count, score on the background worker
    recorder.flush()
    recorder.results.summary()

The recorder keeps the last ``keep`` samples, counts them by ``metadata["status"]`` (``"ok"``,
``"error"``, ``"partial"``), scores the scorable ones (status ok, with contexts) inline on a
:class:`ragmeter.inline.BackgroundScorer` or offline on :meth:`CaptureRecorder.evaluate`, and
writes each result to the trace it came from through the injected ``write_trace`` callable. It
imports no framework and no OpenTelemetry: what a *target* is, and how a result is written to it,
is the integration's business.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import os
import threading
from typing import Any, Callable, Iterable

from ragmeter.data import Sample, save_samples
from ragmeter.guard import never_raise
from ragmeter.inline import BackgroundScorer
from ragmeter.result import EvaluationResult, SampleResult
from ragmeter.runner import evaluate, resolve_metrics

__all__ = ["CaptureRecorder", "scorable", "MODES", "STATS_KEYS", "REFERENCE_KEY", "RELEVANT_KEY", "SAMPLE_ID_KEY"]

log = logging.getLogger("ragmeter")

#: ``inline``: score each recorded sample on a background worker; ``offline``: only keep them.
MODES = ("inline", "offline")
#: The capture counters every recorder reports (before its ``counters`` and the scorer's keys).
STATS_KEYS = ("captured", "ok", "errored", "partial", "skipped_no_contexts", "capture_errors",
              "trace_writes", "trace_errors")
#: Per-run metadata keys (LangChain ``config["metadata"]``, LlamaIndex ``instrument_tags``) that
#: carry the ground truth and the sample id.
REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY = "reference", "relevant_ids", "sample_id"

#: ``write_trace(result, target)`` -> True (written), False (failed, the writer said so) or
#: None (nothing to write to, e.g. no SDK tracer provider).
TraceWriter = Callable[[SampleResult, Any], "bool | None"]


def scorable(sample: Sample) -> bool:
    """Whether a captured sample is scored: status ``"ok"`` and at least one context."""
    return sample.metadata.get("status") == "ok" and bool(sample.contexts)


class CaptureRecorder:
    """Keeps, counts and scores the samples an integration captures.

    ``metrics`` / ``judge`` / ``embedder`` are what :func:`ragmeter.evaluate` takes, passed on as
    given (``metrics=None`` lets the scorer pick the defaults per sample). ``mode="inline"``
    scores each scorable sample on a :class:`~ragmeter.inline.BackgroundScorer` (``max_queue``,
    ``concurrency``, ``sample_rate``, ``should_score``, ``on_result`` and the worker thread's
    ``name`` go to it); ``mode="offline"`` only keeps samples until :meth:`evaluate`. ``keep``
    bounds the samples and results held (None: unbounded).

    ``write_trace(result, target)`` is called for each result whose sample was recorded with a
    ``target`` (inline: on the worker thread; offline: in :meth:`evaluate`). It returns True when
    it wrote, False when it failed (and reported it), None when there was nothing to write to;
    an exception is counted in ``trace_errors`` and logged by :mod:`ragmeter.guard` (a traceback
    once, then at debug level), never raised.

    ``counters`` names integration-specific counters (bumped with :meth:`count`) that
    :attr:`stats` reports after the capture counters even while they are 0.
    """

    def __init__(self, metrics: Iterable[Any] | None = None, judge: Any = None, *, mode: str = "inline",
                 embedder: Any = None, sample_rate: float = 1.0,
                 should_score: Callable[[Sample], bool | None] | None = None,
                 on_result: Callable[[SampleResult], None] | None = None, max_queue: int = 1000,
                 concurrency: int = 4, keep: int | None = 10_000, write_trace: TraceWriter | None = None,
                 counters: Iterable[str] = (), name: str = "ragmeter-capture"):
        if mode not in MODES:
            raise ValueError(f"mode must be 'inline' or 'offline', got {mode!r}")
        if keep is not None and keep < 1:
            raise ValueError("keep must be >= 1 or None")
        self.mode = mode
        self.metrics = list(metrics) if metrics is not None and not isinstance(metrics, str) else metrics
        self.judge = judge
        self.embedder = embedder
        self.write_trace = write_trace
        extra = tuple(k for k in counters if k not in STATS_KEYS)
        self._stats_keys = STATS_KEYS[:5] + extra + STATS_KEYS[5:]
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._records: collections.deque = collections.deque(maxlen=keep)  # (seq, sample, target)
        self._counts: collections.Counter = collections.Counter()
        self._evaluated: collections.deque = collections.deque(maxlen=keep)
        self._evaluated_upto = 0
        self._metric_objects: list[Any] = []
        self.scorer: BackgroundScorer | None = None
        if mode == "inline":
            self.scorer = BackgroundScorer(
                self.metrics, judge, embedder=embedder, max_queue=max_queue, concurrency=concurrency,
                sample_rate=sample_rate, should_score=should_score, on_result=on_result,
                keep_results=keep or 10**9, name=name)
        elif self.metrics is not None:
            self._metric_objects = resolve_metrics(self.metrics)  # fail fast on unknown metric names

    def __repr__(self) -> str:
        return f"CaptureRecorder(mode={self.mode!r}, captured={self._counts['captured']})"

    # ------------------------------------------------------------------ capture

    def record(self, sample: Sample, target: Any = None, *, key: str | None = None) -> None:
        """Keep ``sample`` (its ``metadata["status"]``, ``"ok"`` when absent, says how it is
        counted), and in inline mode queue it for scoring when :func:`scorable`. ``target`` is
        where its result is written (see ``write_trace``); ``key`` replaces the sample id as the
        ``sample_rate`` key (e.g. a trace id, to sample whole traces alike). Never blocks."""
        status = sample.metadata.setdefault("status", "ok")
        with self._lock:
            self._records.append((next(self._seq), sample, target))
            self._counts["captured"] += 1
            self._counts["errored" if status == "error" else status] += 1
            if status == "ok" and not sample.contexts:
                self._counts["skipped_no_contexts"] += 1
        if self.scorer is not None and scorable(sample):
            self._submit(sample, target, key)

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``key`` (e.g. ``capture_errors``, or one of ``counters``)."""
        with self._lock:
            self._counts[key] += n

    # ------------------------------------------------------------------ results

    @property
    def samples(self) -> list[Sample]:
        """The kept samples in capture order (every status)."""
        with self._lock:
            return [s for _, s, _ in self._records]

    @property
    def results(self) -> EvaluationResult:
        """What has been scored so far (inline worker and :meth:`evaluate`) as an
        :class:`~ragmeter.EvaluationResult` in start order (``metadata["started_at"]``). Call
        :meth:`flush` first to include pending work."""
        items: list[SampleResult] = list(self._evaluated)
        if self.scorer is not None:
            items += list(self.scorer.results)
        items.sort(key=lambda r: str(r.sample.metadata.get("started_at", "")))
        thresholds = {m.name: (m.threshold, m.warn) for m in self._metrics()}
        return EvaluationResult(items, self._metric_names(items), judge=self._judge_name(), thresholds=thresholds,
                                duration_s=sum(r.duration_s for r in items))

    @property
    def stats(self) -> dict[str, int]:
        """Counters: the capture's (:data:`STATS_KEYS` and ``counters``), then the scorer's
        (:attr:`BackgroundScorer.STATS_KEYS <ragmeter.inline.BackgroundScorer.STATS_KEYS>`; all 0
        offline), where ``scored`` includes what :meth:`evaluate` scored."""
        with self._lock:
            out = {k: self._counts.get(k, 0) for k in self._stats_keys}
            evaluated = self._counts.get("evaluated", 0)
        out.update(self.scorer.stats if self.scorer is not None else dict.fromkeys(BackgroundScorer.STATS_KEYS, 0))
        out["scored"] += evaluated
        return out

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued sample is scored; False if ``timeout`` seconds passed first.
        Offline mode has nothing pending and returns True."""
        return self.scorer.flush(timeout) if self.scorer is not None else True

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting samples for scoring, wait for pending ones (up to ``timeout``) and stop
        the worker. Recording continues."""
        return self.scorer.shutdown(timeout) if self.scorer is not None else True

    def export_jsonl(self, path: str | os.PathLike, *, statuses: Iterable[str] = ("ok",)) -> int:
        """Write the kept samples whose status is in ``statuses`` to a JSONL file that
        ``ragmeter evaluate`` / :func:`ragmeter.load_samples` read; returns how many were written."""
        wanted = set(statuses)
        chosen = [s for s in self.samples if s.metadata.get("status") in wanted]
        save_samples(chosen, path)
        return len(chosen)

    def evaluate(self, **kwargs: Any) -> EvaluationResult:
        """Offline mode: score the samples recorded since the last call (the scorable ones) in one
        go; ``kwargs`` go to :func:`ragmeter.evaluate`. The results are added to :attr:`results`
        and written to their targets."""
        if self.mode != "offline":
            raise RuntimeError("evaluate() is for mode='offline'; inline mode scores each sample as it "
                               "is captured (use flush() and results)")
        with self._lock:
            batch = [(seq, s, t) for seq, s, t in self._records if seq > self._evaluated_upto]
            if batch:
                self._evaluated_upto = max(seq for seq, _, _ in batch)
        batch = [(seq, s, t) for seq, s, t in batch if scorable(s)]
        kwargs.setdefault("progress", False)
        if self.embedder is not None:
            kwargs.setdefault("embedder", self.embedder)
        if not batch:
            return EvaluationResult([], self._metric_names([]), judge=self._judge_name())
        result = evaluate([s for _, s, _ in batch], self.metrics, self.judge, **kwargs)
        targets = {id(s): t for _, s, t in batch}
        for r in result:
            self._evaluated.append(r)
            target = targets.get(id(r.sample))
            if target is not None:
                self._write(r, target)
        with self._lock:
            self._counts["evaluated"] += len(result)
        return result

    # ------------------------------------------------------------------ internals

    def _submit(self, sample: Sample, target: Any, key: str | None) -> None:
        assert self.scorer is not None
        on_done = None if target is None else functools.partial(self._write, target=target)
        before = self.scorer.stats["dropped"]
        if not self.scorer.submit(sample, key=key, on_done=on_done):
            dropped = self.scorer.stats["dropped"]
            if dropped > before and (dropped == 1 or dropped % 100 == 0):
                log.warning("ragmeter: scoring backlog full (max_queue=%d); %d sample(s) dropped so far",
                            self.scorer.max_queue, dropped)

    def _write(self, result: SampleResult, target: Any) -> None:
        if self.write_trace is None:
            return
        written = None
        with never_raise("capture: attach scores to the trace", on_error=lambda exc: self.count("trace_errors")):
            written = self.write_trace(result, target)
        if written is True:
            self.count("trace_writes")
        elif written is False:
            self.count("trace_errors")

    def _metrics(self) -> list[Any]:
        return list(self.scorer.metrics) if self.scorer is not None else list(self._metric_objects)

    def _metric_names(self, items: list[SampleResult]) -> list[str]:
        names = [m.name for m in self._metrics()]
        for r in items:
            for name in r.scores:
                if name not in names:
                    names.append(name)
        return names

    def _judge_name(self) -> str:
        judge = self.scorer.judge if self.scorer is not None else None
        if judge is None:
            judge = self.judge
        if judge is None:
            return "code"
        return judge if isinstance(judge, str) else (getattr(judge, "name", None) or "code")
