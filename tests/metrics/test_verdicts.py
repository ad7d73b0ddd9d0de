"""Per-sample verdicts (ragmeter.verdicts): composite score and grade, diagnosis, response time."""

from __future__ import annotations

import doctest
import math

import pytest

import ragmeter as rm
from helpers import ROOT
from ragmeter import verdicts
from ragmeter.data import Score, label_for
from ragmeter.verdicts import (
    DIAGNOSIS_RULE,
    composite_inputs,
    composite_score,
    diagnose,
    grade,
    latency_seconds,
    response_time_score,
)

EXAMPLES = ROOT / "examples" / "rag_samples.jsonl"
LEVELS = {
    "faithfulness": (0.85, 0.7),
    "answer_relevancy": (0.8, 0.6),
    "context_recall": (0.8, 0.6),
    "context_relevance": (0.5, 0.3),
}


def score(metric: str, value: float | None, error: str | None = None) -> Score:
    """A Score labelled against the metric's default levels, as Metric.ascore makes it."""
    thr, warn = LEVELS.get(metric, (0.7, 0.5))
    if value is None:
        return Score(metric, None, error=error, explanation="" if error else "not applicable: no answer")
    return Score(metric, value, label=label_for(value, thr, warn), details={"threshold": thr, "warn": warn})


def triad(**values) -> dict[str, Score]:
    return {m: score(m, v) for m, v in values.items()}


def test_doctests_pass():
    result = doctest.testmod(verdicts)
    assert result.failed == 0 and result.attempted >= 10


# --------------------------------------------------------------------------- composite


def test_composite_harmonic_and_weighted_with_worked_numbers():
    s = triad(faithfulness=0.9, answer_relevancy=0.6, context_recall=1.0)
    assert composite_score(s, method="harmonic") == pytest.approx(3 / (1 / 0.9 + 1 / 0.6 + 1))
    assert composite_score(s) == composite_score(s, method="weighted") == pytest.approx(2.5 / 3)  # the default
    assert composite_score(s, {"faithfulness": 2, "answer_relevancy": 1}, "harmonic") == pytest.approx(
        3 / (2 / 0.9 + 1 / 0.6)
    )
    assert composite_score(s, {"faithfulness": 3, "context_recall": 1}) == pytest.approx((2.7 + 1.0) / 4)
    # the harmonic mean is never above the arithmetic one, and a single 0 makes it 0 (the weighted mean: not)
    assert composite_score(s, method="harmonic") <= composite_score(s)
    assert composite_score(triad(faithfulness=0.0, answer_relevancy=1.0), method="harmonic") == 0.0
    assert composite_score(triad(faithfulness=0.0, answer_relevancy=1.0)) == 0.5


def test_errors_and_not_applicable_are_left_out_and_named_never_zero():
    s = {
        "faithfulness": score("faithfulness", 0.8),
        "answer_relevancy": score("answer_relevancy", None, "timeout"),
        "context_recall": score("context_recall", None),
        "precision@5": Score("precision@5", 0.1),
        "response_time": response_time_score(9.0),
    }
    used, excluded = composite_inputs(s)
    assert used == {"faithfulness": 0.8}  # retrieval metrics and response time are not judged metrics
    assert excluded == {"answer_relevancy": "error: timeout", "context_recall": "not applicable"}
    assert composite_score(s) == pytest.approx(0.8)
    used, excluded = composite_inputs(s, {"faithfulness": 1, "precision@5": 1, "entity_recall": 1, "context_recall": 0})
    assert used == {"faithfulness": 0.8, "precision@5": 0.1}
    assert excluded == {"entity_recall": "not scored", "context_recall": "weight 0"}
    assert composite_score({"faithfulness": score("faithfulness", None, "boom")}) is None
    assert composite_score({}) is None


@pytest.mark.parametrize(
    "weights", [{"faithfulness": -1}, {"faithfulness": math.nan}, {"faithfulness": "1"}, {"faithfulness": True}]
)
def test_bad_weights_are_refused(weights):
    with pytest.raises(ValueError, match="weight of 'faithfulness'"):
        composite_score(triad(faithfulness=0.5), weights)


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method must be one of"):
        composite_score(triad(faithfulness=0.5), method="median")


def test_grade_cut_points():
    assert [grade(v) for v in (1.0, 0.9, 0.8999, 0.8, 0.7, 0.6, 0.5999, 0.0)] == [
        "A",
        "A",
        "B",
        "B",
        "C",
        "D",
        "F",
        "F",
    ]


# --------------------------------------------------------------------------- diagnosis


@pytest.mark.parametrize(
    "values, kind",
    [
        ({"context_recall": 0.2, "context_relevance": 0.9, "faithfulness": 0.95, "answer_relevancy": 0.9}, "retrieval"),
        ({"context_recall": 1.0, "context_relevance": 0.1, "faithfulness": 0.95, "answer_relevancy": 0.9}, "retrieval"),
        ({"context_recall": 1.0, "context_relevance": 0.9, "faithfulness": 0.5, "answer_relevancy": 0.9}, "generation"),
        (
            {"context_recall": 1.0, "context_relevance": 0.9, "faithfulness": 0.95, "answer_relevancy": 0.3},
            "generation",
        ),
        ({"context_recall": 0.0, "context_relevance": 0.9, "faithfulness": 0.5, "answer_relevancy": 0.9}, "both"),
        (
            {"context_recall": 0.7, "context_relevance": 0.4, "faithfulness": 0.75, "answer_relevancy": 0.7},
            "fine",
        ),  # all warn
        ({"faithfulness": 0.95}, "fine"),
        ({"faithfulness": 0.5}, "generation"),
        ({}, "unknown"),
    ],
)
def test_diagnosis_kinds(values, kind):
    d = diagnose(triad(**values))
    assert d.kind == kind and d.rule == DIAGNOSIS_RULE
    assert len(d.reasons) == 4  # one line per signal metric, also for the ones not scored


