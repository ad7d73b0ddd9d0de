"""Convention readers and grouping: real OpenInference LangChain / LlamaIndex traces, hand-built
GenAI and OpenLLMetry trees, streaming, dropped attributes, content capture off."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from helpers.tracing import (
    KB,
    genai_rag,
    instrumented,
    langchain_chain,
    llamaindex_index,
    llamaindex_query_engine,
    memory_provider,
    oi_rag,
    openllmetry_rag,
)
from ragmeter.tracing.grouping import find_invocations
from ragmeter.tracing.readers import question_of
from ragmeter.tracing.roles import span_role
from ragmeter.tracing.samples import build_samples


def _only(builds):
    assert len(builds) == 1, [(b.reason, b.detail) for b in builds]
    return builds[0]


def test_roles_by_convention():
    class S:
        def __init__(self, **attrs):
            self.attributes = attrs

    assert span_role(S(**{"openinference.span.kind": "RETRIEVER"})) == "retriever"
    assert span_role(S(**{"openinference.span.kind": "reranker"})) == "reranker"
    assert span_role(S(**{"openinference.span.kind": "GUARDRAIL"})) == "other"
    assert span_role(S(**{"gen_ai.operation.name": "retrieval"})) == "retriever"
    assert span_role(S(**{"gen_ai.operation.name": "chat"})) == "llm"
    assert span_role(S(**{"gen_ai.operation.name": "invoke_agent"})) == "agent"
    assert span_role(S(**{"traceloop.span.kind": "workflow"})) == "chain"
    assert (
        span_role(S(**{"traceloop.span.kind": "task", "traceloop.entity.input": '{"x": [{"page_content": "a"}]}'}))
        == "retriever"
    )
    assert span_role(S(**{"llm.request.type": "chat"})) == "llm"
    assert span_role(S(**{"http.route": "/ask"})) is None


def test_openinference_langchain_trace():
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider, exporter = memory_provider()
    with instrumented(LangChainInstrumentor, provider):
        langchain_chain().invoke("What is the capital of France?")
    b = _only(build_samples(exporter.get_finished_spans()))
    s = b.sample
    assert s.question == "What is the capital of France?"
    assert s.answer == "Paris is the capital of France [1]."
    assert [c.id for c in s.contexts] == ["d1", "d2", "d3"]  # ids from the document metadata
    assert s.context_texts == [KB["d1"], KB["d2"], KB["d3"]]
    root = next(sp for sp in exporter.get_finished_spans() if sp.parent is None)
    otel = s.metadata["otel"]
    assert otel["entry_span_id"] == otel["target_span_id"] == format(root.context.span_id, "016x")
    assert otel["convention"] == "openinference" and otel["contexts_source"] == "retriever"
    retriever = next(sp for sp in exporter.get_finished_spans() if span_role(sp) == "retriever")
    rid = format(retriever.context.span_id, "016x")
    assert otel["documents"] == [[rid, 0], [rid, 1], [rid, 2]]
    assert s.id == f"{otel['trace_id']}-{otel['target_span_id']}"


def test_two_rag_calls_inside_one_request_span_are_two_invocations():
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider, exporter = memory_provider()
    chain = langchain_chain(["Paris is the capital of France [1].", "Madrid is the capital of Spain [1]."])
    with instrumented(LangChainInstrumentor, provider):
        with provider.get_tracer("app").start_as_current_span("POST /ask") as request:
            chain.invoke("What is the capital of France?")
            chain.invoke("What is the capital of Spain?")
    builds = build_samples(exporter.get_finished_spans())
    assert [b.sample.question for b in builds] == ["What is the capital of France?", "What is the capital of Spain?"]
    assert [b.sample.answer for b in builds] == [
        "Paris is the capital of France [1].",
        "Madrid is the capital of Spain [1].",
    ]
    entries = {b.invocation.entry_id for b in builds}
    assert len(entries) == 2 and request.get_span_context().span_id not in entries


def test_openinference_llamaindex_query_engine_dedupes_nested_retrievers():
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    index = llamaindex_index()
    provider, exporter = memory_provider()
    with instrumented(LlamaIndexInstrumentor, provider):
        response = llamaindex_query_engine(index).query("What is the capital of France?")
    b = _only(build_samples(exporter.get_finished_spans()))
    s = b.sample
    assert s.question == "What is the capital of France?"
    assert s.answer == str(response)
    assert len(s.contexts) == 2  # two nested retriever spans, one document list
    assert all(c.score is not None and c.id for c in s.contexts)
    assert b.invocation.entry.name == "RetrieverQueryEngine.query"


def test_llamaindex_streaming_answer_comes_from_the_llm_span():
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    index = llamaindex_index()
    provider, exporter = memory_provider()
    with instrumented(LlamaIndexInstrumentor, provider):
        response = llamaindex_query_engine(index, streaming=True).query("What is the capital of France?")
        text = "".join(response.response_gen)
    b = _only(build_samples(exporter.get_finished_spans()))
    assert "<generator" in b.invocation.entry.attributes["output.value"]
    # OpenInference records the streamed LLM output as it had accumulated when the span ended
    assert b.sample.answer and text.startswith(b.sample.answer)


def test_genai_spans_under_a_plain_parent_and_two_calls_in_one_request():
    provider, exporter = memory_provider()
    tracer = provider.get_tracer("my-app")
    with tracer.start_as_current_span("POST /chat") as request:
        genai_rag(tracer)
        genai_rag(tracer, question="When was it completed?", answer="In 1889 [2].")
    builds = build_samples(exporter.get_finished_spans())
    assert [(b.sample.question, b.sample.answer) for b in builds] == [
        ("How tall is the Eiffel Tower?", "It is 330 metres tall [1]."),
        ("When was it completed?", "In 1889 [2]."),
    ]
    rid = request.get_span_context().span_id
    for b in builds:
        assert b.invocation.entry_id == rid and b.invocation.synthetic
        assert b.invocation.target.name == "chat gpt-4o-mini"
        assert [c.id for c in b.sample.contexts] == ["kb-1", "kb-2"] and b.sample.contexts[0].score == 0.9
    assert builds[0].invocation.target_id != builds[1].invocation.target_id


def test_genai_spans_whose_parent_is_remote_form_a_virtual_entry():
    provider, exporter = memory_provider()
    remote = SpanContext(0x1234, 0xABCD, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    from opentelemetry import context

    token = context.attach(set_span_in_context(NonRecordingSpan(remote)))
    try:
        genai_rag(provider.get_tracer("my-app"))
    finally:
        context.detach(token)
    b = _only(build_samples(exporter.get_finished_spans()))
    assert b.invocation.entry_id == 0xABCD and b.invocation.entry is None
    assert b.sample.answer == "It is 330 metres tall [1]."


def test_openllmetry_documents_inside_task_json():
    provider, exporter = memory_provider()
    openllmetry_rag(provider)
    b = _only(build_samples(exporter.get_finished_spans()))
    s = b.sample
    assert s.question == "How high is Mount Everest?"
    assert s.answer == "Mount Everest is 8,849 metres high [1]."
    assert [c.id for c in s.contexts] == ["geo-7", "geo-9"]
    assert s.metadata["otel"]["convention"] == "openllmetry"
    assert b.invocation.entry.name == "RunnableSequence.workflow"


def test_reranker_output_is_preferred_over_retriever_documents():
    provider, exporter = memory_provider()
    tracer = provider.get_tracer("openinference.instrumentation.manual")
    with tracer.start_as_current_span("rag", attributes={"openinference.span.kind": "CHAIN", "input.value": "q?"}) as c:
        with tracer.start_as_current_span("retrieve", attributes={"openinference.span.kind": "RETRIEVER"}) as r:
            for i, k in enumerate(KB):
                r.set_attribute(f"retrieval.documents.{i}.document.content", KB[k])
        with tracer.start_as_current_span("rerank", attributes={"openinference.span.kind": "RERANKER"}) as rr:
            rr.set_attribute("reranker.output_documents.0.document.content", KB["d4"])
            rr.set_attribute("reranker.output_documents.0.document.id", "d4")
        with tracer.start_as_current_span("llm", attributes={"openinference.span.kind": "LLM"}) as llm:
            llm.set_attribute("llm.output_messages.0.message.content", "Madrid.")
        c.set_attribute("output.value", "Madrid.")
    b = _only(build_samples(exporter.get_finished_spans()))
    assert [x.id for x in b.sample.contexts] == ["d4"]
    assert b.sample.metadata["otel"]["contexts_source"] == "reranker"


def test_content_capture_off_is_skipped_not_scored():
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.langchain import LangChainInstrumentor

    provider, exporter = memory_provider()
    config = TraceConfig(hide_outputs=True, hide_inputs=True, hide_output_messages=True, hide_input_messages=True)
    with instrumented(LangChainInstrumentor, provider, config=config):
        langchain_chain().invoke("What is the capital of France?")
    b = _only(build_samples(exporter.get_finished_spans()))
    assert b.sample is None and b.reason in ("no_contexts", "no_answer")
    # GenAI without opt-in content: ids only
    provider, exporter = memory_provider()
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("req"):
        genai_rag(tracer, content=False)
    b = _only(build_samples(exporter.get_finished_spans()))
    assert b.sample is None and b.reason == "no_contexts"


def test_dropped_attributes_mark_the_document_list_incomplete():
    provider, exporter = memory_provider(span_limits=SpanLimits(max_span_attributes=12))
    oi_rag(provider, n_docs=8)  # 2 + 3 * 8 attributes on the retriever span: the first documents are evicted
    b = _only(build_samples(exporter.get_finished_spans()))
    retriever = next(s for s in exporter.get_finished_spans() if s.name == "retrieve")
    assert retriever.dropped_attributes > 0
    assert b.sample is None and b.reason == "truncated"


def test_truncated_retriever_falls_back_to_the_prompt_template_context():
    provider, exporter = memory_provider(span_limits=SpanLimits(max_span_attributes=12))
    tracer = provider.get_tracer("openinference.instrumentation.manual")
    with tracer.start_as_current_span("rag", attributes={"openinference.span.kind": "CHAIN", "input.value": "q?"}) as c:
        with tracer.start_as_current_span("retrieve", attributes={"openinference.span.kind": "RETRIEVER"}) as r:
            for i in range(20):
                r.set_attribute(f"retrieval.documents.{i}.document.content", f"doc {i}")
        with tracer.start_as_current_span("llm", attributes={"openinference.span.kind": "LLM"}) as llm:
            llm.set_attribute(
                "llm.prompt_template.variables", json.dumps({"context": "doc 0\ndoc 1", "question": "q?"})
            )
            llm.set_attribute("llm.output_messages.0.message.content", "An answer.")
        c.set_attribute("output.value", "An answer.")
    b = _only(build_samples(exporter.get_finished_spans()))
    assert b.sample.context_texts == ["doc 0\ndoc 1"]
    assert b.sample.metadata["otel"]["contexts_source"] == "prompt_template"


def test_question_from_json_inputs():
    class S:
        def __init__(self, **attrs):
            self.attributes = attrs

    assert (
        question_of(
            S(
                **{
                    "input.value": json.dumps({"question": "Q1", "chat_history": []}),
                    "input.mime_type": "application/json",
                }
            )
        )
        == "Q1"
    )
    assert question_of(S(**{"input.value": json.dumps({"query_bundle": {"query_str": "Q2"}})})) == "Q2"
    assert question_of(S(**{"traceloop.entity.input": json.dumps({"inputs": {"input": "Q3"}})})) == "Q3"
    assert (
        question_of(
            S(**{"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Q4"}]}])})
        )
        == "Q4"
    )
    assert question_of(S(**{"input.value": "__REDACTED__"})) is None


def test_llm_calls_without_retrieval_are_not_rag_and_carriers_are_ignored():
    provider, exporter = memory_provider()
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
        pass
    with tracer.start_as_current_span(
        "ragmeter.evaluation", attributes={"ragmeter.carrier": True, "openinference.span.kind": "RETRIEVER"}
    ):
        pass
    invs = find_invocations(exporter.get_finished_spans())
    assert len(invs) == 1
    b = _only(build_samples(exporter.get_finished_spans()))
    assert b.reason == "not_rag"
