"""Internal: Inline scoring off the request path: a background worker with a bounded backlog.

Integrations (LangChain callback, LlamaIndex capture, OpenTelemetry span processor) hand captured
samples to a :class:`BackgroundScorer`. ``submit`` never blocks and never raises: a full backlog
drops the sample and counts it. Scoring runs on one daemon thread with its own event loop;
``flush(timeout)`` waits for what is pending, and so does interpreter exit (up to
``exit_timeout``). A ``shutdown(timeout)`` (or exit) that times out gives the rest up: cancelled,
counted in ``dropped``, said once in a warning; exit then proceeds. With ``store=``, each result is
also recorded in a :class:`ragmeter.store.Store` by a :class:`ragmeter.store.writer.StoreWriter`.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ragmeter.data import Sample
from ragmeter.guard import never_raise, register_exit_hook, weak_hook
from ragmeter.judges.base import Embedder, Judge
from ragmeter.judges.spec import resolve_judge
from ragmeter.metrics import DEFAULT_METRICS, DEFAULT_RETRIEVAL_METRICS, resolve_metrics
from ragmeter.metrics.scoring import SampleResult, score_sample
from ragmeter.privacy import content_captured
from ragmeter.redact import redact
from ragmeter.suppression import instrumentation_suppressed

__all__ = ["BackgroundScorer", "sampled", "store_writer", "CANCEL_GRACE"]

log = logging.getLogger("ragmeter")

#: Seconds a shutdown that timed out waits for the cancelled scoring tasks to end.
CANCEL_GRACE = 1.0


def sampled(key: str, rate: float) -> bool:
    """Deterministic sampling: True for a fraction ``rate`` of keys (same key, same answer)."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    h = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")
    return h / 2**64 < rate


