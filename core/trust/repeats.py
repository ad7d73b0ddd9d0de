"""Internal: Repeats for unstable judges: ask the judge ``k`` times and keep every answer.

An LLM judge may score the same answer differently from one call to the next, even at
temperature 0. ``evaluate(..., repeats=k)`` (CLI ``--repeats K``) scores each sample as usual,
then asks the judge ``k - 1`` more times for the metrics that need it (each repeat is a fresh
request: the repeat's index is part of the judge's cache key, :data:`ragmeter.judges.base.REPEAT`)
and gives each Score:

* ``value``: the mean of the values (the label follows the mean);
* ``details["repeats"]``: ``values`` (each run's, the first first), ``mean``, ``spread`` (max -
  min), ``sd`` (population), ``k``, ``errors`` (runs that failed, left out of the mean),
  ``calls`` (the extra judge requests they cost) and ``unstable``.

With ``repeat_band=w`` (``--repeat-band W``) only scores whose first value lies within ``w`` of
the metric's threshold are repeated: the calls where a wobble can flip the verdict.

A score is **unstable** when its runs give different verdicts (some at or above the threshold,
some below) or spread more than :data:`UNSTABLE_SPREAD`. The report and the trust card flag them.
A deterministic judge (``kind == "CODE"``: the offline judge) repeats exactly: it is not asked again.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ragmeter.data import Sample, Score, label_for
from ragmeter.judges.base import REPEAT, Usage

__all__ = ["RepeatScorer", "UNSTABLE_SPREAD", "check_repeats"]

#: Runs of one score that spread more than this make it unstable (as an ensemble's members do).
UNSTABLE_SPREAD = 0.3


def check_repeats(repeats: int, band: float | None) -> None:
    """ValueError for a repeat count below 1 or a band outside [0, 1]."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number >= 1, got {repeats!r}")
    if band is not None and not 0.0 <= float(band) <= 1.0:
        raise ValueError(f"repeat_band must be between 0 and 1, got {band!r}")


class RepeatScorer:
    """A scorer (:class:`ragmeter.metrics.scoring.Scorer`) that asks ``base`` once, then
    ``repeats - 1`` more times for the judged metrics (those within ``band`` of their threshold
    when a band is given), and combines each metric's runs into one Score (see the module doc)."""

    def __init__(self, base: object, repeats: int, band: float | None = None, deterministic: bool = False):
        check_repeats(repeats, band)
        self.base = base
        self.repeats = repeats
        self.band = band
        self.deterministic = deterministic

    def _wanted(self, metric: object, score: Score) -> bool:
        if not getattr(metric, "uses_judge", False) or score.value is None:
            return False
        return self.band is None or abs(score.value - metric.threshold) <= self.band  # type: ignore[attr-defined]

    async def score(self, sample: Sample, metrics: Sequence[object]) -> tuple[dict[str, Score], Usage]:
        """The Scores of ``metrics`` on ``sample`` with the repeats folded in, and the cost of all runs."""
        first, usage = await self.base.score(sample, metrics)  # type: ignore[attr-defined]
        todo = [m for m in metrics if self._wanted(m, first[m.name])]  # type: ignore[attr-defined]
        if self.repeats == 1 or self.deterministic or not todo:
            return first, usage
        runs: dict[str, list[Score]] = {m.name: [] for m in todo}  # type: ignore[attr-defined]
        extra = Usage()
        for i in range(1, self.repeats):
            token = REPEAT.set(i)
            try:
                scores, cost = await self.base.score(sample, todo)  # type: ignore[attr-defined]
            finally:
                REPEAT.reset(token)
            extra = extra + cost
            for name, s in scores.items():
                runs[name].append(s)
        for m in todo:
            first[m.name] = _combine(m, first[m.name], runs[m.name], extra)  # type: ignore[attr-defined]
        return first, usage + extra


def _combine(metric: object, first: Score, rest: list[Score], extra: Usage) -> Score:
    values = [v for v in (first.value, *(s.value for s in rest)) if v is not None]  # (first has one: _wanted)
    errors = [s.error or s.explanation for s in rest if s.value is None]
    mean = statistics.fmean(values)
    threshold = metric.threshold  # type: ignore[attr-defined]
    spread = max(values) - min(values)
    flips = len({v >= threshold for v in values}) > 1
    repeats = {
        "k": len(rest) + 1,
        "values": values,
        "mean": mean,
        "spread": spread,
        "sd": statistics.pstdev(values),
        "errors": errors,
        "calls": extra.calls,
        "unstable": bool(flips or spread > UNSTABLE_SPREAD),
    }
    note = f"mean of {len(values)} judge runs ({', '.join(f'{v:.2f}' for v in values)})"
    if repeats["unstable"]:
        note += "; unstable: " + ("the runs' verdicts differ" if flips else f"spread {spread:.2f} > {UNSTABLE_SPREAD}")
    return Score(
        first.metric,
        mean,
        explanation=f"{first.explanation}; {note}" if first.explanation else note,
        details={**first.details, "repeats": repeats},
        judge=first.judge,
        label=label_for(mean, threshold, metric.warn),  # type: ignore[attr-defined]
        fingerprint=first.fingerprint,
    )
