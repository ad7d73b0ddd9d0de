"""Internal: Chat turns in LangChain run trees: the history, turn number, standalone question and conversation
id of a root run (used by :mod:`ragmeter.integrations.langchain.runs`).

A chat turn (a chain fed a chat history under one of :data:`HISTORY_KEYS`, as
``create_history_aware_retriever`` and ``RunnableWithMessageHistory`` chains are) also gets its
``history`` (the last :data:`ragmeter.data.MAX_HISTORY` user / assistant messages),
``turn`` (user messages in the history + 1), ``standalone_question`` (the query the first
retriever ran with, when it differs from the question: the condensed question) and
``conversation_id`` (config metadata ``conversation_id`` / ``session_id`` / ``thread_id``;
``configurable`` values reach only LangSmith's tracer, so pass the id in ``metadata`` too;
LangGraph copies ``configurable["thread_id"]`` into the metadata itself).

A LangGraph message-state graph (``MessagesState`` / ``add_messages``) is a chat turn too: the
question is the last user message of the input, the history the messages before it in the state
the first node ran on (the checkpointer's earlier turns included), the answer the last AI
message of the output. A chat turn that ran no retriever (a greeting, a node that answered
from the history) is recorded with no contexts and ``metadata["no_retrieval"]`` True
(:func:`ragmeter.conversations.no_retrieval_turn`), so it counts in the no-retrieval rate; other
root runs without a retriever are not RAG runs and are skipped.
"""

from __future__ import annotations

from typing import Any

from ragmeter.data import MAX_HISTORY, RecordError, history_messages

__all__ = ["turn_fields", "chat_history", "content_text", "HISTORY_KEYS", "GRAPH_MESSAGES_KEY", "CONVERSATION_KEYS"]

#: Input keys of the root or of any chain under it read as the chat history (first found wins).
HISTORY_KEYS = ("chat_history", "history")
#: The state key of a LangGraph message-state graph (``MessagesState``, ``add_messages``).
GRAPH_MESSAGES_KEY = "messages"
#: Config ``metadata`` keys read as the conversation id (first found wins).
CONVERSATION_KEYS = ("conversation_id", "session_id", "thread_id")
_LLM_TYPES = ("llm", "chat_model")


def turn_fields(
    retrievers: list[Any], question: str, run_meta: dict, history: list[dict] | None, max_history: int = MAX_HISTORY
) -> dict:
    """``conversation_id``, ``turn``, ``history`` (the last ``max_history`` user / assistant
    messages) and ``standalone_question`` of a chat turn (see the module docstring) from the root
    run's config ``metadata``, the retriever runs and the :func:`chat_history`; only the
    conversation id (when given) for a run without history."""
    out: dict[str, Any] = {}
    conv = next(
        (
            run_meta[k]
            for k in CONVERSATION_KEYS
            if isinstance(run_meta.get(k), (str, int)) and not isinstance(run_meta.get(k), bool)
        ),
        None,
    )
    if conv is not None:
        out["conversation_id"] = str(conv)
    if history is None:
        return out
    out["turn"] = sum(m["role"] == "user" for m in history) + 1
    kept = [m for m in history if m["role"] in ("user", "assistant") and m["content"]]
    out["history"] = kept[-max_history:] if max_history > 0 else []
    query = next((q for q in (_str((r.inputs or {}).get("query")) for r in retrievers) if q), None)
    if history and query and query != question:
        out["standalone_question"] = query
    return out


def chat_history(root: Any) -> list[dict] | None:
    """The chat history fed to the root or to the first chain under it that has one (None when
    no run had a history input; a LangGraph message-state graph: :func:`_graph_history`);
    messages as ``{"role", "content"}``, unreadable ones skipped."""
    if _is_graph(root):
        return _graph_history(root)
    queue = [root]
    while queue:
        run = queue.pop(0)
        inputs = run.inputs if isinstance(run.inputs, dict) else {}
        for key in HISTORY_KEYS:
            value = inputs.get(key)
            if isinstance(value, (list, tuple)):
                return [m for m in map(_message, value) if m is not None]
        if run.run_type not in ("retriever", *_LLM_TYPES):
            queue.extend(run.child_runs or ())
    return None


def _is_graph(root: Any) -> bool:
    """Whether ``root`` is a LangGraph graph run with a message state: a ``messages`` list in its
    input and node runs under it (their metadata has ``langgraph_node``)."""
    inputs = root.inputs if isinstance(root.inputs, dict) else {}
    return (
        isinstance(inputs.get(GRAPH_MESSAGES_KEY), (list, tuple))
        and root.run_type == "chain"
        and any("langgraph_node" in ((c.extra or {}).get("metadata") or {}) for c in root.child_runs or ())
    )


def _graph_history(root: Any) -> list[dict]:
    """The messages before the current question in a LangGraph message-state graph: the state
    the first node ran on (with a checkpointer it holds the earlier turns; LangGraph's own
    ``__start__`` node sees only the input), else the root input's messages, up to the last user
    message."""
    nodes = sorted(
        (
            c
            for c in root.child_runs or ()
            if isinstance(c.inputs, dict)
            and isinstance(c.inputs.get(GRAPH_MESSAGES_KEY), (list, tuple))
            and not str(((c.extra or {}).get("metadata") or {}).get("langgraph_node", "")).startswith("__")
        ),
        key=lambda c: (c.start_time, c.dotted_order or ""),
    )
    state = (nodes[0] if nodes else root).inputs[GRAPH_MESSAGES_KEY]
    messages = [m for m in map(_message, state) if m is not None]
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=len(messages))
    return messages[:last_user]


def _message(value: Any) -> dict | None:
    """A chat message (LangChain message, its serialized form, a dict, or a ``(role, text)``
    tuple) as ``{"role", "content"}``; None when it is none of those."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, str) for v in value):
        value = {"role": value[0], "content": value[1]}
    elif isinstance(value, dict) and isinstance(value.get("kwargs"), dict):  # dumpd() form
        value = value["kwargs"]
    content = value.get("content") if isinstance(value, dict) else getattr(value, "content", None)
    role = (value.get("role") or value.get("type")) if isinstance(value, dict) else getattr(value, "type", None)
    try:
        [message] = history_messages([{"role": role, "content": content_text(content)}])
    except RecordError:
        return None
    return message


def content_text(content: Any) -> str | None:
    """The text of a message's content: a string, or the text blocks of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type", "text") == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return None


def _str(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None
