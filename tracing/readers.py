"""Internal: Convention readers: what a span says (question, documents, answer).

Three conventions are read, tried in this order on every span:

1. **OpenInference** (``openinference.span.kind``; ``input.value`` / ``output.value``;
   ``retrieval.documents.{i}.document.*``; ``reranker.output_documents.{i}.document.*``;
   ``llm.output_messages.{i}.message.content``; ``llm.prompt_template.variables``).
2. **OpenTelemetry GenAI** (``gen_ai.operation.name`` = ``retrieval`` / ``chat`` / ...;
   ``gen_ai.retrieval.query.text``; ``gen_ai.retrieval.documents`` (JSON);
   ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON parts)).
3. **OpenLLMetry** (``traceloop.span.kind``; ``traceloop.entity.input`` / ``.output`` (JSON);
   ``gen_ai.prompt.{i}.content`` / ``gen_ai.completion.{i}.content``). OpenLLMetry's LangChain
   instrumentation makes no retriever span: the documents are found inside the JSON input or
   output of the task spans that received or returned them.

What a span *is* (its role) is read by :mod:`ragmeter.tracing.roles`; which spans make one RAG
call by :mod:`ragmeter.tracing.grouping`; the sample by :mod:`ragmeter.tracing.samples`.
Everything here runs off the request path (on the processor's worker, or offline).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.tracing.attributes import REDACTED, parse_json, span_attributes, usable_text
from ragmeter.tracing.roles import has_doc_markers

__all__ = [
    "Docs",
    "documents_of",
    "ID_KEYS",
    "check_id_keys",
    "question_of",
    "answer_of",
    "llm_output_of",
    "llm_question_of",
    "template_context_of",
    "chat_history_of",
    "conversation_id_of",
    "CONVERSATION_ATTRIBUTES",
]

#: Span attributes read as the conversation id, in order: OpenInference ``session.id``, then the
#: GenAI ``gen_ai.conversation.id`` (OpenInference maps the latter to the former, and an explicit
#: ``session.id`` wins).
CONVERSATION_ATTRIBUTES = ("session.id", "gen_ai.conversation.id")

_QUESTION_KEYS = ("question", "query", "query_str", "input", "user_input", "q", "prompt", "text", "message")
_ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content", "output_text", "generation")
_CONTEXT_VARS = ("context", "context_str", "contexts", "documents", "docs", "sources", "retrieved_context")
#: Document metadata keys read, in order, as a chunk's id when the span records no document id
#: (OpenInference's LangChain instrumentation records ``Document.metadata`` but not
#: ``Document.id``); ``id_keys=`` replaces them (:func:`documents_of`).
ID_KEYS = ("id", "doc_id", "document_id", "chunk_id", "node_id")


# --------------------------------------------------------------------------- JSON values and chat messages


def _looks_json(value: Any, mime: Any) -> bool:
    if mime == "application/json":
        return True
    return isinstance(value, str) and value.lstrip()[:1] in ("{", "[")


def _pick(obj: Any, keys: Sequence[str], depth: int = 0, roles: Sequence[str] = ("user", "human")) -> str | None:
    """The first text found under ``keys`` in a (nested) JSON value; in a message list (a chat
    state such as LangGraph's ``{"messages": [...]}``), the last message of one of ``roles``."""
    if depth > 4:
        return None
    if isinstance(obj, str):
        return usable_text(obj)
    if isinstance(obj, Mapping):
        for k in keys:
            if k in obj:
                found = _pick(obj[k], keys, depth + 1, roles)
                if found:
                    return found
        for k in ("query_bundle", "inputs", "outputs", "kwargs", "data"):
            if isinstance(obj.get(k), (Mapping, str)):
                found = _pick(obj[k], keys, depth + 1, roles)
                if found:
                    return found
        msgs = obj.get("messages")
        if isinstance(msgs, list):
            return _last_message_text(msgs, roles=roles)
    if isinstance(obj, list) and obj and all(isinstance(m, Mapping) for m in obj):
        return _last_message_text(obj, roles=roles)
    return None


def _parts_text(parts: Any) -> str | None:
    if isinstance(parts, str):
        return usable_text(parts)
    if not isinstance(parts, list):
        return None
    texts = []
    for p in parts:
        if isinstance(p, str):
            texts.append(p)
        elif isinstance(p, Mapping) and p.get("type", "text") == "text":
            t = p.get("content", p.get("text"))
            if isinstance(t, str):
                texts.append(t)
    return usable_text("".join(texts)) if texts else None


def _message_text(msg: Mapping) -> str | None:
    if "parts" in msg:
        return _parts_text(msg["parts"])
    content = msg.get("content")
    if content is None and isinstance(msg.get("kwargs"), Mapping):  # LangChain serialized message
        content = msg["kwargs"].get("content")
    if content is None and isinstance(msg.get("data"), Mapping):
        content = msg["data"].get("content")
    if isinstance(content, list):
        return _parts_text(content)
    return usable_text(content)


def _role_of_message(msg: Mapping) -> str:
    role = msg.get("role") or msg.get("type")
    if role is None and isinstance(msg.get("kwargs"), Mapping):
        role = msg["kwargs"].get("type")
    if role is None and isinstance(msg.get("id"), list) and msg["id"]:
        role = str(msg["id"][-1]).replace("Message", "").lower()
    return str(role or "").lower()


def _last_message_text(messages: Sequence[Any], roles: Sequence[str]) -> str | None:
    for msg in reversed(messages):
        if isinstance(msg, list):  # LangChain batches: [[messages]]
            found = _last_message_text(msg, roles)
            if found:
                return found
            continue
        if isinstance(msg, Mapping) and _role_of_message(msg) in roles:
            t = _message_text(msg)
            if t:
                return t
    return None


def _last_indexed_text(
    attrs: Mapping[str, Any], prefix: str, content: str, user_role: tuple[str, str] | None = None
) -> str | None:
    """The text of the last ``prefix.{i}.<content>`` message that has any; with ``user_role`` =
    (role key, role assumed when absent), only a user's message."""
    items = _indexed(attrs, prefix)
    for i in sorted(items, reverse=True):
        if user_role is not None and str(items[i].get(*user_role)).lower() not in ("user", "human"):
            continue
        t = usable_text(items[i].get(content))
        if t:
            return t
    return None


def _indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``prefix.{i}.rest`` attributes as {i: {rest: value}}."""
    out: dict[int, dict[str, Any]] = {}
    plen = len(prefix) + 1
    for key, value in attrs.items():
        if not key.startswith(prefix) or len(key) <= plen or key[plen - 1] != ".":
            continue
        idx, _, rest = key[plen:].partition(".")
        if idx.isdigit() and rest:
            out.setdefault(int(idx), {})[rest] = value
    return out


# --------------------------------------------------------------------------- what spans say


@dataclass
class Docs:
    """Documents read from one span: dicts with ``text``, ``id``, ``id_source`` (None, or
    ``metadata.<key>`` when the id was read from the metadata), ``score``, ``metadata``,
    ``position`` (index in the span); ``truncated`` when the span dropped attributes or has
    gaps in its document indices; ``span`` the span they came from."""

    items: list[dict] = field(default_factory=list)
    truncated: bool = False
    span: Any = None


def _score(value: Any) -> float | None:
    """A retriever's document score; None when it is not a finite number (NaN, infinities and
    non-numbers are left out: the score is informational, no metric reads it, and the sample is
    still good)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def check_id_keys(keys: Sequence[str] | None) -> tuple[str, ...] | None:
    """``keys`` as a tuple (None stays None: the default :data:`ID_KEYS`); ValueError unless a
    non-empty sequence of non-empty strings (a single string is refused, not split)."""
    if keys is None:
        return None
    if isinstance(keys, str) or not all(isinstance(k, str) and k.strip() for k in keys) or not keys:
        raise ValueError(f"id_keys must be a non-empty list of metadata key names, got {keys!r}")
    return tuple(k.strip() for k in keys)


