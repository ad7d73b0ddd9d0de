"""Internal: LangChain's run events -> one run tree per root run, cheaply.

:class:`RunTracker` is a ``BaseCallbackHandler`` that assembles the run tree of every root run the
way LangChain's ``BaseTracer`` does (a run whose parent it never saw is a root; interleaved
batches stay apart; a stream's input placeholder is replaced by the inputs LangChain passes when
the run ends; token events of streaming models) and hands the finished tree to
:meth:`RunTracker._persist_run`. It keeps only what
:mod:`ragmeter.integrations.langchain.runs` reads, as given: no pydantic ``Run`` per event, no
serialisation of messages, documents or generations. On the benchmark's RAG chain
(``benchmarks/inline_overhead.py``, 5 runs per request) the callbacks add ~0.14 ms at p50, where
a ``BaseTracer`` that does nothing adds ~0.8 ms.

:class:`CapturedRun` has ``langchain_core.tracers.schemas.Run``'s attribute names, so the run
trees read the same. Differences: ``error`` is ``repr(error)`` (``BaseTracer`` appends the
traceback, which ragmeter drops), LLM ``outputs`` hold the ``LLMResult``'s generation objects
rather than their ``model_dump()``, ``events`` holds only ``new_token`` events and
``dotted_order`` is the start sequence (ties of equal start times broken by start order).
"""

from __future__ import annotations

import datetime as _dt
import itertools
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from ragmeter.guard import guarded

__all__ = ["CapturedRun", "RunTracker", "TRACK"]

#: Where the guard reports failures of the run-tracking callbacks.
TRACK = "LangChain run tracking"
_UTC = _dt.UTC


class CapturedRun:
    """One run of a tree: LangChain ``Run`` attribute names, the values ragmeter reads."""

    __slots__ = (
        "id",
        "parent_run_id",
        "run_type",
        "name",
        "inputs",
        "outputs",
        "error",
        "start_time",
        "end_time",
        "tags",
        "extra",
        "events",
        "child_runs",
        "dotted_order",
    )

    def __init__(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        run_type: str,
        name: str,
        inputs: Any,
        tags: Any,
        extra: dict,
        order: str,
    ):
        self.id = run_id
        self.parent_run_id = parent_run_id
        self.run_type = run_type
        self.name = name
        self.inputs = inputs
        self.outputs: Any = None
        self.error: str | None = None
        self.start_time = _dt.datetime.now(_UTC)
        self.end_time: _dt.datetime | None = None
        self.tags = list(tags) if tags else []
        self.extra = extra
        self.events: list[dict] = []
        self.child_runs: list[CapturedRun] = []
        self.dotted_order = order

    def __repr__(self) -> str:
        return f"CapturedRun({self.run_type} {self.name!r}, {len(self.child_runs)} children)"


def _name(serialized: Any, name: str | None) -> str:
    """A run's name as LangChain's ``Run`` infers it."""
    if name:
        return name
    if isinstance(serialized, dict):
        if serialized.get("name"):
            return serialized["name"]
        ident = serialized.get("id")
        if isinstance(ident, list) and ident:
            return str(ident[-1])
    return "Unnamed"


def _chain_io(value: Any, key: str) -> Any:
    return value if isinstance(value, dict) else {key: value}


def _llm_outputs(response: Any) -> dict:
    return {
        "generations": getattr(response, "generations", None) or [],
        "llm_output": getattr(response, "llm_output", None),
    }


