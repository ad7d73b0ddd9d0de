"""Internal: The Metric base class: validated levels, not-applicable handling, never-raise scoring, and the
facts about a metric that the rest of ragmeter reads from its class (its role in the diagnosis,
the monitor rule its drop fires, whether it needs the question, where its evidence is, what people
rate for it, its levels under the domain profiles). Adding a metric is its class and one line in
:data:`ragmeter.metrics.REGISTRY`: every part reads these facts from there."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

from ragmeter.data import Sample, Score, label_for
from ragmeter.judges.base import Embedder, Judge, JudgeError
from ragmeter.judges.fingerprint import CODE_FINGERPRINT
from ragmeter.metrics.requests import LimitError, ScoringContext, TaskRecorder

__all__ = ["Metric", "LabelingCriterion", "EVIDENCE"]

#: What a Score's ``details`` can hold as evidence (:attr:`Metric.evidence`), read by the
#: dashboard's drill-down, the monitor and the trace writers:
#:
#: - ``"claims"``: ``details["claims"]``, the answer's claims with their verdicts and quotes;
#: - ``"citations"``: ``details["citations"]`` and ``details["counts"]``, per citation verdicts;
#: - ``"chunk_relevance"``: ``details["chunks"]``, each chunk's relevance score;
#: - ``"chunk_usefulness"``: ``details["chunks"]``, whether each chunk was useful;
#: - ``"statements"``: ``details["statements"]``, the reference statements found in the chunks.
EVIDENCE = ("claims", "citations", "chunk_relevance", "chunk_usefulness", "statements")


@dataclass(frozen=True)
class LabelingCriterion:
    """What people rate for a metric on the labeling page (:mod:`ragmeter.labels`): the criterion's
    ``name`` (its column in the labeling export), the ``question`` it asks and ``anchors`` for the
    ratings 1, 3 and 5 of its 1-5 scale. A label on the criterion is compared with the metric."""

    name: str
    question: str
    anchors: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """``{"question", "anchors"}``, as the labeling export writes a criterion."""
        return {"question": self.question, "anchors": dict(self.anchors)}


class Metric:
    """Base class of every metric.

    Subclasses set ``name``, default ``threshold`` / ``warn`` levels, the sample fields they
    ``require``, whether they ``use_judge`` and whether they ``read_text``, and implement
    :meth:`compute`. :meth:`ascore` wraps it: a missing field gives a not-applicable Score, a
    record past the run's :class:`~ragmeter.metrics.requests.Limits` (for a metric that reads
    text) or an exception gives a Score with the error (a metric never raises into the run),
    and the label and judge name are filled in.
    """

    name: str = "metric"
    threshold: float = 0.7
    warn: float = 0.5
    requires: tuple[str, ...] = ()
    uses_judge: bool = True
    #: Whether the metric reads the record's texts (question, answer, reference, chunks), so that
    #: the run's :class:`~ragmeter.metrics.requests.Limits` apply to it (retrieval metrics read ids only).
    reads_text: bool = True
    #: Questions this metric needs ``generate_questions`` to write (None: it needs none). The run
    #: asks once for the largest number any of its metrics declares (:class:`RequestSettings`).
    n_questions: int | None = None
    #: The shared context requests this metric reads (``"chunk_ratings"``, ``"reference_attribution"``
    #: of :class:`~ragmeter.metrics.requests.ScoringContext`): a run whose metrics read both asks
    #: them as one ``review_context`` judge call (:class:`RequestSettings`).
    reads_requests: frozenset = frozenset()
    #: The side of the diagnosis (:func:`ragmeter.verdicts.diagnose`) a low value points to:
    #: ``"retrieval"`` (the chunks miss or bury what is needed) or ``"generation"`` (the answer
    #: strays from the chunks or the question); None: no part in it. The diagnosis' signals are
    #: also what :class:`ragmeter.Monitor` watches by default (a floor at each one's ``warn``).
    diagnosis: str | None = None
    #: The order of this signal among its side's in the diagnosis' reasons (lowest first; ties in
    #: registry order).
    diagnosis_rank: int = 0
    #: The monitor rule a drop of this metric's recent mean fires (``"faithfulness_degradation"``,
    #: ``"retrieval_degradation"``; :class:`ragmeter.Monitor`'s ``max_drop``); None: none.
    degradation_rule: str | None = None
    #: Whether the metric reads the question: False for one that judges the answer against the
    #: chunks only (faithfulness), which a LlamaIndex evaluator then scores without a query.
    needs_question: bool = True
    #: What its Scores' ``details`` hold as evidence (names of :data:`EVIDENCE`).
    evidence: frozenset = frozenset()
    #: What people rate for it on the labeling page (None: no criterion of its own).
    criterion: LabelingCriterion | None = None
    #: Its (pass, warn) levels under a domain profile (:mod:`ragmeter.profiles`): profile -> levels.
    profile_levels: Mapping[str, tuple[float, float]] = {}
    #: The domain profiles that add this metric as one of their checks (``legal_citations``: legal).
    profile_checks: tuple[str, ...] = ()
    #: Whether reports label its mean with a relevance band (:func:`ragmeter.profiles.relevance_band`).
    banded: bool = False

    def __init__(self, *, threshold: float | None = None, warn: float | None = None):
        self._set_levels(threshold, warn)

    def with_levels(self, threshold: float | None = None, warn: float | None = None) -> Metric:
        """This metric with other pass / warn levels: a copy when either is given, else itself.
        Raises ValueError unless 0 <= warn <= threshold <= 1."""
        if threshold is None and warn is None:
            return self
        metric = copy.copy(self)
        metric._set_levels(threshold, warn)
        return metric

    def _set_levels(self, threshold: float | None, warn: float | None) -> None:
        if threshold is not None:
            self.threshold = float(threshold)
        if warn is not None:
            self.warn = float(warn)
        if not 0.0 <= self.warn <= self.threshold <= 1.0:
            raise ValueError(f"{self.name}: need 0 <= warn ({self.warn}) <= threshold ({self.threshold}) <= 1")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        """Compute the Score (without label); raise on failure. Implemented by subclasses."""
        raise NotImplementedError

    async def embedding_inputs(self, sample: Sample, ctx: ScoringContext) -> list[str]:
        """Texts this metric needs embedded (collected into one embedding call per sample)."""
        return []

    def missing_fields(self, sample: Sample) -> list[str]:
        """The required sample fields that are absent."""
        missing = []
        for f in self.requires:
            value = getattr(sample, f)
            if value is None or (f == "contexts" and not value) or (isinstance(value, str) and not value.strip()):
                missing.append(f)
        return missing

    def judge_name(self, ctx: ScoringContext) -> str:
        """Who judged: the judge's name, or ``"code"`` for metrics that need none."""
        if not self.uses_judge or ctx.judge is None:
            return "code"
        return ctx.judge.name

    async def ascore(self, sample: Sample, ctx: ScoringContext | None = None) -> Score:
        """Score one sample; never raises (errors are returned on the Score)."""
        ctx = ctx if ctx is not None else ScoringContext(sample, metrics=[self])
        judge = self.judge_name(ctx)
        missing = self.missing_fields(sample)
        if missing:
            return Score(
                self.name,
                None,
                explanation=f"not applicable: the sample has no {' / '.join(missing)}",
                details={"missing": missing},
                judge=judge,
            )
        rec = TaskRecorder(ctx)
        try:
            limit = ctx.limit_error if self.reads_text else None
            if limit is not None:
                score = limit.score(self.name)
            else:
                score = await self.compute(sample, rec)  # type: ignore[arg-type]
        except LimitError as err:
            score = err.score(self.name)
        except JudgeError as err:
            score = Score(
                self.name,
                None,
                error=f"{type(err).__name__}: {err}",
                details={"task": err.task, "attempts": err.attempts},
            )
        except Exception as err:  # a metric bug or bad data must not stop the run
            score = Score(self.name, None, error=f"{type(err).__name__}: {err}")
        if rec.used:
            score.details.setdefault("judge_usage", {k: v.to_dict() for k, v in rec.used.items()})
        if rec.notes:
            score.details.setdefault("judge_notes", rec.notes)
        score.judge = score.judge or judge
        if score.fingerprint is None:
            score.fingerprint = (
                ctx.judge.fingerprint if self.uses_judge and ctx.judge is not None else CODE_FINGERPRINT
            ).id
        score.label = label_for(score.value, self.threshold, self.warn)
        score.details.setdefault("threshold", self.threshold)
        score.details.setdefault("warn", self.warn)
        return score

    def score(self, sample: Sample, judge: Judge | str | None = None, embedder: Embedder | None = None) -> Score:
        """Synchronous convenience: score one sample with ``judge``: a Judge (an ensemble works
        too), a spec such as ``"offline"``, or None for the default judge, as in ``evaluate()``."""
        from ragmeter.judges.spec import resolve_judge
        from ragmeter.loops import run_sync
        from ragmeter.metrics.scoring import score_sample

        return run_sync(score_sample(sample, [self], resolve_judge(judge, [self]), embedder)).scores[self.name]
