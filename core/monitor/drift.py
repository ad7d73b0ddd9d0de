"""Internal: Drift of production traffic against a reference window, with bounded state.

Two measures, each a gauge and a rule of :class:`~ragmeter.monitor.Monitor`:

* PSI: the population-stability index (:func:`~ragmeter.monitor.rules.psi`) of one per-sample
  value in the recent window against the reference window. The value is a metric's score (default
  ``context_relevance``; bins: ``bins`` equal bins over [0, 1]) or ``"retrieval_score"``, the best
  retriever score of the sample's chunks (bins: the reference's quantiles, since retriever scores
  have no common scale).
* Centroid distance: 1 - cosine similarity between the mean embedding of the reference questions
  and the mean embedding of the recent ones, when an embedder is given. Questions are embedded on
  a daemon thread in batches, never on the caller's thread; the reference keeps a running sum of
  its vectors, the recent window a fixed number of vectors.

The reference is the first ``reference_size`` samples observed, unless
:meth:`Monitor.set_reference <ragmeter.monitor.Monitor.set_reference>` gave one (e.g. the
questions and scores of an offline evaluation run).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import threading
import weakref
from collections.abc import Callable, Iterable

import numpy as np

from ragmeter.guard import never_raise
from ragmeter.judges.base import Embedder, cosine
from ragmeter.metrics.scoring import SampleResult
from ragmeter.monitor.rules import PSI_EPSILON, psi_of_shares, shares

__all__ = ["DriftValues", "QuestionDrift", "RETRIEVAL_SCORE"]

#: ``drift_on`` value: the best retriever score among a sample's chunks.
RETRIEVAL_SCORE = "retrieval_score"


class DriftValues:
    """The PSI side: reference values (frozen once ``reference_size`` are in) and the last
    ``recent`` values. Not locked: the monitor calls it under its own lock."""

    def __init__(self, on: str, *, reference_size: int, recent: int, bins: int):
        if bins < 2:
            raise ValueError("drift bins must be >= 2")
        self.on, self.reference_size, self.bins = on, reference_size, bins
        self.reference: list[float] = []
        self.recent: collections.deque[float] = collections.deque(maxlen=recent)
        self._edges: list[float] | None = None
        self._ref_shares: list[float] | None = None
        self._recent_bins: collections.deque[int] = collections.deque(maxlen=recent)
        self._counts: list[int] = []

    def value_of(self, result: SampleResult) -> float | None:
        """The value drift is measured on for one sample, or None when it has none."""
        if self.on == RETRIEVAL_SCORE:
            scores = [c.score for c in result.sample.contexts if c.score is not None]
            return float(max(scores)) if scores else None
        score = result.scores.get(self.on)
        return None if score is None else score.value

    def add(self, value: float) -> None:
        """One value: into the reference while it is filling, else into the recent window."""
        if self._edges is None and len(self.reference) < self.reference_size:
            self.reference.append(value)
            if len(self.reference) == self.reference_size:
                self._freeze()
            return
        assert self._edges is not None
        if len(self._recent_bins) == self._recent_bins.maxlen:
            self._counts[self._recent_bins[0]] -= 1
        b = bisect.bisect_right(self._edges, value, 1, len(self._edges) - 1) - 1  # outside: first / last bin
        self._recent_bins.append(b)
        self._counts[b] += 1
        self.recent.append(value)

    def set_reference(self, values: Iterable[float]) -> None:
        """Use ``values`` as the reference (at most ``reference_size``, the last ones kept)."""
        self.reference = list(values)[-self.reference_size :]
        self._edges = self._ref_shares = None
        self.recent.clear()
        self._recent_bins.clear()
        if self.reference:
            self._freeze()

    def _freeze(self) -> None:
        if self.on == RETRIEVAL_SCORE:
            qs = np.quantile(np.asarray(self.reference, dtype=float), np.linspace(0.0, 1.0, self.bins + 1))
            self._edges = sorted({float(q) for q in qs}) if len(set(qs)) > 1 else [float(qs[0]), float(qs[0]) + 1.0]
        else:
            self._edges = [i / self.bins for i in range(self.bins + 1)]
        self._ref_shares = [float(x) for x in shares(self.reference, self._edges)]
        self._counts = [0] * (len(self._edges) - 1)

    def psi(self, min_samples: int) -> float | None:
        """PSI of the recent window against the frozen reference; None before the reference is
        complete or before ``min_samples`` recent values."""
        if self._edges is None or self._ref_shares is None or len(self.recent) < max(1, min_samples):
            return None
        n = len(self._recent_bins)
        return psi_of_shares(self._ref_shares, [c / n if c else PSI_EPSILON for c in self._counts])


class QuestionDrift:
    """The embedding side: embeds questions on a daemon thread and keeps the reference centroid
    (running sum of the first ``reference_size`` vectors) and the last ``recent`` vectors.
    ``on_update()`` runs on that thread after each batch. At most ``max_pending`` questions wait;
    beyond that new ones are dropped and counted in ``dropped``."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        reference_size: int,
        recent: int,
        on_update: Callable[[], None],
        batch: int = 64,
        max_pending: int = 1024,
    ):
        self.embedder, self.reference_size, self.batch = embedder, reference_size, batch
        # weakly: the worker thread must not keep a discarded monitor alive
        self._on_update = weakref.WeakMethod(on_update) if hasattr(on_update, "__self__") else lambda: on_update
        self._cond = threading.Condition()
        self._pending: collections.deque[tuple[str, bool]] = collections.deque()
        self.max_pending = max_pending
        self._busy = False
        self._thread: threading.Thread | None = None
        self._ref_sum: np.ndarray | None = None
        self._ref_n = 0
        self._ref_fixed = False  # set_reference was called: no more filling from traffic
        self.recent: collections.deque[np.ndarray] = collections.deque(maxlen=recent)
        self.dropped = 0
        self.errors = 0

    def add(self, question: str, *, reference: bool = False) -> None:
        """Queue a question (``reference=True``: part of an explicit reference). Never blocks."""
        with self._cond:
            if len(self._pending) >= self.max_pending:
                self.dropped += 1
                return
            self._pending.append((question, reference))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ragmeter-monitor-drift", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def set_reference(self, questions: Iterable[str]) -> None:
        """Replace the reference by these questions (embedded on the worker)."""
        with self._cond:
            self._ref_sum, self._ref_n, self._ref_fixed = None, 0, True
            self.recent.clear()
        for q in list(questions)[-self.reference_size :]:
            self.add(q, reference=True)

    def distance(self, min_samples: int) -> float | None:
        """Cosine distance between the reference and recent centroids; None before the reference
        holds ``min_samples`` vectors or the recent window ``min_samples``."""
        with self._cond:
            if self._ref_sum is None or self._ref_n < max(1, min_samples) or len(self.recent) < max(1, min_samples):
                return None
            ref = self._ref_sum / self._ref_n
            now = np.mean(np.stack(list(self.recent)), axis=0)
        return 1.0 - cosine(ref, now)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued question is embedded; False if ``timeout`` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: bool(self._pending))
                    items = [self._pending.popleft() for _ in range(min(self.batch, len(self._pending)))]
                    self._busy = True

                def count_lost(exc: BaseException, n: int = len(items)) -> None:  # (binds the count now)
                    self._count_error(n)

                with never_raise("monitor: embed questions for drift", on_error=count_lost):
                    vectors, _ = loop.run_until_complete(self.embedder.embed([q for q, _ in items]))
                    self._take(np.asarray(vectors, dtype=float), [ref for _, ref in items])
                update = self._on_update()
                if update is not None:
                    with never_raise("monitor: drift update"):
                        update()
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        finally:
            loop.close()

    def _count_error(self, n: int) -> None:
        with self._cond:
            self.errors += n

    def _take(self, vectors: np.ndarray, reference: list[bool]) -> None:
        with self._cond:
            for vec, ref in zip(vectors, reference):
                filling = not self._ref_fixed and self._ref_n < self.reference_size
                if ref or filling:
                    self._ref_sum = vec.copy() if self._ref_sum is None else self._ref_sum + vec
                    self._ref_n += 1
                else:
                    self.recent.append(vec)
