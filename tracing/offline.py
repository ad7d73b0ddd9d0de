"""Offline: score the RAG calls in an OTLP JSON trace export, and export evaluation spans.

:func:`evaluate_traces` reads the file (the collector's file exporter format, see
:mod:`ragmeter.tracing.otlp_json`), groups the spans into one sample per RAG call exactly like
:class:`~ragmeter.tracing.RagmeterSpanProcessor`, scores them with :func:`ragmeter.evaluate` and,
with ``export="otlp"``, sends one evaluation carrier span per scored call to an OTLP/HTTP
endpoint, into the original traces, and with ``phoenix=URL`` sends the scores as Phoenix span
annotations (:class:`~ragmeter.tracing.PhoenixAnnotationSink`). RAG calls that already carry a
ragmeter evaluation span are skipped unless ``rescore=True``. A line or span of the export that cannot be read is reported
with the calls that could not be scored; the rest is scored. :class:`OTLPJsonFileExporter`
writes the same format from a running application, for later scoring without a collector.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Iterable, Sequence

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.tracing", "otel", "opentelemetry"):
    from opentelemetry import context as otel_context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ragmeter.data import RecordError
from ragmeter.result import EvaluationResult
from ragmeter.suppression import suppressed_context
from ragmeter.tracing.attributes import span_attributes
from ragmeter.tracing.otlp_json import (OTLPJsonFileExporter, encode_otlp_json, iter_otlp_requests, read_otlp_json,
                                        spans_from_request)
from ragmeter.tracing.samples import BuildResult, build_samples
from ragmeter.tracing.writer import CARRIER_MARKER, EvaluationWriter, SpanTarget

__all__ = ["read_otlp_json", "iter_otlp_requests", "spans_from_request", "encode_otlp_json", "OTLPJsonFileExporter",
           "samples_from_spans", "scored_targets", "evaluate_traces", "TraceEvaluation", "export_carriers", "default_otlp_endpoint"]

log = logging.getLogger("ragmeter")

# --------------------------------------------------------------------------- scoring


def samples_from_spans(spans: Iterable[Any]) -> tuple[list[Any], list[BuildResult]]:
    """Samples (one per RAG call) from a complete set of spans, and every build result
    (including the calls that gave no sample, with the reason)."""
    builds = build_samples(spans)
    return [b.sample for b in builds if b.sample is not None], builds


def scored_targets(spans: Iterable[Any]) -> set[tuple[int, int]]:
    """``(trace id, span id)`` of every span that an evaluation carrier in ``spans`` judges: the
    carrier's ``ragmeter.target.span_id``, else the span it links to."""
    out: set[tuple[int, int]] = set()
    for span in spans:
        attrs = span_attributes(span)
        if not attrs.get(CARRIER_MARKER):
            continue
        trace_id = span.context.trace_id
        target = attrs.get("ragmeter.target.span_id")
        if isinstance(target, str):
            try:
                out.add((trace_id, int(target, 16)))
                continue
            except ValueError:
                pass
        out.update((link.context.trace_id, link.context.span_id) for link in getattr(span, "links", None) or ())
    return out


_FIELDS = {"no_contexts": "contexts", "truncated": "contexts", "no_answer": "answer", "no_question": "question"}


def default_otlp_endpoint() -> str:
    """``$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``$OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces``,
    else ``http://localhost:4318/v1/traces``."""
    ep = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if ep:
        return ep
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if base:
        return base.rstrip("/") + "/v1/traces"
    return "http://localhost:4318/v1/traces"


class _CountingExporter(SpanExporter):
    def __init__(self, inner: SpanExporter):
        self.inner = inner
        self.exported = 0
        self.failed = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            log.exception("ragmeter: exporting evaluation spans failed")
            result = SpanExportResult.FAILURE
        if result == SpanExportResult.SUCCESS:
            self.exported += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _targets(build: BuildResult) -> tuple[SpanTarget, SpanTarget | None, Any]:
    inv = build.invocation
    target = SpanTarget(inv.trace_id, inv.target_id, getattr(inv.target, "name", None))
    parent = None
    if inv.entry_id != inv.target_id:
        parent = SpanTarget(inv.trace_id, inv.entry_id, getattr(inv.entry, "name", None) if inv.entry is not None else None)
    span = inv.entry if inv.entry is not None else inv.target
    return target, parent, getattr(span, "resource", None)


