"""Internal: LlamaIndex chat engines and agents as conversation turns.

A *turn* is the outermost ``chat`` / ``achat`` / ``stream_chat`` / ``astream_chat`` of a
condense-question, context or condense-plus-context chat engine (:data:`CHAT_ENGINES`), or the
``run`` of a workflow agent (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``, an
``AgentWorkflow``) that has a query-engine or retriever tool (:data:`RETRIEVAL_TOOLS`). Query
engines, retrievers and tools called inside a turn are part of it.

Conversation of a turn (see :class:`Conversations`):

* ``conversation_id``: ``instrument_tags`` key ``conversation_id`` / ``session_id`` /
  ``thread_id`` (:data:`CONVERSATION_KEYS`, as the LangChain capture reads config metadata); else
  the ``session_id`` of the chat engine's memory (or of the ``memory`` given to an agent run) when
  it has one (LlamaIndex ``Memory``); else an id made for that memory object (a chat engine
  without memory: for the engine), new after the engine's ``reset()``. An agent run without
  ``memory`` and without a tag has no conversation id.
* chat engines: ``turn`` counts the turns captured in the conversation, ``history`` is the
  user / assistant messages of those turns (the last :data:`ragmeter.data.MAX_HISTORY`);
  a ``chat_history`` passed to the call replaces it (turn: its user messages + 1). The history is
  what the capture saw: messages in the memory before capture started are not in it.
* agents: the ``chat_history`` given to ``run``, else the user / assistant messages the agent's
  first LLM call received before the question (so a ``Context`` or ``memory`` reused across runs
  shows); ``turn`` is their user messages + 1.
* ``standalone_question``: the query the first retriever ran with, when the turn has history and
  the query differs from the question (the condensed question of a condense engine, the query an
  agent wrote for its tool).
"""

from __future__ import annotations

import collections
import threading
import uuid
import weakref
from typing import Any

from llama_index.core.agent.workflow import AgentOutput, AgentWorkflow, BaseWorkflowAgent
from llama_index.core.chat_engine import (
    CondensePlusContextChatEngine,
    CondenseQuestionChatEngine,
    ContextChatEngine,
)
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.tools import QueryEngineTool, RetrieverTool

from ragmeter.data import MAX_HISTORY

__all__ = [
    "CHAT_ENGINES",
    "CHAT_METHODS",
    "STREAM_WRITERS",
    "RETRIEVAL_TOOLS",
    "CONVERSATION_KEYS",
    "Conversations",
    "turn_kind",
    "turn_result",
    "run_tags",
    "message_text",
    "messages_as_history",
    "turn_fields",
]

#: Chat engines whose turns are captured (and their subclasses).
CHAT_ENGINES = (CondenseQuestionChatEngine, ContextChatEngine, CondensePlusContextChatEngine)
#: Chat engine methods that make one turn.
CHAT_METHODS = ("chat", "achat", "stream_chat", "astream_chat")
#: ``StreamingAgentChatResponse`` methods that consume the stream: the turn's text is complete when they return.
STREAM_WRITERS = ("write_response_to_history", "awrite_response_to_history")
#: Tools that make an agent a RAG agent (and a call to them a retrieval).
RETRIEVAL_TOOLS = (QueryEngineTool, RetrieverTool)
#: ``instrument_tags`` keys read as the conversation id (first found wins); as the LangChain capture.
CONVERSATION_KEYS = ("conversation_id", "session_id", "thread_id")
#: Conversations whose turn count and history are kept (the least recently used are forgotten).
MAX_CONVERSATIONS = 10_000

_ASSISTANT_ROLES = ("assistant", "chatbot", "model")


