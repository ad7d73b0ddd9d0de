"""``RagmeterSpanProcessor``: score RAG calls from the spans they produce, write the scores back.

::

    provider = TracerProvider()
    provider.add_span_processor(RagmeterSpanProcessor(metrics=[...], judge=..., tracer_provider=provider))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))   # after ragmeter's

Request path: ``on_start`` / ``on_end`` append the span to an inbox (a deque append, well under a
microsecond) and return; they never parse attributes, never block and never raise. A collector
thread drains the inbox, rebuilds each trace's span tree, finds the RAG calls in it (see
:mod:`ragmeter.tracing.readers`), waits until a call has ended (its entry span and every span
below it, or a grace period after the entry ended while streaming spans are still open), builds
one :class:`ragmeter.Sample` per call and hands it to a :class:`ragmeter.inline.BackgroundScorer`
(bounded backlog, counted drops). When a sample is scored, the result goes to the sinks: by
default an :class:`~ragmeter.tracing.writer.EvaluationWriter` on ``tracer_provider``, which emits
the evaluation carrier span into the same trace.

Spans started while instrumentation is suppressed (the judge's own calls, which run under
OpenTelemetry's suppress-instrumentation flag, and ragmeter's carriers) are ignored. Calls that
never complete are evicted after ``ttl`` seconds; ``sample_rate`` keeps a deterministic share of
traces (by a hash of the trace id). ``force_flush`` and ``shutdown`` first finish the calls that
have ended and wait for their evaluations, so the exporters registered after this processor
receive the carriers before they flush.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Any, Callable, Iterable, Sequence

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import SpanProcessor

from ragmeter.inline import BackgroundScorer, register_exit_hook, sampled, weak_hook

from .readers import RAG_ROLES, EntryRef, Node, _attrs, build_sample, entry_of, invocations_for, is_conventional
from .writer import (_SUPPRESS_KEY, _SUPPRESS_KEY_PLAIN, CARRIER_MARKER, EvaluationWriter, SpanTarget,
                     suppressed_context)

__all__ = ["RagmeterSpanProcessor", "ResultSink"]

log = logging.getLogger("ragmeter")


class ResultSink:
    """What the processor hands results to: ``write(result, target, parent)`` (never raising);
    optional ``flush(timeout)`` and ``shutdown()``. :class:`EvaluationWriter` and
    :class:`~ragmeter.tracing.phoenix.PhoenixAnnotationSink` are sinks."""

    def write(self, result: Any, target: SpanTarget, parent: SpanTarget | None = None) -> None:  # pragma: no cover
        """Deliver one scored sample."""
        raise NotImplementedError


class _Group:
    """A RAG call being assembled: its entry, and when its entry and last member ended."""

    __slots__ = ("ref", "last_member", "entry_end", "retry_at", "consumed", "fresh")

    def __init__(self, ref: EntryRef):
        self.ref = ref
        self.fresh = True  # members arrived since the group was last finalized
        self.last_member = 0.0
        self.entry_end: float | None = None
        self.retry_at: float | None = None
        self.consumed: set[int] = set()


class _Trace:
    """The spans of one trace seen so far."""

    __slots__ = ("trace_id", "nodes", "open", "groups", "done", "last", "sampled")

    def __init__(self, trace_id: int, now: float, sampled_in: bool = True):
        self.trace_id = trace_id
        self.nodes: dict[int, Node] = {}
        self.open: set[int] = set()
        self.groups: dict[int, _Group] = {}
        self.done: set[int] = set()
        self.last = now
        self.sampled = sampled_in


_COUNTERS = ("spans_dropped", "traces", "traces_sampled_out", "invocations", "samples_submitted",
             "samples_not_queued", "skipped_no_contexts", "skipped_no_answer", "skipped_no_question",
             "skipped_truncated", "not_rag", "late_spans", "evicted_incomplete", "evicted_traces",
             "build_errors", "sink_errors", "incomplete_at_shutdown")


def _descends(node: Node, ancestor: int, nodes: dict[int, Node]) -> bool:
    cur = node
    for _ in range(10_000):
        pid = cur.parent_id
        if pid is None:
            return False
        if pid == ancestor:
            return True
        nxt = nodes.get(pid)
        if nxt is None:
            return False
        cur = nxt
    return False


class RagmeterSpanProcessor(SpanProcessor):
    """An OpenTelemetry span processor that scores every RAG call in the traces it sees and
    writes the results back into the same traces (see the module docstring).

    ``metrics`` / ``judge`` / ``embedder``: as for :func:`ragmeter.evaluate` (the judge is resolved
    on first use). ``tracer_provider``: where evaluation carriers are written (default: the
    global provider, if it is an SDK provider). ``sinks``: more result sinks, e.g.
    :class:`~ragmeter.tracing.PhoenixAnnotationSink`; ``write_spans=False`` writes no carriers.
    ``sample_rate``: share of traces scored, decided by a hash of the trace id. ``max_queue`` /
    ``concurrency``: the scorer's backlog and parallelism. ``grace_period``: seconds to wait for
    spans still open below an ended entry (streaming). ``ttl``: seconds after which a trace with
    no new span is evicted, its unfinished calls counted. ``max_buffered_spans``: spans waiting in
    the inbox before new ones are dropped (counted). ``should_score(sample)`` / ``on_result(result)``:
    as for :class:`~ragmeter.inline.BackgroundScorer`. ``scorer``: share an existing
    BackgroundScorer instead (then ``metrics`` / ``judge`` are ignored).
    """

    def __init__(self, metrics: Iterable[Any] | None = None, judge: Any = None, *, tracer_provider: Any = None,
                 embedder: Any = None, sinks: Sequence[Any] = (), write_spans: bool = True, sample_rate: float = 1.0,
                 max_queue: int = 1000, concurrency: int = 4, grace_period: float = 2.0, ttl: float = 300.0,
                 max_buffered_spans: int = 100_000, max_traces: int = 10_000,
                 should_score: Callable[[Any], bool | None] | None = None,
                 on_result: Callable[[Any], None] | None = None, scorer: BackgroundScorer | None = None,
                 poll_interval: float = 0.05, shutdown_timeout: float = 30.0):
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError("sample_rate must be between 0 and 1")
        if grace_period < 0 or ttl <= 0 or poll_interval <= 0:
            raise ValueError("grace_period must be >= 0, ttl and poll_interval > 0")
        if max_buffered_spans < 1 or max_traces < 1:
            raise ValueError("max_buffered_spans and max_traces must be >= 1")
        self._own_scorer = scorer is None
        self.scorer = scorer if scorer is not None else BackgroundScorer(
            metrics, judge, embedder=embedder, max_queue=max_queue, concurrency=concurrency,
            should_score=should_score, on_result=on_result, name="ragmeter-otel-scorer")
        self.writer: EvaluationWriter | None = EvaluationWriter(tracer_provider) if write_spans else None
        self.sinks: list[Any] = ([self.writer] if self.writer is not None else []) + list(sinks)
        self.sample_rate = sample_rate
        self.grace_period = grace_period
        self.ttl = ttl
        self.max_buffered_spans = max_buffered_spans
        self.max_traces = max_traces
        self.poll_interval = poll_interval
        self.shutdown_timeout = shutdown_timeout
        # request path state: only deque appends and set membership
        self._inbox: collections.deque = collections.deque()
        self._ignored: set[int] = set()
        self._spans_dropped = 0
        self._closed = False
        # collector state, guarded by _state_lock
        self._state_lock = threading.RLock()
        self._traces: dict[int, _Trace] = {}
        self._pending: set[int] = set()  # traces with groups waiting for a deadline
        self._counts: collections.Counter = collections.Counter()
        self._last_sweep = 0.0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._shutdown_done = False
        self._start_collector()
        register_exit_hook(weak_hook(self, "_at_exit"))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=weak_hook(self, "_after_fork"))

    # ------------------------------------------------------------------ SpanProcessor (request path)

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        """Queue the started span (ignored when instrumentation is suppressed). Never raises."""
        try:
            if self._closed:
                return
            ctx = parent_context if parent_context is not None else otel_context.get_current()
            if ctx.get(_SUPPRESS_KEY) or ctx.get(_SUPPRESS_KEY_PLAIN):
                self._ignored.add(span.context.span_id)
                return
            if len(self._inbox) >= self.max_buffered_spans:
                self._spans_dropped += 1
                return
            self._inbox.append((True, span))
        except Exception:  # never into the application
            pass

    def on_end(self, span: Any) -> None:
        """Queue the ended span. Never raises."""
        try:
            ignored = self._ignored
            if ignored:
                sid = span.context.span_id
                if sid in ignored:
                    ignored.discard(sid)
                    return
            if self._closed:
                return
            if len(self._inbox) >= self.max_buffered_spans:
                self._spans_dropped += 1
                return
            self._inbox.append((False, span))
        except Exception:
            pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Finish every RAG call whose spans have ended, wait for their evaluations (and the
        sinks), within ``timeout_millis``. Exporters registered after this processor then flush
        the carriers."""
        deadline = time.monotonic() + max(0, timeout_millis) / 1000.0
        try:
            self._process_now(force=True)
            ok = self.scorer.flush(max(0.0, deadline - time.monotonic()))
            for sink in self.sinks:
                flush = getattr(sink, "flush", None)
                if callable(flush):
                    ok = bool(flush(max(0.0, deadline - time.monotonic()))) and ok
            return ok
        except Exception:
            log.exception("ragmeter: force_flush failed")
            return False

    def shutdown(self) -> None:
        """Finish ended calls, wait for their evaluations (up to ``shutdown_timeout``), stop."""
        if self._shutdown_done:
            return
        self._shutdown_done = True
        try:
            deadline = time.monotonic() + self.shutdown_timeout
            self._process_now(force=True, final=True)
            self._closed = True
            if self._own_scorer:
                self.scorer.shutdown(max(0.0, deadline - time.monotonic()))
            else:
                self.scorer.flush(max(0.0, deadline - time.monotonic()))
            for sink in self.sinks:
                for name in ("flush", "shutdown"):
                    fn = getattr(sink, name, None)
                    if callable(fn) and sink is not self.writer:
                        try:
                            fn(max(0.0, deadline - time.monotonic())) if name == "flush" else fn()
                        except Exception:
                            log.exception("ragmeter: a sink failed to %s", name)
        except Exception:
            log.exception("ragmeter: shutdown failed")
        finally:
            self._closed = True
            self._stop.set()
            self._wake.set()
            t = self._thread
            if t is not None and t is not threading.current_thread():
                t.join(timeout=2)

    # ------------------------------------------------------------------ public state

    @property
    def stats(self) -> dict[str, int]:
        """Counters of the processor (spans_dropped, traces, invocations, samples_submitted,
        skipped_no_contexts / no_answer / no_question / truncated, not_rag, late_spans,
        evicted_incomplete, ...) merged with the scorer's (queued, scored, dropped, failed, ...)
        and the writer's (written, failed, truncated as carriers_*)."""
        with self._state_lock:
            out = {k: int(self._counts.get(k, 0)) for k in _COUNTERS}
            out["traces_tracked"] = len(self._traces)
        out["spans_dropped"] += self._spans_dropped
        out.update(self.scorer.stats)
        if self.writer is not None:
            for k, v in self.writer.stats.items():
                out[f"carriers_{k}"] = v
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
        self._state_lock = threading.RLock()
        self._inbox = collections.deque()
        self._traces = {}
        self._pending = set()
        self._ignored = set()
        if not self._closed:
            self._start_collector()

    def _run(self) -> None:
        otel_context.attach(suppressed_context())  # anything scored from here runs suppressed
        while not self._stop.is_set():
            self._wake.wait(self.poll_interval)
            self._wake.clear()
            try:
                with self._state_lock:
                    self._process(time.monotonic(), force=False)
            except Exception:
                log.exception("ragmeter: the span collector failed; continuing")

    def _process_now(self, force: bool, final: bool = False) -> None:
        token = otel_context.attach(suppressed_context())
        try:
            with self._state_lock:
                self._process(time.monotonic(), force=force, final=final)
        finally:
            otel_context.detach(token)

    def _at_exit(self) -> None:
        # runs before the scorer's own exit hook (registered after it), so what ended gets scored
        try:
            if not self._shutdown_done:
                self._process_now(force=True)
        except Exception:
            pass

    def _process(self, now: float, force: bool, final: bool = False) -> None:
        dirty: set[int] = set()
        inbox = self._inbox
        while inbox:
            try:
                started, span = inbox.popleft()
            except IndexError:
                break
            try:
                tid = self._on_event(started, span, now)
                if tid is not None:
                    dirty.add(tid)
            except Exception:
                self._counts["build_errors"] += 1
                log.debug("ragmeter: could not track a span", exc_info=True)
        for tid in dirty | self._pending:
            tr = self._traces.get(tid)
            if tr is None:
                self._pending.discard(tid)
                continue
            self._check(tr, now, force, final)
        if final:
            for tr in list(self._traces.values()):
                self._check(tr, now, True, True)
                self._counts["incomplete_at_shutdown"] += len(tr.groups)
            self._traces.clear()
            self._pending.clear()
        elif now - self._last_sweep >= min(1.0, self.ttl / 4):
            self._last_sweep = now
            self._sweep(now)

    def _on_event(self, started: bool, span: Any, now: float) -> int | None:
        ctx = span.context
        tid = ctx.trace_id
        tr = self._traces.get(tid)
        if tr is None:
            keep = self.sample_rate >= 1.0 or sampled(format(tid, "032x"), self.sample_rate)
            tr = self._traces[tid] = _Trace(tid, now, keep)
            self._counts["traces"] += 1
            if not keep:
                self._counts["traces_sampled_out"] += 1
            if len(self._traces) > self.max_traces:
                self._evict_oldest()
        tr.last = now
        if not tr.sampled:
            return None
        sid = ctx.span_id
        node = tr.nodes.get(sid)
        if node is None and _attrs(span).get(CARRIER_MARKER):
            return None  # an evaluation carrier (written outside a suppressed context): not the app's
        if started:
            if node is None:
                tr.nodes[sid] = Node(span)
                tr.open.add(sid)
            return tid
        if node is None:  # its start was not seen (dropped, or started before we were added)
            node = tr.nodes[sid] = Node(span)
        node.end(span, now)
        tr.open.discard(sid)
        group = tr.groups.get(sid)
        if group is not None:
            group.entry_end = now
        if node.role in RAG_ROLES:
            ref = entry_of(node, tr.nodes)
            if ref.span_id in tr.done:
                self._counts["late_spans"] += 1
                return tid
            g = tr.groups.get(ref.span_id)
            if g is None:
                g = tr.groups[ref.span_id] = _Group(ref)
                entry = tr.nodes.get(ref.span_id)
                if entry is not None and entry.ended:
                    g.entry_end = entry.ended_at
            g.last_member = now
            g.fresh = True
        return tid

    def _open_below(self, tr: _Trace, entry_id: int, conventional_only: bool) -> bool:
        for sid in tr.open:
            n = tr.nodes.get(sid)
            if n is None or sid == entry_id:
                continue
            if conventional_only and not is_conventional(n):
                continue
            if _descends(n, entry_id, tr.nodes):
                return True
        return False

    def _check(self, tr: _Trace, now: float, force: bool, final: bool) -> None:
        waiting = False
        grace = self.grace_period
        for eid, g in list(tr.groups.items()):
            entry = tr.nodes.get(eid)
            entry_ended = entry is not None and entry.ended
            if g.retry_at is not None and now < g.retry_at and not force:
                waiting = True
                continue
            if not g.ref.synthetic:
                if not entry_ended:
                    continue  # in flight (TTL evicts it if it never ends)
                ready = force or not self._open_below(tr, eid, False) or (now - (g.entry_end or now)) >= grace
            else:
                if not g.fresh and not entry_ended:
                    continue  # segments so far are scored; wait for more members or the entry's end
                open_conv = self._open_below(tr, eid, True)
                ready = (force and (entry_ended or not open_conv)) or (not open_conv and (
                    entry_ended or now - g.last_member >= grace)) or (
                    entry_ended and now - (g.entry_end or now) >= grace)
            if not ready:
                waiting = True
                continue
            if self._finalize(tr, g, entry_ended, now, force):
                tr.groups.pop(eid, None)
                if not g.ref.synthetic or entry_ended:
                    tr.done.add(eid)
            else:
                waiting = True
        if waiting:
            self._pending.add(tr.trace_id)
        else:
            self._pending.discard(tr.trace_id)

    def _finalize(self, tr: _Trace, g: _Group, entry_ended: bool, now: float, force: bool) -> bool:
        """Build and submit the samples of a ready group. False: keep the group (waiting for a
        streamed answer, or a synthetic entry that may get more segments)."""
        invocations = invocations_for(g.ref, tr.nodes, tr.trace_id, {}, g.consumed)
        g.fresh = False
        results = []
        for inv in invocations:
            try:
                results.append(build_sample(inv))
            except Exception:
                self._counts["build_errors"] += 1
                log.exception("ragmeter: could not build a sample from a trace")
        if (not force and not g.ref.synthetic and g.retry_at is None and g.entry_end is not None
                and any(r.reason == "no_answer" for r in results) and now - g.entry_end < self.grace_period):
            g.retry_at = g.entry_end + self.grace_period  # a streamed answer may still arrive
            return False
        for r in results:
            inv = r.invocation
            g.consumed.update(s.context.span_id for s in inv.members)
            self._counts["invocations"] += 1
            if r.sample is None:
                key = "not_rag" if r.reason == "not_rag" else f"skipped_{r.reason}"
                self._counts[key] += 1
                continue
            target_span = inv.target
            target = SpanTarget(tr.trace_id, inv.target_id, getattr(target_span, "name", None))
            parent = None
            if inv.entry_id != inv.target_id:
                entry_name = getattr(inv.entry, "name", None) if inv.entry is not None else None
                parent = SpanTarget(tr.trace_id, inv.entry_id, entry_name)
            self._submit(r.sample, target, parent)
        return not g.ref.synthetic or entry_ended or force

    def _submit(self, sample: Any, target: SpanTarget, parent: SpanTarget | None) -> None:
        def deliver(result: Any, _t: SpanTarget = target, _p: SpanTarget | None = parent) -> None:
            for sink in self.sinks:
                try:
                    sink.write(result, _t, _p)
                except Exception:
                    with self._state_lock:
                        self._counts["sink_errors"] += 1
                    log.exception("ragmeter: a result sink failed")

        if self.scorer.submit(sample, key=target.trace_id_hex, on_done=deliver):
            self._counts["samples_submitted"] += 1
        else:
            self._counts["samples_not_queued"] += 1

    def _sweep(self, now: float) -> None:
        linger = max(self.grace_period, self.poll_interval * 4)
        for tid, tr in list(self._traces.items()):
            idle = now - tr.last
            if idle >= self.ttl:
                self._counts["evicted_incomplete"] += len(tr.groups)
                self._counts["evicted_traces"] += 1
                del self._traces[tid]
                self._pending.discard(tid)
            elif not tr.open and not tr.groups and idle >= linger:
                del self._traces[tid]
                self._pending.discard(tid)

    def _evict_oldest(self) -> None:
        oldest = min(self._traces.values(), key=lambda t: t.last)
        self._counts["evicted_incomplete"] += len(oldest.groups)
        self._counts["evicted_traces"] += 1
        del self._traces[oldest.trace_id]
        self._pending.discard(oldest.trace_id)
