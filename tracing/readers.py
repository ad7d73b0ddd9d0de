"""Convention readers: what a span is (its role) and what it says (question, documents, answer).

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

Grouping: one :class:`Invocation` per RAG call. The *entry* of a retriever / reranker / LLM span
is found by walking up its parents while they are convention spans (or come from an
LLM-framework instrumentation scope): the topmost one is the entry. When the walk stops at the
leaf itself (GenAI or hand-made spans with no framework chain above them), the entry is the
leaf's parent (a *synthetic* entry, e.g. the application's own ``rag`` or HTTP span), and the
calls below it are split into retrieve -> generate segments, one sample each.

Everything here runs off the request path (on the processor's worker, or offline).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "ROLE_CHAIN", "ROLE_AGENT", "ROLE_RETRIEVER", "ROLE_RERANKER", "ROLE_LLM", "ROLE_EMBEDDING", "ROLE_TOOL",
    "ROLE_PROMPT", "ROLE_EVALUATOR", "ROLE_OTHER", "RAG_ROLES", "FRAMEWORK_SCOPES", "SKIP_REASONS",
    "Node", "EntryRef", "Invocation", "Docs", "BuildResult",
    "span_role", "convention_of", "is_framework_scope", "is_conventional", "entry_of", "members_of",
    "invocations_for", "find_invocations", "build_sample", "build_samples", "documents_of", "question_of",
    "answer_of", "llm_output_of", "llm_question_of", "template_context_of",
]

ROLE_CHAIN = "chain"
ROLE_AGENT = "agent"
ROLE_RETRIEVER = "retriever"
ROLE_RERANKER = "reranker"
ROLE_LLM = "llm"
ROLE_EMBEDDING = "embedding"
ROLE_TOOL = "tool"
ROLE_PROMPT = "prompt"
ROLE_EVALUATOR = "evaluator"
ROLE_OTHER = "other"

#: Roles that make a span part of a RAG call (a group is opened for its entry).
RAG_ROLES = frozenset({ROLE_RETRIEVER, ROLE_RERANKER, ROLE_LLM})
#: Roles that never contain the others by convention (a leaf at the top gets a synthetic entry).
LEAF_ROLES = RAG_ROLES

#: Instrumentation scopes of LLM frameworks. A span from one of them counts as part of the
#: framework's call even before its attributes say so (OpenInference's LlamaIndex spans get
#: their span kind only when they end).
FRAMEWORK_SCOPES = (
    "openinference.instrumentation",
    "opentelemetry.instrumentation.langchain",
    "opentelemetry.instrumentation.llamaindex",
    "opentelemetry.instrumentation.haystack",
    "opentelemetry.instrumentation.crewai",
    "opentelemetry.instrumentation.langgraph",
    "traceloop",
)

#: Why an invocation gave no sample (the processor and ``evaluate_traces`` count these).
SKIP_REASONS = ("no_contexts", "no_answer", "no_question", "truncated", "not_rag")

_OI_KIND = {
    "CHAIN": ROLE_CHAIN, "AGENT": ROLE_AGENT, "RETRIEVER": ROLE_RETRIEVER, "RERANKER": ROLE_RERANKER,
    "LLM": ROLE_LLM, "EMBEDDING": ROLE_EMBEDDING, "TOOL": ROLE_TOOL, "PROMPT": ROLE_PROMPT,
    "EVALUATOR": ROLE_EVALUATOR,
}
_GENAI_OP = {
    "retrieval": ROLE_RETRIEVER, "chat": ROLE_LLM, "text_completion": ROLE_LLM, "generate_content": ROLE_LLM,
    "embeddings": ROLE_EMBEDDING, "execute_tool": ROLE_TOOL, "invoke_agent": ROLE_AGENT,
    "create_agent": ROLE_AGENT, "invoke_workflow": ROLE_CHAIN,
}
_TRACELOOP_KIND = {"workflow": ROLE_CHAIN, "task": ROLE_CHAIN, "agent": ROLE_AGENT, "tool": ROLE_TOOL}

REDACTED = "__REDACTED__"  # OpenInference's TraceConfig mask
_PLACEHOLDER = re.compile(r"^<(generator|async_generator|coroutine) object")

_QUESTION_KEYS = ("question", "query", "query_str", "input", "user_input", "q", "prompt", "text", "message")
_ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content", "output_text", "generation")
_CONTEXT_VARS = ("context", "context_str", "contexts", "documents", "docs", "sources", "retrieved_context")
_ID_KEYS = ("id", "doc_id", "document_id", "chunk_id", "node_id")


# --------------------------------------------------------------------------- small helpers


def _attrs(span: Any) -> Mapping[str, Any]:
    """The span's attributes for reading. For SDK spans, the plain dict inside the span's
    BoundedAttributes (read only, several times faster to query than the public read-only
    proxy; this runs for every span on the collector thread), else ``span.attributes``."""
    raw = getattr(span, "_attributes", None)
    d = getattr(raw, "_dict", None)
    if isinstance(d, dict):
        return d
    a = getattr(span, "attributes", None)
    return a if a is not None else {}


def _scope(span: Any) -> str:
    scope = getattr(span, "instrumentation_scope", None)
    return (getattr(scope, "name", None) or "") if scope is not None else ""


def is_framework_scope(name: str | None) -> bool:
    """Whether ``name`` is the instrumentation scope of an LLM framework (see :data:`FRAMEWORK_SCOPES`)."""
    return bool(name) and name.startswith(FRAMEWORK_SCOPES)  # type: ignore[union-attr]


def _text(value: Any) -> str | None:
    """A usable text value: a non-empty string that is no redaction mask or generator placeholder."""
    if not isinstance(value, str):
        return None
    s = value.strip()
    if not s or s == REDACTED or _PLACEHOLDER.match(s):
        return None
    return value


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    s = value.strip()
    if not s or s[0] not in "[{\"":
        return None
    try:
        return json.loads(s)
    except ValueError:
        return None


def _looks_json(value: Any, mime: Any) -> bool:
    if mime == "application/json":
        return True
    return isinstance(value, str) and value.lstrip()[:1] in ("{", "[")


def _pick(obj: Any, keys: Sequence[str], depth: int = 0) -> str | None:
    """The first text found under ``keys`` in a (nested) JSON value."""
    if depth > 4:
        return None
    if isinstance(obj, str):
        return _text(obj)
    if isinstance(obj, Mapping):
        for k in keys:
            if k in obj:
                found = _pick(obj[k], keys, depth + 1)
                if found:
                    return found
        for k in ("query_bundle", "inputs", "outputs", "kwargs", "data"):
            if isinstance(obj.get(k), (Mapping, str)):
                found = _pick(obj[k], keys, depth + 1)
                if found:
                    return found
        msgs = obj.get("messages")
        if isinstance(msgs, list):
            return _last_message_text(msgs, roles=("user", "human"))
    if isinstance(obj, list) and obj and all(isinstance(m, Mapping) for m in obj):
        return _last_message_text(obj, roles=("user", "human"))
    return None


def _parts_text(parts: Any) -> str | None:
    if isinstance(parts, str):
        return _text(parts)
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
    return _text("".join(texts)) if texts else None


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
    return _text(content)


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


def _last_indexed_text(attrs: Mapping[str, Any], prefix: str, content: str,
                       user_role: tuple[str, str] | None = None) -> str | None:
    """The text of the last ``prefix.{i}.<content>`` message that has any; with ``user_role`` =
    (role key, role assumed when absent), only a user's message."""
    items = _indexed(attrs, prefix)
    for i in sorted(items, reverse=True):
        if user_role is not None and str(items[i].get(*user_role)).lower() not in ("user", "human"):
            continue
        t = _text(items[i].get(content))
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


