"""The offline judge's calibrated confidence and the calibration statistics of benchmarks/judge_dev.py."""

import asyncio
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.scripted import ScriptedJudge
from ragmeter import Sample
from ragmeter.judges import OfflineJudge
from ragmeter.judges.offline import OfflineSettings
from ragmeter.judges.offline.settings import DEFAULT_SETTINGS
from ragmeter.judges.offline.verify import confidence
from ragmeter.judges.tasks import get_task
from ragmeter.metrics import Faithfulness

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lexical():
    return OfflineJudge(embeddings=False)


@pytest.fixture(scope="module")
def judge_dev():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import judge_dev
    finally:
        sys.path.pop(0)
    return judge_dev


def test_confidence_by_hand(lexical):
    # 1 / (1 + exp(-(6.29 * f - 5.58))): f = 1 -> 1 / (1 + e^-0.71) = 0.6704; f = 0 -> 0.0038;
    # f = 0.6 -> 1 / (1 + e^1.806) = 0.1411
    assert (DEFAULT_SETTINGS.confidence_slope, DEFAULT_SETTINGS.confidence_intercept) == (6.29, -5.58)
    assert confidence(1.0, DEFAULT_SETTINGS) == 0.6704 == lexical.confidence(1.0)
    assert confidence(0.0, DEFAULT_SETTINGS) == 0.0038
    assert confidence(0.6, DEFAULT_SETTINGS) == 0.1411
    own = OfflineSettings(confidence_slope=2.0, confidence_intercept=-1.0)
    assert confidence(0.5, own) == 0.5
    assert OfflineJudge(embeddings=False, settings=own).confidence(1.0) == round(1 / (1 + math.exp(-1.0)), 4)


def test_verdicts_carry_the_confidence_through_validation(lexical):
    inputs = {"claims": ["The museum opened in Lyon.", "Tickets are sold online."],
              "chunks": ["The museum opened in 1990 in Lyon."]}
    out = asyncio.run(lexical.run("verify_claims", inputs)).output
    get_task("verify_claims").validate(inputs, out)
    full, none = out["verdicts"]
    assert (full["support"], full["confidence"]) == (1.0, 0.6704)
    assert (none["support"], none["confidence"]) == (0.0, 0.0038)
    assert full["reason"].endswith("; graded support 1.00, confidence 0.67")
    assert none["reason"].endswith("; graded support 0.00, confidence 0.00")


def test_faithfulness_details_say_the_confidence(lexical):
    sample = Sample(question="Where is the museum?", contexts=["The museum opened in 1990 in Lyon."],
                    answer="The museum opened in Lyon. Tickets are sold online.")
    score = Faithfulness().score(sample, judge=lexical)
    assert score.value == pytest.approx(0.5)
    reasons = [c["reason"] for c in score.details["claims"]]
    assert reasons[0].endswith("confidence 0.67") and reasons[1].endswith("confidence 0.00")
    assert [c["confidence"] for c in score.details["claims"]] == [0.6704, 0.0038]
    # the answer's confidence: the map of its faithfulness, 1 / (1 + exp(-(6.29 * 0.5 - 5.58))) = 0.0805
    assert lexical.confidence(score.value) == 0.0805 == score.details["confidence"]


def test_a_judge_without_calibration_gives_no_confidence():
    """An LLM judge's verdicts carry no graded support: faithfulness says no confidence."""
    verdicts = {"verdicts": [{"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "The museum"}],
                              "reason": "stated"}]}
    judge = ScriptedJudge({"extract_claims": {"claims": [{"unit": 0, "text": "The museum opened in Lyon."}]},
                           "verify_claims": verdicts})
    score = Faithfulness().score(Sample(question="Where?", contexts=["The museum opened in 1990 in Lyon."],
                                        answer="The museum opened in Lyon."), judge=judge)
    assert score.value == 1.0 and "confidence" not in score.details
    assert "confidence" not in score.details["claims"][0]


def test_calibration_statistics_by_hand(judge_dev):
    # bins of 0.1: [0.1, 0.2) holds 0.1, 0.1 (mean 0.1, 1 of 2 positive: gap 0.4), [0.9, 1.0] holds
    # 0.9, 0.9 (mean 0.9, 2 of 2: gap 0.1) -> ECE = 0.5 * 0.4 + 0.5 * 0.1 = 0.25;
    # Brier = (0.1^2 + 0.9^2 + 0.1^2 + 0.1^2) / 4 = 0.21
    cal = judge_dev.calibration(np.array([0.1, 0.1, 0.9, 0.9]), np.array([0, 1, 1, 1]))
    assert cal["ece"] == pytest.approx(0.25) and cal["brier"] == pytest.approx(0.21)
    assert cal["table"] == [(pytest.approx(0.1), pytest.approx(0.2), 2, pytest.approx(0.1), 0.5),
                            (pytest.approx(0.9), 1.0, 2, pytest.approx(0.9), 1.0)]

def test_answer_confidence(judge_dev, lexical):
    verdicts = [{"support": 1.0}, {"support": 0.0}]
    assert judge_dev.answer_confidence(lexical, 0.5, verdicts) == 0.0805
    assert judge_dev.answer_confidence(lexical, 0.5, []) is None  # no claims: not applicable
    assert judge_dev.answer_confidence(object(), 0.5, verdicts) is None  # a judge without the map


def test_fit_recovers_known_constants(judge_dev):
    # labels drawn with probability sigmoid(3 * f - 1) in two sets of different sizes: the fit
    # (each set weighted equally) finds (3, -1)
    rng = np.random.default_rng(0)
    sets = []
    for n in (3000, 12000):
        f = rng.uniform(0, 1, n)
        sets.append((f, (rng.uniform(size=n) < 1 / (1 + np.exp(-(3 * f - 1)))).astype(int)))
    slope, intercept = judge_dev.fit_confidence(sets)
    assert slope == pytest.approx(3, abs=0.3) and intercept == pytest.approx(-1, abs=0.2)
    # a tiny separable set weighs as much as the large one: the fit stays finite
    assert all(np.isfinite(judge_dev.fit_confidence([sets[0], (np.array([0.2, 0.9]), np.array([0, 1]))])))
