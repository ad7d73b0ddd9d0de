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
    rep = judge_dev.interval(judge_dev._auc_pair(np.repeat(judge, 10), np.repeat(base, 10), np.repeat(y, 10)),
                             np.repeat(np.arange(40), 10), n_boot=200)
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
