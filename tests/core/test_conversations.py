"""Conversations: chat-turn samples round-trip through JSONL, CSV, results files and the store;
RAGAS ``MultiTurnSample`` and DeepEval ``ConversationalTestCase`` files load one sample per
retrieval turn; judged metrics read the standalone question or the recent history (and send the
same inputs as ever without history); per-conversation results with a slope worked by hand.

Neither ragas nor deepeval is installed here, so the files are written by hand in the documented
shapes: RAGAS ``MultiTurnSample.user_input`` is a list of messages ``{"content", "type":
"human" | "ai" | "tool"}`` (an ``ai`` message may carry ``tool_calls``), with ``reference`` for the
whole conversation; DeepEval's ``ConversationalTestCase`` has ``turns`` of ``{"role": "user" |
"assistant", "content"}`` where an assistant turn carries its ``retrieval_context``, plus
``scenario`` and ``expected_outcome``.
"""

from __future__ import annotations

import asyncio
import csv
import doctest
import json

import pytest

import ragmeter as rm
from ragmeter import conversations
from ragmeter.conversations import conversation_results, judged_question, slope
from ragmeter.data import MAX_HISTORY, RecordError, Sample, Score
from ragmeter.judges import OfflineJudge
from ragmeter.judges.base import Judge
from ragmeter.metrics.scoring import SampleResult
from ragmeter.readers import load_samples, save_samples
from ragmeter.result import EvaluationResult
from ragmeter.store import Store

HISTORY = [
    {"role": "user", "content": "What was France's GDP in 2019?"},
    {"role": "assistant", "content": "About 2.7 trillion USD."},
]


def turn_sample(**kw) -> Sample:
    base = dict(
        question="and in 2020?",
        contexts=[{"text": "France's GDP in 2020 was 2.6 trillion USD.", "id": "d2"}],
        answer="2.6 trillion USD.",
        conversation_id="c-1",
        turn=2,
        history=HISTORY,
        standalone_question="What was France's GDP in 2020?",
    )
    return Sample(**{**base, **kw})


def test_doctests():
    assert doctest.testmod(conversations).failed == 0


# ---------------------------------------------------------------------------------- data model


def test_sample_fields_validate_and_normalise_roles():
    s = Sample(
        "q", history=[{"type": "human", "content": "hi"}, {"type": "ai", "content": "hello"}], conversation_id=7, turn=3
    )
    assert s.history == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert s.conversation_id == "7" and s.turn == 3
    for kw, field in [
        ({"turn": 0}, "turn"),
        ({"turn": "2"}, "turn"),
        ({"history": "hi"}, "history"),
        ({"history": [{"role": "narrator", "content": "x"}]}, "history"),
        ({"history": [{"role": "user", "content": 3}]}, "history"),
        ({"conversation_id": 1.5}, "conversation_id"),
        ({"standalone_question": 3}, "standalone_question"),
    ]:
        with pytest.raises(RecordError) as err:
            Sample("q", **kw)
        assert err.value.field == field


def test_samples_outside_conversations_keep_their_ids_and_dicts():
    plain = Sample("q", ["c"], answer="a")
    assert set(plain.to_dict()) == {"id", "question", "contexts", "answer"}
    # the same words in two conversations are two samples
    a = Sample("and in 2020?", conversation_id="c-1", turn=2)
    b = Sample("and in 2020?", conversation_id="c-2", turn=2)
    assert a.id != b.id != Sample("and in 2020?").id


def test_stable_id_of_a_plain_sample_is_unchanged():
    import hashlib

    h = hashlib.sha1()
    for part in ["q", "a", "c"]:
        h.update(part.encode())
        h.update(b"\x00")
    assert Sample("q", ["c"], answer="a").id == h.hexdigest()[:12]


def test_jsonl_and_csv_round_trip(tmp_path):
    samples = [
        turn_sample(),
        turn_sample(turn=3, question="and 2021?", standalone_question=None, id="x3"),
        Sample("plain question", ["ctx"]),
    ]
    for name in ("s.jsonl", "s.csv"):
        path = save_samples(samples, tmp_path / name)
        back = load_samples(path, on_error="raise")
        assert list(back) == samples, name
    save_samples([Sample("plain question", ["ctx"])], tmp_path / "plain.csv")
    assert (tmp_path / "plain.csv").read_text().splitlines()[
        0
    ] == "id,question,contexts,answer,reference,relevant_ids,metadata"


