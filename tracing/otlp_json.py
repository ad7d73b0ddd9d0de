"""Internal: The OTLP JSON file format: what the OpenTelemetry Collector's ``file`` exporter writes, read
into SDK spans and written from them.

JSON lines, each line one ``ExportTraceServiceRequest`` in the OTLP JSON encoding
(``resourceSpans`` -> ``scopeSpans`` -> ``spans``; trace and span ids as hex strings; 64-bit
integers as strings). A single JSON document, a JSON array of requests and gzip files (``.gz``)
are read too. Base64 ids (the plain protobuf JSON mapping) are accepted.

One bad line never loses the file: :func:`read_otlp_json` with an ``errors`` list reports a line
that is not JSON (a truncated last line from a killed collector is normal), a request or span of
the wrong shape, an id, number or text that cannot be decoded (bytes that are not UTF-8, lone
surrogates, integers over Python's digit limit) as a :class:`~ragmeter.data.RecordError` naming
the line and the span's place (``resourceSpans[0].scopeSpans[1].spans[4]``), and reads the rest.
NaN and infinities are written as the protobuf JSON mapping spells them (``"NaN"``,
``"Infinity"``), so every line is strict JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import math
import os
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.tracing", "otel", "opentelemetry"):
    from opentelemetry.attributes import BoundedAttributes
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
    from opentelemetry.trace.status import Status, StatusCode

from ragmeter.data import RecordError
from ragmeter.fileio import JSON_ERRORS, decode_text, json_problem, json_text, text_problem

__all__ = [
    "read_otlp_json",
    "iter_otlp_requests",
    "spans_from_request",
    "spans_from_message",
    "encode_otlp_json",
    "OTLPJsonFileExporter",
]

log = logging.getLogger("ragmeter")

_KINDS = {
    0: SpanKind.INTERNAL,
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_KIND_CODES = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4, SpanKind.CONSUMER: 5}
_STATUS = {
    0: StatusCode.UNSET,
    1: StatusCode.OK,
    2: StatusCode.ERROR,
    "STATUS_CODE_UNSET": StatusCode.UNSET,
    "STATUS_CODE_OK": StatusCode.OK,
    "STATUS_CODE_ERROR": StatusCode.ERROR,
}
_STATUS_CODES = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
#: What decoding a malformed request or span can raise (wrong types and shapes, bad numbers, deep nesting).
_DECODE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, RecursionError, OverflowError)


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


def _text(value: Any, what: str) -> Any:
    """``value``; a string that is not valid Unicode (a byte that is not UTF-8, kept as a lone
    surrogate by the reader, or a ``\\ud800`` escape) raises ValueError."""
    problem = text_problem(value) if isinstance(value, str) else None
    if problem:
        raise ValueError(f"{what}: {problem}")
    if isinstance(value, tuple):
        for v in value:
            _text(v, what)
    return value


def _attributes(items: Any, dropped: int = 0) -> BoundedAttributes:
    if items is not None and not isinstance(items, list):
        raise ValueError(f"attributes must be a list, got {type(items).__name__}")
    out: dict[str, Any] = {}
    for kv in items or ():
        if not isinstance(kv, Mapping) or not kv.get("key"):
            continue
        key = _text(str(kv["key"]), "an attribute key")
        value = _any_value(kv.get("value"))
        if value is not None:
            out[key] = _text(value, f"attribute {key!r}")
    attrs = BoundedAttributes(maxlen=None, attributes=out, immutable=True)
    attrs.dropped = int(dropped or 0)
    return attrs


def _nanos(v: Any) -> int | None:
    if v is None or v == "":
        return None
    return int(v)


def _list_of(obj: Mapping, keys: tuple[str, ...]) -> list:
    """The first non-empty value of ``keys`` in ``obj`` (the JSON and protobuf spellings), a list."""
    for k in keys:
        v = obj.get(k)
        if v:
            if not isinstance(v, list):
                raise ValueError(f"'{k}' must be a list, got {type(v).__name__}")
            return v
    return []


def _object(value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object, got {type(value).__name__}")
    return value


def _problem(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    if isinstance(exc, (ValueError, OverflowError)):
        return str(exc)
    return f"unexpected structure ({type(exc).__name__}: {exc})"


def spans_from_request(request: Mapping, errors: list | None = None, location: str | None = None) -> list[ReadableSpan]:
    """The spans of one ``ExportTraceServiceRequest`` (OTLP JSON) as SDK ReadableSpans.

    A resource, scope or span that cannot be decoded raises ValueError naming its place
    (``resourceSpans[0].scopeSpans[0].spans[2]``); with an ``errors`` list it is appended there as
    a :class:`~ragmeter.data.RecordError` (at ``location``) and the other spans are still read."""
    out: list[ReadableSpan] = []

    def bad(place: str, exc: BaseException) -> None:
        if errors is None:
            raise ValueError(f"{place}: {_problem(exc)}") from None
        errors.append(RecordError(location, place, _problem(exc)))

    try:
        resource_spans = _list_of(_object(request), ("resourceSpans", "resource_spans"))
    except _DECODE_ERRORS as exc:
        bad("resourceSpans", exc)
        return out
    for i, rs in enumerate(resource_spans):
        place = f"resourceSpans[{i}]"
        try:
            res = _object(_object(rs).get("resource") or {})
            resource = Resource(dict(_attributes(res.get("attributes"))), rs.get("schemaUrl") or None)
            scope_spans = _list_of(rs, ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"))
        except _DECODE_ERRORS as exc:
            bad(place, exc)
            continue
        for j, ss in enumerate(scope_spans):
            splace = f"{place}.scopeSpans[{j}]"
            try:
                sc = _object(_object(ss).get("scope") or ss.get("instrumentationLibrary") or {})
                scope = InstrumentationScope(
                    _text(sc.get("name") or "", "scope name"), sc.get("version") or None, ss.get("schemaUrl") or None
                )
                spans = _list_of(ss, ("spans",))
            except _DECODE_ERRORS as exc:
                bad(splace, exc)
                continue
            for k, sp in enumerate(spans):
                try:
                    out.append(_span(_object(sp), resource, scope))
                except _DECODE_ERRORS as exc:
                    bad(f"{splace}.spans[{k}]", exc)
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
    status = (
        Status(
            _STATUS.get(code if isinstance(code, str) else int(code or 0), StatusCode.UNSET), st.get("message") or None
        )
        if code not in (0, "STATUS_CODE_UNSET", None)
        else Status(StatusCode.UNSET)
    )
    events = [
        Event(
            ev.get("name") or "",
            _attributes(ev.get("attributes"), ev.get("droppedAttributesCount", 0)),
            _nanos(ev.get("timeUnixNano")),
        )
        for ev in sp.get("events") or ()
    ]
    links = []
    for ln in sp.get("links") or ():
        try:
            lctx = SpanContext(
                _decode_id(ln.get("traceId"), 16),
                _decode_id(ln.get("spanId"), 8),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            links.append(Link(lctx, _attributes(ln.get("attributes"))))
        except ValueError:
            continue
    return ReadableSpan(
        name=_text(sp.get("name") or "", "span name"),
        context=ctx,
        parent=parent,
        resource=resource,
        attributes=_attributes(sp.get("attributes"), sp.get("droppedAttributesCount", 0)),
        events=events,
        links=links,
        kind=_KINDS.get(kind, SpanKind.INTERNAL),
        status=status,
        start_time=_nanos(sp.get("startTimeUnixNano")),
        end_time=_nanos(sp.get("endTimeUnixNano")),
        instrumentation_scope=scope,
    )


def _gunzip(raw: bytes) -> bytes:
    """Every gzip member of ``raw`` (collectors append members); a truncated last member gives
    what it holds (its last line is then reported as truncated)."""
    out = []
    while raw:
        d = zlib.decompressobj(wbits=31)
        try:
            out.append(d.decompress(raw))
        except zlib.error as exc:
            raise ValueError(f"not a readable gzip file: {exc}") from None
        if not d.eof:
            break
        raw = d.unused_data.lstrip(b"\x00")
    return b"".join(out)


def _read_text(source: Any) -> str:
    if hasattr(source, "read"):
        data = source.read()
        return decode_text(data) if isinstance(data, bytes) else data
    path = Path(os.fspath(source))
    raw = path.read_bytes()
    if path.suffix == ".gz" or raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw)
    return decode_text(raw)


def _requests(source: Any, errors: list | None) -> Iterator[tuple[str, Mapping]]:
    """``(location, request)`` for every request in a file; a bad line raises ValueError, or with
    an ``errors`` list is appended there as a RecordError."""
    text = _read_text(source)
    if not text.strip():
        return

    def bad(where: str, message: str) -> None:
        if errors is None:
            raise ValueError(f"{where}: {message}")
        errors.append(RecordError(where, None, message))

    whole_error: BaseException | None = None
    try:
        whole = json.loads(text)
    except JSON_ERRORS as exc:
        whole, whole_error = None, exc
    if isinstance(whole, list):
        for i, item in enumerate(whole, start=1):
            if isinstance(item, Mapping):
                yield f"request {i}", item
            else:
                bad(f"request {i}", f"expected an ExportTraceServiceRequest object, got {type(item).__name__}")
        return
    if isinstance(whole, Mapping):
        yield "request 1", whole
        return
    lines = [(n, line) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]
    parsed = 0
    for n, line in lines:
        try:
            obj = json.loads(line)
        except JSON_ERRORS as exc:
            last = " (the last line: truncated when the writer stopped?)" if n == lines[-1][0] else ""
            bad(f"line {n}", f"not JSON: {json_problem(exc).removeprefix('invalid JSON: ')}{last}")
            continue
        parsed += 1
        if not isinstance(obj, Mapping):
            bad(f"line {n}", f"expected an ExportTraceServiceRequest object, got {type(obj).__name__}")
            continue
        yield f"line {n}", obj
    if not parsed and len(lines) > 1 and whole_error is not None:  # not JSON lines (a broken pretty-printed document)
        raise ValueError(f"not JSON: {json_problem(whole_error).removeprefix('invalid JSON: ')}")


def iter_otlp_requests(source: Any, errors: list | None = None) -> Iterator[Mapping]:
    """The ``ExportTraceServiceRequest`` objects in a file (path or file object): JSON lines,
    one JSON document, or a JSON array of requests (gzip files too). A line that is not a JSON
    object raises ValueError naming it; with an ``errors`` list it is appended there as a
    :class:`~ragmeter.data.RecordError` instead and the other lines are read."""
    for _, request in _requests(source, errors):
        yield request


def read_otlp_json(source: Any, errors: list | None = None) -> list[ReadableSpan]:
    """Every span of an OTLP JSON trace export (see :func:`iter_otlp_requests`), as SDK
    ReadableSpans (resource, scope, parent, attributes with their dropped count, events, links).

    A line, request or span that cannot be read raises ValueError naming it; with an ``errors``
    list each is appended there as a :class:`~ragmeter.data.RecordError` (location ``line N`` or
    ``request N``, field the span's place) and every other span is returned."""
    spans: list[ReadableSpan] = []
    for where, request in _requests(source, errors):
        try:
            spans.extend(spans_from_request(request, errors, where))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return spans


# --------------------------------------------------------------------------- encoding


def _encode_value(v: Any) -> dict:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):  # NaN and infinities as the protobuf JSON mapping spells them
        return {
            "doubleValue": v if math.isfinite(v) else "NaN" if math.isnan(v) else "Infinity" if v > 0 else "-Infinity"
        }
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
    out.update(
        {
            "flags": flags,
            "name": span.name,
            "kind": _KIND_CODES.get(span.kind, 1),
            "startTimeUnixNano": str(span.start_time or 0),
            "endTimeUnixNano": str(span.end_time or 0),
            "attributes": _encode_attrs(span.attributes),
        }
    )
    if getattr(span, "dropped_attributes", 0):
        out["droppedAttributesCount"] = span.dropped_attributes
    if span.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": _encode_attrs(e.attributes)}
            for e in span.events
        ]
    if span.links:
        out["links"] = [
            {
                "traceId": format(ln.context.trace_id, "032x"),
                "spanId": format(ln.context.span_id, "016x"),
                "attributes": _encode_attrs(ln.attributes),
            }
            for ln in span.links
        ]
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
        out.append(
            {
                "resource": {"attributes": _encode_attrs(resources[rkey].attributes)},
                "scopeSpans": [
                    {
                        "scope": {"name": name, **({"version": version} if version else {})},
                        "spans": [_encode_span(s) for s in group],
                    }
                    for (name, version), group in scopes.items()
                ],
            }
        )
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
            line = json_text(encode_otlp_json(spans))
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


def spans_from_message(message: Any, errors: list | None = None) -> list:
    """The spans of a protobuf ``ExportTraceServiceRequest``, read through its OTLP JSON mapping
    (base64 ids) by :func:`spans_from_request`."""
    from google.protobuf.json_format import MessageToDict

    return spans_from_request(MessageToDict(message), errors, "request")
