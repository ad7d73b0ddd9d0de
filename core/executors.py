"""Internal: Executors: where the samples of a run are scored.

The runner (:func:`ragmeter.evaluate`) hands every sample to an :class:`Executor`:
``map(fn, items, on_done)`` awaits ``fn(item)`` for each item and calls ``on_done(index, result)``
in the caller's process as each finishes. Items are pulled from ``items`` only as work slots free
up, so an iterator that reads a file lazily is never read ahead by more than the executor's
in-flight work (:mod:`ragmeter.streaming` relies on it).

* :class:`AsyncioExecutor` (the default): at most ``concurrency`` items in flight on the running
  event loop.
* :class:`RayExecutor`: the items are scored by worker actors on a Ray cluster (a local one when no
  address is given; ``pip install 'ragmeter[ray]'``). ``fn`` (the metrics, the judge and its
  embedder) is pickled once per worker; each worker rebuilds its SDK clients. A judge's requests /
  tokens-per-minute limits hold for the run as a whole: each active
  :class:`~ragmeter.judges.ratelimit.RateLimiter` is replaced, in the workers' copies, by a
  :class:`SharedRateLimiter` on one actor, so N workers do not send N times the allowed rate. The
  judge cache (a SQLite file, pickled as its path) is shared by the workers on the driver's machine.
  A worker that dies is restarted and its samples are sent again (``max_restarts``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import pickle
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

from ragmeter.judges.ratelimit import RateLimiter

__all__ = [
    "Executor",
    "AsyncioExecutor",
    "RayExecutor",
    "SharedRateLimiter",
    "default_concurrency",
    "DEFAULT_CONCURRENCY",
]

T = TypeVar("T")
R = TypeVar("R")


#: Samples in flight when ``concurrency`` is None and the judge has no request cap to follow.
DEFAULT_CONCURRENCY = 8


def default_concurrency(judge: Any) -> int:
    """Samples in flight for ``judge`` when the caller sets none: as many as the judge's cap on
    requests in flight (an LLM judge: ``max_concurrency``, 64 by default; its adaptive limit then
    decides how many requests really go out), else :data:`DEFAULT_CONCURRENCY` (8)."""
    slots = getattr(getattr(judge, "dispatcher", None), "slots", None)
    ceiling = getattr(slots, "ceiling", None) or getattr(slots, "limit", None)
    return max(DEFAULT_CONCURRENCY, int(ceiling)) if ceiling else DEFAULT_CONCURRENCY


class Executor(Protocol):
    """Runs ``fn`` over ``items`` and calls ``on_done(index, result)`` as each finishes."""

    async def map(
        self, fn: Callable[[T], Awaitable[R]], items: Iterable[T], on_done: Callable[[int, R], None]
    ) -> None: ...


class AsyncioExecutor:
    """The default executor: at most ``concurrency`` items in flight on the running event loop."""

    def __init__(self, concurrency: int = 8):
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency

    async def map(self, fn, items, on_done) -> None:
        """Run ``fn`` on every item, ``concurrency`` at a time, in order (``concurrency`` workers
        take the next item as they finish one: no task exists for an item not yet started)."""
        await _feed(iter(enumerate(items)), [fn] * self.concurrency, on_done)


async def _feed(
    queue: Iterable[tuple[int, Any]], slots: list[Callable[[Any], Awaitable[Any]]], on_done: Callable[[int, Any], None]
) -> None:
    """One coroutine per slot, each taking the next ``(index, item)`` of the shared ``queue`` as it
    finishes the previous one."""

    async def slot(call: Callable[[Any], Awaitable[Any]]) -> None:
        for i, item in queue:
            on_done(i, await call(item))

    await asyncio.gather(*(slot(call) for call in slots))


def _ray() -> Any:
    """Ray, imported; ragmeter's loggers are switched back on afterwards, because older Ray
    releases (2.6 among them) configure logging on import with ``disable_existing_loggers`` and
    so silence every logger that already exists."""
    try:
        import ray
    except ImportError as err:
        raise ImportError("RayExecutor needs Ray: pip install 'ragmeter[ray]'") from err
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if (name == "ragmeter" or name.startswith("ragmeter.")) and isinstance(logger, logging.Logger):
            logger.disabled = False
    return ray


class SharedRateLimiter:
    """The stand-in of a :class:`~ragmeter.judges.ratelimit.RateLimiter` in the workers of a Ray
    run: every worker reserves its requests and tokens from one actor (named ``name``) that holds
    the buckets, then waits out the reservation on its own loop. Same interface as RateLimiter
    (``acquire`` / ``settle`` / ``active``); pickled as its name."""

    active = True

    def __init__(self, name: str, rpm: float | None, tpm: float | None):
        self.name, self.rpm, self.tpm = name, rpm, tpm
        self._actor: Any = None

    def __reduce__(self) -> tuple:
        return SharedRateLimiter, (self.name, self.rpm, self.tpm)

    def _handle(self) -> Any:
        if self._actor is None:
            self._actor = _ray().get_actor(self.name)
        return self._actor

    async def acquire(self, estimated_tokens: int = 0) -> float:
        """Reserve one request and ``estimated_tokens`` on the shared actor; sleep until covered."""
        wait = await self._handle().reserve.remote(estimated_tokens)
        if wait > 0:
            try:
                await asyncio.sleep(wait)
            except asyncio.CancelledError:
                self._handle().refund.remote(1, estimated_tokens)
                raise
        return wait

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token reservation once the real count is known (sent, not awaited)."""
        if self.tpm and estimated_tokens > 0:
            self._handle().refund.remote(0, estimated_tokens - actual_tokens)

    def __repr__(self) -> str:
        return f"SharedRateLimiter(rpm={self.rpm}, tpm={self.tpm})"


