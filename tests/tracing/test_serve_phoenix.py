"""``ragmeter serve`` in front of a real Arize Phoenix server: a LangChain RAG app exports its trace
with the SDK's OTLP/HTTP exporter to the service only; the service forwards the trace
(``forward_all``) and its evaluation carrier to Phoenix, and the test reads both back through
Phoenix's REST API. The Phoenix server comes from tests/tracing/test_phoenix_e2e.py (skipped without a
``phoenix`` binary, a failure with ``RAGMETER_REQUIRE_PHOENIX=1``)."""

from __future__ import annotations

import urllib.parse
import uuid

import pytest
from test_phoenix_e2e import _get, _poll, phoenix  # noqa: F401  (the module-scoped Phoenix server fixture)

pytestmark = [pytest.mark.phoenix, pytest.mark.slow]


def test_service_forwards_trace_and_carrier_to_phoenix(phoenix):  # noqa: F811
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from helpers.tracing import AnswerOverlap, ContextCount, instrumented, langchain_chain
    from ragmeter.tracing.serve import EvaluationService

    service = EvaluationService(
        [ContextCount(), AnswerOverlap()],
        host="127.0.0.1",
        port=0,
        forward=phoenix.url,
        forward_all=True,
        grace_period=0.2,
    ).start()
    project = f"ragmeter-serve-{uuid.uuid4().hex[:8]}"
    provider = TracerProvider(
        resource=Resource({"service.name": "rag-app", "openinference.project.name": project}), shutdown_on_exit=False
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=service.url + "/v1/traces")))
    try:
        with instrumented(LangChainInstrumentor, provider):
            with provider.get_tracer("e2e.http").start_as_current_span("POST /ask") as request:
                langchain_chain().invoke("What is the capital of France?")
        assert provider.force_flush(30_000)
    finally:
        provider.shutdown()
        assert service.shutdown(30)
    st = service.stats()
    assert st["samples_scored"] == 1 and st["carriers_exported"] == 1 and st["carriers_export_failed"] == 0, st

    trace_id = format(request.get_span_context().trace_id, "032x")
    q = urllib.parse.urlencode({"trace_id": trace_id, "limit": 100})

    def spans():
        data = _get(f"{phoenix.url}/v1/projects/{project}/spans?{q}")["data"]
        return data if any(s["name"] == "ragmeter.evaluation" for s in data) and len(data) >= 11 else None

    got = _poll(spans, what="the forwarded trace and its evaluation span in Phoenix")
    by_id = {s["context"]["span_id"]: s for s in got}
    carrier = next(s for s in got if s["name"] == "ragmeter.evaluation")
    root = next(
        s
        for s in got
        if s["name"] == "RunnableSequence" and by_id.get(s.get("parent_id"), {}).get("name") == "POST /ask"
    )
    assert carrier["context"]["trace_id"] == trace_id
    assert carrier["parent_id"] == root["context"]["span_id"]
    assert carrier["span_kind"] == "EVALUATOR"
    a = carrier["attributes"]
    assert a["ragmeter.target.span_id"] == root["context"]["span_id"]
    assert a["ragmeter.context_count.score"] == 0.75 and a["ragmeter.answer_overlap.score"] == 1.0