class RunTracker(BaseCallbackHandler):
    """Assembles run trees from LangChain's callbacks (see the module docstring).

    Subclasses implement :meth:`_persist_run` (a root run ended, with its whole tree) and may
    implement :meth:`_on_root_start` (a root run started, on the thread and in the context where
    it starts). :attr:`run_map` holds the runs in progress, by run id; a run leaves it when it
    ends. Callbacks never raise: a failure is logged once by :mod:`ragmeter.guard`.
    """

    run_inline = True  # cheap: run where the event happens, no executor hop
    raise_error = False

    def __init__(self) -> None:
        super().__init__()
        self.run_map: dict[UUID, CapturedRun] = {}
        self._order = itertools.count()

    # ------------------------------------------------------------------ hooks for subclasses

    def _on_root_start(self, run: CapturedRun) -> None:
        """A root run started (default: nothing)."""

    def _persist_run(self, run: CapturedRun) -> None:  # pragma: no cover - abstract
        """A root run ended: ``run`` is its tree."""
        raise NotImplementedError

    # ------------------------------------------------------------------ tracking

    def _start(
        self,
        run_type: str,
        run_id: UUID,
        parent_run_id: UUID | None,
        name: str,
        inputs: Any,
        tags: Any,
        metadata: Any,
        kwargs: dict,
    ) -> None:
        extra = dict(kwargs)
        if metadata:
            extra["metadata"] = metadata
        parent = self.run_map.get(parent_run_id) if parent_run_id is not None else None
        run = CapturedRun(
            run_id,
            parent_run_id if parent is not None else None,
            run_type,
            name,
            inputs,
            tags,
            extra,
            f"{next(self._order):016d}",
        )
        if parent is not None:
            parent.child_runs.append(run)
        self.run_map[run_id] = run
        if parent is None:
            self._on_root_start(run)

    def _end(
        self, run_id: UUID, *, outputs: Any = None, error: BaseException | None = None, inputs: Any = None
    ) -> None:
        run = self.run_map.pop(run_id, None)
        if run is None:
            return
        if outputs is not None:
            run.outputs = outputs
        if error is not None:
            run.error = repr(error)
        if inputs is not None:  # a stream's input, known once it was consumed
            run.inputs = _chain_io(inputs, "input")
        run.end_time = _dt.datetime.now(_UTC)
        if run.parent_run_id is None:
            self._persist_run(run)

    # ------------------------------------------------------------------ LangChain callbacks

    @guarded(TRACK)
    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: Any = None,
        metadata: Any = None,
        run_type: str | None = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """A chain (runnable) started."""
        self._start(
            run_type or "chain",
            run_id,
            parent_run_id,
            _name(serialized, name),
            _chain_io(inputs, "input"),
            tags,
            metadata,
            kwargs,
        )

    @guarded(TRACK)
    def on_chain_end(self, outputs: Any, *, run_id: UUID, inputs: Any = None, **kwargs: Any) -> None:
        """A chain ended."""
        self._end(run_id, outputs=_chain_io(outputs, "output"), inputs=inputs)

    @guarded(TRACK)
    def on_chain_error(self, error: BaseException, *, run_id: UUID, inputs: Any = None, **kwargs: Any) -> None:
        """A chain raised (or its stream was closed)."""
        self._end(run_id, error=error, inputs=inputs)

    @guarded(TRACK)
    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: Any = None,
        metadata: Any = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """A chat model call started (its messages are not kept: ragmeter does not read them)."""
        self._start("chat_model", run_id, parent_run_id, _name(serialized, name), {}, tags, metadata, kwargs)

    @guarded(TRACK)
    def on_llm_start(
        self,
        serialized: Any,
        prompts: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: Any = None,
        metadata: Any = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """A completion model call started."""
        self._start("llm", run_id, parent_run_id, _name(serialized, name), {"prompts": prompts}, tags, metadata, kwargs)

    @guarded(TRACK)
    def on_llm_new_token(self, token: Any, *, chunk: Any = None, run_id: UUID, **kwargs: Any) -> None:
        """A streamed token: kept as a ``new_token`` event (time of the first token, partial text)."""
        run = self.run_map.get(run_id)
        if run is not None:
            event = {"token": token, "chunk": chunk} if chunk else {"token": token}
            run.events.append({"name": "new_token", "time": _dt.datetime.now(_UTC), "kwargs": event})

    @guarded(TRACK)
    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call ended."""
        self._end(run_id, outputs=_llm_outputs(response))

    @guarded(TRACK)
    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A model call raised (its partial response, if any, is kept)."""
        response = kwargs.get("response")
        self._end(run_id, error=error, outputs=_llm_outputs(response) if response else None)

    @guarded(TRACK)
    def on_retriever_start(
        self,
        serialized: Any,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: Any = None,
        metadata: Any = None,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        """A retriever started."""
        self._start("retriever", run_id, parent_run_id, name or "Retriever", {"query": query}, tags, metadata, kwargs)

    @guarded(TRACK)
    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever returned its documents."""
        self._end(run_id, outputs={"documents": documents})

    @guarded(TRACK)
    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A retriever raised."""
        self._end(run_id, error=error)

    @guarded(TRACK)
    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: Any = None,
        metadata: Any = None,
        name: str | None = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> None:
        """A tool started."""
        self._start(
            "tool",
            run_id,
            parent_run_id,
            _name(serialized, name),
            inputs if isinstance(inputs, dict) else {"input": input_str},
            tags,
            metadata,
            kwargs,
        )

    @guarded(TRACK)
    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool ended."""
        self._end(run_id, outputs={"output": output})

    @guarded(TRACK)
    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A tool raised."""
        self._end(run_id, error=error)
