"""Internal: ``RagmeterSpanProcessor``: score RAG calls from the spans they produce, write the scores back.

::

    provider = TracerProvider()
    provider.add_span_processor(RagmeterSpanProcessor(metrics=[...], judge=..., tracer_provider=provider))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))   # after ragmeter's

Request path: ``on_start`` / ``on_end`` append the span to an inbox (a deque append) and return;
they never parse JSON, never block and never raise. ``on_end`` wakes the collector thread,
like the SDK's BatchSpanProcessor wakes its worker, when the ending span may finish a RAG call: a
retriever, reranker or LLM span by its convention markers, or the entry span of a call in flight;
also when the inbox holds :data:`WAKE_BATCH` spans. Otherwise the collector sleeps until the next
deadline (a grace period, an eviction) or ``schedule_delay``, whichever comes first: it does not
poll. It rebuilds each trace's span tree, finds the RAG calls in it, waits until a call has ended
(:class:`ragmeter.tracing.assembly.TraceAssembler`), builds one :class:`ragmeter.Sample` per call
and hands it to a :class:`ragmeter.inline.BackgroundScorer` (bounded backlog, counted drops). When a
sample is scored, the result goes to the sinks: by default an
:class:`~ragmeter.tracing.writer.EvaluationWriter` on ``tracer_provider``, which emits the
evaluation carrier span into the same trace.

Spans started while instrumentation is suppressed (the judge's own calls, which run under
OpenTelemetry's suppress-instrumentation flag, and ragmeter's carriers) are ignored. Calls that
never complete are evicted after ``ttl`` seconds; ``sample_rate`` keeps a deterministic share of
traces (by a hash of the trace id). ``force_flush`` and ``shutdown`` first finish the calls that
have ended and wait for their evaluations, so the exporters registered after this processor
receive the carriers before they flush.

Settings (:mod:`ragmeter.tracing.settings`): the constructor argument wins, else the environment
variable, else the default; an invalid environment value is logged as a warning and the default
used. Durations are in seconds.

* ``sample_rate`` / ``RAGMETER_SAMPLE_RATE`` (1.0): share of traces scored, 0 to 1
* ``max_queue`` / ``RAGMETER_MAX_QUEUE`` (1000): samples waiting for the scorer before drops
* ``concurrency`` / ``RAGMETER_CONCURRENCY`` (4): samples scored at once
* ``grace_period`` / ``RAGMETER_GRACE_PERIOD`` (2.0): wait for spans still open below an ended entry
* ``ttl`` / ``RAGMETER_TTL`` (300.0): a trace with no new span for this long is evicted
* ``max_buffered_spans`` / ``RAGMETER_MAX_BUFFERED_SPANS`` (100000): spans in the inbox before drops
* ``max_traces`` / ``RAGMETER_MAX_TRACES`` (10000): traces tracked at once (the oldest is evicted)
* ``schedule_delay`` / ``RAGMETER_SCHEDULE_DELAY`` (5.0): the longest the collector sleeps
* ``shutdown_timeout`` / ``RAGMETER_SHUTDOWN_TIMEOUT`` (30.0): how long ``shutdown`` waits for evaluations;
  what is still being scored then is given up (counted in ``dropped``, one warning)
* ``capture_content`` / ``RAGMETER_CAPTURE_CONTENT`` (true): False keeps no content in what the
  processor writes: results carry :func:`ragmeter.capture.without_content` samples and scores, so
  carriers, Phoenix annotations, the store and the log no question, chunk, answer, claim, quote or
  explanation (the spans it reads are the application's)
* ``store`` (None: off; no environment variable): a :class:`ragmeter.store.Store`, SQLite path or
  ``postgresql://`` URL where every result is recorded as an inline sample of source ``"otel"``
* ``evaluation_logs`` / ``RAGMETER_EVALUATION_LOGS`` (false): also emit each score as a
  ``gen_ai.evaluation.result`` log record in the evaluated span's context
  (:class:`~ragmeter.tracing.events.EvaluationLogSink`) through ``logger_provider`` (default: the
  global OpenTelemetry logger provider); giving ``logger_provider`` switches it on
* ``id_keys`` (None: :data:`~ragmeter.tracing.readers.ID_KEYS`; no environment variable): the
  document metadata keys read, in order, as a chunk's id when the span records no document id;
  a chunk with none gets a content-hash id (:func:`ragmeter.ids.content_id`)
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.tracing", "otel", "opentelemetry"):
    from opentelemetry import context as otel_context
    from opentelemetry.sdk.trace import SpanProcessor

from ragmeter.capture import capture_content_setting, without_content
from ragmeter.guard import guarded, never_raise, register_exit_hook, weak_hook
from ragmeter.inline import BackgroundScorer
from ragmeter.suppression import is_suppressed, suppressed_context
from ragmeter.tracing.assembly import TraceAssembler
from ragmeter.tracing.events import EvaluationLogSink
from ragmeter.tracing.readers import check_id_keys
from ragmeter.tracing.roles import may_end_rag_step
from ragmeter.tracing.settings import flag_setting, resolve_settings
from ragmeter.tracing.sinks import ResultSink
from ragmeter.tracing.writer import EvaluationWriter, SpanTarget

__all__ = ["RagmeterSpanProcessor", "ResultSink", "WAKE_BATCH", "ROUND_GAP"]

#: Spans in the inbox that wake the collector even when none of them may end a RAG call.
WAKE_BATCH = 512
#: Seconds between the end of one collector round and the start of the next: the spans of a
#: burst (a retriever, then the LLM, then the entry span) are handled in one round.
ROUND_GAP = 0.01

_COUNTERS = (
    "spans_dropped",
    "traces",
    "traces_sampled_out",
    "invocations",
    "samples_submitted",
    "samples_not_queued",
    "skipped_no_contexts",
    "skipped_no_answer",
    "skipped_no_question",
    "skipped_truncated",
    "not_rag",
    "late_spans",
    "evicted_incomplete",
    "evicted_traces",
    "build_errors",
    "sink_errors",
    "incomplete_at_shutdown",
)


class RagmeterSpanProcessor(SpanProcessor):
    """An OpenTelemetry span processor that scores every RAG call in the traces it sees and
    writes the results back into the same traces (see the module docstring).

    ``metrics`` / ``judge`` / ``embedder``: as for :func:`ragmeter.evaluate` (the judge is resolved
    and checked here: ValueError when it cannot work, e.g. no API key). ``tracer_provider``: where
    evaluation carriers are written (default: the global provider, if it is an SDK provider).
    ``sinks``: more result sinks, e.g. :class:`~ragmeter.tracing.PhoenixAnnotationSink`,
    :class:`~ragmeter.tracing.LangfuseScoreSink`; ``write_spans=False`` writes no carriers.
    ``evaluation_logs`` / ``logger_provider``: also emit log records; ``id_keys``: where chunk
    ids are read from (see the module docstring).
    ``should_score(sample)`` / ``on_result(result)``: as for
    :class:`~ragmeter.inline.BackgroundScorer`. ``store``: record every result in a store (see
    :class:`~ragmeter.inline.BackgroundScorer`; source ``"otel"``, counts ``store_*`` in
    :attr:`stats`). ``scorer``: share an existing BackgroundScorer
    instead (then ``metrics``, ``judge``, ``max_queue`` and ``concurrency`` are ignored, and
    ``store`` is refused: give it to the shared scorer). The
    numeric settings (``sample_rate``, ``max_queue``, ``concurrency``, ``grace_period``, ``ttl``,
    ``max_buffered_spans``, ``max_traces``, ``schedule_delay``, ``shutdown_timeout``) default to
    their ``RAGMETER_*`` environment variables (see the module docstring); ValueError when an
    argument is out of range.
    """

    def __init__(
        self,
        metrics: Iterable[Any] | None = None,
        judge: Any = None,
        *,
        tracer_provider: Any = None,
        embedder: Any = None,
        sinks: Sequence[Any] = (),
        write_spans: bool = True,
        sample_rate: float | None = None,
        max_queue: int | None = None,
        concurrency: int | None = None,
        grace_period: float | None = None,
        ttl: float | None = None,
        max_buffered_spans: int | None = None,
        max_traces: int | None = None,
        schedule_delay: float | None = None,
        shutdown_timeout: float | None = None,
        should_score: Callable[[Any], bool | None] | None = None,
        on_result: Callable[[Any], None] | None = None,
        scorer: BackgroundScorer | None = None,
        capture_content: bool | None = None,
        store: Any = None,
        evaluation_logs: bool | None = None,
        logger_provider: Any = None,
        id_keys: Sequence[str] | None = None,
    ):
        cfg = resolve_settings(
            sample_rate=sample_rate,
            max_queue=max_queue,
            concurrency=concurrency,
            grace_period=grace_period,
            ttl=ttl,
            max_buffered_spans=max_buffered_spans,
            max_traces=max_traces,
            schedule_delay=schedule_delay,
            shutdown_timeout=shutdown_timeout,
        )
        self.sample_rate: float = cfg["sample_rate"]
        self.grace_period: float = cfg["grace_period"]
        self.ttl: float = cfg["ttl"]
        self.max_buffered_spans: int = cfg["max_buffered_spans"]
        self.max_traces: int = cfg["max_traces"]
        self.schedule_delay: float = cfg["schedule_delay"]
        self.shutdown_timeout: float = cfg["shutdown_timeout"]
        self.capture_content: bool = capture_content_setting(capture_content)
        if evaluation_logs is None and logger_provider is not None:
            evaluation_logs = True
        self.evaluation_logs: bool = flag_setting("evaluation_logs", evaluation_logs)
        self.id_keys: tuple[str, ...] | None = check_id_keys(id_keys)
        if scorer is not None and store is not None:
            raise ValueError("store= goes to the shared scorer: BackgroundScorer(..., store=...)")
        self._own_scorer = scorer is None
        self.scorer = (
            scorer
            if scorer is not None
            else BackgroundScorer(
                metrics,
                judge,
                embedder=embedder,
                max_queue=cfg["max_queue"],
                concurrency=cfg["concurrency"],
                should_score=should_score,
                on_result=on_result,
                name="ragmeter-otel-scorer",
                store=store,
                store_source="otel",
            )
        )
        self.writer: EvaluationWriter | None = EvaluationWriter(tracer_provider) if write_spans else None
        self.log_sink: EvaluationLogSink | None = EvaluationLogSink(logger_provider) if self.evaluation_logs else None
        self.sinks: list[Any] = (
            ([self.writer] if self.writer is not None else [])
            + ([self.log_sink] if self.log_sink is not None else [])
            + list(sinks)
        )
        self._closed = False
        self._shutdown_done = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reset_state()
        self._start_collector()
        register_exit_hook(weak_hook(self, "_at_exit"))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=weak_hook(self, "_after_fork"))

    def _reset_state(self) -> None:
        # request path state: deque appends and set membership only
        self._inbox: collections.deque = collections.deque()
        self._ignored: set[int] = set()
        self._spans_dropped = 0
        self._sink_errors = 0
        self._wake = threading.Event()
        self._wakeups = 0  # collector rounds started by on_end (or flush / shutdown) ...
        self._timeouts = 0  # ... and by a deadline or the schedule delay
        # collector state, guarded by _state_lock
        self._state_lock = threading.RLock()
        self._assembler = TraceAssembler(
            self._submit,
            sample_rate=self.sample_rate,
            grace_period=self.grace_period,
            ttl=self.ttl,
            max_traces=self.max_traces,
            id_keys=self.id_keys,
        )
        self._watched = self._assembler.watched

    # ------------------------------------------------------------------ SpanProcessor (request path)

    @guarded("tracing: on_start")
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        """Queue the started span (ignored when instrumentation is suppressed). Never raises."""
        if self._closed:
            return
        if is_suppressed(parent_context):
            self._ignored.add(span.context.span_id)
            return
        if len(self._inbox) >= self.max_buffered_spans:
            self._spans_dropped += 1
            return
        self._inbox.append((True, span))

    @guarded("tracing: on_end")
    def on_end(self, span: Any) -> None:
        """Queue the ended span; wake the collector when it may end a RAG call. Never raises."""
        sid = span.context.span_id
        ignored = self._ignored
        if ignored and sid in ignored:
            ignored.discard(sid)
            return
        if self._closed:
            return
        inbox = self._inbox
        if len(inbox) >= self.max_buffered_spans:
            self._spans_dropped += 1
            return
        inbox.append((False, span))
        wake = self._wake
        if not wake.is_set() and (sid in self._watched or len(inbox) >= WAKE_BATCH or may_end_rag_step(span)):
            wake.set()

    @guarded("tracing: force_flush", default=False)
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Finish every RAG call whose spans have ended, wait for their evaluations (and the
        sinks), within ``timeout_millis``. Exporters registered after this processor then flush
        the carriers."""
        deadline = time.monotonic() + max(0, timeout_millis) / 1000.0
        self._process_now(force=True)
        ok = self.scorer.flush(max(0.0, deadline - time.monotonic()))
        for sink in self.sinks:
            flush = getattr(sink, "flush", None)
            if callable(flush):
                ok = bool(flush(max(0.0, deadline - time.monotonic()))) and ok
        return ok

    def shutdown(self) -> None:
        """Finish ended calls, wait for their evaluations (up to ``shutdown_timeout``), stop."""
        if self._shutdown_done:
            return
        self._shutdown_done = True
        try:
            with never_raise("tracing: shutdown"):
                self._finish(time.monotonic() + self.shutdown_timeout)
        finally:
            self._closed = True
            self._stop.set()
            self._wake.set()
            t = self._thread
            if t is not None and t is not threading.current_thread():
                t.join(timeout=2)

    def _finish(self, deadline: float) -> None:
        self._process_now(force=True, final=True)
        self._closed = True
        if self._own_scorer:
            self.scorer.shutdown(max(0.0, deadline - time.monotonic()))
        else:
            self.scorer.flush(max(0.0, deadline - time.monotonic()))
        for sink in self.sinks:
            if sink is self.writer:
                continue
            flush, stop = getattr(sink, "flush", None), getattr(sink, "shutdown", None)
            if callable(flush):
                with never_raise("tracing: flush a result sink"):
                    flush(max(0.0, deadline - time.monotonic()))
            if callable(stop):
                with never_raise("tracing: shut down a result sink"):
                    stop()

    # ------------------------------------------------------------------ public state

    @property
    def stats(self) -> dict[str, int]:
        """Counters of the processor (spans_dropped, traces, invocations, samples_submitted,
        skipped_no_contexts / no_answer / no_question / truncated, not_rag, late_spans,
        evicted_incomplete, ...) merged with the scorer's (queued, scored, dropped, failed, ...)
        and the writer's (written, failed, truncated as carriers_*)."""
        with self._state_lock:
            counts = self._assembler.counts
            out = {k: int(counts.get(k, 0)) for k in _COUNTERS}
            out["traces_tracked"] = len(self._assembler.traces)
        out["spans_dropped"] += self._spans_dropped
        out["sink_errors"] += self._sink_errors
        out.update(self.scorer.stats)
        if self.writer is not None:
            for k, v in self.writer.stats.items():
                out[f"carriers_{k}"] = v
        if self.log_sink is not None:
            for k, v in self.log_sink.stats.items():
                out[f"log_{k}"] = v
        return out

    @property
    def results(self) -> Any:
        """The scorer's recent results (a deque of :class:`ragmeter.SampleResult`)."""
        return self.scorer.results

    # ------------------------------------------------------------------ collector

    def _start_collector(self) -> None:
        self._stop.clear()
        t = threading.Thread(target=self._run, name="ragmeter-otel-collector", daemon=True)
        self._thread = t
        t.start()

    def _after_fork(self) -> None:
        # the child has no collector thread; start a fresh one with empty state
        self._reset_state()
        if not self._closed:
            self._start_collector()

    def _run(self) -> None:
        otel_context.attach(suppressed_context())  # anything scored from here runs suppressed
        timeout = self.schedule_delay
        last_round = 0.0
        while True:
            if self._wake.wait(timeout):
                self._wakeups += 1
                gap = last_round + ROUND_GAP - time.monotonic()
                if gap > 0 and self._stop.wait(gap):  # let the rest of a burst arrive
                    return
            else:
                self._timeouts += 1
            if self._stop.is_set():
                return
            self._wake.clear()  # before draining: a span queued from here on wakes the next round
            with never_raise("tracing: span collector"), self._state_lock:
                self._assembler.process(self._inbox, time.monotonic())
            last_round = time.monotonic()
            timeout = self._sleep_time()

    def _sleep_time(self) -> float:
        """Seconds until the assembler's next deadline, at most ``schedule_delay``."""
        with self._state_lock:
            deadline = self._assembler.next_deadline()
        if deadline is None:
            return self.schedule_delay
        return min(self.schedule_delay, max(0.0, deadline - time.monotonic()))

    def _process_now(self, force: bool, final: bool = False) -> None:
        """Process the inbox on the calling thread (flush, shutdown, exit), then wake the
        collector so that it sleeps until the deadlines this round has set."""
        token = otel_context.attach(suppressed_context())
        try:
            with self._state_lock:
                self._assembler.process(self._inbox, time.monotonic(), force=force, final=final)
        finally:
            otel_context.detach(token)
            self._wake.set()

    def _at_exit(self) -> None:
        # runs before the scorer's own exit hook (registered after it), so what ended gets scored
        if not self._shutdown_done:
            with never_raise("tracing: score what ended at exit"):
                self._process_now(force=True)

    def _submit(self, sample: Any, target: SpanTarget, parent: SpanTarget | None) -> bool:
        def deliver(result: Any, _t: SpanTarget = target, _p: SpanTarget | None = parent) -> None:
            for sink in self.sinks:
                with never_raise("tracing: result sink", on_error=self._sink_failed):
                    sink.write(result, _t, _p)

        kept = None if self.capture_content else without_content(sample)
        return self.scorer.submit(sample, key=target.trace_id_hex, on_done=deliver, report_as=kept)

    def _sink_failed(self, exc: BaseException) -> None:
        with self._state_lock:
            self._sink_errors += 1