def test_results_file_round_trip(tmp_path):
    r = SampleResult(turn_sample(), {"faithfulness": Score("faithfulness", 0.5, label="fail")})
    assert SampleResult.from_dict(json.loads(json.dumps(r.to_dict()))).sample == r.sample
    result = EvaluationResult([r], ["faithfulness"])
    back = EvaluationResult.load(result.save(tmp_path / "r.jsonl"))
    assert back[0].sample == r.sample and back[0].sample.history == HISTORY


def test_store_keeps_the_turn_inside_the_metadata_column(tmp_path):
    s = turn_sample(metadata={"user": "u1"})
    result = EvaluationResult(
        [
            SampleResult(s, {"m": Score("m", 1.0, label="pass")}),
            SampleResult(Sample("plain", ["c"], metadata={"k": 1}), {"m": Score("m", 0.0, label="fail")}),
        ],
        ["m"],
    )
    store = Store(tmp_path / "runs.db")
    run_id = store.record_run(result)
    back = Store(tmp_path / "runs.db").run(run_id)
    assert back[0].sample == s and back[0].sample.metadata == {"user": "u1"}
    assert back[1].sample.metadata == {"k": 1} and back[1].sample.conversation_id is None
    store.close()


# ---------------------------------------------------------------------------------- loaders

RAGAS_MULTI = {
    "user_input": [
        {"content": "When was the Eiffel Tower built?", "type": "human"},
        {"content": "", "type": "ai", "tool_calls": [{"name": "search", "args": {"q": "Eiffel Tower built"}}]},
        {"content": "The tower was built from 1887 to 1889.", "type": "tool"},
        {"content": "From 1887 to 1889.", "type": "ai"},
        {"content": "Thanks!", "type": "human"},
        {"content": "You're welcome.", "type": "ai"},
        {"content": "How tall is it?", "type": "human"},
        {"content": "", "type": "ai", "tool_calls": [{"name": "search", "args": {"q": "Eiffel Tower height"}}]},
        {"content": "The tower is 330 metres tall.", "type": "tool"},
        {"content": "Paris has many monuments.", "type": "tool"},
        {"content": "330 metres.", "type": "ai"},
    ],
    "reference": "Built 1887-1889; 330 m tall.",
    "reference_tool_calls": None,
}

DEEPEVAL_CONV = {
    "scenario": "Refunds",
    "expected_outcome": "Explains the refund policy.",
    "turns": [
        {"role": "user", "content": "What if these shoes don't fit?"},
        {
            "role": "assistant",
            "content": "We offer a 30-day full refund.",
            "retrieval_context": ["All customers are eligible for a 30 day full refund at no extra cost."],
        },
        {"role": "user", "content": "And for sale items?"},
        {
            "role": "assistant",
            "content": "Sale items get store credit.",
            "retrieval_context": ["Sale items are refunded as store credit."],
        },
    ],
}


def test_ragas_multi_turn_sample_gives_one_sample_per_retrieval_turn(tmp_path):
    path = tmp_path / "multi.jsonl"
    path.write_text(json.dumps(RAGAS_MULTI) + "\n" + json.dumps({**RAGAS_MULTI, "conversation_id": "conv-b"}) + "\n")
    ds = load_samples(path, on_error="raise")
    assert [(s.conversation_id == "conv-b", s.turn) for s in ds] == [(False, 1), (False, 3), (True, 1), (True, 3)]
    first, third = ds[0], ds[1]
    assert first.question == "When was the Eiffel Tower built?" and first.history == []
    assert first.context_texts == ["The tower was built from 1887 to 1889."] and first.answer == "From 1887 to 1889."
    assert third.context_texts == ["The tower is 330 metres tall.", "Paris has many monuments."]
    assert third.answer == "330 metres." and third.id == f"{third.conversation_id}:3"
    assert third.history == [
        {"role": "user", "content": "When was the Eiffel Tower built?"},
        {"role": "assistant", "content": "From 1887 to 1889."},
        {"role": "user", "content": "Thanks!"},
        {"role": "assistant", "content": "You're welcome."},
    ]
    assert third.metadata == {"reference": "Built 1887-1889; 330 m tall."}  # the conversation's, not the turn's
    assert third.reference is None
    assert ds[2].id == "conv-b:1"
    # the same conversation loads to the same ids every time
    assert [s.id for s in load_samples(path)] == [s.id for s in ds]


