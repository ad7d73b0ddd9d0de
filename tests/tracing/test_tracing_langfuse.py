"""The Langfuse sink: each score sent through Langfuse's own Python client to a local server on
127.0.0.1 that speaks Langfuse's public API for scores (tests/helpers/langfuse_server.py), keyed
by the OpenTelemetry trace and span id, typed by the metric, idempotent; from the span processor,
``evaluate_traces`` / ``ragmeter evaluate-traces`` and ``ragmeter serve``."""

from __future__ import annotations

import time
import uuid

import pytest

from helpers import TESTS
from helpers.langfuse_server import LangfuseServer
from helpers.tracing import ContextCount, oi_rag, rag_provider
from ragmeter.cli import main
from ragmeter.data import Context, Sample, Score
from ragmeter.metrics.base import Metric
from ragmeter.metrics.scoring import SampleResult
from ragmeter.tracing import LangfuseScoreSink, evaluate_traces
from ragmeter.tracing.langfuse import langfuse_scores, score_id
from ragmeter.tracing.writer import SpanTarget

LC = TESTS / "data" / "otlp" / "langchain_openinference.jsonl"
TARGET = SpanTarget(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, "rag")


class Failing(Metric):
    """Always fails."""

    name = "always_fails"
    uses_judge = False

    async def compute(self, sample, ctx):
        return Score(self.name, None, error="JudgeTimeout: no answer after 3 tries")


def result(captured: bool = True) -> SampleResult:
    sample = Sample(
        question="Who wrote Dune?",
        contexts=[Context("Dune is by Frank Herbert.", id="d1")],
        answer="Frank Herbert.",
        id="s-1",
        metadata={} if captured else {"content_captured": False},
    )
    return SampleResult(
        sample,
        {
            "faithfulness": Score(
                "faithfulness", 0.75, explanation="3 of 4 claims supported", judge="offline", label="pass"
            ),
            "exact_match": Score(
                "exact_match", 1.0, explanation="equal after normalisation", judge="code", label="pass"
            ),
            "hit_rate@5": Score(
                "hit_rate@5", 0.0, explanation="0 of 1 relevant ids in the top 1", judge="code", label="fail"
            ),
            "answer_correctness": Score("answer_correctness", None, error="JudgeTimeout: no answer", judge="offline"),
            "context_recall": Score(
                "context_recall", None, explanation="not applicable: no reference", judge="offline"
            ),
        },
    )


def test_each_metric_becomes_one_typed_score_on_the_judged_span():
    got = {kw["name"]: kw for kw in langfuse_scores(result(), TARGET)}
    assert [(n, kw["data_type"], kw["value"]) for n, kw in got.items()] == [
        ("faithfulness", "NUMERIC", 0.75),
        ("exact_match", "BOOLEAN", 1.0),
        ("hit_rate@5", "BOOLEAN", 0.0),
        ("answer_correctness", "CATEGORICAL", "error"),
        ("context_recall", "CATEGORICAL", "n/a"),
    ]
    for kw in got.values():
        assert kw["trace_id"] == "0af7651916cd43dd8448eb211c80319c" and kw["observation_id"] == "b7ad6b7169203331"
    assert got["faithfulness"]["comment"] == "3 of 4 claims supported"
    assert got["answer_correctness"]["comment"] == "JudgeTimeout: no answer"
    assert got["context_recall"]["comment"] == "not applicable: no reference"
    assert got["faithfulness"]["metadata"] == {
        "source": "ragmeter",
        "judge": "offline",
        "status": "ok",
        "label": "pass",
        "sample_id": "s-1",
    }
    assert got["answer_correctness"]["metadata"]["status"] == "error"
    # the idempotency id: the same for the same metric, judge and span; another span, another id
    again = {kw["name"]: kw["score_id"] for kw in langfuse_scores(result(), TARGET)}
    assert again == {n: kw["score_id"] for n, kw in got.items()} and len(set(again.values())) == 5
    other = SpanTarget(TARGET.trace_id, TARGET.span_id + 1)
    assert score_id("faithfulness", result()["faithfulness"], other) != got["faithfulness"]["score_id"]
    assert str(uuid.UUID(got["faithfulness"]["score_id"])) == got["faithfulness"]["score_id"]


def test_no_explanation_comment_when_content_capture_is_off():
    got = {kw["name"]: kw for kw in langfuse_scores(result(captured=False), TARGET)}
    assert "comment" not in got["faithfulness"] and "comment" not in got["context_recall"]
    assert got["answer_correctness"]["comment"] == "JudgeTimeout: no answer"  # an error is no content


@pytest.fixture
def langfuse():
    """A Langfuse-speaking server and the keys of a project of its own (Langfuse's client keeps
    one state per public key in a process, so each test gets a fresh key)."""
    servers: list[LangfuseServer] = []

    def start(fail_first: int = 0) -> tuple[LangfuseServer, dict]:
        keys = {"public_key": f"pk-lf-{uuid.uuid4().hex[:12]}", "secret_key": "sk-lf-secret"}
        servers.append(LangfuseServer(keys["public_key"], keys["secret_key"], fail_first=fail_first))
        return servers[-1], keys

    yield start
    for s in servers:
        s.close()