class _ScoreErrors:
    """Scores that could not be computed, counted instead of logged per sample.

    The first scored sample with errors is logged (one warning naming each failed metric and its
    error); later ones are only counted, per metric, and :meth:`summarise` (at shutdown or exit)
    logs one line with the counts and the last error of each metric. A judge that fails on every
    request gives two log lines, however many samples it fails on. Error texts are redacted.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.samples = 0  # scored samples with at least one error
        self.by_metric: collections.Counter = collections.Counter()
        self.last: dict[str, str] = {}
        self._summarised = 0

    def add(self, result: SampleResult) -> None:
        """Count the errored scores of ``result``; log the first such sample."""
        failed = {name: redact(s.error) for name, s in result.scores.items() if s.error}
        if not failed:
            return
        with self._lock:
            self.samples += 1
            first = self.samples == 1
            self.by_metric.update(failed.keys())
            self.last.update(failed)
        if first:
            log.warning(
                "ragmeter: scores could not be computed (%s); later samples with errors are counted "
                "in stats['score_errors'] and summarised at shutdown",
                _listing(failed),
            )

    def summarise(self, scored: int) -> None:
        """Log the counts once (again only if more errors came since)."""
        with self._lock:
            if self.samples <= max(1, self._summarised):
                return
            self._summarised = self.samples
            counts = {m: f"{n}x, last: {self.last[m]}" for m, n in self.by_metric.most_common()}
            samples = self.samples
        log.warning(
            "ragmeter: %d of %d scored samples had scores that could not be computed (%s)",
            samples,
            scored,
            _listing(counts),
        )


def _listing(items: dict[str, str], limit: int = 300) -> str:
    return "; ".join(
        f"{name}: {text if len(text) <= limit else text[: limit - 1] + chr(0x2026)}" for name, text in items.items()
    )


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

    ``judge`` (a Judge, a spec such as ``"openai:gpt-4o-mini"``, or None for the default judge when
    a metric needs one) is resolved and checked here: an unusable judge (no API key, SDK not
    installed) raises ValueError / ImportError at creation instead of failing every sample. Scores
    that could not be computed are counted in ``score_errors``; the first is logged, the rest
    summarised in one line at shutdown or exit. A ``shutdown`` (or exit, after ``exit_timeout``)
    that times out cancels what is still being scored and counts it in ``dropped``.

    ``store`` (a :class:`~ragmeter.store.Store`, a SQLite path or a ``postgresql://`` URL; None:
    off) records every result, as it is reported (``report_as``), in the store as an inline sample
    of ``store_source``, off the worker's loop through a :class:`~ragmeter.store.writer.StoreWriter`
    (its counts ``store_written``, ``store_dropped``, ``store_errors`` are in :attr:`stats`);
    :meth:`flush` and :meth:`shutdown` wait for its writes too. ``RAGMETER_DB`` is not read here:
    recording is opt-in.
    """

    #: The keys of :attr:`stats`.
    STATS_KEYS = (
        "submitted",
        "queued",
        "scored",
        "forced",
        "dropped",
        "sampled_out",
        "rejected_closed",
        "failed",
        "score_errors",
        "callback_errors",
        "pending",
        "store_written",
        "store_dropped",
        "store_errors",
    )

    def __init__(
        self,
        metrics: Iterable[Any] | None = None,
        judge: Judge | str | None = None,
        *,
        embedder: Embedder | None = None,
        max_queue: int = 1000,
        concurrency: int = 4,
        sample_rate: float = 1.0,
        should_score: Callable[[Sample], bool | None] | None = None,
        on_result: Callable[[SampleResult], None] | None = None,
        keep_results: int = 10_000,
        exit_timeout: float = 30.0,
        name: str = "ragmeter-scorer",
        store: Any = None,
        store_source: str = "inline",
    ):
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError("sample_rate must be between 0 and 1")
        if max_queue < 1 or concurrency < 1:
            raise ValueError("max_queue and concurrency must be >= 1")
        self.metrics = resolve_metrics(metrics)
        # the defaults plus the default retrieval metrics, for samples that carry relevant_ids
        self._with_retrieval = resolve_metrics(DEFAULT_METRICS + DEFAULT_RETRIEVAL_METRICS) if metrics is None else None
        self._last_drop_log = -1e9
        # resolved and checked now: an unusable judge (no API key ...) is an error here, not a
        # failure on every sample
        try:
            self._judge: Judge | None = resolve_judge(judge, self.metrics)
        except (ValueError, ImportError) as err:
            kind = ImportError if isinstance(err, ImportError) else ValueError
            raise kind(f"ragmeter: the judge for inline scoring cannot be used: {err}") from err
        self.embedder = embedder
        self.max_queue = max_queue
        self.concurrency = concurrency
        self.sample_rate = sample_rate
        self.should_score = should_score
        self.on_result = on_result
        self.exit_timeout = exit_timeout
        self.name = name
        self.results: collections.deque[SampleResult] = collections.deque(maxlen=keep_results)
        self._stats: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sem: asyncio.Semaphore | None = None
        self._closed = False
        self._abandoned = 0  # samples dropped because shutdown gave up on them
        self._tasks: set[asyncio.Future] = set()  # scoring in flight (touched on the worker only)
        self._errors = _ScoreErrors()
        # made before our exit hook is registered, so that its own hook runs after ours (LIFO)
        self.store_writer = (
            None
            if store is None
            else store_writer(
                store,
                store_source,
                judge=getattr(self._judge, "name", None),
                thresholds=self._thresholds(),
                max_queue=max_queue,
                exit_timeout=exit_timeout,
            )
        )
        register_exit_hook(weak_hook(self, "_at_exit"))

    # ------------------------------------------------------------------ public

    @property
    def stats(self) -> dict[str, int]:
        """Counters: submitted, queued, scored, forced (by ``should_score``), dropped (backlog
        full, or given up by a shutdown that timed out), sampled_out, rejected_closed, failed (scoring
        raised), score_errors (scored samples with a score that could not be computed),
        callback_errors, pending now; with a ``store``, store_written, store_dropped and
        store_errors (see :class:`~ragmeter.store.writer.StoreWriter`; 0 without)."""
        with self._lock:
            out = {k: self._stats.get(k, 0) for k in self.STATS_KEYS}
            out["pending"] = self._pending
        out["score_errors"] = self._errors.samples
        if self.store_writer is not None:
            out.update(self.store_writer.stats)
        return out

    def submit(
        self,
        sample: Sample,
        *,
        key: str | None = None,
        on_done: Callable[[SampleResult], None] | None = None,
        report_as: Sample | None = None,
    ) -> bool:
        """Queue ``sample`` for scoring; never blocks, never raises. ``on_done`` runs after
        ``on_result`` for this sample only. ``report_as``: the sample the result carries instead
        of the one scored; when it is :func:`ragmeter.privacy.without_content` of it, the result's
        scores carry no content either (see :mod:`ragmeter.privacy`)."""
        queued = False
        with never_raise("inline: queue a sample for scoring", on_error=lambda exc: self._count("dropped")):
            queued = self._queue(sample, key, on_done, report_as)
        return queued

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued sample is scored (and recorded in the ``store``); False if
        ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            if not self._idle.wait_for(lambda: self._pending == 0, timeout=timeout):
                return False
        if self.store_writer is None:
            return True
        return self.store_writer.flush(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting samples, wait for pending ones (up to ``timeout``), stop the worker.

        When ``timeout`` passes first, the samples still being scored are given up: their tasks
        are cancelled (within :data:`CANCEL_GRACE` seconds), they are counted in ``dropped``, one
        warning says how many, and nothing is left for interpreter exit to wait for. The ``store``
        writer is then closed with what is left of ``timeout``. Returns True when everything
        pending was scored (and recorded)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._closed = True
        with self._idle:
            done = self._idle.wait_for(lambda: self._pending == 0, timeout=timeout)
        loop, thread = self._loop, self._thread
        if not done:
            self._give_up(loop, thread, timeout)
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
        if self.store_writer is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            done = self.store_writer.close(left) and done
        self._errors.summarise(self.stats["scored"])
        return done

    def run_on_worker(self, fn: Callable[[], Any]) -> bool:
        """Call ``fn()`` on the worker thread, after what was scheduled before (e.g. building the
        sample it will then score, in one wake-up of the worker); False, without calling it,
        once shut down. ``fn`` must not raise."""
        with self._lock:
            if self._closed:
                return False
        try:
            self._ensure_worker().call_soon_threadsafe(fn)
        except RuntimeError:  # the loop closed meanwhile (a concurrent shutdown)
            return False
        return True

    def on_worker(self) -> bool:
        """True on the worker thread itself."""
        return threading.current_thread() is self._thread

    @property
    def judge(self) -> Judge | None:
        """The judge in use: resolved from a spec (or the default judge, when a metric needs one)
        and checked at creation; None when no metric needs a judge."""
        return self._judge

    # ------------------------------------------------------------------ internals

    def _thresholds(self) -> dict[str, tuple[float, float]]:
        return {m.name: (m.threshold, m.warn) for m in self._with_retrieval or self.metrics}

    def _queue(
        self, sample: Sample, key: str | None, on_done: Callable[[SampleResult], None] | None, report_as: Sample | None
    ) -> bool:
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
        loop.call_soon_threadsafe(self._start, sample, on_done, report_as)
        return True

    def _log_drop(self) -> None:  # called with the lock held
        now = time.monotonic()
        if now - self._last_drop_log >= 60.0:
            self._last_drop_log = now
            log.warning(
                "ragmeter: scoring backlog full (%d pending); dropped %d sample(s) so far",
                self._pending,
                self._stats["dropped"],
            )

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
                try:
                    loop.run_forever()
                    # stopped by shutdown(): close the judges' clients bound to this loop, then the loop
                    with never_raise("inline: close the worker's event loop"):
                        loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), CANCEL_GRACE))
                finally:
                    loop.close()

            self._loop = loop
            self._thread = threading.Thread(target=run, name=self.name, daemon=True)
            self._thread.start()
        ready.wait()
        return loop

    def _start(self, sample: Sample, on_done: Callable[[SampleResult], None] | None, report_as: Sample | None) -> None:
        # a strong reference: a task that awaits something nothing else references (a hung judge)
        # would otherwise be garbage-collected mid-flight ("Task was destroyed but it is pending!")
        task = asyncio.ensure_future(self._score(sample, on_done, report_as))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _score(
        self, sample: Sample, on_done: Callable[[SampleResult], None] | None, report_as: Sample | None
    ) -> None:
        try:
            with never_raise("inline: score a sample", on_error=lambda exc: self._count("failed")):
                assert self._sem is not None
                async with self._sem:
                    metrics = self._with_retrieval if (self._with_retrieval and sample.relevant_ids) else self.metrics
                    with instrumentation_suppressed():
                        result = await score_sample(
                            sample,
                            metrics,
                            self._judge,
                            self.embedder,
                            capture_content=content_captured(report_as or sample),
                        )
                if report_as is not None:
                    result.sample = report_as
                self.results.append(result)
                self._count("scored")
                self._errors.add(result)
                if self.store_writer is not None:
                    self.store_writer.add(result)
                for cb in (self.on_result, on_done):
                    if cb is not None:
                        with never_raise(
                            "inline: on_result callback", on_error=lambda exc: self._count("callback_errors")
                        ):
                            cb(result)
        except asyncio.CancelledError:  # given up by shutdown(): dropped, counted once here
            with self._lock:
                self._stats["dropped"] += 1
                self._abandoned += 1
            raise
        finally:
            with self._idle:
                self._pending = max(0, self._pending - 1)  # 0 already when shutdown gave up on it
                if self._pending == 0:
                    self._idle.notify_all()

    def _give_up(
        self, loop: asyncio.AbstractEventLoop | None, thread: threading.Thread | None, timeout: float | None
    ) -> None:
        """Cancel every task on the worker's loop (the scoring and the judge calls it shields);
        each cancelled sample counts itself as dropped. What does not end within CANCEL_GRACE is
        counted here."""
        before = self._abandoned
        if loop is not None and thread is not None and thread.is_alive():
            with never_raise("inline: cancel scoring at shutdown"):
                fut = asyncio.run_coroutine_threadsafe(_cancel_all(CANCEL_GRACE), loop)
                fut.result(CANCEL_GRACE + 1.0)
        with self._idle:
            left = self._pending
            if left:  # tasks that ignored cancellation (or a worker that is gone)
                self._stats["dropped"] += left
                self._abandoned += left
                self._pending = 0
                self._idle.notify_all()
            abandoned = self._abandoned - before
        if abandoned:
            log.warning(
                "ragmeter: shutdown gave up after %g s: %d sample(s) still being scored were dropped "
                "(counted in stats['dropped'])",
                timeout or 0.0,
                abandoned,
            )

    def _at_exit(self) -> None:
        if self._pending:
            self.shutdown(self.exit_timeout)
        else:
            self._errors.summarise(self.stats["scored"])


def store_writer(store: Any, source: str, **options: Any) -> Any:
    """A :class:`ragmeter.store.writer.StoreWriter` recording in ``store`` (a Store, a path or a
    URL) as ``source``; ``options`` go to it. SQLAlchemy is imported only when a store is used."""
    from ragmeter.store.writer import StoreWriter

    return StoreWriter(store, source, **options)


async def _cancel_all(grace: float) -> None:
    """Cancel every other task of the running loop and wait up to ``grace`` seconds for them."""
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=grace)
