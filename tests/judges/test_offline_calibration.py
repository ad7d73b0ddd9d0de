"""The offline judge's calibrated confidence and the calibration statistics of benchmarks/judge_dev.py."""

import asyncio
import math
import sys

import numpy as np
import pytest

from helpers import ROOT
from helpers.scripted import ScriptedJudge
from ragmeter import Sample
from ragmeter.judges import OfflineJudge
from ragmeter.judges.tasks import get_task
from ragmeter.metrics import Faithfulness


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


def test_confidence_is_the_claim_support_combinations_platt_map(lexical):
    m = lexical.combinations.claim_support
    a, c = m.calibration
    # confidence(v) = sigmoid(a * logit(p) + c) with p the model's probability for a mean score v
    p_low = 1 / (1 + math.exp(-m.intercept))
    p_high = 1 / (1 + math.exp(-(m.intercept + sum(max(0.0, w) for w in m.weights.values()))))
    for value in (0.0, 0.4, 1.0):
        p = p_low + value * (p_high - p_low)
        assert lexical.confidence(value) == round(1 / (1 + math.exp(-(a * math.log(p / (1 - p)) + c))), 4)
    assert lexical.confidence(0.0) < lexical.confidence(0.5) < lexical.confidence(1.0)


def test_verdicts_carry_the_confidence_through_validation(lexical):
    inputs = {
        "claims": ["The museum opened in Lyon.", "Tickets are sold online."],
        "chunks": ["The museum opened in 1990 in Lyon."],
    }
    out = asyncio.run(lexical.run("verify_claims", inputs)).output
    get_task("verify_claims").validate(inputs, out)
    full, none = out["verdicts"]
    assert full["support"] == 1.0 and full["confidence"] == lexical.confidence(1.0)
    assert none["support"] == 0.0 and none["confidence"] == lexical.confidence(0.0)
    assert full["reason"].endswith(f"; support 1.00, confidence {lexical.confidence(1.0):.2f}")


def test_faithfulness_details_say_the_confidence(lexical):
    sample = Sample(
        question="Where is the museum?",
        contexts=["The museum opened in 1990 in Lyon."],
        answer="The museum opened in Lyon. Tickets are sold online.",
    )
    score = Faithfulness().score(sample, judge=lexical)
    claims = score.details["claims"]
    assert score.value == pytest.approx((claims[0]["support"] + claims[1]["support"]) / 2)
    assert [c["confidence"] for c in claims] == [lexical.confidence(c["support"]) for c in claims]
    # the answer's confidence: the map of its faithfulness (the mean of its claims' scores)
    assert score.details["confidence"] == lexical.confidence(score.value)