class _Limits:
    """The actor behind :class:`SharedRateLimiter`: the buckets of one RateLimiter."""

    def __init__(self, rpm: float | None, tpm: float | None, rpm_burst: float | None, tpm_burst: float | None):
        self.limiter = RateLimiter(rpm, tpm, rpm_burst=rpm_burst, tpm_burst=tpm_burst)

    def reserve(self, tokens: int) -> float:
        """Reserve one request and ``tokens`` now; the seconds until both are covered."""
        waits = [0.0]
        if self.limiter.requests is not None:
            waits.append(self.limiter.requests.reserve(1))
        if self.limiter.tokens is not None and tokens > 0:
            waits.append(self.limiter.tokens.reserve(tokens))
        return max(waits)

    def refund(self, requests: float, tokens: float) -> None:
        """Give back ``requests`` and ``tokens`` (negative: take more)."""
        if requests and self.limiter.requests is not None:
            self.limiter.requests.refund(requests)
        if tokens and self.limiter.tokens is not None:
            self.limiter.tokens.refund(tokens)


class _Worker:
    """A worker actor: holds one unpickled ``fn`` (metrics, judge, embedder) for its life."""

    def __init__(self, payload: bytes):
        self.fn = pickle.loads(payload)

    async def ready(self) -> None:
        """Make the SDK clients of ``fn``'s judge and embedder on this actor's loop now: made inside
        the first requests, they would hold those back while rate-limit turns go by, and the
        requests then leave together."""
        judge = getattr(self.fn, "keywords", {}).get("judge")
        parts = [judge, getattr(judge, "embedder", None), *getattr(judge, "members", ())]
        parts += [getattr(p, "transport", None) for p in parts] + [getattr(p, "embedder", None) for p in parts]
        for part in parts:
            get = getattr(getattr(part, "clients", None), "get", None)
            if callable(get):
                get()

    async def run(self, item: Any) -> Any:
        """``fn(item)`` on the actor's event loop (an async actor runs many at once)."""
        return await self.fn(item)

    def pid(self) -> int:
        """The worker's process id."""
        return os.getpid()


