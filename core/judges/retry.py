"""Internal: Sending a request under a judge's limits, retrying what is worth retrying.

:func:`classify_error` tells transient failures (429, 5xx, timeouts, connection errors) from
permanent ones and reads ``Retry-After``; :class:`RetryPolicy` says how long to wait (exponential
backoff with full jitter, or the server's ``Retry-After``); :class:`Dispatcher` sends one request
under the concurrency cap and rate limits (:mod:`ragmeter.judges.ratelimit`), retries it and counts
every request sent; :func:`within` puts a total deadline on one request. Waiting goes through an
injectable ``sleep``, so tests run on a fake clock. Upstream error text is redacted
(:func:`ragmeter.redact.redact`) before it goes into a log line or a :class:`JudgeError`, and the
SDK's exception (which holds the raw response) is not chained to it.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, TypeVar

from ragmeter.judges.base import JudgeError, Usage
from ragmeter.judges.ratelimit import AdaptiveLimit, ConcurrencyLimit, RateLimiter
from ragmeter.redact import redact

__all__ = ["TransientError", "classify_error", "is_overload", "RetryPolicy", "Dispatcher", "within"]

log = logging.getLogger("ragmeter.judges")
T = TypeVar("T")


class TransientError(Exception):
    """A failure worth retrying (rate limited, overloaded, timed out); ``retry_after`` in seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


async def within(request: Awaitable[T], timeout: float | None) -> T:
    """``await request``, but for no more than ``timeout`` seconds in all (None: no limit).

    A deadline, unlike an HTTP read timeout that each arriving byte resets: past it the request
    is cancelled and :class:`TransientError` raised, so it is retried like a timeout."""
    if timeout is None:
        return await request
    try:
        async with asyncio.timeout(timeout):
            return await request
    except TimeoutError:
        raise TransientError(f"no complete answer within timeout={timeout:g} s") from None


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


_OVERLOAD_STATUS = {429, 503, 529}


def is_overload(exc: BaseException) -> bool:
    """Whether ``exc`` says the provider is overloaded (HTTP 429 / 503 / 529, a rate-limit or
    overloaded error, or a :class:`TransientError` carrying a Retry-After): a reason to send less."""
    if isinstance(exc, TransientError):
        return exc.status in _OVERLOAD_STATUS or exc.retry_after is not None
    status = _status(exc)
    if status is not None:
        return status in _OVERLOAD_STATUS
    return any("ratelimit" in c.__name__.lower() or "overloaded" in c.__name__.lower() for c in type(exc).__mro__)


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
    ``max_concurrency`` caps requests in flight (None: no cap); with ``adaptive`` (default) it is
    the ceiling of an :class:`~ragmeter.judges.ratelimit.AdaptiveLimit` that starts at
    ``initial_concurrency``, grows while requests succeed and halves on 429 / overloaded replies.
    ``sleep`` waits between retries (``asyncio.sleep``; a fake clock's in tests); ``secrets``
    (the API key) are redacted from error text along with anything shaped like a credential.
    """

    def __init__(self, *, retry: RetryPolicy | None = None, max_concurrency: int | None = 8,
                 limiter: RateLimiter | None = None, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 secrets: Iterable[str] = (), adaptive: bool = False, initial_concurrency: int = 8):
        self.retry = retry or RetryPolicy()
        self.slots: ConcurrencyLimit | None = None
        if max_concurrency and adaptive:
            self.slots = AdaptiveLimit(max_concurrency, initial=initial_concurrency)
        elif max_concurrency:
            self.slots = ConcurrencyLimit(max_concurrency)
        self.limiter = limiter if limiter is not None and limiter.active else None
        self._sleep = sleep
        self.secrets = tuple(secrets)

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
                why = redact(f"{type(exc).__name__}: {exc}", self.secrets)
                if not transient or n >= self.retry.max_retries:
                    tries = f" after {n + 1} attempts" if transient else ""
                    raise JudgeError(f"{what} failed{tries}: {why}", task=task, attempts=getattr(usage, counter),
                                     usage=usage) from None
                delay = self.retry.delay(n, retry_after)
                log.info("%s: %s; retry %d/%d in %.2fs", what, why, n + 1, self.retry.max_retries, delay)
                n += 1
                await self._sleep(delay)
                continue
            return result

    async def _once(self, fn: Callable[[], Awaitable[T]], estimate: int, tokens: Callable[[T], int]) -> T:
        slots = self.slots
        if slots is not None:
            await slots.acquire()
        adaptive = slots if isinstance(slots, AdaptiveLimit) else None
        epoch = adaptive.epoch if adaptive is not None else 0
        try:
            if self.limiter is not None:
                await self.limiter.acquire(estimate)
            try:
                result = await fn()
            except BaseException as exc:
                if self.limiter is not None:
                    self.limiter.settle(estimate, 0)
                if adaptive is not None and is_overload(exc) and adaptive.overloaded(epoch):
                    log.info("concurrency limit cut to %d after %s", adaptive.limit, type(exc).__name__)
                raise
            if self.limiter is not None:
                self.limiter.settle(estimate, tokens(result))
            if adaptive is not None:
                adaptive.succeeded()
            return result
        finally:
            if slots is not None:
                slots.release()

