"""Internal: The scales human labels come in, and how a judge's value reads in their units.

=========  =====================  ==========================  ==================================
scale      values                 human pass                  the judge's value in human units
=========  =====================  ==========================  ==================================
binary     0 or 1 (false / true)  mean label >= 0.5           1 when value >= threshold, else 0
1-5        whole numbers 1..5     mean label >= 4             1 + 4 * value
0-1        numbers in [0, 1]      mean label >= threshold     value
=========  =====================  ==========================  ==================================

A label file may name a record's ``scale``; otherwise the scale of a criterion is read from its
values (:func:`infer_scale`): the labeling page's criteria are 1-5, values that are all 0 or 1
are binary, whole numbers up to 5 with one above 1 are 1-5, and numbers in [0, 1] are 0-1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ragmeter.labels.criteria import criteria

__all__ = ["SCALES", "HUMAN_PASS_AT", "check_value", "infer_scale", "human_pass", "in_human_units", "span"]

SCALES = ("binary", "1-5", "0-1")
#: A 1-5 rating (the mean over annotators) at or above this is a pass.
HUMAN_PASS_AT = 4.0


def check_value(value: Any, scale: str | None) -> float | int | None:
    """``value`` as a number on ``scale`` (None: any of them), or ValueError saying why not.
    None, "" and NaN are a missing label (None); true / false are 1 / 0."""
    if scale is not None and scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r} (one of {', '.join(SCALES)})")
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        value = int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {value!r:.40}") from None
    if math.isnan(number):
        return None
    whole = number.is_integer()
    if scale == "binary" and number not in (0.0, 1.0):
        raise ValueError(f"expected 0 or 1 on the binary scale, got {value!r:.40}")
    if scale == "1-5" and not (whole and 1 <= number <= 5):
        raise ValueError(f"expected a whole number 1-5, got {value!r:.40}")
    if scale == "0-1" and not 0.0 <= number <= 1.0:
        raise ValueError(f"expected a number in [0, 1], got {value!r:.40}")
    if scale is None and not (0.0 <= number <= 1.0 or (whole and 1 <= number <= 5)):
        raise ValueError(f"expected 0 or 1, a whole number 1-5 or a number in [0, 1], got {value!r:.40}")
    return int(number) if whole else number


def infer_scale(
    values: Iterable[float | None], declared: Iterable[str | None] = (), criterion: str | None = None
) -> str:
    """The scale of a criterion's labels: the one declared (ValueError when they disagree), else
    1-5 for a criterion of the labeling page (:data:`ragmeter.labels.CRITERIA`), else read from
    the values, blank ones (None) left out (see the module doc; ValueError when they mix scales)."""
    named = {d for d in declared if d}
    if not named and criterion in criteria():
        return "1-5"
    if len(named) > 1:
        raise ValueError(f"labels of one criterion name different scales: {', '.join(sorted(named))}")
    if named:
        return named.pop()
    vals = [float(v) for v in values if v is not None]
    if all(v in (0.0, 1.0) for v in vals):
        return "binary"
    if all(v.is_integer() and 1 <= v <= 5 for v in vals):
        return "1-5"
    if all(0.0 <= v <= 1.0 for v in vals):
        return "0-1"
    raise ValueError("the labels mix scales (numbers in [0, 1] and whole numbers above 1): name each record's scale")


def span(scale: str) -> float:
    """The width of the scale: 4 for 1-5, 1 otherwise (a tolerance of the judge's 0-1 units,
    times this, is the same tolerance in human units)."""
    return 4.0 if scale == "1-5" else 1.0


def human_pass(value: float, scale: str, threshold: float) -> bool:
    """Whether a human rating (the mean over annotators) passes (see the module doc)."""
    if scale == "binary":
        return value >= 0.5
    if scale == "1-5":
        return value >= HUMAN_PASS_AT
    return value >= threshold


def in_human_units(value: float, scale: str, threshold: float) -> float:
    """The judge's value read on the human scale (see the module doc): the pass verdict on the
    binary scale, ``1 + 4 * value`` on 1-5, the value itself on 0-1.

    >>> in_human_units(0.75, "1-5", 0.7), in_human_units(0.75, "binary", 0.8), in_human_units(0.75, "0-1", 0.7)
    (4.0, 0.0, 0.75)
    """
    if scale == "binary":
        return 1.0 if value >= threshold else 0.0
    if scale == "1-5":
        return 1.0 + 4.0 * value
    return float(value)
