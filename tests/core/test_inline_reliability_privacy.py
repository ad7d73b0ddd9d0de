"""Privacy of the inline captures (issue 13, item 10): run metadata and error texts without
credentials, and one switch (``capture_content`` / ``RAGMETER_CAPTURE_CONTENT``) that keeps
questions, chunk texts and answers out of every output: kept samples, JSONL exports, results,
evaluation spans and Phoenix annotations."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("langchain_core")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helpers.tracing import KB, carriers, langchain_chain, oi_rag
from ragmeter.capture import CaptureRecorder, capture_content_setting, without_content
from ragmeter.data import Sample, Score
from ragmeter.integrations.langchain import RagmeterCallbackHandler
from ragmeter.metrics.base import Metric
from ragmeter.redact import MASK

QUESTION = "What is the capital of France?"
ANSWER = "Paris is the capital of France [1]."
SECRET = "sk-proj-abcdefghijklmnopqrstuvwx"
CONTENT = ("capital of France", "Paris is", "Berlin", "Madrid", "borders")  # question, answer and chunk words


class Echo(Metric):
    """Scores 1.0 and, like an LLM judge's reason, quotes the answer in its explanation."""

    name = "echo"
    uses_judge = False
    requires = ("answer",)

    async def compute(self, sample, ctx):  # noqa: D102
        return Score(self.name, 1.0, explanation=f"the answer says: {sample.answer}")


class Leaky(Metric):
    """Fails with an error text that carries a credential (an upstream body echoing the key)."""

    name = "leaky"
    uses_judge = False

    async def compute(self, sample, ctx):  # noqa: D102
        raise RuntimeError(f"401 from gateway: Authorization: Bearer {SECRET}")


METRICS = [Echo(), Leaky(), "citation_accuracy", "faithfulness"]


