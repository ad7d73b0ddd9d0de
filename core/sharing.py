"""Internal: Judge work shared between scoring calls that each score part of the same sample.

Within one :func:`ragmeter.metrics.scoring.score_sample` call the metrics of a sample already
share every judge task (one :class:`~ragmeter.metrics.ScoringContext` memo). Frameworks that run
one evaluator per metric (LlamaIndex's ``BatchEvalRunner``) score the same sample in several
calls; without help, a task two metrics need (``extract_claims`` for faithfulness and citation
accuracy) would be asked once per call. :func:`share_judge` wraps a judge so that those calls
share task answers too::

    judge = share_judge(OpenAIJudge("gpt-4o-mini"))
    await score_sample(sample, [faithfulness], judge)       # extract_claims asked here
    await score_sample(sample, [citation_accuracy], judge)  # ... and answered from memory here

:class:`SharedJudge` asks its inner judge at most once for the same task and inputs: concurrent
askers await the same call, later ones get the stored answer (reported as ``Usage(cached=1)``,
so cost is counted once). :class:`SharedEmbedder` does the same per text. Both keep a bounded
number of answers (least recently used dropped).

An :class:`~ragmeter.judges.EnsembleJudge` is shared member by member: :func:`share_judge`
returns an ensemble of the same class over the shared members (built with the ensemble's own
constructor, ``cls(members, max_spread=...)``), so its scorer and ``combine()`` are unchanged.

Process-wide registry: :func:`share_judge` / :func:`share_embedder` return the same wrapper for
the same object while anything holds that wrapper, so evaluators built separately share work.
The registry holds neither side strongly (weak keys, weak references to the wrappers): a wrapper
lives as long as its users, and the entry dies with the wrapped object. Objects are looked up by
hash and equality (identity, unless a judge class defines ``__eq__``); those that cannot be
hashed or weakly referenced are wrapped anew on each call (shared only by that wrapper's users).
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

import numpy as np

from ragmeter.judges.base import Embedder, Judge, TaskResult, Usage
from ragmeter.judges.ensemble import EnsembleJudge

__all__ = ["SharedJudge", "SharedEmbedder", "share_judge", "share_embedder"]

T = TypeVar("T")


def _task_key(task: str, inputs: Any) -> str:
    return task + ":" + json.dumps(inputs, sort_keys=True, ensure_ascii=False, default=str)


class SharedJudge(Judge):
    """A judge whose answers are asked once per task and inputs and shared by every caller.

    Keeps the last ``max_entries`` answers. ``name``, ``kind``, ``generates_questions`` and
    ``combines_tasks`` are the inner judge's, ``embedder`` is the inner judge's embedder shared
    (:func:`share_embedder`); any other attribute (``model``, ``cache`` ...) reads through to the
    inner judge.
    """

    def __init__(self, inner: Judge, max_entries: int = 4096):
        self.inner = inner
        self.name = inner.name
        self.kind = getattr(inner, "kind", "LLM")
        self.generates_questions = getattr(inner, "generates_questions", True)
        self.combines_tasks = getattr(inner, "combines_tasks", False)
        self.embedder = share_embedder(getattr(inner, "embedder", None))
        self.max_entries = max_entries
        self._done: collections.OrderedDict[str, TaskResult] = collections.OrderedDict()
        self._inflight: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Future] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if name == "inner" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @staticmethod
    def _cached(result: TaskResult) -> TaskResult:
        return TaskResult(result.task, result.output, Usage(cached=1), result.judge, result.note)

    async def run(self, task: str, inputs: dict) -> TaskResult:
        """The inner judge's answer, asked at most once for the same task and inputs."""
        key = _task_key(task, inputs)
        loop = asyncio.get_running_loop()  # a future belongs to one loop: in-flight calls are per loop
        with self._lock:
            hit = self._done.get(key)
            if hit is not None:
                self._done.move_to_end(key)
                return self._cached(hit)
            waiting = self._inflight.get((loop, key))
            if waiting is None:  # the first asker: it runs the task
                fut = loop.create_future()
                self._inflight[(loop, key)] = fut
        if waiting is not None:
            return self._cached(await asyncio.shield(waiting))
        try:
            result = await self.inner.run(task, inputs)
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # mark retrieved: no "exception never retrieved" warning without waiters
            raise
        finally:
            with self._lock:
                self._inflight.pop((loop, key), None)
        with self._lock:
            self._done[key] = result
            while len(self._done) > self.max_entries:
                self._done.popitem(last=False)
        fut.set_result(result)
        return result

    async def aclose(self) -> None:
        """Close the wrapped judge."""
        await self.inner.aclose()

    def __repr__(self) -> str:
        return f"SharedJudge({self.inner!r})"


