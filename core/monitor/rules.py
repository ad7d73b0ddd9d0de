"""Internal: Alerts, the hysteresis of a rule, and the statistics the monitor's rules use (pure functions).

>>> percentile([1.0, 2.0, 3.0, 4.0], 95)       # linear interpolation, as numpy.percentile
3.85
>>> round(psi([0.1, 0.1, 0.9, 0.9], [0.9, 0.9, 0.9, 0.9], edges=[0.0, 0.5, 1.0]), 4)
4.6043
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Alert", "Trigger", "percentile", "psi", "psi_of_shares", "shares", "PSI_EPSILON"]

#: Share given to an empty bin in :func:`psi` (a bin empty on one side would make the index infinite).
PSI_EPSILON = 1e-4


@dataclass(frozen=True)
class Alert:
    """One state change of a monitor rule: ``state`` is ``"firing"`` (the rule's ``value`` crossed
    its ``limit``) or ``"resolved"`` (back past the limit and its margin). ``metric`` names the
    metric the rule watches (None for rules over whole samples: latency, cost, error rate);
    ``time`` is the monitor clock's time (seconds since the epoch by default)."""

    rule: str
    metric: str | None
    value: float
    limit: float
    state: str
    time: float = field(default_factory=time.time)
    message: str = ""

    def to_dict(self) -> dict:
        """Plain-dict form (for JSON logs and webhooks)."""
        return {
            "rule": self.rule,
            "metric": self.metric,
            "value": self.value,
            "limit": self.limit,
            "state": self.state,
            "time": self.time,
            "message": self.message,
        }


class Trigger:
    """The hysteresis of one rule on one metric: :meth:`update` returns ``"firing"`` once when the
    value crosses the limit, ``"resolved"`` once when it is back past ``limit`` by ``margin``, and
    None otherwise (no alert on every sample of a long degradation).

    ``above=True``: the bad side is above the limit (rates, latency, cost, drift); False: below it
    (score floors, where a drop is bad). A rule with ``margin`` 0 resolves as soon as the value is
    back on the good side (or on the limit)."""

    __slots__ = ("limit", "above", "margin", "firing")

    def __init__(self, limit: float, *, above: bool, margin: float = 0.0):
        self.limit, self.above, self.margin = float(limit), above, float(margin)
        self.firing = False

    def update(self, value: float) -> str | None:
        """Feed the rule's current value; the state change it causes, if any."""
        if self.above:
            bad, good = value > self.limit, value <= self.limit - self.margin
        else:
            bad, good = value < self.limit, value >= self.limit + self.margin
        if not self.firing and bad:
            self.firing = True
            return "firing"
        if self.firing and good:
            self.firing = False
            return "resolved"
        return None


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between the closest ranks, as
    ``numpy.percentile``'s default: position ``(n - 1) q / 100`` in the sorted values.

    Example: 20 latencies 1, 2, ..., 20 s: position 0.95 * 19 = 18.05, between the 19th (19 s) and
    20th (20 s) values: p95 = 19 + 0.05 * (20 - 19) = 19.05 s."""
    if not len(values):
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (pos - lo) * (ordered[hi] - ordered[lo])


def psi(reference: Sequence[float], recent: Sequence[float], *, edges: Sequence[float]) -> float:
    """Population stability index of ``recent`` against ``reference`` over the bins ``edges``
    (``len(edges) - 1`` bins; values outside fall into the first / last bin):
    ``sum_i (a_i - e_i) ln(a_i / e_i)`` where ``e_i`` and ``a_i`` are the reference and recent
    shares of bin i, an empty bin counting :data:`PSI_EPSILON`. Customary reading: below 0.1 stable,
    0.1 to 0.25 a moderate shift, above 0.25 a significant one.

    Example (the doctest above): two bins split at 0.5; reference shares 0.5 / 0.5, recent 0 / 1
    (the empty bin counts 1e-4): (1e-4 - 0.5) ln(1e-4 / 0.5) + (1 - 0.5) ln(1 / 0.5)
    = (-0.4999)(-8.5172) + 0.5 (0.6931) = 4.2577 + 0.3466 = 4.6043."""
    if len(edges) < 2:
        raise ValueError("psi needs at least two bin edges")
    if not len(reference) or not len(recent):
        raise ValueError("psi of an empty sample")
    return psi_of_shares(shares(reference, edges), shares(recent, edges))


def psi_of_shares(e: Sequence[float] | np.ndarray, a: Sequence[float] | np.ndarray) -> float:
    """:func:`psi` from the bin shares (as :func:`shares` gives them) of the reference and recent values."""
    return math.fsum((ai - ei) * math.log(ai / ei) for ei, ai in zip(e, a))


def shares(values: Sequence[float], edges: Sequence[float]) -> np.ndarray:
    """The share of ``values`` in each bin of ``edges``, an empty bin counting :data:`PSI_EPSILON`."""
    inner = np.asarray(edges[1:-1], dtype=float)
    idx = np.searchsorted(inner, np.asarray(values, dtype=float), side="right")
    counts = np.bincount(idx, minlength=len(edges) - 1).astype(float)
    shares = counts / counts.sum()
    return np.where(shares == 0.0, PSI_EPSILON, shares)
