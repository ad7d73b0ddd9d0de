"""Internal: LlamaIndex spans and events grouped into queries.

:class:`_SpanTracker` and :class:`_EventSink` are the handlers registered on LlamaIndex's
instrumentation dispatcher; they forward to a :class:`_Capture`, which groups spans and events
into one :class:`_Query` per root query and hands each finished query to its owner
(:class:`ragmeter.integrations.llamaindex.capture.RagmeterInstrumentation`) to become a Sample.
Streaming responses are wrapped in pass-through generators (:func:`_tap_stream`) that report the
full text, or its abandonment, when the stream ends. Every hook runs inside the user's query and
never raises (:func:`ragmeter.guard.never_raise`).
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as _dt
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.chat_engine.types import BaseChatEngine, StreamingAgentChatResponse
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.chat_engine import StreamChatDeltaReceivedEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatInProgressEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionInProgressEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent, SynthesizeStartEvent
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

from ragmeter.fileio import json_safe
from ragmeter.guard import guarded, never_raise
from ragmeter.integrations.llamaindex.chat import STREAM_WRITERS, Conversations, run_tags, turn_kind, turn_result
from ragmeter.integrations.llamaindex.nodes import _query_text, _response_text, _usage_of

#: Set while a wrapped stream pulls its next chunk: LLM spans and events started lazily by the
#: consumer (their LlamaIndex parent span is the consumer's, not the query's) join this query.
_STREAM_ROOT: contextvars.ContextVar[str | None] = contextvars.ContextVar("ragmeter_llamaindex_stream", default=None)


class _Query:
    """What has been seen of one root query so far (internal)."""

    __slots__ = (
        "root_id",
        "engine",
        "question",
        "t0",
        "started_at",
        "t_end",
        "t_retr0",
        "t_retr1",
        "t_rerank1",
        "t_synth0",
        "t_synth1",
        "t_first_token",
        "retrieved",
        "reranked",
        "nodes",
        "response",
        "llm_calls",
        "prompt_tokens",
        "completion_tokens",
        "usage_reported",
        "span_ids",
        "tags",
        "target",
        "streaming",
        "llm_open",
        "llm_nested",
        "models",
        "kind",
        "conversation_id",
        "turn",
        "history",
        "retrieval_query",
        "query_nodes",
        "llm_messages",
        "stream_text",
        "stream_parts",
        "returned",
    )

    def __init__(self, root_id: str, engine: str, kind: str = "query"):
        self.root_id = root_id
        self.engine = engine
        self.kind = kind  # "query"; a turn: "chat" (chat engine) or "agent"
        self.question: str | None = None
        self.t0 = time.perf_counter()
        self.started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
        self.t_end: float | None = None
        self.t_retr0: float | None = None
        self.t_retr1: float | None = None
        self.t_rerank1: float | None = None
        self.t_synth0: float | None = None
        self.t_synth1: float | None = None
        self.t_first_token: float | None = None
        self.retrieved: list = []
        self.reranked: list | None = None
        self.nodes: list | None = None
        self.response: Any = None
        self.llm_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.usage_reported = False
        self.models: list[str] = []
        self.span_ids: dict[str, str | None] = {}  # span id -> parent span id, for this query
        self.tags: dict = {}
        self.target: Any = None
        self.streaming = False
        self.llm_open: set = set()  # spans of LLM chat / completion calls in progress
        self.llm_nested: set[str] = set()  # LLM calls made inside another (CustomLLM.acomplete -> complete)
        # turns only (see ragmeter.integrations.llamaindex.chat)
        self.conversation_id: str | None = None
        self.turn: int | None = None
        self.history: list | None = None
        self.retrieval_query: str | None = None  # the query the first retriever ran with
        self.query_nodes: list = []  # source nodes of the query engines called inside the turn
        self.llm_messages: list | None = None  # an agent's first LLM call's messages
        self.stream_text: str | None = None  # a streamed turn's text, once its stream is consumed
        self.stream_parts: list[str] = []  # a streamed turn's text so far
        self.returned = False  # a streamed turn's call has returned


def _method_of(span_id: str) -> str:
    """The method of a LlamaIndex span id (``"RetrieverQueryEngine.query-<uuid>"`` -> ``"query"``)."""
    return span_id.partition("-")[0].rpartition(".")[2]


class _SpanTracker(BaseSpanHandler):
    """LlamaIndex span handler that forwards span enter / exit / drop to the capture (internal)."""

    if TYPE_CHECKING:  # set past pydantic's field checks, so not declared to it
        _ragmeter_capture: _Capture

    def __init__(self, capture: _Capture):
        super().__init__()
        object.__setattr__(self, "_ragmeter_capture", capture)

    @classmethod
    def class_name(cls) -> str:
        """Class name."""
        return "RagmeterSpanTracker"

    def span_enter(
        self, id_: str, bound_args: Any, instance: Any = None, parent_id: Any = None, tags: Any = None, **kwargs: Any
    ) -> None:
        """Forward to the capture (open_spans is not used)."""
        self._ragmeter_capture.on_span_enter(id_, parent_id, instance, tags, bound_args)

    def span_exit(self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any) -> None:
        """Forward to the capture."""
        self._ragmeter_capture.on_span_exit(id_, result, instance)

    def span_drop(self, id_: str, bound_args: Any, instance: Any = None, err: Any = None, **kwargs: Any) -> None:
        """Forward to the capture."""
        self._ragmeter_capture.on_span_drop(id_, err, instance)

    def new_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused (spans are not stored)."""
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused."""
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused."""
        return None


