"""The :class:`StoreWriter`: inline-scored samples into a :class:`~ragmeter.store.Store`, off the
caller's thread.

A store write may wait for other writers (another process holding the SQLite lock, a busy
PostgreSQL server), so the captures never write themselves: the background scorer hands each
result to :meth:`StoreWriter.add`, which only appends it to a bounded queue, and one daemon
thread records the queue in batches with :meth:`Store.record_samples
<ragmeter.store.Store.record_samples>`.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Iterable

from ragmeter.guard import never_raise
from ragmeter.inline import register_exit_hook, weak_hook
from ragmeter.result import SampleResult
from ragmeter.store.store import Store

__all__ = ["StoreWriter"]

log = logging.getLogger("ragmeter")


class StoreWriter:
    """Record results in ``store`` (a :class:`~ragmeter.store.Store`, a SQLite path or a database
    URL, opened here: an unusable one raises now) as inline samples of ``source``, with ``tags``,
    ``judge`` and ``thresholds`` as :meth:`Store.record_samples <ragmeter.store.Store.record_samples>` takes them.

    :meth:`add` never blocks and never raises: beyond ``max_queue`` waiting results it drops the
    result and counts it (``store_dropped``, logged once a minute). A daemon thread writes up to
    ``batch`` results per transaction, at the latest ``interval`` seconds after the first of them
    arrived. A failed write counts its results in ``store_errors`` and is logged by
    :mod:`ragmeter.guard` (a traceback once, then at debug level). :meth:`flush` and
    :meth:`close` wait for the queue; interpreter exit closes the writer (up to ``exit_timeout``).
    A store opened here from a path or URL is closed with the writer.
    """

    #: The keys of :attr:`stats`.
    STATS_KEYS = ("store_written", "store_dropped", "store_errors")

    def __init__(self, store: Store | str | os.PathLike, source: str, *, tags: Iterable[str] | None = None,
                 judge: str | None = None, thresholds: dict[str, tuple[float, float]] | None = None,
                 max_queue: int = 1000, batch: int = 100, interval: float = 1.0, exit_timeout: float = 30.0):
        if max_queue < 1 or batch < 1 or interval < 0:
            raise ValueError("max_queue and batch must be >= 1, interval >= 0")
        self._own = not isinstance(store, Store)
        self.store = Store(store) if self._own else store
        self.source, self.tags, self.judge, self.thresholds = source, list(tags or ()), judge, thresholds
        self.max_queue, self.batch, self.interval, self.exit_timeout = max_queue, batch, interval, exit_timeout
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
        self._last_drop_log = -1e9

    def __repr__(self) -> str:
        return f"StoreWriter({self.store.where!r}, {self.source!r})"

    @property
    def stats(self) -> dict[str, int]:
        """``store_written`` (samples recorded), ``store_dropped`` (queue full, closed, or left
        when a close timed out), ``store_errors`` (samples whose write failed)."""
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
            if len(self._queue) >= self.batch:
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
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if left:
            log.warning("ragmeter: the store %s did not take %d queued sample(s) within %g s; they were dropped "
                        "(counted in stats['store_dropped'])", self.store.where, left, timeout or 0.0)
        if done and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        if done and self._own:
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
            log.warning("ragmeter: the store queue is full (max_queue=%d); %d sample(s) not recorded so far",
                        self.max_queue, self._counts["store_dropped"])

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
            ok = False
            with never_raise("store: record inline samples"):
                self.store.record_samples(items, self.source, tags=self.tags, judge=self.judge,
                                          thresholds=self.thresholds)
                ok = True
            with self._cond:
                self._counts["store_written" if ok else "store_errors"] += len(items)
                self._writing = 0
                if self._idle():
                    self._urgent = False
                    self._cond.notify_all()

    def _at_exit(self) -> None:
        if not self._closed:
            self.close(self.exit_timeout)
