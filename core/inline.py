"""Inline scoring off the request path: a background worker with a bounded backlog.

Integrations (LangChain callback, LlamaIndex capture, OpenTelemetry span processor) hand captured
samples to a :class:`BackgroundScorer`. ``submit`` never blocks and never raises: a full backlog
drops the sample and counts it. Scoring runs on one daemon thread with its own event loop;
``flush(timeout)`` waits for what is pending, and so does interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures.thread  # noqa: F401  (so our exit hook is registered after its own)
import hashlib
import logging
import threading
import time
import weakref
from typing import Any, Callable, Iterable

from ragmeter.data import Sample
from ragmeter.guard import never_raise
from ragmeter.judges.base import Embedder, Judge
from ragmeter.judges.spec import resolve_judge
from ragmeter.metrics import DEFAULT_METRICS, DEFAULT_RETRIEVAL_METRICS
from ragmeter.metrics.scoring import score_sample
from ragmeter.result import SampleResult
from ragmeter.runner import resolve_metrics
from ragmeter.suppression import instrumentation_suppressed

__all__ = ["BackgroundScorer", "sampled", "register_exit_hook", "weak_hook"]

log = logging.getLogger("ragmeter")


def sampled(key: str, rate: float) -> bool:
    """Deterministic sampling: True for a fraction ``rate`` of keys (same key, same answer)."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")
    return h / 2**64 < rate


def register_exit_hook(fn: Callable[[], None]) -> None:
    """Run ``fn`` at interpreter exit, before thread pools shut down (so pending scoring that
    uses ``asyncio.to_thread`` can still finish); hooks run last-registered first."""
    # threading's exit hooks run before concurrent.futures shuts its executors down (which
    # asyncio.to_thread and embedding models rely on), and in reverse order of registration.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(fn)
            return
        except RuntimeError:  # interpreter already shutting down
            return
    atexit.register(fn)


def weak_hook(obj: Any, method: str) -> Callable[[], None]:
    """A callable that runs ``obj.<method>()`` while ``obj`` is alive: an exit or fork hook that
    does not keep a discarded object alive."""
    ref = weakref.ref(obj)

    def hook() -> None:
        target = ref()
        if target is not None:
            getattr(target, method)()

    return hook


