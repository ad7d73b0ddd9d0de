"""Internal: Custom metrics: :class:`Criteria` (judged, defined in words) and :class:`FunctionMetric`
(deterministic, a plain function).

:class:`Criteria` is what DeepEval users know as G-Eval and RAGAS users as AspectCritic / rubric
scores: the judge reads the criterion and its 1-5 rubric and scores the sample, with a reason.
Every Criteria of a sample is asked in one ``judge_criteria`` request (one judge call per sample
for any number of criteria), through the same validated, cached and retried task machinery as the
built-in metrics; each criterion's result is validated on its own (exactly one per criterion,
score 1..5, a reason).

A deterministic metric is a :class:`~ragmeter.metrics.base.Metric` subclass with
``uses_judge = False`` and a ``compute``, or a plain function wrapped in :class:`FunctionMetric`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragmeter.conversations import judged_question
from ragmeter.data import Sample, Score
from ragmeter.metrics import metric_names
from ragmeter.metrics.base import Metric
from ragmeter.metrics.requests import ScoringContext

__all__ = ["Criteria", "FunctionMetric", "CRITERIA_INPUTS", "DEFAULT_RUBRIC"]

#: The sample fields a criterion can read.
CRITERIA_INPUTS = ("question", "answer", "contexts", "reference")

#: The rubric of a criterion given without one: anchors at 1, 3 and 5.
DEFAULT_RUBRIC = {
    1: "does not meet the criterion at all",
    3: "partly meets the criterion",
    5: "fully meets the criterion",
}


class Criteria(Metric):
    """A metric defined in words, scored by the judge on a 1-5 rubric, with a reason.

    ``Criteria(name, criteria="...", rubric={1: "...", 5: "..."}, inputs=["question", "answer"])``:
    ``criteria`` says what is judged; ``rubric`` describes some scores from 1 (worst) to 5 (best)
    (default :data:`DEFAULT_RUBRIC`); ``inputs`` are the sample fields the judge reads (any of
    :data:`CRITERIA_INPUTS`; default question and answer); the metric is not applicable to a
    sample without one of them.

    Value: the rubric score ``s`` scaled to [0, 1] as ``(s - 1) / 4``: 1 -> 0.0, 2 -> 0.25,
    3 -> 0.5, 4 -> 0.75, 5 -> 1.0. Example: the judge gives 4 ("cites a source for every figure
    but one") -> (4 - 1) / 4 = 0.75, which passes the default threshold (pass 0.75 = a rubric 4,
    warn 0.5 = a rubric 3). The judge's reason is the Score's explanation.

    Cost: every Criteria of a sample shares one ``judge_criteria`` call, whatever their number and
    inputs (the call carries the fields any of them reads; each criterion is told which it may
    use). A judge that cannot judge a criterion (the offline judge cannot judge any) answers
    "not applicable" with its reason: the Score has value None and that reason, never a number.

    >>> Criteria("concise", criteria="The answer is short and to the point.").requires
    ('question', 'answer')
    """

    threshold = 0.75
    warn = 0.5

    def __init__(
        self,
        name: str,
        criteria: str,
        rubric: Mapping[int, str] | None = None,
        inputs: Sequence[str] = ("question", "answer"),
        *,
        threshold: float | None = None,
        warn: float | None = None,
    ):
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a Criteria needs a non-empty name")
        self.name = name.strip()
        if self.name in metric_names():
            raise ValueError(f"{self.name!r} is a built-in metric's name; give the criterion another name")
        super().__init__(threshold=threshold, warn=warn)
        if not isinstance(criteria, str) or not criteria.strip():
            raise ValueError(f"{self.name}: criteria must be a non-empty description of what is judged")
        self.criteria = criteria.strip()
        rubric = dict(DEFAULT_RUBRIC if rubric is None else rubric)
        bad = [k for k in rubric if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 5]
        if bad or not rubric:
            raise ValueError(f"{self.name}: rubric keys must be integer scores 1..5, got {sorted(map(repr, rubric))}")
        empty = [k for k, v in rubric.items() if not isinstance(v, str) or not v.strip()]
        if empty:
            raise ValueError(f"{self.name}: rubric score(s) {sorted(empty)} need a non-empty description")
        self.rubric = {k: rubric[k].strip() for k in sorted(rubric)}
        inputs = [inputs] if isinstance(inputs, str) else list(inputs)
        unknown = [f for f in inputs if f not in CRITERIA_INPUTS]
        if unknown or not inputs:
            raise ValueError(f"{self.name}: inputs must be some of {list(CRITERIA_INPUTS)}, got {inputs!r}")
        self.inputs = tuple(f for f in CRITERIA_INPUTS if f in inputs)
        self.requires = self.inputs

    def definition(self) -> dict:
        """What the judge is given for this criterion (levels excluded: they do not change the call)."""
        return {
            "name": self.name,
            "criteria": self.criteria,
            "rubric": [[k, v] for k, v in self.rubric.items()],
            "inputs": list(self.inputs),
        }

    @staticmethod
    def request(sample: Sample, criteria: Sequence[Criteria]) -> dict:
        """The ``judge_criteria`` inputs for ``criteria`` on ``sample``: their definitions (the
        first of each name) and the sample fields any of them reads; the question is the one judges
        read (:func:`ragmeter.conversations.judged_question`: a chat turn's standalone question)."""
        seen: dict[str, dict] = {}
        for c in criteria:
            seen.setdefault(c.name, c.definition())
        fields = {f for d in seen.values() for f in d["inputs"]}
        values = {
            "question": judged_question(sample),
            "answer": sample.answer,
            "contexts": sample.context_texts,
            "reference": sample.reference,
        }
        return {"criteria": list(seen.values()), "sample": {f: values[f] for f in CRITERIA_INPUTS if f in fields}}

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        group = [m for m in ctx.metrics if isinstance(m, Criteria) and not m.missing_fields(sample)]
        if not any(m.name == self.name for m in group):
            group = [*group, self]
        inputs = self.request(sample, group)
        names = [d["name"] for d in inputs["criteria"]]
        mine = inputs["criteria"][names.index(self.name)]
        if mine != self.definition():
            raise ValueError(f"two different Criteria are named {self.name!r}: give each its own name")
        result = (await ctx.task("judge_criteria", inputs)).output["results"][names.index(self.name)]
        s, reason = result["score"], result["reason"]
        details: dict[str, Any] = {
            "criteria": self.criteria,
            "rubric": dict(self.rubric),
            "inputs": list(self.inputs),
            "rubric_score": s,
            "reason": reason,
            "judged_with": [n for n in names if n != self.name],
        }
        if s is None:
            return Score(self.name, None, explanation=f"not applicable: {reason}", details=details)
        value = (s - 1) / 4
        return Score(self.name, value, explanation=f"rubric score {s}/5 -> {value:.2f}: {reason}", details=details)


class FunctionMetric(Metric):
    """A deterministic metric from a plain function: ``FunctionMetric(name, fn, requires=...)``.

    ``fn(sample)`` returns the value, a float in [0, 1], or a full :class:`~ragmeter.data.Score`
    (for an explanation or details of your own; its ``metric`` is set to ``name``). No judge is
    used (``judge`` is ``"code"``); an exception becomes the Score's error, like in any metric.
    ``requires``: the sample fields ``fn`` needs (not applicable without them).

    >>> import ragmeter as rm
    >>> short = FunctionMetric("short", lambda s: 1.0 if len(s.answer.split()) <= 20 else 0.0)
    >>> short.score(rm.Sample("q?", ["c"], answer="Yes.")).value
    1.0
    """

    uses_judge = False

    def __init__(
        self,
        name: str,
        fn: Callable[[Sample], float | Score],
        *,
        requires: Sequence[str] = ("answer",),
        threshold: float | None = None,
        warn: float | None = None,
    ):
        if not isinstance(name, str) or not name.strip():
            raise ValueError("a FunctionMetric needs a non-empty name")
        if not callable(fn):
            raise TypeError(f"{name}: fn must be callable, got {type(fn).__name__}")
        self.name = name.strip()
        super().__init__(threshold=threshold, warn=warn)
        self.fn = fn
        self.requires = tuple(requires)

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        out = self.fn(sample)
        if isinstance(out, Score):
            out.metric = self.name
            return out
        if isinstance(out, bool) or not isinstance(out, (int, float)):
            raise TypeError(f"{self.name}: the function must return a float in [0, 1] or a Score, got {out!r}")
        what = getattr(self.fn, "__name__", "function")
        return Score(self.name, float(out), explanation=f"{self.name} = {float(out):.2f} (computed by {what})")
