"""ragmeter.labels agreement statistics against hand-worked examples and published values."""

from __future__ import annotations

import math

import pytest

from ragmeter.labels import (
    alpha_with_ci,
    balanced_accuracy,
    cohen_kappa,
    confusion,
    judge_vs_humans,
    kappa_with_ci,
    krippendorff_alpha,
    suggest_threshold,
)

N = None


def test_cohen_kappa_two_by_two_textbook_example():
    # 50 items: both yes 20, a yes / b no 5, a no / b yes 10, both no 15.
    # p_o = 35/50 = 0.7; a says yes 25/50, b 30/50: p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.2/0.5 = 0.4
    a = ["y"] * 25 + ["n"] * 25
    b = ["y"] * 20 + ["n"] * 5 + ["y"] * 10 + ["n"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_weighted_kappa_worked_by_hand():
    # a = [1, 2, 3], b = [1, 3, 3]: marginals a 1/3 each, b (1/3, 0, 2/3).
    # unweighted: p_o = 2/3, p_e = 1/9 + 0 + 2/9 = 1/3 -> (2/3 - 1/3) / (2/3) = 0.5
    # linear (w = |i-j|/2): observed 0.5/3 = 1/6; expected (1/3)(2/3 + 1/2 + 1/3) = 1/2 -> 1 - 1/3 = 2/3
    # quadratic (w = (i-j)^2/4): observed 0.25/3 = 1/12; expected (1/3)(2/3 + 1/4 + 1/3) = 5/12 -> 1 - 1/5 = 0.8
    a, b = [1, 2, 3], [1, 3, 3]
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    assert cohen_kappa(a, b, "linear") == pytest.approx(2 / 3)
    assert cohen_kappa(a, b, "quadratic") == pytest.approx(0.8)
    # the categories fix the distances: a = [1, 2, 4], b = [2, 4, 4], linear.
    # On the scale 1-4: observed (1 + 2 + 0) / 3 = 1; expected (1/3)(7/3 + 4/3 + 2/3) = 13/9 -> 4/13.
    # On the labels seen (1, 2, 4 as positions 0, 1, 2): observed 2/3, expected 8/9 -> 0.25.
    assert cohen_kappa([1, 2, 4], [2, 4, 4], "linear", labels=[1, 2, 3, 4]) == pytest.approx(4 / 13)
    assert cohen_kappa([1, 2, 4], [2, 4, 4], "linear") == pytest.approx(0.25)
    # an item either annotator left out is dropped, not counted
    assert cohen_kappa(a + [None, 2], b + [4, float("nan")], "quadratic") == pytest.approx(0.8)


def test_kappa_refuses_what_it_cannot_compute():
    with pytest.raises(ValueError, match="different numbers of items"):
        cohen_kappa([1, 2], [1])
    with pytest.raises(ValueError, match="no item has a label from both"):
        cohen_kappa([1, None], [None, 2])
    with pytest.raises(ValueError, match="weights must be"):
        cohen_kappa([1, 2], [1, 2], "cubic")
    assert math.isnan(cohen_kappa([3, 3], [3, 3]))  # one category: chance agreement is total


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 observers x 12 units
# example with missing values; published: nominal 0.743, ordinal 0.815, interval 0.849, ratio 0.797.
KRIPPENDORFF = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]


