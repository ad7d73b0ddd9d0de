"""Shared helpers for the tracing tests (no tests here): real LangChain / LlamaIndex RAG
pipelines instrumented with OpenInference, hand-built GenAI / OpenLLMetry span trees, and small
deterministic metrics."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import json
import threading
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ragmeter.data import Score
from ragmeter.metrics.base import Metric

KB = {
    "d1": "Paris is the capital of France.",
    "d2": "Berlin is the capital of Germany.",
    "d3": "France borders Germany and Spain.",
    "d4": "Madrid is the capital of Spain.",
}


# --------------------------------------------------------------------------- metrics


class ContextCount(Metric):
    """Deterministic, no judge: number of contexts / 4 (capped at 1)."""

    name = "context_count"
    uses_judge = False
    requires = ("contexts",)
    threshold = 0.5
    warn = 0.25

    async def compute(self, sample, ctx):
        n = len(sample.contexts)
        return Score(self.name, min(1.0, n / 4), explanation=f"{n} contexts")


class AnswerOverlap(Metric):
    """Deterministic, no judge: share of answer words found in the contexts."""

    name = "answer_overlap"
    uses_judge = False
    requires = ("answer", "contexts")

    async def compute(self, sample, ctx):
        words = [w.strip(".,[]").lower() for w in sample.answer.split()]
        words = [w for w in words if w and not w.isdigit()]
        text = " ".join(sample.context_texts).lower()
        hit = sum(1 for w in words if w in text)
        return Score(self.name, hit / len(words) if words else 0.0, explanation=f"{hit} of {len(words)} words")


class GatedMetric(Metric):
    """Waits for ``gate`` before scoring (to hold the scorer busy)."""

    name = "gated"
    uses_judge = False

    def __init__(self, gate: threading.Event):
        super().__init__()
        self.gate = gate

    async def compute(self, sample, ctx):
        import asyncio

        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        return Score(self.name, 1.0, explanation="ok")


# --------------------------------------------------------------------------- providers


def memory_provider(*processors: Any, span_limits: Any = None) -> tuple[TracerProvider, InMemorySpanExporter]:
    """A provider with ``processors`` first, then a SimpleSpanProcessor into memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=span_limits, shutdown_on_exit=False)
    for p in processors:
        provider.add_span_processor(p)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def rag_provider(metrics: Any = None, judge: Any = None, *, batch: bool = False, **kwargs: Any):
    """The documented setup: TracerProvider, then the ragmeter processor (writing to it), then the
    exporting processor (simple, or batch with a long delay). Returns (processor, provider, exporter).
    The processor keeps its default schedule delay: its collector is woken by the spans, not polled."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ragmeter.tracing import RagmeterSpanProcessor

    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    proc = RagmeterSpanProcessor(
        metrics if metrics is not None else [ContextCount(), AnswerOverlap()], judge, tracer_provider=provider, **kwargs
    )
    provider.add_span_processor(proc)
    provider.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=60_000) if batch else SimpleSpanProcessor(exporter)
    )
    return proc, provider, exporter


@contextlib.contextmanager
def instrumented(instrumentor_cls: Any, provider: TracerProvider, **kwargs: Any):
    """Instrument with ``provider`` for the duration (instrumentors are process-wide singletons)."""
    inst = instrumentor_cls()
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()
    inst.instrument(tracer_provider=provider, **kwargs)
    try:
        yield inst
    finally:
        inst.uninstrument()


def carriers(exporter: InMemorySpanExporter) -> list:
    """The evaluation carrier spans the exporter received."""
    return [s for s in exporter.get_finished_spans() if (s.attributes or {}).get("ragmeter.carrier")]


def by_name(exporter: InMemorySpanExporter, name: str) -> list:
    """Finished spans called ``name``."""
    return [s for s in exporter.get_finished_spans() if s.name == name]


# --------------------------------------------------------------------------- receivers


class RecordingServer(http.server.ThreadingHTTPServer):
    """An HTTP endpoint on 127.0.0.1 that records every POST as ``(path, decode(body))`` (gzip
    bodies inflated first) in ``requests`` and answers ``reply(decoded)`` =
    ``(status, content_type, bytes)``; a GET is answered ``get(path)`` (501 without ``get``).
    ``close()`` stops it."""

    def __init__(
        self,
        decode: Callable[[bytes], Any],
        reply: Callable[[Any], tuple[int, str, bytes]],
        get: Callable[[str], tuple[int, str, bytes]] | None = None,
    ):
        self.requests: list[tuple[str, Any]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            if get is not None:

                def do_GET(self):  # noqa: N802
                    status, content_type, out = get(self.path)
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                decoded = decode(body)
                server.requests.append((self.path, decoded))
                status, content_type, out = reply(decoded)
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self.shutdown()
        self.server_close()


class OTLPReceiver(RecordingServer):
    """A real OTLP/HTTP (protobuf) traces receiver: each request decoded with opentelemetry-proto."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as pb

        def decode(body: bytes) -> Any:
            req = pb.ExportTraceServiceRequest()
            req.ParseFromString(body)
            return req

        out = pb.ExportTraceServiceResponse().SerializeToString()
        super().__init__(decode, lambda _req: (200, "application/x-protobuf", out))

    @property
    def endpoint(self) -> str:
        """The traces endpoint (``/v1/traces``)."""
        return self.url + "/v1/traces"

    def resource_spans(self) -> list:
        """Every received span with its resource: ``[(resource, span)]`` (protobuf messages)."""
        return [
            (rs.resource, sp)
            for _, req in self.requests
            for rs in req.resource_spans
            for ss in rs.scope_spans
            for sp in ss.spans
        ]


