"""Internal: Offline: score the RAG calls in an OTLP JSON trace export, and export evaluation spans.

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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.tracing", "otel", "opentelemetry"):
    from opentelemetry import context as otel_context
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ragmeter.data import RecordError
from ragmeter.guard import never_raise
from ragmeter.result import EvaluationResult
from ragmeter.suppression import suppressed_context
from ragmeter.tracing.attributes import parse_json, span_attributes
from ragmeter.tracing.otlp_json import (
    OTLPJsonFileExporter,
    encode_otlp_json,
    iter_otlp_requests,
    read_otlp_json,
    spans_from_request,
)
from ragmeter.tracing.readers import check_id_keys
from ragmeter.tracing.samples import BuildResult, build_samples
from ragmeter.tracing.semconv import evaluation_names
from ragmeter.tracing.writer import CARRIER_MARKER, EvaluationWriter, SpanTarget

__all__ = [
    "read_otlp_json",
    "iter_otlp_requests",
    "spans_from_request",
    "encode_otlp_json",
    "OTLPJsonFileExporter",
    "samples_from_spans",
    "scored_targets",
    "carrier_scores",
    "evaluate_traces",
    "TraceEvaluation",
    "export_carriers",
    "default_otlp_endpoint",
]

log = logging.getLogger("ragmeter")

# --------------------------------------------------------------------------- scoring


def samples_from_spans(
    spans: Iterable[Any], id_keys: Sequence[str] | None = None
) -> tuple[list[Any], list[BuildResult]]:
    """Samples (one per RAG call) from a complete set of spans, and every build result
    (including the calls that gave no sample, with the reason). ``id_keys``: the document
    metadata keys read as chunk ids (:func:`~ragmeter.tracing.samples.build_sample`)."""
    builds = build_samples(spans, check_id_keys(id_keys))
    return [b.sample for b in builds if b.sample is not None], builds


def scored_targets(spans: Iterable[Any]) -> set[tuple[int, int]]:
    """``(trace id, span id)`` of every span that an evaluation carrier in ``spans`` judges: the
    carrier's ``ragmeter.target.span_id``, else the span it links to."""
    out: set[tuple[int, int]] = set()
    for span in spans:
        attrs = span_attributes(span)
        key = _carrier_target(span, attrs) if attrs.get(CARRIER_MARKER) else None
        if key is not None:
            out.add(key)
    return out


def _carrier_score(name: str, fields: Mapping[str, Any], event: Mapping[str, Any]) -> Any:
    """A :class:`ragmeter.Score` from one evaluation of a carrier: its OpenInference fields
    (``score``, ``label``, ``explanation``, ``metadata`` JSON), else its flat tags and its
    ``gen_ai.evaluation.result`` event."""
    from ragmeter.data import Score

    names = evaluation_names()
    meta = parse_json(fields.get("metadata")) if isinstance(fields.get("metadata"), str) else None
    meta = meta if isinstance(meta, Mapping) else {}
    value = fields.get("score", event.get(names.score_value))
    value = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    label = fields.get("label", event.get(names.score_label))
    label = label if value is not None and label in ("pass", "warn", "fail") else None
    text = fields.get("explanation", event.get(names.explanation))
    text = text if isinstance(text, str) else ""
    error = meta.get("error") if isinstance(meta.get("error"), str) else None
    if meta.get("status") == "error" or event.get(names.error_type) or fields.get("error"):
        error = error or fields.get("error") or text or str(event.get(names.error_type) or "error")
        text = ""
    if value is None and not error and not text:
        text = "not applicable (as read back from the evaluation span)"
    judge = meta.get("judge") if isinstance(meta.get("judge"), str) else None
    return Score(name, value, explanation=text, error=error, judge=judge, label=label)


