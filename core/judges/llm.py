"""The machinery every LLM judge shares, written once: :class:`LLMJudge` around a thin transport.

A backend is a :class:`Transport`: it turns a :class:`ChatRequest` (system prompt, turns, the
task's JSON schema, ``max_tokens``) into one request to its model and the answer into a
:class:`Reply`. Everything else lives here, around the transport:

* prompt from the :class:`~ragmeter.judges.tasks.TaskSpec`, answer parsed and ``validate``-d;
  an invalid answer is shown back to the judge with the error and asked again; an answer cut
  off at ``max_tokens`` is asked again with twice the room (up to ``max_tokens_cap``); after the
  last attempt :class:`~ragmeter.judges.base.JudgeError` — never a guessed value;
* transient failures (429, 5xx, timeouts, connection errors) retried with exponential backoff and
  full jitter, honouring ``Retry-After`` (the SDKs' own retries are off, so every request counts);
* a cap on requests in flight and requests / tokens per minute (:mod:`.ratelimit`), shared by
  every thread and event loop that uses the judge;
* a persistent cache of validated answers (:mod:`.cache`);
* usage on every :class:`~ragmeter.judges.base.TaskResult`: requests, retries, tokens, cost.

SDK clients are bound to the event loop that created them; :class:`PerLoop` keeps one per loop.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Sequence, TypeVar

import numpy as np

from .base import Embedder, InvalidOutput, Judge, JudgeError, TaskResult, Usage
from .cache import JudgeCache, cache_key, resolve_cache
from .ratelimit import ConcurrencyLimit, RateLimiter
from .tasks import TaskSpec, get_task

__all__ = [
    "LLMJudge", "Transport", "CallableTransport", "ChatRequest", "Reply", "Turn", "TransientError",
    "RetryPolicy", "Dispatcher", "PRICES", "price_for", "cost_of", "classify_error",
    "parse_json_answer", "schema_instructions", "CachedEmbedder", "model_id", "safe_params",
]

log = logging.getLogger("ragmeter.judges")
T = TypeVar("T")

# --------------------------------------------------------------------------- prices

#: USD per 1M tokens: (input, output). Embedding models have output 0.
PRICES: dict[str, tuple[float, float]] = {
    # OpenAI chat
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    # Anthropic
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-sonnet-4-0": (3.00, 15.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-opus-4-0": (15.00, 75.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4-5": (5.00, 25.00),
    # OpenAI embeddings
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
}

_SUFFIX = re.compile(r"^(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest|-preview)?(-v\d+(:\d+)?)?$")


def price_for(model: str) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or None when unknown.

    Dated snapshots and aliases match their family (``gpt-4o-mini-2024-07-18``,
    ``claude-3-5-haiku-20241022``, ``claude-3-7-sonnet-latest``); a provider prefix such as
    ``openai/`` or ``anthropic.`` is ignored.
    """
    name = model.strip().lower()
    name = name.rsplit("/", 1)[-1]
    if name.startswith("anthropic."):
        name = name[len("anthropic."):]
    best = None
    for family in PRICES:
        if name.startswith(family) and _SUFFIX.match(name[len(family):]):
            if best is None or len(family) > len(best):
                best = family
    return PRICES[best] if best else None


