"""Custom metrics: Criteria (judged, defined in words) and FunctionMetric / Metric subclasses
(deterministic). Judges are driven by the scripted judge and by the real OpenAI SDK against the
local fake server."""

from __future__ import annotations

import asyncio

import pytest

import ragmeter as rm
from helpers.scripted import ScriptedJudge
from helpers.servers import FakeLLMServer, answer, oracle
from ragmeter.judges import OpenAIJudge
from ragmeter.judges.offline import OfflineJudge
from ragmeter.judges.tasks import get_task
from ragmeter.metrics import Criteria, FunctionMetric, Metric
from ragmeter.metrics.scoring import score_sample

SAMPLE = rm.Sample(
    "When was the Eiffel Tower built?",
    ["The Eiffel Tower was built from 1887 to 1889."],
    answer="It was built from 1887 to 1889 [1].",
    reference="From 1887 to 1889.",
    id="eiffel",
)

POLITE = Criteria("polite", criteria="The answer is polite.", rubric={1: "rude", 5: "courteous"})
SOURCED = Criteria(
    "sourced",
    criteria="Every figure in the answer comes from the contexts.",
    rubric={1: "no figure sourced", 3: "some", 5: "all"},
    inputs=["answer", "contexts"],
)
MATCHES = Criteria("matches", criteria="The answer agrees with the reference.", inputs=["answer", "reference"])


def scores_by_name(scores: dict[str, int | None], reason: str = "because"):
    """A scripted judge_criteria answer: the given rubric score per criterion name (None: n/a)."""

    def respond(inputs: dict) -> dict:
        return {
            "results": [
                {
                    "criterion": i,
                    "applicable": scores[c["name"]] is not None,
                    "score": scores[c["name"]] or 1,
                    "reason": f"{reason} {c['name']}",
                }
                for i, c in enumerate(inputs["criteria"])
            ]
        }

    return respond


def run(metrics, judge, sample=SAMPLE):
    return rm.evaluate([sample], metrics=metrics, judge=judge, progress=False)[0].scores


# --------------------------------------------------------------------------- scaling, reasons, one call


def test_rubric_score_is_scaled_and_explained():
    judge = ScriptedJudge({"judge_criteria": scores_by_name({"polite": 4, "sourced": 2, "matches": 5})})
    scores = run([POLITE, SOURCED, MATCHES], judge)
    # (s - 1) / 4: 4 -> 0.75 (pass), 2 -> 0.25 (fail), 5 -> 1.0 (pass)
    assert {n: s.value for n, s in scores.items()} == {"polite": 0.75, "sourced": 0.25, "matches": 1.0}
    assert {n: s.label for n, s in scores.items()} == {"polite": "pass", "sourced": "fail", "matches": "pass"}
    assert scores["polite"].explanation == "rubric score 4/5 -> 0.75: because polite"
    assert scores["sourced"].details["rubric_score"] == 2
    assert scores["sourced"].details["rubric"] == {1: "no figure sourced", 3: "some", 5: "all"}
    assert scores["polite"].judge == "scripted"


def test_any_number_of_criteria_share_one_call_with_the_union_of_their_inputs():
    judge = ScriptedJudge({"judge_criteria": scores_by_name({"polite": 3, "sourced": 3, "matches": 3})})
    run([POLITE, SOURCED, MATCHES], judge)
    assert judge.calls == {"judge_criteria": 1}
    sent = judge.inputs["judge_criteria"][0]
    assert [c["name"] for c in sent["criteria"]] == ["polite", "sourced", "matches"]
    assert sent["criteria"][1] == {
        "name": "sourced",
        "criteria": "Every figure in the answer comes from the contexts.",
        "rubric": [[1, "no figure sourced"], [3, "some"], [5, "all"]],
        "inputs": ["answer", "contexts"],
    }
    assert sent["sample"] == {
        "question": SAMPLE.question,
        "answer": SAMPLE.answer,
        "contexts": SAMPLE.context_texts,
        "reference": SAMPLE.reference,
    }
    # one criterion reads only question and answer: nothing else is sent
    judge = ScriptedJudge({"judge_criteria": scores_by_name({"polite": 3})})
    run([POLITE], judge)
    assert judge.inputs["judge_criteria"][0]["sample"] == {"question": SAMPLE.question, "answer": SAMPLE.answer}