@pytest.mark.parametrize("wrap", [lambda cases: cases, lambda cases: {"test_cases": cases}])
def test_deepeval_conversational_test_case_loads(tmp_path, wrap):
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(wrap([DEEPEVAL_CONV, {**DEEPEVAL_CONV, "name": "second"}])))
    ds = load_samples(path, on_error="raise")
    assert [(s.conversation_id, s.turn) for s in ds][2:] == [("second", 1), ("second", 2)]
    t2 = ds[1]
    assert t2.question == "And for sale items?" and t2.answer == "Sale items get store credit."
    assert t2.context_texts == ["Sale items are refunded as store credit."]
    assert t2.history == [
        {"role": "user", "content": "What if these shoes don't fit?"},
        {"role": "assistant", "content": "We offer a 30-day full refund."},
    ]
    assert t2.metadata == {"scenario": "Refunds", "expected_outcome": "Explains the refund policy."}
    result = rm.evaluate(ds, metrics=["faithfulness"], judge="offline", progress=False)
    assert len(result) == 4 and [c.conversation_id for c in result.conversations()] == [ds[0].conversation_id, "second"]


def test_history_is_bounded(tmp_path):
    turns = []
    for n in range(1, 9):
        turns += [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": f"answer {n}", "retrieval_context": [f"chunk {n}"]},
        ]
    ds = load_samples_from([{"turns": turns, "conversation_id": "long"}], tmp_path)
    assert MAX_HISTORY == 10 and len(ds) == 8
    assert len(ds[7].history) == 10 and ds[7].history[0] == {"role": "user", "content": "question 3"}
    assert ds[7].history[-1] == {"role": "assistant", "content": "answer 7"}


