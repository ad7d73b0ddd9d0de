"""Internal: Which spans make one RAG call: the span tree of a trace, the entry of each call, its members.

One :class:`Invocation` per RAG call. The *entry* of a retriever / reranker / LLM span is found by
walking up its parents while they are convention spans (or come from an LLM-framework
instrumentation scope): the topmost one is the entry. When the walk stops at the leaf itself
(GenAI or hand-made spans with no framework chain above them), the entry is the leaf's parent (a
*synthetic* entry, e.g. the application's own ``rag`` or HTTP span), and the calls below it are
split into retrieve -> generate segments, one sample each: a retrieval that follows a retrieval
and a generation starts the next segment; LLM calls before a segment's first retrieval (a chat
app condensing the follow-up question) belong to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ragmeter.tracing.attributes import span_attributes
from ragmeter.tracing.roles import (
    LEAF_ROLES,
    RAG_ROLES,
    ROLE_LLM,
    ROLE_RERANKER,
    ROLE_RETRIEVER,
    is_framework_scope,
    span_role,
)
from ragmeter.tracing.writer import CARRIER_MARKER

__all__ = [
    "Node",
    "EntryRef",
    "Invocation",
    "is_conventional",
    "entry_of",
    "members_of",
    "invocations_for",
    "find_invocations",
]


def _scope(span: Any) -> str:
    scope = getattr(span, "instrumentation_scope", None)
    return (getattr(scope, "name", None) or "") if scope is not None else ""


class Node:
    """One span of a trace as the grouping sees it: ids, scope, and (once ended) its role.

    ``span`` is the SDK span object (live or ended) or an offline span; only immutable fields
    are read while it is live.
    """

    __slots__ = (
        "span",
        "span_id",
        "parent_id",
        "remote_parent",
        "scope",
        "ended",
        "role",
        "start_ns",
        "end_ns",
        "ended_at",
    )

    def __init__(self, span: Any):
        ctx = span.context
        parent = span.parent
        self.span = span
        self.span_id: int = ctx.span_id
        self.parent_id: int | None = parent.span_id if parent is not None and parent.span_id else None
        self.remote_parent: bool = bool(parent is not None and getattr(parent, "is_remote", False))
        self.scope: str = _scope(span)
        self.ended = False
        self.role: str | None = None
        self.start_ns: int = getattr(span, "start_time", None) or 0
        self.end_ns: int = 0
        self.ended_at: float = 0.0  # monotonic seconds, set by the processor

    def end(self, span: Any, now: float = 0.0) -> None:
        """Mark ended and read the role from the final attributes."""
        self.span = span
        self.ended = True
        self.ended_at = now
        self.end_ns = getattr(span, "end_time", None) or 0
        self.role = span_role(span)


def is_conventional(node: Node) -> bool:
    """Whether ``node`` is part of a framework's call: a convention span, or a span from an
    LLM-framework scope (live spans: a peek at a few keys, attributes may still be missing)."""
    if node.ended:
        return node.role is not None or is_framework_scope(node.scope)
    if is_framework_scope(node.scope):
        return True
    try:
        return span_role(node.span) is not None
    except Exception:  # a live span's attributes changed under us: treat as plain
        return False


@dataclass(frozen=True)
class EntryRef:
    """Where a RAG span belongs: the entry span id, and whether the entry is synthetic (a plain
    parent span above leaf convention spans) or virtual (a parent this process never saw)."""

    span_id: int
    synthetic: bool = False
    virtual: bool = False


def entry_of(node: Node, nodes: Mapping[int, Node]) -> EntryRef:
    """The entry of ``node``'s RAG call (see the module docstring)."""
    cur = node
    parent: Node | None = None
    for _ in range(10_000):  # guards against cycles in malformed input
        parent = None if (cur.parent_id is None or cur.remote_parent) else nodes.get(cur.parent_id)
        if parent is not None and is_conventional(parent):
            cur = parent
            continue
        break
    if cur.role in LEAF_ROLES or (cur is node and cur.role is None):
        if parent is not None:
            return EntryRef(parent.span_id, synthetic=True)
        if cur.parent_id is not None:
            return EntryRef(cur.parent_id, synthetic=True, virtual=True)
    return EntryRef(cur.span_id)


