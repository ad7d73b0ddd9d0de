"""Internal: Result sinks: where the span processor, ``evaluate_traces`` and ``serve`` deliver each scored
sample besides the evaluation carrier span.

A sink has ``write(result, target, parent)``, which never raises, and optionally
``flush(timeout) -> bool``, ``shutdown()`` and ``remember(spans)`` (told about the received
spans before their results arrive, e.g. to keep each trace's resource). The sinks shipped:

* :class:`~ragmeter.tracing.writer.EvaluationWriter`: the carrier span (always first);
* :class:`~ragmeter.tracing.events.EvaluationLogSink`: ``gen_ai.evaluation.result`` log records;
* :class:`~ragmeter.tracing.phoenix.PhoenixAnnotationSink`: Phoenix span / document annotations;
* :class:`~ragmeter.tracing.langfuse.LangfuseScoreSink`: Langfuse scores.
"""

from __future__ import annotations

import threading
from typing import Any

from ragmeter.tracing.writer import SpanTarget

__all__ = ["ResultSink", "CountingSink"]


class ResultSink:
    """What the processor hands results to: ``write(result, target, parent)`` (never raising);
    optional ``flush(timeout)``, ``shutdown()`` and ``remember(spans)`` (see the module
    docstring)."""

    def write(self, result: Any, target: SpanTarget, parent: SpanTarget | None = None) -> None:  # pragma: no cover
        """Deliver one scored sample."""
        raise NotImplementedError


class CountingSink(ResultSink):
    """A sink with thread-safe counters (:attr:`stats`, keys :attr:`COUNTERS`); ``failed``
    counts what :func:`ragmeter.guard.never_raise` caught."""

    COUNTERS: tuple[str, ...] = ("failed",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = dict.fromkeys(self.COUNTERS, 0)

    @property
    def stats(self) -> dict[str, int]:
        """The counters (:attr:`COUNTERS`)."""
        with self._lock:
            return dict(self._stats)

    def _count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                self._stats[k] += v

    def _failed(self, exc: BaseException) -> None:
        self._count(failed=1)

    def flush(self, timeout: float | None = None) -> bool:
        """Nothing held back by default: True."""
        return True