def load_samples_from(records, tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return load_samples(path)


def test_bad_conversations_name_the_record_and_field_and_the_rest_loads(tmp_path):
    good = {"turns": DEEPEVAL_CONV["turns"], "conversation_id": "ok"}
    bad_role = {"turns": [{"role": "narrator", "content": "x"}]}
    bad_turn = {
        "turns": [{"role": "user", "content": "   "}, {"role": "assistant", "content": "a", "retrieval_context": ["c"]}]
    }
    not_objects = {"user_input": ["hello"]}
    ds = load_samples_from([bad_role, good, bad_turn, not_objects], tmp_path)
    assert [s.id for s in ds] == ["ok:1", "ok:2"]
    assert [(e.location, e.field) for e in ds.errors] == [
        ("line 1", "turns"),
        ("line 3, turn 1", "question"),
        ("line 4", "user_input"),
    ]


# ---------------------------------------------------------------------------------- judge inputs


class RecordingJudge(Judge):
    """The offline judge's answers, with every task's inputs kept."""

    name = "offline"
    kind = "CODE"
    generates_questions = False

    def __init__(self):
        self.inner = OfflineJudge()
        self.inputs: list[tuple[str, dict]] = []

    async def run(self, task, inputs):
        self.inputs.append((task, json.loads(json.dumps(inputs))))
        return await self.inner.run(task, inputs)


METRICS = ["faithfulness", "context_relevance", "answer_relevancy", "context_recall", "answer_correctness"]


def questions_sent(sample: Sample) -> tuple[set, list]:
    judge = RecordingJudge()
    rm.evaluate([sample], metrics=METRICS, judge=judge, progress=False)
    return {i["question"] for _, i in judge.inputs if "question" in i}, judge.inputs


def test_without_history_the_requests_are_byte_identical():
    kw = dict(
        question="When was it built?",
        contexts=["The tower was built from 1887 to 1889."],
        answer="From 1887 to 1889.",
        reference="1887 to 1889.",
    )
    plain_q, plain = questions_sent(Sample(**kw))
    _, in_conv = questions_sent(Sample(**kw, conversation_id="c", turn=1))
    assert plain_q == {"When was it built?"}
    assert json.dumps(in_conv, sort_keys=True) == json.dumps(plain, sort_keys=True)
    assert {t for t, _ in plain} == {
        "extract_claims",
        "verify_claims",
        "rate_chunks",
        "attribute_statements",
        "generate_questions",
        "compare_claims",
    }


def test_standalone_question_is_what_the_judge_reads():
    sent, inputs = questions_sent(turn_sample(reference="2.6 trillion USD."))
    assert sent == {"What was France's GDP in 2020?"}
    assert len(inputs) == 6  # one call per task, as without a conversation


def test_without_standalone_question_the_judge_reads_the_recent_history():
    sent, _ = questions_sent(
        turn_sample(standalone_question=None, history=HISTORY + [{"role": "user", "content": "  and   with\nspaces  "}])
    )
    assert sent == {
        (
            "Conversation so far:\n"
            "user: What was France's GDP in 2019?\n"
            "assistant: About 2.7 trillion USD.\n"
            "user: and with spaces\n"
            "Current question: and in 2020?"
        )
    }


def test_long_history_messages_are_cut_for_the_judge():
    s = Sample("and then?", history=[{"role": "assistant", "content": "x" * 5000}])
    line = judged_question(s).splitlines()[1]
    assert line == "assistant: " + "x" * (conversations.MESSAGE_CHARS - 1) + "…"


# ---------------------------------------------------------------------------------- conversation results


def result_of(conv: str, turn: int, value: float | None) -> SampleResult:
    score = (
        Score("faithfulness", value, label=None if value is None else "pass")
        if value is not None
        else Score("faithfulness", None, error="JudgeError: timeout")
    )
    return SampleResult(Sample(f"q{turn} of {conv}", conversation_id=conv, turn=turn), {"faithfulness": score})


def test_slope_worked_by_hand():
    # turns 1, 2, 3 scored 0.9, 0.8, 0.4: mean turn 2, mean value 0.7;
    # sum((t - 2)(v - 0.7)) = (-1)(0.2) + 0(0.1) + (1)(-0.3) = -0.5; sum((t - 2)^2) = 2; slope = -0.25
    assert slope([(1, 0.9), (2, 0.8), (3, 0.4)]) == pytest.approx(-0.25)
    assert slope([(1, 0.5)]) is None and slope([(2, 0.5), (2, 0.9)]) is None
    # turns 1, 3 (turn 2 had no value): (1, 1.0), (3, 0.5) -> slope -0.25
    assert slope([(1, 1.0), (3, 0.5)]) == pytest.approx(-0.25)


def test_conversations_interleaved_never_mix():
    rows = [
        result_of("A", 2, 0.8),
        result_of("B", 1, 0.6),
        result_of("A", 1, 0.9),
        result_of("B", 2, 0.7),
        result_of("A", 3, 0.4),
        result_of("B", 3, None),
        SampleResult(Sample("alone"), {}),
    ]
    result = EvaluationResult(rows, ["faithfulness"])
    a, b = result.conversations()
    assert a.conversation_id == "A" and [(t, v) for t, _, v in a.turns] == [(1, 0.9), (2, 0.8), (3, 0.4)]
    assert a.worst == (3, rows[4].sample.id, 0.4) and a.slope == pytest.approx(-0.25) and a.falling
    assert [(t, v) for t, _, v in b.turns] == [(1, 0.6), (2, 0.7), (3, None)]
    assert b.worst[0] == 1 and b.slope == pytest.approx(0.1) and not b.falling
    assert conversation_results(rows, "faithfulness", tolerance=0.3)[0].falling is False
    assert a.to_dict()["turns"][0] == [1, rows[2].sample.id, 0.9]


def test_markdown_report_groups_by_conversation():
    rows = [result_of("A", 1, 0.9), result_of("A", 2, 0.8), result_of("A", 3, 0.4)]
    md = EvaluationResult(rows, ["faithfulness"]).to_markdown()
    assert "## Conversations" in md
    assert "| A | faithfulness | 1: 0.9000, 2: 0.8000, 3: 0.4000 | 3 (0.4000) | -0.2500 | yes |" in md
    assert "## Conversations" not in EvaluationResult([SampleResult(Sample("q"), {})], ["faithfulness"]).to_markdown()


# ---------------------------------------------------------------------------------- LangChain capture


def history_aware_chat(handler_store: dict):
    """``create_history_aware_retriever`` as langchain builds it (a RunnableBranch named
    ``chat_retriever_chain``: the input alone without history, else prompt | model | parser |
    retriever) in a retrieval chain, wrapped in ``RunnableWithMessageHistory``; fake models."""
    pytest.importorskip("langchain_core")
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.chat_history import InMemoryChatMessageHistory
    from langchain_core.documents import Document
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableBranch, RunnablePassthrough
    from langchain_core.runnables.history import RunnableWithMessageHistory

    class Condenser(GenericFakeChatModel):
        """'<follow-up> (re: <first user message>)': a condensed question tied to its conversation."""

        messages: object = iter(())

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            humans = [m.content for m in messages if m.type == "human"]
            return ChatResult(
                generations=[ChatGeneration(message=AIMessage(content=f"{humans[-2]} (re: {humans[0]})"))]
            )

    class Answerer(GenericFakeChatModel):
        """Quotes the context it was given."""

        messages: object = iter(())

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            context = messages[0].content.split("Context:\n", 1)[1]
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"Per the context: {context}"))])

    class EchoRetriever(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager: CallbackManagerForRetrieverRun):
            return [Document(id=f"doc:{query}", page_content=f"Facts about {query}.")]

        async def _aget_relevant_documents(self, query, *, run_manager):
            await asyncio.sleep(0.001)
            return self._get_relevant_documents(query, run_manager=run_manager)

    retriever = EchoRetriever()
    condense = ChatPromptTemplate.from_messages(
        [
            MessagesPlaceholder("chat_history"),
            ("human", "{input}"),
            ("human", "Rephrase the question above as a standalone question."),
        ]
    )
    history_aware = RunnableBranch(
        (lambda x: not x.get("chat_history", False), (lambda x: x["input"]) | retriever),
        condense | Condenser() | StrOutputParser() | retriever,
    ).with_config(run_name="chat_retriever_chain")
    qa = ChatPromptTemplate.from_messages(
        [("system", "Context:\n{context}"), MessagesPlaceholder("chat_history"), ("human", "{input}")]
    )
    rag = (
        RunnablePassthrough.assign(context=history_aware | (lambda docs: "\n".join(d.page_content for d in docs)))
        | qa
        | Answerer()
        | StrOutputParser()
    )
    return RunnableWithMessageHistory(
        rag,
        lambda sid: handler_store.setdefault(sid, InMemoryChatMessageHistory()),
        input_messages_key="input",
        history_messages_key="chat_history",
    )