def carrier_scores(spans: Iterable[Any]) -> dict[tuple[int, int], dict[str, Any]]:
    """The scores the evaluation carriers in ``spans`` hold, by the ``(trace id, span id)`` they
    judge: ``{metric: Score}`` read from the carrier's OpenInference ``evaluations.{i}.*``
    attributes, else its flat ``ragmeter.<metric>.*`` tags and ``gen_ai.evaluation.result``
    events (when span limits evicted the former). Of several carriers for one span, the one that
    ended last wins, metric by metric."""
    names = evaluation_names()
    found: dict[tuple[int, int], dict[str, Any]] = {}
    carriers = [s for s in spans if span_attributes(s).get(CARRIER_MARKER)]
    for span in sorted(carriers, key=lambda s: getattr(s, "end_time", 0) or 0):
        attrs = span_attributes(span)
        key = _carrier_target(span, attrs)
        if key is None:
            continue
        evals: dict[int, dict[str, Any]] = {}
        for k, v in attrs.items():
            if k.startswith("evaluations."):
                idx, _, rest = k[len("evaluations.") :].partition(".evaluation.")
                if idx.isdigit() and rest:
                    evals.setdefault(int(idx), {})[rest] = v
        by_name = {f["name"]: f for f in evals.values() if isinstance(f.get("name"), str)}
        events = {
            e.attributes.get(names.name): dict(e.attributes)
            for e in getattr(span, "events", None) or ()
            if e.name == names.event and e.attributes and isinstance(e.attributes.get(names.name), str)
        }
        flat = {
            k[len("ragmeter.") :].rsplit(".", 1)[0]
            for k in attrs
            if k.startswith("ragmeter.") and k.endswith((".score", ".error"))
        }
        flat.discard("citation")
        scores = found.setdefault(key, {})
        for name in list(by_name) + [n for n in list(events) + sorted(flat) if n not in by_name]:
            fields = dict(by_name.get(name) or {})
            if not fields:  # evicted by the span limits: the flat tags
                for field in ("score", "label", "error"):
                    if f"ragmeter.{name}.{field}" in attrs:
                        fields[field] = attrs[f"ragmeter.{name}.{field}"]
            with never_raise("tracing: read a score back from an evaluation span"):
                scores[name] = _carrier_score(name, fields, events.get(name) or {})
    return {k: v for k, v in found.items() if v}


def _carrier_target(span: Any, attrs: Mapping[str, Any]) -> tuple[int, int] | None:
    target = attrs.get("ragmeter.target.span_id")
    if isinstance(target, str):
        try:
            return span.context.trace_id, int(target, 16)
        except ValueError:
            pass
    for link in getattr(span, "links", None) or ():
        return link.context.trace_id, link.context.span_id
    return None


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
        parent = SpanTarget(
            inv.trace_id, inv.entry_id, getattr(inv.entry, "name", None) if inv.entry is not None else None
        )
    span = inv.entry if inv.entry is not None else inv.target
    return target, parent, getattr(span, "resource", None)


def export_carriers(
    pairs: Sequence[tuple[Any, BuildResult]], endpoint: str | None = None, exporter: SpanExporter | None = None
) -> dict[str, Any]:
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
      "failed", "spans_judged", "spans_found"}`` when the scores were sent to Phoenix
      (``phoenix=``; ``spans_found``: how many of the judged spans Phoenix stores, None when it
      could not be checked), else None;
    * ``langfuse``: ``{"endpoint", "scores", "requests", "failed"}`` when the scores were sent to
      Langfuse (``langfuse=``), else None;
    * ``evaluation_logs``: ``{"endpoint", "records", "exported", "export_failed", ...}`` when
      ``gen_ai.evaluation.result`` log records were exported (``evaluation_logs=``), else None.
    """

    def __init__(
        self,
        results: list,
        metrics: list[str],
        judge: str = "code",
        invalid: list | None = None,
        duration_s: float = 0.0,
        thresholds: dict[str, tuple[float, float]] | None = None,
        *,
        trace_stats: dict[str, int] | None = None,
        export: dict[str, Any] | None = None,
        phoenix: dict[str, Any] | None = None,
        langfuse: dict[str, Any] | None = None,
        evaluation_logs: dict[str, Any] | None = None,
    ):
        super().__init__(results, metrics, judge=judge, invalid=invalid, duration_s=duration_s, thresholds=thresholds)
        self.trace_stats: dict[str, int] = dict(trace_stats or {})
        self.export: dict[str, Any] | None = export
        self.phoenix: dict[str, Any] | None = phoenix
        self.langfuse: dict[str, Any] | None = langfuse
        self.evaluation_logs: dict[str, Any] | None = evaluation_logs

    @classmethod
    def of(
        cls,
        result: EvaluationResult,
        trace_stats: dict[str, int],
        export: dict[str, Any] | None = None,
        phoenix: dict[str, Any] | None = None,
        **sent: dict[str, Any] | None,
    ) -> TraceEvaluation:
        """``result`` with its trace statistics, export and sink summaries (``langfuse``,
        ``evaluation_logs``)."""
        return cls(
            result.results,
            result.metrics,
            judge=result.judge,
            invalid=result.invalid,
            duration_s=result.duration_s,
            thresholds=result.thresholds,
            trace_stats=trace_stats,
            export=export,
            phoenix=phoenix,
            **sent,
        )


def _skip_key(reason: str | None) -> str:
    return "not_rag" if reason == "not_rag" else f"skipped_{reason}"


def _project(resource: Any) -> str:
    attrs = getattr(resource, "attributes", None) or {}
    name = attrs.get("openinference.project.name")
    return name if isinstance(name, str) and name else "default"


def _read_back(build: BuildResult, scores: dict[str, Any]) -> Any:
    """A :class:`ragmeter.SampleResult` of ``build``'s sample with the scores its carrier holds."""
    from ragmeter.metrics.scoring import SampleResult

    sample = build.sample
    otel = sample.metadata.get("otel")
    if isinstance(otel, dict):
        otel["scores_read_back"] = True
    return SampleResult(sample, dict(scores))