def turn_kind(instance: Any, method: str) -> str | None:
    """``"chat"`` for a turn of a chat engine of :data:`CHAT_ENGINES`, ``"agent"`` for the run of
    an agent with a retrieval tool, else None."""
    if method in CHAT_METHODS and isinstance(instance, CHAT_ENGINES):
        return "chat"
    if method == "run":
        if isinstance(instance, BaseWorkflowAgent):
            agents = [instance]
        elif isinstance(instance, AgentWorkflow):
            agents = list(getattr(instance, "agents", {}).values())
        else:
            return None
        if any(isinstance(t, RETRIEVAL_TOOLS) for a in agents for t in (getattr(a, "tools", None) or [])):
            return "agent"
    return None


def run_tags(arguments: dict) -> dict:
    """The caller's ``instrument_tags`` of a workflow agent's run: the workflows runtime opens the
    run span without them and passes them in its ``tags`` argument (its own ``llamaindex.*`` keys
    left out)."""
    tags = (arguments.get("tags") or {}).get("instrument_tags") if isinstance(arguments.get("tags"), dict) else None
    return {k: v for k, v in (tags or {}).items() if not str(k).startswith("llamaindex.")}


def message_text(message: Any) -> str | None:
    """The text of a user message given as a string or a LlamaIndex ``ChatMessage``."""
    if message is None or isinstance(message, str):
        return message
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else None


def _role(message: Any) -> str:
    role = getattr(message, "role", None)
    role = str(getattr(role, "value", role) or "").lower()
    return "assistant" if role in _ASSISTANT_ROLES else role


def messages_as_history(messages: Any) -> list[dict]:
    """LlamaIndex ``ChatMessage`` objects as ``[{"role", "content"}]``: user and assistant
    messages with text (tool calls, tool results and system prompts left out)."""
    out = []
    for m in messages or []:
        role, text = _role(m), message_text(m)
        if role in ("user", "assistant") and text and text.strip():
            out.append({"role": role, "content": text})
    return out


def _history_before(messages: Any, question: str | None) -> list[dict]:
    """The user / assistant messages an LLM call received before the turn's question (the last
    user message with that text, else the last user message)."""
    msgs = list(messages or [])
    users = [i for i, m in enumerate(msgs) if _role(m) == "user"]
    if not users:
        return messages_as_history(msgs)
    same = [i for i in users if message_text(msgs[i]) == question]
    return messages_as_history(msgs[: (same or users)[-1]])


def turn_result(result: Any) -> tuple[str | None, list | None, StreamingAgentChatResponse | None]:
    """What a turn returned: ``(answer, source nodes, stream)``; ``stream`` is the
    ``StreamingAgentChatResponse`` whose text is not complete yet (answer None then)."""
    if isinstance(result, StreamingAgentChatResponse):
        return None, list(result.source_nodes or []), result
    if isinstance(result, AgentChatResponse):
        return result.response, list(result.source_nodes or []), None
    out = getattr(result, "result", result)  # an agent's StopEvent holds its AgentOutput
    if isinstance(out, AgentOutput):
        return message_text(out.response) or "", None, None
    return (None if out is None else str(out)), None, None


class _Conversation:
    __slots__ = ("turns", "messages")

    def __init__(self) -> None:
        self.turns = 0
        self.messages: collections.deque = collections.deque(maxlen=MAX_HISTORY)


