"""PhoenixAnnotationSink with a recording stand-in for the Phoenix client, and the real Phoenix
client against a local server speaking Phoenix's annotation REST endpoints (the real Phoenix
server is exercised by test_phoenix_e2e.py)."""

from __future__ import annotations

import builtins
import json

import pytest

import ragmeter
from helpers import TESTS
from helpers.tracing import ContextCount, RecordingServer, oi_rag, rag_provider
from ragmeter.cli import main
from ragmeter.data import Sample, Score
from ragmeter.metrics.scoring import SampleResult
from ragmeter.tracing import PhoenixAnnotationSink, SpanTarget, evaluate_traces
from ragmeter.tracing.phoenix import document_annotations, span_annotations


class FakeSpans:
    def __init__(self, fail: bool = False):
        self.span_calls: list = []
        self.doc_calls: list = []
        self.fail = fail

    def log_span_annotations(self, *, span_annotations, sync=False):
        if self.fail:
            raise RuntimeError("phoenix is down")
        self.span_calls.append((list(span_annotations), sync))

    def log_document_annotations(self, *, document_annotations, sync=False):
        self.doc_calls.append((list(document_annotations), sync))


class FakeClient:
    def __init__(self, fail: bool = False):
        self.spans = FakeSpans(fail)


def _result() -> SampleResult:
    sample = Sample(
        "q?",
        [{"id": "a", "text": "A."}, {"id": "b", "text": "B."}],
        answer="A.",
        id="s1",
        metadata={"otel": {"documents": [["00000000000000aa", 3], ["00000000000000bb", 0]]}},
    )
    scores = {
        "context_relevance": Score(
            "context_relevance",
            0.5,
            "1 of 2 chunks relevant",
            {
                "chunks": [
                    {"chunk": 0, "rank": 1, "id": "a", "relevant": 2, "score": 1.0},
                    {"chunk": 1, "rank": 2, "id": "b", "relevant": 0, "score": 0.0},
                ]
            },
            judge="openai:gpt-4o",
            label="fail",
        ),
        "context_precision": Score(
            "context_precision",
            1.0,
            "ok",
            {"chunks": [{"chunk": 0, "rank": 1, "id": "a", "useful": True}]},
            judge="offline",
            label="pass",
        ),
        "faithfulness": Score("faithfulness", None, error="JudgeError: bad JSON", judge="openai:gpt-4o"),
    }
    return SampleResult(sample, scores)


def test_span_and_document_annotations():
    target = SpanTarget(1, 0xABC, "rag")
    v = ragmeter.__version__
    assert span_annotations(_result(), target)[0] == {
        "name": "context_relevance",
        "span_id": "0000000000000abc",
        "annotator_kind": "LLM",
        "result": {"score": 0.5, "label": "fail", "explanation": "1 of 2 chunks relevant"},
        "metadata": {"source": "ragmeter", "judge": "openai:gpt-4o", "status": "ok", "sample_id": "s1"},
        "identifier": f"ragmeter/{v}/openai:gpt-4o/context_relevance/0000000000000abc",
    }
    assert span_annotations(_result(), target)[2]["result"] == {"explanation": "JudgeError: bad JSON"}
    docs = document_annotations(_result())
    assert [(d["name"], d["span_id"], d["document_position"], d["result"]) for d in docs] == [
        ("context_relevance", "00000000000000aa", 3, {"score": 1.0, "label": "relevant"}),
        ("context_relevance", "00000000000000bb", 0, {"score": 0.0, "label": "irrelevant"}),
        ("context_precision", "00000000000000aa", 3, {"score": 1.0, "label": "useful"}),
    ]
    assert docs[2]["annotator_kind"] == "CODE"


def test_sink_sends_through_the_client_and_never_raises():
    client = FakeClient()
    sink = PhoenixAnnotationSink(client, sync=True)
    sink.write(_result(), SpanTarget(1, 0xABC))
    ((anns, sync),) = client.spans.span_calls
    assert sync is True and [a["name"] for a in anns] == ["context_relevance", "context_precision", "faithfulness"]
    assert len(client.spans.doc_calls[0][0]) == 3
    assert sink.stats == {"span_annotations": 3, "document_annotations": 3, "requests": 2, "failed": 0}
    broken = PhoenixAnnotationSink(FakeClient(fail=True), documents=False)
    broken.write(_result(), SpanTarget(1, 0xABC))
    assert broken.stats["failed"] == 1


def test_missing_client_package_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("phoenix"):
            raise ImportError("no phoenix")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    sink = PhoenixAnnotationSink()
    with pytest.raises(ImportError, match=r"ragmeter\[phoenix\]"):
        _ = sink.client
    sink.write(_result(), SpanTarget(1, 2))  # never raises
    assert sink.stats["failed"] == 1


