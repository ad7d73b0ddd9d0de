"""Internal: Limits on what a judge sends: a cap on requests in flight and requests / tokens per minute.

Both work across threads and event loops: ragmeter runs one judge from ``asyncio.run`` in a sync
wrapper, from background threads (inline scoring) and from the caller's loop, and a limit must
hold for the judge as a whole, not per loop. State is guarded by a :class:`threading.Lock`; a
waiter sleeps on its own loop and is woken thread-safely.

Time is read from an injectable ``clock`` and waited out with an injectable ``sleep``
(``time.monotonic`` and ``asyncio.sleep`` by default), so tests check exact waits on a fake clock.

A limit pickles (a judge is shipped to worker processes) without its lock, holders or waiters: the
copy starts fresh in its process. Copies do not share their budget; a distributed run shares one
through :class:`ragmeter.executors.SharedRateLimiter`.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from typing import Any, Awaitable, Callable

__all__ = ["TokenBucket", "RateLimiter", "ConcurrencyLimit", "AdaptiveLimit"]


class TokenBucket:
    """An async token bucket refilled at ``per_minute`` tokens per minute, holding at most ``burst``.

    :meth:`acquire` reserves tokens at once (the bucket may go into debt) and sleeps until the
    reservation is covered, so waiters are served first come, first served, and a request larger
    than ``burst`` still goes through (after the debt it makes is paid). ``burst`` defaults to one
    second's worth of tokens (at least 1), which spreads requests evenly over the minute.
    ``clock`` reads the time in seconds and ``sleep`` waits (see the module docstring).
    """

    def __init__(self, per_minute: float, burst: float | None = None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep):
        if per_minute <= 0:
            raise ValueError(f"per_minute must be > 0, got {per_minute}")
        self.rate = float(per_minute) / 60.0
        self.capacity = float(burst) if burst is not None else max(1.0, self.rate)
        if self.capacity <= 0:
            raise ValueError(f"burst must be > 0, got {burst}")
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.capacity
        self._stamp = clock()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        """Pickled without the lock; a copy starts full on its clock (another process's
        monotonic clock has another origin)."""
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._tokens, self._stamp = self.capacity, self._clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def reserve(self, tokens: float = 1.0) -> float:
        """Take ``tokens`` now and return how many seconds to wait before using them."""
        with self._lock:
            self._refill()
            self._tokens -= tokens
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def refund(self, tokens: float) -> None:
        """Give back ``tokens`` (negative: take more), e.g. when a request used fewer than reserved."""
        with self._lock:
            self._refill()
            self._tokens = min(self.capacity, self._tokens + tokens)

    async def acquire(self, tokens: float = 1.0) -> float:
        """Reserve ``tokens`` and sleep until they are available; returns the seconds waited."""
        wait = self.reserve(tokens)
        if wait > 0:
            try:
                await self._sleep(wait)
            except asyncio.CancelledError:
                self.refund(tokens)
                raise
        return wait


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits (either may be None for no limit).

    A request reserves one request and an *estimate* of its tokens before it is sent
    (:meth:`acquire`); once the real count is known, :meth:`settle` gives back (or takes) the
    difference. Providers count ``max_tokens`` against the token limit at request time, so a good
    estimate is prompt tokens + ``max_tokens``. ``clock`` and ``sleep`` go to both buckets.
    """

    def __init__(self, rpm: float | None = None, tpm: float | None = None, *,
                 rpm_burst: float | None = None, tpm_burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep):
        self.rpm = rpm
        self.tpm = tpm
        self.requests = TokenBucket(rpm, rpm_burst, clock=clock, sleep=sleep) if rpm else None
        self.tokens = TokenBucket(tpm, tpm_burst, clock=clock, sleep=sleep) if tpm else None

    @property
    def active(self) -> bool:
        """True when any limit is set."""
        return self.requests is not None or self.tokens is not None

    async def acquire(self, estimated_tokens: int = 0) -> float:
        """Wait until one more request of about ``estimated_tokens`` tokens may be sent."""
        waited = 0.0
        if self.requests is not None:
            waited += await self.requests.acquire(1)
        if self.tokens is not None and estimated_tokens > 0:
            waited += await self.tokens.acquire(estimated_tokens)
        return waited

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct a reservation once the request's real token count is known."""
        if self.tokens is not None and estimated_tokens > 0:
            self.tokens.refund(estimated_tokens - actual_tokens)

    def __repr__(self) -> str:
        return f"RateLimiter(rpm={self.rpm}, tpm={self.tpm})"