def export_carriers(pairs: Sequence[tuple[Any, BuildResult]], endpoint: str | None = None,
                    exporter: SpanExporter | None = None) -> dict[str, Any]:
    """Send one evaluation carrier per ``(SampleResult, BuildResult)`` over OTLP/HTTP (or through
    ``exporter``), with the resource of the judged trace. Returns ``{endpoint, spans, failed}``."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        endpoint = endpoint or default_otlp_endpoint()
        exporter = OTLPSpanExporter(endpoint=endpoint)
    counting = _CountingExporter(exporter)
    providers: dict[Any, Any] = {}
    shared = BatchSpanProcessor(counting, max_export_batch_size=256, schedule_delay_millis=200)
    try:
        for result, build in pairs:
            target, parent, resource = _targets(build)
            key = tuple(sorted((resource.attributes if resource is not None else {}).items(), key=lambda kv: kv[0]))
            provider = providers.get(key)
            if provider is None:
                provider = providers[key] = TracerProvider(resource=resource or Resource({}), shutdown_on_exit=False)
                provider.add_span_processor(shared)
            EvaluationWriter(provider).write(result, target, parent)
    finally:
        shared.force_flush()
        shared.shutdown()
    return {"endpoint": endpoint, "spans": counting.exported, "failed": counting.failed}


class TraceEvaluation(EvaluationResult):
    """What :func:`evaluate_traces` returns: the :class:`ragmeter.EvaluationResult` of the RAG calls
    in a trace export (one sample per call; the calls that could not become a sample are in
    ``invalid``), with

    * ``trace_stats``: counts of spans, traces, invocations (RAG calls), samples, and of the calls
      skipped by reason (``skipped_no_contexts``, ...) or without retrieval (``not_rag``);
    * ``export``: ``{"endpoint", "spans", "failed"}`` when evaluation spans were exported over
      OTLP (:func:`export_carriers`), else None;
    * ``phoenix``: ``{"endpoint", "span_annotations", "document_annotations", "requests",
      "failed"}`` when the scores were sent to Phoenix (``phoenix=``), else None.
    """

    def __init__(self, results: list, metrics: list[str], judge: str = "code", invalid: list | None = None,
                 duration_s: float = 0.0, thresholds: dict[str, tuple[float, float]] | None = None, *,
                 trace_stats: dict[str, int] | None = None, export: dict[str, Any] | None = None,
                 phoenix: dict[str, Any] | None = None):
        super().__init__(results, metrics, judge=judge, invalid=invalid, duration_s=duration_s, thresholds=thresholds)
        self.trace_stats: dict[str, int] = dict(trace_stats or {})
        self.export: dict[str, Any] | None = export
        self.phoenix: dict[str, Any] | None = phoenix

    @classmethod
    def of(cls, result: EvaluationResult, trace_stats: dict[str, int], export: dict[str, Any] | None = None,
           phoenix: dict[str, Any] | None = None) -> "TraceEvaluation":
        """``result`` with its trace statistics, export and Phoenix summaries."""
        return cls(result.results, result.metrics, judge=result.judge, invalid=result.invalid,
                   duration_s=result.duration_s, thresholds=result.thresholds, trace_stats=trace_stats, export=export,
                   phoenix=phoenix)


def _skip_key(reason: str | None) -> str:
    return "not_rag" if reason == "not_rag" else f"skipped_{reason}"


def evaluate_traces(path: Any, metrics: Iterable[Any] | None = None, judge: Any = None, *, export: str | None = None,
                    endpoint: str | None = None, concurrency: int | None = None, progress: bool = True,
                    sinks: Sequence[Any] = (), rescore: bool = False, phoenix: Any = None) -> TraceEvaluation:
    """Score every RAG call in an OTLP JSON trace export.

    Returns a :class:`TraceEvaluation` (one sample per call; calls that could not become a sample
    are listed in ``result.invalid`` with the reason, LLM calls without retrieval are only
    counted). ``result.trace_stats`` counts spans, traces, calls and skips. ``export="otlp"``
    also sends one evaluation carrier span per scored call to ``endpoint`` (default
    :func:`default_otlp_endpoint`); ``result.export`` then says how many went out. ``sinks`` get
    every result too (e.g. a :class:`~ragmeter.tracing.PhoenixAnnotationSink`). ``phoenix``: a
    Phoenix base URL (or a :class:`~ragmeter.tracing.PhoenixAnnotationSink`) to send every score
    to as span and document annotations; ``result.phoenix`` then counts what was sent and what
    failed. A call that already carries a ragmeter evaluation span (:func:`scored_targets`) is
    skipped and counted as ``trace_stats["skipped_already_scored"]``, unless ``rescore=True``.
    A line or span that cannot be read (a truncated last line, a request of the wrong shape) is
    listed in ``result.invalid`` too and counted as ``trace_stats["unreadable"]``; the rest is
    scored. Raises ValueError when the file holds no span or no RAG call that could be scored.
    """
    from ragmeter.data import Dataset
    from ragmeter.runner import evaluate

    if export not in (None, "otlp"):
        raise ValueError(f"unknown export {export!r} (use 'otlp')")
    errors: list[RecordError] = []
    try:
        spans = read_otlp_json(path, errors)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not spans:
        raise ValueError(f"{path}: no spans found (expected OTLP JSON: resourceSpans -> scopeSpans -> spans)"
                         + (f"; {len(errors)} unreadable, the first: {errors[0]}" if errors else ""))
    samples, builds = samples_from_spans(spans)
    done = set() if rescore else scored_targets(spans)
    already = [b for b in builds if b.sample is not None and (b.invocation.trace_id, b.invocation.target_id) in done]
    stats: dict[str, int] = {"spans": len(spans), "traces": len({s.context.trace_id for s in spans}),
                             "invocations": len(builds), "samples": len(samples) - len(already)}
    if already:
        builds = [b for b in builds if b not in already]
        samples = [b.sample for b in builds if b.sample is not None]
    if errors:
        stats["unreadable"] = len(errors)
    if already:
        stats["skipped_already_scored"] = len(already)
    for b in builds:
        if b.sample is not None:
            continue
        stats[_skip_key(b.reason)] = stats.get(_skip_key(b.reason), 0) + 1
        if b.reason == "not_rag":
            continue
        inv = b.invocation
        where = f"trace {inv.trace_id:032x} span {inv.target_id:016x}"
        errors.append(RecordError(where, _FIELDS.get(b.reason or ""), b.detail or str(b.reason)))
    if not samples and not already:
        reasons = ", ".join(f"{k} {v}" for k, v in stats.items() if k.startswith(("skipped_", "not_rag")))
        raise ValueError(f"{path}: {len(spans)} spans, no RAG call that could be scored"
                         + (f" ({reasons})" if reasons else " (no retriever spans)"))
    phoenix_sink = None
    if phoenix is not None:
        from ragmeter.tracing.phoenix import PhoenixAnnotationSink

        phoenix_sink = phoenix if isinstance(phoenix, PhoenixAnnotationSink) else PhoenixAnnotationSink(endpoint=str(phoenix))
        phoenix_sink.client  # a missing Phoenix client is an ImportError before any judge call
        sinks = [*sinks, phoenix_sink]
    dataset = Dataset(samples, errors=errors, source=str(path))
    token = otel_context.attach(suppressed_context())  # judge calls must not be traced into the user's traces
    try:
        result = evaluate(dataset, metrics, judge, concurrency=concurrency, progress=progress)
    finally:
        otel_context.detach(token)
    by_id = {b.sample.id: b for b in builds if b.sample is not None}
    pairs = [(r, by_id[r.sample.id]) for r in result.results if r.sample.id in by_id]
    summary = export_carriers(pairs, endpoint) if export == "otlp" else None
    for sink in sinks:
        for r, b in pairs:
            target, parent, _ = _targets(b)
            sink.write(r, target, parent)
        flush = getattr(sink, "flush", None)
        if callable(flush):
            flush(30.0)
    sent = None
    if phoenix_sink is not None:
        sent = {"endpoint": phoenix_sink.endpoint, **phoenix_sink.stats}
    return TraceEvaluation.of(result, stats, summary, sent)