class _EventSink(BaseEventHandler):
    """LlamaIndex event handler that forwards events to the capture (internal)."""

    if TYPE_CHECKING:  # set past pydantic's field checks, so not declared to it
        _ragmeter_capture: _Capture

    def __init__(self, capture: _Capture):
        super().__init__()
        object.__setattr__(self, "_ragmeter_capture", capture)

    @classmethod
    def class_name(cls) -> str:
        """Class name."""
        return "RagmeterEventSink"

    def handle(self, event: Any, **kwargs: Any) -> None:
        """Forward to the capture."""
        self._ragmeter_capture.on_event(event)


class _Capture:
    """Groups LlamaIndex spans and events into one record per root query (internal).

    A root query is the outermost ``BaseQueryEngine.query`` / ``aquery`` span, or a chat turn (see
    :mod:`ragmeter.integrations.llamaindex.chat`); every span below it (found through LlamaIndex's
    parent span ids, which follow asyncio tasks and threads) and every event emitted in those spans
    belongs to it, so concurrent queries and conversations never mix.
    """

    def __init__(self, owner: Any):
        self.owner = owner
        self.lock = threading.RLock()
        self.open: dict[str, _Query] = {}
        self.span_root: dict[str, str] = {}
        self.conversations = Conversations()
        self._last_sweep = time.monotonic()

    # ---------------------------------------------------------------- spans

    def on_span_enter(self, id_: str, parent_id: str | None, instance: Any, tags: Any, bound_args: Any = None) -> None:
        """A span opened: a new root query, or a span inside an open query."""
        self._span_entered(id_, parent_id, instance, tags, bound_args)

    @guarded("LlamaIndex capture: span enter")  # a plain try/except: this runs for every span
    def _span_entered(self, id_: str, parent_id: str | None, instance: Any, tags: Any, bound_args: Any) -> None:
        root = self.span_root.get(parent_id) if parent_id else None
        kind = None
        if root is None:
            method = _method_of(id_)
            if isinstance(instance, BaseQueryEngine) and method in ("query", "aquery"):
                kind = "query"
            else:
                kind = turn_kind(instance, method)
                if kind is None and method == "reset" and isinstance(instance, BaseChatEngine):
                    self.conversations.reset(instance)
        if kind is not None:
            q = _Query(id_, type(instance).__name__, kind)
            arguments = getattr(bound_args, "arguments", None) or {}
            if kind == "agent" and not tags:
                tags = run_tags(arguments)
            if tags:
                q.tags = json_safe(dict(tags))
            if kind == "query":
                q.question = _query_text(arguments.get("str_or_query_bundle"))
            else:
                q.streaming = _method_of(id_) in ("stream_chat", "astream_chat")
                self.conversations.start(q, instance, arguments, kind)
            if self.owner.attach_to_trace:  # the caller's OTel span, in the caller's context
                q.target = self.owner._trace.current_target()
            with self.lock:
                self.open[id_] = q
                self.span_root[id_] = id_
                q.span_ids[id_] = None
            self._maybe_sweep()
            return
        if root is None:
            root = _STREAM_ROOT.get()
        if root is None:
            return
        with self.lock:
            below = self.open.get(root)
            if below is None:
                return
            self.span_root[id_] = root
            below.span_ids[id_] = parent_id

    def on_span_exit(self, id_: str, result: Any, instance: Any = None) -> None:
        """A span returned: when it is a root query, the query (or its stream) is complete; when it
        consumed a chat turn's stream, the turn's text is."""
        q = self.open.get(id_)
        if q is None:
            turn = self._writer_turn(id_, instance)
            if turn is not None:
                with never_raise("LlamaIndex capture: chat stream end"):
                    self._turn_stream_ended(turn, instance)
            return
        if q.root_id != id_:
            return
        with never_raise("LlamaIndex capture: span exit"):
            if q.kind == "query":
                self._query_returned(q, result if result is not None else q.response)
            else:
                self._turn_returned(q, result)

    def on_span_drop(self, id_: str, err: Any, instance: Any = None) -> None:
        """A span raised: when it is a root query, record it as failed (or interrupted); when it
        consumed a chat turn's stream, record the turn as partial."""
        q = self.open.get(id_)
        turn = self._writer_turn(id_, instance) if q is None else None
        if turn is not None:
            with never_raise("LlamaIndex capture: chat stream error"):
                self.stream_incomplete(
                    turn,
                    "".join(turn.stream_parts),
                    "the stream raised",
                    error=f"{type(err).__name__}: {err}" if err is not None else None,
                )
        if q is None or q.root_id != id_:
            return
        with never_raise("LlamaIndex capture: span drop"):
            q.t_end = time.perf_counter()
            reason = f"{type(err).__name__}: {err}" if err is not None else "query failed"
            if isinstance(err, (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt)):
                self.finalize(q, None, partial_reason=f"the query was interrupted ({type(err).__name__})")
            else:
                self.finalize(q, None, error=reason)

    # ---------------------------------------------------------------- events

    def on_event(self, event: Any) -> None:
        """An event: applied to the open query whose span emitted it."""
        sid = getattr(event, "span_id", None)
        root = self.span_root.get(sid) if sid else None
        if root is None:
            root = _STREAM_ROOT.get()
            if root is None:
                return
        q = self.open.get(root)
        if q is None:
            return
        self._apply(q, event, sid)

    @guarded("LlamaIndex capture: read an event")  # a plain try/except: this runs for every event
    def _apply(self, q: _Query, event: Any, sid: str | None) -> None:
        now = time.perf_counter()
        if isinstance(event, QueryStartEvent):
            if sid == q.root_id:
                q.question = _query_text(event.query) or q.question
                if event.tags:
                    q.tags.update(json_safe(dict(event.tags)))
        elif isinstance(event, QueryEndEvent):
            if sid == q.root_id:
                q.response = event.response
            elif q.kind != "query":  # a query engine (tool) inside a turn: its final nodes
                q.query_nodes.extend(getattr(event.response, "source_nodes", None) or [])
        elif isinstance(event, RetrievalStartEvent):
            if q.t_retr0 is None:
                q.t_retr0 = now
                q.retrieval_query = _query_text(event.str_or_query_bundle)
        elif isinstance(event, RetrievalEndEvent):
            q.t_retr1 = now
            q.retrieved.extend(event.nodes or [])
        elif isinstance(event, ReRankEndEvent):
            q.t_rerank1 = now
            q.reranked = list(event.nodes or [])
        elif isinstance(event, SynthesizeStartEvent):
            if q.t_synth0 is None:
                q.t_synth0 = now
        elif isinstance(event, SynthesizeEndEvent):
            q.t_synth1 = now
        elif isinstance(event, (LLMChatStartEvent, LLMCompletionStartEvent)):
            if q.kind == "agent" and q.llm_messages is None and isinstance(event, LLMChatStartEvent):
                q.llm_messages = list(event.messages or [])
            if sid is not None:
                # a call made inside another LLM call (CustomLLM.acomplete -> complete) is the same
                # call; while a stream is consumed the inner span has no parent, so any open call counts
                if self._inside_llm_call(q, sid) or (q.streaming and q.llm_open - {sid}):
                    q.llm_nested.add(sid)
                q.llm_open.add(sid)
            md = event.model_dict or {}
            model = md.get("model") or md.get("model_name")
            if model and str(model) not in q.models:
                q.models.append(str(model))
        elif isinstance(event, StreamChatDeltaReceivedEvent):
            q.stream_parts.append(event.delta)
        elif isinstance(event, (LLMChatInProgressEvent, LLMCompletionInProgressEvent)):
            if q.streaming and q.t_first_token is None:
                q.t_first_token = now
        elif isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
            q.llm_open.discard(sid)
            if sid in q.llm_nested:
                return  # the outer call reports it
            q.llm_calls += 1
            usage = _usage_of(event.response)
            if usage is not None:
                q.usage_reported = True
                q.prompt_tokens += usage[0]
                q.completion_tokens += usage[1]

    @staticmethod
    def _inside_llm_call(q: _Query, sid: str) -> bool:
        parent = q.span_ids.get(sid)
        for _ in range(64):
            if parent is None:
                return False
            if parent in q.llm_open:
                return True
            parent = q.span_ids.get(parent)
        return False

    # ---------------------------------------------------------------- completion

    def _query_returned(self, q: _Query, response: Any) -> None:
        q.t_end = time.perf_counter()
        q.response = None  # keep no reference: an abandoned stream must be garbage-collectable
        nodes = list(getattr(response, "source_nodes", None) or [])
        q.nodes = nodes
        unread = getattr(response, "response_txt", "") is None and getattr(response, "response_gen", None) is not None
        if isinstance(response, StreamingResponse) and unread:
            q.streaming = True
            tap = _tap_stream(self, q, response.response_gen)
            weakref.finalize(tap, self._stream_dropped, q.root_id)
            response.response_gen = tap
            return
        if isinstance(response, AsyncStreamingResponse) and unread:
            q.streaming = True
            atap = _atap_stream(self, q, response.response_gen)
            weakref.finalize(atap, self._stream_dropped, q.root_id)
            response.response_gen = atap
            return
        self.finalize(q, _response_text(response))

    def _turn_returned(self, q: _Query, result: Any) -> None:
        """A chat turn's call returned: complete, or (streaming) complete once its stream is consumed."""
        q.t_end = time.perf_counter()
        answer, nodes, stream = turn_result(result)
        if nodes:
            q.nodes = nodes
        if stream is None:
            self.finalize(q, answer)
            return
        q.streaming = True
        with self.lock:  # the stream may have been consumed already (on LlamaIndex's writer thread)
            q.returned = True
            text = q.stream_text
        if text is not None:
            self.stream_done(q, text)

    def _writer_turn(self, id_: str, instance: Any) -> _Query | None:
        """The open turn whose stream the span ``id_`` consumes (LlamaIndex's chat stream writer), or None."""
        if not isinstance(instance, StreamingAgentChatResponse) or _method_of(id_) not in STREAM_WRITERS:
            return None
        root = self.span_root.get(id_)
        return self.open.get(root) if root else None

    def _turn_stream_ended(self, q: _Query, response: StreamingAgentChatResponse) -> None:
        """LlamaIndex's writer consumed a chat turn's stream: the turn is complete once its call has returned."""
        with self.lock:
            # llama-index-core before 0.14.25 leaves ``response.response`` empty after a stream: the deltas
            q.stream_text = response.response or "".join(q.stream_parts).strip()
            returned = q.returned
        if returned:
            self.stream_done(q, q.stream_text)

    def stream_first_token(self, q: _Query) -> None:
        """The stream of ``q`` produced its first chunk."""
        if q.t_first_token is None:
            q.t_first_token = time.perf_counter()

    def stream_done(self, q: _Query, text: str) -> None:
        """The stream of ``q`` ended: ``text`` is the full answer."""
        q.t_end = time.perf_counter()
        self.finalize(q, text)

    def stream_incomplete(self, q: _Query, text: str, reason: str, error: str | None = None) -> None:
        """The stream of ``q`` will not end (closed, raised, discarded): record it as partial."""
        q.t_end = time.perf_counter()
        self.finalize(q, None, partial_text=text, partial_reason=reason, error=error)

    def _stream_dropped(self, root_id: str) -> None:
        q = self.open.get(root_id)
        if q is not None:
            self.stream_incomplete(q, "", "the streaming response was discarded before its stream was consumed")

    def _maybe_sweep(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep < 1.0:
            return
        self._last_sweep = now
        self.sweep()

    def sweep(self, force: bool = False) -> None:
        """Finalize streams left unconsumed longer than ``stream_timeout`` (all with ``force``) as
        partial, and evict the oldest open queries beyond ``max_open``."""
        timeout = self.owner.stream_timeout
        now = time.perf_counter()
        with self.lock:
            queries = list(self.open.values())
        for q in queries:
            if q.streaming and q.t_end is not None and (force or now - q.t_end > timeout):
                self.stream_incomplete(
                    q,
                    "".join(q.stream_parts),
                    "the stream was not consumed within stream_timeout"
                    if not force
                    else "the stream was still open when capture was closed",
                )
        with self.lock:
            excess = len(self.open) - self.owner.max_open
            oldest = sorted(self.open.values(), key=lambda x: x.t0)[:excess] if excess > 0 else []
        for q in oldest:
            self.finalize(q, None, partial_reason="evicted: too many queries still open (max_open)")

    def finalize(
        self,
        q: _Query,
        answer: str | None,
        *,
        error: str | None = None,
        partial_text: str | None = None,
        partial_reason: str | None = None,
    ) -> None:
        """Turn a finished query into a Sample; score it unless it failed or is partial."""
        with self.lock:
            if self.open.pop(q.root_id, None) is None:
                return  # already finalized (stream finished after a timeout, finalizer after close ...)
            for sid in q.span_ids:
                self.span_root.pop(sid, None)
        if error is None and partial_reason is None:
            self.conversations.ended(q, answer)
        self.owner._record(q, answer, error=error, partial_text=partial_text, partial_reason=partial_reason)


def _tap_stream(capture: _Capture, q: _Query, inner: Any):
    """A pass-through token generator that reports the full text (or its abandonment) to the capture."""
    parts: list[str] = []
    try:
        while True:
            token = _STREAM_ROOT.set(q.root_id)
            try:
                item = next(inner)
            except StopIteration:
                break
            finally:
                _STREAM_ROOT.reset(token)
            if not parts:
                capture.stream_first_token(q)
            parts.append(item if isinstance(item, str) else str(item))
            yield item
    except GeneratorExit:
        capture.stream_incomplete(q, "".join(parts), "the stream was closed before its end")
        with never_raise("LlamaIndex capture: close the stream"):
            inner.close()
        raise
    except BaseException as err:
        capture.stream_incomplete(q, "".join(parts), "the stream raised", error=f"{type(err).__name__}: {err}")
        raise
    capture.stream_done(q, "".join(parts))


async def _atap_stream(capture: _Capture, q: _Query, inner: Any):
    """Async twin of :func:`_tap_stream` for ``AsyncStreamingResponse``."""
    parts: list[str] = []
    try:
        while True:
            token = _STREAM_ROOT.set(q.root_id)
            try:
                item = await inner.__anext__()
            except StopAsyncIteration:
                break
            finally:
                _STREAM_ROOT.reset(token)
            if not parts:
                capture.stream_first_token(q)
            parts.append(item if isinstance(item, str) else str(item))
            yield item
    except GeneratorExit:
        capture.stream_incomplete(q, "".join(parts), "the stream was closed before its end")
        raise
    except BaseException as err:
        capture.stream_incomplete(q, "".join(parts), "the stream raised", error=f"{type(err).__name__}: {err}")
        raise
    capture.stream_done(q, "".join(parts))
