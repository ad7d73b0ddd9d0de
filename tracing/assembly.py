"""Internal: The span processor's collector state: the spans of each trace seen so far, the RAG calls being
assembled, and when each call is ready to be scored.

:class:`TraceAssembler` is fed the started / ended spans the processor queued and decides, for each
RAG call (see :mod:`ragmeter.tracing.grouping`), when it has ended: its entry span and every span
below it, or a grace period after the entry ended while streaming spans are still open. A ready
call becomes one sample per invocation (:func:`ragmeter.tracing.samples.build_sample`), handed to
``submit``. Besides that it tells the processor when to look again: :attr:`watched` holds the entry
span ids of the calls in flight (their end wakes the worker) and :meth:`next_deadline` the next
time a call may become ready or a trace may be evicted, with no span to wake the worker.

Not thread-safe: the processor calls it under its lock, off the request path.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ragmeter.guard import never_raise
from ragmeter.inline import sampled
from ragmeter.tracing.attributes import span_attributes
from ragmeter.tracing.grouping import EntryRef, Node, entry_of, invocations_for, is_conventional
from ragmeter.tracing.roles import RAG_ROLES
from ragmeter.tracing.samples import build_sample
from ragmeter.tracing.writer import CARRIER_MARKER, SpanTarget

__all__ = ["TraceAssembler"]

log = logging.getLogger("ragmeter")

Submit = Callable[[Any, SpanTarget, "SpanTarget | None"], bool]


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

    __slots__ = ("trace_id", "nodes", "open", "groups", "done", "last", "sampled", "deadline")

    def __init__(self, trace_id: int, now: float, sampled_in: bool = True):
        self.trace_id = trace_id
        self.nodes: dict[int, Node] = {}
        self.open: set[int] = set()
        self.groups: dict[int, _Group] = {}
        self.done: set[int] = set()
        self.last = now
        self.sampled = sampled_in
        self.deadline: float | None = None  # when a waiting group may become ready by time alone


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


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None or a <= b else b


class TraceAssembler:
    """Spans in (:meth:`process`), ready RAG calls out (``submit(sample, target, parent)``, which
    returns whether the sample was queued). ``sample_rate``: share of traces kept (by a hash of
    the trace id); ``grace_period``: seconds to wait for spans still open below an ended entry;
    ``ttl``: seconds after which a trace with no new span is evicted; ``max_traces``: traces
    tracked at once (the oldest is evicted beyond); ``id_keys``: document metadata keys read as
    chunk ids (:func:`~ragmeter.tracing.samples.build_sample`). :attr:`counts` counts what happened."""

    def __init__(
        self,
        submit: Submit,
        *,
        sample_rate: float,
        grace_period: float,
        ttl: float,
        max_traces: int,
        id_keys: Sequence[str] | None = None,
    ):
        self.submit = submit
        self.id_keys = id_keys
        self.sample_rate = sample_rate
        self.grace_period = grace_period
        self.ttl = ttl
        self.max_traces = max_traces
        self.linger = max(grace_period, 0.2)  # a finished trace is kept this long for late spans
        self.traces: dict[int, _Trace] = {}
        self.pending: set[int] = set()  # traces with groups waiting for a deadline
        self.counts: collections.Counter = collections.Counter()
        #: Entry span ids of the calls in flight: the processor wakes its worker when one ends.
        #: Only ever added to while spans are being drained, so an entry that ends meanwhile is
        #: either still in the queue being drained or found here by the processor's ``on_end``.
        self.watched: set[int] = set()
        self._sweep_at: float | None = None

    # ------------------------------------------------------------------ the processor's calls

    def process(self, inbox: collections.deque, now: float, force: bool = False, final: bool = False) -> None:
        """Drain ``inbox`` (``(started, span)`` pairs), then finish every call that is ready;
        ``force``: do not wait for grace periods or open spans; ``final``: also give up on calls
        that have not ended (counted in ``incomplete_at_shutdown``) and forget everything."""
        dirty: set[int] = set()
        while inbox:
            try:
                started, span = inbox.popleft()
            except IndexError:
                break
            try:
                tid = self._add(started, span, now)
            except Exception:  # a malformed span: counted, the others are still tracked
                self.counts["build_errors"] += 1
                log.debug("ragmeter: could not track a span", exc_info=True)
                continue
            if tid is not None:
                dirty.add(tid)
        for tid in dirty | self.pending:
            tr = self.traces.get(tid)
            if tr is None:
                self.pending.discard(tid)
                continue
            self._check(tr, now, force)
        if final:
            for tr in list(self.traces.values()):
                self._check(tr, now, True)
                self.counts["incomplete_at_shutdown"] += len(tr.groups)
            self.traces.clear()
            self.pending.clear()
            self.watched.clear()
            self._sweep_at = None
        elif self._sweep_at is not None and now >= self._sweep_at:
            self._sweep(now)

    def next_deadline(self) -> float | None:
        """The next monotonic time at which a call may become ready, or a trace may be evicted,
        without any span ending first (None: nothing to wait for)."""
        deadline = self._sweep_at
        for tid in self.pending:
            tr = self.traces.get(tid)
            if tr is not None:
                deadline = _earliest(deadline, tr.deadline)
        return deadline

    # ------------------------------------------------------------------ tracking spans

    def _add(self, started: bool, span: Any, now: float) -> int | None:
        ctx = span.context
        tid = ctx.trace_id
        tr = self.traces.get(tid)
        if tr is None:
            keep = self.sample_rate >= 1.0 or sampled(format(tid, "032x"), self.sample_rate)
            tr = self.traces[tid] = _Trace(tid, now, keep)
            self.counts["traces"] += 1
            if not keep:
                self.counts["traces_sampled_out"] += 1
            if len(self.traces) > self.max_traces:
                self._evict_oldest()
            self._sweep_at = _earliest(self._sweep_at, now + min(self.linger, self.ttl))
        tr.last = now
        if not tr.sampled:
            return None
        sid = ctx.span_id
        node = tr.nodes.get(sid)
        if node is None and span_attributes(span).get(CARRIER_MARKER):
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
                self.counts["late_spans"] += 1
                return tid
            g = tr.groups.get(ref.span_id)
            if g is None:
                g = tr.groups[ref.span_id] = _Group(ref)
                self.watched.add(ref.span_id)
                entry = tr.nodes.get(ref.span_id)
                if entry is not None and entry.ended:
                    g.entry_end = entry.ended_at
            g.last_member = now
            g.fresh = True
        return tid

    # ------------------------------------------------------------------ readiness

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

    def _check(self, tr: _Trace, now: float, force: bool) -> None:
        waiting = False
        deadline: float | None = None
        grace = self.grace_period
        for eid, g in list(tr.groups.items()):
            entry = tr.nodes.get(eid)
            entry_ended = entry is not None and entry.ended
            if g.retry_at is not None and now < g.retry_at and not force:
                waiting = True
                deadline = _earliest(deadline, g.retry_at)
                continue
            entry_end = g.entry_end if g.entry_end is not None else now
            if not g.ref.synthetic:
                if not entry_ended:
                    continue  # in flight: its end wakes the worker (TTL evicts it if it never ends)
                ready = force or not self._open_below(tr, eid, False) or now - entry_end >= grace
                wait_until: float | None = entry_end + grace
            else:
                if not g.fresh and not entry_ended:
                    continue  # segments so far are scored; wait for more members or the entry's end
                open_conv = self._open_below(tr, eid, True)
                ready = (
                    (force and (entry_ended or not open_conv))
                    or (not open_conv and (entry_ended or now - g.last_member >= grace))
                    or (entry_ended and now - entry_end >= grace)
                )
                # not ready: a grace period runs from the entry's end, or from the last member while
                # nothing conventional is open below; otherwise an ending span wakes the worker
                wait_until = entry_end + grace if entry_ended else (g.last_member + grace if not open_conv else None)
            if not ready:
                waiting = True
                deadline = _earliest(deadline, wait_until)
                continue
            if self._finalize(tr, g, entry_ended, now, force):
                tr.groups.pop(eid, None)
                self.watched.discard(eid)
                if not g.ref.synthetic or entry_ended:
                    tr.done.add(eid)
            else:
                waiting = True
                deadline = _earliest(deadline, g.retry_at)
        tr.deadline = deadline
        if waiting:
            self.pending.add(tr.trace_id)
        else:
            self.pending.discard(tr.trace_id)

    def _finalize(self, tr: _Trace, g: _Group, entry_ended: bool, now: float, force: bool) -> bool:
        """Build and submit the samples of a ready group. False: keep the group (waiting for a
        streamed answer, or a synthetic entry that may get more segments)."""
        invocations = invocations_for(g.ref, tr.nodes, tr.trace_id, {}, g.consumed)
        g.fresh = False
        results = []
        for inv in invocations:  # one failing invocation is counted; the others are still scored
            with never_raise("tracing: build a sample from a trace", on_error=self._build_failed):
                results.append(build_sample(inv, id_keys=self.id_keys))
        if (
            not force
            and not g.ref.synthetic
            and g.retry_at is None
            and g.entry_end is not None
            and any(r.reason == "no_answer" for r in results)
            and now - g.entry_end < self.grace_period
        ):
            g.retry_at = g.entry_end + self.grace_period  # a streamed answer may still arrive
            return False
        for r in results:
            inv = r.invocation
            g.consumed.update(s.context.span_id for s in inv.members)
            self.counts["invocations"] += 1
            if r.sample is None:
                key = "not_rag" if r.reason == "not_rag" else f"skipped_{r.reason}"
                self.counts[key] += 1
                continue
            target = SpanTarget(tr.trace_id, inv.target_id, getattr(inv.target, "name", None))
            parent = None
            if inv.entry_id != inv.target_id:
                entry_name = getattr(inv.entry, "name", None) if inv.entry is not None else None
                parent = SpanTarget(tr.trace_id, inv.entry_id, entry_name)
            if self.submit(r.sample, target, parent):
                self.counts["samples_submitted"] += 1
            else:
                self.counts["samples_not_queued"] += 1
        return not g.ref.synthetic or entry_ended or force

    def _build_failed(self, exc: BaseException) -> None:
        self.counts["build_errors"] += 1

    # ------------------------------------------------------------------ eviction

    def _forget(self, tr: _Trace) -> None:
        del self.traces[tr.trace_id]
        self.pending.discard(tr.trace_id)
        self.watched.difference_update(tr.groups)

    def _sweep(self, now: float) -> None:
        next_at: float | None = None
        for tr in list(self.traces.values()):
            idle = now - tr.last
            if idle >= self.ttl:
                self.counts["evicted_incomplete"] += len(tr.groups)
                self.counts["evicted_traces"] += 1
                self._forget(tr)
            elif not tr.open and not tr.groups and idle >= self.linger:
                self._forget(tr)
            else:
                finished = not tr.open and not tr.groups
                next_at = _earliest(next_at, tr.last + (min(self.linger, self.ttl) if finished else self.ttl))
        # a sweep visits every trace: at most one per second (ttl / 4 when shorter)
        self._sweep_at = None if next_at is None else max(next_at, now + min(1.0, self.ttl / 4))

    def _evict_oldest(self) -> None:
        oldest = min(self.traces.values(), key=lambda t: t.last)
        self.counts["evicted_incomplete"] += len(oldest.groups)
        self.counts["evicted_traces"] += 1
        self._forget(oldest)
