"""``gen_ai.evaluation.result`` as OpenTelemetry log records: the names as the GenAI semantic
conventions spell them, the evaluated span's trace and span id, content capture respected; through
the SDK's in-memory log exporter and through a real OTLP/HTTP logs receiver on 127.0.0.1 (the
span processor, ``evaluate_traces``, ``ragmeter evaluate-traces`` and ``ragmeter serve``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

from helpers import TESTS
from helpers.tracing import ContextCount, OTLPLogsReceiver, RecordingServer, event_name, oi_rag, rag_provider
from ragmeter.cli import main
from ragmeter.data import Score
from ragmeter.metrics.base import Metric
from ragmeter.tracing import EvaluationLogSink, evaluate_traces
from ragmeter.tracing.semconv import BASELINE, LATEST, evaluation_names

LC = TESTS / "data" / "otlp" / "langchain_openinference.jsonl"
NAMES = (
    "gen_ai.evaluation.name",
    "gen_ai.evaluation.score.value",
    "gen_ai.evaluation.score.label",
    "gen_ai.evaluation.explanation",
    "error.type",
)


def memory_logs():
    """An SDK LoggerProvider exporting into memory (the exporter's class name changed in 1.39)."""
    from opentelemetry.sdk._logs import export

    cls = getattr(export, "InMemoryLogRecordExporter", None) or export.InMemoryLogExporter
    exporter = cls()
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider, exporter


class Failing(Metric):
    """Always fails with an error message that names its type."""

    name = "always_fails"
    uses_judge = False

    async def compute(self, sample, ctx):
        return Score(self.name, None, error="JudgeTimeout: no answer after 3 tries")


def test_names_are_the_conventions_and_live_in_one_module(monkeypatch):
    assert (
        BASELINE.event,
        BASELINE.name,
        BASELINE.score_value,
        BASELINE.score_label,
        BASELINE.explanation,
        BASELINE.error_type,
    ) == ("gen_ai.evaluation.result",) + NAMES
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    assert evaluation_names() is BASELINE
    assert evaluation_names({"OTEL_SEMCONV_STABILITY_OPT_IN": "http, gen_ai_latest_experimental"}) is LATEST
    # the writer's span events come from the same names
    import ragmeter.tracing.writer as writer

    source = Path(writer.__file__).read_text()
    assert not any(f'"{n}"' in source for n in NAMES + ("gen_ai.evaluation.result",))


def test_processor_emits_one_record_per_metric_in_the_judged_span_context():
    logs, exporter = memory_logs()
    proc, provider, spans = rag_provider([ContextCount(), Failing()], logger_provider=logs)
    chain, _ = oi_rag(provider)
    assert provider.force_flush(10_000)
    records = exporter.get_finished_logs()
    assert len(records) == 2 and proc.stats["log_records"] == 2
    judged = chain.get_span_context()
    by_name = {}
    for r in records:
        lr = r.log_record
        assert (lr.trace_id, lr.span_id) == (judged.trace_id, judged.span_id)  # the evaluated span, not the carrier
        assert int(lr.trace_flags) == 1 and lr.severity_number.name == "INFO"
        assert lr.body in (None, "")  # no body ("" with an SDK whose OTLP encoder needs one)
        assert event_name(r) == "gen_ai.evaluation.result"
        assert r.instrumentation_scope.name == "ragmeter"
        attrs = {k: v for k, v in lr.attributes.items() if k != "event.name"}
        by_name[attrs["gen_ai.evaluation.name"]] = attrs
    from ragmeter import __version__
    from ragmeter.judges.fingerprint import CODE_FINGERPRINT

    # the judge that scored, under the draft evaluator names (code: no judge, so the ragmeter version)
    code = {
        "gen_ai.evaluation.evaluator.id": CODE_FINGERPRINT.id,
        "gen_ai.evaluation.evaluator.name": "code",
        "gen_ai.evaluation.evaluator.version": __version__,
    }
    assert by_name["context_count"] == {
        "gen_ai.evaluation.name": "context_count",
        "gen_ai.evaluation.score.value": 0.5,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "2 contexts",
        **code,
    }
    assert by_name["always_fails"] == {
        "gen_ai.evaluation.name": "always_fails",
        "error.type": "JudgeTimeout",
        "gen_ai.evaluation.explanation": "JudgeTimeout: no answer after 3 tries",
        **code,
    }
    # the carrier span's events say the same
    (carrier,) = [s for s in spans.get_finished_spans() if s.name == "ragmeter.evaluation"]
    assert [dict(e.attributes) for e in carrier.events] == [by_name["context_count"], by_name["always_fails"]]
    proc.shutdown()


def test_no_explanation_when_content_capture_is_off():
    logs, exporter = memory_logs()
    proc, provider, _ = rag_provider([ContextCount(), Failing()], logger_provider=logs, capture_content=False)
    oi_rag(provider)
    assert provider.force_flush(10_000)
    attrs = {
        r.log_record.attributes["gen_ai.evaluation.name"]: dict(r.log_record.attributes)
        for r in exporter.get_finished_logs()
    }
    assert "gen_ai.evaluation.explanation" not in attrs["context_count"]  # "2 contexts" is about the sample
    assert attrs["context_count"]["gen_ai.evaluation.score.value"] == 0.5
    # an error is no content: still said (redacted)
    assert attrs["always_fails"]["gen_ai.evaluation.explanation"] == "JudgeTimeout: no answer after 3 tries"
    proc.shutdown()


def test_off_by_default_and_switched_on_by_the_environment(monkeypatch):
    monkeypatch.delenv("RAGMETER_EVALUATION_LOGS", raising=False)
    proc, _, _ = rag_provider([ContextCount()])
    assert proc.log_sink is None and not any(isinstance(s, EvaluationLogSink) for s in proc.sinks)
    proc.shutdown()
    monkeypatch.setenv("RAGMETER_EVALUATION_LOGS", "true")
    proc, _, _ = rag_provider([ContextCount()])
    assert isinstance(proc.log_sink, EvaluationLogSink)
    proc.shutdown()
    monkeypatch.setenv("RAGMETER_EVALUATION_LOGS", "maybe")  # unreadable: warned, default (off)
    proc, _, _ = rag_provider([ContextCount()])
    assert proc.log_sink is None
    proc.shutdown()
    with pytest.raises(ValueError, match="evaluation_logs must be True, False or None"):
        rag_provider([ContextCount()], evaluation_logs="yes")


def test_without_an_sdk_logger_provider_nothing_is_emitted_and_it_is_counted():
    from opentelemetry._logs import NoOpLoggerProvider

    proc, provider, _ = rag_provider([ContextCount()], logger_provider=NoOpLoggerProvider())
    oi_rag(provider)
    assert provider.force_flush(10_000)
    assert proc.stats["log_no_sdk_provider"] == 1 and proc.stats["log_records"] == 0
    proc.shutdown()


@pytest.fixture
def logs_receiver():
    r = OTLPLogsReceiver()
    yield r
    r.close()


def _received(receiver):
    out = []
    for resource, lr in receiver.records():
        attrs = {kv.key: kv.value for kv in lr.attributes}
        out.append(
            {
                "trace_id": lr.trace_id.hex(),
                "span_id": lr.span_id.hex(),
                "event": event_name(lr),
                "name": attrs["gen_ai.evaluation.name"].string_value,
                "value": attrs["gen_ai.evaluation.score.value"].double_value,
                "label": attrs["gen_ai.evaluation.score.label"].string_value,
                "explanation": attrs["gen_ai.evaluation.explanation"].string_value,
                "service": {kv.key: kv.value.string_value for kv in resource.attributes}.get("service.name"),
            }
        )
    return out


def test_evaluate_traces_exports_records_to_an_otlp_receiver(logs_receiver):
    result = evaluate_traces(LC, metrics=[ContextCount()], progress=False, evaluation_logs=logs_receiver.url)
    assert result.evaluation_logs["endpoint"] == logs_receiver.url + "/v1/logs"
    assert result.evaluation_logs["records"] == 2 and result.evaluation_logs["exported"] == 2
    assert {p for p, _ in logs_receiver.requests} == {"/v1/logs"}
    got = _received(logs_receiver)
    expected = {(r.sample.metadata["otel"]["trace_id"], r.sample.metadata["otel"]["target_span_id"]) for r in result}
    assert {(g["trace_id"], g["span_id"]) for g in got} == expected and len(got) == 2
    assert all(
        g["event"] == "gen_ai.evaluation.result"
        and g["name"] == "context_count"
        and g["value"] == 0.5
        and g["label"] == "pass"
        and g["explanation"] == "2 contexts"
        for g in got
    )
    assert {g["service"] for g in got} == {"rag-api"}  # the judged trace's resource


@pytest.mark.slow
def test_cli_evaluation_logs_option(logs_receiver, capsys):
    code = main(
        ["evaluate-traces", str(LC), "-m", "mrr", "--no-progress", "--evaluation-logs", logs_receiver.url + "/v1/logs"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"exported 2 evaluation log records to {logs_receiver.url}/v1/logs" in out
    assert len(logs_receiver.records()) == 2
    # a receiver that refuses them: said, and the exit status says so
    refusing = RecordingServer(lambda body: body, lambda _body: (400, "text/plain", b"bad request"))
    try:
        code = main(["evaluate-traces", str(LC), "-m", "mrr", "--no-progress", "--evaluation-logs", refusing.url])
    finally:
        refusing.close()
    out, err = capsys.readouterr()
    assert code == 2
    assert f"ragmeter: error: 2 evaluation log records could not be exported to {refusing.url}/v1/logs" in err


@pytest.mark.slow
def test_serve_exports_records_with_the_resource_of_the_judged_trace(logs_receiver):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from ragmeter.tracing.serve import EvaluationService

    service = EvaluationService(
        [ContextCount()],
        host="127.0.0.1",
        port=0,
        grace_period=0.05,
        sinks=[EvaluationLogSink(endpoint=logs_receiver.url)],
    ).start()
    try:
        app = TracerProvider(resource=Resource({"service.name": "shop-rag"}), shutdown_on_exit=False)
        app.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=service.url + "/v1/traces")))
        chain, _ = oi_rag(app)
        deadline = time.monotonic() + 30
        while service.stats()["samples_scored"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        assert service.shutdown(10)
    (got,) = _received(logs_receiver)
    ctx = chain.get_span_context()
    assert (got["trace_id"], got["span_id"]) == (format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"))
    assert got["service"] == "shop-rag" and got["value"] == 0.5 and got["event"] == "gen_ai.evaluation.result"