class SharedEmbedder(Embedder):
    """An embedder with a per-text vector memory shared by every caller (last ``max_entries`` texts)."""

    def __init__(self, inner: Embedder, max_entries: int = 8192):
        self.inner = inner
        self.name = inner.name
        self.max_entries = max_entries
        self._vectors: collections.OrderedDict[str, np.ndarray] = collections.OrderedDict()
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, Usage]:
        """Vectors for ``texts``; only the texts not seen before are sent to the inner embedder."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        usage = Usage()
        local: dict[str, np.ndarray] = {}
        if missing:
            vectors, usage = await self.inner.embed(missing)
            local = dict(zip(missing, np.asarray(vectors, dtype=float)))
            with self._lock:
                self._vectors.update(local)
                while len(self._vectors) > self.max_entries:
                    self._vectors.popitem(last=False)
        with self._lock:
            rows = [local[t] if t in local else self._vectors[t] for t in texts]
        return np.asarray(rows, dtype=float), usage

    def __repr__(self) -> str:
        return f"SharedEmbedder({self.inner!r})"


class _Wrappers:
    """Object -> its live sharing wrapper; weak on both sides (see the module docstring)."""

    def __init__(self) -> None:
        self._map: weakref.WeakKeyDictionary[Any, weakref.ref] = weakref.WeakKeyDictionary()
        self._lock = threading.RLock()  # re-entered: an ensemble's wrapper wraps its members

    def get(self, obj: T, make: Callable[[T], Any]) -> Any:
        """The live wrapper of ``obj``, made by ``make(obj)`` when there is none."""
        with self._lock:
            try:
                ref = self._map.get(obj)
            except TypeError:  # not hashable or not weakly referenceable: cannot be registered
                return make(obj)
            wrapper = ref() if ref is not None else None
            if wrapper is None:
                wrapper = make(obj)
                self._map[obj] = weakref.ref(wrapper)
            return wrapper

    def __contains__(self, obj: Any) -> bool:
        """Whether ``obj`` has a live wrapper."""
        with self._lock:
            try:
                ref = self._map.get(obj)
            except TypeError:
                return False
            return ref is not None and ref() is not None


_WRAPPERS = _Wrappers()


def _wrap_judge(judge: Judge) -> Judge:
    if isinstance(judge, EnsembleJudge):
        return type(judge)([share_judge(m) for m in judge.members], max_spread=judge.max_spread)
    return SharedJudge(judge)


@overload
def share_judge(judge: Judge) -> Judge: ...
@overload
def share_judge(judge: None) -> None: ...
def share_judge(judge: Judge | None) -> Judge | None:
    """The process-wide sharing wrapper of ``judge`` (the same one while it is in use); None and
    wrappers pass through. An ensemble becomes an ensemble of shared members."""
    if judge is None or isinstance(judge, SharedJudge):
        return judge
    return _WRAPPERS.get(judge, _wrap_judge)


def share_embedder(embedder: Embedder | None) -> Embedder | None:
    """The process-wide sharing wrapper of ``embedder`` (the same one while it is in use); None
    and wrappers pass through."""
    if embedder is None or isinstance(embedder, SharedEmbedder):
        return embedder
    return _WRAPPERS.get(embedder, SharedEmbedder)