langchain_deprecations = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@langchain_deprecations
def test_langchain_history_aware_chat_turns_capture_history_and_condensed_question():
    pytest.importorskip("langchain_core")
    from ragmeter.integrations.langchain import RagmeterCallbackHandler

    chat = history_aware_chat({})
    handler = RagmeterCallbackHandler(metrics=["faithfulness"])

    def say(text):
        return chat.invoke(
            {"input": text},
            config={"callbacks": [handler], "configurable": {"session_id": "s1"}, "metadata": {"session_id": "s1"}},
        )

    say("Who wrote Dune?")
    say("and when?")
    say("was it a success?")
    assert handler.flush(10)
    t1, t2, t3 = sorted(handler.samples, key=lambda s: s.turn)
    assert [(s.conversation_id, s.turn) for s in (t1, t2, t3)] == [("s1", 1), ("s1", 2), ("s1", 3)]
    assert t1.history == [] and t1.standalone_question is None and t1.context_texts == ["Facts about Who wrote Dune?."]
    assert t2.question == "and when?" and t2.standalone_question == "and when? (re: Who wrote Dune?)"
    assert t2.history == [
        {"role": "user", "content": "Who wrote Dune?"},
        {"role": "assistant", "content": "Per the context: Facts about Who wrote Dune?."},
    ]
    assert t2.context_texts == [
        "Facts about and when? (re: Who wrote Dune?)."
    ]  # turn 2 retrieved with turn 1's subject
    assert len(t3.history) == 4 and t3.standalone_question == "was it a success? (re: Who wrote Dune?)"
    assert t3.metadata["run_metadata"] == {"session_id": "s1"}
    # the judge reads the condensed question
    assert judged_question(t2) == "and when? (re: Who wrote Dune?)"