def test_processor_sends_each_score_through_the_langfuse_client(langfuse):
    server, keys = langfuse()
    sink = LangfuseScoreSink(endpoint=server.url, **keys)
    proc, provider, _ = rag_provider([ContextCount(), Failing()], sinks=[sink])
    chain, _ = oi_rag(provider)
    assert provider.force_flush(30_000)  # waits for the scores, then for the client to send them
    ctx = chain.get_span_context()
    got = {s["name"]: s for s in server.scores.values()}
    assert set(got) == {"context_count", "always_fails"}
    for s in got.values():
        assert s["traceId"] == format(ctx.trace_id, "032x") and s["observationId"] == format(ctx.span_id, "016x")
    assert (got["context_count"]["value"], got["context_count"]["dataType"]) == (0.5, "NUMERIC")
    assert got["context_count"]["comment"] == "2 contexts"
    assert got["context_count"]["metadata"]["label"] == "pass" and got["context_count"]["metadata"]["judge"] == "code"
    assert (got["always_fails"]["value"], got["always_fails"]["dataType"]) == ("error", "CATEGORICAL")
    assert got["always_fails"]["comment"] == "JudgeTimeout: no answer after 3 tries"
    stats = sink.stats
    assert stats["scores"] == 2 and stats["requests"] >= 1 and stats["failed"] == 0
    proc.shutdown()


@pytest.mark.slow
def test_a_retry_and_a_rerun_do_not_duplicate_scores(langfuse, monkeypatch):
    """The server stores the first batch but answers 500 (a lost answer): the client sends it
    again with the same score ids, and the server keeps one score per id; scoring the same
    export again sends the same ids."""
    server, keys = langfuse(fail_first=1)
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", keys["public_key"])
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", keys["secret_key"])
    first = evaluate_traces(LC, metrics=[ContextCount()], progress=False, langfuse=server.url)
    assert len(server.received) == 2 + 2  # the batch and its retry
    assert first.langfuse == {"endpoint": server.url, "scores": 2, "requests": 2, "failed": 0}  # the retry got through
    ids = set(server.scores)
    assert len(ids) == 2
    evaluate_traces(LC, metrics=[ContextCount()], progress=False, langfuse=server.url)
    assert len(server.received) == 6 and set(server.scores) == ids  # upserted, not added
    targets = {(r.sample.metadata["otel"]["trace_id"], r.sample.metadata["otel"]["target_span_id"]) for r in first}
    assert {(s["traceId"], s["observationId"]) for s in server.scores.values()} == targets


def test_cli_langfuse_option(langfuse, monkeypatch, capsys):
    server, keys = langfuse()
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", keys["public_key"])
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", keys["secret_key"])
    code = main(["evaluate-traces", str(LC), "-m", "mrr", "--no-progress", "--langfuse", server.url])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"sent 2 scores to Langfuse at {server.url} in 1 requests" in out
    # mrr has no relevant_ids on these traces: n/a, sent as such with the reason
    assert {(s["name"], s["value"], s["dataType"]) for s in server.scores.values()} == {("mrr", "n/a", "CATEGORICAL")}
    assert all(s["comment"] == "not applicable: the sample has no relevant_ids" for s in server.scores.values())


def test_wrong_keys_and_missing_keys_are_reported(langfuse, monkeypatch, capsys):
    server, keys = langfuse()
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", keys["public_key"])
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-wrong")
    code = main(["evaluate-traces", str(LC), "-m", "mrr", "--no-progress", "--langfuse", server.url])
    err = capsys.readouterr().err
    assert code == 2 and not server.scores
    assert "ragmeter: error: 2 Langfuse scores did not get through (see the log)" in err
    monkeypatch.delenv("LANGFUSE_PUBLIC_KEY")
    monkeypatch.delenv("LANGFUSE_SECRET_KEY")
    with pytest.raises(ValueError, match="LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"):
        evaluate_traces(LC, metrics=[ContextCount()], progress=False, langfuse=server.url)
    assert main(["evaluate-traces", str(LC), "-m", "mrr", "--no-progress", "--langfuse", server.url]) == 2


@pytest.mark.slow
def test_serve_sends_the_scores_of_received_traces(langfuse, monkeypatch):
    import argparse

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from ragmeter.tracing.cli import register
    from ragmeter.tracing.serve import EvaluationService

    server, keys = langfuse()
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", keys["public_key"])
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", keys["secret_key"])
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(
        [
            "serve",
            "--phoenix",
            "http://127.0.0.1:9",
            "--langfuse",
            server.url,
            "--evaluation-logs",
            "http://127.0.0.1:9",
            "--id-keys",
            "id,source",
        ]
    )
    from ragmeter.tracing import EvaluationLogSink, PhoenixAnnotationSink
    from ragmeter.tracing.cli import _id_keys, _serve_sinks

    phoenix, sink, logs = _serve_sinks(args)
    assert isinstance(phoenix, PhoenixAnnotationSink) and phoenix.endpoint == "http://127.0.0.1:9"
    assert isinstance(sink, LangfuseScoreSink) and sink.endpoint == server.url
    assert isinstance(logs, EvaluationLogSink) and logs.endpoint == "http://127.0.0.1:9/v1/logs"
    logs.shutdown()
    assert _id_keys(args.id_keys) == ["id", "source"]
    service = EvaluationService(
        [ContextCount()], host="127.0.0.1", port=0, grace_period=0.05, sinks=[sink], id_keys=_id_keys(args.id_keys)
    ).start()
    assert service.processor.id_keys == ("id", "source")
    try:
        app = TracerProvider(shutdown_on_exit=False)
        app.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=service.url + "/v1/traces")))
        chain, _ = oi_rag(app)
        deadline = time.monotonic() + 30
        while service.stats()["samples_scored"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        assert service.shutdown(30)  # flushes the sinks
    (score,) = server.scores.values()
    ctx = chain.get_span_context()
    assert (score["traceId"], score["observationId"]) == (format(ctx.trace_id, "032x"), format(ctx.span_id, "016x"))
    assert (score["name"], score["value"], score["dataType"]) == ("context_count", 0.5, "NUMERIC")
