"""Internal: limits on what a judge sends: a cap on requests in flight, requests / tokens per
minute, and a pause every request honours when the provider says wait (:class:`Pause`).

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
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

__all__ = ["TokenBucket", "RateLimiter", "ConcurrencyLimit", "AdaptiveLimit", "Pause", "PauseTooLong"]


class TokenBucket:
    """An async token bucket refilled at ``per_minute`` tokens per minute, holding at most ``burst``.

    :meth:`acquire` reserves tokens at once (the bucket may go into debt) and sleeps until the
    reservation is covered, so waiters are served first come, first served, and a request larger
    than ``burst`` still goes through (after the debt it makes is paid). ``burst`` defaults to one
    second's worth of tokens (at least 1), which spreads requests evenly over the minute.
    ``clock`` reads the time in seconds and ``sleep`` waits (see the module docstring).
    """

    def __init__(
        self,
        per_minute: float,
        burst: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
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

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        rpm_burst: float | None = None,
        tpm_burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ):
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

    async def __aenter__(self) -> ConcurrencyLimit:
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


class Pause:
    """When the provider says wait, every request of the judge waits: one pause shared by every
    thread and event loop that uses the judge (a circuit breaker's open and half-open states).

    :meth:`hold` (a 429, or a Retry-After / rate-limit reset header) moves the end of the pause to
    at least ``seconds`` from now. :meth:`wait`, called before each request is sent, sleeps until
    the pause ends; then one request goes first (the *probe*) while the others wait for its
    answer: :meth:`done` with ``ok=True`` (or no answer within the length of the last pause, at
    least 1 s) lets them all go; a new :meth:`hold` pauses again; a failure the provider did not
    ask to wait for passes the probe on. So a storm of 429s costs about one request per pause, not
    one per request in flight. ``clock`` / ``sleep`` as for :class:`TokenBucket`; waiting for the
    probe's answer is a wake-up, not a sleep (works across threads and event loops).

    >>> p = Pause(clock=lambda: 10.0)
    >>> p.hold(2.0), p.remaining()
    (12.0, 2.0)
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    ):
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._until = 0.0  # clock time the pause ends
        self._length = 0.0  # of the last pause
        self._recovering = False  # paused since the last answer: one probe first
        self._probe = 0  # number of the probe out (0: none)
        self._probes = 0
        self._probe_since = 0.0
        self._waiters: collections.deque = collections.deque()  # (loop, future) waiting for the probe
        self.holds = 0  #: how many times the provider said wait

    def __getstate__(self) -> dict:
        """Pickled without the lock and the waiters, unpaused: a copy in another process starts fresh."""
        state = self.__dict__.copy()
        del state["_lock"], state["_waiters"]
        state.update(_until=0.0, _recovering=False, _probe=0)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._waiters = collections.deque()

    def hold(self, seconds: float) -> float:
        """The provider said wait ``seconds``: every request waits until then, and one goes first.
        Returns the clock time the pause ends (the request that was told waits it out itself and
        passes it to :meth:`wait` as ``served``)."""
        with self._lock:
            now = self._clock()
            self._until = max(self._until, now + max(0.0, seconds))
            self._length = max(0.0, seconds)
            self._recovering, self._probe = True, 0
            self.holds += 1
            until = self._until
            waiters, self._waiters = self._waiters, collections.deque()
        _wake(waiters)  # to sleep on the new pause
        return until

    def remaining(self) -> float:
        """Seconds until the pause ends (0 when not paused)."""
        with self._lock:
            return max(0.0, self._until - self._clock())

    def blocked(self, served: float = -math.inf) -> bool:
        """Whether a request must not be sent now: paused (beyond ``served``, see :meth:`wait`),
        or a probe is out."""
        with self._lock:
            return (self._clock() < self._until and self._until > served) or (self._recovering and self._probe != 0)

    async def wait(self, budget: float = math.inf, served: float = -math.inf) -> tuple[float, int, float]:
        """Sleep until a request may be sent; ``(seconds waited, probe, served)``: ``probe`` is
        non-zero when this request goes first (pass it to :meth:`done` with the outcome).
        ``served``: the end of a pause this request has waited out (see :meth:`hold`; returned
        updated, for :meth:`blocked`: a fake ``sleep`` in tests does not move the clock). Raises
        :class:`PauseTooLong` when what is left of the pause is longer than ``budget`` seconds
        (a pause that long is not waited for; shorter ones are, however many come)."""
        waited = 0.0
        while True:
            loop = asyncio.get_running_loop()
            fut = None
            with self._lock:
                now = self._clock()
                if now < self._until and self._until > served:
                    delay = self._until - now
                elif not self._recovering:
                    return waited, 0, served
                elif self._probe == 0:
                    self._probes += 1
                    self._probe = self._probes
                    self._probe_since = now
                    return waited, self._probe, served
                else:  # a probe is out: wait for its answer, at most the last pause's length (>= 1 s)
                    fut = loop.create_future()
                    self._waiters.append((loop, fut))
                    delay = max(1.0, self._length) - (now - self._probe_since)
                    probe = self._probe
            if fut is None:
                if delay > budget:
                    raise PauseTooLong(delay)
                await self._sleep(delay)
                waited += delay
                served = max(served, now + delay)  # waited out, whatever the clock says (a fake sleep)
                continue
            start = self._clock()
            try:
                await asyncio.wait_for(fut, max(0.0, delay))
            except TimeoutError:
                with self._lock:
                    if self._probe == probe:  # no answer from the probe in time: go
                        self._recovering, self._probe = False, 0
            finally:
                with self._lock:
                    try:
                        self._waiters.remove((loop, fut))
                    except ValueError:
                        pass
            waited += max(0.0, self._clock() - start)

    def done(self, probe: int, ok: bool) -> None:
        """A request finished: ``ok`` (answered) or not. The probe's answer lets the others go; a
        probe that failed without the provider saying wait (no :meth:`hold`) passes the probe on."""
        if not probe:
            return
        with self._lock:
            if self._probe != probe:
                return
            if ok:
                self._recovering = False
            self._probe = 0
            waiters, self._waiters = self._waiters, collections.deque()
        _wake(waiters)


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _wake(waiters: Iterable[tuple[asyncio.AbstractEventLoop, asyncio.Future]]) -> None:
    for loop, fut in waiters:
        try:
            loop.call_soon_threadsafe(_resolve, fut)
        except RuntimeError:  # loop closed
            pass


class PauseTooLong(Exception):
    """The provider's pause outlasts what a request may still wait (``seconds`` left of it)."""

    def __init__(self, seconds: float):
        super().__init__(f"{seconds:.1f} s")
        self.seconds = seconds
