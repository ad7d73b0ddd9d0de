"""``ragmeter serve``: the real OTLP/HTTP exporter of the OpenTelemetry SDK sends the spans of a
RAG app to the service on 127.0.0.1; the service forwards the evaluation carriers to a local OTLP
receiver (an HTTP server here that decodes the protobuf request with opentelemetry-proto)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helpers import ROOT, wait_for
from helpers.process import free_port
from helpers.tracing import (
    AnswerOverlap,
    ContextCount,
    GatedMetric,
    OTLPReceiver,
    genai_rag,
    instrumented,
    langchain_chain,
    oi_rag,
)
from ragmeter.tracing.otlp_json import encode_otlp_json
from ragmeter.tracing.serve import EvaluationService, decode_request, traces_endpoint


def _attr(kv) -> object:
    v = kv.value
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


class Receiver(OTLPReceiver):
    """A local OTLP/HTTP traces receiver whose spans are read as dicts."""

    @property
    def spans(self) -> list[dict]:
        """Every span received, as a dict of its ids, resource, attributes, links and events."""
        out = []
        for resource, sp in self.resource_spans():
            out.append(
                {
                    "name": sp.name,
                    "trace_id": sp.trace_id.hex(),
                    "span_id": sp.span_id.hex(),
                    "parent_id": sp.parent_span_id.hex(),
                    "resource": {kv.key: _attr(kv) for kv in resource.attributes},
                    "attributes": {kv.key: _attr(kv) for kv in sp.attributes},
                    "links": [(ln.trace_id.hex(), ln.span_id.hex()) for ln in sp.links],
                    "events": [ev.name for ev in sp.events],
                }
            )
        return out

    def carriers(self) -> list[dict]:
        """The evaluation carriers received."""
        return [s for s in self.spans if s["attributes"].get("ragmeter.carrier")]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def make_service(receiver):
    made = []

    def make(metrics=None, **kw):
        kw.setdefault("grace_period", 0.2)
        svc = EvaluationService(
            metrics if metrics is not None else [ContextCount(), AnswerOverlap()],
            host="127.0.0.1",
            port=0,
            forward=receiver.url,
            **kw,
        ).start()
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.shutdown(5)


def _app_provider(svc, **resource):
    """An app's provider: spans to memory (to know the ids) and over OTLP/HTTP to the service."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "rag-app", **resource}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=svc.url + "/v1/traces")))
    return provider, memory


