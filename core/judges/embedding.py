"""Internal: The base of the SDK and framework embedders: :class:`CachedEmbedder`.

Texts from concurrent :meth:`CachedEmbedder.embed` calls on one event loop (the samples of a run)
go out together: while ``max_concurrency`` embedding requests are in flight, the texts of new calls
wait and leave in the next request, up to ``batch_size`` texts each (group commit). A lone call is
sent at once, as one request. Each request is counted on the usage of the first call it served;
its tokens and cost are shared by the calls in proportion to their characters.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np

from ragmeter.judges.base import Embedder, JudgeError, Usage
from ragmeter.judges.cache import JudgeCache, cache_key, resolve_cache
from ragmeter.judges.pricing import cost_of, price_for
from ragmeter.judges.ratelimit import RateLimiter
from ragmeter.judges.retry import Dispatcher, RetryPolicy
from ragmeter.loops import PerLoop

__all__ = ["CachedEmbedder"]


class CachedEmbedder(Embedder):
    """Base of the SDK embedders: cache per text, batching, retries and limits, usage and cost.

    Subclasses implement :meth:`_embed_batch` (one request: texts -> (vectors, prompt tokens)) and
    set ``backend``, ``model`` and :meth:`cache_params`. Retries and limits take the same
    arguments as :class:`~ragmeter.judges.llm.LLMJudge` (``clock`` and ``sleep`` included);
    ``max_concurrency`` (default 4) caps embedding requests in flight, ``batch_size`` (256) the
    texts per request. :meth:`share_limits` puts the requests under a judge's cap as well.
    """

    backend = "embedder"
    model = "unknown"
    #: strings never shown in an error or a log line (the API key)
    secrets: tuple[str, ...] = ()

    def __init__(
        self,
        *,
        cache: JudgeCache | str | os.PathLike | bool | None = None,
        batch_size: int = 256,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 60.0,
        max_wait: float = 60.0,
        max_concurrency: int | None = 4,
        rpm: float | None = None,
        tpm: float | None = None,
        prices: float | tuple[float, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
        self.name = f"{self.backend}:{self.model}"
        self.cache = resolve_cache(cache)
        self.batch_size = int(batch_size)
        if isinstance(prices, (int, float)):
            prices = (float(prices), 0.0)
        self.prices = (prices[0], prices[1]) if prices is not None else price_for(self.model)
        self.max_concurrency = max_concurrency
        self.dispatcher = Dispatcher(
            retry=RetryPolicy(
                max_retries=max_retries,
                backoff_base=backoff_base,
                backoff_max=backoff_max,
                max_retry_after=max_retry_after,
                max_wait=max_wait,
            ),
            max_concurrency=max_concurrency,
            limiter=RateLimiter(rpm, tpm, clock=clock, sleep=sleep),
            sleep=sleep,
            secrets=self.secrets,
            clock=clock,
        )
        self._batchers: PerLoop[_Batcher] = PerLoop(functools.partial(_Batcher, self))

    def share_limits(self, dispatcher: Dispatcher) -> None:
        """Send every request under ``dispatcher``'s cap on requests in flight too (a judge's: the
        judge's and the embedder's requests then share one concurrency budget), and wait out its
        pauses (one provider: when it says wait, both wait)."""
        if dispatcher.slots is not None:
            self.dispatcher.slots = dispatcher.slots
        self.dispatcher.pause = dispatcher.pause

    async def _embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int]:  # pragma: no cover - interface
        raise NotImplementedError

    def cache_params(self) -> dict:
        """What, besides backend and model, determines a vector (part of the cache key)."""
        return {}

    def _key(self, text: str, params: dict | None = None) -> str:
        params = self.cache_params() if params is None else params
        return cache_key("embed/v1", self.backend, self.model, params, text)

    async def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, Usage]:
        """Vectors for ``texts`` (cached ones from the cache, the rest in batched requests)."""
        texts = [str(t) for t in texts]
        usage = Usage()
        if not texts:
            return np.zeros((0, 0)), usage
        params = self.cache_params() if self.cache is not None else {}
        keys = [self._key(t, params) for t in texts] if self.cache is not None else []
        found: dict[str, np.ndarray] = {}
        if self.cache is not None:
            found = self.cache.get_vectors(list(dict.fromkeys(keys)))
        todo = list(dict.fromkeys(t for i, t in enumerate(texts) if not keys or keys[i] not in found))
        vectors: dict[str, np.ndarray] = {}
        if self.cache is not None:
            for i, t in enumerate(texts):
                if keys[i] in found:
                    vectors[t] = found[keys[i]]
            if found:
                usage.cached += 1
        if todo:
            fresh, share = await self._batchers.get().submit(todo)
            usage = usage + share
            vectors.update(fresh)
            if self.cache is not None:
                self.cache.put_vectors(self.name, [(self._key(t, params), fresh[t]) for t in todo])
        if usage.embedding_calls or usage.prompt_tokens:
            usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, 0)
        return np.vstack([vectors[t] for t in texts]), usage

    async def _request(self, batch: list[str], usage: Usage) -> np.ndarray:
        """One embedding request for ``batch`` (retried, under the limits); its vectors."""
        estimate = sum(len(t) for t in batch) // 4 + 1
        arr, tokens = await self.dispatcher.send(
            lambda: self._embed_batch(batch),
            usage,
            task="embed",
            who=self.name,
            estimate=estimate,
            tokens=lambda r: int(r[1] or 0),
            counter="embedding_calls",
        )
        arr = np.asarray(arr, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[0] != len(batch):
            raise JudgeError(
                f"{self.name}: got {arr.shape[0] if arr.ndim else 0} vectors for {len(batch)} texts",
                task="embed",
                usage=usage,
            )
        usage.prompt_tokens += int(tokens or 0)
        return arr

    async def aclose(self) -> None:
        """Release clients (optional)."""


class _Waiter:
    """One :meth:`CachedEmbedder.embed` call waiting in a :class:`_Batcher`."""

    def __init__(self, texts: list[str], future: asyncio.Future):
        self.texts, self.future = texts, future
        self.left = len(texts)  # texts not yet embedded
        self.vectors: dict[str, np.ndarray] = {}
        self.usage = Usage()


class _Batcher:
    """The group commit of one embedder on one event loop (see the module docstring)."""

    def __init__(self, embedder: CachedEmbedder):
        self.embedder = embedder
        self.queue: list[tuple[_Waiter, str]] = []  # texts waiting, each with its call
        self.sending = 0
        self.tasks: set[asyncio.Task] = set()

    async def submit(self, texts: list[str]) -> tuple[dict[str, np.ndarray], Usage]:
        """Vectors of ``texts`` (distinct) and this call's share of the usage."""
        waiter = _Waiter(texts, asyncio.get_running_loop().create_future())
        self.queue.extend((waiter, t) for t in texts)
        cap = self.embedder.max_concurrency or len(self.queue)
        wanted = -(-len(self.queue) // self.embedder.batch_size)  # requests the waiting texts fill
        while self.sending < min(cap, wanted):
            self.sending += 1
            task = asyncio.ensure_future(self._drain())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return await waiter.future

    async def _drain(self) -> None:
        """Send what waits, ``batch_size`` texts a request, until nothing does."""
        try:
            await asyncio.sleep(0)  # the calls made in the same turn of the loop join this request
            while self.queue:
                size = self.embedder.batch_size
                taken, self.queue = self.queue[:size], self.queue[size:]
                await self._send(taken)
        finally:
            self.sending -= 1

    async def _send(self, taken: list[tuple[_Waiter, str]]) -> None:
        batch = list(dict.fromkeys(t for _, t in taken))
        waiters = list(dict.fromkeys(w for w, _ in taken))
        usage = Usage()
        try:
            arr = await self.embedder._request(batch, usage)
        except BaseException as exc:  # noqa: BLE001 - every call of the request gets the failure
            for i, w in enumerate(waiters):
                if not w.future.done():
                    err = exc
                    if isinstance(exc, JudgeError):
                        err = JudgeError(
                            str(exc),
                            task=exc.task,
                            attempts=exc.attempts,
                            usage=w.usage + (usage if i == 0 else Usage()),
                        )
                    w.future.set_exception(err)
            if not isinstance(exc, Exception):
                raise
            return
        found = dict(zip(batch, arr))
        chars = {w: sum(len(t) for x, t in taken if x is w) for w in waiters}
        total = sum(chars.values()) or 1
        given = 0
        for i, w in enumerate(waiters):
            share = usage.prompt_tokens * chars[w] // total if i else 0
            given += share
            first = i == 0
            w.usage = w.usage + Usage(
                retries=usage.retries if first else 0,
                embedding_calls=usage.embedding_calls if first else 0,
                prompt_tokens=share,
            )
        waiters[0].usage.prompt_tokens += usage.prompt_tokens - given
        for w, t in taken:
            w.vectors[t] = found[t]
            w.left -= 1
        for w in waiters:
            if w.left == 0 and not w.future.done():
                w.future.set_result((w.vectors, w.usage))