@pytest.mark.parametrize(
    "level,published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_krippendorff_alpha_matches_the_published_example(level, published):
    assert round(krippendorff_alpha(KRIPPENDORFF, level), 3) == published


def test_krippendorff_alpha_worked_by_hand():
    # units (1,1), (2,2), (3,4), (-,2): the last is unpairable. n_c: 1->2, 2->2, 3->1, 4->1; n = 6;
    # observed disagreement: o[3,4] = o[4,3] = 1.
    ratings = [[1, 2, 3, None], [1, 2, 4, 2]]
    # nominal: expected sum n_c n_k (c != k) = 36 - 10 = 26 -> 1 - 5 * 2 / 26 = 16/26
    assert krippendorff_alpha(ratings, "nominal") == pytest.approx(16 / 26)
    # interval: ordered sum n_c n_k (c-k)^2 = 2 * (4 + 8 + 18 + 2 + 8 + 1) = 82 -> 1 - 5 * 2 / 82 = 36/41
    assert krippendorff_alpha(ratings, "interval") == pytest.approx(36 / 41)
    # ordinal: d(1,2)=4, d(1,3)=12.25, d(1,4)=20.25, d(2,3)=2.25, d(2,4)=6.25, d(3,4)=1;
    # expected 2 * (16 + 24.5 + 40.5 + 4.5 + 12.5 + 1) = 198; observed 2 * 1 -> 1 - 10/198
    assert krippendorff_alpha(ratings, "ordinal") == pytest.approx(188 / 198)
    assert math.isnan(krippendorff_alpha([[2, 2], [2, 2]], "nominal"))  # no variation: undefined
    with pytest.raises(ValueError, match="level must be one of"):
        krippendorff_alpha(ratings, "circular")
    with pytest.raises(ValueError, match="one entry per item"):
        krippendorff_alpha([[1, 2], [1]])


def test_bootstrap_intervals_are_seeded_and_bracket_the_estimate():
    first = alpha_with_ci(KRIPPENDORFF, "nominal", n_boot=300, seed=3)
    assert first == alpha_with_ci(KRIPPENDORFF, "nominal", n_boot=300, seed=3)
    assert first["items"] == 11  # unit 12 has one label
    low, high = first["ci"]
    assert low < first["alpha"] <= high <= 1.0
    assert alpha_with_ci(KRIPPENDORFF, "nominal", n_boot=300, seed=4)["ci"] != first["ci"]
    k = kappa_with_ci([1, 2, 3, 4, 5, 4, 2], [1, 2, 4, 4, 5, 3, 2], n_boot=300)
    assert k["items"] == 7 and k["ci"][0] < k["kappa"] <= k["ci"][1]


def test_judge_vs_humans_worked_by_hand():
    judge = [0.9, 0.8, 0.6, 0.4, 0.2]
    human = [5, 4, 4, 2, 1]
    out = judge_vs_humans(judge, human, threshold=0.7, n_boot=200)
    # judge passes (>= 0.7) the first two; humans pass (>= 4) the first three
    assert out["confusion"] == {"tp": 2, "fp": 0, "fn": 1, "tn": 2}
    assert out["balanced_accuracy"] == pytest.approx((2 / 3 + 1) / 2)
    # Spearman: human ranks (5, 3.5, 3.5, 2, 1) vs judge ranks (5, 4, 3, 2, 1): 9.5 / sqrt(10 * 9.5)
    assert out["spearman"] == pytest.approx(9.5 / math.sqrt(95))
    # Kendall tau-b: 9 concordant pairs, 0 discordant, one pair tied in human: 9 / sqrt(10 * 9)
    assert out["kendall"] == pytest.approx(9 / math.sqrt(90))
    # at 0.6 the judge's pass/fail is the humans' exactly
    assert out["suggested_threshold"] == 0.6
    low, high = out["suggested_ci"]
    assert 0.2 <= low <= 0.6 <= high <= 0.9
    assert out["items"] == 5


def test_threshold_ties_go_to_the_current_threshold_and_missing_pairs_are_dropped():
    # humans pass items 1 and 3: at 0.9 and at 0.3 balanced accuracy is 0.75 (at 0.8 and 0.2, 0.5)
    judge, human = [0.9, 0.8, 0.3, 0.2], [True, False, True, False]
    assert suggest_threshold(judge, human, current=0.85) == 0.9
    assert suggest_threshold(judge, human, current=0.35) == 0.3
    assert suggest_threshold(judge, human) == 0.3  # no current threshold: the lowest
    table = confusion([True, False, True], [True, True, False])
    assert table == {"tp": 1, "fp": 1, "fn": 1, "tn": 0}
    assert balanced_accuracy(table) == pytest.approx(0.25)
    assert balanced_accuracy({"tp": 3, "fp": 0, "fn": 1, "tn": 0}) == pytest.approx(0.75)  # no human fails
    out = judge_vs_humans([0.9, None, 0.2], [5, 3, float("nan")], 0.5, n_boot=10)
    assert out["items"] == 1 and math.isnan(out["spearman"])