def _post(url: str, body: bytes, ctype: str):
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _oi_json(n: int = 1) -> tuple[bytes, list]:
    """``n`` hand-built OpenInference RAG traces as an OTLP JSON request body, and their spans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "json-app"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for _ in range(n):
        oi_rag(provider)
    spans = memory.get_finished_spans()
    return json.dumps(encode_otlp_json(spans)).encode(), spans


@pytest.mark.slow
def test_langchain_app_over_otlp_protobuf_is_scored_and_carriers_forwarded(make_service, receiver):
    from openinference.instrumentation.langchain import LangChainInstrumentor

    svc = make_service()
    provider, memory = _app_provider(svc)
    with instrumented(LangChainInstrumentor, provider):
        answer = langchain_chain().invoke("What is the capital of France?")
    assert answer == "Paris is the capital of France [1]."
    assert provider.force_flush(10_000)
    assert wait_for(lambda: receiver.carriers(), timeout=10), svc.stats()
    [carrier] = receiver.carriers()
    spans = memory.get_finished_spans()
    root = next(s for s in spans if s.parent is None)
    a = carrier["attributes"]
    assert carrier["trace_id"] == format(root.context.trace_id, "032x")
    assert carrier["parent_id"] == format(root.context.span_id, "016x")
    assert a["ragmeter.target.span_id"] == format(root.context.span_id, "016x")
    assert carrier["links"] == [(carrier["trace_id"], a["ragmeter.target.span_id"])]
    # three of the four KB documents share a word of five letters or more with the question: 3 / 4
    assert a["ragmeter.context_count.score"] == 0.75 and a["ragmeter.answer_overlap.score"] == 1.0
    assert carrier["events"].count("gen_ai.evaluation.result") == 2
    assert carrier["resource"]["service.name"] == "rag-app"  # filed with the app's trace
    # the exporter counts a carrier once the receiver has answered, so the count may trail the receipt
    assert wait_for(lambda: svc.stats()["carriers_exported"] == 1, timeout=10), svc.stats()
    st = svc.stats()
    assert st["spans_received"] == len(spans) and st["samples_scored"] == 1
    assert not any(s["name"] != "ragmeter.evaluation" for s in receiver.spans)  # originals not forwarded
    provider.shutdown()


def test_a_trace_split_over_requests_is_held_until_its_parents_arrive(make_service, receiver):
    """One span per request (SimpleSpanProcessor): the children wait for their parents, and the
    call is judged on its entry span, as with the whole trace in one request."""
    from openinference.instrumentation.langchain import LangChainInstrumentor

    svc = make_service(grace_period=30.0)
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "rag-app"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=svc.url + "/v1/traces")))
    with instrumented(LangChainInstrumentor, provider):
        with provider.get_tracer("app").start_as_current_span("POST /ask"):
            langchain_chain().invoke("What is the capital of France?")
            assert svc.stats()["held_traces"] == 1 and receiver.carriers() == []
    assert wait_for(lambda: receiver.carriers(), timeout=10), svc.stats()
    [carrier] = receiver.carriers()
    entry = next(
        s
        for s in memory.get_finished_spans()
        if s.name == "RunnableSequence"
        and s.parent
        and next(p for p in memory.get_finished_spans() if p.context.span_id == s.parent.span_id).name == "POST /ask"
    )
    assert carrier["attributes"]["ragmeter.target.span_id"] == format(entry.context.span_id, "016x")
    assert carrier["attributes"]["ragmeter.context_count.score"] == 0.75
    assert svc.stats()["held_traces"] == 0 and svc.stats()["requests"] == 10
    provider.shutdown()


def test_json_requests_are_accepted_and_answered_in_json(make_service, receiver):
    svc = make_service()
    body, spans = _oi_json()
    status, headers, payload = _post(svc.url + "/v1/traces", body, "application/json")
    assert status == 200 and headers["Content-Type"] == "application/json" and json.loads(payload) == {}
    assert wait_for(lambda: receiver.carriers(), timeout=10)
    [carrier] = receiver.carriers()
    chain = next(s for s in spans if s.name == "rag")
    assert carrier["attributes"]["ragmeter.target.span_id"] == format(chain.context.span_id, "016x")
    # two contexts: 2 / 4; every answer word is in them
    assert carrier["attributes"]["ragmeter.context_count.score"] == 0.5
    assert carrier["resource"]["service.name"] == "json-app"


def test_protobuf_and_json_decode_to_the_same_spans():
    body, spans = _oi_json()
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    pb = decode_request(encode_spans(spans).SerializeToString(), "application/x-protobuf")
    js = decode_request(body, "application/json")

    def key(s):
        return (
            s.context.trace_id,
            s.context.span_id,
            s.parent.span_id if s.parent else 0,
            s.name,
            dict(s.attributes),
            s.instrumentation_scope.name,
            s.start_time,
            s.end_time,
        )

    assert sorted(map(key, pb)) == sorted(map(key, js)) and len(pb) == 3


def test_bad_bodies_are_400_and_partial_spans_reported(make_service):
    svc = make_service()
    assert _post(svc.url + "/v1/traces", b"\xff\x00garbage", "application/x-protobuf")[0] == 400
    assert _post(svc.url + "/v1/traces", b"{not json", "application/json")[0] == 400
    assert _post(svc.url + "/v1/traces", b"{}", "text/plain")[0] == 415
    bad = {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "no ids"}]}]}]}
    status, _, payload = _post(svc.url + "/v1/traces", json.dumps(bad).encode(), "application/json")
    assert status == 200 and json.loads(payload)["partialSuccess"]["rejectedSpans"] == "1"
    assert svc.stats()["requests_invalid"] == 3 and svc.stats()["spans_unreadable"] == 1


def test_full_queue_answers_429_with_retry_after(make_service, receiver):
    gate = threading.Event()
    svc = make_service([GatedMetric(gate)], max_queue=1, concurrency=1)
    body, _ = _oi_json()
    assert _post(svc.url + "/v1/traces", body, "application/json")[0] == 200
    assert wait_for(lambda: svc.stats()["queue_depth"] == 1, timeout=10)
    status, headers, _ = _post(svc.url + "/v1/traces", _oi_json()[0], "application/json")
    assert status == 429 and headers["Retry-After"] == "1"
    # the SDK exporter treats 429 as retryable and gives up once its timeout passes
    exporter = OTLPSpanExporter(endpoint=svc.url + "/v1/traces", timeout=1)
    from opentelemetry.sdk.trace.export import SpanExportResult

    assert exporter.export(_oi_json()[1]) == SpanExportResult.FAILURE
    assert svc.stats()["requests_rejected"] >= 2
    gate.set()
    assert wait_for(lambda: svc.stats()["queue_depth"] == 0, timeout=10)
    assert _post(svc.url + "/v1/traces", _oi_json()[0], "application/json")[0] == 200
    assert wait_for(lambda: len(receiver.carriers()) == 2, timeout=10)
    _, text = _get(svc.url + "/metrics")
    assert "ragmeter_serve_requests_rejected_total" in text


@pytest.mark.slow
def test_incomplete_traces_expire(make_service, receiver):
    svc = make_service(grace_period=60.0, ttl=0.3)
    memory = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    oi_rag(provider)
    retriever = [s for s in memory.get_finished_spans() if s.name == "retrieve"]  # the chain and LLM never come
    status, _, _ = _post(svc.url + "/v1/traces", json.dumps(encode_otlp_json(retriever)).encode(), "application/json")
    assert status == 200
    assert wait_for(lambda: svc.stats()["traces_tracked"] == 1, timeout=5)
    assert wait_for(lambda: svc.stats()["evicted_traces"] == 1, timeout=10), svc.stats()
    st = svc.stats()
    assert st["traces_tracked"] == 0 and st["evicted_incomplete"] == 1 and st["samples_scored"] == 0
    assert receiver.carriers() == []


def test_health_readiness_metrics_and_forward_all(make_service, receiver):
    svc = make_service(forward_all=True)
    assert _get(svc.url + "/healthz") == (200, "ok\n")
    assert _get(svc.url + "/readyz") == (200, "ready\n")
    body, _ = _oi_json()
    assert _post(svc.url + "/v1/traces", body, "application/json")[0] == 200
    assert wait_for(lambda: len(receiver.spans) == 4, timeout=10), receiver.spans
    assert sorted(s["name"] for s in receiver.spans) == ["llm", "rag", "ragmeter.evaluation", "retrieve"]
    status, text = _get(svc.url + "/metrics")
    assert status == 200
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    assert lines["ragmeter_serve_spans_received_total"] == "3"
    assert lines["ragmeter_serve_samples_scored_total"] == "1"
    assert lines["ragmeter_serve_queue_depth"] == "0"

    def exported():
        js = json.loads(_get(svc.url + "/metrics?format=json")[1])
        return js["spans_forwarded"] == 3 and js["carriers_exported"] == 1  # counted once the export returned

    assert wait_for(exported, timeout=5)
    assert _get(svc.url + "/nothing")[0] == 404
    assert traces_endpoint("http://jaeger:4318") == "http://jaeger:4318/v1/traces"
    assert traces_endpoint("http://x:1/otlp/v1/traces") == "http://x:1/otlp/v1/traces"


def test_shutdown_scores_what_is_pending_and_refuses_new_work(make_service, receiver):
    svc = make_service(grace_period=60.0)
    provider = TracerProvider(shutdown_on_exit=False)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("app").start_as_current_span("rag"):
        genai_rag(provider.get_tracer("app"))
    leaves = [s for s in memory.get_finished_spans() if s.name != "rag"]  # the parent never arrives
    assert _post(svc.url + "/v1/traces", json.dumps(encode_otlp_json(leaves)).encode(), "application/json")[0] == 200
    assert svc.stats()["held_traces"] == 1  # its parent may still come, for up to the grace period
    time.sleep(0.1)
    assert receiver.carriers() == []
    assert svc.shutdown(10)
    [carrier] = receiver.carriers()
    assert carrier["attributes"]["ragmeter.context_count.score"] == 0.5
    assert not svc.ready
    with pytest.raises(OSError):
        urllib.request.urlopen(svc.url + "/healthz", timeout=2)


@pytest.mark.slow
def test_cli_serve_drains_on_sigterm(receiver):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragmeter.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--otlp-port",
            str(port),
            "--forward",
            receiver.url,
            "-m",
            "hallucinated_specifics",
            "--grace-period",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        url = f"http://127.0.0.1:{port}"

        def up():
            try:
                return _get(url + "/readyz")[0] == 200
            except OSError:
                return False

        assert wait_for(up, timeout=30)
        provider = TracerProvider(shutdown_on_exit=False)
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        with provider.get_tracer("app").start_as_current_span("rag"):
            genai_rag(provider.get_tracer("app"))
        leaves = [s for s in memory.get_finished_spans() if s.name != "rag"]
        exporter = OTLPSpanExporter(endpoint=url + "/v1/traces")
        from opentelemetry.sdk.trace.export import SpanExportResult

        assert exporter.export(leaves) == SpanExportResult.SUCCESS
        time.sleep(0.2)
        assert receiver.carriers() == []
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)  # not the 60 s grace period: it ends once the sample is scored
        assert proc.returncode == 0, out
        [carrier] = receiver.carriers()
        assert "ragmeter.hallucinated_specifics.score" in carrier["attributes"], carrier["attributes"]
        assert "2 spans received, 1 samples scored, 0 dropped, 1 evaluation spans exported" in out, out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_load_reports_throughput_and_memory():
    sys.path.insert(0, os.path.join(str(ROOT), "benchmarks"))
    try:
        import serve_load
    finally:
        sys.path.pop(0)
    report = serve_load.run(duration=3.0, senders=2, traces_per_request=20)
    assert report["spans_received"] > 0 and report["spans_per_s"] > 0
    assert report["samples_scored"] > 0 and report["rss_mb"] > 0
    print(report)


@pytest.mark.slow
def test_grpc_receiver_accepts_the_sdk_grpc_exporter_and_refuses_when_full(make_service, receiver):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    gate = threading.Event()
    svc = make_service([GatedMetric(gate), ContextCount()], grpc_port=0, max_queue=1, concurrency=1)
    assert svc.grpc_port
    _, spans = _oi_json()
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{svc.grpc_port}", insecure=True, timeout=2)
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert wait_for(lambda: svc.stats()["queue_depth"] == 1, timeout=10)
    assert exporter.export(_oi_json()[1]) == SpanExportResult.FAILURE  # UNAVAILABLE, retried until the timeout
    assert svc.stats()["requests_rejected"] >= 1
    gate.set()
    assert wait_for(lambda: receiver.carriers(), timeout=10)
    [carrier] = receiver.carriers()
    chain = next(s for s in spans if s.name == "rag")
    assert carrier["attributes"]["ragmeter.target.span_id"] == format(chain.context.span_id, "016x")
    assert carrier["attributes"]["ragmeter.context_count.score"] == 0.5
    exporter.shutdown()
