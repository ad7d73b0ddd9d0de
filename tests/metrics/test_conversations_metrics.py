"""Answer relevancy's embeddings and Criteria read the question judges read: a chat turn's
standalone question (else its recent history and the question), and without history exactly the
question, as before."""

from __future__ import annotations

import json

import numpy as np

import ragmeter as rm
from helpers.scripted import ScriptedJudge
from ragmeter.judges.base import Embedder, Usage
from ragmeter.metrics.criteria import Criteria

STANDALONE = "What was France's GDP in 2020?"
HISTORY = [
    {"role": "user", "content": "What was France's GDP in 2019?"},
    {"role": "assistant", "content": "About 2.7 trillion USD."},
]
GENERATED = ["How large was the French economy in 2020?", "What was the GDP of France in 2020?"]


class TableEmbedder(Embedder):
    """Fixed vectors per text (unknown texts: [0, 0, 1]); every batch embedded is kept."""

    name = "table"

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.batches: list[list[str]] = []

    async def embed(self, texts):
        self.batches.append(list(texts))
        return np.array([self.table.get(t, [0.0, 0.0, 1.0]) for t in texts]), Usage(embedding_calls=1)


def turn(**kw) -> rm.Sample:
    base = dict(
        question="and in 2020?",
        contexts=["France's GDP in 2020 was 2.6 trillion USD."],
        answer="2.6 trillion USD.",
        conversation_id="c-1",
        turn=2,
        history=HISTORY,
        standalone_question=STANDALONE,
    )
    return rm.Sample(**{**base, **kw})


def questions_judge() -> ScriptedJudge:
    return ScriptedJudge(
        {
            "generate_questions": lambda i: {
                "questions": GENERATED[: i["n"]],
                "noncommittal": False,
                "parts": [{"text": i["question"], "covered": True}],
            }
        }
    )


def test_answer_relevancy_embeds_the_standalone_question():
    # standalone question and both generated questions on [1, 0, 0]; the raw follow-up on [0, 1, 0].
    # Embedding the standalone question: cosines 1, 1 -> mean 1.0; the raw one would give 0, 0 -> 0.0.
    emb = TableEmbedder(
        {STANDALONE: [1, 0, 0], GENERATED[0]: [1, 0, 0], GENERATED[1]: [1, 0, 0], "and in 2020?": [0, 1, 0]}
    )
    judge = questions_judge()
    [r] = rm.evaluate([turn()], metrics=[rm.metrics.AnswerRelevancy(n=2)], judge=judge, embedder=emb, progress=False)
    assert emb.batches == [[STANDALONE, *GENERATED]]
    assert judge.inputs["generate_questions"][0]["question"] == STANDALONE
    assert r.scores["answer_relevancy"].value == 1.0


def test_answer_relevancy_without_history_embeds_the_question_unchanged():
    emb = TableEmbedder({"and in 2020?": [0, 1, 0]})
    judge = questions_judge()
    plain = rm.Sample("and in 2020?", ["France's GDP in 2020 was 2.6 trillion USD."], answer="2.6 trillion USD.")
    [r] = rm.evaluate([plain], metrics=[rm.metrics.AnswerRelevancy(n=2)], judge=judge, embedder=emb, progress=False)
    assert emb.batches == [["and in 2020?", *GENERATED]]
    assert r.scores["answer_relevancy"].value == 0.0  # [0, 1, 0] vs [0, 0, 1] twice


def test_offline_judge_embeds_the_standalone_question_and_the_answer():
    emb = TableEmbedder({})
    rm.evaluate([turn()], metrics=["answer_relevancy"], judge="offline", embedder=emb, progress=False)
    assert emb.batches == [[STANDALONE, "2.6 trillion USD."]]


def criteria_judge() -> ScriptedJudge:
    return ScriptedJudge(
        {
            "judge_criteria": lambda i: {
                "results": [
                    {"criterion": n, "applicable": True, "score": 4, "reason": "ok"}
                    for n, _ in enumerate(i["criteria"])
                ]
            }
        }
    )


def test_criteria_sends_the_standalone_question_then_the_history():
    on_topic = Criteria("on_topic", criteria="The answer is about what the user asked.")
    judge = criteria_judge()
    rm.evaluate(
        [turn(), turn(standalone_question=None, conversation_id="c-2")],
        metrics=[on_topic],
        judge=judge,
        progress=False,
        concurrency=1,
    )
    sent = sorted(i["sample"]["question"] for i in judge.inputs["judge_criteria"])
    assert sent == sorted(
        [
            STANDALONE,
            "Conversation so far:\nuser: What was France's GDP in 2019?\n"
            "assistant: About 2.7 trillion USD.\nCurrent question: and in 2020?",
        ]
    )


def test_criteria_without_history_sends_byte_identical_requests():
    on_topic = Criteria("on_topic", criteria="The answer is about what the user asked.")
    kw = dict(question="When was it built?", contexts=["Built 1887-1889."], answer="1887 to 1889.")
    a, b = criteria_judge(), criteria_judge()
    rm.evaluate([rm.Sample(**kw)], metrics=[on_topic], judge=a, progress=False)
    rm.evaluate([rm.Sample(**kw, conversation_id="c", turn=1)], metrics=[on_topic], judge=b, progress=False)
    assert json.dumps(a.inputs, sort_keys=True) == json.dumps(b.inputs, sort_keys=True)
    assert a.inputs["judge_criteria"][0]["sample"] == {"question": "When was it built?", "answer": "1887 to 1889."}
