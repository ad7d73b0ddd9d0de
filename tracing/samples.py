"""Internal: One :class:`ragmeter.Sample` per RAG call: question, contexts and answer read from its spans,
or the reason there is none (counted by the processor and ``evaluate_traces``, never scored as
zero). Calls of a chat session (``session.id`` / ``gen_ai.conversation.id``) are turns of one
conversation (see :func:`build_sample` and :func:`build_samples`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.capture import REFERENCE_KEY, RELEVANT_KEY
from ragmeter.conversations import NO_RETRIEVAL_KEY
from ragmeter.data import MAX_HISTORY
from ragmeter.ids import CONTENT_HASH, ID_SOURCE_KEY, content_id
from ragmeter.tracing.attributes import parse_json, span_attributes, usable_text
from ragmeter.tracing.grouping import Invocation, find_invocations
from ragmeter.tracing.readers import (
    answer_of,
    chat_history_of,
    conversation_id_of,
    documents_of,
    llm_output_of,
    llm_question_of,
    question_of,
    template_context_of,
)
from ragmeter.tracing.roles import ROLE_LLM, ROLE_RERANKER, ROLE_RETRIEVER, convention_of, span_role

__all__ = ["SKIP_REASONS", "BuildResult", "build_sample", "build_samples", "conversation_of"]

#: Why an invocation gave no sample (the processor and ``evaluate_traces`` count these).
SKIP_REASONS = ("no_contexts", "no_answer", "no_question", "truncated", "not_rag")


@dataclass
class BuildResult:
    """A sample built from an invocation, or why none was (``reason`` in :data:`SKIP_REASONS`)."""

    invocation: Invocation
    sample: Any = None
    reason: str | None = None
    detail: str = ""


def _hex(v: int, width: int) -> str:
    return format(v, f"0{width}x")


def _choose_docs(
    members: Sequence[Any], id_keys: Sequence[str] | None = None
) -> tuple[list[dict], list[Any], bool, str]:
    """Documents for the sample: the last reranker's output, else every retriever's documents
    (de-duplicated, in retrieval order). Returns items, source spans, truncated, source name."""
    rerankers = [s for s in members if span_role(s) == ROLE_RERANKER]
    for span in reversed(rerankers):
        docs = documents_of(span, id_keys)
        usable = [d for d in docs.items if usable_text(d["text"])]
        if usable:
            return usable, [span] * len(usable), docs.truncated, "reranker"
    items: list[dict] = []
    spans: list[Any] = []
    truncated = False
    seen: set = set()
    for span in members:
        if span_role(span) != ROLE_RETRIEVER:
            continue
        docs = documents_of(span, id_keys)
        truncated = truncated or (docs.truncated and bool(docs.items))
        for d in docs.items:
            if not usable_text(d["text"]):
                continue
            key = (d["id"], d["text"]) if d["id"] else (None, d["text"])
            if key in seen or (d["id"] is None and any(k[1] == d["text"] for k in seen)):
                continue
            seen.add(key)
            items.append(d)
            spans.append(span)
    return items, spans, truncated, "retriever"


def build_sample(inv: Invocation, id_keys: Sequence[str] | None = None) -> BuildResult:
    """A :class:`ragmeter.Sample` from an invocation, with the trace in ``metadata["otel"]``.

    Chunk ids: the document's own id, else the first of ``id_keys`` (default
    :data:`~ragmeter.tracing.readers.ID_KEYS`) in its metadata (the context's
    ``metadata["id_source"]`` is then ``"metadata.<key>"``), else a content-hash id
    (:func:`ragmeter.ids.content_id`, ``metadata["id_source"] == "content_hash"``).
    ``relevant_ids`` and ``reference`` are read from the entry span's OpenInference ``metadata``
    (LangChain's ``config["metadata"]``, as with the callback handler) when it holds them.

    A call of a chat session (:func:`conversation_of`) carries ``conversation_id``; the user's
    message as ``question`` (the entry's input, else what the answering LLM call answered) and the
    retrieval query as ``standalone_question`` when they differ after the first turn; its
    ``history`` (the messages before the question in the input of its last LLM call that has
    input messages, the last :data:`~ragmeter.data.MAX_HISTORY` kept) and ``turn`` (user
    messages in that history + 1: an app that does not send the history to its LLM gets turn 1
    here, and :func:`build_samples` numbers by start time instead). A session call whose entry
    ran LLMs but no retriever at all is a no-retrieval turn: a sample without contexts,
    ``metadata["no_retrieval"]`` True."""
    from ragmeter.data import RecordError, Sample

    members = inv.members
    roles = [span_role(s) for s in members]
    has_retrieval = any(r in (ROLE_RETRIEVER, ROLE_RERANKER) for r in roles)
    llms = [s for s, r in zip(members, roles) if r == ROLE_LLM]
    conversation = conversation_of(inv)
    no_retrieval = (
        not has_retrieval
        and conversation is not None
        and bool(llms)
        and not inv.entry_retrieves
        and inv.entry is not None
    )
    if not has_retrieval and not no_retrieval:
        return BuildResult(inv, reason="not_rag", detail="no retriever span")
    items: list[dict] = []
    doc_spans: list[Any] = []
    source = None
    if has_retrieval:
        items, doc_spans, truncated, source = _choose_docs(members, id_keys)
        if not items or truncated:
            ctx_text = next((t for t in (template_context_of(s) for s in reversed(llms)) if t), None)
            if ctx_text:
                items, doc_spans, truncated, source = (
                    [{"text": ctx_text, "id": None, "score": None, "metadata": {}, "position": None}],
                    [None],
                    False,
                    "prompt_template",
                )
        if truncated:
            return BuildResult(
                inv,
                reason="truncated",
                detail="the retriever span dropped attributes (span limits): its document list is incomplete",
            )
        if not items:
            if any(
                getattr(s, "dropped_attributes", 0)
                for s, r in zip(members, roles)
                if r in (ROLE_RETRIEVER, ROLE_RERANKER)
            ):
                return BuildResult(
                    inv,
                    reason="truncated",
                    detail="the retriever span dropped attributes (span limits): no complete document list",
                )
            return BuildResult(
                inv, reason="no_contexts", detail="no document text on the retriever spans (content capture off?)"
            )
    entry = inv.entry if not inv.synthetic else None
    answer = answer_of(entry) if entry is not None else None
    if not answer:
        ended = sorted(llms, key=lambda s: getattr(s, "end_time", 0) or 0)
        answer = next((t for t in (llm_output_of(s) for s in reversed(ended)) if t), None)
    if not answer:
        return BuildResult(
            inv,
            reason="no_answer",
            detail="no answer text (streaming placeholder, content capture off or attributes dropped)",
        )
    question = question_of(entry) if entry is not None else None
    query = next(
        (q for q in (question_of(s) for s, r in zip(members, roles) if r in (ROLE_RETRIEVER, ROLE_RERANKER)) if q), None
    )
    question = question or query or next((t for t in (llm_question_of(s) for s in llms) if t), None)
    if not question:
        return BuildResult(inv, reason="no_question", detail="no question text on the entry, retriever or LLM spans")
    contexts = []
    for d in items:
        c: dict[str, Any] = {"text": d["text"]}
        cmeta = dict(d["metadata"] or {})
        if d["id"] is not None:
            c["id"] = d["id"]
            if d.get("id_source"):
                cmeta[ID_SOURCE_KEY] = d["id_source"]
        elif isinstance(d["text"], str):  # no id in the trace: a stable id from the text, marked
            c["id"] = content_id(d["text"])
            cmeta[ID_SOURCE_KEY] = CONTENT_HASH
        if d["score"] is not None:
            c["score"] = d["score"]
        if cmeta:
            c["metadata"] = cmeta
        contexts.append(c)
    truth = _ground_truth(entry) if entry is not None else {}
    trace_hex = _hex(inv.trace_id, 32)
    target = inv.target
    otel: dict[str, Any] = {
        "trace_id": trace_hex,
        "entry_span_id": _hex(inv.entry_id, 16),
        "target_span_id": _hex(inv.target_id, 16),
        "target_name": getattr(target, "name", None),
        "convention": next(
            (c for c in (convention_of(s) for s in ([entry] if entry is not None else []) + list(members)) if c), None
        ),
        "contexts_source": source,
        "documents": [
            [_hex(s.context.span_id, 16) if s is not None else None, d["position"]] for s, d in zip(doc_spans, items)
        ],
    }
    if inv.synthetic:
        otel["segment"] = inv.segment
    meta: dict[str, Any] = {"otel": otel}
    if no_retrieval:
        meta[NO_RETRIEVAL_KEY] = True
    for s in ([entry] if entry is not None else []) + list(members):
        attrs = span_attributes(s)
        for key, name in (
            ("session.id", "session_id"),
            ("user.id", "user_id"),
            ("gen_ai.conversation.id", "conversation_id"),
        ):
            v = attrs.get(key)
            if isinstance(v, str) and v and name not in meta:
                meta[name] = v
    turn: dict[str, Any] = {}
    if conversation is not None:
        turn["conversation_id"] = conversation
        ended = sorted(llms, key=lambda s: getattr(s, "end_time", 0) or 0)
        answering, history = next(
            ((s, h) for s, h in ((s, chat_history_of(s)) for s in reversed(ended)) if h is not None), (None, None)
        )
        if history is not None:  # what the answering (last) LLM call that had input messages was given
            turn.update(history=history[-MAX_HISTORY:], turn=sum(m["role"] == "user" for m in history) + 1)
            if entry is None:  # no framework entry: the user's message is the one the LLM answered
                question = llm_question_of(answering) or question
            if history and query and query != question:
                turn["standalone_question"] = query
    sid = f"{trace_hex}-{_hex(inv.target_id, 16)}"
    try:
        sample = Sample(question=question, contexts=contexts, answer=answer, id=sid, metadata=meta, **turn, **truth)
    except RecordError as err:  # e.g. a non-string id in document metadata, text that is not valid Unicode
        reason = {"question": "no_question", "answer": "no_answer"}.get(err.field or "", "no_contexts")
        return BuildResult(inv, reason=reason, detail=str(err))
    return BuildResult(inv, sample=sample)


def _ground_truth(entry: Any) -> dict[str, Any]:
    """``relevant_ids`` / ``reference`` from the entry span's OpenInference ``metadata`` (JSON)."""
    meta = parse_json(span_attributes(entry).get("metadata"))
    if not isinstance(meta, Mapping):
        return {}
    out: dict[str, Any] = {}
    rel = meta.get(RELEVANT_KEY)
    if isinstance(rel, (list, Mapping)) and rel:
        out["relevant_ids"] = rel
    ref = meta.get(REFERENCE_KEY)
    if isinstance(ref, str) and ref.strip():
        out["reference"] = ref
    return out


def conversation_of(inv: Invocation) -> str | None:
    """The chat session of an invocation: the first ``session.id`` / ``gen_ai.conversation.id``
    (:data:`~ragmeter.tracing.readers.CONVERSATION_ATTRIBUTES`) on its entry or its spans."""
    for s in ([inv.entry] if inv.entry is not None else []) + list(inv.members):
        found = conversation_id_of(s)
        if found is not None:
            return found
    return None


def _started(inv: Invocation) -> int:
    spans = ([inv.entry] if inv.entry is not None and not inv.synthetic else []) + list(inv.members)
    return min((getattr(s, "start_time", None) or 0 for s in spans), default=0)


def build_samples(spans: Iterable[Any], id_keys: Sequence[str] | None = None) -> list[BuildResult]:
    """:func:`find_invocations` + :func:`build_sample` for a complete set of spans. With the whole
    session at hand, a session's turns are numbered by the start time of its calls (1-based; calls
    that gave no sample keep their place)."""
    builds = [build_sample(inv, id_keys) for inv in find_invocations(spans)]
    sessions: dict[str, list[BuildResult]] = {}
    for b in builds:
        conv = b.sample.conversation_id if b.sample is not None else conversation_of(b.invocation)
        if conv is not None:
            sessions.setdefault(conv, []).append(b)
    for calls in sessions.values():
        calls.sort(key=lambda b: _started(b.invocation))
        for n, b in enumerate(calls, start=1):
            if b.sample is not None:
                b.sample.turn = n
    return builds
