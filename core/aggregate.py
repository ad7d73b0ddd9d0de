"""Combine metric scores in [0, 1] into one number or a letter grade.

Every function validates its inputs: each score must be a finite real number in [0, 1]
(``None``, NaN, infinities, bools and strings are refused with an error that names the
offending key or index); weights must be finite and non-negative with a positive sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

from ragmeter._lazy import lazy_getattr

#: A result's composite, its weakest metric and its failure kind (:mod:`ragmeter.verdicts`, which builds on
#: the functions here), imported on first use.
_LAZY = {"composite_score": "ragmeter.verdicts", "weakest_metric": "ragmeter.verdicts", "diagnose": "ragmeter.verdicts"}

__all__ = ["weighted_average", "harmonic_mean", "minimum", "grade", "decayed_relevance", "GRADE_THRESHOLDS", *_LAZY]

__getattr__ = lazy_getattr(__name__, _LAZY)

Scores = Mapping[str, float] | Sequence[float]

#: Lower bounds of the letter grades, best first; anything below the last is "F".
GRADE_THRESHOLDS = (("A", 0.9), ("B", 0.8), ("C", 0.7), ("D", 0.6))


def _label(name: str, key: Any, is_mapping: bool) -> str:
    return f"{name}[{key!r}]" if is_mapping else f"{name}[{key}]"


def _number(value: Any, where: str) -> float:
    if value is None:
        raise ValueError(f"{where} is None; expected a finite number")
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{where} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{where} is {value}; expected a finite number")
    return value


def _score(value: Any, where: str) -> float:
    value = _number(value, where)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{where} is {value}; scores must be in [0, 1]")
    return value


def _items(values: Any, name: str, *, ordered: bool = False) -> tuple[list, list, bool]:
    """(keys, raw values, is_mapping) of a dict or a sequence; refuses strings and empties."""
    if isinstance(values, Mapping) and not ordered:
        keys, raw, is_mapping = list(values.keys()), list(values.values()), True
    elif isinstance(values, (str, bytes)) or not isinstance(values, Sequence) and not _is_1d_array(values):
        kind = "a sequence" if ordered else "a dict name -> value or a sequence"
        raise TypeError(f"{name} must be {kind} of numbers, got {type(values).__name__}")
    else:
        raw = values.tolist() if _is_1d_array(values) else list(values)
        keys, is_mapping = list(range(len(raw))), False
    if not raw:
        raise ValueError(f"{name} is empty; need at least one value")
    return keys, raw, is_mapping


def _is_1d_array(values: Any) -> bool:
    return hasattr(values, "ndim") and hasattr(values, "tolist") and getattr(values, "ndim", 0) == 1


def _scores(scores: Any, name: str = "scores", *, ordered: bool = False) -> tuple[list, list[float], bool]:
    keys, raw, is_mapping = _items(scores, name, ordered=ordered)
    return keys, [_score(v, _label(name, k, is_mapping)) for k, v in zip(keys, raw)], is_mapping


def weighted_average(scores: Scores, weights: Scores) -> float:
    """Weighted mean of scores, weights normalised by their sum.

    ``weighted_average = sum_i w_i * s_i / sum_i w_i``

    Parameters
    ----------
    scores : dict name -> score or sequence of scores
        Scores in [0, 1].
    weights : dict name -> weight or sequence of weights
        Same keys as ``scores`` (for a dict) or same length (for a sequence); finite,
        non-negative, with a positive sum. They need not sum to 1.

    Examples
    --------
    0.2*0.8 + 0.2*0.7 + 0.4*0.9 + 0.2*0.85 = 0.83:

    >>> round(weighted_average(
    ...     {"precision": 0.8, "recall": 0.7, "faithfulness": 0.9, "relevancy": 0.85},
    ...     {"precision": 0.2, "recall": 0.2, "faithfulness": 0.4, "relevancy": 0.2}), 4)
    0.83
    >>> weighted_average([1.0, 0.5], [3, 1])  # (3*1.0 + 1*0.5) / 4
    0.875
    """
    keys, values, is_mapping = _scores(scores)
    if is_mapping:
        if not isinstance(weights, Mapping):
            raise TypeError(
                f"scores is a dict, so weights must be a dict with the same keys, got {type(weights).__name__}"
            )
        missing = [k for k in keys if k not in weights]
        extra = [k for k in weights if k not in scores]
        if missing or extra:
            raise ValueError(f"weights must have exactly the keys of scores; missing {missing}, unexpected {extra}")
        raw_weights = [weights[k] for k in keys]
    else:
        if isinstance(weights, Mapping):
            raise TypeError("scores is a sequence, so weights must be a sequence of the same length, got dict")
        _, raw_weights, _ = _items(weights, "weights")
        if len(raw_weights) != len(values):
            raise ValueError(f"scores has {len(values)} values but weights has {len(raw_weights)}")
    w = []
    for k, v in zip(keys, raw_weights):
        where = _label("weights", k, is_mapping)
        v = _number(v, where)
        if v < 0:
            raise ValueError(f"{where} is {v}; weights must be non-negative")
        w.append(v)
    total = math.fsum(w)
    if total <= 0:
        raise ValueError("weights sum to 0; at least one weight must be positive")
    return math.fsum(wi * si for wi, si in zip(w, values)) / total


def harmonic_mean(scores: Scores) -> float:
    """Harmonic mean of scores: ``n / sum_i (1 / s_i)``; 0.0 when any score is 0.

    It is dominated by the lowest score, so one weak metric pulls the result down (the F1
    score is the harmonic mean of precision and recall).

    Examples
    --------
    >>> round(harmonic_mean([0.8, 0.4]), 4)  # 2 / (1/0.8 + 1/0.4)
    0.5333
    >>> harmonic_mean({"precision": 0.9, "recall": 0.0})
    0.0
    """
    _, values, _ = _scores(scores)
    if any(v == 0.0 for v in values):
        return 0.0
    return len(values) / math.fsum(1.0 / v for v in values)


def minimum(scores: Scores) -> float:
    """Smallest score: ``min_i s_i`` (the weakest-link aggregate).

    Examples
    --------
    >>> minimum({"faithfulness": 0.9, "relevancy": 0.65, "recall": 0.8})
    0.65
    """
    _, values, _ = _scores(scores)
    return min(values)


def grade(value: float) -> str:
    """Letter grade of a score in [0, 1]: A >= 0.9, B >= 0.8, C >= 0.7, D >= 0.6, else F.

    Examples
    --------
    >>> [grade(v) for v in (0.95, 0.9, 0.85, 0.7, 0.6, 0.59, 0.0)]
    ['A', 'A', 'B', 'C', 'D', 'F', 'F']
    """
    value = _score(value, "value")
    for letter, lower in GRADE_THRESHOLDS:
        if value >= lower:
            return letter
    return "F"


def decayed_relevance(scores: Sequence[float], decay: float = 0.9) -> float:
    """Position-weighted mean of per-rank scores, earlier ranks weighing more.

    ``decayed_relevance = sum_i s_i * d**i / sum_i d**i`` with ``i = 0, 1, ...`` the rank
    (best first) and ``d = decay`` in (0, 1]. ``decay=1`` is the plain mean.

    Parameters
    ----------
    scores : sequence of float
        Scores in [0, 1], in rank order (a dict is refused: order matters here).
    decay : float, default 0.9
        Weight ratio between consecutive ranks, in (0, 1].

    Examples
    --------
    (0.9 + 0.8*0.9 + 0.3*0.81 + 0.2*0.729) / (1 + 0.9 + 0.81 + 0.729) = 2.0088 / 3.439:

    >>> round(decayed_relevance([0.9, 0.8, 0.3, 0.2], decay=0.9), 4)
    0.5841
    """
    if isinstance(scores, Mapping):
        raise TypeError("scores must be a sequence in rank order, got a dict")
    d = _number(decay, "decay")
    if not 0.0 < d <= 1.0:
        raise ValueError(f"decay is {d}; it must be in (0, 1]")
    _, values, _ = _scores(scores, ordered=True)
    weights = [d**i for i in range(len(values))]
    return math.fsum(w * s for w, s in zip(weights, values)) / math.fsum(weights)
