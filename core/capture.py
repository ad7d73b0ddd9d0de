"""Internal: Capture: the framework-neutral half of every integration.

An integration (the LangChain callback, the LlamaIndex instrumentation) only translates its
framework's events into :class:`~ragmeter.Sample` objects and hands each to a
:class:`CaptureRecorder`, which does the rest::

    recorder = CaptureRecorder(["faithfulness"], judge="offline", write_trace=link.write)
    recorder.record(sample, target)      # keep, count, score on the background worker
    recorder.defer(lambda: recorder.record(to_sample(event), target))   # from the request path
    recorder.flush()
    recorder.results.summary()

The recorder keeps the last ``keep`` samples, counts them by ``metadata["status"]`` (``"ok"``,
``"error"``, ``"partial"``), scores the scorable ones (status ok, with contexts) inline on a
:class:`ragmeter.inline.BackgroundScorer` or offline on :meth:`CaptureRecorder.evaluate`, and
writes each result to the trace it came from through the injected ``write_trace`` callable. It
imports no framework and no OpenTelemetry: what a *target* is, and how a result is written to it,
is the integration's business.

Privacy: ``capture_content=False`` (or ``RAGMETER_CAPTURE_CONTENT=false``) keeps what leaves the
recorder free of content (:func:`without_content`, :mod:`ragmeter.privacy`); run metadata and
error texts are the integrations' to redact (:mod:`ragmeter.redact`) before they record, and every
writer redacts again.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ragmeter.conversations import no_retrieval_turn
from ragmeter.data import Sample
from ragmeter.guard import never_raise, register_exit_hook, weak_hook
from ragmeter.inline import BackgroundScorer, store_writer
from ragmeter.metrics import resolve_metrics
from ragmeter.metrics.scoring import SampleResult
from ragmeter.privacy import (
    CAPTURE_CONTENT_ENV,
    CONTENT_METADATA_KEYS,
    capture_content_setting,
    content_captured,
    without_content,
)
from ragmeter.readers import save_samples
from ragmeter.result import EvaluationResult
from ragmeter.runner import evaluate

__all__ = [
    "CaptureRecorder",
    "scorable",
    "without_content",
    "content_captured",
    "capture_content_setting",
    "MODES",
    "STATS_KEYS",
    "REFERENCE_KEY",
    "RELEVANT_KEY",
    "SAMPLE_ID_KEY",
    "CAPTURE_CONTENT_ENV",
    "CONTENT_METADATA_KEYS",
]

log = logging.getLogger("ragmeter")

#: ``inline``: score each recorded sample on a background worker; ``offline``: only keep them.
MODES = ("inline", "offline")
#: The capture counters every recorder reports (before its ``counters`` and the scorer's keys).
STATS_KEYS = (
    "captured",
    "ok",
    "errored",
    "partial",
    "skipped_no_contexts",
    "capture_errors",
    "capture_dropped",
    "trace_writes",
    "trace_errors",
)
#: Per-run metadata keys (LangChain ``config["metadata"]``, LlamaIndex ``instrument_tags``) that
#: carry the ground truth and the sample id.
REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY = "reference", "relevant_ids", "sample_id"

#: ``write_trace(result, target)`` -> True (written), False (failed, the writer said so) or
#: None (nothing to write to, e.g. no SDK tracer provider).
TraceWriter = Callable[[SampleResult, Any], "bool | None"]


#: Captured runs waiting to be turned into samples before new ones are dropped (``capture_dropped``).
MAX_DEFERRED = 10_000


def scorable(sample: Sample) -> bool:
    """Whether a captured sample is scored: status ``"ok"`` and at least one context, or a chat
    turn that ran no retriever (:func:`ragmeter.conversations.no_retrieval_turn`: the metrics that
    need contexts say not applicable, and a Monitor fed by ``on_result`` counts it as no retrieval)."""
    return sample.metadata.get("status") == "ok" and (bool(sample.contexts) or no_retrieval_turn(sample))


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

    ``store`` (a :class:`~ragmeter.store.Store`, a SQLite path or a ``postgresql://`` URL; None,
    the default: off) records every result (inline: as the scorer reports it; offline: each
    :meth:`evaluate`) as an inline sample of ``store_source``, written off the request path by a
    :class:`~ragmeter.store.writer.StoreWriter`; :attr:`stats` has its ``store_*`` counts, and
    :meth:`flush` / :meth:`shutdown` wait for its writes.

    ``capture_content=False`` (default: ``RAGMETER_CAPTURE_CONTENT``, else True) keeps no content:
    samples are scored as captured, in memory, but what is kept (:attr:`samples`,
    :meth:`export_jsonl`) and what results carry (``result.sample`` and every score's explanation
    and details, so also the trace and store writes and ``on_result``) is :func:`without_content`
    (see :mod:`ragmeter.privacy`).

    Off the request path: an integration's hook hands the raw event data to :meth:`defer`, which
    returns at once; building the Sample and :meth:`record` run on the recorder's capture thread,
    in order. Every reader (:attr:`samples`, :attr:`results`, :attr:`stats`, :meth:`flush`,
    :meth:`export_jsonl`, :meth:`evaluate`, :meth:`shutdown`) first waits for what was deferred.
    """

    def __init__(
        self,
        metrics: Iterable[Any] | None = None,
        judge: Any = None,
        *,
        mode: str = "inline",
        embedder: Any = None,
        sample_rate: float = 1.0,
        should_score: Callable[[Sample], bool | None] | None = None,
        on_result: Callable[[SampleResult], None] | None = None,
        max_queue: int = 1000,
        concurrency: int = 4,
        keep: int | None = 10_000,
        write_trace: TraceWriter | None = None,
        counters: Iterable[str] = (),
        name: str = "ragmeter-capture",
        capture_content: bool | None = None,
        store: Any = None,
        store_source: str = "inline",
    ):
        if mode not in MODES:
            raise ValueError(f"mode must be 'inline' or 'offline', got {mode!r}")
        if keep is not None and keep < 1:
            raise ValueError("keep must be >= 1 or None")
        self.mode = mode
        self.metrics = list(metrics) if metrics is not None and not isinstance(metrics, str) else metrics
        self.judge = judge
        self.embedder = embedder
        self.write_trace = write_trace
        self.capture_content = capture_content_setting(capture_content)
        extra = tuple(k for k in counters if k not in STATS_KEYS)
        self._stats_keys = STATS_KEYS[:5] + extra + STATS_KEYS[5:]
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        # (seq, sample as kept, target, sample as captured while offline mode has not scored it)
        self._records: collections.deque = collections.deque(maxlen=keep)
        self._counts: collections.Counter = collections.Counter()
        self._evaluated: collections.deque = collections.deque(maxlen=keep)
        self._evaluated_upto = 0
        self._metric_objects: list[Any] = []
        self.scorer: BackgroundScorer | None = None
        self._store_writer: Any = None  # offline mode's (inline: the scorer's)
        if mode == "inline":
            self.scorer = BackgroundScorer(
                self.metrics,
                judge,
                embedder=embedder,
                max_queue=max_queue,
                concurrency=concurrency,
                sample_rate=sample_rate,
                should_score=should_score,
                on_result=on_result,
                keep_results=keep or 10**9,
                name=name,
                store=store,
                store_source=store_source,
            )
        else:
            if self.metrics is not None:
                self._metric_objects = resolve_metrics(self.metrics)  # fail fast on unknown metric names
            if store is not None:
                self._store_writer = store_writer(
                    store,
                    store_source,
                    max_queue=max_queue,
                    thresholds={m.name: (m.threshold, m.warn) for m in self._metric_objects} or None,
                )
        self._deferred = _Deferred(f"{name}-build", self._deferred_dropped, self.scorer)
        register_exit_hook(weak_hook(self._deferred, "at_exit"))  # runs before the scorer's (LIFO)

    def __repr__(self) -> str:
        return f"CaptureRecorder(mode={self.mode!r}, captured={self._counts['captured']})"

    # ------------------------------------------------------------------ capture

    def record(self, sample: Sample, target: Any = None, *, key: str | None = None) -> None:
        """Keep ``sample`` (its ``metadata["status"]``, ``"ok"`` when absent, says how it is
        counted), and in inline mode queue it for scoring when :func:`scorable`. ``target`` is
        where its result is written (see ``write_trace``); ``key`` replaces the sample id as the
        ``sample_rate`` key (e.g. a trace id, to sample whole traces alike). Never blocks."""
        status = sample.metadata.setdefault("status", "ok")
        kept = sample if self.capture_content else without_content(sample)
        offline_full = sample if self.mode == "offline" and kept is not sample else None
        with self._lock:
            self._records.append((next(self._seq), kept, target, offline_full))
            self._counts["captured"] += 1
            self._counts["errored" if status == "error" else status] += 1
            if status == "ok" and not sample.contexts and not no_retrieval_turn(sample):
                self._counts["skipped_no_contexts"] += 1
        if self.scorer is not None and scorable(sample):
            self._submit(sample, kept, target, key)

    def defer(self, build: Callable[[], Any]) -> None:
        """Run ``build()`` on the capture thread, after everything deferred before, and return at
        once: the request path's only cost. ``build`` turns the raw event data into a Sample and
        calls :meth:`record` (or :meth:`count`); its exceptions are the caller's to guard. Beyond
        :data:`MAX_DEFERRED` waiting, ``build`` is dropped and counted in ``capture_dropped``."""
        self._deferred.put(build)

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``key`` (e.g. ``capture_errors``, or one of ``counters``)."""
        with self._lock:
            self._counts[key] += n

    def _deferred_dropped(self) -> None:
        self.count("capture_dropped")
        n = self._counts["capture_dropped"]
        if n == 1 or n % 1000 == 0:
            log.warning(
                "ragmeter: the capture thread is %d runs behind; %d run(s) not captured so far", MAX_DEFERRED, n
            )

    # ------------------------------------------------------------------ results

    @property
    def samples(self) -> list[Sample]:
        """The kept samples in capture order (every status)."""
        self._deferred.drain()
        with self._lock:
            return [r[1] for r in self._records]

    @property
    def results(self) -> EvaluationResult:
        """What has been scored so far (inline worker and :meth:`evaluate`) as an
        :class:`~ragmeter.EvaluationResult` in start order (``metadata["started_at"]``). Call
        :meth:`flush` first to include pending work."""
        self._deferred.drain()
        items: list[SampleResult] = list(self._evaluated)
        if self.scorer is not None:
            items += list(self.scorer.results)
        items.sort(key=lambda r: str(r.sample.metadata.get("started_at", "")))
        thresholds = {m.name: (m.threshold, m.warn) for m in self._metrics()}
        return EvaluationResult(
            items,
            self._metric_names(items),
            judge=self._judge_name(),
            thresholds=thresholds,
            duration_s=sum(r.duration_s for r in items),
        )

    @property
    def stats(self) -> dict[str, int]:
        """Counters: the capture's (:data:`STATS_KEYS` and ``counters``), then the scorer's
        (:attr:`BackgroundScorer.STATS_KEYS <ragmeter.inline.BackgroundScorer.STATS_KEYS>`; all 0
        offline), where ``scored`` includes what :meth:`evaluate` scored."""
        self._deferred.drain()
        with self._lock:
            out = {k: self._counts.get(k, 0) for k in self._stats_keys}
            evaluated = self._counts.get("evaluated", 0)
        out.update(self.scorer.stats if self.scorer is not None else dict.fromkeys(BackgroundScorer.STATS_KEYS, 0))
        if self._store_writer is not None:
            out.update(self._store_writer.stats)
        out["scored"] += evaluated
        return out

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued sample is scored (and written to the ``store``); False if
        ``timeout`` seconds passed first. Offline mode has no scoring pending and returns True once
        what was deferred is recorded (and what :meth:`evaluate` scored is in the store)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._deferred.drain(timeout):
            return False
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if self.scorer is None:
            return True if self._store_writer is None else self._store_writer.flush(left)
        return self.scorer.flush(left)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting samples for scoring, wait for pending ones (up to ``timeout``) and stop
        the worker (and the ``store`` writer). Recording continues."""
        deadline = None if timeout is None else time.monotonic() + timeout
        drained = self._deferred.drain(timeout)
        if self.scorer is None:
            if self._store_writer is None:
                return drained
            return (
                self._store_writer.close(None if deadline is None else max(0.0, deadline - time.monotonic()))
                and drained
            )
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        done = self.scorer.shutdown(left)
        self._deferred.kick()  # runs captured during the shutdown: recorded (not scored)
        return done and drained

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
            raise RuntimeError(
                "evaluate() is for mode='offline'; inline mode scores each sample as it "
                "is captured (use flush() and results)"
            )
        self._deferred.drain()
        with self._lock:
            batch = [r for r in self._records if r[0] > self._evaluated_upto]
            if batch:
                self._evaluated_upto = max(r[0] for r in batch)
            # what was captured (content and all) is scored; results carry what is kept
            self._records = collections.deque(
                ((seq, kept, t, None) for seq, kept, t, _ in self._records), maxlen=self._records.maxlen
            )
        scored = [(full or kept, kept, t) for _, kept, t, full in batch if scorable(full or kept)]
        kwargs.setdefault("progress", False)
        kwargs.setdefault("capture_content", self.capture_content)
        if self.embedder is not None:
            kwargs.setdefault("embedder", self.embedder)
        if not scored:
            return EvaluationResult([], self._metric_names([]), judge=self._judge_name())
        result = evaluate([s for s, _, _ in scored], self.metrics, self.judge, **kwargs)
        for r, (_, kept, target) in zip(result, scored):  # results come in the order of the samples
            r.sample = kept
            self._evaluated.append(r)
            if target is not None:
                self._write(r, target)
            if self._store_writer is not None:
                self._store_writer.add(r)
        with self._lock:
            self._counts["evaluated"] += len(result)
        return result

    # ------------------------------------------------------------------ internals

    def _submit(self, sample: Sample, kept: Sample, target: Any, key: str | None) -> None:
        assert self.scorer is not None
        on_done = None if target is None else functools.partial(self._write, target=target)
        before = self.scorer.stats["dropped"]
        if not self.scorer.submit(sample, key=key, on_done=on_done, report_as=None if kept is sample else kept):
            dropped = self.scorer.stats["dropped"]
            if dropped > before and (dropped == 1 or dropped % 100 == 0):
                log.warning(
                    "ragmeter: scoring backlog full (max_queue=%d); %d sample(s) dropped so far",
                    self.scorer.max_queue,
                    dropped,
                )

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