class Conversations:
    """Conversation ids, turn counts and histories of the chat engine turns one capture saw
    (thread-safe; bounded by :data:`MAX_CONVERSATIONS`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state: collections.OrderedDict[str, _Conversation] = collections.OrderedDict()
        self._made: dict[int, str] = {}  # id(memory or engine) -> the conversation id made for it
        # id(memory or engine) -> the conversation id its last turn had (for reset; most recent last)
        self._last: collections.OrderedDict[int, str] = collections.OrderedDict()

    def start(self, q: Any, instance: Any, arguments: dict, kind: str) -> None:
        """Set the question, conversation id, and (chat engines) turn and history of a turn
        that starts; ``arguments`` are the call's bound arguments."""
        tagged = next(
            (
                q.tags[k]
                for k in CONVERSATION_KEYS
                if isinstance(q.tags.get(k), (str, int)) and not isinstance(q.tags.get(k), bool) and str(q.tags.get(k))
            ),
            None,
        )
        if kind == "agent":
            event = arguments.get("start_event")
            get = getattr(event, "get", None) or (lambda key, default=None: default)
            history = get("chat_history", None)
            q.question = message_text(get("user_msg", None))
            if not q.question and history:
                q.question = next((message_text(m) for m in reversed(history) if _role(m) == "user"), None)
            memory = get("memory", None)
            conv = str(tagged) if tagged is not None else (self._id_of(memory) if memory is not None else None)
            q.conversation_id = conv
            if history:
                before = messages_as_history(history)
                q.turn, q.history = sum(m["role"] == "user" for m in before) + 1, before[-MAX_HISTORY:]
            return
        q.question = message_text(arguments.get("message"))
        memory = getattr(instance, "_memory", None)
        key = memory if memory is not None else instance
        conv = str(tagged) if tagged is not None else self._id_of(key)
        q.conversation_id = conv
        given = arguments.get("chat_history")
        with self._lock:
            self._last.pop(id(key), None)
            self._last[id(key)] = conv
            state = self._state.pop(conv, None) or _Conversation()
            self._state[conv] = state  # most recently used last
            for lru in (self._state, self._last):
                while len(lru) > MAX_CONVERSATIONS:
                    lru.popitem(last=False)
            if given is not None:
                history = messages_as_history(given)
                state.messages = collections.deque(history, maxlen=MAX_HISTORY)
                state.turns = sum(m["role"] == "user" for m in history)
            state.turns += 1
            q.turn = state.turns
            q.history = list(state.messages)

    def ended(self, q: Any, answer: str | None) -> None:
        """A chat engine turn ended: its question (and answer) join its conversation's history."""
        if q.kind != "chat" or q.conversation_id is None or not q.question:
            return
        with self._lock:
            state = self._state.get(q.conversation_id)
            if state is not None:
                state.messages.append({"role": "user", "content": q.question})
                if answer:
                    state.messages.append({"role": "assistant", "content": answer})

    def reset(self, instance: Any) -> None:
        """A chat engine was reset: its conversation ends (the next turn starts a new one)."""
        memory = getattr(instance, "_memory", None)
        key = id(memory if memory is not None else instance)
        with self._lock:
            self._made.pop(key, None)
            conv = self._last.pop(key, None)
            if conv is not None:
                self._state.pop(conv, None)

    def _id_of(self, key: Any) -> str:
        """The memory's ``session_id``, else an id made for ``key`` (kept while it lives)."""
        session = getattr(key, "session_id", None)
        if isinstance(session, str) and session:
            return session
        with self._lock:
            conv = self._made.get(id(key))
            if conv is None:
                conv = self._made[id(key)] = "chat-" + uuid.uuid4().hex[:12]
                try:
                    weakref.finalize(key, self._forget, id(key))
                except TypeError:  # not weak-referenceable: kept until reset
                    pass
        return conv

    def _forget(self, key: int) -> None:
        with self._lock:
            self._made.pop(key, None)
            self._last.pop(key, None)


def turn_fields(q: Any) -> dict:
    """The Sample fields of a finished turn: ``conversation_id``, ``turn``, ``history``,
    ``standalone_question`` (see the module docstring)."""
    out: dict[str, Any] = {}
    if q.conversation_id is not None:
        out["conversation_id"] = q.conversation_id
    history, turn = q.history, q.turn
    if history is None and q.llm_messages is not None:  # an agent: what its first LLM call received
        full = _history_before(q.llm_messages, q.question)
        history, turn = full[-MAX_HISTORY:], sum(m["role"] == "user" for m in full) + 1
    if history is None:
        history, turn = [], 1
    out["turn"], out["history"] = turn, history
    query = q.retrieval_query
    if history and query and query.strip() != (q.question or "").strip():
        out["standalone_question"] = query
    return out