# --------------------------------------------------------------------------- roles


def span_role(span: Any) -> str | None:
    """The span's role by convention (``chain``, ``agent``, ``retriever``, ``reranker``, ``llm``,
    ``embedding``, ``tool``, ``prompt``, ``evaluator``, ``other``), or None for a span no
    convention describes. Cheap: a few key look-ups (OpenLLMetry task spans also get a substring
    test of their JSON input / output, to find the ones that carry documents)."""
    attrs = _attrs(span)
    kind = attrs.get("openinference.span.kind")
    if kind:
        return _OI_KIND.get(str(kind).upper(), ROLE_OTHER)
    op = attrs.get("gen_ai.operation.name")
    if op:
        return _GENAI_OP.get(str(op), ROLE_OTHER)
    tk = attrs.get("traceloop.span.kind")
    if tk:
        role = _TRACELOOP_KIND.get(str(tk), ROLE_OTHER)
        if role == ROLE_CHAIN and (_has_doc_markers(attrs.get("traceloop.entity.output"))
                                   or _has_doc_markers(attrs.get("traceloop.entity.input"))):
            return ROLE_RETRIEVER
        return role
    if attrs.get("llm.request.type") or "gen_ai.completion.0.content" in attrs or "gen_ai.prompt.0.content" in attrs:
        return ROLE_LLM
    if getattr(span, "dropped_attributes", 0):
        # span limits evicted the oldest attributes, the span kind among them: go by what is left
        for key in attrs:
            if key.startswith("reranker.output_documents."):
                return ROLE_RERANKER
            if key.startswith("retrieval.documents."):
                return ROLE_RETRIEVER
            if key.startswith("llm.output_messages."):
                return ROLE_LLM
    return None