def test_criterion_without_its_input_is_not_applicable_and_left_out_of_the_call():
    no_reference = rm.Sample("q?", ["c"], answer="a")
    judge = ScriptedJudge({"judge_criteria": scores_by_name({"polite": 5})})
    scores = run([POLITE, MATCHES], judge, no_reference)
    assert scores["matches"].status == "n/a" and "no reference" in scores["matches"].explanation
    assert scores["polite"].value == 1.0
    assert [c["name"] for c in judge.inputs["judge_criteria"][0]["criteria"]] == ["polite"]


def test_levels_do_not_split_the_call():
    strict = MATCHES.with_levels(threshold=1.0, warn=0.9)
    judge = ScriptedJudge({"judge_criteria": scores_by_name({"polite": 4, "matches": 4})})
    scores = run([POLITE, strict], judge)
    assert judge.calls == {"judge_criteria": 1}
    assert scores["matches"].value == 0.75 and scores["matches"].label == "fail"


def test_judge_says_not_applicable():
    judge = ScriptedJudge({"judge_criteria": scores_by_name({"polite": None, "sourced": 5}, reason="cannot tell")})
    scores = run([POLITE, SOURCED], judge)
    assert scores["polite"].value is None and scores["polite"].status == "n/a" and scores["polite"].label is None
    assert scores["polite"].explanation == "not applicable: cannot tell polite"
    assert scores["sourced"].value == 1.0


# --------------------------------------------------------------------------- validation per criterion


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            {"results": [{"criterion": 0, "applicable": True, "score": 4, "reason": "ok"}]},
            "missing criterion indices [1]",
        ),
        (
            {
                "results": [
                    {"criterion": 0, "applicable": True, "score": 6, "reason": "ok"},
                    {"criterion": 1, "applicable": True, "score": 4, "reason": "ok"},
                ]
            },
            "score = 6 is out of range",
        ),
        (
            {
                "results": [
                    {"criterion": 0, "applicable": True, "score": 4, "reason": "ok"},
                    {"criterion": 1, "applicable": True, "score": 4, "reason": " "},
                ]
            },
            "criterion 1 (sourced): reason",
        ),
        (
            {
                "results": [
                    {"criterion": 0, "applicable": True, "score": 3.5, "reason": "ok"},
                    {"criterion": 1, "applicable": True, "score": 4, "reason": "ok"},
                ]
            },
            "must be an integer",
        ),
        (
            {
                "results": [
                    {"criterion": 0, "applicable": "yes", "score": 3, "reason": "ok"},
                    {"criterion": 1, "applicable": True, "score": 4, "reason": "ok"},
                ]
            },
            "applicable must be true or false",
        ),
    ],
)
def test_invalid_answers_are_errors_never_numbers(bad, message):
    scores = run([POLITE, SOURCED], ScriptedJudge({"judge_criteria": bad}))
    for s in scores.values():
        assert s.value is None and s.status == "error" and message in s.error


def test_over_the_wire_invalid_answer_is_asked_again_then_cached(tmp_path):
    """The real OpenAI SDK against the local server: an out-of-range score is shown back to the
    model, the second answer is used; the validated answer is cached (a second run sends nothing)."""

    def responder(req):
        if req.task != "judge_criteria":
            return oracle(req)
        return answer(
            {
                "results": [
                    {"criterion": c["index"], "applicable": True, "score": 4, "reason": "fine"}
                    for c in req.inputs["criteria"]
                ]
            }
        )

    async def go(server):
        judge = OpenAIJudge(
            "gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=tmp_path / "c", backoff_base=0.0
        )
        server.push(
            answer(
                {
                    "results": [
                        {"criterion": 0, "applicable": True, "score": 9, "reason": "x"},
                        {"criterion": 1, "applicable": True, "score": 4, "reason": "y"},
                    ]
                }
            )
        )
        first = await rm.aevaluate([SAMPLE], metrics=[POLITE, SOURCED], judge=judge, progress=False)
        assert [r.task for r in server.chat_requests] == ["judge_criteria", "judge_criteria"]
        retry = server.chat_requests[1].last_user_text
        assert "score = 9 is out of range (valid: 1..5)" in retry
        body = server.chat_requests[0].body
        assert body["response_format"]["json_schema"]["name"] == "judge_criteria"
        assert server.chat_requests[0].inputs["criteria"][0]["rubric"] == [
            {"score": 1, "description": "rude"},
            {"score": 5, "description": "courteous"},
        ]
        server.reset()
        second = await rm.aevaluate([SAMPLE], metrics=[POLITE, SOURCED], judge=judge, progress=False)
        assert server.chat_requests == []
        return first[0].scores, second[0].scores

    with FakeLLMServer(responder) as server:
        first, second = asyncio.run(go(server))
    assert first["polite"].value == first["sourced"].value == 0.75 and first["polite"].explanation.endswith("fine")
    assert {n: s.value for n, s in second.items()} == {"polite": 0.75, "sourced": 0.75}
    assert first["polite"].details["judge_usage"]["judge_criteria"]["calls"] == 2
    assert second["polite"].details["judge_usage"]["judge_criteria"]["cached"] == 1


