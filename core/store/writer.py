"""Internal: The :class:`StoreWriter`: inline-scored samples into a :class:`~ragmeter.store.Store`, off the
caller's thread.

A store write may wait for other writers (another process holding the SQLite lock, a busy
PostgreSQL server), so the captures never write themselves: the background scorer hands each
result to :meth:`StoreWriter.add`, which only appends it to a bounded queue, and one daemon
thread records the queue in batches with :meth:`Store.record_samples
<ragmeter.store.Store.record_samples>`.

A write that fails transiently (a connection refused or cut, a PostgreSQL restart or failover,
SQLite's "database is locked"; see :func:`ragmeter.store.engine.transient`) is retried with
exponential backoff and jitter for up to ``retry_timeout`` seconds (60 by default, or
``$RAGMETER_STORE_RETRY_TIMEOUT``; the OTLP exporters retry about as long) while the batch, and
what arrives meanwhile, waits in the bounded queue: a routine restart loses nothing. A batch
still failing after that, or failing permanently (a missing table, a constraint), is dropped and
counted in ``store_errors``. Failures are logged as one line naming the store (password redacted)
and the cause, at most once a minute, never with the samples' content.
"""

from __future__ import annotations

import collections
import logging
import os
import random
import threading
import time
from collections.abc import Iterable

from ragmeter.guard import never_raise, register_exit_hook, weak_hook
from ragmeter.metrics.scoring import SampleResult
from ragmeter.store.engine import StoreError, database_url, describe, store_name, transient
from ragmeter.store.store import Store

__all__ = ["StoreWriter"]

log = logging.getLogger("ragmeter")

#: Seconds a failing batch is retried for when neither ``retry_timeout`` nor the environment sets it.
RETRY_TIMEOUT_S = 60.0
RETRY_TIMEOUT_VAR = "RAGMETER_STORE_RETRY_TIMEOUT"
#: The first wait after a failed write, doubled after each failure up to :data:`MAX_BACKOFF_S`,
#: each drawn between half and 1.5 times that (jitter: writers that failed together do not retry together).
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 2.0


def retry_timeout_default() -> float:
    """``$RAGMETER_STORE_RETRY_TIMEOUT`` (seconds) when set to a number >= 0, else :data:`RETRY_TIMEOUT_S`."""
    try:
        value = float(os.environ.get(RETRY_TIMEOUT_VAR, ""))
    except ValueError:
        return RETRY_TIMEOUT_S
    return value if value >= 0 else RETRY_TIMEOUT_S