def convention_of(span: Any) -> str | None:
    """``"openinference"``, ``"genai"``, ``"openllmetry"`` or None."""
    attrs = _attrs(span)
    if "openinference.span.kind" in attrs:
        return "openinference"
    if "traceloop.span.kind" in attrs or "traceloop.entity.input" in attrs or "llm.request.type" in attrs:
        return "openllmetry"
    if "gen_ai.operation.name" in attrs:
        return "genai"
    return None


def _has_doc_markers(value: Any) -> bool:
    return isinstance(value, str) and ("page_content" in value or '"documents"' in value)


# --------------------------------------------------------------------------- the span tree


class Node:
    """One span of a trace as the grouping sees it: ids, scope, and (once ended) its role.

    ``span`` is the SDK span object (live or ended) or an offline span; only immutable fields
    are read while it is live.
    """

    __slots__ = ("span", "span_id", "parent_id", "remote_parent", "scope", "ended", "role", "start_ns",
                 "end_ns", "ended_at")

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
    ``parent_id`` is where the evaluation carrier hangs (the entry span id)."""

    trace_id: int
    entry_id: int
    entry: Any
    members: list
    target: Any
    synthetic: bool = False
    segment: int = 0

    @property
    def target_id(self) -> int:
        """The judged span's id."""
        return self.target.context.span_id if self.target is not None else self.entry_id


def _sort_key(span: Any) -> tuple[int, int]:
    return (getattr(span, "start_time", None) or 0, getattr(span, "end_time", None) or 0)


def members_of(entry: EntryRef, nodes: Mapping[int, Node], roles: dict[int, EntryRef] | None = None,
               exclude: set[int] | frozenset = frozenset()) -> list[Any]:
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