def cost_of(prices: tuple[float, float] | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Cost in USD of the tokens at ``prices`` (per 1M); None when ``prices`` is None or no token
    count is known (a backend that reports no usage)."""
    if prices is None or (prompt_tokens <= 0 and completion_tokens <= 0):
        return None
    return (prompt_tokens * prices[0] + completion_tokens * prices[1]) / 1_000_000


# --------------------------------------------------------------------------- transport interface


@dataclass
class Turn:
    """One turn of the conversation with the judge.

    ``role`` is ``"user"`` or ``"assistant"``. An assistant turn that came from a backend keeps
    the structured answer (``data``) and the backend's id for it (``call_id``, e.g. an Anthropic
    ``tool_use`` id) so the transport can replay it natively (tool call + tool result).
    """

    role: str
    text: str
    data: Any = None
    call_id: str | None = None


@dataclass
class ChatRequest:
    """What a transport sends: ``system`` prompt, ``turns`` (user first, alternating), the task's
    answer ``schema`` (named ``task``), ``max_tokens`` (None: the backend's own setting),
    ``temperature`` (None: the backend's default) and a per-request ``timeout`` in seconds."""

    task: str
    system: str
    turns: list[Turn]
    schema: dict
    max_tokens: int | None = None
    temperature: float | None = 0.0
    timeout: float | None = None

    def prompt_chars(self) -> int:
        """Characters of prompt text (for token estimates)."""
        return len(self.system) + sum(len(t.text) for t in self.turns)


_MISSING = object()


@dataclass
class Reply:
    """A transport's answer to one request.

    ``text``: the answer as the model wrote it; ``data``: the parsed answer when the backend
    already parsed it (tool input, structured output), else left unset and ``text`` is parsed as
    JSON; ``error``: a backend-side parse failure, shown to the judge when asking again;
    ``truncated``: the answer was cut off at ``max_tokens`` (whose value, when the backend knows
    it, is ``max_tokens``); ``turn``: how to replay this answer as an assistant turn;
    ``note``: passed on to the TaskResult.
    """

    text: str = ""
    data: Any = _MISSING
    truncated: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    turn: Turn | None = None
    max_tokens: int | None = None
    note: str = ""

    @property
    def has_data(self) -> bool:
        """True when the backend parsed the answer (``data`` is set)."""
        return self.data is not _MISSING

    def assistant_turn(self) -> Turn:
        """The assistant turn that replays this answer."""
        if self.turn is not None:
            return self.turn
        return Turn("assistant", self.text or "(no answer)", data=self.data if self.has_data else None)


class Transport:
    """The one interface a backend implements (cf. httpx transports): ``send`` one request.

    ``backend`` and ``model`` name the judge (``"openai:gpt-4o-mini"``); :meth:`cache_params`
    returns whatever else determines the answer (endpoint, structured-output mode). ``send``
    raises the SDK's exceptions unchanged (or :class:`TransientError`): :func:`classify_error`
    decides what is retried. Transports hold no retry, cache or rate-limit logic.
    """

    backend: str = "transport"
    model: str = "unknown"
    #: the ``max_tokens`` a judge starts with (None: leave the backend's own setting)
    default_max_tokens: int | None = 4096

    async def send(self, request: ChatRequest) -> Reply:  # pragma: no cover - interface
        """Send ``request`` and return the model's reply."""
        raise NotImplementedError

    def cache_params(self) -> dict:
        """What, besides backend and model, determines the answer (part of the cache key)."""
        return {}

    async def aclose(self) -> None:
        """Release clients (optional)."""


class CallableTransport(Transport):
    """A transport answered by a Python function ``fn(request) -> Reply | dict | str`` (sync or async).

    For tests and custom backends (like ``httpx.MockTransport``): a dict is the structured
    answer, a str the raw text. ``requests`` records every request sent.
    """

    def __init__(self, fn: Callable[[ChatRequest], Any], *, backend: str = "callable", model: str = "fn"):
        self.fn = fn
        self.backend = backend
        self.model = model
        self.requests: list[ChatRequest] = []

    async def send(self, request: ChatRequest) -> Reply:
        """Record the request and answer it with the function."""
        self.requests.append(request)
        out = self.fn(request)
        if asyncio.iscoroutine(out):
            out = await out
        if isinstance(out, Reply):
            return out
        if isinstance(out, str):
            return Reply(text=out)
        return Reply(text=json.dumps(out), data=out)


# --------------------------------------------------------------------------- transient errors


class TransientError(Exception):
    """A failure worth retrying (rate limited, overloaded, timed out); ``retry_after`` in seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


_TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529}
_TRANSIENT_NAMES = ("timeout", "ratelimit", "connection", "overloaded", "serviceunavailable",
                    "internalserver", "remoteprotocol", "readerror", "writeerror", "networkerror")


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
    except Exception:  # noqa: BLE001 - odd header objects
        return None
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _status(exc: BaseException) -> int | None:
    for obj in (exc, getattr(exc, "response", None)):
        code = getattr(obj, "status_code", None) if obj is not None else None
        if isinstance(code, int):
            return code
    return None


def classify_error(exc: BaseException) -> tuple[bool, float | None]:
    """``(transient, retry_after)`` for an exception raised by a transport or SDK.

    Transient: :class:`TransientError`, timeouts, connection errors, HTTP 408/409/425/429/5xx/529
    (any exception with such a ``status_code``, or named like ``RateLimitError``,
    ``APITimeoutError``, ``APIConnectionError``, ``OverloadedError``). Retry-After comes from the
    response headers (``retry-after-ms`` or ``retry-after``) when present.
    """
    if isinstance(exc, TransientError):
        return True, exc.retry_after
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True, None
    status = _status(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS or status >= 500, _retry_after(exc)
    for cls in type(exc).__mro__:
        name = cls.__name__.lower()
        if any(n in name for n in _TRANSIENT_NAMES):
            return True, _retry_after(exc)
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc and not isinstance(cause, (KeyError, ValueError)):
        transient, _ = classify_error(cause)
        if transient:
            return True, _retry_after(exc) or _retry_after(cause)
    return False, None


@dataclass
class RetryPolicy:
    """Retries of transient failures: up to ``max_retries`` after the first request, waiting a
    random time in ``[0, min(backoff_max, backoff_base * 2**n)]`` (full jitter) before retry
    ``n``, or ``Retry-After`` when the server sent one (capped at ``max_retry_after``)."""

    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 60.0

    def delay(self, n: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``n`` (0-based)."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        return random.uniform(0.0, min(self.backoff_max, self.backoff_base * (2 ** n)))


class Dispatcher:
    """Sends requests under the judge's limits: concurrency cap, rate limits, transient retries.

    One dispatcher per judge (or embedder); shared by every thread and event loop using it.
    """

    def __init__(self, *, retry: RetryPolicy | None = None, max_concurrency: int | None = 8,
                 limiter: RateLimiter | None = None, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep):
        self.retry = retry or RetryPolicy()
        self.slots = ConcurrencyLimit(max_concurrency) if max_concurrency else None
        self.limiter = limiter if limiter is not None and limiter.active else None
        self._sleep = sleep

    async def send(self, fn: Callable[[], Awaitable[T]], usage: Usage, *, task: str | None, who: str,
                   estimate: int = 0, tokens: Callable[[T], int] = lambda r: 0, counter: str = "calls") -> T:
        """Call ``fn()`` (one request) with retries; count every request in ``usage.<counter>``
        (re-sends also in ``usage.retries``); raise :class:`JudgeError` when it fails for good."""
        n = 0
        while True:
            if n > 0:
                usage.retries += 1
            setattr(usage, counter, getattr(usage, counter) + 1)
            try:
                result = await self._once(fn, estimate, tokens)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                transient, retry_after = classify_error(exc)
                what = f"{who}: {task or 'request'}"
                if not transient:
                    raise JudgeError(f"{what} failed: {type(exc).__name__}: {exc}", task=task,
                                     attempts=getattr(usage, counter), usage=usage) from exc
                if n >= self.retry.max_retries:
                    raise JudgeError(f"{what} failed after {n + 1} attempts: {type(exc).__name__}: {exc}",
                                     task=task, attempts=getattr(usage, counter), usage=usage) from exc
                delay = self.retry.delay(n, retry_after)
                log.info("%s: %s (%s); retry %d/%d in %.2fs", what, type(exc).__name__, exc, n + 1,
                            self.retry.max_retries, delay)
                n += 1
                await self._sleep(delay)
                continue
            return result

    async def _once(self, fn: Callable[[], Awaitable[T]], estimate: int, tokens: Callable[[T], int]) -> T:
        if self.slots is not None:
            await self.slots.acquire()
        try:
            if self.limiter is not None:
                await self.limiter.acquire(estimate)
            try:
                result = await fn()
            except BaseException:
                if self.limiter is not None:
                    self.limiter.settle(estimate, 0)
                raise
            if self.limiter is not None:
                self.limiter.settle(estimate, tokens(result))
            return result
        finally:
            if self.slots is not None:
                self.slots.release()


# --------------------------------------------------------------------------- parsing helpers

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.S)


def parse_json_answer(text: str) -> Any:
    """Parse a JSON answer written as text: plain, in a ```json fence, or surrounded by prose
    (the outermost ``{...}`` is taken). Raises :class:`InvalidOutput` with the parser's message."""
    if text is None or not str(text).strip():
        raise InvalidOutput("the answer was empty; answer with a JSON object")
    s = str(text).strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1).strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError as err:
        first, last = s.find("{"), s.rfind("}")
        if 0 <= first < last:
            try:
                return json.loads(s[first:last + 1])
            except json.JSONDecodeError:
                pass
        raise InvalidOutput(f"the answer is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None


def schema_instructions(name: str, schema: dict) -> str:
    """Text that asks for JSON matching ``schema`` (for backends that cannot enforce a schema)."""
    return (f"Answer with a single JSON object (the '{name}' answer), no prose and no code fence, "
            f"matching this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}")


def retry_instruction(error: str) -> str:
    """The user turn that shows the judge why its answer was rejected."""
    return (f"Your answer was invalid: {error}. Answer again with the complete JSON answer for the same input, "
            "following the schema and fixing this.")


# --------------------------------------------------------------------------- framework objects

_SECRET = re.compile(r"(api_?key|secret|password|passwd|auth|credential|headers)", re.I)


def model_id(obj: Any) -> str | None:
    """The model name a LangChain / LlamaIndex object declares, or None."""
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value and value != "unknown":
            return value
    meta = getattr(obj, "metadata", None)  # LlamaIndex LLMMetadata
    value = getattr(meta, "model_name", None)
    if isinstance(value, str) and value and value != "unknown":
        return value
    return None


def safe_params(params: Any) -> dict:
    """JSON-able, non-secret identifying parameters (part of cache keys)."""
    out: dict = {}
    try:
        items = dict(params or {}).items()
    except (TypeError, ValueError):
        return out
    for k, v in items:
        if _SECRET.search(str(k)):
            continue
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[str(k)] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float, bool)) for x in v):
            out[str(k)] = list(v)
    return out


# --------------------------------------------------------------------------- the judge


class LLMJudge(Judge):
    """A judge answered by an LLM behind ``transport``, with retries, limits, cache and accounting.

    Parameters (all keyword-only except ``transport``):

    * ``embedder``: the :class:`Embedder` metrics use for vectors (None: no embeddings).
    * ``cache``: None (default location), a path, a :class:`JudgeCache`, or False (no cache).
    * ``max_attempts``: answers asked for per task before giving up on invalid ones (default 3).
    * ``max_retries``, ``backoff_base``, ``backoff_max``, ``max_retry_after``: retries of
      transient failures per request (:class:`RetryPolicy`).
    * ``max_concurrency``: requests in flight at once (default 8); ``rpm`` / ``tpm``: requests /
      tokens per minute (or a ready ``rate_limiter``).
    * ``max_tokens`` (default: the transport's) and ``max_tokens_cap``: room for the answer;
      doubled up to the cap when an answer is cut off. ``temperature`` (default 0.0; None: the
      backend's default), ``timeout`` per request in seconds.
    * ``prices``: ``(input, output)`` USD per 1M tokens, overriding :data:`PRICES`.
    """

    kind = "LLM"

    def __init__(self, transport: Transport, *, embedder: Embedder | None = None,
                 cache: JudgeCache | str | os.PathLike | bool | None = None,
                 max_attempts: int = 3, max_retries: int = 4, backoff_base: float = 0.5,
                 backoff_max: float = 30.0, max_retry_after: float = 60.0,
                 max_concurrency: int | None = 8, rpm: float | None = None, tpm: float | None = None,
                 rate_limiter: RateLimiter | None = None, max_tokens: int | None | Any = _MISSING,
                 max_tokens_cap: int = 16384, temperature: float | None = 0.0, timeout: float | None = 120.0,
                 prices: tuple[float, float] | None = None, name: str | None = None):
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.transport = transport
        self.name = name or f"{transport.backend}:{transport.model}"
        self.model = transport.model
        self.embedder = embedder
        self.cache = resolve_cache(cache)
        self.max_attempts = int(max_attempts)
        self.max_tokens = transport.default_max_tokens if max_tokens is _MISSING else max_tokens
        self.max_tokens_cap = int(max_tokens_cap)
        self.temperature = temperature
        self.timeout = timeout
        self.prices = tuple(prices) if prices is not None else price_for(transport.model)
        limiter = rate_limiter if rate_limiter is not None else RateLimiter(rpm, tpm)
        self.dispatcher = Dispatcher(
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max,
                              max_retry_after=max_retry_after),
            max_concurrency=max_concurrency, limiter=limiter)

    # ------------------------------------------------------------------ cache
    def cache_key(self, spec: TaskSpec, inputs: dict) -> str:
        """The cache key of ``spec`` on ``inputs`` for this judge."""
        params = {"temperature": self.temperature, **self.transport.cache_params()}
        prompt_hash = cache_key(spec.system, spec.schema)
        return cache_key("judge/v1", self.transport.backend, self.transport.model, spec.name, spec.version,
                         prompt_hash, inputs, params)

    # ------------------------------------------------------------------ run
    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Ask the model for ``task`` on ``inputs``; return the validated answer or raise JudgeError."""
        spec = get_task(task)
        key = self.cache_key(spec, inputs) if self.cache is not None else None
        if key is not None:
            hit = self._cache_get(key)
            if hit is not None:
                return TaskResult(task, hit["output"], Usage(cached=1), self.name, hit.get("note") or "")

        system, user = spec.messages(inputs)
        turns = [Turn("user", user)]
        usage = Usage()
        max_tokens = self.max_tokens
        attempts = 0
        last_error = ""
        notes: list[str] = []
        while True:
            request = ChatRequest(task=spec.name, system=system, turns=list(turns), schema=spec.schema,
                                  max_tokens=max_tokens, temperature=self.temperature, timeout=self.timeout)
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
                    last_error = f"the answer was cut off at max_tokens={current} (max_tokens_cap={self.max_tokens_cap})"
                    break
                max_tokens = min(self.max_tokens_cap, current * 2)
                log.info("%s: %s answer cut off at max_tokens=%s; asking again with %s", self.name, task, current, max_tokens)
                attempts -= 1  # more room is not a new attempt at a valid answer
                continue
            try:
                if reply.error:
                    raise InvalidOutput(reply.error)
                data = reply.data if reply.has_data else parse_json_answer(reply.text)
                output = spec.validate(inputs, data)
            except InvalidOutput as err:
                last_error = str(err)
                log.info("%s: invalid %s answer (attempt %d/%d): %s", self.name, task, attempts, self.max_attempts, err)
                if attempts >= self.max_attempts:
                    break
                turns += [reply.assistant_turn(), Turn("user", retry_instruction(last_error))]
                continue
            usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, usage.completion_tokens)
            note = "; ".join(notes)
            if key is not None:
                self._cache_put(key, task, output, usage, note)
            return TaskResult(task, output, usage, self.name, note)

        usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, usage.completion_tokens)
        raise JudgeError(f"{self.name}: no valid answer to {task} after {usage.calls} request(s): {last_error}",
                         task=task, attempts=usage.calls, usage=usage)

    def _cache_get(self, key: str) -> dict | None:
        try:
            return self.cache.get(key)
        except sqlite3.Error as err:  # a broken cache costs money, not results
            log.warning("%s: judge cache %s unreadable (%s); asking the model", self.name, self.cache.path, err)
            return None

    def _cache_put(self, key: str, task: str, output: dict, usage: Usage, note: str) -> None:
        try:
            self.cache.put(key, judge=self.name, task=task, output=output, usage=usage.to_dict(), note=note)
        except sqlite3.Error as err:
            log.warning("%s: could not write the judge cache %s (%s)", self.name, self.cache.path, err)

    async def _send(self, request: ChatRequest, usage: Usage) -> Reply:
        estimate = request.prompt_chars() // 4 + (request.max_tokens or 1024)
        reply = await self.dispatcher.send(
            lambda: self.transport.send(request), usage, task=request.task, who=self.name, estimate=estimate,
            tokens=lambda r: (r.prompt_tokens or 0) + (r.completion_tokens or 0))
        usage.prompt_tokens += int(reply.prompt_tokens or 0)
        usage.completion_tokens += int(reply.completion_tokens or 0)
        return reply

    async def aclose(self) -> None:
        """Close the transport's client for the running loop (and the embedder's)."""
        await self.transport.aclose()
        if self.embedder is not None and hasattr(self.embedder, "aclose"):
            await self.embedder.aclose()


# --------------------------------------------------------------------------- embedders


class CachedEmbedder(Embedder):
    """Base of the SDK embedders: cache per text, batching, retries and limits, usage and cost.

    Subclasses implement :meth:`_embed_batch` (one request: texts -> (vectors, prompt tokens)) and
    set ``backend``, ``model`` and :meth:`cache_params`.
    """

    backend = "embedder"
    model = "unknown"

    def __init__(self, *, cache: JudgeCache | str | os.PathLike | bool | None = None, batch_size: int = 256,
                 max_retries: int = 4, backoff_base: float = 0.5, backoff_max: float = 30.0,
                 max_retry_after: float = 60.0, max_concurrency: int | None = 4, rpm: float | None = None,
                 tpm: float | None = None, prices: float | tuple[float, float] | None = None):
        self.name = f"{self.backend}:{self.model}"
        self.cache = resolve_cache(cache)
        self.batch_size = int(batch_size)
        if isinstance(prices, (int, float)):
            prices = (float(prices), 0.0)
        self.prices = tuple(prices) if prices is not None else price_for(self.model)
        self.dispatcher = Dispatcher(
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max,
                              max_retry_after=max_retry_after),
            max_concurrency=max_concurrency, limiter=RateLimiter(rpm, tpm))

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
            try:
                found = self.cache.get_vectors(list(dict.fromkeys(keys)))
            except sqlite3.Error as err:
                log.warning("%s: embedding cache unreadable (%s)", self.name, err)
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
                try:
                    self.cache.put_vectors(self.name, [(self._key(t, params), v) for t, v in zip(batch, arr)])
                except sqlite3.Error as err:
                    log.warning("%s: could not write the embedding cache (%s)", self.name, err)
        if usage.embedding_calls:
            usage.cost_usd = cost_of(self.prices, usage.prompt_tokens, 0)
        return np.vstack([vectors[t] for t in texts]), usage

    async def aclose(self) -> None:
        """Release clients (optional)."""
