"""Internal: ``EvaluationLogSink``: each score as a ``gen_ai.evaluation.result`` log record.

The GenAI semantic conventions define one evaluation signal, the ``gen_ai.evaluation.result``
event, parented to the evaluated span. ragmeter always writes it as a span event on its
evaluation carrier (:mod:`ragmeter.tracing.writer`); logs backends (Loki, Elastic, OpenSearch)
read events only as log records. This sink emits the same event through the OpenTelemetry Logs
API, one log record per metric:

* ``event_name`` ``gen_ai.evaluation.result``; attributes ``gen_ai.evaluation.name``,
  ``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label``,
  ``gen_ai.evaluation.explanation`` and, when the score could not be computed, ``error.type``
  (names: :mod:`ragmeter.tracing.semconv`, with its ``OTEL_SEMCONV_STABILITY_OPT_IN`` switch);
* the trace id and span id of the **evaluated span** (the record's context is that span's), so a
  logs backend links the record to the trace; severity INFO; no body;
* explanations are redacted of credentials; a result whose sample was captured without content
  (``capture_content=False``) carries no explanation, only an error message when there is one.

Two ways to use it:

* ``EvaluationLogSink(logger_provider)`` emits through an SDK ``LoggerProvider`` (default: the
  global one, ``opentelemetry._logs.get_logger_provider()``, resolved at each write until it is
  an SDK provider), with the exporters you registered on it. The span processor does this with
  ``evaluation_logs=True`` (``RAGMETER_EVALUATION_LOGS=true``).
* ``EvaluationLogSink(endpoint="http://collector:4318")`` exports over OTLP/HTTP (``/v1/logs`` is
  added to a bare URL) with the resource of the trace each record is about, as told by
  :meth:`remember`; ``ragmeter evaluate-traces --evaluation-logs URL`` and ``ragmeter serve
  --evaluation-logs URL`` use it.

It never raises: failures are logged and counted in :attr:`stats`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from ragmeter.capture import content_captured
from ragmeter.guard import never_raise
from ragmeter.tracing.semconv import LEGACY_EVENT_NAME, evaluation_names
from ragmeter.tracing.sinks import CountingSink
from ragmeter.tracing.writer import SpanTarget, evaluation_result_attributes

__all__ = ["EvaluationLogSink", "logs_endpoint", "evaluation_log_records"]

_SCOPE = "ragmeter"
_MAX_PROVIDERS = 256


def logs_endpoint(url: str) -> str:
    """The OTLP/HTTP logs URL for ``url``: ``/v1/logs`` is added to a bare base URL."""
    if urlsplit(url).path in ("", "/"):
        return url.rstrip("/") + "/v1/logs"
    return url


def _modern_logs_api() -> bool:
    import inspect

    from opentelemetry._logs import LogRecord

    params = inspect.signature(LogRecord.__init__).parameters
    return "event_name" in params and "context" in params


#: Whether the installed Logs API's records take ``context`` and ``event_name`` (newer releases).
_MODERN_LOGS_API = _modern_logs_api()


def _is_sdk_provider(provider: Any) -> bool:
    try:
        from opentelemetry.sdk._logs import LoggerProvider
    except ImportError:  # pragma: no cover - API without SDK
        return False
    return isinstance(provider, LoggerProvider)


def evaluation_log_records(
    result: Any, target: SpanTarget, resource: Any = None, timestamp: int | None = None
) -> list[Any]:
    """The log records for ``result`` about ``target``: one ``gen_ai.evaluation.result`` event
    per metric, in the evaluated span's context. With an SDK whose Logs API has no event names
    (older releases, 1.25 among them) the name travels as the ``event.name`` attribute, as the
    event conventions of that time had it (``resource``: that SDK's record needs it)."""
    from opentelemetry._logs import LogRecord, SeverityNumber

    names = evaluation_names()
    ts = time.time_ns() if timestamp is None else timestamp
    with_content = content_captured(result.sample)
    flags = TraceFlags(TraceFlags.SAMPLED)
    common: dict[str, Any] = {
        "timestamp": ts,
        "observed_timestamp": ts,
        "severity_number": SeverityNumber.INFO,
        "severity_text": "INFO",
    }
    attrs = [evaluation_result_attributes(name, s, with_content, names) for name, s in result.scores.items()]
    if _MODERN_LOGS_API:
        span = NonRecordingSpan(SpanContext(target.trace_id, target.span_id, is_remote=False, trace_flags=flags))
        ctx = set_span_in_context(span, Context())  # not the caller's context: it may carry suppression
        return [LogRecord(context=ctx, event_name=names.event, attributes=a, **common) for a in attrs]
    from opentelemetry.sdk._logs import LogRecord as SDKLogRecord  # type: ignore[attr-defined]  # old SDKs only

    return [
        SDKLogRecord(
            trace_id=target.trace_id,
            span_id=target.span_id,
            trace_flags=flags,
            resource=resource,
            body="",  # that SDK's OTLP encoder cannot encode a missing body
            attributes={**a, LEGACY_EVENT_NAME: names.event},
            **common,
        )
        for a in attrs
    ]


class _CountingLogExporter:
    """Wraps a log exporter and counts the records exported and failed."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.exported = 0
        self.failed = 0

    def export(self, batch: Any) -> Any:
        try:
            result = self.inner.export(batch)
        except Exception:  # an exporter that raises fails this batch only (the processor logs it)
            self.failed += len(batch)
            raise
        # by name: the SDK renamed the enum (LogExportResult -> LogRecordExportResult)
        if getattr(result, "name", None) == "SUCCESS":
            self.exported += len(batch)
        else:
            self.failed += len(batch)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class EvaluationLogSink(CountingSink):
    """Emits each result as ``gen_ai.evaluation.result`` log records (see the module docstring).

    ``logger_provider``: an SDK ``LoggerProvider`` (default: the global one). ``endpoint``: an
    OTLP/HTTP URL to export to instead, through one batch processor, with a provider per
    resource (:meth:`remember` tells which trace has which resource; at most ``max_traces``
    traces are remembered, the oldest forgotten first). :attr:`stats`: ``records`` emitted,
    ``exported`` / ``export_failed`` (with ``endpoint``), ``no_sdk_provider`` (results not
    emitted for want of an SDK provider), ``failed``.
    """

    COUNTERS = ("records", "exported", "export_failed", "no_sdk_provider", "failed")

    def __init__(self, logger_provider: Any = None, *, endpoint: str | None = None, max_traces: int = 10_000):
        super().__init__()
        if logger_provider is not None and endpoint is not None:
            raise ValueError("give a logger_provider or an endpoint, not both")
        self._provider = logger_provider
        self._logger: Any = None
        self.endpoint = logs_endpoint(endpoint) if endpoint else None
        self.max_traces = max_traces
        self._resources: dict[int, Any] = {}
        self._loggers: dict[Any, Any] = {}
        self._exporter: _CountingLogExporter | None = None
        self._batch: Any = None
        self._mem_lock = threading.Lock()
        if self.endpoint:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

            self._exporter = _CountingLogExporter(OTLPLogExporter(endpoint=self.endpoint))
            self._batch = BatchLogRecordProcessor(self._exporter, schedule_delay_millis=200)  # type: ignore[arg-type]

    @property
    def stats(self) -> dict[str, int]:
        """Counters: records, exported, export_failed, no_sdk_provider, failed."""
        out = super().stats
        if self._exporter is not None:
            out.update(exported=self._exporter.exported, export_failed=self._exporter.failed)
        return out

    def remember(self, spans: Iterable[Any]) -> None:
        """Note the resource of each span's trace (used with ``endpoint``)."""
        if self.endpoint is None:
            return
        with self._mem_lock:
            res = self._resources
            for span in spans:
                res[span.context.trace_id] = getattr(span, "resource", None)
            while len(res) > self.max_traces:
                del res[next(iter(res))]

    def _logger_for(self, target: SpanTarget) -> Any:
        from ragmeter import __version__

        if self._batch is None:  # the given or the global provider
            if self._logger is None:
                from opentelemetry._logs import get_logger_provider

                provider = self._provider if self._provider is not None else get_logger_provider()
                if not _is_sdk_provider(provider):
                    return None
                self._logger = provider.get_logger(_SCOPE, __version__)
            return self._logger
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk.resources import Resource

        with self._mem_lock:
            resource = self._resources.get(target.trace_id)
            key = tuple(sorted((resource.attributes if resource is not None else {}).items()))
            logger = self._loggers.get(key)
            if logger is None:
                if len(self._loggers) >= _MAX_PROVIDERS:
                    del self._loggers[next(iter(self._loggers))]
                provider = LoggerProvider(resource=resource or Resource({}), shutdown_on_exit=False)
                provider.add_log_record_processor(self._batch)
                logger = self._loggers[key] = provider.get_logger(_SCOPE, __version__)
            return logger

    def write(self, result: Any, target: SpanTarget, parent: SpanTarget | None = None) -> None:
        """Emit one log record per metric of ``result``, in ``target``'s context. Never raises."""
        with never_raise("tracing: emit evaluation log records", on_error=self._failed):
            logger = self._logger_for(target)
            if logger is None:
                self._count(no_sdk_provider=1)
                return
            for record in evaluation_log_records(result, target, getattr(logger, "resource", None)):
                logger.emit(record)
                self._count(records=1)

    def flush(self, timeout: float | None = None) -> bool:
        """Export what is queued (with ``endpoint``), or flush the logger provider, within
        ``timeout`` seconds."""
        ms = int(max(0.0, 30.0 if timeout is None else timeout) * 1000)
        if self._batch is not None:
            return bool(self._batch.force_flush(ms))
        provider = self._provider
        if provider is None:
            from opentelemetry._logs import get_logger_provider

            provider = get_logger_provider()
        flush = getattr(provider, "force_flush", None)
        return bool(flush(ms)) if callable(flush) and _is_sdk_provider(provider) else True

    def shutdown(self) -> None:
        """Export what is queued and stop the exporter (with ``endpoint``; a given or global
        provider is the application's to shut down)."""
        if self._batch is not None:
            self._batch.shutdown()