def invocations_for(entry: EntryRef, nodes: Mapping[int, Node], trace_id: int,
                    cache: dict[int, EntryRef] | None = None,
                    exclude: set[int] | frozenset = frozenset()) -> list[Invocation]:
    """The invocations of one entry: one for a framework entry, one per retrieve -> generate
    segment for a synthetic one (members in ``exclude`` were already used)."""
    members = members_of(entry, nodes, cache, exclude)
    node = nodes.get(entry.span_id)
    entry_span = node.span if node is not None and node.ended else None
    if not entry.synthetic:
        return [Invocation(trace_id, entry.span_id, entry_span, members, entry_span or (members[-1] if members else None))]
    segments: list[list[Any]] = []
    current: list[Any] = []
    seen_llm = False
    for span in members:
        role = span_role(span)
        if role in (ROLE_RETRIEVER, ROLE_RERANKER) and seen_llm:
            segments.append(current)
            current, seen_llm = [], False
        current.append(span)
        seen_llm = seen_llm or role == ROLE_LLM
    if current:
        segments.append(current)
    out = []
    for i, seg in enumerate(segments):
        llms = [s for s in seg if span_role(s) == ROLE_LLM]
        target = max(llms, key=lambda s: getattr(s, "end_time", None) or 0) if llms else seg[0]
        out.append(Invocation(trace_id, entry.span_id, entry_span, seg, target, synthetic=True, segment=i))
    return out


def find_invocations(spans: Iterable[Any]) -> list[Invocation]:
    """Every RAG invocation in a complete set of ended spans (several traces allowed), in start
    order. Spans written by ragmeter (``ragmeter.carrier``) are left out."""
    by_trace: dict[int, dict[int, Node]] = {}
    for span in spans:
        if _attrs(span).get("ragmeter.carrier"):
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


# --------------------------------------------------------------------------- what spans say


@dataclass
class Docs:
    """Documents read from one span: dicts with ``text``, ``id``, ``score``, ``metadata``,
    ``position`` (index in the span); ``truncated`` when the span dropped attributes or has
    gaps in its document indices; ``span`` the span they came from."""

    items: list[dict] = field(default_factory=list)
    truncated: bool = False
    span: Any = None


def _doc_id(meta: Any) -> str | None:
    if isinstance(meta, Mapping):
        for k in _ID_KEYS:
            v = meta.get(k)
            if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
                return str(v)
    return None


_DOC_PREFIXES = ("reranker.output_documents.", "retrieval.documents.")