def texts(obj) -> list[str]:
    """Every string inside ``obj`` (dicts, lists, span attributes)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [t for k, v in obj.items() for t in texts(k) + texts(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in texts(v)]
    return []


def span_texts(spans) -> list[str]:
    out = []
    for s in spans:
        out += texts(dict(s.attributes or {}))
        for e in s.events:
            out += texts(dict(e.attributes or {}))
    return out


def leaks(strings: list[str], needles=CONTENT) -> list[str]:
    return [s for s in strings if any(n in s for n in needles)]


def provider_and_exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


# ---------------------------------------------------------------------------- the switch


def test_the_switch_reads_the_environment(monkeypatch, caplog):
    monkeypatch.delenv("RAGMETER_CAPTURE_CONTENT", raising=False)
    assert capture_content_setting() is True
    for raw, want in (("false", False), ("0", False), ("OFF", False), ("true", True), ("1", True)):
        monkeypatch.setenv("RAGMETER_CAPTURE_CONTENT", raw)
        assert capture_content_setting() is want
        assert RagmeterCallbackHandler(["mrr"]).capture_content is want
    assert capture_content_setting(True) is True  # the argument wins
    monkeypatch.setenv("RAGMETER_CAPTURE_CONTENT", "maybe")
    with caplog.at_level(logging.WARNING, logger="ragmeter"):
        assert capture_content_setting() is True
    assert "RAGMETER_CAPTURE_CONTENT" in caplog.text
    with pytest.raises(ValueError, match="capture_content"):
        capture_content_setting("no")


def test_without_content_keeps_ids_scores_and_lengths_only():
    s = Sample(
        QUESTION,
        [{"text": KB["d1"], "id": "d1", "score": 0.9, "metadata": {"source": "kb"}}],
        answer=ANSWER,
        reference="Paris",
        relevant_ids=["d1"],
        id="s1",
        metadata={
            "status": "partial",
            "partial_answer": "Paris is",
            "retrievers": [{"query": QUESTION}],
            "latency": {"total_s": 0.1},
        },
    )
    bare = without_content(s)
    assert bare.question == f"[not captured: {len(QUESTION)} chars]"
    assert bare.answer == f"[not captured: {len(ANSWER)} chars]" and bare.reference == "[not captured: 5 chars]"
    c = bare.contexts[0]
    assert (c.text, c.id, c.score, c.metadata) == (
        f"[not captured: {len(KB['d1'])} chars]",
        "d1",
        0.9,
        {"source": "kb"},
    )
    assert bare.relevant_ids == s.relevant_ids and bare.id == "s1"
    assert bare.metadata["content_captured"] is False and bare.metadata["latency"] == {"total_s": 0.1}
    assert not leaks(texts(bare.to_dict()))
    assert s.question == QUESTION and "content_captured" not in s.metadata  # the original is untouched


# ---------------------------------------------------------------------------- LangChain


def run_chain(handler, provider, n=3, metadata=None):
    chain = langchain_chain([ANSWER] * n)
    tracer = provider.get_tracer("app")
    for i in range(n):
        with tracer.start_as_current_span("request"):
            chain.invoke(QUESTION, config={"callbacks": [handler], "metadata": dict(metadata or {}, sample_id=f"s{i}")})
    assert handler.flush(30)


@pytest.mark.parametrize("mode", ["inline", "offline"])
def test_langchain_content_off_keeps_no_content_in_any_output(mode, tmp_path):
    outs = {}
    for capture in (True, False):
        provider, exporter = provider_and_exporter()
        handler = RagmeterCallbackHandler(
            METRICS, "offline", mode=mode, tracer_provider=provider, capture_content=capture
        )
        run_chain(handler, provider)
        if mode == "offline":
            handler.evaluate()
        path = tmp_path / f"{mode}-{capture}.jsonl"
        assert handler.export_jsonl(path) == 3
        outs[capture] = handler, exporter, path
    on, off = outs[True], outs[False]
    # scored on the content, as with capture on
    values = [{n: s.value for n, s in r.scores.items()} for r in on[0].results]
    assert values == [{n: s.value for n, s in r.scores.items()} for r in off[0].results]
    assert values[0]["echo"] == 1.0 and values[0]["citation_accuracy"] == 1.0
    # ... and nothing of it kept or written
    handler, exporter, path = off
    assert not leaks(texts([s.to_dict() for s in handler.samples]))
    assert not leaks(texts([r.sample.to_dict() for r in handler.results]))
    assert not leaks(path.read_text().splitlines())
    spans = carriers(exporter)
    assert len(spans) == 3 and not leaks(span_texts(spans))
    verdicts = [e for s in spans for e in s.events if e.name == "ragmeter.citation.verdicts"]
    assert verdicts and all(
        "ragmeter.citation.statement" not in e.attributes and e.attributes["ragmeter.citation.verdict"]
        for e in verdicts
    )
    assert all(s.attributes["ragmeter.echo.score"] == 1.0 for s in spans)
    # capture on: the same outputs hold the content (what the switch removes)
    assert leaks(on[2].read_text().splitlines()) and leaks(span_texts(carriers(on[1])))
    # error texts are redacted either way
    for _, e, p in (on, off):
        assert SECRET not in p.read_text() and not leaks(span_texts(carriers(e)), (SECRET,))


def test_langchain_run_metadata_and_errors_leave_without_credentials(tmp_path):
    from langchain_core.runnables import RunnableLambda

    provider, _ = provider_and_exporter()
    handler = RagmeterCallbackHandler(["mrr"], mode="offline", tracer_provider=provider)
    meta = {
        "reference": "Paris",
        "relevant_ids": ["d1"],
        "user": "u7",
        "api_key": "abc123def",
        "note": f"called with token={SECRET}",
        "nested": {"password": "hunter2", "tags": ["x"]},
    }
    run_chain(handler, provider, n=1, metadata=meta)
    sample = handler.samples[0]
    assert sample.reference == "Paris" and sample.relevant_ids == ["d1"] and sample.id == "s0"
    run_meta = sample.metadata["run_metadata"]
    assert run_meta["user"] == "u7" and run_meta["api_key"] == MASK and run_meta["nested"]["password"] == MASK
    assert run_meta["nested"]["tags"] == ["x"] and SECRET not in run_meta["note"] and MASK in run_meta["note"]

    def fail(_):
        raise RuntimeError(f"upstream said Authorization: Bearer {SECRET}")

    chain = langchain_chain() | RunnableLambda(fail)
    with pytest.raises(RuntimeError):
        chain.invoke(QUESTION, config={"callbacks": [handler]})
    path = tmp_path / "all.jsonl"
    handler.export_jsonl(path, statuses=("ok", "error"))
    errored = handler.samples[-1]
    assert errored.metadata["status"] == "error" and "RuntimeError" in errored.metadata["error"]
    assert SECRET not in path.read_text() and SECRET not in json.dumps(errored.metadata)


# ---------------------------------------------------------------------------- LlamaIndex


def test_llamaindex_content_off_keeps_no_content_in_any_output(tmp_path):
    pytest.importorskip("llama_index.core")
    from helpers.llamaindex_app import build_index, code_of, engine, question
    from ragmeter.integrations.llamaindex import RagmeterInstrumentation

    provider, exporter = provider_and_exporter()
    qe = engine(build_index(), top_k=2)
    needles = ("secret code", code_of("falcon"), code_of("otter"))  # node ids and metadata are kept
    with RagmeterInstrumentation(
        [Echo(), "faithfulness"], "offline", tracer_provider=provider, capture_content=False
    ) as meter:
        with provider.get_tracer("app").start_as_current_span("request"):
            qe.query(question("falcon"))
            qe.query(question("otter"))
    assert [r.scores["echo"].value for r in meter.results] == [1.0, 1.0]
    path = tmp_path / "li.jsonl"
    assert meter.export_jsonl(path) == 2
    assert not leaks(texts([s.to_dict() for s in meter.samples]), needles)
    assert not leaks(texts([r.sample.to_dict() for r in meter.results]), needles)
    assert not leaks(path.read_text().splitlines(), needles)
    spans = carriers(exporter)
    assert len(spans) == 2 and not leaks(span_texts(spans), needles)


# ---------------------------------------------------------------------------- span processor, Phoenix


class RecordingPhoenix:
    """Stands in for ``phoenix.client.Client``: records the annotations it is sent."""

    def __init__(self):
        self.spans = self
        self.sent: list = []

    def log_span_annotations(self, *, span_annotations, sync):  # noqa: D102
        self.sent += span_annotations

    def log_document_annotations(self, *, document_annotations, sync):  # noqa: D102
        self.sent += document_annotations


@pytest.mark.parametrize("capture", [True, False])
def test_span_processor_content_switch_covers_carriers_phoenix_and_results(capture):
    from ragmeter.tracing import PhoenixAnnotationSink, RagmeterSpanProcessor

    phoenix = RecordingPhoenix()
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    proc = RagmeterSpanProcessor(
        [Echo(), Leaky(), "context_relevance", "faithfulness"],
        "offline",
        tracer_provider=provider,
        sinks=[PhoenixAnnotationSink(phoenix)],
        capture_content=capture,
    )
    provider.add_span_processor(proc)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    oi_rag(provider, n_docs=3, answer=ANSWER, question=QUESTION)
    assert proc.force_flush(30_000)
    spans = carriers(exporter)
    assert len(spans) == 1 and spans[0].attributes["ragmeter.echo.score"] == 1.0
    result = proc.results[0]
    assert any(a.get("document_position") is not None for a in phoenix.sent)  # per-chunk verdicts still sent
    written = span_texts(spans) + texts(phoenix.sent) + texts(result.sample.to_dict())
    assert bool(leaks(written)) is capture
    assert not leaks(written, (SECRET,))  # error texts redacted either way
    assert any(MASK in t for t in span_texts(spans))
    provider.shutdown()


def test_offline_recorder_scores_content_but_returns_samples_without_it():
    rec = CaptureRecorder([Echo()], mode="offline", capture_content=False)
    rec.record(Sample(QUESTION, [KB["d1"]], answer=ANSWER, id="s1"))
    assert not leaks(texts(rec.samples[0].to_dict()))
    result = rec.evaluate()
    echo = result[0].scores["echo"]  # scored on the content; its explanation quoted it, and is not kept
    assert echo.value == 1.0 and echo.explanation == f"[not captured: {len(f'the answer says: {ANSWER}')} chars]"
    assert result[0].sample is rec.samples[0] and not leaks(texts(result[0].sample.to_dict()))
    assert len(rec.evaluate()) == 0  # nothing left to score, no content left in memory