def test_diagnosis_reasons_state_values_levels_and_missing_signals():
    s = triad(context_recall=0.2, faithfulness=0.95)
    s["answer_relevancy"] = score("answer_relevancy", None, "RateLimitError: 429")
    d = diagnose(s)
    assert d.kind == "retrieval"
    assert d.reasons == [
        "context_recall 0.20 below its warn level 0.6 (low)",
        "context_relevance: not scored",
        "faithfulness 0.95 at or above its pass level 0.85 (not low)",
        "answer_relevancy: error: RateLimitError: 429",
    ]
    assert diagnose({"faithfulness": score("faithfulness", None, "x")}).kind == "unknown"
    assert d.to_dict() == {"kind": "retrieval", "rule": DIAGNOSIS_RULE, "reasons": d.reasons}


def test_stricter_low_labels_count_warn_as_low():
    s = triad(context_recall=0.7, context_relevance=0.9, faithfulness=0.95, answer_relevancy=0.9)  # recall warns
    assert diagnose(s).kind == "fine"
    assert diagnose(s, low_labels=("warn", "fail")).kind == "retrieval"


@pytest.mark.slow  # loads the local embedding model
def test_diagnosis_of_a_real_offline_run():
    result = rm.evaluate(str(EXAMPLES), judge="offline", progress=False)
    kinds = {}
    for r in result:
        retrieval = any(r.scores[m].label == "fail" for m in ("context_recall", "context_relevance"))
        generation = any(r.scores[m].label == "fail" for m in ("faithfulness", "answer_relevancy"))
        expected = {(True, True): "both", (True, False): "retrieval", (False, True): "generation"}.get(
            (retrieval, generation), "fine"
        )
        kinds[r.sample.id] = diagnose(r.scores).kind
        assert kinds[r.sample.id] == expected, r.sample.id
    assert kinds["k8s-probes"] == "retrieval"  # its reference statement is in no chunk (recall 0.0)
    assert {"retrieval", "generation", "fine"} <= set(kinds.values())


# --------------------------------------------------------------------------- response time


@pytest.mark.parametrize(
    "latency, value, label",
    [
        (0.0, 1.0, "pass"),
        (3.0, 1.0, "pass"),
        (3.5, 0.875, "warn"),
        (4.0, 0.75, "warn"),
        (5.0, 0.5, "warn"),
        (7.5, 0.25, "fail"),
        (10.0, 0.0, "fail"),
        (60.0, 0.0, "fail"),
    ],
)
def test_response_time_score(latency, value, label):
    s = response_time_score(latency)
    assert (s.metric, s.value, s.label, s.judge) == ("response_time", pytest.approx(value), label, "code")
    assert s.details == {"latency_s": latency, "pass_under": 3.0, "warn_under": 5.0, "threshold": 1.0, "warn": 0.5}
    assert f"{latency:.2f} s" in s.explanation


def test_response_time_value_and_label_agree_everywhere():
    for i in range(0, 1300):
        t = i / 100
        s = response_time_score(t, pass_under=2.0, warn_under=6.0)
        assert s.label == label_for(s.value, 1.0, 0.5), t
        assert s.label == ("pass" if t <= 2 else "warn" if t <= 6 else "fail"), t


def test_response_time_levels_equal_is_a_step():
    assert [response_time_score(t, 2.0, 2.0).label for t in (2.0, 2.01, 3.9)] == ["pass", "fail", "fail"]


@pytest.mark.parametrize("args", [(-1.0,), (math.inf,), (math.nan,), (True,), (1.0, 0.0, 5.0), (1.0, 6.0, 5.0)])
def test_response_time_bad_inputs(args):
    with pytest.raises(ValueError):
        response_time_score(*args)


@pytest.mark.parametrize(
    "metadata, expected",
    [
        ({"latency": {"retrieval_s": 0.3, "generation_s": 1.2, "total_s": 1.6}}, 1.6),
        ({"latency": 2}, 2.0),
        ({"latency_s": 0.25}, 0.25),
        ({"latency": {"retrieval_s": 0.3}}, None),
        ({"latency": -1}, None),
        ({"latency": math.inf}, None),
        ({"latency": True}, None),
        ({"latency": "2s"}, None),
        ({}, None),
    ],
)
def test_latency_seconds(metadata, expected):
    assert latency_seconds(metadata) == expected


def test_add_response_time_only_where_a_latency_exists():
    def result(metadata):
        return rm.SampleResult(rm.Sample("q", ["c"], metadata=metadata), {"f": Score("f", 0.5)})

    rs = [result({"latency": {"total_s": 5.0}}), result({"latency_s": 12.0}), result({"latency": "slow"})]
    assert verdicts.add_response_time(rs, 2.0, 4.0) is True
    # 5 s over warn 4 s: 0.5 * (8 - 5) / 4 = 0.375; 12 s >= 2 * 4: 0.0; unreadable latency: n/a
    assert [(r.scores["response_time"].value, r.scores["response_time"].label) for r in rs] == [
        (0.375, "fail"),
        (0.0, "fail"),
        (None, None),
    ]
    plain = [result({}), result({"latency": {"retrieval_s": 1.0}})]
    assert verdicts.add_response_time(plain) is False and all(list(r.scores) == ["f"] for r in plain)
