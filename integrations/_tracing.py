"""Internal: The OpenTelemetry side the framework integrations share.

:class:`TraceLink` reads the caller's active span when a run starts and writes each result
into that trace as an evaluation span (:class:`ragmeter.tracing.writer.EvaluationWriter`); its
:meth:`~TraceLink.write` is the ``write_trace`` a :class:`ragmeter.capture.CaptureRecorder` is given.
Nothing here imports OpenTelemetry until the application has: ``ragmeter.tracing`` is loaded on
the first run that starts while ``opentelemetry.trace`` is imported, or on the first write.
"""

from __future__ import annotations

import sys
from typing import Any

from ragmeter.guard import never_raise

_OFF = object()  # the OpenTelemetry SDK (or the writer module) could not be imported


class TraceLink:
    """The active span at run start (:meth:`current_target`) and the evaluation writer for the
    global tracer provider, or ``tracer_provider`` when given (:meth:`write`)."""

    def __init__(self, tracer_provider: Any = None):
        self.tracer_provider = tracer_provider
        self._current_target: Any = None  # ragmeter.tracing.writer.current_target, or _OFF
        self._writer: Any = None

    def current_target(self) -> Any:
        """The active, valid OpenTelemetry span as a ``SpanTarget``, or None. Cheap, never raises."""
        fn = self._current_target
        if fn is None:
            if "opentelemetry.trace" not in sys.modules:
                return None  # OTel never imported: no provider, no active span
            try:
                from ragmeter.tracing.writer import current_target
            except Exception:  # no opentelemetry SDK, or no writer module: trace attach is off
                self._current_target = _OFF
                return None
            fn = self._current_target = current_target
        elif fn is _OFF:
            return None
        target = None
        with never_raise("tracing: read the active OpenTelemetry span"):
            target = fn()
        return target

    def write(self, result: Any, target: Any) -> bool | None:
        """Write ``result`` as an evaluation span about ``target``: True when written, False when
        the writer failed (it logs why), None while there is no SDK tracer provider."""
        writer = self._writer
        if writer is None:
            if self.tracer_provider is not None:
                from ragmeter.tracing.writer import EvaluationWriter

                writer = self._writer = EvaluationWriter(tracer_provider=self.tracer_provider)
            else:
                from ragmeter.tracing.writer import writer_for_current_provider

                writer = self._writer = writer_for_current_provider()
            if writer is None:
                return None
        return writer.write(result, target)


def trace_metadata(target: Any) -> dict[str, Any]:
    """``metadata["trace"]`` of a sample captured under ``target``: its trace and span ids in hex."""
    return {
        "trace_id": _hex(getattr(target, "trace_id", None), 32),
        "span_id": _hex(getattr(target, "span_id", None), 16),
    }


def _hex(value: Any, width: int) -> str | None:
    return f"{value:0{width}x}" if isinstance(value, int) else None
