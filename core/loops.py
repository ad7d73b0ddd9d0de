"""Internal: Event-loop helpers: run a coroutine from sync code, one client per event loop, a private loop.

Judges are called from many places: ``asyncio.run`` in sync wrappers, notebooks that already run
a loop, background threads of the inline scorer and the span processor. SDK clients are bound to
the loop that created them, so :class:`PerLoop` keeps one per loop and :class:`HomeLoop` gives
framework-owned clients a loop of their own.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

__all__ = ["run_sync", "PerLoop", "HomeLoop"]

log = logging.getLogger("ragmeter.loops")
T = TypeVar("T")


def run_sync(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion from sync code, also inside a running event loop (Jupyter):
    there it runs on a fresh loop in a helper thread and this call waits for it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="ragmeter-run-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


class PerLoop(Generic[T]):
    """One object per running event loop, made by ``factory()`` on first use in that loop.

    Async SDK clients (httpx connection pools) are bound to the loop that created them; ragmeter
    runs judges from several loops (``asyncio.run`` in sync wrappers, background threads), so
    each loop gets its own client. ``close(obj)`` runs on the object's own loop when that loop
    shuts down (``asyncio.run`` calls ``loop.shutdown_asyncgens()`` before closing, which
    finalises a guard registered here), so no client outlives its loop; entries of loops closed
    without that step are dropped.
    """

    def __init__(self, factory: Callable[[], T], close: Callable[[T], Awaitable[Any]] | None = None):
        self._factory = factory
        self._close = close
        self._items: dict[int, tuple[weakref.ref, T, Any]] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple:
        """Pickled as its factory and closer, without the objects made so far: they belong to this
        process's loops, and a copy (another process, a Ray worker) makes its own on first use."""
        return (PerLoop, (self._factory, self._close))

    def _prune(self) -> None:
        for key, (ref, _, _) in list(self._items.items()):
            loop = ref()
            if loop is None or loop.is_closed():
                del self._items[key]

    def get(self) -> T:
        """The object for the running loop (created on first use)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._prune()
            entry = self._items.get(id(loop))
            if entry is not None and entry[0]() is loop:
                return entry[1]
            obj = self._factory()
            self._items[id(loop)] = (weakref.ref(loop), obj, self._guard(loop, obj))
            return obj

    def _guard(self, loop: asyncio.AbstractEventLoop, obj: T) -> Any:
        """An async generator, started and registered with ``loop``, that closes ``obj`` when the
        loop finalises its async generators (at shutdown)."""
        if self._close is None:
            return None
        owner = weakref.ref(self)
        close = self._close

        async def guard():
            try:
                yield
            finally:
                me = owner()
                if me is not None:
                    with me._lock:
                        entry = me._items.get(id(loop))
                        if entry is not None and entry[1] is obj:
                            del me._items[id(loop)]
                try:
                    await close(obj)
                except Exception:  # noqa: BLE001 - best effort at shutdown
                    log.debug("closing a client at loop shutdown failed", exc_info=True)

        agen = guard()
        step = agen.__anext__()  # calls the running loop's firstiter hook: the loop now tracks agen
        try:
            step.send(None)
        except StopIteration:
            pass
        return agen

    def __len__(self) -> int:
        with self._lock:
            self._prune()
            return len(self._items)

    async def aclose(self) -> None:
        """Close the running loop's object now (others' loops close theirs at shutdown)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._items.pop(id(loop), None)
            self._prune()
        if entry is not None and entry[2] is not None:
            await entry[2].aclose()  # runs close(obj)
        elif entry is not None and self._close is not None:
            await self._close(entry[1])


class HomeLoop:
    """A private event loop on a daemon thread, for clients that must stay on the loop that made them.

    LangChain and LlamaIndex models own their async clients (created once, bound to one loop);
    their judges run every request on this loop, whichever loop or thread the caller is on.
    The thread starts on first use.
    """

    def __init__(self, name: str = "ragmeter-judge"):
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def serve() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=serve, name=self._name, daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    async def run(self, coro_factory: Callable[[], Awaitable[T]]) -> T:
        """Run ``coro_factory()`` on the home loop and await its result from the caller's loop."""
        loop = self._ensure()
        if asyncio.get_running_loop() is loop:
            return await coro_factory()
        fut = asyncio.run_coroutine_threadsafe(_call(coro_factory), loop)
        return await asyncio.wrap_future(fut)

    def close(self) -> None:
        """Stop the home loop's thread (it restarts on next use)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)


async def _call(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()