@langchain_deprecations
def test_langchain_concurrent_conversations_never_mix():
    pytest.importorskip("langchain_core")
    from ragmeter.integrations.langchain import RagmeterCallbackHandler

    chat = history_aware_chat({})
    handler = RagmeterCallbackHandler(metrics=["faithfulness"])
    sessions = {f"s{i}": f"Topic {i}?" for i in range(8)}

    async def conversation(sid, opener):
        for text in (opener, "and then?", "why?"):
            await chat.ainvoke(
                {"input": text},
                config={
                    "callbacks": [handler],
                    "configurable": {"session_id": sid},
                    "metadata": {"conversation_id": sid},
                },
            )

    async def main():
        await asyncio.gather(*(conversation(sid, q) for sid, q in sessions.items()))

    asyncio.run(main())
    assert handler.flush(20)
    by_conv: dict[str, list] = {}
    for s in handler.samples:
        by_conv.setdefault(s.conversation_id, []).append(s)
    assert set(by_conv) == set(sessions)
    for sid, samples in by_conv.items():
        opener = sessions[sid]
        samples.sort(key=lambda s: s.turn)
        assert [s.turn for s in samples] == [1, 2, 3]
        assert [s.question for s in samples] == [opener, "and then?", "why?"]
        assert samples[2].history[0] == {"role": "user", "content": opener}
        assert samples[2].history[2] == {"role": "user", "content": "and then?"}
        assert all(opener in m["content"] or m["content"] == "and then?" for m in samples[2].history)
        assert samples[1].standalone_question == f"and then? (re: {opener})"
        assert samples[2].context_texts == [f"Facts about why? (re: {opener})."]
    convs = EvaluationResult(handler.results, ["faithfulness"]).conversations()
    assert sorted(c.conversation_id for c in convs) == sorted(sessions)


def test_exports_carry_the_conversation_columns_only_for_conversations(tmp_path):
    rows = [result_of("A", 1, 0.9), result_of("A", 2, 0.8)]
    chat = EvaluationResult(rows, ["faithfulness"])
    assert list(chat.to_records()[1])[:4] == ["sample_id", "conversation_id", "turn", "question"]
    assert chat.to_records()[1]["turn"] == 2
    chat.to_csv(tmp_path / "r.csv")
    assert (tmp_path / "r.csv").read_text().splitlines()[0].startswith("sample_id,conversation_id,turn,question,answer")
    plain = EvaluationResult([SampleResult(Sample("q"), {})], ["faithfulness"])
    assert list(plain.to_records()[0])[:3] == ["sample_id", "question", "answer"]


def test_ragas_multi_turn_to_csv_export_loads(tmp_path):
    # pandas' to_csv writes the messages cell with str(list): Python's repr
    path = tmp_path / "multi.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["user_input", "reference"])
        writer.writerow([repr(RAGAS_MULTI["user_input"]), RAGAS_MULTI["reference"]])
        writer.writerow(["[{not a message list", ""])
    ds = load_samples(path)
    assert ds.errors == [] and len(ds) == 3
    assert [(s.turn, s.context_texts[0]) for s in ds[:2]] == [
        (1, "The tower was built from 1887 to 1889."),
        (3, "The tower is 330 metres tall."),
    ]
    assert ds[1].history[3] == {"role": "assistant", "content": "You're welcome."}
    assert ds[2].question == "[{not a message list" and ds[2].turn is None  # text that only looks like a list
