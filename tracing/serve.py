"""Internal: ``ragmeter serve``: a standalone OTLP/HTTP evaluation service.

Applications (or an OpenTelemetry Collector) export their traces to it; it scores the RAG calls in
them and exports the evaluation carrier spans to the next OTLP endpoint (Jaeger, Tempo, Phoenix).
The applications need no ragmeter install::

    ragmeter serve --otlp-port 4318 --forward http://jaeger:4318 -m faithfulness -j offline

* ``POST /v1/traces``: an ``ExportTraceServiceRequest``, protobuf (``application/x-protobuf``) or
  JSON (``application/json``), optionally gzip- or deflate-compressed, with a ``Content-Length`` or
  chunked. The spans are decoded by
  :func:`ragmeter.tracing.otlp_json.spans_from_request`; a trace whose parent spans have not
  all arrived (an exporter batch split it) is held (:class:`TraceBuffer`, at most the grace
  period), then the spans go, parents first, to a
  :class:`~ragmeter.tracing.RagmeterSpanProcessor` as ended spans: its grouping, grace period,
  TTL eviction of incomplete traces, sampling and bounded :class:`~ragmeter.inline.BackgroundScorer`
  do the rest. Answers 200 (with ``partialSuccess`` when some spans could not be read), 400 for a
  body that is not a request (or a bad ``Content-Length``, or a corrupt compressed body), 413 over
  ``max_body`` bytes (on the wire or decompressed), 415 for another content type or encoding than
  protobuf / JSON and gzip / deflate, 408 for a body not received within ``body_timeout``, 401
  without the token (when one is set), and 429 with ``Retry-After`` when the
  span inbox is full or the scoring backlog (:meth:`EvaluationService.backlog`) has reached
  :attr:`EvaluationService.high_water` (OTLP clients retry), 503 with ``Retry-After`` while
  shutting down.
* OTLP/gRPC too with ``grpc_port`` (``--otlp-grpc-port``, :mod:`ragmeter.tracing.serve_grpc`,
  needs grpcio): the Collector's loadbalancing exporter speaks gRPC only.
* Results become evaluation carriers (:class:`~ragmeter.tracing.writer.EvaluationWriter`) with the
  resource of the trace they judge (so Phoenix files them under the trace's project), exported by
  the SDK's OTLP/HTTP exporter to ``forward``; ``forward_all=True`` forwards the received spans too.
* ``GET /healthz`` (200 while the process serves), ``GET /readyz`` (200 while accepting, 503 when
  draining), ``GET /metrics`` (Prometheus text; ``?format=json`` or ``Accept: application/json``
  for JSON): received spans, scored, dropped, queue depth ... (:meth:`EvaluationService.stats`).
* :meth:`EvaluationService.shutdown` (SIGTERM in the CLI): stop accepting (readiness 503, new
  requests 503), cut the connections that are idle or still sending (a request cut in its body
  is answered 503), finish the RAG calls that have ended, wait for their scores and export the
  carriers, within ``shutdown_timeout`` seconds.

Safe to expose (:mod:`ragmeter.tracing.serve_http` has the HTTP details): it listens on
``127.0.0.1`` unless told otherwise, and refuses another address without a bearer ``token``
(``insecure=True`` overrides). With a token, ``/v1/traces`` and ``/metrics`` (and the gRPC
``Export``) answer 401 (``UNAUTHENTICATED``) without ``Authorization: Bearer <token>``;
``/healthz`` and ``/readyz`` stay open for load balancers and probes that carry no secret (they
tell nothing but up / ready). ``tls_cert`` / ``tls_key`` serve HTTPS and gRPC over TLS. The body
limit ``max_body`` holds on the wire and once decompressed (413); threads are bounded by
``workers`` (503 with ``Retry-After`` beyond them and ``waiting`` more connections), reads by the
``header_timeout``, ``body_timeout`` and ``idle_timeout`` deadlines.

Several replicas scale out behind the Collector's ``loadbalancing`` exporter with
``routing_key: traceID`` (examples/otel-collector-loadbalancing.yaml), so each trace reaches one
replica.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.tracing", "otel", "opentelemetry"):
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ragmeter.guard import never_raise
from ragmeter.tracing.offline import _CountingExporter
from ragmeter.tracing.otlp_json import spans_from_message, spans_from_request
from ragmeter.tracing.processor import RagmeterSpanProcessor
from ragmeter.tracing.serve_http import (
    BodyError,
    BoundedHTTPServer,
    HardenedHandler,
    bearer_digest,
    bearer_ok,
    content_decoder,
    is_loopback,
    read_body,
    request_framing,
    tls_context,
)
from ragmeter.tracing.settings import resolve_settings
from ragmeter.tracing.writer import EvaluationWriter, SpanTarget

__all__ = ["EvaluationService", "CarrierForwarder", "traces_endpoint", "decode_request", "prometheus_text"]

log = logging.getLogger("ragmeter")

#: Seconds a client is asked to wait (``Retry-After``) when the service is full or draining.
RETRY_AFTER = 1
#: The environment variable ``ragmeter serve`` reads its bearer token from (no ``--token``).
TOKEN_ENV = "RAGMETER_SERVE_TOKEN"
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"


def traces_endpoint(url: str) -> str:
    """The OTLP/HTTP traces URL for ``url``: ``/v1/traces`` is added to a bare base URL."""
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        return url.rstrip("/") + "/v1/traces"
    return url


def _message(body: bytes | bytearray) -> Any:
    """A protobuf ``ExportTraceServiceRequest`` parsed from ``body`` (ValueError when it is not one)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(bytes(body))  # protobuf before 5.x parses bytes only, not a bytearray
    except DecodeError as exc:
        raise ValueError(f"not an ExportTraceServiceRequest: {exc}") from None
    return message


