"""Offline: OTLP JSON (collector file exporter format) in, scored samples out, carriers exported
over OTLP/HTTP to a real receiver on 127.0.0.1."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from helpers import TESTS
from helpers.tracing import ContextCount, OTLPReceiver, memory_provider, oi_rag, rag_provider
from ragmeter.cli import main
from ragmeter.result import EvaluationResult
from ragmeter.tracing import OTLPJsonFileExporter, evaluate_traces, read_otlp_json
from ragmeter.tracing.offline import TraceEvaluation, encode_otlp_json, export_carriers, samples_from_spans

DATA = TESTS / "data" / "otlp"
LC = DATA / "langchain_openinference.jsonl"
MIXED = DATA / "collector_genai_openllmetry.jsonl"


def test_reads_the_collector_file_exporter_format():
    spans = read_otlp_json(MIXED)
    assert len(spans) == 8
    by = {s.name: s for s in spans}
    req = by["POST /chat"]
    assert req.context.trace_id == 0x5B8EFFF798038103D269B633813FC60C
    assert req.parent.span_id == 0xEEE0000000000001 and req.parent.is_remote  # flags 0x301: remote parent
    assert req.resource.attributes["service.name"] == "chat-svc"
    assert req.instrumentation_scope.name == "chat-svc.http" and req.instrumentation_scope.version == "2.3.0"
    assert req.kind.name == "SERVER" and req.start_time == 1767225600000000000
    chat = next(s for s in spans if s.context.span_id == 0xAAAAAAAAAAAA0003)
    assert not chat.parent.is_remote
    assert chat.attributes["gen_ai.usage.input_tokens"] == 120  # intValue is a string in OTLP JSON
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert chat.events[0].name == "gen_ai.choice" and chat.events[0].attributes["index"] == 0
    wf = by["RunnableSequence.workflow"]
    assert wf.kind.name == "INTERNAL"  # enum given by name
    carrier = by["ragmeter.evaluation"]
    assert carrier.links[0].context.span_id == 0xBBBBBBBBBBBB0001
    failing = spans[-1]
    assert failing.status.status_code.name == "ERROR" and failing.status.description == "rate limited"
    assert json.loads(failing.attributes["gen_ai.tool.definitions"]) == {"name": "weather", "strict": True}


def test_round_trip_and_other_layouts(tmp_path):
    provider, exporter = memory_provider()
    oi_rag(provider)
    spans = exporter.get_finished_spans()
    doc = encode_otlp_json(spans)
    one = tmp_path / "one.json"
    one.write_text(json.dumps(doc, indent=2))  # a single pretty-printed document
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps([doc, doc]))
    gz = tmp_path / "lines.jsonl.gz"
    gz.write_bytes(gzip.compress((json.dumps(doc) + "\n").encode()))
    for path, n in ((one, 3), (arr, 6), (gz, 3)):
        back = read_otlp_json(path)
        assert len(back) == n
    back = read_otlp_json(one)
    orig = {s.context.span_id: s for s in spans}
    for s in back:
        o = orig[s.context.span_id]
        assert (s.name, s.parent.span_id if s.parent else None, dict(s.attributes), s.start_time, s.end_time) == (
            o.name,
            o.parent.span_id if o.parent else None,
            dict(o.attributes),
            o.start_time,
            o.end_time,
        )


def test_base64_ids_and_errors(tmp_path):
    doc = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": base64.b64encode(bytes.fromhex("5b8efff798038103d269b633813fc60c")).decode(),
                                "spanId": base64.b64encode(bytes.fromhex("00f067aa0ba902b7")).decode(),
                                "name": "x",
                            }
                        ]
                    }
                ]
            }
        ]
    }
    p = tmp_path / "b64.json"
    p.write_text(json.dumps(doc))
    (s,) = read_otlp_json(p)
    assert s.context.trace_id == 0x5B8EFFF798038103D269B633813FC60C and s.context.span_id == 0x00F067AA0BA902B7
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(doc) + "\n{not json\n")
    with pytest.raises(ValueError, match="line 2"):
        read_otlp_json(bad)
    noid = tmp_path / "noid.json"
    noid.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x", "traceId": "zz"}]}]}]}))
    with pytest.raises(ValueError, match="request 1"):
        read_otlp_json(noid)


def test_samples_from_a_real_openinference_export():
    samples, builds = samples_from_spans(read_otlp_json(LC))
    assert [(s.question, s.answer) for s in samples] == [
        ("What is the capital of France?", "Paris is the capital of France [1]."),
        ("What is the capital of Germany?", "Berlin is the capital of Germany [2]."),
    ]
    assert [[c.id for c in s.contexts] for s in samples] == [["d1", "d3"], ["d2", "d3"]]
    assert all(s.metadata["otel"]["convention"] == "openinference" for s in samples)


def test_evaluate_traces_scores_each_call_and_reports_skips():
    # MIXED holds a ragmeter carrier for the workflow call: rescore=True scores it again
    result = evaluate_traces(MIXED, metrics=[ContextCount()], progress=False, rescore=True)
    assert len(result) == 2
    by_q = {r.sample.question: r for r in result}
    assert by_q["How tall is the Eiffel Tower?"].scores["context_count"].value == 0.5
    assert by_q["How high is Mount Everest?"].sample.metadata["otel"]["convention"] == "openllmetry"
    assert result.trace_stats == {"spans": 8, "traces": 3, "invocations": 3, "samples": 2, "not_rag": 1}
    assert result.invalid == [] and result.export is None


def test_the_trace_evaluation_is_an_evaluation_result_with_declared_fields():
    result = evaluate_traces(MIXED, metrics=[ContextCount()], progress=False, rescore=True)
    assert type(result) is TraceEvaluation and isinstance(result, EvaluationResult)
    assert result.summary()["context_count"]["count"] == 2  # everything an EvaluationResult does
    empty = TraceEvaluation([], ["context_count"])
    assert empty.trace_stats == {} and empty.export is None  # fields of the class, not patched on
    again = TraceEvaluation.of(result, {"spans": 1}, {"endpoint": "x", "spans": 0, "failed": 0})
    assert again.results == result.results and again.trace_stats == {"spans": 1} and again.export["endpoint"] == "x"


def test_evaluate_traces_without_rag_calls_is_an_error(tmp_path):
    provider, exporter = memory_provider()
    with provider.get_tracer("app").start_as_current_span("GET /health"):
        pass
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(encode_otlp_json(exporter.get_finished_spans())) + "\n")
    with pytest.raises(ValueError, match="no RAG call"):
        evaluate_traces(p, metrics=[ContextCount()], progress=False)
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="no spans"):
        evaluate_traces(empty, metrics=[ContextCount()], progress=False)


def test_skipped_calls_are_listed_as_invalid(tmp_path):
    provider, exporter = memory_provider()
    oi_rag(provider)
    oi_rag(provider, answer=None)  # no answer anywhere
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(encode_otlp_json(exporter.get_finished_spans())) + "\n")
    result = evaluate_traces(p, metrics=[ContextCount()], progress=False)
    assert len(result) == 1
    (err,) = result.invalid
    assert err.field == "answer" and err.location.startswith("trace ")
    assert result.trace_stats["skipped_no_answer"] == 1


def test_calls_already_scored_inline_are_skipped_unless_rescore(tmp_path):
    """An export from an app running RagmeterSpanProcessor holds its evaluation carriers: those
    calls are skipped and counted, a call without one is scored; rescore=True scores them all."""
    proc, provider, exporter = rag_provider([ContextCount()])
    oi_rag(provider)
    assert provider.force_flush(10_000)
    proc.shutdown()
    scored_inline = exporter.get_finished_spans()
    assert sum(s.name == "ragmeter.evaluation" for s in scored_inline) == 1
    plain, plain_exporter = memory_provider()
    oi_rag(plain, question="What is the capital of Spain?")
    path = tmp_path / "traces.jsonl"
    path.write_text(
        json.dumps(encode_otlp_json(scored_inline))
        + "\n"
        + json.dumps(encode_otlp_json(plain_exporter.get_finished_spans()))
        + "\n"
    )
    result = evaluate_traces(path, metrics=[ContextCount()], progress=False)
    # the scored call is not scored again: its carrier's scores are read back and reported with the other
    assert [r.sample.question for r in result] == ["What is the capital of Spain?", "What is the capital of France?"]
    assert result.trace_stats == {
        "spans": 7,
        "traces": 2,
        "invocations": 2,
        "samples": 1,
        "skipped_already_scored": 1,
        "read_back": 1,
    }
    spain, france = result.results
    assert (
        "scores_read_back" not in spain.sample.metadata["otel"] and france.sample.metadata["otel"]["scores_read_back"]
    )
    assert france["context_count"].value == 0.5 and france["context_count"].explanation == "2 contexts"
    again = evaluate_traces(path, metrics=[ContextCount()], progress=False, rescore=True)
    assert sorted(r.sample.question for r in again) == [
        "What is the capital of France?",
        "What is the capital of Spain?",
    ]
    assert "skipped_already_scored" not in again.trace_stats and again.trace_stats["samples"] == 2
    only_scored = tmp_path / "scored.jsonl"
    only_scored.write_text(json.dumps(encode_otlp_json(scored_inline)) + "\n")
    nothing = evaluate_traces(only_scored, metrics=[ContextCount()], progress=False)  # nothing to do is not an error
    assert nothing.trace_stats["skipped_already_scored"] == 1 and nothing.trace_stats["samples"] == 0
    assert [r["context_count"].value for r in nothing] == [0.5]  # read back, not a table of dashes


def test_cli_reads_the_scores_of_an_already_scored_export_back(tmp_path, capsys):
    """An export whose every call already carries an evaluation span printed a table of dashes;
    now the table shows the scores the carriers hold (and only their metrics)."""
    proc, provider, exporter = rag_provider([ContextCount()])
    oi_rag(provider)
    assert provider.force_flush(10_000)
    proc.shutdown()
    path = tmp_path / "scored.jsonl"
    path.write_text(json.dumps(encode_otlp_json(exporter.get_finished_spans())) + "\n")
    assert main(["evaluate-traces", str(path), "-m", "mrr", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (
        "3 RAG calls" not in out
        and "1 RAG calls, 0 scored, skipped: already scored 1 (scores of 1 read back from their evaluation spans)"
    ) in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("context_count", "mrr"))]
    assert rows == [["context_count", "0.5000", "0.5000", "0.5000", "0.5000", "1", "0", "0", "0", "0"]]


def test_cli_skips_calls_with_an_evaluation_span(capsys):
    """MIXED holds a ragmeter carrier linked to the workflow call (no target attribute: the link
    identifies the judged span; only a flat ``ragmeter.faithfulness.score`` tag, read back)."""
    code = main(["evaluate-traces", str(MIXED), "-m", "mrr", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0
    assert (
        "8 spans in 3 traces, 3 RAG calls, 1 scored, skipped: already scored 1 (scores of 1 read back from their "
        "evaluation spans), 1 LLM calls without retrieval"
    ) in out
    assert "2 samples scored" in out  # the one scored now, the one whose carrier holds faithfulness 0.5
    assert "faithfulness  0.5000  0.5000" in out


@pytest.fixture
def receiver():
    r = OTLPReceiver()
    yield r
    r.close()


@pytest.mark.slow
def test_export_carriers_over_otlp_http(receiver):
    result = evaluate_traces(LC, metrics=[ContextCount()], export="otlp", endpoint=receiver.endpoint, progress=False)
    assert result.export == {"endpoint": receiver.endpoint, "spans": 2, "failed": 0}
    got = receiver.resource_spans()
    assert len(got) == 2 and {p for p, _ in receiver.requests} == {"/v1/traces"}
    samples = {r.sample.metadata["otel"]["entry_span_id"]: r for r in result}
    for resource, sp in got:
        assert sp.name == "ragmeter.evaluation"
        entry = sp.parent_span_id.hex()
        assert entry in samples
        assert sp.trace_id.hex() == samples[entry].sample.metadata["otel"]["trace_id"]
        assert [ln.span_id.hex() for ln in sp.links] == [entry]
        attrs = {kv.key: kv.value for kv in sp.attributes}
        assert attrs["ragmeter.context_count.score"].double_value == 0.5
        assert attrs["ragmeter.carrier"].bool_value is True
        assert [e.name for e in sp.events] == ["gen_ai.evaluation.result"]
        res = {kv.key: kv.value.string_value for kv in resource.attributes}
        assert res["service.name"] == "rag-api"  # the judged trace's resource


@pytest.mark.slow
def test_cli_evaluate_traces(tmp_path, receiver, capsys):
    out = tmp_path / "r.jsonl"
    code = main(["evaluate-traces", str(LC), "-m", "context_count_unknown_metric_name"])
    assert code == 2
    code = main(
        [
            "evaluate-traces",
            str(MIXED),
            "-m",
            "mrr",
            "--no-progress",
            "--out",
            str(out),
            "--export",
            "otlp",
            "--endpoint",
            receiver.endpoint,
            "--rescore",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0
    assert "8 spans in 3 traces, 3 RAG calls, 2 scored, 1 LLM calls without retrieval" in text
    assert f"exported 2 evaluation spans to {receiver.endpoint}" in text
    assert out.exists() and len(receiver.resource_spans()) == 2
    empty = tmp_path / "none.jsonl"
    empty.write_text("")
    assert main(["evaluate-traces", str(empty), "-m", "mrr"]) == 2


def test_export_failure_is_reported(tmp_path):
    from opentelemetry.sdk.trace.export import SpanExportResult

    class Failing:
        def export(self, spans):
            return SpanExportResult.FAILURE

        def shutdown(self):
            pass

        def force_flush(self, timeout_millis=30000):
            return True

    result = evaluate_traces(LC, metrics=[ContextCount()], progress=False)
    samples, builds = samples_from_spans(read_otlp_json(LC))
    by_id = {b.sample.id: b for b in builds if b.sample}
    info = export_carriers([(r, by_id[r.sample.id]) for r in result], exporter=Failing())
    assert info["spans"] == 0 and info["failed"] == 2


def test_otlp_json_file_exporter_writes_what_evaluate_traces_reads(tmp_path):
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    path = tmp_path / "traces.jsonl"
    provider, _ = memory_provider(SimpleSpanProcessor(OTLPJsonFileExporter(path)))
    oi_rag(provider)
    oi_rag(provider, question="What is the capital of Spain?")
    assert len(path.read_text().splitlines()) == 6  # one line per export call
    result = evaluate_traces(path, metrics=[ContextCount()], progress=False)
    assert sorted(r.sample.question for r in result) == [
        "What is the capital of France?",
        "What is the capital of Spain?",
    ]