@dataclass
class Invocation:
    """One RAG call: its entry (None when virtual), the spans that belong to it, and the span the
    evaluation is about (``target``: the entry, or for a synthetic entry the segment's LLM span).
    ``parent_id`` is where the evaluation carrier hangs (the entry span id). ``entry_retrieves``:
    whether any retriever / reranker span below the entry is known (in this segment or another),
    so an invocation without one is a call that retrieved nothing at all."""

    trace_id: int
    entry_id: int
    entry: Any
    members: list
    target: Any
    synthetic: bool = False
    segment: int = 0
    entry_retrieves: bool = False

    @property
    def target_id(self) -> int:
        """The judged span's id."""
        return self.target.context.span_id if self.target is not None else self.entry_id


def _sort_key(span: Any) -> tuple[int, int]:
    return (getattr(span, "start_time", None) or 0, getattr(span, "end_time", None) or 0)


def members_of(
    entry: EntryRef,
    nodes: Mapping[int, Node],
    roles: dict[int, EntryRef] | None = None,
    exclude: set[int] | frozenset = frozenset(),
) -> list[Any]:
    """The ended convention spans whose entry is ``entry`` (sorted by start time), leaving out
    the span ids in ``exclude``."""
    out = []
    for n in nodes.values():
        if not n.ended or n.span_id == entry.span_id or n.role is None or n.span_id in exclude:
            continue
        ref = roles.get(n.span_id) if roles is not None else None
        if ref is None:
            ref = entry_of(n, nodes)
            if roles is not None:
                roles[n.span_id] = ref
        if ref.span_id == entry.span_id:
            out.append(n.span)
    out.sort(key=_sort_key)
    return out


def invocations_for(
    entry: EntryRef,
    nodes: Mapping[int, Node],
    trace_id: int,
    cache: dict[int, EntryRef] | None = None,
    exclude: set[int] | frozenset = frozenset(),
) -> list[Invocation]:
    """The invocations of one entry: one for a framework entry, one per retrieve -> generate
    segment for a synthetic one (members in ``exclude`` were already used)."""
    every = members_of(entry, nodes, cache)
    members = [s for s in every if s.context.span_id not in exclude] if exclude else every
    retrieves = any(span_role(s) in (ROLE_RETRIEVER, ROLE_RERANKER) for s in every)
    node = nodes.get(entry.span_id)
    entry_span = node.span if node is not None and node.ended else None
    if not entry.synthetic:
        return [
            Invocation(
                trace_id,
                entry.span_id,
                entry_span,
                members,
                entry_span or (members[-1] if members else None),
                entry_retrieves=retrieves,
            )
        ]
    segments: list[list[Any]] = []
    current: list[Any] = []
    retrieved = generated = False  # in the current segment: a retrieval, and a generation after it
    for span in members:
        role = span_role(span)
        if role in (ROLE_RETRIEVER, ROLE_RERANKER):
            if generated:
                segments.append(current)
                current, generated = [], False
            retrieved = True
        elif role == ROLE_LLM and retrieved:
            generated = True
        current.append(span)
    if current:
        segments.append(current)
    out = []
    for i, seg in enumerate(segments):
        llms = [s for s in seg if span_role(s) == ROLE_LLM]
        target = max(llms, key=lambda s: getattr(s, "end_time", None) or 0) if llms else seg[0]
        out.append(
            Invocation(
                trace_id, entry.span_id, entry_span, seg, target, synthetic=True, segment=i, entry_retrieves=retrieves
            )
        )
    return out


def find_invocations(spans: Iterable[Any]) -> list[Invocation]:
    """Every RAG invocation in a complete set of ended spans (several traces allowed), in start
    order. Evaluation carriers written by ragmeter (:data:`~ragmeter.tracing.writer.CARRIER_MARKER`)
    are left out."""
    by_trace: dict[int, dict[int, Node]] = {}
    for span in spans:
        if span_attributes(span).get(CARRIER_MARKER):
            continue
        n = Node(span)
        n.end(span)
        by_trace.setdefault(span.context.trace_id, {})[n.span_id] = n
    out: list[Invocation] = []
    for trace_id, nodes in by_trace.items():
        cache: dict[int, EntryRef] = {}
        entries: dict[int, EntryRef] = {}
        for n in sorted(nodes.values(), key=lambda x: x.start_ns):
            if n.role in RAG_ROLES:
                ref = cache.get(n.span_id) or entry_of(n, nodes)
                cache[n.span_id] = ref
                entries.setdefault(ref.span_id, ref)
        for ref in entries.values():
            out.extend(invocations_for(ref, nodes, trace_id, cache))
    out.sort(key=lambda inv: _sort_key(inv.entry if inv.entry is not None else inv.target))
    return out
