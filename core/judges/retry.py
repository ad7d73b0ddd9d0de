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
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ragmeter.judges.base import JudgeError, Usage
from ragmeter.judges.ratelimit import AdaptiveLimit, ConcurrencyLimit, Pause, PauseTooLong, RateLimiter
from ragmeter.privacy import for_log
from ragmeter.redact import redact

__all__ = [
    "TransientError",
    "classify_error",
    "is_overload",
    "says_wait",
    "rate_limit_reset",
    "RetryPolicy",
    "Dispatcher",
    "within",
    "MAX_SENDS",
]

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
_TRANSIENT_NAMES = (
    "timeout",
    "ratelimit",
    "connection",
    "overloaded",
    "serviceunavailable",
    "internalserver",
    "remoteprotocol",
    "readerror",
    "writeerror",
    "networkerror",
)


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
        return rate_limit_reset(headers) if getattr(response, "status_code", None) == 429 else None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError):
            return None


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(value: str) -> float | None:
    """``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1.5"`` (OpenAI's reset durations) or an RFC 3339 time
    (Anthropic's) as seconds from now; None when unreadable."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        return sum(float(n) * _UNIT[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - time.time())


def rate_limit_reset(headers: Any) -> float | None:
    """Seconds until a rate limit resets, from the headers of a 429 that has no Retry-After:
    OpenAI's ``x-ratelimit-reset-requests`` / ``-tokens`` and Anthropic's
    ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset``. Of the limits whose
    ``remaining`` header is 0 the latest reset (they all must reset), else the earliest; None
    without such headers.

    >>> rate_limit_reset({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
    ...                   "x-ratelimit-remaining-tokens": "0"})
    360.0
    """
    exhausted: list[float] = []
    other: list[float] = []
    for prefix, kinds in (
        ("x-ratelimit-", ("requests", "tokens")),
        ("anthropic-ratelimit-", ("requests", "tokens", "input-tokens", "output-tokens")),
    ):
        for kind in kinds:
            reset_key, remaining_key = (
                (f"{prefix}reset-{kind}", f"{prefix}remaining-{kind}")
                if prefix == "x-ratelimit-"
                else (f"{prefix}{kind}-reset", f"{prefix}{kind}-remaining")
            )
            try:
                reset, remaining = headers.get(reset_key), headers.get(remaining_key)
            except Exception:  # noqa: BLE001 - odd header objects
                return None
            seconds = _seconds(str(reset)) if reset is not None else None
            if seconds is not None:
                (exhausted if str(remaining).strip() == "0" else other).append(seconds)
    if exhausted:
        return max(exhausted)
    return min(other) if other else None


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
    response headers (``retry-after-ms`` or ``retry-after``) when present, else, for a 429, from
    the rate-limit reset headers (:func:`rate_limit_reset`).
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


def says_wait(exc: BaseException, retry_after: float | None) -> bool:
    """Whether the provider asked the client to wait: a Retry-After (or rate-limit reset) came
    with the failure, or it is a 429 / rate-limit error. Such a failure pauses every request of
    the judge (:class:`~ragmeter.judges.ratelimit.Pause`) and is retried within the time budget."""
    if retry_after is not None:
        return True
    if _status(exc) == 429:
        return True
    return any("ratelimit" in c.__name__.lower() for c in type(exc).__mro__)


#: Sends of one request at most, whatever the budget left (a provider answering Retry-After: 0 forever).
MAX_SENDS = 50


@dataclass
class RetryPolicy:
    """Retries of transient failures, within a time budget: one request is retried until its own
    failures have made it wait ``max_wait`` seconds in all (the pauses the provider asked for,
    backoff).

    A failure the provider asked to wait for (:func:`says_wait`: 429, or a Retry-After / rate-limit
    reset header) pauses every request of the judge for the Retry-After (capped at
    ``max_retry_after``; a 429 without one: backoff) and is retried while the budget lasts: a
    Retry-After beyond what is left fails the request at once. The other requests wait for the
    pause as they wait for a free slot, without spending their budget, unless what is left of it
    exceeds their whole budget (then they fail at once too). Other transient failures (5xx,
    timeouts, connection errors) are retried up to ``max_retries`` times, after a random wait in
    ``[0, min(backoff_max, backoff_base * 2**n)]`` (full jitter) before retry ``n``."""

    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 60.0
    max_wait: float = 60.0

    def delay(self, n: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``n`` (0-based)."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        return random.uniform(0.0, min(self.backoff_max, self.backoff_base * (2**n)))

    def pause_for(self, streak: int, retry_after: float | None) -> float:
        """How long the judge pauses after the provider said wait, the ``streak``-th time in a row
        (0-based): its Retry-After (capped at ``max_retry_after``), else exponential backoff with
        equal jitter (never near 0)."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        top = min(self.backoff_max, self.backoff_base * (2**streak))
        return random.uniform(top / 2, top)