def _sink_summary(sink: Any) -> dict[str, Any]:
    return {"endpoint": sink.endpoint, **sink.stats}


def evaluate_traces(
    path: Any,
    metrics: Iterable[Any] | None = None,
    judge: Any = None,
    *,
    export: str | None = None,
    endpoint: str | None = None,
    concurrency: int | None = None,
    progress: bool = True,
    sinks: Sequence[Any] = (),
    rescore: bool = False,
    phoenix: Any = None,
    langfuse: Any = None,
    evaluation_logs: Any = None,
    id_keys: Sequence[str] | None = None,
) -> TraceEvaluation:
    """Score every RAG call in an OTLP JSON trace export.

    Returns a :class:`TraceEvaluation` (one sample per call; calls that could not become a sample
    are listed in ``result.invalid`` with the reason, LLM calls without retrieval are only
    counted). ``result.trace_stats`` counts spans, traces, calls and skips. ``export="otlp"``
    also sends one evaluation carrier span per scored call to ``endpoint`` (default
    :func:`default_otlp_endpoint`); ``result.export`` then says how many went out. ``sinks`` get
    every result too. ``phoenix``: a Phoenix base URL (or a
    :class:`~ragmeter.tracing.PhoenixAnnotationSink`) to send every score to as span and document
    annotations; ``result.phoenix`` then counts what was sent and failed, and how many of the
    judged spans Phoenix stores (annotations of spans it lacks wait for them, unseen).
    ``langfuse``: a Langfuse base URL (or a :class:`~ragmeter.tracing.LangfuseScoreSink`) to send
    every score to (``result.langfuse``). ``evaluation_logs``: an OTLP/HTTP URL (or an
    :class:`~ragmeter.tracing.EvaluationLogSink`) to export ``gen_ai.evaluation.result`` log
    records to, with the judged trace's resource (``result.evaluation_logs``). ``id_keys``: the
    document metadata keys read as chunk ids (a chunk without one gets a content-hash id).

    A call that already carries a ragmeter evaluation span (:func:`scored_targets`) is not scored
    again, unless ``rescore=True``: its scores are read back from the carrier
    (:func:`carrier_scores`; ``sample.metadata["otel"]["scores_read_back"]``), counted as
    ``trace_stats["skipped_already_scored"]``, reported with the others and given to the sinks
    (not exported as carriers again). A line or span that cannot be read (a truncated last
    line, a request of the wrong shape) is listed in ``result.invalid`` too and counted as
    ``trace_stats["unreadable"]``; the rest is scored. Raises ValueError when the file holds no
    span or no RAG call that could be scored.
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
        raise ValueError(
            f"{path}: no spans found (expected OTLP JSON: resourceSpans -> scopeSpans -> spans)"
            + (f"; {len(errors)} unreadable, the first: {errors[0]}" if errors else "")
        )
    samples, builds = samples_from_spans(spans, id_keys)
    carried = {} if rescore else carrier_scores(spans)
    done = set() if rescore else scored_targets(spans)
    already = [b for b in builds if b.sample is not None and (b.invocation.trace_id, b.invocation.target_id) in done]
    stats: dict[str, int] = {
        "spans": len(spans),
        "traces": len({s.context.trace_id for s in spans}),
        "invocations": len(builds),
        "samples": len(samples) - len(already),
    }
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
        raise ValueError(
            f"{path}: {len(spans)} spans, no RAG call that could be scored"
            + (f" ({reasons})" if reasons else " (no retriever spans)")
        )
    phoenix_sink = langfuse_sink = log_sink = own_log_sink = None
    if phoenix is not None:
        from ragmeter.tracing.phoenix import PhoenixAnnotationSink

        phoenix_sink = (
            phoenix if isinstance(phoenix, PhoenixAnnotationSink) else PhoenixAnnotationSink(endpoint=str(phoenix))
        )
        _ = phoenix_sink.client  # a missing Phoenix client is an ImportError before any judge call
        sinks = [*sinks, phoenix_sink]
    if langfuse is not None:
        from ragmeter.tracing.langfuse import LangfuseScoreSink

        langfuse_sink = (
            langfuse if isinstance(langfuse, LangfuseScoreSink) else LangfuseScoreSink(endpoint=str(langfuse))
        )
        _ = langfuse_sink.client  # no client or no keys: an error before any judge call
        sinks = [*sinks, langfuse_sink]
    if evaluation_logs is not None:
        from ragmeter.tracing.events import EvaluationLogSink

        log_sink = evaluation_logs if isinstance(evaluation_logs, EvaluationLogSink) else None
        if log_sink is None:
            log_sink = own_log_sink = EvaluationLogSink(endpoint=str(evaluation_logs))
        sinks = [*sinks, log_sink]
    for sink in sinks:
        remember = getattr(sink, "remember", None)
        if callable(remember):
            remember(spans)
    dataset = Dataset(samples, errors=errors, source=str(path))
    token = otel_context.attach(suppressed_context())  # judge calls must not be traced into the user's traces
    try:
        result = evaluate(dataset, metrics, judge, concurrency=concurrency, progress=progress)
    finally:
        otel_context.detach(token)
    by_id = {b.sample.id: b for b in builds if b.sample is not None}
    pairs = [(r, by_id[r.sample.id]) for r in result.results if r.sample.id in by_id]
    summary = export_carriers(pairs, endpoint) if export == "otlp" else None
    read_back = [
        (_read_back(b, carried[(b.invocation.trace_id, b.invocation.target_id)]), b)
        for b in already
        if (b.invocation.trace_id, b.invocation.target_id) in carried
    ]
    if read_back:
        stats["read_back"] = len(read_back)
        if not samples:  # nothing scored now: the table shows what the carriers hold
            result.metrics.clear()
        result.results.extend(r for r, _ in read_back)
        result.metrics.extend(dict.fromkeys(n for r, _ in read_back for n in r.scores if n not in result.metrics))
    for sink in sinks:
        for r, b in pairs + read_back:
            target, parent, _ = _targets(b)
            sink.write(r, target, parent)
        flush = getattr(sink, "flush", None)
        if callable(flush):
            flush(30.0)
    sent: dict[str, Any] = {}
    if phoenix_sink is not None:
        judged: dict[str, list[str]] = {}
        for _, b in pairs + read_back:
            target, _, resource = _targets(b)
            judged.setdefault(_project(resource), []).append(target.span_id_hex)
        sent["phoenix"] = {
            **_sink_summary(phoenix_sink),
            "spans_judged": sum(len(v) for v in judged.values()),
            "spans_found": phoenix_sink.spans_found(judged),
        }
    if langfuse_sink is not None:
        sent["langfuse"] = _sink_summary(langfuse_sink)
    if log_sink is not None:
        sent["evaluation_logs"] = _sink_summary(log_sink)
    if own_log_sink is not None:
        own_log_sink.shutdown()  # its exporter thread
    return TraceEvaluation.of(result, stats, summary, **sent)