class _Deferred:
    """A FIFO of callables run one by one, off the caller's thread (internal).

    Inline, they run on the scorer's worker thread (``runner``), so that a sample is built and
    scored in one wake-up of one thread; otherwise (offline, or once the scorer is shut down) on a
    daemon thread of their own, started on first use. :meth:`put` is the request path's cost: a
    lock, an append and a wake-up. :meth:`drain` waits until everything put so far has run (at once
    on a thread that runs them: a deferred callable or a scoring callback that reads the
    recorder). After a fork the child starts afresh."""

    def __init__(self, name: str, on_drop: Callable[[], None], runner: BackgroundScorer | None = None):
        self.name = name
        self.on_drop = on_drop
        self.runner = runner
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=weak_hook(self, "_reset"))

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._items: collections.deque = collections.deque()
        self._busy = 0  # put and not yet finished
        self._thread: threading.Thread | None = None

    def put(self, fn: Callable[[], Any]) -> None:
        """Queue ``fn``; drop it (``on_drop``) when :data:`MAX_DEFERRED` are waiting."""
        with self._lock:
            dropped = self._busy >= MAX_DEFERRED
            if not dropped:
                self._items.append(fn)
                self._busy += 1
        if dropped:
            self.on_drop()
        elif self.runner is None or not self.runner.run_on_worker(self._run_one):
            self.kick()

    def kick(self) -> None:
        """Run what is waiting on this object's own thread (the runner is gone: after its
        shutdown, callables it was given and did not run are run here)."""
        with self._lock:
            if not self._items:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
            self._work.notify()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything put so far has run; False if ``timeout`` seconds passed first."""
        if threading.current_thread() is self._thread or (self.runner is not None and self.runner.on_worker()):
            return True
        with self._lock:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def at_exit(self) -> None:
        """Interpreter exit: record what was deferred, so that scoring can wait for it."""
        self.drain(30.0)

    def _run_one(self) -> None:
        with self._lock:
            fn = self._items.popleft() if self._items else None
        if fn is None:  # taken by the other runner already
            return
        try:
            with never_raise("capture: build a sample"):
                fn()
        finally:
            with self._lock:
                self._busy -= 1
                if self._busy == 0:
                    self._idle.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._items:
                    self._work.wait()
            self._run_one()