class ConcurrencyLimit:
    """At most ``limit`` holders at once, shared by every thread and event loop (``async with``).

    Like :class:`asyncio.Semaphore`, but not bound to one loop: a release on one loop wakes a
    waiter on another. Waiters are served in arrival order.
    """

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = int(limit)
        self._lock = threading.Lock()
        self._in_use = 0
        self._waiters: collections.deque = collections.deque()

    def __getstate__(self) -> dict:
        """Pickled with its limit only: a copy has no holders and no waiters."""
        state = self.__dict__.copy()
        del state["_lock"], state["_waiters"]
        state["_in_use"] = 0
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._waiters = collections.deque()

    @property
    def in_use(self) -> int:
        """Slots held right now."""
        return self._in_use

    async def acquire(self) -> None:
        """Wait for a free slot and take it."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_use < self.limit and not self._waiters:
                self._in_use += 1
                return
            fut = loop.create_future()
            entry = (loop, fut)
            self._waiters.append(entry)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            else:
                with self._lock:
                    try:
                        self._waiters.remove(entry)
                    except ValueError:
                        pass  # already popped: _grant sees the cancelled future and passes the slot on
            raise

    def release(self) -> None:
        """Give a slot back (to the first waiter, if any, unless more are held than the limit)."""
        with self._lock:
            while self._waiters and self._in_use <= self.limit:
                loop, fut = self._waiters.popleft()
                if loop.is_closed():
                    continue
                try:
                    loop.call_soon_threadsafe(self._grant, fut)
                except RuntimeError:  # loop closed in between
                    continue
                return  # the slot passes to the waiter: in_use unchanged
            self._in_use -= 1

    def _grant(self, fut: asyncio.Future) -> None:
        if fut.done():  # cancelled while the grant was on its way
            self.release()
        else:
            fut.set_result(None)

    async def __aenter__(self) -> "ConcurrencyLimit":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        self.release()


class AdaptiveLimit(ConcurrencyLimit):
    """A :class:`ConcurrencyLimit` whose limit follows the provider (AIMD, as TCP does).

    It starts at ``initial`` and grows while requests succeed: by one per success until the first
    sign of overload (slow start: the limit doubles every round of requests), then by one per
    ``limit`` successes (additive increase), never above ``ceiling`` (the user's cap). A 429 or an
    overloaded reply (:meth:`overloaded`) halves it, never below ``floor`` (multiplicative
    decrease); the replies of requests already in flight when it was cut do not cut it again.
    Holders above a cut limit finish; no new one starts until the count is under the limit.

    >>> lim = AdaptiveLimit(64, initial=8)
    >>> lim.limit, lim.overloaded(lim.epoch), lim.limit
    (8, True, 4)
    """

    def __init__(self, ceiling: int, *, initial: int = 8, floor: int = 1):
        if ceiling < 1 or floor < 1:
            raise ValueError(f"ceiling and floor must be >= 1, got {ceiling}, {floor}")
        super().__init__(max(floor, min(int(initial), int(ceiling))))
        self.ceiling, self.floor = int(ceiling), int(floor)
        self.epoch = 0  #: how many times the limit was cut
        self.slow_start = True
        self._successes = 0

    def succeeded(self) -> None:
        """One request succeeded: grow the limit (see the class docstring)."""
        grants = []
        with self._lock:
            if self.limit >= self.ceiling:
                return
            self._successes += 1
            if self.slow_start or self._successes >= self.limit:
                self._successes = 0
                self.limit += 1
                while self._waiters and self._in_use < self.limit:
                    loop, fut = self._waiters.popleft()
                    if loop.is_closed():
                        continue
                    self._in_use += 1
                    grants.append((loop, fut))
        for loop, fut in grants:
            try:
                loop.call_soon_threadsafe(self._grant, fut)
            except RuntimeError:  # loop closed in between
                self.release()

    def overloaded(self, epoch: int) -> bool:
        """A request sent while :attr:`epoch` was ``epoch`` got a 429 / overloaded reply: halve
        the limit, unless it was already cut since that request was sent. True when cut."""
        with self._lock:
            if epoch != self.epoch:
                return False
            self.epoch += 1
            self.slow_start = False
            self._successes = 0
            self.limit = max(self.floor, self.limit // 2)
            return True