class Dispatcher:
    """Sends requests under the judge's limits: concurrency cap, rate limits, the provider's
    pauses, transient retries.

    One dispatcher per judge (or embedder); shared by every thread and event loop using it.
    ``max_concurrency`` caps requests in flight (None: no cap); with ``adaptive`` (default) it is
    the ceiling of an :class:`~ragmeter.judges.ratelimit.AdaptiveLimit` that starts at
    ``initial_concurrency``, grows while requests succeed and halves on 429 / overloaded replies.
    ``pause`` (:class:`~ragmeter.judges.ratelimit.Pause`) holds every request while the provider
    says wait (see :class:`RetryPolicy` for what is retried and for how long).
    ``sleep`` waits between retries (``asyncio.sleep``; a fake clock's in tests); ``clock`` reads
    the time for the pause; ``secrets`` (the API key) are redacted from error text along with
    anything shaped like a credential.
    """

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        max_concurrency: int | None = 8,
        limiter: RateLimiter | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        secrets: Iterable[str] = (),
        adaptive: bool = False,
        initial_concurrency: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.retry = retry or RetryPolicy()
        self.slots: ConcurrencyLimit | None = None
        if max_concurrency and adaptive:
            self.slots = AdaptiveLimit(max_concurrency, initial=initial_concurrency)
        elif max_concurrency:
            self.slots = ConcurrencyLimit(max_concurrency)
        self.limiter = limiter if limiter is not None and limiter.active else None
        self.pause = Pause(clock=clock, sleep=sleep)
        self._sleep = sleep
        self.secrets = tuple(secrets)
        self._streak = 0  # times in a row the provider said wait (the pause's backoff without Retry-After)

    async def send(
        self,
        fn: Callable[[], Awaitable[T]],
        usage: Usage,
        *,
        task: str | None,
        who: str,
        estimate: int = 0,
        tokens: Callable[[T], int] = lambda r: 0,
        counter: str = "calls",
    ) -> T:
        """Call ``fn()`` (one request) with retries; count every request in ``usage.<counter>``
        (re-sends also in ``usage.retries``); raise :class:`JudgeError` when it fails for good."""
        what = f"{who}: {task or 'request'}"
        state = _Request(self.retry.max_wait)

        def sent() -> None:
            if state.sent:
                usage.retries += 1
            state.sent += 1
            setattr(usage, counter, getattr(usage, counter) + 1)

        def fail(message: str) -> JudgeError:
            return JudgeError(
                f"{what} failed{state.tries()}: {message}", task=task, attempts=getattr(usage, counter), usage=usage
            )

        while True:
            try:
                return await self._once(fn, estimate, tokens, state, sent)
            except asyncio.CancelledError:
                raise
            except PauseTooLong as exc:
                raise fail(
                    f"the provider asks to wait {exc.seconds:.1f} s more, beyond the retry budget left "
                    f"({state.left:.1f} of max_wait={self.retry.max_wait:g} s)"
                ) from None
            except Exception as exc:  # noqa: BLE001 - classified below
                transient, retry_after = classify_error(exc)
                why = redact(f"{type(exc).__name__}: {exc}", self.secrets)
                if not transient:
                    state.sent_transient = False
                    raise fail(why) from None
                if says_wait(exc, retry_after):  # _once has paused the judge for state.hold seconds
                    if state.sent >= MAX_SENDS:
                        raise fail(why) from None
                    asked = max(state.hold, retry_after or 0.0)
                    if asked > state.left:
                        raise fail(
                            f"{why} (the provider asks to wait {asked:.1f} s, beyond the retry budget "
                            f"left: {state.left:.1f} of max_wait={self.retry.max_wait:g} s)"
                        ) from None
                    log.info(
                        "%s: %s; every request of the judge waits %.2fs (%.1f s of the retry budget left)",
                        what,
                        for_log(why),
                        state.hold,
                        state.left,
                    )
                    await self._sleep(state.hold)
                    state.left -= state.hold
                    continue
                if state.retries >= self.retry.max_retries:
                    raise fail(why) from None
                delay = self.retry.delay(state.retries)
                if delay > state.left:
                    raise fail(f"{why} (retry budget spent: {self.retry.max_wait:g} s)") from None
                state.retries += 1
                log.info(
                    "%s: %s; retry %d/%d in %.2fs", what, for_log(why), state.retries, self.retry.max_retries, delay
                )
                await self._sleep(delay)
                state.left -= delay

    async def _once(
        self,
        fn: Callable[[], Awaitable[T]],
        estimate: int,
        tokens: Callable[[T], int],
        state: _Request,
        sent: Callable[[], None],
    ) -> T:
        slots = self.slots
        while True:
            _, probe, state.served = await self.pause.wait(state.left, state.served)  # as for a slot: not charged
            if slots is not None:
                try:
                    await slots.acquire()
                except BaseException:
                    self.pause.done(probe, ok=False)
                    raise
            if probe or not self.pause.blocked(state.served):
                break
            if slots is not None:  # paused while this request waited for a slot: wait again, without it
                slots.release()
        adaptive = slots if isinstance(slots, AdaptiveLimit) else None
        epoch = adaptive.epoch if adaptive is not None else 0
        try:
            if self.limiter is not None:
                try:
                    await self.limiter.acquire(estimate)
                except BaseException:
                    self.pause.done(probe, ok=False)
                    raise
            sent()
            try:
                result = await fn()
            except BaseException as exc:
                if self.limiter is not None:
                    self.limiter.settle(estimate, 0)
                if adaptive is not None and is_overload(exc) and adaptive.overloaded(epoch):
                    log.info("concurrency limit cut to %d after %s", adaptive.limit, type(exc).__name__)
                transient, retry_after = classify_error(exc) if isinstance(exc, Exception) else (False, None)
                if transient and says_wait(exc, retry_after):
                    state.hold = self.retry.pause_for(self._streak, retry_after)
                    state.served = self.pause.hold(state.hold)
                    self._streak += 1
                else:
                    self.pause.done(probe, ok=False)
                raise
            if self.limiter is not None:
                self.limiter.settle(estimate, tokens(result))
            if adaptive is not None:
                adaptive.succeeded()
            self.pause.done(probe, ok=True)
            self._streak = 0
            return result
        finally:
            if slots is not None:
                slots.release()


@dataclass
class _Request:
    """One request's retry state: seconds of the budget ``left``, sends and counted retries."""

    left: float
    sent: int = 0
    retries: int = 0
    sent_transient: bool = True
    hold: float = 0.0  # the pause its last failure asked for
    served: float = -math.inf  # the end of that pause (waited out by this request itself)

    def tries(self) -> str:
        return f" after {self.sent} attempts" if self.sent_transient and self.sent else ""