class BackgroundScorer:
    """Scores samples in the background with ``metrics`` and ``judge``.

    ``submit(sample)`` returns at once: True when queued, False when not scored (sampled out,
    backlog full, or shut down) — every case is counted in :attr:`stats`, and drops are logged
    (at most once a minute). ``should_score(sample)`` returning True forces scoring (e.g. every
    high-stakes question); any other answer leaves it to ``sample_rate``, decided
    deterministically by sample id or the ``key`` given to submit. To score only what the
    predicate selects, set ``sample_rate=0``. ``metrics=None`` scores the default metrics, plus
    the default retrieval metrics for samples that carry ``relevant_ids``.
    ``on_result(result)`` is called on the worker thread for each scored sample; exceptions in
    it are counted and logged by :mod:`ragmeter.guard` (a traceback once, then at debug level),
    never propagated. ``results`` keeps the last ``keep_results``.
    """

    #: The keys of :attr:`stats`.
    STATS_KEYS = ("submitted", "queued", "scored", "forced", "dropped", "sampled_out", "rejected_closed",
                  "failed", "callback_errors", "pending")

    def __init__(self, metrics: Iterable[Any] | None = None, judge: Judge | str | None = None, *,
                 embedder: Embedder | None = None, max_queue: int = 1000, concurrency: int = 4,
                 sample_rate: float = 1.0, should_score: Callable[[Sample], bool | None] | None = None,
                 on_result: Callable[[SampleResult], None] | None = None, keep_results: int = 10_000,
                 exit_timeout: float = 30.0, name: str = "ragmeter-scorer"):
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError("sample_rate must be between 0 and 1")
        if max_queue < 1 or concurrency < 1:
            raise ValueError("max_queue and concurrency must be >= 1")
        self.metrics = resolve_metrics(metrics)
        # the defaults plus the default retrieval metrics, for samples that carry relevant_ids
        self._with_retrieval = resolve_metrics(DEFAULT_METRICS + DEFAULT_RETRIEVAL_METRICS) if metrics is None else None
        self._last_drop_log = -1e9
        self._judge_spec = judge
        self._judge: Judge | None = None
        self.embedder = embedder
        self.max_queue = max_queue
        self.concurrency = concurrency
        self.sample_rate = sample_rate
        self.should_score = should_score
        self.on_result = on_result
        self.exit_timeout = exit_timeout
        self.name = name
        self.results: collections.deque[SampleResult] = collections.deque(maxlen=keep_results)
        self._stats = collections.Counter()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sem: asyncio.Semaphore | None = None
        self._closed = False
        register_exit_hook(weak_hook(self, "_at_exit"))

    # ------------------------------------------------------------------ public

    @property
    def stats(self) -> dict[str, int]:
        """Counters: submitted, queued, scored, forced (by ``should_score``), dropped (backlog
        full), sampled_out, rejected_closed, failed (scoring raised), callback_errors, pending now."""
        with self._lock:
            out = {k: self._stats.get(k, 0) for k in self.STATS_KEYS}
            out["pending"] = self._pending
        return out

    def submit(self, sample: Sample, *, key: str | None = None,
               on_done: Callable[[SampleResult], None] | None = None) -> bool:
        """Queue ``sample`` for scoring; never blocks, never raises. ``on_done`` runs after
        ``on_result`` for this sample only."""
        queued = False
        with never_raise("inline: queue a sample for scoring", on_error=lambda exc: self._count("dropped")):
            queued = self._queue(sample, key, on_done)
        return queued

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued sample is scored; False if ``timeout`` seconds passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting samples, wait for pending ones (up to ``timeout``), stop the worker."""
        with self._lock:
            self._closed = True
        done = self.flush(timeout)
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()
        return done

    @property
    def judge(self) -> Judge | None:
        """The judge in use (resolved on first scoring when given as a spec or None)."""
        return self._judge

    # ------------------------------------------------------------------ internals

    def _queue(self, sample: Sample, key: str | None, on_done: Callable[[SampleResult], None] | None) -> bool:
        with self._lock:
            self._stats["submitted"] += 1
            if self._closed:
                self._stats["rejected_closed"] += 1
                return False
        forced = False
        if self.should_score is not None:
            # a broken predicate must not break the user's app: fall back to sample_rate
            with never_raise("inline: should_score predicate"):
                forced = self.should_score(sample) is True
        if not forced and not sampled(key or sample.id or "", self.sample_rate):
            self._count("sampled_out")
            return False
        with self._lock:
            if self._pending >= self.max_queue:
                self._stats["dropped"] += 1
                self._log_drop()
                return False
            self._pending += 1
            self._stats["queued"] += 1
            self._stats["forced"] += forced
        loop = self._ensure_worker()
        loop.call_soon_threadsafe(self._start, sample, on_done)
        return True

    def _log_drop(self) -> None:  # called with the lock held
        now = time.monotonic()
        if now - self._last_drop_log >= 60.0:
            self._last_drop_log = now
            log.warning("ragmeter: scoring backlog full (%d pending); dropped %d sample(s) so far",
                        self._pending, self._stats["dropped"])

    def _count(self, key: str) -> None:
        with self._lock:
            self._stats[key] += 1

    def _ensure_worker(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is not None and self._thread is not None and self._thread.is_alive():
                return self._loop
            ready = threading.Event()
            loop = asyncio.new_event_loop()

            def run() -> None:
                asyncio.set_event_loop(loop)
                self._sem = asyncio.Semaphore(self.concurrency)
                ready.set()
                loop.run_forever()

            self._loop = loop
            self._thread = threading.Thread(target=run, name=self.name, daemon=True)
            self._thread.start()
        ready.wait()
        return loop

    def _start(self, sample: Sample, on_done: Callable[[SampleResult], None] | None) -> None:
        asyncio.ensure_future(self._score(sample, on_done))

    async def _score(self, sample: Sample, on_done: Callable[[SampleResult], None] | None) -> None:
        try:
            with never_raise("inline: score a sample", on_error=lambda exc: self._count("failed")):
                assert self._sem is not None
                async with self._sem:
                    if self._judge is None:
                        self._judge = resolve_judge(self._judge_spec, self.metrics)
                    metrics = self._with_retrieval if (self._with_retrieval and sample.relevant_ids) else self.metrics
                    with instrumentation_suppressed():
                        result = await score_sample(sample, metrics, self._judge, self.embedder)
                self.results.append(result)
                self._count("scored")
                for cb in (self.on_result, on_done):
                    if cb is not None:
                        with never_raise("inline: on_result callback",
                                         on_error=lambda exc: self._count("callback_errors")):
                            cb(result)
        finally:
            with self._idle:
                self._pending -= 1
                if self._pending == 0:
                    self._idle.notify_all()

    def _at_exit(self) -> None:
        if self._pending:
            if not self.flush(self.exit_timeout):
                log.warning("ragmeter: %d samples still pending at exit after %.0f s", self._pending, self.exit_timeout)
