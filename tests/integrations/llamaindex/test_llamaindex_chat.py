"""LlamaIndex chat engines and agents captured turn by turn (issue 22): real condense-question,
context and condense-plus-context chat engines and FunctionAgents over a real VectorStoreIndex,
with a deterministic LLM (``helpers.llamaindex_chat.ChatLLM``) and LlamaIndex's
``MockFunctionCallingLLM``; scores through the scripted judge."""

from __future__ import annotations

import asyncio
import threading

import llama_index.core
import pytest
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.memory import Memory
from packaging.version import Version

import ragmeter as rm
from helpers.llamaindex_app import code_of, question
from helpers.llamaindex_chat import (
    agent,
    condense_plus_context_engine,
    condense_question_engine,
    context_engine,
    react_agent,
)
from ragmeter.conversations import judged_question, no_retrieval_turn
from ragmeter.data import MAX_HISTORY
from ragmeter.integrations.llamaindex import RagmeterInstrumentation


def fact(animal: str) -> str:
    """The index's sentence about ``animal`` (the answer the test LLM gives)."""
    return f"The secret code of the {animal} is {code_of(animal)}."


def by_turn(samples) -> list:
    return sorted(samples, key=lambda s: s.turn)


# ------------------------------------------------------------------------- chat engines, three turns