# --------------------------------------------------------------------------- the offline judge


def test_offline_judge_answers_not_applicable_with_its_reason():
    judge = OfflineJudge(embeddings=False)
    scores = run([POLITE, SOURCED, "faithfulness"], judge)
    for name in ("polite", "sourced"):
        s = scores[name]
        assert s.value is None and s.error is None and s.status == "n/a" and s.label is None
        assert s.explanation.startswith(f"not applicable: the offline judge cannot judge the criterion '{name}'")
        assert "LLM judge" in s.explanation and s.judge == "offline-lexical"
    assert scores["faithfulness"].value == 1.0  # the rest of the run is unaffected
    out = asyncio.run(judge.run("judge_criteria", Criteria.request(SAMPLE, [POLITE]))).output
    assert out == get_task("judge_criteria").validate(Criteria.request(SAMPLE, [POLITE]), out)
    assert out["results"][0]["score"] is None


# --------------------------------------------------------------------------- definition errors


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "", "criteria": "x"}, "non-empty name"),
        ({"name": "faithfulness", "criteria": "x"}, "built-in metric"),
        ({"name": "c", "criteria": " "}, "criteria must be"),
        ({"name": "c", "criteria": "x", "rubric": {0: "bad"}}, "rubric keys"),
        ({"name": "c", "criteria": "x", "rubric": {6: "bad"}}, "rubric keys"),
        ({"name": "c", "criteria": "x", "rubric": {1: ""}}, "need a non-empty description"),
        ({"name": "c", "criteria": "x", "inputs": ["answer", "chunks"]}, "inputs must be some of"),
        ({"name": "c", "criteria": "x", "threshold": 0.2, "warn": 0.5}, "need 0 <= warn"),
    ],
)
def test_bad_definitions_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Criteria(**kwargs)


def test_two_different_criteria_with_one_name_are_an_error():
    other = Criteria("polite", criteria="Something else.")
    judge = ScriptedJudge({"judge_criteria": scores_by_name({"polite": 5})})
    scores = asyncio.run(score_sample(SAMPLE, [POLITE, other], judge)).scores
    assert "two different Criteria are named 'polite'" in scores["polite"].error


# --------------------------------------------------------------------------- deterministic metrics


class AnswerLength(Metric):
    """The README example: a deterministic metric as a subclass."""

    name = "answer_length"
    requires = ("answer",)
    uses_judge = False

    def __init__(self, max_words: int = 50, **levels):
        super().__init__(**levels)
        self.max_words = max_words

    async def compute(self, sample, ctx):
        words = len(sample.answer.split())
        value = min(1.0, self.max_words / words) if words else 0.0
        return rm.Score(self.name, value, explanation=f"{words} words (limit {self.max_words})")


def test_deterministic_metrics_subclass_and_function():
    short = FunctionMetric("short", lambda s: 1.0 if len(s.answer.split()) <= 5 else 0.0)
    cites = FunctionMetric("cites", lambda s: rm.Score("ignored", 0.5, explanation="half"))
    scores = run([AnswerLength(max_words=4), short, cites], None)
    # 8 words, limit 4 -> 4 / 8 = 0.5
    assert scores["answer_length"].value == 0.5 and scores["answer_length"].explanation == "8 words (limit 4)"
    assert scores["short"].value == 0.0 and scores["short"].judge == "code"
    assert scores["cites"].metric == "cites" and scores["cites"].explanation == "half"


def test_function_metric_failures_are_errors():
    def boom(sample):
        raise RuntimeError("no luck")

    scores = run(
        [
            FunctionMetric("boom", boom),
            FunctionMetric("text", lambda s: "high"),
            FunctionMetric("big", lambda s: 2.0),
            FunctionMetric("needs_ref", lambda s: 1.0, requires=["reference"]),
        ],
        None,
        rm.Sample("q?", ["c"], answer="a"),
    )
    assert scores["boom"].error == "RuntimeError: no luck"
    assert "must return a float in [0, 1] or a Score" in scores["text"].error
    assert "must be in [0, 1]" in scores["big"].error
    assert scores["needs_ref"].status == "n/a"
    with pytest.raises(TypeError):
        FunctionMetric("x", 1.0)
