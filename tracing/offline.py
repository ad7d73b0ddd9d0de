"""Offline: score the RAG calls in an OTLP JSON trace export, and export evaluation spans.

The input is what the OpenTelemetry Collector's ``file`` exporter writes: JSON lines, each line
one ``ExportTraceServiceRequest`` in the OTLP JSON encoding (``resourceSpans`` -> ``scopeSpans``
-> ``spans``; trace and span ids as hex strings; 64-bit integers as strings). A single JSON
document, a JSON array of requests and gzip files (``.gz``) are read too. Base64 ids (the plain
protobuf JSON mapping) are accepted.

:func:`evaluate_traces` reads the file, groups the spans into one sample per RAG call exactly
like :class:`~ragmeter.tracing.RagmeterSpanProcessor`, scores them with :func:`ragmeter.evaluate`
and, with ``export="otlp"``, sends one evaluation carrier span per scored call to an OTLP/HTTP
endpoint, into the original traces. :class:`OTLPJsonFileExporter` writes the same format from a
running application, for later scoring without a collector.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from opentelemetry import context as otel_context
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from ragmeter.result import EvaluationResult
from ragmeter.suppression import suppressed_context
from ragmeter.tracing.samples import BuildResult, build_samples
from ragmeter.tracing.writer import EvaluationWriter, SpanTarget

__all__ = ["read_otlp_json", "iter_otlp_requests", "spans_from_request", "encode_otlp_json", "OTLPJsonFileExporter",
           "samples_from_spans", "evaluate_traces", "TraceEvaluation", "export_carriers", "default_otlp_endpoint"]

log = logging.getLogger("ragmeter")

_KINDS = {0: SpanKind.INTERNAL, 1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT, 4: SpanKind.PRODUCER,
          5: SpanKind.CONSUMER}
_KIND_NAMES = {"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
               "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5}
_KIND_CODES = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4, SpanKind.CONSUMER: 5}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR, "STATUS_CODE_UNSET": StatusCode.UNSET,
           "STATUS_CODE_OK": StatusCode.OK, "STATUS_CODE_ERROR": StatusCode.ERROR}
_STATUS_CODES = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200


# --------------------------------------------------------------------------- decoding


def _decode_id(value: Any, nbytes: int) -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, int):
        return value
    s = str(value).strip()
    if len(s) == nbytes * 2:
        try:
            return int(s, 16)
        except ValueError:
            pass
    try:
        raw = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"not a {nbytes}-byte id (hex or base64): {s!r}") from None
    if len(raw) != nbytes:
        raise ValueError(f"not a {nbytes}-byte id: {s!r}")
    return int.from_bytes(raw, "big")


def _any_value(v: Any) -> Any:
    """Decode an OTLP ``AnyValue``; maps and arrays of maps become JSON strings (span
    attributes can only hold primitives and homogeneous arrays)."""
    if not isinstance(v, Mapping):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        d = v["doubleValue"]
        return float(d) if not isinstance(d, str) else float(d.replace("Infinity", "inf"))
    if "bytesValue" in v:
        try:
            return base64.b64decode(v["bytesValue"])
        except (binascii.Error, ValueError):
            return v["bytesValue"]
    if "arrayValue" in v:
        values = [_any_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
        if any(isinstance(x, (dict, list)) for x in values):
            return json.dumps([_plain(x) for x in values], ensure_ascii=False)
        return tuple(values)
    if "kvlistValue" in v:
        return json.dumps(_plain(_kvlist((v["kvlistValue"] or {}).get("values", []))), ensure_ascii=False)
    return None


def _plain(x: Any) -> Any:
    if isinstance(x, str) and x[:1] in ("{", "["):
        try:
            return json.loads(x)
        except ValueError:
            return x
    if isinstance(x, tuple):
        return list(x)
    if isinstance(x, bytes):
        return base64.b64encode(x).decode()
    return x


def _kvlist(items: Iterable[Mapping]) -> dict:
    return {kv.get("key"): _plain(_any_value(kv.get("value"))) for kv in items or () if isinstance(kv, Mapping)}


def _attributes(items: Any, dropped: int = 0) -> BoundedAttributes:
    out: dict[str, Any] = {}
    for kv in items or ():
        if not isinstance(kv, Mapping) or not kv.get("key"):
            continue
        value = _any_value(kv.get("value"))
        if value is not None:
            out[kv["key"]] = value
    attrs = BoundedAttributes(maxlen=None, attributes=out, immutable=True)
    attrs.dropped = int(dropped or 0)
    return attrs


def _nanos(v: Any) -> int | None:
    if v is None or v == "":
        return None
    return int(v)


def spans_from_request(request: Mapping) -> list[ReadableSpan]:
    """The spans of one ``ExportTraceServiceRequest`` (OTLP JSON) as SDK ReadableSpans."""
    out: list[ReadableSpan] = []
    for rs in request.get("resourceSpans") or request.get("resource_spans") or ():
        res = rs.get("resource") or {}
        resource = Resource(dict(_attributes(res.get("attributes"))), rs.get("schemaUrl") or None)
        for ss in rs.get("scopeSpans") or rs.get("scope_spans") or rs.get("instrumentationLibrarySpans") or ():
            sc = ss.get("scope") or ss.get("instrumentationLibrary") or {}
            scope = InstrumentationScope(sc.get("name") or "", sc.get("version") or None, ss.get("schemaUrl") or None)
            for sp in ss.get("spans") or ():
                out.append(_span(sp, resource, scope))
    return out


def _span(sp: Mapping, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = _decode_id(sp.get("traceId"), 16)
    span_id = _decode_id(sp.get("spanId"), 8)
    if not trace_id or not span_id:
        raise ValueError(f"span {sp.get('name')!r} has no trace id or span id")
    flags = int(sp.get("flags") or 0)
    parent_id = _decode_id(sp.get("parentSpanId"), 8)
    parent = None
    if parent_id:
        remote = (flags & (_HAS_IS_REMOTE | _IS_REMOTE)) == (_HAS_IS_REMOTE | _IS_REMOTE)
        parent = SpanContext(trace_id, parent_id, is_remote=remote, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    ctx = SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    kind = sp.get("kind", 1)
    kind = _KIND_NAMES.get(kind, 1) if isinstance(kind, str) else int(kind or 0)
    st = sp.get("status") or {}
    code = st.get("code", 0)
    status = Status(_STATUS.get(code if isinstance(code, str) else int(code or 0), StatusCode.UNSET),
                    st.get("message") or None) if code not in (0, "STATUS_CODE_UNSET", None) else Status(StatusCode.UNSET)
    events = [Event(ev.get("name") or "", _attributes(ev.get("attributes"), ev.get("droppedAttributesCount", 0)),
                    _nanos(ev.get("timeUnixNano"))) for ev in sp.get("events") or ()]
    links = []
    for ln in sp.get("links") or ():
        try:
            lctx = SpanContext(_decode_id(ln.get("traceId"), 16), _decode_id(ln.get("spanId"), 8), is_remote=True,
                               trace_flags=TraceFlags(TraceFlags.SAMPLED))
            links.append(Link(lctx, _attributes(ln.get("attributes"))))
        except ValueError:
            continue
    return ReadableSpan(name=sp.get("name") or "", context=ctx, parent=parent, resource=resource,
                        attributes=_attributes(sp.get("attributes"), sp.get("droppedAttributesCount", 0)),
                        events=events, links=links, kind=_KINDS.get(kind, SpanKind.INTERNAL), status=status,
                        start_time=_nanos(sp.get("startTimeUnixNano")), end_time=_nanos(sp.get("endTimeUnixNano")),
                        instrumentation_scope=scope)


def _read_text(source: Any) -> str:
    if hasattr(source, "read"):
        data = source.read()
        return data.decode("utf-8") if isinstance(data, bytes) else data
    path = Path(os.fspath(source))
    raw = path.read_bytes()
    if path.suffix == ".gz" or raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


def iter_otlp_requests(source: Any) -> Iterator[Mapping]:
    """The ``ExportTraceServiceRequest`` objects in a file (path or file object): JSON lines,
    one JSON document, or a JSON array of requests. Raises ValueError naming the bad line."""
    text = _read_text(source)
    stripped = text.strip()
    if not stripped:
        return
    try:
        whole = json.loads(stripped)
    except ValueError:
        whole = None
    if isinstance(whole, list):
        for item in whole:
            if isinstance(item, Mapping):
                yield item
        return
    if isinstance(whole, Mapping):
        yield whole
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"line {n}: not JSON ({exc})") from None
        if not isinstance(obj, Mapping):
            raise ValueError(f"line {n}: expected an ExportTraceServiceRequest object")
        yield obj


def read_otlp_json(source: Any) -> list[ReadableSpan]:
    """Every span of an OTLP JSON trace export (see :func:`iter_otlp_requests`), as SDK
    ReadableSpans (resource, scope, parent, attributes with their dropped count, events, links)."""
    spans: list[ReadableSpan] = []
    for i, request in enumerate(iter_otlp_requests(source), start=1):
        try:
            spans.extend(spans_from_request(request))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"request {i}: {exc}") from None
    return spans


# --------------------------------------------------------------------------- encoding


def _encode_value(v: Any) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, bytes):
        return {"bytesValue": base64.b64encode(v).decode()}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_encode_value(x) for x in v]}}
    return {"stringValue": str(v)}


def _encode_attrs(attrs: Mapping[str, Any] | None) -> list[dict]:
    return [{"key": k, "value": _encode_value(v)} for k, v in (attrs or {}).items()]


def _encode_span(span: Any) -> dict:
    ctx = span.context
    out: dict[str, Any] = {"traceId": format(ctx.trace_id, "032x"), "spanId": format(ctx.span_id, "016x")}
    flags = int(ctx.trace_flags) | _HAS_IS_REMOTE
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
        if span.parent.is_remote:
            flags |= _IS_REMOTE
    out.update({"flags": flags, "name": span.name, "kind": _KIND_CODES.get(span.kind, 1),
                "startTimeUnixNano": str(span.start_time or 0), "endTimeUnixNano": str(span.end_time or 0),
                "attributes": _encode_attrs(span.attributes)})
    if getattr(span, "dropped_attributes", 0):
        out["droppedAttributesCount"] = span.dropped_attributes
    if span.events:
        out["events"] = [{"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _encode_attrs(e.attributes)}
                         for e in span.events]
    if span.links:
        out["links"] = [{"traceId": format(ln.context.trace_id, "032x"), "spanId": format(ln.context.span_id, "016x"),
                         "attributes": _encode_attrs(ln.attributes)} for ln in span.links]
    status = {"code": _STATUS_CODES.get(span.status.status_code, 0)}
    if span.status.description:
        status["message"] = span.status.description
    out["status"] = status
    return out


def encode_otlp_json(spans: Sequence[Any]) -> dict:
    """An OTLP JSON ``ExportTraceServiceRequest`` (the collector file exporter's line format) for
    SDK spans, grouped by resource and instrumentation scope."""
    by_resource: dict[Any, dict[Any, list]] = {}
    resources: dict[Any, Any] = {}
    for span in spans:
        rkey = tuple(sorted((span.resource.attributes or {}).items(), key=lambda kv: kv[0]))
        resources[rkey] = span.resource
        scope = span.instrumentation_scope
        skey = (getattr(scope, "name", "") or "", getattr(scope, "version", None) or "")
        by_resource.setdefault(rkey, {}).setdefault(skey, []).append(span)
    out = []
    for rkey, scopes in by_resource.items():
        out.append({"resource": {"attributes": _encode_attrs(resources[rkey].attributes)},
                    "scopeSpans": [{"scope": {"name": name, **({"version": version} if version else {})},
                                    "spans": [_encode_span(s) for s in group]}
                                   for (name, version), group in scopes.items()]})
    return {"resourceSpans": out}


class OTLPJsonFileExporter(SpanExporter):
    """A span exporter that appends one OTLP JSON line per export to ``path`` (the OpenTelemetry
    Collector file exporter's format), for scoring later with ``ragmeter evaluate-traces``."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append the spans as one JSON line."""
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            line = json.dumps(encode_otlp_json(spans), ensure_ascii=False)
            with self._lock, self.path.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")
            return SpanExportResult.SUCCESS
        except Exception:
            log.exception("ragmeter: could not write spans to %s", self.path)
            return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        """Stop accepting spans."""
        self._closed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered: always True."""
        return True


# --------------------------------------------------------------------------- scoring


def samples_from_spans(spans: Iterable[Any]) -> tuple[list[Any], list[BuildResult]]:
    """Samples (one per RAG call) from a complete set of spans, and every build result
    (including the calls that gave no sample, with the reason)."""
    builds = build_samples(spans)
    return [b.sample for b in builds if b.sample is not None], builds


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
      OTLP (:func:`export_carriers`), else None.
    """

    def __init__(self, results: list, metrics: list[str], judge: str = "code", invalid: list | None = None,
                 duration_s: float = 0.0, thresholds: dict[str, tuple[float, float]] | None = None, *,
                 trace_stats: dict[str, int] | None = None, export: dict[str, Any] | None = None):
        super().__init__(results, metrics, judge=judge, invalid=invalid, duration_s=duration_s, thresholds=thresholds)
        self.trace_stats: dict[str, int] = dict(trace_stats or {})
        self.export: dict[str, Any] | None = export

    @classmethod
    def of(cls, result: EvaluationResult, trace_stats: dict[str, int],
           export: dict[str, Any] | None = None) -> "TraceEvaluation":
        """``result`` with its trace statistics and export summary."""
        return cls(result.results, result.metrics, judge=result.judge, invalid=result.invalid,
                   duration_s=result.duration_s, thresholds=result.thresholds, trace_stats=trace_stats, export=export)


def _skip_key(reason: str | None) -> str:
    return "not_rag" if reason == "not_rag" else f"skipped_{reason}"


def evaluate_traces(path: Any, metrics: Iterable[Any] | None = None, judge: Any = None, *, export: str | None = None,
                    endpoint: str | None = None, concurrency: int = 8, progress: bool = True,
                    sinks: Sequence[Any] = ()) -> TraceEvaluation:
    """Score every RAG call in an OTLP JSON trace export.

    Returns a :class:`TraceEvaluation` (one sample per call; calls that could not become a sample
    are listed in ``result.invalid`` with the reason, LLM calls without retrieval are only
    counted). ``result.trace_stats`` counts spans, traces, calls and skips. ``export="otlp"``
    also sends one evaluation carrier span per scored call to ``endpoint`` (default
    :func:`default_otlp_endpoint`); ``result.export`` then says how many went out. ``sinks`` get
    every result too (e.g. a :class:`~ragmeter.tracing.PhoenixAnnotationSink`).
    Raises ValueError when the file holds no span or no RAG call that could be scored.
    """
    from ragmeter.data import Dataset, RecordError
    from ragmeter.runner import evaluate

    if export not in (None, "otlp"):
        raise ValueError(f"unknown export {export!r} (use 'otlp')")
    spans = read_otlp_json(path)
    if not spans:
        raise ValueError(f"{path}: no spans found (expected OTLP JSON: resourceSpans -> scopeSpans -> spans)")
    samples, builds = samples_from_spans(spans)
    stats: dict[str, int] = {"spans": len(spans), "traces": len({s.context.trace_id for s in spans}),
                             "invocations": len(builds), "samples": len(samples)}
    errors = []
    for b in builds:
        if b.sample is not None:
            continue
        stats[_skip_key(b.reason)] = stats.get(_skip_key(b.reason), 0) + 1
        if b.reason == "not_rag":
            continue
        inv = b.invocation
        where = f"trace {inv.trace_id:032x} span {inv.target_id:016x}"
        errors.append(RecordError(where, _FIELDS.get(b.reason or ""), b.detail or str(b.reason)))
    if not samples:
        reasons = ", ".join(f"{k} {v}" for k, v in stats.items() if k.startswith(("skipped_", "not_rag")))
        raise ValueError(f"{path}: {len(spans)} spans, no RAG call that could be scored"
                         + (f" ({reasons})" if reasons else " (no retriever spans)"))
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
    return TraceEvaluation.of(result, stats, summary)