def decode_request(body: bytes | bytearray, content_type: str, errors: list | None = None) -> list:
    """The spans (SDK ReadableSpans) of one OTLP/HTTP ``ExportTraceServiceRequest`` body,
    protobuf or JSON by ``content_type``. ValueError when the body is not such a request; spans
    that cannot be read are appended to ``errors`` (the others are returned)."""
    if content_type.split(";")[0].strip().lower() != _JSON:
        return spans_from_message(_message(body), errors)
    try:
        request = json.loads(body)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(request, dict):
        raise ValueError(f"expected an ExportTraceServiceRequest object, got {type(request).__name__}")
    return spans_from_request(request, errors, "request")


def _response(content_type: str, rejected: int = 0, message: str = "") -> tuple[bytes, str]:
    """An ``ExportTraceServiceResponse`` in the request's encoding (``partialSuccess`` when spans
    were rejected)."""
    if content_type == _JSON:
        body = {"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}} if rejected else {}
        return json.dumps(body).encode(), _JSON
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    resp = ExportTraceServiceResponse()
    if rejected:
        resp.partial_success.rejected_spans = rejected
        resp.partial_success.error_message = message
    return resp.SerializeToString(), _PROTOBUF


class TraceBuffer:
    """Holds the spans of a trace whose tree is not connected yet (a span's parent has not
    arrived: an exporter or a collector batch split the trace) and hands them to ``deliver``,
    parents first, once every parent is there (a root span, or a remote parent, ends the chain)
    or ``settle`` seconds after the trace's first held span. The grouping itself stays the
    processor's; this only keeps a RAG call's spans together. :meth:`expire` hands over what
    has waited long enough; :meth:`release_all` everything (at shutdown)."""

    def __init__(self, deliver: Any, settle: float):
        self.deliver = deliver
        self.settle = settle
        self._held: dict[int, tuple[float, list, set, set]] = {}  # trace -> (since, spans, ids, parents)
        self._lock = threading.Lock()
        self.spans = 0

    def add(self, spans: list, now: float) -> None:
        """Take the spans of one request; deliver each trace whose tree is now connected."""
        by_trace: dict[int, list] = {}
        for span in spans:
            by_trace.setdefault(span.context.trace_id, []).append(span)
        ready: list = []
        with self._lock:
            for tid, group in by_trace.items():
                since, held, ids, parents = self._held.pop(tid) if tid in self._held else (now, [], set(), set())
                held.extend(group)
                self.spans += len(group)
                ids.update(sp.context.span_id for sp in group)
                parents.update(
                    sp.parent.span_id
                    for sp in group
                    if sp.parent is not None and sp.parent.span_id and not sp.parent.is_remote
                )
                if parents <= ids:
                    ready.extend(held)
                    self.spans -= len(held)
                else:
                    self._held[tid] = (since, held, ids, parents)
        if ready:
            self.deliver(ready)

    def expire(self, now: float) -> None:
        """Deliver the traces held for ``settle`` seconds or more."""
        ready: list = []
        with self._lock:
            for tid in [t for t, (since, *_rest) in self._held.items() if now - since >= self.settle]:
                held = self._held.pop(tid)[1]
                ready.extend(held)
                self.spans -= len(held)
        if ready:
            self.deliver(ready)

    def release_all(self) -> None:
        """Deliver every held trace."""
        self.expire(float("inf"))

    @property
    def traces(self) -> int:
        """Traces held now."""
        return len(self._held)


class CarrierForwarder:
    """A result sink of the processor: writes each evaluation carrier with the resource of the
    trace it judges (remembered from the received spans, at most ``max_traces`` traces) and
    exports it over OTLP/HTTP to ``endpoint`` through a BatchSpanProcessor."""

    def __init__(self, endpoint: str, max_traces: int = 10_000, max_queue: int = 20_000):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.endpoint = endpoint
        self.exporter = _CountingExporter(OTLPSpanExporter(endpoint=endpoint))
        self.batch = BatchSpanProcessor(self.exporter, max_queue_size=max_queue, schedule_delay_millis=200)
        self.max_traces = max_traces
        self._resources: dict[int, Resource] = {}
        self._writers: dict[Any, EvaluationWriter] = {}
        self._lock = threading.Lock()
        self.written = 0

    def remember(self, spans: Iterable[Any]) -> None:
        """Note the resource of each span's trace (the oldest traces are forgotten first)."""
        with self._lock:
            res = self._resources
            for span in spans:
                res[span.context.trace_id] = span.resource
            while len(res) > self.max_traces:
                del res[next(iter(res))]

    def _writer(self, resource: Resource | None) -> EvaluationWriter:
        key = tuple(sorted((resource.attributes if resource is not None else {}).items()))
        with self._lock:
            writer = self._writers.get(key)
            if writer is None:
                if len(self._writers) >= 256:  # many services: forget the oldest writer (not its exporter)
                    del self._writers[next(iter(self._writers))]
                provider = TracerProvider(resource=resource or Resource({}), shutdown_on_exit=False)
                provider.add_span_processor(self.batch)
                writer = self._writers[key] = EvaluationWriter(provider)
            return writer

    def write(self, result: Any, target: SpanTarget, parent: SpanTarget | None = None) -> None:
        """Write and queue the carrier for ``result`` (never raises)."""
        with self._lock:
            resource = self._resources.get(target.trace_id)
        if self._writer(resource).write(result, target, parent):
            with self._lock:
                self.written += 1

    def flush(self, timeout: float) -> bool:
        """Export the queued carriers within ``timeout`` seconds."""
        return self.batch.force_flush(int(max(0.0, timeout) * 1000))

    def shutdown(self) -> None:
        """Export what is queued and stop the exporter."""
        self.batch.shutdown()


_METRICS = (  # (stats key, Prometheus type, help)
    ("requests", "counter", "export requests received"),
    ("requests_rejected", "counter", "export requests answered 429 or 503 (full or draining)"),
    (
        "requests_invalid",
        "counter",
        "requests answered 400, 413, 415 or 431 (bad length, size, encoding, body or head)",
    ),
    ("requests_unauthorized", "counter", "requests answered 401 (no or a wrong bearer token)"),
    ("requests_timed_out", "counter", "connections cut at the header, body or TLS handshake deadline"),
    (
        "connections_refused",
        "counter",
        "connections answered 503: every worker and waiting place taken, or max connections open and none idle",
    ),
    ("connections_evicted", "counter", "idle connections closed to make room for a new one (max connections)"),
    ("connections_open", "gauge", "connections held by the workers or waiting for one"),
    ("spans_received", "counter", "spans received"),
    ("spans_unreadable", "counter", "spans that could not be decoded"),
    ("spans_dropped", "counter", "spans dropped because the inbox was full"),
    ("spans_forwarded", "counter", "received spans exported to the forward endpoint (--forward-all)"),
    ("traces", "counter", "traces seen"),
    ("traces_tracked", "gauge", "traces held in memory now"),
    ("evicted_traces", "counter", "traces evicted after the TTL (or beyond max traces)"),
    ("evicted_incomplete", "counter", "RAG calls evicted before they ended"),
    ("invocations", "counter", "RAG calls found"),
    ("skipped", "counter", "RAG calls skipped (no contexts, answer or question)"),
    ("samples_queued", "counter", "samples queued for scoring"),
    ("samples_scored", "counter", "samples scored"),
    ("samples_dropped", "counter", "samples dropped (scoring queue full, or given up at shutdown)"),
    ("samples_failed", "counter", "samples whose scoring raised"),
    ("queue_depth", "gauge", "samples waiting for or being scored"),
    ("held_traces", "gauge", "traces held until their parent spans arrive"),
    ("held_spans", "gauge", "spans of the held traces"),
    ("inbox_spans", "gauge", "received spans not yet grouped"),
    ("carriers_written", "counter", "evaluation carrier spans written"),
    ("carriers_exported", "counter", "evaluation carrier spans exported"),
    ("carriers_export_failed", "counter", "evaluation carrier spans that could not be exported"),
)


def prometheus_text(stats: dict[str, Any]) -> str:
    """``stats`` in the Prometheus text exposition format (``ragmeter_serve_*``)."""
    lines = []
    for key, kind, text in _METRICS:
        name = f"ragmeter_serve_{key}" + ("_total" if kind == "counter" else "")
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name} {int(stats.get(key, 0))}"]
    return "\n".join(lines) + "\n"