class StoreWriter:
    """Record results in ``store`` (a :class:`~ragmeter.store.Store`, a SQLite path or a database
    URL, opened here: an unusable one raises now, one that is down is opened on the first write)
    as inline samples of ``source``, with ``tags``,
    ``judge`` and ``thresholds`` as :meth:`Store.record_samples <ragmeter.store.Store.record_samples>` takes them;
    with ``run_id``, into that run instead (:meth:`Store.add_results <ragmeter.store.Store.add_results>`:
    an evaluation recorded as it goes).

    :meth:`add` never blocks and never raises: beyond ``max_queue`` waiting results it drops the
    result and counts it (``store_dropped``, logged once a minute). A daemon thread writes up to
    ``batch`` results per transaction, at the latest ``interval`` seconds after the first of them
    arrived. A write that fails transiently is retried for up to ``retry_timeout`` seconds (None:
    ``$RAGMETER_STORE_RETRY_TIMEOUT``, else 60; see the module docstring) while later results
    queue behind it; a batch given up, or refused for good, counts its results in
    ``store_errors``. :meth:`flush` and :meth:`close` wait for the queue; interpreter exit closes
    the writer (up to ``exit_timeout``). A store opened here from a path or URL is closed with the
    writer.
    """

    #: The keys of :attr:`stats`.
    STATS_KEYS = ("store_written", "store_dropped", "store_errors")

    def __init__(
        self,
        store: Store | str | os.PathLike,
        source: str,
        *,
        tags: Iterable[str] | None = None,
        judge: str | None = None,
        thresholds: dict[str, tuple[float, float]] | None = None,
        max_queue: int = 1000,
        batch: int = 100,
        interval: float = 1.0,
        exit_timeout: float = 30.0,
        retry_timeout: float | None = None,
        run_id: int | None = None,
    ):
        retry_timeout = retry_timeout_default() if retry_timeout is None else retry_timeout
        if max_queue < 1 or batch < 1 or interval < 0 or retry_timeout < 0:
            raise ValueError("max_queue and batch must be >= 1, interval and retry_timeout >= 0")
        self._own = not isinstance(store, Store)
        self.store: Store | None = None
        self._open_args: str | os.PathLike | None = None  # the path or URL while the store is not open
        if isinstance(store, Store):
            self.store = store
        else:
            self._open_args = store
            try:
                self.store = Store(store)
            except StoreError as err:
                if not err.transient:  # unusable (another schema, not a ragmeter store): an error now
                    raise
                # down right now (an app starting while its database restarts): opened on the first write
                log.warning(
                    "ragmeter: the store %s is unavailable (%s); it is opened on the first write", err.where, err.cause
                )
        self.where = self.store.where if self.store is not None else store_name(database_url(self._open_args))
        self.source, self.tags, self.judge, self.thresholds = source, list(tags or ()), judge, thresholds
        self.max_queue, self.batch, self.interval, self.exit_timeout = max_queue, batch, interval, exit_timeout
        self.retry_timeout, self.run_id = retry_timeout, run_id
        self._counts = dict.fromkeys(self.STATS_KEYS, 0)
        self._reset()
        register_exit_hook(weak_hook(self, "_at_exit"))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=weak_hook(self, "_reset"))

    def _reset(self) -> None:
        # also after fork: the child writes only what it scores itself
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[SampleResult] = collections.deque()
        self._first_at = 0.0  # when the oldest queued result arrived
        self._writing = 0  # results taken off the queue, not yet written
        self._urgent = False  # a flush is waiting: write without waiting for a full batch
        self._closed = self._stopping = False
        self._thread: threading.Thread | None = None
        self._last_drop_log = self._last_error_log = -1e9
        self._failing_since: float | None = None  # when the store began failing (None: it works)

    def __repr__(self) -> str:
        return f"StoreWriter({self.where!r}, {self.source!r})"

    @property
    def stats(self) -> dict[str, int]:
        """``store_written`` (samples recorded), ``store_dropped`` (queue full, closed, or left
        when a close timed out), ``store_errors`` (samples whose write failed for good or was
        still failing after ``retry_timeout``)."""
        with self._cond:
            return dict(self._counts)

    def add(self, result: SampleResult) -> bool:
        """Queue ``result`` for writing; False (counted in ``store_dropped``) when the queue is
        full or the writer is closed. Never blocks, never raises."""
        with never_raise("store: queue a sample"), self._cond:
            if self._closed or len(self._queue) >= self.max_queue:
                self._drop(1)
                return False
            if not self._queue:
                self._first_at = time.monotonic()
            self._queue.append(result)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ragmeter-store", daemon=True)
                self._thread.start()
            if len(self._queue) == 1 or len(self._queue) >= self.batch:  # the first starts the interval's clock
                self._cond.notify_all()
            return True
        return False

    def flush(self, timeout: float | None = None) -> bool:
        """Write what is queued now; False if ``timeout`` seconds passed first."""
        with self._cond:
            self._urgent = True
            self._cond.notify_all()
            return self._cond.wait_for(self._idle, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Stop accepting results, write what is queued (up to ``timeout``), stop the thread and
        close a store opened here. What is still queued after ``timeout`` is dropped (counted,
        one warning). True when everything was written."""
        with self._cond:
            self._closed = True
        done = self.flush(timeout)
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
            self._drop(left)
            self._stopping = True  # a batch being retried is given up too (the writer thread counts it)
            self._cond.notify_all()
            thread = self._thread
            left += self._writing
        if left:
            log.warning(
                "ragmeter: the store %s did not take %d queued sample(s) within %g s; they were dropped "
                "(counted in stats['store_dropped'])",
                self.where,
                left,
                timeout or 0.0,
            )
        if done and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        if done and self._own and self.store is not None:
            self.store.close()
        return done

    # ------------------------------------------------------------------ internals

    def _idle(self) -> bool:
        return not self._queue and not self._writing

    def _drop(self, n: int) -> None:  # called with the lock held
        if not n:
            return
        self._counts["store_dropped"] += n
        now = time.monotonic()
        if not self._closed and now - self._last_drop_log >= 60.0:
            self._last_drop_log = now
            log.warning(
                "ragmeter: the store queue is full (max_queue=%d); %d sample(s) not recorded so far",
                self.max_queue,
                self._counts["store_dropped"],
            )

    def _take(self) -> list[SampleResult] | None:
        """The next batch, once it is full, due or flushed; None when stopping with nothing left."""
        with self._cond:
            while True:
                if self._queue and (self._urgent or self._stopping or len(self._queue) >= self.batch):
                    break
                if not self._queue:
                    if self._stopping:
                        return None
                    self._cond.wait()
                    continue
                left = self._first_at + self.interval - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            items = [self._queue.popleft() for _ in range(min(self.batch, len(self._queue)))]
            self._writing = len(items)  # what is left is overdue already: written next, at once
            return items

    def _run(self) -> None:
        while True:
            items = self._take()
            if items is None:
                return
            outcome = "store_errors"
            with never_raise("store: record samples"):  # a bug here must not end the thread
                outcome = self._write(items)
            with self._cond:
                self._counts[outcome] += len(items)
                self._writing = 0
                if self._idle():
                    self._urgent = False
                    self._cond.notify_all()

    def _record(self, items: list[SampleResult]) -> None:
        if self.store is None:  # down when the writer was made: opened now (a failure is retried like a write)
            self.store = Store(self._open_args)
        if self.run_id is not None:
            self.store.add_results(self.run_id, items)
        else:
            self.store.record_samples(items, self.source, tags=self.tags, judge=self.judge, thresholds=self.thresholds)

    def _write(self, items: list[SampleResult]) -> str:
        """Record ``items``, retrying transient failures (see the class docstring); returns the
        stats key they count in."""
        started, attempt = time.monotonic(), 0
        while True:
            try:
                self._record(items)
            except Exception as exc:
                cause = exc.cause if isinstance(exc, StoreError) else f"{type(exc).__name__}: {describe(exc)}"
                if not isinstance(exc, StoreError):  # not the database's answer: ragmeter's own bug
                    log.debug("ragmeter: recording samples in %s failed", self.where, exc_info=True)
                if not transient(exc):
                    self._error_log("refused %d sample(s) (%s); not retried, dropped", len(items), cause)
                    return "store_errors"
                now = time.monotonic()
                delay = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2**attempt) * (0.5 + random.random())
                if now + delay - started > self.retry_timeout:
                    self._error_log(
                        "did not take %d sample(s) within %g s (%s); they were dropped",
                        len(items),
                        self.retry_timeout,
                        cause,
                    )
                    return "store_errors"
                if self._failing_since is None:
                    self._failing_since = now
                    log.warning(
                        "ragmeter: the store %s is unavailable (%s); retrying for up to %g s while samples "
                        "wait in the queue",
                        self.where,
                        cause,
                        self.retry_timeout,
                    )
                else:
                    log.debug("ragmeter: the store %s is still unavailable (%s)", self.where, cause)
                with self._cond:
                    if self._cond.wait_for(lambda: self._stopping, delay):
                        return "store_dropped"  # closed meanwhile: given up with the rest of the queue
                attempt += 1
                continue
            if self._failing_since is not None:
                log.info(
                    "ragmeter: the store %s is back after %.1f s", self.where, time.monotonic() - self._failing_since
                )
                self._failing_since = None
            return "store_written"

    def _error_log(self, message: str, *args: object) -> None:
        """A dropped batch: one warning a minute, the rest at debug level."""
        now = time.monotonic()
        level = logging.WARNING if now - self._last_error_log >= 60.0 else logging.DEBUG
        if level == logging.WARNING:
            self._last_error_log = now
        log.log(level, "ragmeter: the store %s " + message + " (counted in stats['store_errors'])", self.where, *args)

    def _at_exit(self) -> None:
        if not self._closed:
            self.close(self.exit_timeout)
