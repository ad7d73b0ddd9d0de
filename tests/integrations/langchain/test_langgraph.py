"""LangGraph message-state graphs captured turn by turn by the LangChain callback handler.

A real graph (``StateGraph`` over ``MessagesState``, ``MemorySaver`` checkpointer): a condense
node (a fake chat model writes the standalone question from the history), a retrieve node (a
real ``InMemoryVectorStore`` retriever with LangChain's deterministic fake embedding), a generate
node (a fake chat model quoting the retrieved text), and a small-talk node that answers without
retrieval. Each graph invocation is one turn: one Sample with the thread id as conversation id,
the turn number, the bounded history from the checkpointed state, the last user message as the
question; a turn without retrieval is recorded as one (no contexts, ``no_retrieval``).
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

import ragmeter as rm
from ragmeter.capture import scorable
from ragmeter.conversations import NO_RETRIEVAL_KEY, judged_question, no_retrieval_turn
from ragmeter.data import MAX_HISTORY
from ragmeter.integrations.langchain import RagmeterCallbackHandler

DOCS = [
    Document(id=f"doc-{i}", page_content=text)
    for i, text in enumerate(
        [
            "Dune is a 1965 novel by Frank Herbert.",
            "Frank Herbert was born in Tacoma in 1920.",
            "Dune won the Hugo Award in 1966.",
            "The Eiffel Tower was completed in 1889.",
            "Rust guarantees memory safety without a garbage collector.",
            "Paris is the capital of France.",
        ]
    )
]
SMALL_TALK = ("thanks", "thank you", "bye")


class Condenser(GenericFakeChatModel):
    """Writes '<follow-up> (re: <first user message>)': the standalone question of a follow-up."""

    messages: object = iter(())

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        humans = [m.content for m in messages if m.type == "human"]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"{humans[-1]} (re: {humans[0]})"))])


class Quoter(GenericFakeChatModel):
    """Answers by quoting the context in its system message, or politely without one."""

    messages: object = iter(())

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        first = messages[0].content if messages and messages[0].type == "system" else ""
        text = f"Per the context: {first.split('Context: ', 1)[1]}" if "Context: " in first else "You're welcome!"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


class ChatState(MessagesState):
    query: str
    context: str


@pytest.fixture(scope="module")
def retriever():
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(DOCS)
    return store.as_retriever(search_kwargs={"k": 2})


def build_graph(retriever, checkpointer=True):
    condenser, quoter = Condenser(), Quoter()

    def route(state):
        return "small_talk" if state["messages"][-1].content.lower().startswith(SMALL_TALK) else "condense"

    def condense(state, config):
        msgs = state["messages"]
        if sum(m.type == "human" for m in msgs) == 1:
            return {"query": msgs[-1].content}
        return {"query": condenser.invoke(msgs, config).content}

    async def acondense(state, config):  # the async graph's node (same logic, ainvoke)
        msgs = state["messages"]
        if sum(m.type == "human" for m in msgs) == 1:
            return {"query": msgs[-1].content}
        return {"query": (await condenser.ainvoke(msgs, config)).content}

    def retrieve(state, config):
        return {"context": " ".join(d.page_content for d in retriever.invoke(state["query"], config))}

    async def aretrieve(state, config):
        docs = await retriever.ainvoke(state["query"], config)
        return {"context": " ".join(d.page_content for d in docs)}

    def generate(state, config):
        return {"messages": [quoter.invoke([("system", f"Context: {state['context']}"), *state["messages"]], config)]}

    def small_talk(state, config):
        return {"messages": [quoter.invoke(state["messages"], config)]}

    graph = StateGraph(ChatState)
    graph.add_node("condense", _runnable(condense, acondense))
    graph.add_node("retrieve", _runnable(retrieve, aretrieve))
    graph.add_node("generate", generate)
    graph.add_node("small_talk", small_talk)
    graph.add_conditional_edges(START, route, ["condense", "small_talk"])
    graph.add_edge("condense", "retrieve")
    graph.add_edge("retrieve", "generate")
    graph.add_edge("generate", END)
    graph.add_edge("small_talk", END)
    return graph.compile(checkpointer=MemorySaver() if checkpointer else None)


def _runnable(sync, afunc):
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(sync, afunc=afunc)


def expected_contexts(retriever, query):
    return [d.page_content for d in retriever.invoke(query)]


def test_three_turns_with_a_checkpointer_one_sample_per_turn(retriever):
    app = build_graph(retriever)
    handler = RagmeterCallbackHandler(metrics=["faithfulness"], judge="offline")
    config = {"configurable": {"thread_id": "thread-7"}, "callbacks": [handler]}
    answers = [
        app.invoke({"messages": [HumanMessage(q)]}, config)["messages"][-1].content
        for q in ("Who wrote Dune?", "and when was he born?", "did it win awards?")
    ]
    assert handler.flush(10)
    t1, t2, t3 = sorted(handler.samples, key=lambda s: s.turn)
    assert [(s.conversation_id, s.turn) for s in (t1, t2, t3)] == [("thread-7", 1), ("thread-7", 2), ("thread-7", 3)]
    assert [s.question for s in (t1, t2, t3)] == ["Who wrote Dune?", "and when was he born?", "did it win awards?"]
    assert [s.answer for s in (t1, t2, t3)] == answers
    assert t1.history == [] and t1.standalone_question is None
    assert t1.context_texts == expected_contexts(retriever, "Who wrote Dune?")
    # turn 2 depends on turn 1: its history is turn 1 (from the checkpoint), it retrieved with the condensed question
    assert t2.history == [{"role": "user", "content": "Who wrote Dune?"}, {"role": "assistant", "content": answers[0]}]
    assert t2.standalone_question == "and when was he born? (re: Who wrote Dune?)"
    assert t2.context_texts == expected_contexts(retriever, "and when was he born? (re: Who wrote Dune?)")
    assert judged_question(t2) == "and when was he born? (re: Who wrote Dune?)"
    assert [m["content"] for m in t3.history] == ["Who wrote Dune?", answers[0], "and when was he born?", answers[1]]
    assert t3.metadata["run_metadata"]["thread_id"] == "thread-7"
    assert handler.stats["scored"] == 3
    convs = handler.results.conversations()
    assert [(c.conversation_id, [t for t, _, _ in c.turns]) for c in convs] == [("thread-7", [1, 2, 3])]


def test_a_turn_without_retrieval_is_recorded_as_such(retriever):
    app = build_graph(retriever)
    handler = RagmeterCallbackHandler(mode="offline")
    config = {"configurable": {"thread_id": "t-small"}, "callbacks": [handler]}
    for q in ("Who wrote Dune?", "thanks!"):
        app.invoke({"messages": [HumanMessage(q)]}, config)
    t1, t2 = handler.samples
    assert not no_retrieval_turn(t1) and NO_RETRIEVAL_KEY not in t1.metadata
    assert no_retrieval_turn(t2) and t2.contexts == [] and t2.metadata["retrievers"] == []
    assert (t2.turn, t2.question, t2.answer, len(t2.history)) == (2, "thanks!", "You're welcome!", 2)
    assert handler.stats["skipped_no_retriever"] == 0
    # judged metrics on it: not applicable, with the reason; the monitor counts it as no retrieval
    result = rm.evaluate(
        handler.samples, metrics=["faithfulness", "context_relevance"], judge="offline", progress=False
    )
    for name in ("faithfulness", "context_relevance"):
        score = result[1].scores[name]
        assert (
            score.value is None
            and score.status == "n/a"
            and score.explanation == "not applicable: the sample has no contexts"
        )
    monitor = rm.Monitor(meter_provider=False, min_samples=1, recent=2)
    for r in result:
        monitor.observe(r)
    # turn 1: chunks, context relevance says whether one is relevant; turn 2: no chunks -> counted
    rel_chunks = result[0].scores["context_relevance"].details["chunks"]
    turn1_none = not any((c.get("score") or 0.0) > 0.0 for c in rel_chunks)
    assert monitor.snapshot()["no_retrieval"] == pytest.approx((turn1_none + 1) / 2)


def test_a_chain_with_history_but_no_retriever_is_a_no_retrieval_turn_and_plain_runs_stay_skipped():
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("chat_history"), ("human", "{input}")])
    chat = prompt | Quoter()
    handler = RagmeterCallbackHandler(mode="offline")
    chat.invoke(
        {"input": "thanks", "chat_history": [("human", "Who wrote Dune?"), ("ai", "Frank Herbert.")]},
        config={"callbacks": [handler], "metadata": {"conversation_id": "c9"}},
    )
    Quoter().invoke("hello", config={"callbacks": [handler]})  # a model on its own: not a turn
    (prompt | Quoter()).invoke({"input": "hi", "chat_history": []}, config={"callbacks": [handler]})
    assert handler.stats["skipped_no_retriever"] == 1
    s, first = handler.samples
    assert (s.conversation_id, s.turn, s.question, s.answer) == ("c9", 2, "thanks", "You're welcome!")
    assert no_retrieval_turn(s) and no_retrieval_turn(first) and first.turn == 1


def test_without_a_checkpointer_the_history_is_the_input_and_is_bounded(retriever):
    app = build_graph(retriever, checkpointer=False)
    handler = RagmeterCallbackHandler(mode="offline")
    earlier = []
    for i in range(6):
        earlier += [HumanMessage(f"question {i}?"), AIMessage(f"answer {i}.")]
    app.invoke({"messages": [*earlier, HumanMessage("and the last one?")]}, {"callbacks": [handler]})
    [s] = handler.samples
    assert s.turn == 7 and s.question == "and the last one?" and s.conversation_id is None
    assert len(s.history) == MAX_HISTORY == 10
    assert s.history[0] == {"role": "user", "content": "question 1?"} and s.history[-1]["content"] == "answer 5."
    assert s.standalone_question == "and the last one? (re: question 0?)"
    short = RagmeterCallbackHandler(mode="offline", max_history=3)
    app.invoke({"messages": [*earlier, HumanMessage("and the last one?")]}, {"callbacks": [short]})
    [s3] = short.samples
    assert s3.turn == 7 and [m["content"] for m in s3.history] == ["answer 4.", "question 5?", "answer 5."]
    with pytest.raises(ValueError):
        RagmeterCallbackHandler(max_history=-1)


def test_concurrent_threads_never_mix(retriever):
    app = build_graph(retriever)
    handler = RagmeterCallbackHandler(metrics=["faithfulness"], judge="offline")
    openers = {f"thread-{i}": f"Topic {i}, who wrote it?" for i in range(8)}

    async def conversation(tid, opener):
        for text in (opener, "and when?", "thanks"):
            await app.ainvoke(
                {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": tid}, "callbacks": [handler]}
            )

    async def main():
        await asyncio.gather(*(conversation(t, q) for t, q in openers.items()))

    asyncio.run(main())
    assert handler.flush(20)
    by_thread: dict[str, list] = {}
    for s in handler.samples:
        by_thread.setdefault(s.conversation_id, []).append(s)
    assert set(by_thread) == set(openers)
    for tid, samples in by_thread.items():
        opener = openers[tid]
        samples.sort(key=lambda s: s.turn)
        assert [(s.turn, s.question) for s in samples] == [(1, opener), (2, "and when?"), (3, "thanks")]
        assert samples[1].standalone_question == f"and when? (re: {opener})"
        assert samples[1].context_texts == expected_contexts(retriever, f"and when? (re: {opener})")
        assert [m["content"] for m in samples[2].history][::2] == [opener, "and when?"]
        assert no_retrieval_turn(samples[2]) and not no_retrieval_turn(samples[1])
    # the two retrieval turns of each thread at least (no-retrieval turns too once the recorder scores them)
    assert handler.stats["scored"] == sum(map(scorable, handler.samples)) >= 16


@pytest.mark.parametrize("mode", ["values", "updates", "messages"])
def test_streamed_turns_are_captured_like_invoked_ones(retriever, mode):
    app = build_graph(retriever)
    handler = RagmeterCallbackHandler(mode="offline")
    config = {"configurable": {"thread_id": f"stream-{mode}"}, "callbacks": [handler]}
    answers = []
    for q in ("Who wrote Dune?", "and when was he born?"):
        for _ in app.stream({"messages": [HumanMessage(q)]}, config, stream_mode=mode):
            pass  # (langgraph 0.2.17 streams no "messages" chunks from a model that does not stream tokens)
        answers.append(app.get_state(config).values["messages"][-1].content)

    async def small_talk():
        async for _ in app.astream({"messages": [HumanMessage("thanks")]}, config, stream_mode=mode):
            pass

    asyncio.run(small_talk())
    t1, t2, t3 = handler.samples
    assert [(s.turn, s.question, s.metadata["status"]) for s in (t1, t2, t3)] == [
        (1, "Who wrote Dune?", "ok"),
        (2, "and when was he born?", "ok"),
        (3, "thanks", "ok"),
    ]
    assert [t1.answer, t2.answer] == answers and t3.answer == "You're welcome!"
    assert t2.standalone_question == "and when was he born? (re: Who wrote Dune?)" and len(t3.history) == 4
    assert no_retrieval_turn(t3) and t2.context_texts == expected_contexts(retriever, t2.standalone_question)


def test_inline_no_retrieval_turns_reach_the_monitor(retriever):
    app = build_graph(retriever)
    monitor = rm.Monitor(meter_provider=False, min_samples=1, recent=10)
    handler = RagmeterCallbackHandler(metrics=["faithfulness"], judge="offline", on_result=monitor.observe)
    config = {"configurable": {"thread_id": "t-mon"}, "callbacks": [handler]}
    for q in ("Who wrote Dune?", "thanks!", "bye"):
        app.invoke({"messages": [HumanMessage(q)]}, config)
    assert handler.flush(10)
    # 3 turns scored; the two small-talk turns count as no retrieval (turn 1 has chunks but no relevance signal)
    assert handler.stats["scored"] == 3 and handler.stats["skipped_no_contexts"] == 0
    assert monitor.snapshot()["no_retrieval"] == 1.0
    nr = [r for r in handler.results if no_retrieval_turn(r.sample)]
    assert len(nr) == 2 and all(r.scores["faithfulness"].status == "n/a" for r in nr)