class EvaluationService:
    """The OTLP evaluation service (see the module docstring).

    ``metrics`` / ``judge`` / ``embedder``: as for :func:`ragmeter.evaluate`. ``host`` / ``port``
    (0: a free port, see :attr:`port`); ``grpc_port``: also receive OTLP/gRPC there (None: off;
    needs grpcio), e.g. for the Collector's loadbalancing exporter, which speaks gRPC only.
    ``forward``: OTLP/HTTP base or traces URL for the carriers
    (None: scores are only counted and kept in :attr:`results`); ``forward_all``: forward the
    received spans too. ``max_body``: largest request body in bytes, on the wire and decompressed.
    ``token``: the bearer token every request but the health checks must carry (None: none; then
    a ``host`` that is not a loopback address is refused unless ``insecure``). ``tls_cert`` /
    ``tls_key``: PEM files to serve HTTPS (and gRPC over TLS). ``workers``: requests served at
    once (8 times as many more may wait, holding only their headers; beyond them 503); ``max_connections``: connections open at once
    (idle ones included; beyond them the longest-idle is closed, or 503 when none is idle);
    ``header_timeout`` / ``body_timeout`` /
    ``idle_timeout``: seconds for the request line and headers, for the body, and between the
    requests of a kept-alive connection. ``sample_rate``, ``max_queue``, ``concurrency``,
    ``grace_period``, ``ttl``, ``max_buffered_spans``, ``max_traces``, ``shutdown_timeout``: the
    processor's settings (None: its ``RAGMETER_*`` environment variable, else its default).
    ``sinks``: more result sinks (Phoenix, Langfuse, evaluation log records:
    :mod:`ragmeter.tracing.sinks`; those with ``remember(spans)`` are told about every received
    span); ``id_keys``: the processor's. :meth:`start` binds and serves in a thread.
    """

    def __init__(
        self,
        metrics: Iterable[Any] | None = None,
        judge: Any = None,
        *,
        embedder: Any = None,
        host: str = "127.0.0.1",
        port: int = 4318,
        grpc_port: int | None = None,
        forward: str | None = None,
        forward_all: bool = False,
        max_body: int = 32 * 1024 * 1024,
        token: str | None = None,
        insecure: bool = False,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        workers: int = 16,
        max_connections: int = 1000,
        header_timeout: float = 10.0,
        body_timeout: float = 30.0,
        idle_timeout: float = 30.0,
        sample_rate: float | None = None,
        max_queue: int | None = None,
        concurrency: int | None = None,
        grace_period: float | None = None,
        ttl: float | None = None,
        max_buffered_spans: int | None = None,
        max_traces: int | None = None,
        shutdown_timeout: float | None = None,
        sinks: Sequence[Any] = (),
        id_keys: Sequence[str] | None = None,
    ):
        if forward_all and not forward:
            raise ValueError("forward_all needs a forward endpoint")
        if token is not None and not token.strip():
            raise ValueError("the token is empty")
        if token is None and not insecure and not is_loopback(host):
            raise ValueError(
                f"refusing to listen on {host or 'every interface'!r} without a token (anyone who "
                f"can reach it could send traces and read /metrics); set one (--token-file, "
                f"${TOKEN_ENV}) or allow it explicitly (--insecure)"
            )
        if max_body < 1:
            raise ValueError(f"max_body must be at least 1 byte, got {max_body}")
        if tls_key is not None and tls_cert is None:
            raise ValueError("tls_key needs tls_cert")
        self.forward = traces_endpoint(forward) if forward else None
        self.max_body = max_body
        self._token_digest = bearer_digest(token.strip()) if token is not None else None
        self.tls_cert, self.tls_key = tls_cert, tls_key
        tls = tls_context(tls_cert, tls_key) if tls_cert else None
        self.workers = workers
        traces = resolve_settings(max_traces=max_traces)["max_traces"]
        self.carriers = CarrierForwarder(self.forward, traces) if self.forward else None
        self.processor = RagmeterSpanProcessor(
            metrics,
            judge,
            embedder=embedder,
            write_spans=False,
            sinks=([self.carriers] if self.carriers else []) + list(sinks),
            id_keys=id_keys,
            sample_rate=sample_rate,
            max_queue=max_queue,
            concurrency=concurrency,
            grace_period=grace_period,
            ttl=ttl,
            max_buffered_spans=max_buffered_spans,
            max_traces=max_traces,
            shutdown_timeout=shutdown_timeout,
        )
        self._remembering = [s for s in self.processor.sinks if callable(getattr(s, "remember", None))]
        self.forwarder: BatchSpanProcessor | None = None
        self._forward_counter: _CountingExporter | None = None
        if forward_all:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self._forward_counter = _CountingExporter(OTLPSpanExporter(endpoint=self.forward))
            self.forwarder = BatchSpanProcessor(
                self._forward_counter,
                max_queue_size=self.processor.max_buffered_spans,
                max_export_batch_size=512,
                schedule_delay_millis=200,
            )
        self.buffer = TraceBuffer(self._deliver, min(self.processor.grace_period, self.processor.ttl))
        self._stop = threading.Event()
        self._expirer = threading.Thread(target=self._expire_loop, name="ragmeter-serve-buffer", daemon=True)
        #: Samples waiting for the scorer from which requests get 429: three quarters of ``max_queue``, the
        #: rest takes the samples of the requests already accepted (beyond it they would be dropped).
        self.high_water = max(1, self.processor.scorer.max_queue * 3 // 4)
        self._counts = {
            "requests": 0,
            "requests_rejected": 0,
            "requests_invalid": 0,
            "requests_unauthorized": 0,
            "requests_timed_out": 0,
            "connections_refused": 0,
            "connections_evicted": 0,
            "spans_received": 0,
            "spans_unreadable": 0,
        }
        self._lock = threading.Lock()
        self._draining = False
        self._server = BoundedHTTPServer(
            (host, port),
            _handler_for(self),
            workers=workers,
            waiting=8 * workers,
            max_connections=max_connections,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            idle_timeout=idle_timeout,
            retry_after=RETRY_AFTER,
            tls=tls,
            note=self.count,
        )
        #: Requests that may wait for a worker (beyond them and the workers: 503).
        self.waiting = self._server.waiting
        self._grpc, self._grpc_port = None, None
        if grpc_port is not None:
            from ragmeter.tracing.serve_grpc import grpc_server

            self._grpc, self._grpc_port = grpc_server(self, host, grpc_port)
        self._thread: threading.Thread | None = None
        self._stopped = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def port(self) -> int:
        """The port the service listens on."""
        return self._server.server_address[1]

    @property
    def grpc_port(self) -> int | None:
        """The OTLP/gRPC port (None: no gRPC receiver)."""
        return self._grpc_port

    @property
    def url(self) -> str:
        """``http://host:port`` (``https://`` with TLS) of the service."""
        host = str(self._server.server_address[0])  # (a TCP server's: a str)
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "[::1]"}.get(host, f"[{host}]" if ":" in host else host)
        return f"{'https' if self._server.tls else 'http'}://{host}:{self.port}"

    @property
    def secured(self) -> bool:
        """Whether requests must carry the bearer token."""
        return self._token_digest is not None

    def authorized(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` value carries the token (always, when no token is set)."""
        return self._token_digest is None or bearer_ok(authorization, self._token_digest)

    @property
    def ready(self) -> bool:
        """Accepting export requests (not draining)."""
        return not self._draining

    @property
    def results(self) -> Any:
        """The recent results (a deque of :class:`ragmeter.SampleResult`)."""
        return self.processor.results

    def start(self) -> EvaluationService:
        """Serve HTTP on a background thread; returns self."""
        self._thread = self._server.start(0.05)  # the accepting thread polls for shutdown every 50 ms
        if self._grpc is not None:
            self._grpc.start()
        self._expirer.start()
        return self

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting (readiness and new requests answer 503), let requests in progress end,
        finish the RAG calls that ended, wait for their scores and export the carriers (and the
        forwarded spans) within ``timeout`` seconds (default: ``shutdown_timeout``). True when
        nothing pending was given up."""
        if self._stopped:
            return True
        self._stopped = True
        self._draining = True
        timeout = self.processor.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        self._server.stop()  # no new connections; idle ones and bodies still coming are cut
        if self._grpc is not None:
            self._grpc.stop(max(0.0, deadline - time.monotonic())).wait()
        while self._server.busy() and time.monotonic() < deadline:  # requests being answered
            time.sleep(0.01)
        self._stop.set()
        self.buffer.release_all()
        self.processor.shutdown_timeout = max(0.0, deadline - time.monotonic())
        before = self.processor.stats["dropped"]
        self.processor.shutdown()  # scores what ended, flushes and shuts down the carrier forwarder
        if self.forwarder is not None:
            self.forwarder.force_flush(int(max(0.0, deadline - time.monotonic()) * 1000))
            self.forwarder.shutdown()
        self._server.close(min(1.0, max(0.0, deadline - time.monotonic())))
        self._server.server_close()
        return self.processor.stats["dropped"] == before

    # ------------------------------------------------------------------ state

    def stats(self) -> dict[str, int]:
        """The service's counters (the keys of the ``/metrics`` endpoint) plus the processor's
        (:attr:`RagmeterSpanProcessor.stats`)."""
        p = self.processor.stats
        with self._lock:
            out = dict(self._counts)
        out["connections_open"] = sum(self._server.states().values())
        out.update({f"processor_{k}": v for k, v in p.items()})
        out.update(
            spans_dropped=p["spans_dropped"],
            traces=p["traces"],
            traces_tracked=p["traces_tracked"],
            evicted_traces=p["evicted_traces"],
            evicted_incomplete=p["evicted_incomplete"],
            invocations=p["invocations"],
            skipped=sum(v for k, v in p.items() if k.startswith("skipped_")),
            samples_queued=p["queued"],
            samples_scored=p["scored"],
            samples_dropped=p["dropped"] + p["rejected_closed"],
            samples_failed=p["failed"],
            queue_depth=p["pending"],
            inbox_spans=self._inbox_len(),
            held_spans=self.buffer.spans,
            held_traces=self.buffer.traces,
            carriers_written=self.carriers.written if self.carriers else 0,
            carriers_exported=self.carriers.exporter.exported if self.carriers else 0,
            carriers_export_failed=self.carriers.exporter.failed if self.carriers else 0,
            spans_forwarded=self._forward_counter.exported if self._forward_counter else 0,
        )
        return out

    def _inbox_len(self) -> int:
        return len(self.processor._inbox)  # the processor's span inbox (a deque): its length is the backlog

    def count(self, key: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``key``."""
        with self._lock:
            self._counts[key] += n

    # ------------------------------------------------------------------ requests

    def full(self) -> str | None:
        """Why an export request would be refused now (None: accepted)."""
        if self._draining:
            return "shutting down"
        if self._inbox_len() + self.buffer.spans >= self.processor.max_buffered_spans:
            return "span inbox full"
        if self.backlog() >= self.high_water:
            return "scoring queue full"
        return None

    def backlog(self) -> float:
        """Samples waiting for the scorer, plus those the spans not yet grouped are expected to
        hold (at the ratio of samples to spans seen so far)."""
        p = self.processor.stats
        with self._lock:
            received = self._counts["spans_received"]
        ratio = p["samples_submitted"] / received if received else 0.0
        return p["pending"] + (self._inbox_len() + self.buffer.spans) * ratio

    def receive(self, body: bytes | bytearray, content_type: str) -> tuple[int, int, str]:
        """Accept one request body: ``(spans accepted, spans rejected, first problem)``.
        ValueError when the body is not a request."""
        errors: list = []
        return self.accept(decode_request(body, content_type, errors), errors)

    def accept(self, spans: list, errors: list) -> tuple[int, int, str]:
        """Take decoded spans (into the :class:`TraceBuffer`, which hands connected traces to the
        processor): ``(accepted, rejected, first problem)`` where ``errors`` are the spans that
        could not be read."""
        self.count("spans_received", len(spans))
        if errors:
            self.count("spans_unreadable", len(errors))
        for sink in self._remembering:  # the carrier forwarder, a log sink: each trace's resource
            sink.remember(spans)
        if self.forwarder is not None:
            for span in spans:
                self.forwarder.on_end(span)
        self.buffer.add(spans, time.monotonic())
        return len(spans), len(errors), str(errors[0]) if errors else ""

    def _deliver(self, spans: list) -> None:
        # parents first (they start before their children): the processor then finds each RAG
        # span's entry among the spans it already holds, as it does live (where starts come first)
        spans.sort(key=lambda sp: sp.start_time or 0)
        for span in spans:
            self.processor.on_end(span)

    def _expire_loop(self) -> None:
        while not self._stop.wait(max(0.01, min(self.buffer.settle / 4, 0.25))):
            with never_raise("serve: hand over held traces"):
                self.buffer.expire(time.monotonic())


def _handler_for(service: EvaluationService) -> type:
    class Handler(_Handler):
        pass

    Handler.service = service
    return Handler


class _Handler(HardenedHandler):
    """OTLP/HTTP receiver plus health, readiness and metrics endpoints."""

    service: EvaluationService

    def _unauthorized(self) -> tuple[int, bytes, dict[str, str]]:
        self.service.count("requests_unauthorized")
        error = ', error="invalid_token"' if self.headers.get("Authorization") else ""
        return (
            401,
            b"unauthorized: send Authorization: Bearer <token>\n",
            {"WWW-Authenticate": f'Bearer realm="ragmeter serve"{error}'},
        )

    def do_GET(self) -> None:
        """Health and readiness (open), metrics (token)."""
        self.begin_work()
        svc = self.service
        # a GET with a body (never read) ends the connection
        early = bool(self.headers.get("Transfer-Encoding")) or self.headers.get("Content-Length", "0").strip() != "0"
        path, _, query = self.path.partition("?")
        if path == "/healthz":
            self.send(200, b"ok\n", early=early)
        elif path == "/readyz":
            self.send(200, b"ready\n", early=early) if svc.ready else self.send(503, b"draining\n", early=early)
        elif not svc.authorized(self.headers.get("Authorization")):
            status, text, headers = self._unauthorized()
            self.send(status, text, headers, early=early)
        elif path == "/metrics":
            stats = svc.stats()
            if "format=json" in query or _JSON in (self.headers.get("Accept") or ""):
                self.send(200, json.dumps(stats, sort_keys=True).encode(), content_type=_JSON, early=early)
            else:
                self.send(
                    200,
                    prometheus_text(stats).encode(),
                    content_type="text/plain; version=0.0.4; charset=utf-8",
                    early=early,
                )
        else:
            self.send(404, b"not found\n", early=early)

    def refusal(self) -> tuple[int, bytes, dict[str, str]] | None:
        """Why this export request is refused before its body is read (None: it is read): 401,
        404, 400 / 413 / 501 (its length), 415 (its type or encoding), 429 / 503 (full, draining)."""
        svc = self.service
        if self.command != "POST":
            return None
        if not svc.authorized(self.headers.get("Authorization")):
            return self._unauthorized()
        if self.path.partition("?")[0] != "/v1/traces":
            return 404, b"not found\n", {}
        svc.count("requests")
        try:
            self._length = request_framing(self.headers, svc.max_body)
            self._decoder = content_decoder(self.headers.get("Content-Encoding"), svc.max_body)
        except BodyError as exc:
            svc.count("requests_invalid")
            return exc.status, f"{exc}\n".encode(), {}
        self._ctype = (self.headers.get("Content-Type") or _PROTOBUF).split(";")[0].strip().lower()
        if self._ctype not in (_PROTOBUF, _JSON):
            svc.count("requests_invalid")
            return 415, f"unsupported content type {self._ctype[:60]!r}\n".encode(), {}
        reason = svc.full()
        if reason is not None:
            svc.count("requests_rejected")
            return 503 if svc._draining else 429, (reason + "\n").encode(), {"Retry-After": str(RETRY_AFTER)}
        return None

    def do_POST(self) -> None:
        """``/v1/traces``: an OTLP/HTTP export request."""
        refusal = None if self.checked else self.refusal()
        if refusal is not None:
            self.send(*refusal, early=True)
            return
        svc = self.service
        self.begin_body()
        try:
            body = read_body(self.rfile, self._length, self._decoder)
        except BodyError as exc:
            if svc._draining:  # cut by the shutdown
                self.send(503, b"shutting down\n", {"Retry-After": str(RETRY_AFTER)}, early=True)
            else:
                svc.count("requests_invalid")
                self.send(exc.status, f"{exc}\n".encode(), early=True)
            return
        except TimeoutError:
            self.send(408, b"body not received in time\n", early=True)
            return
        self.begin_work()
        with never_raise("serve: an export request", on_error=lambda exc: self._fail()):
            try:
                _, rejected, problem = svc.receive(body, self._ctype)
            except (ValueError, RecursionError) as exc:
                svc.count("requests_invalid")
                self.send(400, f"{str(exc)[:500] or 'nested too deeply'}\n".encode())
                return
            payload, rtype = _response(self._ctype, rejected, problem)
            self.send(200, payload, content_type=rtype)

    def _fail(self) -> None:
        with never_raise("serve: answer 500"):
            self.send(500, b"internal error\n")