class OTLPLogsReceiver(RecordingServer):
    """A real OTLP/HTTP (protobuf) logs receiver: each request decoded with opentelemetry-proto."""

    def __init__(self):
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as pb

        def decode(body: bytes) -> Any:
            req = pb.ExportLogsServiceRequest()
            req.ParseFromString(body)
            return req

        out = pb.ExportLogsServiceResponse().SerializeToString()
        super().__init__(decode, lambda _req: (200, "application/x-protobuf", out))

    def records(self) -> list:
        """Every received log record with its resource: ``[(resource, record)]`` (protobuf messages)."""
        return [
            (rl.resource, lr)
            for _, req in self.requests
            for rl in req.resource_logs
            for sl in rl.scope_logs
            for lr in sl.log_records
        ]


def event_name(record: Any) -> str | None:
    """The event name of a log record (SDK ``ReadableLogRecord`` or OTLP protobuf): its
    ``event_name`` field where the SDK and protocol have one, else its ``event.name`` attribute
    (older SDKs)."""
    lr = getattr(record, "log_record", record)
    name = getattr(lr, "event_name", None)
    if name:
        return name
    attrs = lr.attributes
    if isinstance(attrs, (list, tuple)) or hasattr(attrs, "add"):  # protobuf KeyValue list
        return next((kv.value.string_value for kv in attrs if kv.key == "event.name"), None)
    return (attrs or {}).get("event.name")


# --------------------------------------------------------------------------- LangChain