def test_condense_question_engine_records_the_condensed_question_and_the_judge_reads_it(index, judge):
    engine = condense_question_engine(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        for text in (question("otter"), "And the heron?", "And the lynx?"):
            engine.chat(text)
    t1, t2, t3 = by_turn(meter.samples)
    conv = engine._memory.session_id  # LlamaIndex Memory's session id names the conversation
    assert [(s.conversation_id, s.turn) for s in (t1, t2, t3)] == [(conv, 1), (conv, 2), (conv, 3)]
    assert t1.question == question("otter") and t1.standalone_question is None and t1.history == []
    # turn 2 only makes sense with turn 1: the engine condensed it, and that is what was retrieved with
    assert t2.question == "And the heron?"
    assert t2.standalone_question == "What is the secret code of the heron?"
    assert t2.history == [
        {"role": "user", "content": question("otter")},
        {"role": "assistant", "content": fact("otter")},
    ]
    assert [c.id for c in t2.contexts] == ["doc-heron"] and t2.answer == fact("heron")
    assert t3.standalone_question == "What is the secret code of the lynx?" and len(t3.history) == 4
    assert {s.metadata["engine"] for s in (t1, t2, t3)} == {"CondenseQuestionChatEngine"}
    assert all(s.metadata["turn_kind"] == "chat" and "no_retrieval" not in s.metadata for s in (t1, t2, t3))
    # one sample per turn: the query engine inside the turn is part of it, not a sample of its own
    assert meter.stats["captured"] == 3 and meter.stats["scored"] == 3
    # the judge read the condensed question of turns 2 and 3
    assert [i["question"] for i in judge.inputs["extract_claims"]] == [
        question("otter"),
        "What is the secret code of the heron?",
        "What is the secret code of the lynx?",
    ]
    assert judged_question(t2) == "What is the secret code of the heron?"
    [conversation] = meter.results.conversations("faithfulness")
    assert conversation.conversation_id == conv
    assert [(t, v) for t, _, v in conversation.turns] == [(1, 1.0), (2, 1.0), (3, 1.0)]
    assert conversation.slope == 0.0 and not conversation.falling


@pytest.mark.parametrize("make", [context_engine, condense_plus_context_engine])
def test_context_engines_three_turns(index, judge, make):
    engine = make(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        answers = [str(engine.chat(t)) for t in (question("otter"), "And the heron?", "And the lynx?")]
    assert answers == [fact("otter"), fact("heron"), fact("lynx")]
    t1, t2, t3 = by_turn(meter.samples)
    assert len({s.conversation_id for s in (t1, t2, t3)}) == 1 and [s.turn for s in (t1, t2, t3)] == [1, 2, 3]
    assert [[c.id for c in s.contexts] for s in (t1, t2, t3)] == [["doc-otter"], ["doc-heron"], ["doc-lynx"]]
    assert t3.history[-2:] == [
        {"role": "user", "content": "And the heron?"},
        {"role": "assistant", "content": fact("heron")},
    ]
    if make is context_engine:  # retrieves with the message as it is: the judge reads the history
        assert t1.conversation_id.startswith("chat-")  # a ChatMemoryBuffer has no session id: one is made
        assert t2.standalone_question is None
        assert judged_question(t2).startswith("Conversation so far:\nuser: What is the secret code of the otter?")
    else:
        assert t2.standalone_question == "What is the secret code of the heron?"
    assert [r.scores["faithfulness"].value for r in meter.results] == [1.0, 1.0, 1.0]


def test_reset_starts_a_new_conversation_and_a_given_chat_history_replaces_ours(index, judge):
    engine = context_engine(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge, mode="offline") as meter:
        engine.chat(question("otter"))
        engine.chat("And the heron?")
        engine.reset()
        engine.chat(question("yak"))
        from llama_index.core.llms import ChatMessage

        given = [
            ChatMessage(role="user", content="Hi"),
            ChatMessage(role="assistant", content="Hello."),
            ChatMessage(role="user", content=question("bison")),
            ChatMessage(role="assistant", content=fact("bison")),
        ]
        engine.chat("And the ibis?", chat_history=given)
    a1, a2, b1, b2 = meter.samples
    assert a1.conversation_id == a2.conversation_id != b1.conversation_id == b2.conversation_id
    assert [s.turn for s in (a1, a2, b1, b2)] == [1, 2, 1, 3]
    assert b1.history == []
    assert b2.history == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": question("bison")},
        {"role": "assistant", "content": fact("bison")},
    ]


def test_history_is_bounded_and_turns_keep_counting(index, judge):
    engine = context_engine(index)
    animals = ["otter", "heron", "lynx", "yak", "bison", "ibis", "koala"]
    with RagmeterInstrumentation(["faithfulness"], judge=judge, mode="offline") as meter:
        for a in animals:
            engine.chat(question(a))
    last = meter.samples[-1]
    assert last.turn == 7 and len(last.history) == MAX_HISTORY == 10
    assert last.history[0] == {"role": "user", "content": question("heron")}  # turn 1 fell out
    assert last.history[-1] == {"role": "assistant", "content": fact("ibis")}


def test_conversation_id_from_instrument_tags_wins(index, judge):
    engine = condense_plus_context_engine(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge, mode="offline") as meter:
        with instrument_tags({"conversation_id": "user-42", "reference": fact("otter")}):
            engine.chat(question("otter"))
        with instrument_tags({"session_id": "user-42"}):
            engine.chat("And the heron?")
    t1, t2 = meter.samples
    assert (t1.conversation_id, t1.turn, t2.conversation_id, t2.turn) == ("user-42", 1, "user-42", 2)
    assert t1.reference == fact("otter") and t1.metadata["tags"] == {"conversation_id": "user-42"}


# ------------------------------------------------------------------------- concurrency


def test_concurrent_conversations_on_threads_never_mix(index, judge):
    openers = ["otter", "badger", "heron", "lynx", "walrus", "gecko"]
    follow = {a: ANIMAL_PAIRS[i] for i, a in enumerate(openers)}
    engines = {a: condense_plus_context_engine(index) for a in openers}
    barrier = threading.Barrier(len(openers))
    errors = []

    def talk(animal):
        try:
            barrier.wait()
            for text in (question(animal), f"And the {follow[animal][0]}?", f"And the {follow[animal][1]}?"):
                engines[animal].chat(text)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        threads = [threading.Thread(target=talk, args=(a,)) for a in openers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    check_conversations(meter, {engines[a]._memory.session_id: (a, *follow[a]) for a in openers})


# llama-index-core 0.14.23 (our oldest supported; lazy from 0.14.25) reads a sync chat engine's whole stream inside
# ``stream_chat``: the caller gets one chunk, and an LLM stream that fails makes ``stream_chat`` raise
LAZY_SYNC_STREAMS = Version(llama_index.core.__version__) >= Version("0.14.25")

ANIMAL_PAIRS = [
    ("bison", "ibis"),
    ("koala", "lemur"),
    ("tapir", "vole"),
    ("yak", "zebra"),
    ("puffin", "raven"),
    ("ocelot", "salmon"),
    ("alpaca", "beaver"),
    ("cougar", "dingo"),
]


def check_conversations(meter, expected: dict) -> None:
    """Every conversation has its own three turns, in order, with its own history and contexts."""
    by_conv: dict = {}
    for s in meter.samples:
        by_conv.setdefault(s.conversation_id, []).append(s)
    assert set(by_conv) == set(expected)
    for conv, (a, b, c) in expected.items():
        t1, t2, t3 = by_turn(by_conv[conv])
        assert [s.turn for s in (t1, t2, t3)] == [1, 2, 3]
        assert [s.question for s in (t1, t2, t3)] == [question(a), f"And the {b}?", f"And the {c}?"]
        assert [s.answer for s in (t1, t2, t3)] == [fact(a), fact(b), fact(c)]
        assert [[x.id for x in s.contexts] for s in (t1, t2, t3)] == [[f"doc-{a}"], [f"doc-{b}"], [f"doc-{c}"]]
        assert t3.history == [
            {"role": "user", "content": question(a)},
            {"role": "assistant", "content": fact(a)},
            {"role": "user", "content": f"And the {b}?"},
            {"role": "assistant", "content": fact(b)},
        ]
    assert meter.stats["scored"] == 3 * len(expected) and meter.stats["capture_errors"] == 0


def test_concurrent_conversations_on_asyncio_never_mix(index, judge):
    openers = ["otter", "badger", "heron", "lynx", "walrus", "gecko", "marten", "jackal"]
    follow = {a: ANIMAL_PAIRS[i] for i, a in enumerate(openers)}

    async def talk(animal):
        engine = context_engine(index)
        with instrument_tags({"conversation_id": f"user-{animal}"}):  # per task: tags follow the task
            for text in (question(animal), f"And the {follow[animal][0]}?", f"And the {follow[animal][1]}?"):
                await engine.achat(text)
                await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*(talk(a) for a in openers))

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        asyncio.run(main())
    check_conversations(meter, {f"user-{a}": (a, *follow[a]) for a in openers})


# ------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("make", [condense_question_engine, condense_plus_context_engine])
def test_stream_chat_is_recorded_with_the_full_text(index, judge, make):
    engine = make(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        first = engine.stream_chat(question("otter"))
        tokens = list(first.response_gen)
        second = engine.stream_chat("And the yak?")
        text = "".join(second.response_gen)
    assert "".join(tokens).strip() == fact("otter")
    assert len(tokens) > 3 if LAZY_SYNC_STREAMS else len(tokens) == 1  # it did stream (see LAZY_SYNC_STREAMS)
    t1, t2 = by_turn(meter.samples)
    assert (t1.answer, t2.answer) == (fact("otter"), text.strip())
    assert t2.standalone_question == "What is the secret code of the yak?"
    assert t2.history[-1] == {"role": "assistant", "content": fact("otter")}
    assert t1.metadata["streaming"] is True and t1.metadata["status"] == "ok"
    assert [r.scores["faithfulness"].value for r in meter.results] == [1.0, 1.0]
    assert meter.stats["open"] == 0


def test_astream_chat_is_recorded_with_the_full_text(index, judge):
    engine = condense_plus_context_engine(index)

    async def main():
        out = []
        for text in (question("otter"), "And the bison?"):
            response = await engine.astream_chat(text)
            out.append("".join([t async for t in response.async_response_gen()]))
        return out

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        texts = asyncio.run(main())
    t1, t2 = by_turn(meter.samples)
    assert [t1.answer, t2.answer] == [t.strip() for t in texts] == [fact("otter"), fact("bison")]
    assert t2.standalone_question == "What is the secret code of the bison?" and t2.turn == 2
    assert [r.scores["faithfulness"].value for r in meter.results] == [1.0, 1.0]


def test_a_failing_turn_is_recorded_as_error_and_stays_out_of_the_history(index, judge):
    engine = context_engine(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        engine.chat(question("otter"))
        engine._llm.fail = True
        with pytest.raises(RuntimeError):
            engine.chat("And the heron?")
        engine._llm.fail = False
        engine.chat("And the lynx?")
    _, t2, t3 = by_turn(meter.samples)
    assert t2.metadata["status"] == "error" and "LLM backend unavailable" in t2.metadata["error"]
    assert t3.history == [
        {"role": "user", "content": question("otter")},
        {"role": "assistant", "content": fact("otter")},
    ]
    assert meter.stats["scored"] == 2 and meter.stats["errored"] == 1


# ------------------------------------------------------------------------- agents

#: LlamaIndex's workflow agents read deprecated pydantic attributes when they are built.
agent_warnings = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect")


@agent_warnings
@pytest.mark.parametrize("tool", ["query_engine", "retriever"])
def test_agent_turns_with_and_without_a_tool_call_feed_the_monitor(index, judge, tool):
    monitor = rm.Monitor(
        window=10, min_samples=2, recent=2, meter_provider=False, retrieval_score_floor=0.0, no_retrieval_limit=0.4
    )
    bot = agent(index, tool)
    memory = Memory.from_defaults(session_id="agent-s1")

    async def main():
        return [str(await bot.run(question("otter"), memory=memory)), str(await bot.run("hi", memory=memory))]

    with RagmeterInstrumentation(["faithfulness"], judge=judge, on_result=monitor.observe) as meter:
        answers = asyncio.run(main())
    with_tool, without = meter.samples
    assert [c.id for c in with_tool.contexts] == ["doc-otter"] and fact("otter") in answers[0]
    assert with_tool.metadata["engine"] == "FunctionAgent" and with_tool.metadata["turn_kind"] == "agent"
    assert (with_tool.conversation_id, with_tool.turn, with_tool.history) == ("agent-s1", 1, [])
    # the agent answered without its tool: recorded and scored as a turn without retrieval
    assert without.contexts == [] and without.metadata["no_retrieval"] is True and without.answer == answers[1]
    assert no_retrieval_turn(without) and not no_retrieval_turn(with_tool)
    assert (without.conversation_id, without.turn) == ("agent-s1", 2)
    assert without.history == [
        {"role": "user", "content": question("otter")},
        {"role": "assistant", "content": answers[0]},
    ]
    assert meter.stats["scored"] == 2 and meter.stats["skipped_no_contexts"] == 0
    assert [r.sample.id for r in meter.results] == [with_tool.id, without.id]
    assert meter.results[1].scores["faithfulness"].status == "n/a"  # no contexts to be faithful to
    # the monitor saw both turns: one of the two had no retrieval (the other's retriever score is > 0)
    assert monitor.snapshot()["no_retrieval"] == 0.5
    assert monitor.snapshot()["firing"].get(("no_retrieval_rate", None)) is True


@agent_warnings
def test_agent_run_with_a_given_chat_history_and_a_tagged_conversation(index, judge):
    from llama_index.core.llms import ChatMessage

    bot = agent(index)
    history = [
        ChatMessage(role="user", content=question("otter")),
        ChatMessage(role="assistant", content=fact("otter")),
    ]

    async def main():
        with instrument_tags({"thread_id": "t-9"}):
            await bot.run(question("heron"), chat_history=history)
        await bot.run(question("lynx"))  # no memory, no tag: a turn of no known conversation

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        asyncio.run(main())
    t2, alone = meter.samples
    assert (t2.conversation_id, t2.turn) == ("t-9", 2)
    assert t2.history == [
        {"role": "user", "content": question("otter")},
        {"role": "assistant", "content": fact("otter")},
    ]
    assert [c.id for c in t2.contexts] == ["doc-heron"] and t2.answer == fact("heron")
    assert t2.standalone_question is None  # the tool ran with the question itself
    assert (alone.conversation_id, alone.turn, alone.history) == (None, 1, [])
    assert [r.scores["faithfulness"].value for r in meter.results] == [1.0, 1.0]


@agent_warnings
@pytest.mark.filterwarnings("ignore:is_running called from within a step:DeprecationWarning")
def test_react_agent_and_agent_workflow_turns(index, judge):
    from llama_index.core.agent.workflow import AgentWorkflow

    bot, flow = react_agent(index), AgentWorkflow(agents=[agent(index)])

    async def main():
        return [str(await bot.run(question("otter"))), str(await bot.run("hi")), str(await flow.run(question("heron")))]

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        answers = asyncio.run(main())
    react, hello, _ = meter.samples
    assert answers == [fact("otter"), "Hello!", fact("heron")]
    assert [s.metadata["engine"] for s in meter.samples] == ["ReActAgent", "ReActAgent", "AgentWorkflow"]
    assert [[c.id for c in s.contexts] for s in meter.samples] == [["doc-otter"], [], ["doc-heron"]]
    assert hello.metadata["no_retrieval"] is True and "no_retrieval" not in react.metadata
    assert [r.scores["faithfulness"].value for r in meter.results] == [1.0, None, 1.0]
    assert meter.results[1].scores["faithfulness"].status == "n/a"


def test_query_engines_outside_chat_are_captured_as_before(index, judge):
    from helpers.llamaindex_app import engine as query_engine

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        query_engine(index).query(question("otter"))
    [s] = meter.samples
    assert s.conversation_id is None and s.turn is None and s.history == []
    assert "turn_kind" not in s.metadata and s.metadata["engine"] == "RetrieverQueryEngine"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # LlamaIndex's writer thread
@pytest.mark.parametrize("make", [condense_question_engine, condense_plus_context_engine])
def test_a_stream_cut_midway_is_recorded_as_partial_with_its_text_so_far(index, judge, make):
    engine = make(index)
    engine._llm.break_after = 3
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        with pytest.raises(ConnectionError):
            response = engine.stream_chat(question("otter"))
            "".join(response.response_gen)
    [s] = meter.samples
    assert "ConnectionError: stream cut" in s.metadata["error"]
    if LAZY_SYNC_STREAMS:  # the caller read part of the stream: a partial turn with its text so far
        assert s.metadata["status"] == "partial" and s.metadata["partial_reason"] == "the stream raised"
        assert s.metadata["partial_answer"] == "The secret code"
    else:  # stream_chat itself raised: a failed turn
        assert s.metadata["status"] == "error" and "partial_answer" not in s.metadata
    assert s.answer is None and meter.stats["scored"] == 0 and meter.stats["open"] == 0
