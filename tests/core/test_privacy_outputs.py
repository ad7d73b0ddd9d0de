"""Content capture off and secrets, searched for in every output byte (issue 33, items 8 and 9).

Each test makes input texts out of words that occur nowhere else (``Qv3f9a1c...``), runs one path
(batch ``evaluate`` with ``--db`` and every report type, an LLM judge whose invalid answers quote
the content, the LangChain capture, the span processor, the monitor) and searches everything the
path wrote (files, the SQLite file's bytes, span attributes and events, Phoenix annotations,
printed output, log records) for each input text and each made-up word: 0 hits with content
capture off. With it on, the same search finds them (so the search can see). Secrets in the
samples' metadata (an API key, a database URL's password, a token) are found in no output
either way: one redaction (:mod:`ragmeter.privacy`) for every writer.
"""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

import pytest

from helpers.servers import FakeLLMServer, answer, oracle
from ragmeter.cli import main
from ragmeter.data import Score
from ragmeter.metrics.base import Metric

JUDGED = "faithfulness,context_relevance,context_recall,answer_correctness,citation_accuracy,hallucinated_specifics,entity_recall"
SECRET_VALUES = ("k9F3x7Q2w8E5r1T6", "Pw7c1e2d9fZ", "tok-5e4d3c2b1a9f8e7d")


def word() -> str:
    """A made-up capitalised word that occurs nowhere else."""
    return "Qv" + secrets.token_hex(4)


class Texts:
    """Question, chunks, answer and reference of a few samples, built from made-up words."""

    def __init__(self, n: int = 3):
        self.samples: list[dict] = []
        self.words: list[str] = []
        for i in range(n):
            bridge, river, town, engineer = (word() for _ in range(4))
            self.words += [bridge, river, town, engineer]
            chunks = [
                f"The {bridge} bridge over the {river} river opened in 1874 near {town}.",
                f"{engineer} designed the {bridge} bridge with three stone arches.",
                f"The town of {town} holds a market every Tuesday.",
            ]
            self.samples.append(
                {
                    "id": f"s{i}",
                    "question": f"When did the {bridge} bridge over the {river} open?",
                    "contexts": [
                        {"id": f"s{i}-c{j}", "text": t, "metadata": {"source": "kb", "token": "tok-5e4d3c2b1a9f8e7d"}}
                        for j, t in enumerate(chunks)
                    ],
                    "answer": f"The {bridge} bridge opened in 1874 [1]. {engineer} designed it with five arches [2].",
                    "reference": f"It opened in 1874; {engineer} designed it.",
                    "metadata": {
                        "api_key": "k9F3x7Q2w8E5r1T6",
                        "db": "postgresql://app:Pw7c1e2d9fZ@db:5432/prod",
                        "note": "auth with token=tok-5e4d3c2b1a9f8e7d",
                        "team": "search",
                    },
                }
            )

    @property
    def needles(self) -> list[str]:
        """Every input text, each of its sentences, and every made-up word."""
        out = list(self.words)
        for s in self.samples:
            for t in [s["question"], s["answer"], s["reference"], *(c["text"] for c in s["contexts"])]:
                out += [t, *(p.strip() for p in t.split(". ") if len(p.strip()) > 8)]
        return out

    def write(self, path: Path) -> Path:
        path.write_text("".join(json.dumps(s) + "\n" for s in self.samples))
        return path