def _oi_doc_groups(attrs: Mapping[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """OpenInference document attributes of both kinds, in one pass over the attributes."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        if not key.startswith(_DOC_PREFIXES):
            continue
        prefix = _DOC_PREFIXES[0] if key.startswith(_DOC_PREFIXES[0]) else _DOC_PREFIXES[1]
        idx, _, rest = key[len(prefix):].partition(".")
        if idx.isdigit() and rest:
            out.setdefault(prefix, {}).setdefault(int(idx), {})[rest] = value
    return out


def _oi_docs(attrs: Mapping[str, Any], prefix: str,
             groups: dict[str, dict[int, dict[str, Any]]] | None = None) -> tuple[list[dict], bool]:
    raw = (groups if groups is not None else _oi_doc_groups(attrs)).get(prefix + ".") or {}
    if not raw:
        return [], False
    gaps = sorted(raw) != list(range(len(raw)))
    items = []
    for pos in sorted(raw):
        d = raw[pos]
        text = d.get("document.content")
        meta = _json(d.get("document.metadata")) if isinstance(d.get("document.metadata"), str) else d.get("document.metadata")
        meta = dict(meta) if isinstance(meta, Mapping) else {}
        did = d.get("document.id")
        did = str(did) if isinstance(did, (str, int)) and not isinstance(did, bool) and str(did) else _doc_id(meta)
        score = d.get("document.score")
        items.append({"text": text if isinstance(text, str) and text != REDACTED else None, "id": did,
                      "score": float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
                      "metadata": meta, "position": pos})
    return items, gaps


def _doc_from_obj(obj: Any, pos: int) -> dict | None:
    """A document from a JSON value: GenAI ``{id, score, content}``, LangChain ``Document``
    (plain or serialized ``{"lc": 1, "kwargs": {"page_content": ...}}``), or a string."""
    if isinstance(obj, str):
        return {"text": obj, "id": None, "score": None, "metadata": {}, "position": pos}
    if not isinstance(obj, Mapping):
        return None
    if isinstance(obj.get("kwargs"), Mapping) and "page_content" in obj["kwargs"]:
        kw = obj["kwargs"]
        meta = dict(kw.get("metadata") or {}) if isinstance(kw.get("metadata"), Mapping) else {}
        did = kw.get("id") if isinstance(kw.get("id"), str) else _doc_id(meta)
        return {"text": kw.get("page_content"), "id": did, "score": None, "metadata": meta, "position": pos}
    text = None
    for k in ("content", "page_content", "text", "document"):
        if isinstance(obj.get(k), str):
            text = obj[k]
            break
    meta = dict(obj.get("metadata") or {}) if isinstance(obj.get("metadata"), Mapping) else {}
    did = obj.get("id")
    did = str(did) if isinstance(did, (str, int)) and not isinstance(did, bool) and str(did) else _doc_id(meta)
    score = obj.get("score")
    return {"text": text, "id": did,
            "score": float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
            "metadata": meta, "position": pos}


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


def documents_of(span: Any) -> Docs:
    """The documents a retriever / reranker span returned (reranker: its output documents)."""
    attrs = _attrs(span)
    dropped = bool(getattr(span, "dropped_attributes", 0) or 0)
    groups = _oi_doc_groups(attrs)
    items, gaps = _oi_docs(attrs, "reranker.output_documents", groups)
    if not items:
        items, gaps = _oi_docs(attrs, "retrieval.documents", groups)
    if items:
        return Docs(items, gaps or (dropped and any(d["text"] is None for d in items)), span)
    raw = attrs.get("gen_ai.retrieval.documents")
    if raw is not None:
        value = _json(raw) if isinstance(raw, str) else raw
        if isinstance(value, (list, tuple)):
            parsed = [_doc_from_obj(_json(x) if isinstance(x, str) and x.lstrip()[:1] == "{" else x, i)
                      for i, x in enumerate(value)]
            return Docs([d for d in parsed if d is not None], False, span)
    for key in ("traceloop.entity.output", "traceloop.entity.input"):
        value = attrs.get(key)
        if not _has_doc_markers(value):
            continue
        found = _find_doc_list(_json(value))
        if found:
            parsed = [_doc_from_obj(x, i) for i, x in enumerate(found)]
            return Docs([d for d in parsed if d is not None], False, span)
    return Docs([], False, span)


def question_of(span: Any) -> str | None:
    """The question / query a span received (entry or retriever input, GenAI query text)."""
    attrs = _attrs(span)
    q = _text(attrs.get("gen_ai.retrieval.query.text")) or _text(attrs.get("reranker.query"))
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
            parsed = _json(value)
            if parsed is not None:
                return _pick(parsed, keys)
        return _text(value)
    value = attrs.get(f"traceloop.entity.{io}")
    if value is not None:
        parsed = _json(value)
        if parsed is not None:
            return _pick(parsed, keys)
        return _text(value)
    msgs = _json(attrs.get(f"gen_ai.{io}.messages"))
    if isinstance(msgs, list):
        return _last_message_text(msgs, roles=roles)
    return None


def answer_of(span: Any) -> str | None:
    """The answer an entry span returned as plain text (None for JSON without an answer key or a
    streaming placeholder)."""
    return _io_text(_attrs(span), "output", _ANSWER_KEYS, ("assistant", "ai", "model", ""))


def llm_output_of(span: Any) -> str | None:
    """The text an LLM span generated (last output message)."""
    attrs = _attrs(span)
    msgs = _indexed(attrs, "llm.output_messages")
    for i in sorted(msgs, reverse=True):
        m = msgs[i]
        t = _text(m.get("message.content"))
        if t:
            return t
        parts = [v for k, v in sorted(m.items()) if k.startswith("message.contents.") and k.endswith("message_content.text")]
        if parts:
            t = _text("".join(p for p in parts if isinstance(p, str)))
            if t:
                return t
    out = _json(attrs.get("gen_ai.output.messages"))
    if isinstance(out, list):
        t = _last_message_text(out, roles=("assistant", "ai", "model", ""))
        if t:
            return t
    t = _last_indexed_text(attrs, "gen_ai.completion", "content")
    if t:
        return t
    value = attrs.get("output.value")
    if value is not None and not _looks_json(value, attrs.get("output.mime_type")):
        return _text(value)
    parsed = _json(value) if value is not None else None
    if isinstance(parsed, Mapping):  # LangChain LLMResult: generations[0][0].text
        gens = parsed.get("generations")
        if isinstance(gens, list) and gens and isinstance(gens[-1], list) and gens[-1]:
            g = gens[-1][-1]
            if isinstance(g, Mapping):
                return _text(g.get("text"))
    return None


def llm_question_of(span: Any) -> str | None:
    """The question an LLM span answered: a template variable, else its last user message."""
    attrs = _attrs(span)
    tv = _json(attrs.get("llm.prompt_template.variables"))
    if isinstance(tv, Mapping):
        for k in ("question", "query", "query_str", "input", "user_input"):
            t = _text(tv.get(k))
            if t:
                return t
    t = _last_indexed_text(attrs, "llm.input_messages", "message.content", ("message.role", ""))
    if t:
        return t
    inp = _json(attrs.get("gen_ai.input.messages"))
    if isinstance(inp, list):
        t = _last_message_text(inp, roles=("user", "human"))
        if t:
            return t
    return _last_indexed_text(attrs, "gen_ai.prompt", "content", ("role", "user"))


def template_context_of(span: Any) -> str | None:
    """The context an LLM actually saw, from ``llm.prompt_template.variables``."""
    tv = _json(_attrs(span).get("llm.prompt_template.variables"))
    if isinstance(tv, Mapping):
        for k in _CONTEXT_VARS:
            t = _text(tv.get(k))
            if t:
                return t
    return None


# --------------------------------------------------------------------------- samples


@dataclass
class BuildResult:
    """A sample built from an invocation, or why none was (``reason`` in :data:`SKIP_REASONS`)."""

    invocation: Invocation
    sample: Any = None
    reason: str | None = None
    detail: str = ""


def _hex(v: int, width: int) -> str:
    return format(v, f"0{width}x")


def _choose_docs(members: Sequence[Any]) -> tuple[list[dict], list[Any], bool, str]:
    """Documents for the sample: the last reranker's output, else every retriever's documents
    (de-duplicated, in retrieval order). Returns items, source spans, truncated, source name."""
    rerankers = [s for s in members if span_role(s) == ROLE_RERANKER]
    for span in reversed(rerankers):
        docs = documents_of(span)
        usable = [d for d in docs.items if _text(d["text"])]
        if usable:
            return usable, [span] * len(usable), docs.truncated, "reranker"
    items: list[dict] = []
    spans: list[Any] = []
    truncated = False
    seen: set = set()
    for span in members:
        if span_role(span) != ROLE_RETRIEVER:
            continue
        docs = documents_of(span)
        truncated = truncated or (docs.truncated and bool(docs.items))
        for d in docs.items:
            if not _text(d["text"]):
                continue
            key = (d["id"], d["text"]) if d["id"] else (None, d["text"])
            if key in seen or (d["id"] is None and any(k[1] == d["text"] for k in seen)):
                continue
            seen.add(key)
            items.append(d)
            spans.append(span)
    return items, spans, truncated, "retriever"


def build_sample(inv: Invocation) -> BuildResult:
    """A :class:`ragmeter.Sample` from an invocation, with the trace in ``metadata["otel"]``."""
    from ragmeter.data import RecordError, Sample

    members = inv.members
    roles = [span_role(s) for s in members]
    has_retrieval = any(r in (ROLE_RETRIEVER, ROLE_RERANKER) for r in roles)
    llms = [s for s, r in zip(members, roles) if r == ROLE_LLM]
    if not has_retrieval:
        return BuildResult(inv, reason="not_rag", detail="no retriever span")
    items, doc_spans, truncated, source = _choose_docs(members)
    if not items or truncated:
        ctx_text = next((t for t in (template_context_of(s) for s in reversed(llms)) if t), None)
        if ctx_text:
            items, doc_spans, truncated, source = ([{"text": ctx_text, "id": None, "score": None, "metadata": {},
                                                     "position": None}], [None], False, "prompt_template")
    if truncated:
        return BuildResult(inv, reason="truncated",
                           detail="the retriever span dropped attributes (span limits): its document list is incomplete")
    if not items:
        if any(getattr(s, "dropped_attributes", 0) for s, r in zip(members, roles) if r in (ROLE_RETRIEVER, ROLE_RERANKER)):
            return BuildResult(inv, reason="truncated",
                               detail="the retriever span dropped attributes (span limits): no complete document list")
        return BuildResult(inv, reason="no_contexts",
                           detail="no document text on the retriever spans (content capture off?)")
    entry = inv.entry if not inv.synthetic else None
    answer = answer_of(entry) if entry is not None else None
    if not answer:
        ended = sorted(llms, key=lambda s: getattr(s, "end_time", 0) or 0)
        answer = next((t for t in (llm_output_of(s) for s in reversed(ended)) if t), None)
    if not answer:
        return BuildResult(inv, reason="no_answer", detail="no answer text (streaming placeholder, content capture off "
                                                           "or attributes dropped)")
    question = question_of(entry) if entry is not None else None
    if not question:
        for s in members:
            if span_role(s) in (ROLE_RETRIEVER, ROLE_RERANKER):
                question = question_of(s)
                if question:
                    break
    if not question:
        question = next((t for t in (llm_question_of(s) for s in llms) if t), None)
    if not question:
        return BuildResult(inv, reason="no_question", detail="no question text on the entry, retriever or LLM spans")
    contexts = []
    for d in items:
        c: dict[str, Any] = {"text": d["text"]}
        if d["id"] is not None:
            c["id"] = d["id"]
        if d["score"] is not None:
            c["score"] = d["score"]
        if d["metadata"]:
            c["metadata"] = dict(d["metadata"])
        contexts.append(c)
    trace_hex = _hex(inv.trace_id, 32)
    target = inv.target
    otel: dict[str, Any] = {
        "trace_id": trace_hex,
        "entry_span_id": _hex(inv.entry_id, 16),
        "target_span_id": _hex(inv.target_id, 16),
        "target_name": getattr(target, "name", None),
        "convention": next((c for c in (convention_of(s) for s in ([entry] if entry is not None else []) + list(members)) if c), None),
        "contexts_source": source,
        "documents": [[_hex(s.context.span_id, 16) if s is not None else None, d["position"]]
                      for s, d in zip(doc_spans, items)],
    }
    if inv.synthetic:
        otel["segment"] = inv.segment
    meta: dict[str, Any] = {"otel": otel}
    for s in ([entry] if entry is not None else []) + list(members):
        attrs = _attrs(s)
        for key, name in (("session.id", "session_id"), ("user.id", "user_id"),
                          ("gen_ai.conversation.id", "conversation_id")):
            v = attrs.get(key)
            if isinstance(v, str) and v and name not in meta:
                meta[name] = v
    sid = f"{trace_hex}-{_hex(inv.target_id, 16)}"
    try:
        sample = Sample(question=question, contexts=contexts, answer=answer, id=sid, metadata=meta)
    except RecordError as err:  # e.g. a non-string id in document metadata
        return BuildResult(inv, reason="no_contexts", detail=str(err))
    return BuildResult(inv, sample=sample)


def build_samples(spans: Iterable[Any]) -> list[BuildResult]:
    """:func:`find_invocations` + :func:`build_sample` for a complete set of spans."""
    return [build_sample(inv) for inv in find_invocations(spans)]
