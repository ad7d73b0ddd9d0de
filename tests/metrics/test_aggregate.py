"""Tests for ragmeter.aggregate."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import ragmeter.aggregate as aggregate
from ragmeter.aggregate import decayed_relevance, grade, harmonic_mean, minimum, weighted_average


def test_doctests_pass():
    result = doctest.testmod(aggregate)
    assert result.attempted > 0
    assert result.failed == 0


# ------------------------------------------------------------------ weighted_average


def test_weighted_average_worked_example():
    scores = {"precision": 0.8, "recall": 0.7, "faithfulness": 0.9, "relevancy": 0.85}
    weights = {"precision": 0.2, "recall": 0.2, "faithfulness": 0.4, "relevancy": 0.2}
    # 0.16 + 0.14 + 0.36 + 0.17 = 0.83
    assert weighted_average(scores, weights) == pytest.approx(0.83, abs=1e-12)
    # key order does not matter, weights are normalised by their sum
    assert weighted_average(scores, {"relevancy": 1, "faithfulness": 2, "recall": 1, "precision": 1}) == pytest.approx(
        0.83
    )
    assert weighted_average([0.8, 0.7, 0.9, 0.85], (0.2, 0.2, 0.4, 0.2)) == pytest.approx(0.83)
    assert weighted_average(np.array([0.8, 0.7, 0.9, 0.85]), np.array([2, 2, 4, 2])) == pytest.approx(0.83)


def test_weighted_average_zero_weight_and_extremes():
    assert weighted_average([0.0, 1.0], [0, 5]) == 1.0
    assert weighted_average([0.0, 0.0], [1, 1]) == 0.0
    assert weighted_average([1.0], [0.3]) == 1.0


@pytest.mark.parametrize(
    "scores, weights, exc, msg",
    [
        ({"a": 0.5}, {"a": 1, "b": 1}, ValueError, "unexpected \\['b'\\]"),
        ({"a": 0.5, "b": 0.5}, {"a": 1}, ValueError, "missing \\['b'\\]"),
        ({"a": 0.5}, [1], TypeError, "weights must be a dict"),
        ([0.5], {"a": 1}, TypeError, "same length"),
        ([0.5, 0.5], [1], ValueError, "2 values but weights has 1"),
        ([0.5, 0.5], [0, 0], ValueError, "sum to 0"),
        ([0.5, 0.5], [1, -1], ValueError, r"weights\[1\] is -1.0; weights must be non-negative"),
        ({"a": 0.5}, {"a": float("nan")}, ValueError, r"weights\['a'\] is nan"),
        ({"a": 0.5}, {"a": None}, ValueError, r"weights\['a'\] is None"),
        ([0.5], ["1"], TypeError, r"weights\[0\] must be a real number"),
        ({"faithfulness": None}, {"faithfulness": 1}, ValueError, r"scores\['faithfulness'\] is None"),
        ({"faithfulness": float("nan")}, {"faithfulness": 1}, ValueError, r"scores\['faithfulness'\] is nan"),
        ([0.5, float("nan")], [1, 1], ValueError, r"scores\[1\] is nan"),
        ([0.5, 1.2], [1, 1], ValueError, r"scores\[1\] is 1.2; scores must be in \[0, 1\]"),
        ([-0.1], [1], ValueError, r"scores\[0\] is -0.1"),
        ([True], [1], TypeError, r"scores\[0\] must be a real number"),
        ([], [], ValueError, "scores is empty"),
        ("0.5", [1], TypeError, "scores must be"),
    ],
)
def test_weighted_average_validation(scores, weights, exc, msg):
    with pytest.raises(exc, match=msg):
        weighted_average(scores, weights)


# ------------------------------------------------------------------ harmonic_mean, minimum


def test_harmonic_mean():
    assert harmonic_mean([0.8, 0.4]) == pytest.approx(2 / (1 / 0.8 + 1 / 0.4))
    assert harmonic_mean({"p": 0.5, "r": 0.5}) == pytest.approx(0.5)
    assert harmonic_mean([0.9, 0.0, 0.7]) == 0.0
    assert harmonic_mean([1.0]) == 1.0
    # the harmonic mean never exceeds the arithmetic mean
    assert harmonic_mean([0.9, 0.3]) < (0.9 + 0.3) / 2


def test_minimum():
    assert minimum({"faithfulness": 0.9, "relevancy": 0.65}) == 0.65
    assert minimum([0.3]) == 0.3
    assert minimum((1.0, 0.0)) == 0.0


@pytest.mark.parametrize("f", [harmonic_mean, minimum])
@pytest.mark.parametrize(
    "scores, exc, msg",
    [
        ([], ValueError, "empty"),
        ({}, ValueError, "empty"),
        ([0.5, None], ValueError, r"scores\[1\] is None"),
        ({"recall": float("nan")}, ValueError, r"scores\['recall'\] is nan"),
        ([float("inf")], ValueError, r"scores\[0\] is inf"),
        ([2.0], ValueError, "must be in"),
        (0.5, TypeError, "scores must be"),
        (["0.5"], TypeError, "must be a real number"),
    ],
)
def test_harmonic_mean_and_minimum_validation(f, scores, exc, msg):
    with pytest.raises(exc, match=msg):
        f(scores)


# ------------------------------------------------------------------ grade


@pytest.mark.parametrize(
    "value, letter",
    [
        (1.0, "A"),
        (0.9, "A"),
        (0.8999, "B"),
        (0.8, "B"),
        (0.75, "C"),
        (0.7, "C"),
        (0.6, "D"),
        (0.5999, "F"),
        (0.0, "F"),
        (np.float64(0.91), "A"),
        (1, "A"),
        (0, "F"),
    ],
)
def test_grade(value, letter):
    assert grade(value) == letter


@pytest.mark.parametrize(
    "value, exc",
    [
        (None, ValueError),
        (float("nan"), ValueError),
        (1.01, ValueError),
        (-0.01, ValueError),
        ("A", TypeError),
        (True, TypeError),
    ],
)
def test_grade_validation(value, exc):
    with pytest.raises(exc, match="value"):
        grade(value)


# ------------------------------------------------------------------ decayed_relevance


def test_decayed_relevance_worked_example():
    # By hand, d = 0.9, i = 0..3: weights 1, 0.9, 0.81, 0.729 (sum 3.439)
    #   numerator = 0.9*1 + 0.8*0.9 + 0.3*0.81 + 0.2*0.729
    #             = 0.9 + 0.72 + 0.243 + 0.1458 = 2.0088
    #   2.0088 / 3.439 = 0.58412...
    # (A popular tutorial prints ~0.77 for this input; that is not what the formula gives.)
    value = decayed_relevance([0.9, 0.8, 0.3, 0.2], decay=0.9)
    assert value == pytest.approx(2.0088 / 3.439, abs=1e-12)
    assert round(value, 4) == 0.5841


def test_decayed_relevance_properties():
    assert decayed_relevance([0.9, 0.8, 0.3, 0.2]) == pytest.approx(2.0088 / 3.439)  # default decay 0.9
    assert decayed_relevance([0.9, 0.8, 0.3, 0.2], decay=1) == pytest.approx(0.55)  # plain mean
    assert decayed_relevance([0.4]) == 0.4
    assert decayed_relevance([0.0, 1.0], decay=0.5) == pytest.approx(0.5 / 1.5)
    # earlier ranks weigh more: the same scores sorted best-first score higher
    assert decayed_relevance([0.9, 0.1]) > decayed_relevance([0.1, 0.9])
    assert decayed_relevance(np.array([0.9, 0.8, 0.3, 0.2]), decay=0.9) == pytest.approx(0.5841, abs=1e-4)
    assert 0.0 <= decayed_relevance([1e-3] * 200, decay=0.01) <= 1.0


@pytest.mark.parametrize(
    "scores, decay, exc, msg",
    [
        ([0.5], 0, ValueError, r"decay is 0.0; it must be in \(0, 1\]"),
        ([0.5], -0.5, ValueError, "decay is -0.5"),
        ([0.5], 1.5, ValueError, "decay is 1.5"),
        ([0.5], float("nan"), ValueError, "decay is nan"),
        ([0.5], None, ValueError, "decay is None"),
        ([0.5], "0.9", TypeError, "decay must be a real number"),
        ([], 0.9, ValueError, "empty"),
        ([0.5, None], 0.9, ValueError, r"scores\[1\] is None"),
        ([0.5, float("nan")], 0.9, ValueError, r"scores\[1\] is nan"),
        ([0.5, 3], 0.9, ValueError, r"scores\[1\] is 3.0"),
        ({"a": 0.5}, 0.9, TypeError, "rank order"),
        ({0.5, 0.7}, 0.9, TypeError, "sequence"),
    ],
)
def test_decayed_relevance_validation(scores, decay, exc, msg):
    with pytest.raises(exc, match=msg):
        decayed_relevance(scores, decay=decay)


def test_results_are_finite_floats():
    for value in (
        weighted_average([0.1, 0.2], [1, 2]),
        harmonic_mean([0.1, 0.2]),
        minimum([0.1]),
        decayed_relevance([0.1, 0.2]),
    ):
        assert isinstance(value, float) and math.isfinite(value)