def hits(blob: bytes | str, needles) -> list[str]:
    """The needles found in ``blob``."""
    data = blob if isinstance(blob, bytes) else blob.encode("utf-8", "replace")
    return [n for n in needles if n.encode() in data]


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (SQLite files included: their raw bytes)."""
    return {p.name: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


def log_text(caplog) -> str:
    """Every log record as a handler would write it (message, arguments and any traceback)."""
    fmt = logging.Formatter("%(name)s %(levelname)s %(message)s")
    return "\n".join(fmt.format(r) for r in caplog.records)


# ---------------------------------------------------------------------------- batch


def run_cli(*argv: str) -> int:
    return main([*argv])


def test_batch_evaluate_without_content_writes_no_content_to_any_report_store_or_log(tmp_path, capsys, logs):
    texts = Texts()
    data = texts.write(tmp_path / "data.jsonl")
    outputs = {}
    for capture in (True, False):
        out = tmp_path / ("on" if capture else "off")
        out.mkdir()
        logs.clear()
        flag = [] if capture else ["--no-content"]
        reports = [x for ext in ("jsonl", "json", "csv", "md", "html") for x in ("-o", str(out / f"results.{ext}"))]
        code = run_cli(
            "evaluate",
            str(data),
            "-j",
            "offline",
            "-m",
            JUDGED,
            "--db",
            str(out / "runs.db"),
            "--no-progress",
            *reports,
            *flag,
        )
        assert code == 0
        assert (
            run_cli("report", str(out / "results.jsonl"), "-o", str(out / "again.html"), "-o", str(out / "again.md"))
            == 0
        )
        assert run_cli("dashboard", "--db", str(out / "runs.db"), "-o", str(out / "dashboard.html")) == 0
        printed = capsys.readouterr()
        outputs[capture] = files_of(out), printed.out + printed.err, log_text(logs)
    on_files, _, _ = outputs[True]
    off_files, off_printed, off_logs = outputs[False]
    assert set(off_files) >= {
        "results.jsonl",
        "results.json",
        "results.csv",
        "results.md",
        "results.html",
        "runs.db",
        "again.html",
        "again.md",
        "dashboard.html",
    }
    # the search sees content where it is written: every file with capture on (the .md and the
    # summary print show only problems / tables, so not necessarily all of them)
    for name in ("results.jsonl", "results.json", "results.csv", "results.html", "runs.db", "dashboard.html"):
        assert hits(on_files[name], texts.words), name
    # capture off: not one input text or made-up word anywhere
    for name, blob in off_files.items():
        if name != "data.jsonl":
            assert hits(blob, texts.needles) == [], name
    assert hits(off_printed, texts.needles) == [] and hits(off_logs, texts.needles) == []
    # scored on the content all the same: the values match the run with content
    on = [json.loads(line) for line in on_files["results.jsonl"].decode().splitlines()[1:]]
    off = [json.loads(line) for line in off_files["results.jsonl"].decode().splitlines()[1:]]
    assert [{m: s["value"] for m, s in r["scores"].items()} for r in on] == [
        {m: s["value"] for m, s in r["scores"].items()} for r in off
    ]
    claims = off[0]["scores"]["faithfulness"]["details"]["claims"]
    assert claims and all(c["verdict"] in ("supported", "contradicted", "unsupported", "not_found") for c in claims)
    assert off[0]["sample"]["question"].startswith("[not captured: ")
    # secrets: in no output, with content or without
    for files, printed, log in outputs.values():
        for name, blob in files.items():
            if name != "data.jsonl":
                assert hits(blob, SECRET_VALUES) == [], name
        assert hits(printed + log, SECRET_VALUES) == []
    meta = on[0]["sample"]["metadata"]
    assert meta["api_key"] == "[REDACTED]" and meta["db"] == "postgresql://app:[REDACTED]@db:5432/prod"
    assert meta["team"] == "search" and on[0]["sample"]["contexts"][0]["metadata"]["token"] == "[REDACTED]"


def test_batch_evaluate_writes_no_secret_from_sample_metadata(tmp_path, capsys, logs):
    """The batch path stored an API key and a database password from sample metadata verbatim in
    the SQLite file and the results JSONL, while live capture redacted them."""
    texts = Texts(2)
    data = texts.write(tmp_path / "data.jsonl")
    out = tmp_path / "out"
    out.mkdir()
    reports = [x for ext in ("jsonl", "json", "csv", "md", "html") for x in ("-o", str(out / f"results.{ext}"))]
    assert (
        run_cli(
            "evaluate",
            str(data),
            "-j",
            "offline",
            "-m",
            "faithfulness",
            "--db",
            str(out / "runs.db"),
            "--no-progress",
            *reports,
        )
        == 0
    )
    assert run_cli("dashboard", "--db", str(out / "runs.db"), "-o", str(out / "dashboard.html")) == 0
    printed = capsys.readouterr()
    found = {name: hits(blob, SECRET_VALUES) for name, blob in files_of(out).items()}
    assert found == dict.fromkeys(found, []) and len(found) == 7
    assert hits(printed.out + printed.err + log_text(logs), SECRET_VALUES) == []
    assert hits(files_of(out)["runs.db"], ["search"])  # the rest of the metadata is kept


def test_the_environment_switch_turns_content_off_for_evaluate(tmp_path, monkeypatch):
    import ragmeter as rm

    texts = Texts(1)
    monkeypatch.setenv("RAGMETER_CAPTURE_CONTENT", "false")
    result = rm.evaluate(texts.samples, ["faithfulness"], "offline", progress=False)
    assert hits(result.to_jsonl(), texts.needles) == []
    assert hits(
        rm.evaluate(texts.samples, ["faithfulness"], "offline", progress=False, capture_content=True).to_jsonl(),
        texts.words,
    )


class QuotingError(Metric):
    """Fails with an error that quotes the answer (as a parser error quoting the input would)."""

    name = "quoting_error"
    uses_judge = False
    requires = ("answer",)

    async def compute(self, sample, ctx):  # noqa: D102
        raise ValueError(f"cannot read {sample.answer!r} (first chunk: {sample.contexts[0].text})")


def test_an_llm_judge_whose_answers_quote_the_content_leaves_it_in_no_error_or_log(tmp_path, logs):
    """The judge answers verify_claims with the claims' texts instead of verdict objects: the
    validation error quotes them; after the retries it is the score's error. Content off: the error
    keeps its wording, not the quote; the log lines of the retries neither."""
    import ragmeter as rm
    from ragmeter.judges import OpenAIJudge
    from ragmeter.result import EvaluationResult
    from ragmeter.store import Store

    texts = Texts(2)

    def responder(req):
        if req.task == "verify_claims":
            return answer({"verdicts": [c["text"] for c in req.inputs.get("claims", [])]})
        return oracle(req)

    with FakeLLMServer(responder) as server:
        judge = OpenAIJudge(
            "gpt-4o-mini", base_url=server.openai_url, api_key="sk-test-0123456789abcdef", cache=False, max_attempts=2
        )
        found = {}
        for capture in (True, False):
            logs.clear()
            result = rm.evaluate(
                texts.samples,
                ["faithfulness", "context_relevance", QuotingError()],
                judge,
                progress=False,
                capture_content=capture,
            )
            err = result[0].scores["faithfulness"].error
            assert err and "each claim entry must be an object" in err
            assert result[0].scores["quoting_error"].error.startswith("ValueError: cannot read")
            result.save(tmp_path / f"r-{capture}.jsonl")
            result.save(tmp_path / f"r-{capture}.md")
            with Store(tmp_path / f"r-{capture}.db") as store:
                store.record_run(result)
            outs = [(tmp_path / f"r-{capture}.{x}").read_bytes() for x in ("jsonl", "md", "db")]
            found[capture] = [hits(b, texts.needles) for b in outs], hits(log_text(logs), texts.needles)
            assert isinstance(EvaluationResult.load(tmp_path / f"r-{capture}.jsonl"), EvaluationResult)
    assert all(found[True][0]) and found[True][1]  # with content: in the error, the quoted answer, the log
    assert found[False] == ([[], [], []], [])


# ---------------------------------------------------------------------------- LangChain, monitor


def langchain_app(texts: Texts, i: int):
    """A real LCEL chain over the sample's chunks: retriever -> prompt -> fake chat model."""
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    s = texts.samples[i]

    class Fixed(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [
                Document(page_content=c["text"], metadata={"id": c["id"], "api_key": "k9F3x7Q2w8E5r1T6"})
                for c in s["contexts"]
            ]

    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    fmt = lambda docs: "\n".join(d.page_content for d in docs)  # noqa: E731
    return (
        {"context": Fixed() | fmt, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=[s["answer"]])
        | StrOutputParser()
    )


class EchoMetric(Metric):
    """Quotes the answer in its explanation and details, like an LLM judge's reason."""

    name = "echo"
    uses_judge = False
    requires = ("answer",)

    async def compute(self, sample, ctx):  # noqa: D102
        return Score(
            self.name,
            1.0,
            explanation=f"the answer says: {sample.answer}",
            details={"quote": sample.contexts[0].text, "verdict": "supported", "chunk_id": sample.contexts[0].id},
        )


@pytest.mark.parametrize("mode", ["inline", "offline"])
def test_langchain_capture_and_monitor_without_content_store_and_trace_no_content(mode, tmp_path, logs):
    pytest.importorskip("langchain_core")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from helpers.tracing import carriers
    from ragmeter.integrations.langchain import RagmeterCallbackHandler
    from ragmeter.monitor import Monitor

    texts = Texts(2)
    found = {}
    for capture in (True, False):
        logs.clear()
        folder = tmp_path / ("on" if capture else "off")
        folder.mkdir()
        exporter = InMemorySpanExporter()
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        monitor = Monitor(min_samples=1, store=folder / "monitor.db", meter_provider=False)
        handler = RagmeterCallbackHandler(
            [EchoMetric(), QuotingError(), "faithfulness", "citation_accuracy", "context_relevance"],
            "offline",
            tracer_provider=provider,
            capture_content=capture,
            store=folder / "inline.db",
            mode=mode,
            on_result=monitor.observe,
        )
        tracer = provider.get_tracer("app")
        for i, s in enumerate(texts.samples):
            with tracer.start_as_current_span("request"):
                langchain_app(texts, i).invoke(
                    s["question"],
                    config={
                        "callbacks": [handler],
                        "metadata": {"sample_id": s["id"], "reference": s["reference"], "api_key": "k9F3x7Q2w8E5r1T6"},
                    },
                )
        if mode == "offline":
            for r in handler.evaluate():
                monitor.observe(r)
        assert handler.flush(60) and monitor.flush(30)
        handler.export_jsonl(folder / "export.jsonl")
        handler.results.save(folder / "results.jsonl")
        assert handler.shutdown(30)
        monitor.close()
        spans = carriers(exporter)
        assert len(spans) == 2
        span_blob = json.dumps(
            [[dict(s.attributes), [(e.name, dict(e.attributes)) for e in s.events]] for s in spans], default=str
        )
        memory = json.dumps([r.to_dict() for r in handler.results])
        found[capture] = (
            {n: hits(b, texts.needles) for n, b in files_of(folder).items()},
            hits(span_blob, texts.needles),
            hits(log_text(logs), texts.needles),
            memory,
            span_blob,
        )
        provider.shutdown()
        assert [r.scores["echo"].value for r in handler.results] == [1.0, 1.0]
    on, off = found[True], found[False]
    assert all(on[0].values()) and on[1]  # with content: in every file and the spans
    assert off[0] == {"export.jsonl": [], "inline.db": [], "monitor.db": [], "results.jsonl": []}
    assert off[1] == [] and off[2] == []
    # the evidence stays, without its text: verdict, chunk id, numbers
    off_echo = json.loads(off[3])[0]["scores"]["echo"]
    assert off_echo["details"] == {
        "quote": off_echo["details"]["quote"],
        "verdict": "supported",
        "chunk_id": "s0-c0",
        "threshold": 0.7,
        "warn": 0.5,
    }
    assert off_echo["details"]["quote"].startswith("[not captured: ")
    for _, _, _, memory, span_blob in found.values():
        assert hits(memory + span_blob, SECRET_VALUES) == []


# ---------------------------------------------------------------------------- span processor, Phoenix


def oi_spans(provider, s: dict) -> None:
    """OpenInference spans of one RAG request: CHAIN -> RETRIEVER + LLM, with the sample's texts."""
    from opentelemetry import trace as t

    tracer = provider.get_tracer("openinference.instrumentation.manual")
    chain = tracer.start_span("rag", attributes={"openinference.span.kind": "CHAIN", "input.value": s["question"]})
    ctx = t.set_span_in_context(chain)
    ret = tracer.start_span(
        "retrieve", context=ctx, attributes={"openinference.span.kind": "RETRIEVER", "input.value": s["question"]}
    )
    for i, c in enumerate(s["contexts"]):
        ret.set_attribute(f"retrieval.documents.{i}.document.id", c["id"])
        ret.set_attribute(f"retrieval.documents.{i}.document.content", c["text"])
        ret.set_attribute(f"retrieval.documents.{i}.document.score", 1.0 - i / 10)
    ret.end()
    llm = tracer.start_span("llm", context=ctx, attributes={"openinference.span.kind": "LLM"})
    llm.set_attribute("llm.output_messages.0.message.role", "assistant")
    llm.set_attribute("llm.output_messages.0.message.content", s["answer"])
    chain.set_attribute("output.value", s["answer"])
    llm.end()
    chain.end()


class RecordingPhoenix:
    """Stands in for ``phoenix.client.Client``: records the annotations it is sent."""

    def __init__(self):
        self.spans = self
        self.sent: list = []

    def log_span_annotations(self, *, span_annotations, sync):  # noqa: D102
        self.sent += span_annotations

    def log_document_annotations(self, *, document_annotations, sync):  # noqa: D102
        self.sent += document_annotations


def test_span_processor_without_content_writes_no_content_to_spans_phoenix_store_or_log(tmp_path, logs):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from helpers.tracing import carriers
    from ragmeter.tracing import PhoenixAnnotationSink, RagmeterSpanProcessor

    texts = Texts(2)
    found = {}
    for capture in (True, False):
        logs.clear()
        db = tmp_path / f"otel-{capture}.db"
        phoenix = RecordingPhoenix()
        exporter = InMemorySpanExporter()
        provider = TracerProvider(shutdown_on_exit=False)
        proc = RagmeterSpanProcessor(
            [EchoMetric(), QuotingError(), "faithfulness", "citation_accuracy", "context_relevance"],
            "offline",
            tracer_provider=provider,
            store=db,
            sinks=[PhoenixAnnotationSink(phoenix)],
            capture_content=capture,
        )
        provider.add_span_processor(proc)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        for s in texts.samples:
            oi_spans(provider, s)
        assert proc.force_flush(60_000)
        proc.shutdown()
        spans = carriers(exporter)  # ragmeter's evaluation spans (the app's own spans are the app's)
        assert len(spans) == 2
        blob = json.dumps(
            [[dict(s.attributes), [(e.name, dict(e.attributes)) for e in s.events]] for s in spans] + [phoenix.sent],
            default=str,
        )
        found[capture] = (
            hits(blob, texts.needles),
            hits(db.read_bytes(), texts.needles),
            hits(log_text(logs), texts.needles),
        )
        provider.shutdown()
    assert found[True][0] and found[True][1]
    assert found[False] == ([], [], [])


@pytest.mark.parametrize(
    "text, want",
    [
        ("Token: abc123def", "Token: [REDACTED]"),
        ('"access_token": "zzzzzz"', '"access_token": "[REDACTED]"'),
        ("x-api-key: abcd1234", "x-api-key: [REDACTED]"),
        ("postgresql://a:b@c/d", "postgresql://a:[REDACTED]@c/d"),
        ("Authorization: Bearer xyz.abc", "Authorization: Bearer [REDACTED]"),
        ("ghp_" + "a" * 30, "[REDACTED]"),
        ("prompt_tokens: 12", "prompt_tokens: 12"),
        ("the token is here", "the token is here"),
    ],
)
def test_redaction_finds_each_shape_and_leaves_ordinary_text(text, want):
    """The cheap pre-check (needles, one JSON text per tree) lets every credential shape through
    to the patterns, and ordinary text (``prompt_tokens``) out; a clean tree is not copied."""
    from ragmeter.redact import redact, redact_value

    assert redact(text) == want
    tree = {"details": [{"quote": text, "judge_usage": {"prompt_tokens": 3}}]}
    assert (redact_value(tree) is tree) is (want == text)
    assert redact_value(tree)["details"][0]["quote"] == want
    assert redact_value({"nested": {"Password": 1234, "tokens": 5}}) == {
        "nested": {"Password": "[REDACTED]", "tokens": 5}
    }


def test_a_guarded_failure_logs_its_traceback_without_the_secret(logs):
    """A failure swallowed by ragmeter.guard is logged once with its traceback: the text redacted,
    and the exception on the record a redacted copy (the type and frames kept)."""
    from ragmeter.guard import never_raise

    with never_raise(f"privacy test {secrets.token_hex(4)}"):
        raise KeyError("upstream said Authorization: Bearer tok-5e4d3c2b1a9f8e7d")
    [record] = [r for r in logs.records if "privacy test" in r.getMessage()]
    assert record.exc_info[0] is KeyError and "tok-5e4d3c2b1a9f8e7d" not in str(record.exc_info[1])
    assert "Traceback" in log_text(logs) and hits(log_text(logs), SECRET_VALUES) == []
    assert "[REDACTED]" in log_text(logs)


def test_a_judge_sdks_debug_log_of_the_request_keeps_no_content(caplog):
    """The OpenAI and Anthropic SDKs log each request's body at DEBUG on their ``_base_client``
    logger (openai 1.58 does on the route ragmeter takes for it): inside a content scope the record
    keeps its lead-in only; outside it, the SDK's record is left as it is."""
    import ragmeter as rm
    from ragmeter.privacy import content_scope

    sample = rm.Sample("Who designed the Qvabc bridge?", ["Qvdef designed the Qvabc bridge."], answer="Qvdef did.")
    caplog.set_level(logging.DEBUG)
    for name in ("openai._base_client", "anthropic._base_client"):
        with content_scope(sample):
            logging.getLogger(name).debug("Request options: %s", {"json_data": {"messages": [sample.question]}})
        logging.getLogger(name).debug("Request options: %s", {"json_data": "outside"})
    messages = [r.getMessage() for r in caplog.records]
    assert (
        messages
        == ["Request options: [not logged: content capture is off]", "Request options: {'json_data': 'outside'}"] * 2
    )
