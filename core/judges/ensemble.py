"""Internal: EnsembleJudge: several judges score every metric; the ensemble reports the median."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ragmeter.data import Score, label_for
from ragmeter.judges.base import Judge, JudgeError, TaskResult

__all__ = ["EnsembleJudge"]


class EnsembleJudge(Judge):
    """Median of several judges per score, with disagreement flagged.

    Each member judge scores every metric on its own (its own task calls); the ensemble Score's
    value is the median of the members' values, ``details["members"]`` keeps each member's value,
    and ``details["disagreement"]`` is True when the members' values differ by more than
    ``max_spread`` (default 0.3): ``max - min > max_spread``. Members that failed are listed with
    their error; with no member value the Score carries the errors.

    Example: members 0.9, 0.85 and 0.4 give value 0.85, spread 0.5, disagreement True.
    """

    name = "ensemble"
    kind = "LLM"

    def __init__(self, judges: Sequence[Judge], max_spread: float = 0.3):
        if len(judges) < 2:
            raise ValueError("an EnsembleJudge needs at least two judges")
        names = [j.name for j in judges]
        if len(set(names)) != len(names):
            raise ValueError(f"ensemble members need distinct names, got {names}")
        self.members = list(judges)
        self.max_spread = float(max_spread)
        self.embedder = next((j.embedder for j in judges if j.embedder is not None), None)

    def check(self) -> None:
        """Check every member (ValueError naming the first that cannot work)."""
        for judge in self.members:
            judge.check()

    def describe(self) -> Any:
        """Backend ``ensemble`` with the members' fingerprints, in order (and the spread that flags)."""
        from ragmeter.judges.fingerprint import JudgeFingerprint

        return JudgeFingerprint(
            backend="ensemble",
            model=f"median, max_spread {self.max_spread:g}",
            members=tuple(j.fingerprint for j in self.members),
        )

    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Not used: :class:`ragmeter.metrics.scoring.EnsembleScorer` asks each member and combines
        Scores with :meth:`combine`."""
        raise JudgeError("EnsembleJudge combines Scores, not task answers: score with ragmeter.evaluate()", task=task)

    def combine(self, metric: Any, scores: Sequence[Score]) -> Score:
        """One Score from the members' Scores for ``metric`` (anything with ``name``,
        ``threshold`` and ``warn``; scores in the order of ``members``)."""
        members = {
            j.name: {"value": s.value, "label": s.label, "error": s.error, "explanation": s.explanation}
            for j, s in zip(self.members, scores)
        }
        values = [s.value for s in scores if s.value is not None]
        if not values:
            errors = [f"{j.name}: {s.error}" for j, s in zip(self.members, scores) if s.error]
            if errors:
                return Score(
                    metric.name,
                    None,
                    error="no judge produced a value: " + "; ".join(errors),
                    details={"members": members},
                    judge=self.name,
                    fingerprint=self.fingerprint.id,
                )
            return Score(
                metric.name,
                None,
                explanation=scores[0].explanation,
                details={"members": members},
                judge=self.name,
                fingerprint=self.fingerprint.id,
            )
        value = float(statistics.median(values))
        spread = max(values) - min(values)
        flagged = spread > self.max_spread
        explanation = f"median of {len(values)} judges ({', '.join(f'{v:.2f}' for v in values)})"
        if flagged:
            explanation += f"; judges disagree (spread {spread:.2f} > {self.max_spread})"
        return Score(
            metric.name,
            value,
            explanation=explanation,
            details={"members": members, "spread": spread, "disagreement": flagged},
            judge=self.name,
            label=label_for(value, metric.threshold, metric.warn),
            fingerprint=self.fingerprint.id,
        )
