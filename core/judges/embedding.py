"""The base of the SDK and framework embedders: :class:`CachedEmbedder`."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from ragmeter.judges.base import Embedder, JudgeError, Usage
from ragmeter.judges.cache import JudgeCache, cache_key, resolve_cache
from ragmeter.judges.pricing import cost_of, price_for
from ragmeter.judges.ratelimit import RateLimiter
from ragmeter.judges.retry import Dispatcher, RetryPolicy

__all__ = ["CachedEmbedder"]


class CachedEmbedder(Embedder):
    """Base of the SDK embedders: cache per text, batching, retries and limits, usage and cost.

    Subclasses implement :meth:`_embed_batch` (one request: texts -> (vectors, prompt tokens)) and
    set ``backend``, ``model`` and :meth:`cache_params`. Retries and limits take the same
    arguments as :class:`~ragmeter.judges.llm.LLMJudge` (``clock`` and ``sleep`` included).
    """

    backend = "embedder"
    model = "unknown"
    #: strings never shown in an error or a log line (the API key)
    secrets: tuple[str, ...] = ()

    def __init__(self, *, cache: JudgeCache | str | os.PathLike | bool | None = None, batch_size: int = 256,
                 max_retries: int = 4, backoff_base: float = 0.5, backoff_max: float = 30.0,
                 max_retry_after: float = 60.0, max_concurrency: int | None = 4, rpm: float | None = None,
                 tpm: float | None = None, prices: float | tuple[float, float] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep):
        self.name = f"{self.backend}:{self.model}"
        self.cache = resolve_cache(cache)
        self.batch_size = int(batch_size)
        if isinstance(prices, (int, float)):
            prices = (float(prices), 0.0)
        self.prices = tuple(prices) if prices is not None else price_for(self.model)
        self.dispatcher = Dispatcher(
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max,
                              max_retry_after=max_retry_after),
            max_concurrency=max_concurrency, limiter=RateLimiter(rpm, tpm, clock=clock, sleep=sleep), sleep=sleep,
            secrets=self.secrets)

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
        for start in range(0, len(todo), self.batch_size):
            batch = todo[start:start + self.batch_size]
            estimate = sum(len(t) for t in batch) // 4 + 1
            arr, tokens = await self.dispatcher.send(
                lambda b=batch: self._embed_batch(b), usage, task="embed", who=self.name, estimate=estimate,
                tokens=lambda r: int(r[1] or 0), counter="embedding_calls")
            arr = np.asarray(arr, dtype=np.float64)
            if arr.ndim != 2 or arr.shape[0] != len(batch):
                raise JudgeError(f"{self.name}: got {arr.shape[0] if arr.ndim else 0} vectors for {len(batch)} texts",
                                 task="embed", usage=usage)
            usage.prompt_tokens += int(tokens or 0)
            vectors.update(zip(batch, arr))
            if self.cache is not None:
                self.cache.put_vectors(self.name, [(self._key(t, params), v) for t, v in zip(batch, arr)])
        if usage.embedding_calls:
            usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, 0)
        return np.vstack([vectors[t] for t in texts]), usage

    async def aclose(self) -> None:
        """Release clients (optional)."""
