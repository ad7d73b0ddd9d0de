"""Chat sessions in traces: ``session.id`` (OpenInference) / ``gen_ai.conversation.id`` (GenAI)
become the conversation id, the LLM's input messages the history, the calls' start times the
turn order (offline, with the whole session at hand); a session call without retrieval is a
no-retrieval turn. Real OpenTelemetry SDK spans: hand-built GenAI trees and a real LangGraph app
under the OpenInference LangChain instrumentor; the span processor and ``evaluate_traces`` give
per-conversation results."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind

from helpers.tracing import AnswerOverlap, ContextCount, memory_provider, rag_provider
from ragmeter.conversations import no_retrieval_turn
from ragmeter.result import EvaluationResult
from ragmeter.tracing.offline import encode_otlp_json, evaluate_traces
from ragmeter.tracing.samples import build_samples

FIRST = "How tall is the Eiffel Tower?"


def parts(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def genai_turn(
    tracer,
    conv: str,
    history: list[tuple[str, str]],
    question: str,
    answer: str,
    query: str | None = None,
    retrieve: bool = True,
):
    """One chat request (``POST /chat``): a condensing chat call when there is history, a
    retrieval with the (condensed) query, an answering chat call with the history; every span
    carries ``gen_ai.conversation.id``."""
    conv_attr = {"gen_ai.conversation.id": conv}
    msgs = [parts(r, t) for r, t in history] + [parts("user", question)]
    with tracer.start_as_current_span("POST /chat"):
        if history and retrieve:
            with tracer.start_as_current_span(
                "chat condense", kind=SpanKind.CLIENT, attributes={"gen_ai.operation.name": "chat", **conv_attr}
            ) as c:
                c.set_attribute(
                    "gen_ai.input.messages", json.dumps(msgs + [parts("user", "Rephrase as one question.")])
                )
                c.set_attribute("gen_ai.output.messages", json.dumps([parts("assistant", query)]))
        if retrieve:
            with tracer.start_as_current_span(
                "retrieval kb", kind=SpanKind.CLIENT, attributes={"gen_ai.operation.name": "retrieval", **conv_attr}
            ) as r:
                r.set_attribute("gen_ai.retrieval.query.text", query or question)
                r.set_attribute(
                    "gen_ai.retrieval.documents",
                    json.dumps([{"id": f"kb-{len(history)}", "content": f"Fact for: {query or question}"}]),
                )
        with tracer.start_as_current_span(
            "chat answer", kind=SpanKind.CLIENT, attributes={"gen_ai.operation.name": "chat", **conv_attr}
        ) as c:
            c.set_attribute("gen_ai.input.messages", json.dumps([parts("system", "Use the sources.")] + msgs))
            c.set_attribute("gen_ai.output.messages", json.dumps([parts("assistant", answer)]))


def two_interleaved_sessions(tracer):
    """Sessions A and B, three turns each, interleaved A1 B1 A2 B2 A3(no retrieval) B3."""
    hist: dict[str, list] = {"A": [], "B": []}
    plan = [
        ("A", FIRST, "330 metres.", None, True),
        ("B", "Who built it?", "Gustave Eiffel's company.", None, True),
        ("A", "and when was it built?", "1887-1889.", "When was the Eiffel Tower built?", True),
        ("B", "how long did it take?", "Two years.", "How long did building the tower take?", True),
        ("A", "thanks!", "You're welcome.", None, False),
        ("B", "and who designed it?", "Koechlin and Nouguier.", "Who designed the Eiffel Tower?", True),
    ]
    for conv, q, a, query, retrieve in plan:
        genai_turn(tracer, conv, hist[conv], q, a, query, retrieve)
        hist[conv] += [("user", q), ("assistant", a)]


def test_genai_sessions_become_conversations_turn_by_turn():
    provider, exporter = memory_provider()
    two_interleaved_sessions(provider.get_tracer("chat-app"))
    builds = build_samples(exporter.get_finished_spans())
    assert [b.reason for b in builds] == [None] * 6
    by_conv: dict[str, list] = {}
    for b in builds:
        by_conv.setdefault(b.sample.conversation_id, []).append(b.sample)
    a, b = by_conv["A"], by_conv["B"]
    assert [(s.turn, s.question) for s in a] == [(1, FIRST), (2, "and when was it built?"), (3, "thanks!")]
    # the user's message is the question, the condensed retrieval query the standalone question
    assert (a[0].standalone_question, a[1].standalone_question) == (None, "When was the Eiffel Tower built?")
    assert [s.turn for s in b] == [1, 2, 3]
    # the condensing call belongs to its turn (one sample per request, not a not_rag call before it)
    assert a[1].context_texts == ["Fact for: When was the Eiffel Tower built?"] and a[1].answer == "1887-1889."
    assert a[1].history == [{"role": "user", "content": FIRST}, {"role": "assistant", "content": "330 metres."}]
    assert a[0].history == [] and len(a[2].history) == 4
    assert all(m["content"] not in ("Who built it?", "Gustave Eiffel's company.") for s in a for m in s.history)
    # turn 3 of A ran no retrieval: a no-retrieval turn, not skipped as "not RAG"
    assert no_retrieval_turn(a[2]) and a[2].answer == "You're welcome." and a[2].contexts == []
    assert not any(no_retrieval_turn(s) for s in a[:2] + b)


def test_calls_outside_a_session_are_unchanged():
    provider, exporter = memory_provider()
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
        pass  # an LLM call without retrieval and without a session: still "not RAG"
    genai_turn(tracer, "C", [], FIRST, "330 metres.")
    not_rag, rag = build_samples(exporter.get_finished_spans())
    assert not_rag.reason == "not_rag"
    assert (rag.sample.conversation_id, rag.sample.turn, rag.sample.history) == ("C", 1, [])


def test_evaluate_traces_gives_per_conversation_results(tmp_path):
    provider, exporter = memory_provider()
    two_interleaved_sessions(provider.get_tracer("chat-app"))
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(encode_otlp_json(exporter.get_finished_spans())) + "\n")
    result = evaluate_traces(path, metrics=[ContextCount()], progress=False)
    assert len(result) == 6 and result.trace_stats["samples"] == 6 and "not_rag" not in result.trace_stats
    convs = {c.conversation_id: c for c in result.conversations("context_count")}
    # one context per retrieval turn: 1 / 4 = 0.25; A's turn 3 has none: not applicable
    assert [(t, v) for t, _, v in convs["A"].turns] == [(1, 0.25), (2, 0.25), (3, None)]
    assert [(t, v) for t, _, v in convs["B"].turns] == [(1, 0.25), (2, 0.25), (3, 0.25)]
    no_ret = next(r for r in result if r.sample.conversation_id == "A" and r.sample.turn == 3)
    assert no_ret.scores["context_count"].status == "n/a"


def test_the_span_processor_scores_session_turns_with_their_history():
    proc, provider, exporter = rag_provider([ContextCount(), AnswerOverlap()])
    two_interleaved_sessions(provider.get_tracer("chat-app"))
    assert provider.force_flush(10_000)
    results = list(proc.results)
    assert len(results) == 6
    by_conv = EvaluationResult(results, ["context_count", "answer_overlap"]).conversations("context_count")
    assert sorted(c.conversation_id for c in by_conv) == ["A", "B"]
    for c in by_conv:  # live, the turn comes from the history the LLM was given
        assert [t for t, _, _ in c.turns] == [1, 2, 3]
    proc.shutdown()


def test_langgraph_under_openinference_one_sample_per_turn():
    pytest.importorskip("langgraph")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.messages import HumanMessage
    from langchain_core.vectorstores import InMemoryVectorStore
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from test_langgraph import DOCS, build_graph

    from helpers.tracing import instrumented

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(DOCS)
    app = build_graph(store.as_retriever(search_kwargs={"k": 2}))
    provider, exporter = memory_provider()
    with instrumented(LangChainInstrumentor, provider):
        for q in ("Who wrote Dune?", "and when was he born?", "thanks!"):
            app.invoke({"messages": [HumanMessage(q)]}, {"configurable": {"thread_id": "thread-9"}})
    t1, t2, t3 = [b.sample for b in build_samples(exporter.get_finished_spans())]
    assert [(s.conversation_id, s.turn, s.question) for s in (t1, t2, t3)] == [
        ("thread-9", 1, "Who wrote Dune?"),
        ("thread-9", 2, "and when was he born?"),
        ("thread-9", 3, "thanks!"),
    ]
    assert (
        t1.answer.startswith("Per the context: ") and t3.answer == "You're welcome!"
    )  # the AI message, not the question
    assert t2.standalone_question == "and when was he born? (re: Who wrote Dune?)"
    assert t2.history == [{"role": "user", "content": "Who wrote Dune?"}, {"role": "assistant", "content": t1.answer}]
    assert no_retrieval_turn(t3) and not no_retrieval_turn(t2)
