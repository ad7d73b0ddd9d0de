"""Internal: What a span is: its role in a RAG call, by convention (OpenInference, OpenTelemetry GenAI,
OpenLLMetry), and whether it comes from an LLM framework's instrumentation scope."""

from __future__ import annotations

from typing import Any

from ragmeter.tracing.attributes import span_attributes

__all__ = [
    "ROLE_CHAIN",
    "ROLE_AGENT",
    "ROLE_RETRIEVER",
    "ROLE_RERANKER",
    "ROLE_LLM",
    "ROLE_EMBEDDING",
    "ROLE_TOOL",
    "ROLE_PROMPT",
    "ROLE_EVALUATOR",
    "ROLE_OTHER",
    "RAG_ROLES",
    "LEAF_ROLES",
    "FRAMEWORK_SCOPES",
    "span_role",
    "convention_of",
    "is_framework_scope",
    "has_doc_markers",
    "may_end_rag_step",
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

_OI_KIND = {
    "CHAIN": ROLE_CHAIN,
    "AGENT": ROLE_AGENT,
    "RETRIEVER": ROLE_RETRIEVER,
    "RERANKER": ROLE_RERANKER,
    "LLM": ROLE_LLM,
    "EMBEDDING": ROLE_EMBEDDING,
    "TOOL": ROLE_TOOL,
    "PROMPT": ROLE_PROMPT,
    "EVALUATOR": ROLE_EVALUATOR,
}
_GENAI_OP = {
    "retrieval": ROLE_RETRIEVER,
    "chat": ROLE_LLM,
    "text_completion": ROLE_LLM,
    "generate_content": ROLE_LLM,
    "embeddings": ROLE_EMBEDDING,
    "execute_tool": ROLE_TOOL,
    "invoke_agent": ROLE_AGENT,
    "create_agent": ROLE_AGENT,
    "invoke_workflow": ROLE_CHAIN,
}
_TRACELOOP_KIND = {"workflow": ROLE_CHAIN, "task": ROLE_CHAIN, "agent": ROLE_AGENT, "tool": ROLE_TOOL}
_OI_RAG_KINDS = frozenset(k for k, role in _OI_KIND.items() if role in RAG_ROLES)


def is_framework_scope(name: str | None) -> bool:
    """Whether ``name`` is the instrumentation scope of an LLM framework (see :data:`FRAMEWORK_SCOPES`)."""
    return bool(name) and name.startswith(FRAMEWORK_SCOPES)  # type: ignore[union-attr]


def span_role(span: Any) -> str | None:
    """The span's role by convention (``chain``, ``agent``, ``retriever``, ``reranker``, ``llm``,
    ``embedding``, ``tool``, ``prompt``, ``evaluator``, ``other``), or None for a span no
    convention describes. Cheap: a few key look-ups (OpenLLMetry task spans also get a substring
    test of their JSON input / output, to find the ones that carry documents)."""
    attrs = span_attributes(span)
    kind = attrs.get("openinference.span.kind")
    if kind:
        return _OI_KIND.get(str(kind).upper(), ROLE_OTHER)
    op = attrs.get("gen_ai.operation.name")
    if op:
        return _GENAI_OP.get(str(op), ROLE_OTHER)
    tk = attrs.get("traceloop.span.kind")
    if tk:
        role = _TRACELOOP_KIND.get(str(tk), ROLE_OTHER)
        if role == ROLE_CHAIN and (
            has_doc_markers(attrs.get("traceloop.entity.output"))
            or has_doc_markers(attrs.get("traceloop.entity.input"))
        ):
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
    attrs = span_attributes(span)
    if "openinference.span.kind" in attrs:
        return "openinference"
    if "traceloop.span.kind" in attrs or "traceloop.entity.input" in attrs or "llm.request.type" in attrs:
        return "openllmetry"
    if "gen_ai.operation.name" in attrs:
        return "genai"
    return None


def has_doc_markers(value: Any) -> bool:
    """Whether a JSON input / output attribute may hold LangChain documents (a substring test)."""
    return isinstance(value, str) and ("page_content" in value or '"documents"' in value)


def may_end_rag_step(span: Any) -> bool:
    """Whether an ending span may be a retriever, reranker or LLM span, judged by its convention
    markers alone (no JSON is read: every OpenLLMetry task counts, as one may carry documents).
    Cheap enough for ``on_end``: the processor wakes its worker when it is true."""
    attrs = span_attributes(span)
    kind = attrs.get("openinference.span.kind")
    if kind is not None:
        return str(kind).upper() in _OI_RAG_KINDS
    op = attrs.get("gen_ai.operation.name")
    if op is not None:
        return _GENAI_OP.get(str(op)) in RAG_ROLES
    tk = attrs.get("traceloop.span.kind")
    if tk is not None:
        return tk == "task"
    return "llm.request.type" in attrs or "gen_ai.completion.0.content" in attrs