def _dumps(fn: Any, share: Callable[[RateLimiter], str]) -> bytes:
    """``fn`` pickled (cloudpickle), each active RateLimiter in it as the SharedRateLimiter of the
    actor ``share(limiter)`` names."""
    from ray import cloudpickle

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if type(obj) is RateLimiter and obj.active:
                return SharedRateLimiter, (share(obj), obj.rpm, obj.tpm)
            return super().reducer_override(obj)

    buf = io.BytesIO()
    Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(fn)
    return buf.getvalue()


class RayExecutor:
    """Scores the items on a Ray cluster: ``workers`` actors, ``concurrency`` items in flight on each
    (64, as many as an LLM judge's default cap on requests in flight; each worker has that cap).

    ``address``: the cluster (``"ray://head:10001"``, ``"auto"``); None: ``$RAY_ADDRESS``, else a
    local Ray runtime started on first use (``init`` holds more :func:`ray.init` arguments, e.g.
    ``{"num_cpus": 2}``; a runtime already initialised in this process is used as it is).
    ``workers``: actors (None: one per CPU of the cluster); ``worker_options``: their Ray options
    (default ``{"num_cpus": 1}``). ``max_restarts``: how often a worker that died (its process
    killed, its node lost) is restarted; the items it held are sent again each time.
    :meth:`shutdown` stops a runtime this executor started. :attr:`actors` are the workers of the
    run in progress. See the module docstring for limits and the cache.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        workers: int | None = None,
        concurrency: int = 64,
        max_restarts: int = 3,
        init: dict | None = None,
        worker_options: dict | None = None,
    ):
        if concurrency < 1 or (workers is not None and workers < 1):
            raise ValueError("workers and concurrency must be >= 1")
        self.address, self.workers, self.concurrency = address, workers, concurrency
        self.max_restarts = max_restarts
        self.init = dict(init or {})
        self.worker_options = {"num_cpus": 1, **(worker_options or {})}
        self.actors: list[Any] = []
        self._started = False

    def connect(self) -> Any:
        """The ``ray`` module, connected to the cluster (started locally when there is none)."""
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=self.address, **self.init)
            self._started = True
        return ray

    async def map(self, fn, items, on_done) -> None:
        """Score ``items`` on the workers; ``on_done`` runs here, in the caller's process."""
        ray = self.connect()
        limiters: dict[int, tuple[str, Any]] = {}  # id(RateLimiter) -> (actor name, actor)

        def share(limiter: RateLimiter) -> str:
            if id(limiter) not in limiters:
                name = f"ragmeter-limits-{uuid.uuid4().hex[:12]}"
                bursts = [b.capacity if b is not None else None for b in (limiter.requests, limiter.tokens)]
                actor = ray.remote(_Limits).options(name=name, num_cpus=0).remote(limiter.rpm, limiter.tpm, *bursts)
                limiters[id(limiter)] = (name, actor)
            return limiters[id(limiter)][0]

        payload = _dumps(fn, share)
        n = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        worker = ray.remote(_Worker).options(
            max_restarts=self.max_restarts, max_task_retries=self.max_restarts, **self.worker_options
        )
        self.actors = [worker.remote(payload) for _ in range(n)]
        in_flight: set = set()

        def runner(actor: Any) -> Callable[[Any], Awaitable[Any]]:
            async def run(item: Any) -> Any:
                ref = actor.run.remote(item)
                in_flight.add(ref)
                result = await ref  # (cancelled: left in in_flight, for the finally below)
                in_flight.discard(ref)
                return result

            return run

        try:
            await asyncio.gather(*(a.ready.remote() for a in self.actors))
            await _feed(
                iter(enumerate(items)), [runner(a) for a in self.actors for _ in range(self.concurrency)], on_done
            )
        finally:
            for ref in list(in_flight):  # stopped (Ctrl-C, an error): cancel what is out, so that it is not retried
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
            for actor in [*self.actors, *(a for _, a in limiters.values())]:
                ray.kill(actor)
            self.actors = []

    def shutdown(self) -> None:
        """Stop the local Ray runtime if this executor started it."""
        if self._started:
            _ray().shutdown()
            self._started = False

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, workers={self.workers}, concurrency={self.concurrency})"