def _id_value(v: Any) -> str | None:
    return str(v) if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) else None


def _doc_id(meta: Any, keys: Sequence[str]) -> tuple[str | None, str | None]:
    """The first id found under ``keys`` in the document metadata, and where: ``metadata.<key>``."""
    if isinstance(meta, Mapping):
        for k in keys:
            v = _id_value(meta.get(k))
            if v is not None:
                return v, f"metadata.{k}"
    return None, None


def _with_id(item: dict, did: Any, meta: Any, keys: Sequence[str]) -> dict:
    """``item`` with its ``id`` (the document's own, else from the metadata keys) and
    ``id_source`` (None for the document's own id)."""
    own = _id_value(did)
    item["id"], item["id_source"] = (own, None) if own is not None else _doc_id(meta, keys)
    return item


_DOC_PREFIXES = ("reranker.output_documents.", "retrieval.documents.")


def _oi_doc_groups(attrs: Mapping[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """OpenInference document attributes of both kinds, in one pass over the attributes."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        if not key.startswith(_DOC_PREFIXES):
            continue
        prefix = _DOC_PREFIXES[0] if key.startswith(_DOC_PREFIXES[0]) else _DOC_PREFIXES[1]
        idx, _, rest = key[len(prefix) :].partition(".")
        if idx.isdigit() and rest:
            out.setdefault(prefix, {}).setdefault(int(idx), {})[rest] = value
    return out


def _oi_docs(
    attrs: Mapping[str, Any],
    prefix: str,
    groups: dict[str, dict[int, dict[str, Any]]] | None = None,
    keys: Sequence[str] = ID_KEYS,
) -> tuple[list[dict], bool]:
    raw = (groups if groups is not None else _oi_doc_groups(attrs)).get(prefix + ".") or {}
    if not raw:
        return [], False
    gaps = sorted(raw) != list(range(len(raw)))
    items = []
    for pos in sorted(raw):
        d = raw[pos]
        text = d.get("document.content")
        meta = (
            parse_json(d.get("document.metadata"))
            if isinstance(d.get("document.metadata"), str)
            else d.get("document.metadata")
        )
        meta = dict(meta) if isinstance(meta, Mapping) else {}
        items.append(
            _with_id(
                {
                    "text": text if isinstance(text, str) and text != REDACTED else None,
                    "score": _score(d.get("document.score")),
                    "metadata": meta,
                    "position": pos,
                },
                d.get("document.id"),
                meta,
                keys,
            )
        )
    return items, gaps


def _doc_from_obj(obj: Any, pos: int, keys: Sequence[str] = ID_KEYS) -> dict | None:
    """A document from a JSON value: GenAI ``{id, score, content}``, LangChain ``Document``
    (plain or serialized ``{"lc": 1, "kwargs": {"page_content": ...}}``), or a string."""
    if isinstance(obj, str):
        return {"text": obj, "id": None, "id_source": None, "score": None, "metadata": {}, "position": pos}
    if not isinstance(obj, Mapping):
        return None
    if isinstance(obj.get("kwargs"), Mapping) and "page_content" in obj["kwargs"]:
        kw = obj["kwargs"]
        meta = dict(kw.get("metadata") or {}) if isinstance(kw.get("metadata"), Mapping) else {}
        return _with_id(
            {"text": kw.get("page_content"), "score": None, "metadata": meta, "position": pos},
            kw.get("id") if isinstance(kw.get("id"), str) else None,
            meta,
            keys,
        )
    text = None
    for k in ("content", "page_content", "text", "document"):
        if isinstance(obj.get(k), str):
            text = obj[k]
            break
    meta = dict(obj.get("metadata") or {}) if isinstance(obj.get("metadata"), Mapping) else {}
    return _with_id(
        {"text": text, "score": _score(obj.get("score")), "metadata": meta, "position": pos}, obj.get("id"), meta, keys
    )


def _is_document_obj(obj: Any) -> bool:
    if not isinstance(obj, Mapping):
        return False
    if "page_content" in obj:
        return True
    kw = obj.get("kwargs")
    return isinstance(kw, Mapping) and "page_content" in kw


def _find_doc_list(obj: Any, depth: int = 0) -> list | None:
    """The first list of LangChain-style documents inside a JSON value (or a ``documents`` list)."""
    if depth > 6:
        return None
    if isinstance(obj, list):
        if obj and all(_is_document_obj(x) for x in obj):
            return obj
        for x in obj:
            found = _find_doc_list(x, depth + 1)
            if found:
                return found
        return None
    if isinstance(obj, Mapping):
        docs = obj.get("documents")
        if isinstance(docs, list) and docs:
            return docs
        for v in obj.values():
            if isinstance(v, (list, Mapping)):
                found = _find_doc_list(v, depth + 1)
                if found:
                    return found
    return None


def documents_of(span: Any, id_keys: Sequence[str] | None = None) -> Docs:
    """The documents a retriever / reranker span returned (reranker: its output documents). A
    document's id is its own (``document.id``, a GenAI or LangChain ``id``), else the first of
    ``id_keys`` (default :data:`ID_KEYS`) found in its metadata (``item["id_source"]`` then says
    ``metadata.<key>``), else None."""
    keys = id_keys or ID_KEYS
    attrs = span_attributes(span)
    dropped = bool(getattr(span, "dropped_attributes", 0) or 0)
    groups = _oi_doc_groups(attrs)
    items, gaps = _oi_docs(attrs, "reranker.output_documents", groups, keys)
    if not items:
        items, gaps = _oi_docs(attrs, "retrieval.documents", groups, keys)
    if items:
        return Docs(items, gaps or (dropped and any(d["text"] is None for d in items)), span)
    raw = attrs.get("gen_ai.retrieval.documents")
    if raw is not None:
        value = parse_json(raw) if isinstance(raw, str) else raw
        if isinstance(value, (list, tuple)):
            parsed = [
                _doc_from_obj(parse_json(x) if isinstance(x, str) and x.lstrip()[:1] == "{" else x, i, keys)
                for i, x in enumerate(value)
            ]
            return Docs([d for d in parsed if d is not None], False, span)
    for key in ("traceloop.entity.output", "traceloop.entity.input"):
        value = attrs.get(key)
        if not has_doc_markers(value):
            continue
        found = _find_doc_list(parse_json(value))
        if found:
            parsed = [_doc_from_obj(x, i, keys) for i, x in enumerate(found)]
            return Docs([d for d in parsed if d is not None], False, span)
    return Docs([], False, span)


def question_of(span: Any) -> str | None:
    """The question / query a span received (entry or retriever input, GenAI query text)."""
    attrs = span_attributes(span)
    q = usable_text(attrs.get("gen_ai.retrieval.query.text")) or usable_text(attrs.get("reranker.query"))
    if q:
        return q
    return _io_text(attrs, "input", _QUESTION_KEYS, ("user", "human"))


def _io_text(attrs: Any, io: str, keys: Any, roles: tuple) -> str | None:
    """A span's ``io`` ("input" / "output") text in the first convention that carries it:
    OpenInference ``{io}.value`` (JSON picked by ``keys``), OpenLLMetry ``traceloop.entity.{io}``,
    GenAI ``gen_ai.{io}.messages`` (last message of one of ``roles``)."""
    value = attrs.get(f"{io}.value")
    if value is not None:
        if _looks_json(value, attrs.get(f"{io}.mime_type")):
            parsed = parse_json(value)
            if parsed is not None:
                return _pick(parsed, keys, roles=roles)
        return usable_text(value)
    value = attrs.get(f"traceloop.entity.{io}")
    if value is not None:
        parsed = parse_json(value)
        if parsed is not None:
            return _pick(parsed, keys, roles=roles)
        return usable_text(value)
    msgs = parse_json(attrs.get(f"gen_ai.{io}.messages"))
    if isinstance(msgs, list):
        return _last_message_text(msgs, roles=roles)
    return None


def answer_of(span: Any) -> str | None:
    """The answer an entry span returned as plain text (None for JSON without an answer key or a
    streaming placeholder)."""
    return _io_text(span_attributes(span), "output", _ANSWER_KEYS, ("assistant", "ai", "model", ""))


def llm_output_of(span: Any) -> str | None:
    """The text an LLM span generated (last output message)."""
    attrs = span_attributes(span)
    msgs = _indexed(attrs, "llm.output_messages")
    for i in sorted(msgs, reverse=True):
        m = msgs[i]
        t = usable_text(m.get("message.content"))
        if t:
            return t
        parts = [
            v for k, v in sorted(m.items()) if k.startswith("message.contents.") and k.endswith("message_content.text")
        ]
        if parts:
            t = usable_text("".join(p for p in parts if isinstance(p, str)))
            if t:
                return t
    out = parse_json(attrs.get("gen_ai.output.messages"))
    if isinstance(out, list):
        t = _last_message_text(out, roles=("assistant", "ai", "model", ""))
        if t:
            return t
    t = _last_indexed_text(attrs, "gen_ai.completion", "content")
    if t:
        return t
    value = attrs.get("output.value")
    if value is not None and not _looks_json(value, attrs.get("output.mime_type")):
        return usable_text(value)
    parsed = parse_json(value) if value is not None else None
    if isinstance(parsed, Mapping):  # LangChain LLMResult: generations[0][0].text
        gens = parsed.get("generations")
        if isinstance(gens, list) and gens and isinstance(gens[-1], list) and gens[-1]:
            g = gens[-1][-1]
            if isinstance(g, Mapping):
                return usable_text(g.get("text"))
    return None


def llm_question_of(span: Any) -> str | None:
    """The question an LLM span answered: a template variable, else its last user message."""
    attrs = span_attributes(span)
    tv = parse_json(attrs.get("llm.prompt_template.variables"))
    if isinstance(tv, Mapping):
        for k in ("question", "query", "query_str", "input", "user_input"):
            t = usable_text(tv.get(k))
            if t:
                return t
    t = _last_indexed_text(attrs, "llm.input_messages", "message.content", ("message.role", ""))
    if t:
        return t
    inp = parse_json(attrs.get("gen_ai.input.messages"))
    if isinstance(inp, list):
        t = _last_message_text(inp, roles=("user", "human"))
        if t:
            return t
    return _last_indexed_text(attrs, "gen_ai.prompt", "content", ("role", "user"))


def template_context_of(span: Any) -> str | None:
    """The context an LLM actually saw, from ``llm.prompt_template.variables``."""
    tv = parse_json(span_attributes(span).get("llm.prompt_template.variables"))
    if isinstance(tv, Mapping):
        for k in _CONTEXT_VARS:
            t = usable_text(tv.get(k))
            if t:
                return t
    return None


def conversation_id_of(span: Any) -> str | None:
    """The conversation a span belongs to (:data:`CONVERSATION_ATTRIBUTES`), or None."""
    attrs = span_attributes(span)
    for key in CONVERSATION_ATTRIBUTES:
        v = attrs.get(key)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip():
            return str(v)
    return None


_CHAT_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant"}


def chat_history_of(span: Any) -> list[dict] | None:
    """The chat history an LLM span was given: its input messages (OpenInference
    ``llm.input_messages``, GenAI ``gen_ai.input.messages``, OpenLLMetry ``gen_ai.prompt``) before
    the last user message, user and assistant messages with text only, as ``{"role", "content"}``;
    None when the span has no input messages or no user message."""
    attrs = span_attributes(span)
    msgs: list[tuple[str, Any]] = []
    for prefix, role_key, content_key in (
        ("llm.input_messages", "message.role", "message.content"),
        ("gen_ai.prompt", "role", "content"),
    ):
        items = _indexed(attrs, prefix)
        if items:
            msgs = [(str(items[i].get(role_key) or "").lower(), items[i].get(content_key)) for i in sorted(items)]
            break
    if not msgs:
        parsed = parse_json(attrs.get("gen_ai.input.messages"))
        if isinstance(parsed, list):
            msgs = [(_role_of_message(m), _message_text(m)) for m in parsed if isinstance(m, Mapping)]
    roles = [_CHAT_ROLES.get(r) for r, _ in msgs]
    if "user" not in roles:
        return None
    last_user = len(roles) - 1 - roles[::-1].index("user")
    return [
        {"role": role, "content": text}
        for role, (_, text) in zip(roles[:last_user], msgs[:last_user])
        if role is not None and usable_text(text)
    ]