def langchain_chain(responses: list[str] | None = None, streaming: bool = False):
    """A real LCEL RAG chain: keyword retriever -> format -> prompt -> fake chat model -> parser."""
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    class KeywordRetriever(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            q = query.lower()
            hits = [k for k, v in KB.items() if any(w in v.lower() for w in q.replace("?", "").split() if len(w) > 4)]
            return [Document(page_content=KB[k], metadata={"id": k}) for k in hits[:3]]

    responses = responses or ["Paris is the capital of France [1]."]
    if streaming:
        llm = GenericFakeChatModel(messages=iter([AIMessage(content=r) for r in responses]))
    else:
        llm = FakeListChatModel(responses=responses)
    prompt = ChatPromptTemplate.from_template("Answer from the context.\nContext: {context}\nQuestion: {question}")

    def fmt(docs):
        return "\n".join(f"[{i + 1}] {d.page_content}" for i, d in enumerate(docs))

    return {"context": KeywordRetriever() | fmt, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()


# --------------------------------------------------------------------------- LlamaIndex


def llamaindex_index():
    """A real VectorStoreIndex over KB with a deterministic mock embedding (no Settings changed)."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    docs = [Document(text=v, id_=k) for k, v in KB.items()]
    return VectorStoreIndex.from_documents(docs, embed_model=MockEmbedding(embed_dim=8))


def llamaindex_query_engine(index, streaming: bool = False):
    """A retriever query engine with a mock LLM."""
    from llama_index.core.llms import MockLLM

    return index.as_query_engine(llm=MockLLM(max_tokens=6), similarity_top_k=2, streaming=streaming)


# --------------------------------------------------------------------------- hand-built trees


def genai_rag(
    tracer,
    question: str = "How tall is the Eiffel Tower?",
    answer: str = "It is 330 metres tall [1].",
    docs: list[dict] | None = None,
    content: bool = True,
):
    """GenAI convention: a retrieval span and a chat span (the caller provides the parent)."""
    docs = (
        docs
        if docs is not None
        else [
            {"id": "kb-1", "score": 0.9, "content": "The Eiffel Tower is 330 metres tall."},
            {"id": "kb-2", "score": 0.7, "content": "It was completed in 1889."},
        ]
    )
    if not content:
        docs = [{"id": d["id"], "score": d["score"]} for d in docs]
    with tracer.start_as_current_span(
        "retrieval kb",
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "kb"},
    ) as r:
        if content:
            r.set_attribute("gen_ai.retrieval.query.text", question)
        r.set_attribute("gen_ai.retrieval.documents", json.dumps(docs))
    with tracer.start_as_current_span(
        "chat gpt-4o-mini",
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"},
    ) as c:
        if content:
            c.set_attribute(
                "gen_ai.input.messages",
                json.dumps(
                    [
                        {"role": "system", "parts": [{"type": "text", "content": "Use the sources."}]},
                        {"role": "user", "parts": [{"type": "text", "content": question}]},
                    ]
                ),
            )
            c.set_attribute(
                "gen_ai.output.messages",
                json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
                ),
            )


def openllmetry_rag(
    provider, question: str = "How high is Mount Everest?", answer: str = "Mount Everest is 8,849 metres high [1]."
):
    """OpenLLMetry's LangChain spans: workflow -> task (documents in its input) -> chat."""
    tracer = provider.get_tracer("opentelemetry.instrumentation.langchain", "0.40.5")
    docs = [
        {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "document", "Document"],
            "kwargs": {"page_content": "Mount Everest is 8,849 metres high.", "metadata": {"id": "geo-7"}},
        },
        {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "document", "Document"],
            "kwargs": {"page_content": "K2 is the second-highest mountain.", "metadata": {"id": "geo-9"}},
        },
    ]
    with tracer.start_as_current_span("RunnableSequence.workflow") as wf:
        wf.set_attribute("traceloop.span.kind", "workflow")
        wf.set_attribute(
            "traceloop.entity.input", json.dumps({"inputs": {"input": question}, "tags": [], "kwargs": {}})
        )
        with tracer.start_as_current_span("format_docs.task") as t:
            t.set_attribute("traceloop.span.kind", "task")
            t.set_attribute("traceloop.entity.input", json.dumps({"inputs": {"input": docs}, "kwargs": {}}))
            t.set_attribute("traceloop.entity.output", json.dumps({"outputs": "Mount Everest is 8,849 metres high."}))
        with tracer.start_as_current_span("ChatOpenAI.chat", kind=SpanKind.CLIENT) as c:
            c.set_attribute("llm.request.type", "chat")
            c.set_attribute("gen_ai.prompt.0.role", "user")
            c.set_attribute("gen_ai.prompt.0.content", f"Context: ...\nQuestion: {question}")
            c.set_attribute("gen_ai.completion.0.role", "assistant")
            c.set_attribute("gen_ai.completion.0.content", answer)
        wf.set_attribute("traceloop.entity.output", json.dumps({"outputs": answer, "kwargs": {}}))


def oi_rag(
    provider,
    *,
    n_docs: int = 2,
    answer: str | None = "Paris is the capital of France [1].",
    end_entry_first: bool = False,
    question: str = "What is the capital of France?",
):
    """Hand-built OpenInference spans (scope openinference.instrumentation.manual): CHAIN ->
    RETRIEVER + LLM. ``end_entry_first``: the chain ends before the LLM span (streaming); returns
    the still-open LLM span then (end it yourself)."""
    tracer = provider.get_tracer("openinference.instrumentation.manual")
    chain = tracer.start_span("rag", attributes={"openinference.span.kind": "CHAIN", "input.value": question})
    from opentelemetry import trace as t

    ctx = t.set_span_in_context(chain)
    ret = tracer.start_span(
        "retrieve", context=ctx, attributes={"openinference.span.kind": "RETRIEVER", "input.value": question}
    )
    for i in range(n_docs):
        key = list(KB)[i % len(KB)]
        ret.set_attribute(f"retrieval.documents.{i}.document.id", f"{key}-{i}")
        ret.set_attribute(f"retrieval.documents.{i}.document.content", KB[key])
        ret.set_attribute(f"retrieval.documents.{i}.document.score", 1.0 - i / 100)
    ret.end()
    llm = tracer.start_span("llm", context=ctx, attributes={"openinference.span.kind": "LLM"})
    if end_entry_first:
        chain.set_attribute("output.value", '{"response_gen": "<generator object StreamingResponse>"}')
        chain.set_attribute("output.mime_type", "application/json")
        chain.end()
        return chain, llm
    if answer is not None:
        llm.set_attribute("llm.output_messages.0.message.role", "assistant")
        llm.set_attribute("llm.output_messages.0.message.content", answer)
        chain.set_attribute("output.value", answer)
    llm.end()
    chain.end()
    return chain, None