def test_processor_sends_annotations_for_the_judged_span():
    client = FakeClient()
    proc, provider, exporter = rag_provider([ContextCount()], sinks=[PhoenixAnnotationSink(client)])
    chain, _ = oi_rag(provider)
    assert provider.force_flush(10_000)
    ((anns, _),) = client.spans.span_calls
    assert [(a["name"], a["span_id"], a["result"]["score"]) for a in anns] == [
        ("context_count", format(chain.get_span_context().span_id, "016x"), 0.5)
    ]
    proc.shutdown()


LC = TESTS / "data" / "otlp" / "langchain_openinference.jsonl"


class FakePhoenix(RecordingServer):
    """Phoenix's ``POST /v1/span_annotations`` and ``/v1/document_annotations`` on 127.0.0.1:
    records every request (path with query, JSON body); answers ``status``. ``GET
    /v1/projects/{project}/spans?span_id=...`` answers the asked spans among ``stored``
    (None: it has every span asked about; a project it has no span of: 404), recording
    ``(project, span ids)`` in ``span_queries``."""

    def __init__(self, status: int = 200, stored: set[str] | None = None):
        def reply(body: dict) -> tuple[int, str, bytes]:
            out = json.dumps({"data": [{"id": str(i)} for i, _ in enumerate(body.get("data", []))]}).encode()
            return status, "application/json", out

        self.span_queries: list[tuple[str, list[str]]] = []

        def get(path: str) -> tuple[int, str, bytes]:
            from urllib.parse import parse_qs, unquote, urlsplit

            parts = urlsplit(path)
            project = unquote(parts.path.split("/")[3])
            asked = parse_qs(parts.query).get("span_id", [])
            self.span_queries.append((project, asked))
            have = [x for x in asked if stored is None or x in stored]
            if stored is not None and not stored:
                return 404, "application/json", b'{"detail": "project not found"}'
            data = [{"name": "span", "context": {"trace_id": "0" * 32, "span_id": x}} for x in have]
            return 200, "application/json", json.dumps({"data": data, "next_cursor": None}).encode()

        super().__init__(lambda raw: json.loads(raw or b"{}"), reply, get)

    def annotations(self, kind: str) -> list[dict]:
        return [a for path, body in self.requests if path.startswith(f"/v1/{kind}_annotations") for a in body["data"]]


@pytest.fixture
def fake_phoenix():
    servers: list[FakePhoenix] = []

    def start(status: int = 200, stored: set[str] | None = None) -> FakePhoenix:
        servers.append(FakePhoenix(status, stored))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def test_evaluate_traces_sends_phoenix_annotations(fake_phoenix, monkeypatch):
    """phoenix=URL: the real Phoenix client posts one span annotation per metric and call, on the
    judged span, not waiting for Phoenix to store them (no ?sync=true)."""
    monkeypatch.delenv("PHOENIX_API_KEY", raising=False)
    server = fake_phoenix()
    result = evaluate_traces(LC, metrics=[ContextCount()], progress=False, phoenix=server.url)
    assert result.phoenix == {
        "endpoint": server.url,
        "span_annotations": 2,
        "document_annotations": 0,
        "requests": 2,
        "failed": 0,
        "spans_judged": 2,
        "spans_found": 2,
    }
    assert [p for p, _ in server.requests] == ["/v1/span_annotations"] * 2
    targets = {r.sample.metadata["otel"]["target_span_id"] for r in result}
    ((project, asked),) = server.span_queries  # then it asked Phoenix whether it has the judged spans
    assert project == "default" and set(asked) == targets
    anns = server.annotations("span")
    assert {a["span_id"] for a in anns} == targets and len(targets) == 2
    assert all(
        a["name"] == "context_count" and a["result"]["score"] == 0.5 and a["annotator_kind"] == "CODE" for a in anns
    )


@pytest.mark.slow
def test_cli_phoenix_option(fake_phoenix, capsys, monkeypatch):
    """--phoenix URL with the offline judge: span annotations and, for context_relevance's
    per-chunk verdicts, document annotations; a Phoenix that fails every request is exit 2."""
    monkeypatch.delenv("PHOENIX_API_KEY", raising=False)
    server = fake_phoenix()
    code = main(
        [
            "evaluate-traces",
            str(LC),
            "-m",
            "context_relevance",
            "-j",
            "offline",
            "--no-progress",
            "--phoenix",
            server.url,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"sent 2 span and 4 document annotations to Phoenix at {server.url}" in out
    docs = server.annotations("document")
    assert len(docs) == 4 and all(isinstance(d["document_position"], int) for d in docs)
    down = fake_phoenix(500)
    code = main(
        ["evaluate-traces", str(LC), "-m", "context_relevance", "-j", "offline", "--no-progress", "--phoenix", down.url]
    )
    out, err = capsys.readouterr()
    assert code == 2
    assert f"sent 0 span and 0 document annotations to Phoenix at {down.url}" in out
    assert "ragmeter: error: 4 Phoenix annotation requests failed" in err
