"""Internal: The machinery every LLM judge shares, written once: :class:`LLMJudge` around a thin transport.

A backend is a :class:`~ragmeter.judges.transport.Transport` (:mod:`ragmeter.judges.transport`).
Everything else lives here, around the transport:

* prompt from the :class:`~ragmeter.judges.tasks.TaskSpec`, answer parsed and ``validate``-d;
  an invalid answer is shown back to the judge with the error and asked again; an answer cut
  off at ``max_tokens`` is asked again with twice the room (up to ``max_tokens_cap``); after the
  last attempt :class:`~ragmeter.judges.base.JudgeError` — never a guessed value;
* transient failures retried with backoff, under a cap on requests in flight and requests /
  tokens per minute (:mod:`ragmeter.judges.retry`, :mod:`ragmeter.judges.ratelimit`), shared by
  every thread and event loop that uses the judge (the SDKs' own retries are off, so every
  request counts);
* a total deadline per request (``timeout``): a server that trickles its answer fails that
  attempt at the deadline, and the attempt is retried like any transient failure;
* a persistent cache of validated answers (:mod:`ragmeter.judges.cache`); a cached answer is
  validated like a fresh one and asked again when it fails; a cache that cannot be opened or
  written is skipped (warned once);
* upstream error text redacted (:func:`ragmeter.redact.redact`, the key included) before it
  reaches an error message;
* usage on every :class:`~ragmeter.judges.base.TaskResult`: requests, retries, tokens, cost
  (:mod:`ragmeter.judges.pricing`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ragmeter.judges.base import REPEAT, Embedder, Judge, JudgeError, TaskResult, Usage
from ragmeter.judges.cache import JudgeCache, cache_key, resolve_cache
from ragmeter.judges.pricing import cost_of, price_for
from ragmeter.judges.ratelimit import RateLimiter
from ragmeter.judges.retry import Dispatcher, RetryPolicy, within
from ragmeter.judges.tasks import InvalidOutput, TaskSpec, get_task
from ragmeter.judges.transport import ChatRequest, Reply, Transport, Turn, parse_json_answer
from ragmeter.privacy import for_log
from ragmeter.redact import redact

if TYPE_CHECKING:  # pragma: no cover
    from ragmeter.judges.fingerprint import JudgeFingerprint

__all__ = ["LLMJudge"]

log = logging.getLogger("ragmeter.judges")
_DEFAULT = object()


#: id(spec) -> (spec, hash of its system prompt and schema): hashed once per task, not per call
#: (the spec is kept, so its id cannot be reused while the entry exists).
_PROMPT_HASHES: dict[int, tuple[TaskSpec, str]] = {}


def _prompt_hash(spec: TaskSpec) -> str:
    """``cache_key(spec.system, spec.schema)``, computed once per task spec."""
    hit = _PROMPT_HASHES.get(id(spec))
    if hit is None or hit[0] is not spec:
        hit = _PROMPT_HASHES[id(spec)] = (spec, cache_key(spec.system, spec.schema))
    return hit[1]


class LLMJudge(Judge):
    """A judge answered by an LLM behind ``transport``, with retries, limits, cache and accounting.

    Parameters (all keyword-only except ``transport``):

    * ``embedder``: the :class:`Embedder` metrics use for vectors (None: no embeddings).
    * ``cache``: None (default location), a path, a :class:`JudgeCache`, or False (no cache).
    * ``max_attempts``: answers asked for per task before giving up on invalid ones (default 3).
    * ``max_retries``, ``backoff_base``, ``backoff_max``, ``max_retry_after``, ``max_wait``:
      retries of transient failures per request (:class:`RetryPolicy`): when the provider says
      wait (429, Retry-After, rate-limit reset headers) every request of the judge pauses, and a
      request is retried until it has waited ``max_wait`` seconds (60) in all; other transient
      failures ``max_retries`` times (4).
    * ``max_concurrency``: the most requests in flight at once (default 64; None: no cap). With
      ``adaptive_concurrency`` (default True) the judge starts at ``initial_concurrency`` (16),
      grows while the provider answers and halves on 429 / overloaded replies (AIMD,
      :class:`~ragmeter.judges.ratelimit.AdaptiveLimit`); False: always ``max_concurrency``.
      ``rpm`` / ``tpm``: requests / tokens per minute (or a ready ``rate_limiter``), the user's
      ceiling whatever the concurrency.
    * ``max_tokens`` (default: the transport's) and ``max_tokens_cap``: room for the answer;
      doubled up to the cap when an answer is cut off. ``temperature`` (default 0.0; None: the
      backend's default), ``timeout``: total seconds per request (a deadline, however slowly
      the answer arrives; None: none), a transient failure past it.
    * ``prices``: ``(input, output)`` USD per 1M tokens, overriding
      :data:`~ragmeter.judges.pricing.PRICES`.
    * ``clock`` / ``sleep``: how the judge reads the time and waits (rate limits, backoff);
      ``time.monotonic`` / ``asyncio.sleep``, or a fake clock's in tests.
    """

    kind = "LLM"
    #: Answers the combined tasks (:data:`~ragmeter.judges.tasks.COMBINED_TASKS`) from their prompts.
    combines_tasks = True

    def __init__(
        self,
        transport: Transport,
        *,
        embedder: Embedder | None = None,
        cache: JudgeCache | str | os.PathLike | bool | None = None,
        max_attempts: int = 3,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 60.0,
        max_wait: float = 60.0,
        max_concurrency: int | None = 64,
        adaptive_concurrency: bool = True,
        initial_concurrency: int = 16,
        rpm: float | None = None,
        tpm: float | None = None,
        rate_limiter: RateLimiter | None = None,
        max_tokens: int | None | Any = _DEFAULT,
        max_tokens_cap: int = 16384,
        temperature: float | None = 0.0,
        timeout: float | None = 120.0,
        prices: tuple[float, float] | None = None,
        name: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.transport = transport
        self.name = name or f"{transport.backend}:{transport.model}"
        self.model = transport.model
        self.embedder = embedder
        self.cache = resolve_cache(cache)
        self.max_attempts = int(max_attempts)
        self.max_tokens = transport.default_max_tokens if max_tokens is _DEFAULT else max_tokens
        self.max_tokens_cap = int(max_tokens_cap)
        self.temperature = temperature
        self.timeout = timeout
        self.prices = (prices[0], prices[1]) if prices is not None else price_for(transport.model)
        limiter = rate_limiter if rate_limiter is not None else RateLimiter(rpm, tpm, clock=clock, sleep=sleep)
        self.dispatcher = Dispatcher(
            retry=RetryPolicy(
                max_retries=max_retries,
                backoff_base=backoff_base,
                backoff_max=backoff_max,
                max_retry_after=max_retry_after,
                max_wait=max_wait,
            ),
            max_concurrency=max_concurrency,
            limiter=limiter,
            sleep=sleep,
            secrets=transport.secrets,
            adaptive=adaptive_concurrency,
            initial_concurrency=initial_concurrency,
            clock=clock,
        )

    def check(self) -> None:
        """Raise ValueError naming what is missing when the transport cannot send (no request is made)."""
        self.transport.check()

    def describe(self) -> JudgeFingerprint:
        """Backend, model, endpoint (kind and host, no credentials), every task's prompt and schema
        version, temperature, seed and embedder: see :mod:`ragmeter.judges.fingerprint`."""
        from ragmeter.judges.fingerprint import JudgeFingerprint, endpoint_kind, task_versions

        t = self.transport
        official = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}.get(t.backend)
        endpoint: str | None
        if official is not None:
            endpoint = endpoint_kind(getattr(t, "base_url", None), official)
        else:  # a framework model (LangChain, LlamaIndex): its class, and its endpoint when it names one
            params = t.cache_params()
            inner: dict = params["params"] if isinstance(params.get("params"), dict) else {}
            url = next(
                (d[k] for d in (inner, params) for k in ("base_url", "api_base") if isinstance(d.get(k), str)), None
            )
            parts = [str(params["class"])] if params.get("class") else []
            endpoint = " ".join(parts + ([endpoint_kind(url, "")] if url else [])) or None
        seed = getattr(t, "seed", None)
        return JudgeFingerprint(
            backend=t.backend,
            model=t.model,
            endpoint=endpoint,
            tasks=task_versions(),
            temperature=self.temperature,
            seed=seed if isinstance(seed, int) else None,
            embedder=getattr(self.embedder, "name", None),
        )

    # ------------------------------------------------------------------ cache
    def cache_key(self, spec: TaskSpec, inputs: dict) -> str:
        """The cache key of ``spec`` on ``inputs`` for this judge (and the repeat, after the
        first: :data:`~ragmeter.judges.base.REPEAT`)."""
        params = {"temperature": self.temperature, **self.transport.cache_params()}
        if REPEAT.get():
            params["repeat"] = REPEAT.get()
        return cache_key(
            "judge/v1",
            self.transport.backend,
            self.transport.model,
            spec.name,
            spec.version,
            _prompt_hash(spec),
            inputs,
            params,
        )

    # ------------------------------------------------------------------ run
    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Ask the model for ``task`` on ``inputs``; return the validated answer or raise JudgeError."""
        spec = get_task(task)
        cache = self.cache
        key = self.cache_key(spec, inputs) if cache is not None else None
        if cache is not None and key is not None:
            hit = cache.get(key, validate=lambda entry: self._revalidate(spec, inputs, entry))
            if hit is not None:
                return TaskResult(task, hit["output"], Usage(cached=1), self.name, hit["note"])

        system, user = spec.messages(inputs)
        turns = [Turn("user", user)]
        usage = Usage()
        max_tokens = self.max_tokens
        attempts = 0
        last_error = ""
        notes: list[str] = []
        while True:
            request = ChatRequest(
                task=spec.name,
                system=system,
                turns=list(turns),
                schema=spec.schema,
                max_tokens=max_tokens,
                temperature=self.temperature,
                timeout=self.timeout,
            )
            attempts += 1
            if usage.calls > 0:  # asking again (invalid or cut-off answer) is a retry too
                usage.retries += 1
            try:
                reply = await self._send(request, usage)
            except JudgeError:
                usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, usage.completion_tokens)
                raise
            if reply.note and reply.note not in notes:
                notes.append(reply.note)
            if reply.truncated:
                current = max_tokens or reply.max_tokens or 4096
                if current >= self.max_tokens_cap:
                    last_error = (
                        f"the answer was cut off at max_tokens={current} (max_tokens_cap={self.max_tokens_cap})"
                    )
                    break
                max_tokens = min(self.max_tokens_cap, current * 2)
                log.info(
                    "%s: %s answer cut off at max_tokens=%s; asking again with %s", self.name, task, current, max_tokens
                )
                attempts -= 1  # more room is not a new attempt at a valid answer
                continue
            try:
                if reply.error:
                    raise InvalidOutput(reply.error)
                data = reply.data if reply.has_data else parse_json_answer(reply.text)
                output = spec.validate(inputs, data)
            except InvalidOutput as err:
                last_error = str(err)
                log.info(
                    "%s: invalid %s answer (attempt %d/%d): %s",
                    self.name,
                    task,
                    attempts,
                    self.max_attempts,
                    for_log(redact(last_error, self.transport.secrets)),
                )
                if attempts >= self.max_attempts:
                    break
                turns += [reply.assistant_turn(), Turn("user", retry_instruction(last_error))]
                continue
            usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, usage.completion_tokens)
            note = "; ".join(notes)
            if cache is not None and key is not None:
                cache.put(key, judge=self.name, task=task, output=output, usage=usage.to_dict(), note=note)
            return TaskResult(task, output, usage, self.name, note)

        usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, usage.completion_tokens)
        raise JudgeError(
            redact(
                f"{self.name}: no valid answer to {task} after {usage.calls} request(s): {last_error}",
                self.transport.secrets,
            ),
            task=task,
            attempts=usage.calls,
            usage=usage,
        )

    @staticmethod
    def _revalidate(spec: TaskSpec, inputs: dict, entry: dict) -> dict:
        """A cached answer, validated like a fresh one (the cache drops it when this raises)."""
        if entry["task"] != spec.name:
            raise InvalidOutput(f"stored for task {entry['task']!r}, not {spec.name!r}")
        return spec.validate(inputs, entry["output"])

    async def _send(self, request: ChatRequest, usage: Usage) -> Reply:
        estimate = request.prompt_chars() // 4 + (request.max_tokens or 1024)
        reply = await self.dispatcher.send(
            lambda: within(self.transport.send(request), request.timeout),
            usage,
            task=request.task,
            who=self.name,
            estimate=estimate,
            tokens=lambda r: (r.prompt_tokens or 0) + (r.completion_tokens or 0),
        )
        usage.prompt_tokens += int(reply.prompt_tokens or 0)
        usage.completion_tokens += int(reply.completion_tokens or 0)
        return reply

    async def aclose(self) -> None:
        """Close the transport's client for the running loop (and the embedder's)."""
        await self.transport.aclose()
        if self.embedder is not None and hasattr(self.embedder, "aclose"):
            await self.embedder.aclose()


def retry_instruction(error: str) -> str:
    """The user turn that shows the judge why its answer was rejected."""
    return (
        f"Your answer was invalid: {error}. Answer again with the complete JSON answer for the same input, "
        "following the schema and fixing this."
    )