def test_a_judge_without_calibration_gives_no_confidence():
    """An LLM judge's verdicts carry no graded support: faithfulness says no confidence."""
    verdicts = {
        "verdicts": [
            {"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "The museum"}], "reason": "stated"}
        ]
    }
    judge = ScriptedJudge(
        {"extract_claims": {"claims": [{"unit": 0, "text": "The museum opened in Lyon."}]}, "verify_claims": verdicts}
    )
    score = Faithfulness().score(
        Sample(question="Where?", contexts=["The museum opened in 1990 in Lyon."], answer="The museum opened in Lyon."),
        judge=judge,
    )
    assert score.value == 1.0 and "confidence" not in score.details
    assert "confidence" not in score.details["claims"][0]


def test_calibration_statistics_by_hand(judge_dev):
    # bins of 0.1: [0.1, 0.2) holds 0.1, 0.1 (mean 0.1, 1 of 2 positive: gap 0.4), [0.9, 1.0] holds
    # 0.9, 0.9 (mean 0.9, 2 of 2: gap 0.1) -> ECE = 0.5 * 0.4 + 0.5 * 0.1 = 0.25;
    # Brier = (0.1^2 + 0.9^2 + 0.1^2 + 0.1^2) / 4 = 0.21
    cal = judge_dev.calibration(np.array([0.1, 0.1, 0.9, 0.9]), np.array([0, 1, 1, 1]))
    assert cal["ece"] == pytest.approx(0.25) and cal["brier"] == pytest.approx(0.21)
    assert cal["table"] == [
        (pytest.approx(0.1), pytest.approx(0.2), 2, pytest.approx(0.1), 0.5),
        (pytest.approx(0.9), 1.0, 2, pytest.approx(0.9), 1.0),
    ]


def test_answer_confidence(judge_dev, lexical):
    verdicts = [{"support": 1.0}, {"support": 0.0}]
    assert judge_dev.answer_confidence(lexical, 0.5, verdicts) == lexical.confidence(0.5)
    assert judge_dev.answer_confidence(lexical, 0.5, []) is None  # no claims: not applicable
    assert judge_dev.answer_confidence(object(), 0.5, verdicts) is None  # a judge without the map


def test_auc_by_hand_and_against_pair_counting(judge_dev):
    # ranks 4, 2.5, 2.5, 1: (6.5 - 3) / (2 * 2) = 0.875 (the tied pair counts half)
    assert judge_dev.auc(np.array([0.9, 0.5, 0.5, 0.1]), np.array([1, 1, 0, 0])) == 0.875
    assert judge_dev.auc(np.array([0.3, 0.3]), np.array([1, 0])) == 0.5
    assert math.isnan(judge_dev.auc(np.array([0.3, 0.4]), np.array([1, 1])))
    rng = np.random.default_rng(1)
    s, y = rng.integers(0, 5, 200) / 4, rng.integers(0, 2, 200)
    pos, neg = s[y == 1], s[y == 0]
    pairs = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    assert judge_dev.auc(s, y) == pytest.approx(pairs / (len(pos) * len(neg)))


def test_interval_resamples_clusters_not_items(judge_dev):
    rng = np.random.default_rng(2)
    judge, base, y = rng.uniform(size=40), rng.uniform(size=40), np.tile([0, 1], 20)
    one = judge_dev.interval(judge_dev._auc_pair(judge, base, y), np.arange(40), n_boot=200)
    # every item ten times over, the copies in one cluster: the same draws of clusters give the
    # same AUROCs (replication multiplies every pair count alike), so the same interval; an
    # item-level bootstrap would have made it about sqrt(10) times narrower
    rep = judge_dev.interval(
        judge_dev._auc_pair(np.repeat(judge, 10), np.repeat(base, 10), np.repeat(y, 10)),
        np.repeat(np.arange(40), 10),
        n_boot=200,
    )
    assert rep == one and one["clusters"] == 40
    lo, hi = one["judge"]
    assert lo < judge_dev.auc(judge, y) < hi and hi - lo > 0.1
    # a judge equal to the baseline never wins; a perfect one always has AUROC 1
    same = judge_dev.interval(judge_dev._auc_pair(judge, judge, y), np.arange(40), n_boot=50)
    assert same["diff"] == (0.0, 0.0) and same["wins"] == 0.0
    perfect = judge_dev.interval(judge_dev._auc_pair(y.astype(float), base, y), np.arange(40) // 2, n_boot=50)
    assert perfect["judge"] == (1.0, 1.0) and perfect["wins"] > 0.9


def test_balanced_accuracy_interval_keeps_the_threshold(judge_dev):
    # scores 0.2, 0.4 (negatives), 0.6, 0.8 (positives), threshold 0.5 fixed: every draw of
    # clusters (each holding a negative and a positive) is classified perfectly, so the interval
    # is [1, 1]; the baseline at 0.7 gets
    # bAcc (1/2 + 1) / 2 = 0.75 on the full set
    s, y = np.array([0.2, 0.4, 0.6, 0.8]), np.array([0, 0, 1, 1])
    stat = judge_dev._bacc_pair(s, s, y, 0.5, 0.7)
    assert stat(np.arange(4)) == (1.0, 0.75)
    ci = judge_dev.interval(stat, np.array(["a", "b", "a", "b"]), n_boot=100)
    assert ci["judge"] == (1.0, 1.0) and ci["clusters"] == 2
