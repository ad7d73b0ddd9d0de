"""Internal: An evaluation recorded in a store as it is scored (``ragmeter evaluate --db``).

A killed run keeps what it scored: the run is begun in the store before the first judge call
(marked incomplete), each result goes to the store as it is scored (through a
:class:`~ragmeter.store.writer.StoreWriter`: batched, off the event loop, transient failures
retried), and :meth:`RunRecorder.finish` makes the stored run equal to the final result (adding
anything a failed write or a killed process left out) and marks it complete. ``evaluate
--resume`` finds the run again: by the ``run_key`` in the results file's header when the run
streams into a ``.jsonl`` (:meth:`RunRecorder.for_file`), else as the newest run of the dataset
(:meth:`RunRecorder.for_dataset`); a finished run resumed again is not recorded twice.

>>> rec = RunRecorder.new(Store("history.db"), "rag_samples")     # doctest: +SKIP
>>> result = rm.evaluate("rag_samples.jsonl", recorder=rec)        # doctest: +SKIP
>>> rec.finish(result)                                             # doctest: +SKIP
('recorded run 1 in sqlite:////.../history.db', None)
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult
from ragmeter.store.engine import StoreError
from ragmeter.store.store import RunInfo, Store
from ragmeter.store.writer import StoreWriter
from ragmeter.verdicts import RESPONSE_TIME

__all__ = ["RunRecorder"]

#: Results an evaluation may have waiting for the store (the run holds them in memory anyway).
MAX_WAITING = 100_000


class RunRecorder:
    """Records one evaluation in ``store`` as it is scored: pass it as ``recorder=`` to
    :func:`ragmeter.evaluate`, then call :meth:`finish` with the result. ``run``: the stored run
    this one continues (None: a new run is begun at :meth:`start`); ``done``: the ids of its
    samples already stored; ``key``: written to a streamed run's results file, to find the run
    again. Store failures never stop the evaluation: they are kept in ``error`` (one line) and
    :meth:`finish` tries again."""

    def __init__(self, store: Store, dataset: str | None, *, key: str | None = None, run: RunInfo | None = None):
        self.store, self.dataset, self.key, self.run = store, dataset, key, run
        self.done: set[str] = store.sample_ids(run.id) if run is not None else set()
        self.run_id: int | None = run.id if run is not None else None
        self.writer: StoreWriter | None = None
        self.error: str | None = None
        self._info: dict[str, Any] | None = None

    @classmethod
    def new(cls, store: Store, dataset: str | None, key: str | None = None) -> RunRecorder:
        """A new run (``key``: a new random one when None)."""
        return cls(store, dataset, key=key or uuid.uuid4().hex)

    @classmethod
    def for_file(cls, store: Store, dataset: str | None, path: str | os.PathLike) -> RunRecorder:
        """The run linked to the results file ``path`` (by the ``run_key`` of its header), or a new
        one linked to it when the file has no key or the store has no such run."""
        from ragmeter.streaming import run_key_of

        key = run_key_of(path)
        run = store.find_run(key=key) if key else None
        return cls(store, dataset, key=key or uuid.uuid4().hex, run=run)

    @classmethod
    def for_dataset(cls, store: Store, dataset: str | None) -> RunRecorder:
        """The newest evaluation run of ``dataset``, or a new one when there is none."""
        run = store.find_run(dataset=dataset)
        return cls(store, dataset, run=run) if run is not None else cls.new(store, dataset)

    # ------------------------------------------------------------------ the run's hooks

    def start(self, info: dict[str, Any]) -> None:
        """The run's ``judge``, ``metrics``, ``thresholds`` and ``profile`` are known: begin the
        stored run, or check that the one continued was scored the same way (ValueError if not)."""
        self._info = info
        if self.run is not None:
            stored = [m for m in self.run.metrics if m != RESPONSE_TIME]
            wanted = [m for m in info["metrics"] if m != RESPONSE_TIME]
            if stored != wanted or (self.run.judge or "code") != info["judge"]:
                raise ValueError(
                    f"run {self.run.id} in {self.store.where} was scored by judge {self.run.judge!r} with "
                    f"metrics {stored}; this run has judge {info['judge']!r} with metrics {wanted}: "
                    "resume with the same ones, or run without --resume"
                )
        else:
            try:
                self.run_id = self._begin(info)
            except StoreError as err:
                self.error = str(err)
                return
        self.writer = StoreWriter(self.store, "evaluate", run_id=self.run_id, max_queue=MAX_WAITING)

    def add(self, result: SampleResult) -> None:
        """One scored sample: queued for the store (never blocks, never raises)."""
        if self.writer is not None:
            self.writer.add(result)

    def finish(self, result: EvaluationResult) -> tuple[str | None, str | None]:
        """Wait for the queued writes (up to the writer's retry time), then make the stored run hold
        ``result`` and mark it complete. Returns ``(line, error)``: ``"recorded run N in <store>"``,
        or the one-line error when the store could not take it."""
        if self.writer is not None:
            self.writer.close(self.writer.retry_timeout)
        try:
            if self.run_id is None:  # the store failed at the start: it may be back
                self.run_id = self._begin(
                    self._info
                    or {
                        "judge": result.judge,
                        "metrics": result.metrics,
                        "thresholds": result.thresholds,
                        "profile": result.profile,
                    }
                )
            self.store.finish_run(self.run_id, result)
        except StoreError as err:
            self.error = (
                f"{err}; the run is not recorded there"
                if self.run_id is None
                else f"{err}; run {self.run_id} there is incomplete: --resume records the rest"
            )
            return None, self.error
        self.error = None
        return f"recorded run {self.run_id} in {self.store.where}", None

    def close(self) -> None:
        """Write what is still queued (an interrupted run keeps it; up to the writer's
        ``exit_timeout``), stop the writer and close the store."""
        if self.writer is not None:
            self.writer.close(self.writer.exit_timeout)
        self.store.close()

    def _begin(self, info: dict[str, Any]) -> int:
        return self.store.begin_run(
            self.dataset,
            judge=info["judge"],
            metrics=info["metrics"],
            thresholds=info["thresholds"],
            profile=info.get("profile"),
            key=self.key,
        )
