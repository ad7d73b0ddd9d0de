"""Internal: Answer quality: :class:`AnswerRelevancy`, :class:`AnswerCorrectness`,
:class:`ResponseCompleteness`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragmeter.data import Sample, Score
from ragmeter.judges.base import JudgeError, cosine
from ragmeter.metrics.base import LabelingCriterion, Metric
from ragmeter.metrics.requests import DEFAULT_N_QUESTIONS, ScoringContext
from ragmeter.text import split_sentences

__all__ = ["AnswerRelevancy", "AnswerCorrectness", "ResponseCompleteness"]


def _vector(vectors: dict, text: str, what: str):
    try:
        return vectors[text]
    except KeyError:
        raise JudgeError(f"no embedding for the {what}; the embedding call did not include it") from None


class AnswerRelevancy(Metric):
    """Answer relevancy: does the answer address the question that was asked?

    ``method="embeddings"`` (default, RAGAS-style): the judge writes ``n`` (default 3) questions
    the answer would answer, in one call (``generate_questions``); each is embedded with the
    original question (one embedding call per sample, shared with answer correctness) and the
    score is the mean cosine similarity (``aggregate="max"``: the best one), negative cosines
    clipped to 0. An answer the judge flags as noncommittal ("I don't know", evasive) scores 0.
    With a judge that cannot write questions (the offline judge) the score is the cosine of
    question and answer, and the explanation says so. The question embedded is the one judges
    read (:func:`ragmeter.conversations.judged_question`: a chat turn's standalone question).

    ``method="rating"``: one ``rate_answer`` call, the judge's 0..1 rating (no embeddings needed).

    Example: question "When was Einstein born?", answer "Einstein was born on 14 March 1879.",
    generated questions with cosines 0.96, 0.90, 0.87 to the question -> mean 0.91 (pass).

    Thresholds: pass 0.8, warn 0.6 (common production targets; embedding cosines of on-topic
    question pairs typically lie above 0.8).
    """

    name = "answer_relevancy"
    threshold = 0.8
    warn = 0.6
    requires = ("answer",)
    diagnosis = "generation"
    banded = True
    criterion = LabelingCriterion(
        "relevance",
        "Does the answer address the question that was asked?",
        {
            "1": "off-topic or answers another question",
            "3": "partly addresses it, or buries the answer in unrelated text",
            "5": "directly and only answers the question",
        },
    )

    def __init__(
        self,
        *,
        n: int = DEFAULT_N_QUESTIONS,
        method: str = "embeddings",
        aggregate: str = "mean",
        threshold: float | None = None,
        warn: float | None = None,
    ):
        super().__init__(threshold=threshold, warn=warn)
        if method not in ("embeddings", "rating"):
            raise ValueError("method must be 'embeddings' or 'rating'")
        if aggregate not in ("mean", "max"):
            raise ValueError("aggregate must be 'mean' or 'max'")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError("n must be a positive integer")
        self.n = n
        self.method = method
        self.aggregate = aggregate
        self.n_questions = n if method == "embeddings" else None

    async def embedding_inputs(self, sample: Sample, ctx: ScoringContext) -> list[str]:
        if self.method != "embeddings" or self.missing_fields(sample):
            return []
        if not ctx.generates_questions():
            return [ctx.question_text(), ctx.answer_text()]
        try:
            out = await ctx.generated_questions()
        except Exception:  # the metric reports the failure itself; other metrics still get vectors
            return []
        if out["noncommittal"]:
            return []
        return [ctx.question_text(), *out["questions"][: self.n]]

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        if self.method == "rating":
            out = await ctx.answer_rating()
            reason = out["reason"]
            return Score(
                self.name,
                out["score"],
                explanation=f"rated {out['score']:.2f} by the judge" + (f": {reason}" if reason else ""),
                details={"method": "rating", "reason": reason},
            )
        out = await ctx.generated_questions()
        details: dict = {"method": "embeddings", "aggregate": self.aggregate, "noncommittal": out["noncommittal"]}
        if out["noncommittal"]:
            return Score(
                self.name,
                0.0,
                explanation="the answer is noncommittal (evasive, vague or declines to answer): scored 0",
                details=details,
            )
        vectors = await ctx.embeddings()
        q = _vector(vectors, ctx.question_text(), "question")
        if not ctx.generates_questions():
            sim = max(0.0, cosine(q, _vector(vectors, ctx.answer_text(), "answer")))
            details["similarity"] = sim
            judge = getattr(ctx.judge, "name", "this")
            return Score(
                self.name,
                sim,
                details=details,
                explanation=f"the {judge} judge cannot generate questions; score = similarity of question and answer ({sim:.2f})",
            )
        questions = out["questions"][: self.n]
        sims = [cosine(q, _vector(vectors, g, "generated question")) for g in questions]
        details["questions"] = [{"question": g, "similarity": s} for g, s in zip(questions, sims)]
        raw = max(sims) if self.aggregate == "max" else sum(sims) / len(sims)
        value = max(0.0, raw)
        explanation = (
            f"{self.aggregate} cosine similarity of the question and {len(sims)} questions generated "
            f"from the answer: {value:.2f}"
        )
        return Score(self.name, value, explanation=explanation, details=details)


def word_share(texts: Sequence[str], supports: Sequence[float]) -> float:
    """The mean of ``supports`` weighted by the number of words of each text (0.0 when empty).

    ``sum(words_i * support_i) / sum(words_i)``, a text counting at least one word: how much of
    the texts, in words, is supported. Example: texts of 6 and 4 words, supports 1.0 and 0.5 ->
    (6 * 1.0 + 4 * 0.5) / 10 = 0.8.
    """
    weights = [max(1, len(t.split())) for t in texts]
    return sum(s * w for s, w in zip(supports, weights)) / sum(weights) if weights else 0.0


class AnswerCorrectness(Metric):
    """Answer correctness against the reference answer: factual F1 blended with semantic similarity.

    The answer's claims (``extract_claims``, shared with faithfulness) and the reference's
    statements (its sentences) are compared in one call (``compare_claims``). Precision P = the
    share of the answer's claims, in words, that the reference states; recall R = the share of
    the reference's statements, in words, that the answer covers (:func:`word_share`: each item
    counts its number of words, with its graded ``support`` when the judge grades, the offline
    judge, and 1 or 0 from the verdict otherwise). ``F1 = 2PR / (P + R)`` (0 when P or R is 0).
    Precision and recall are each a rate over its own items, so an answer with many claims cannot
    look complete whatever it covers; counting words, a one-word "Yes." weighs less than a
    sentence that states a fact. Similarity = cosine of the answer and reference embeddings
    (clipped to [0, 1]; the sample's one embedding call).

    Formula: ``(w_f * F1 + w_s * similarity) / (w_f + w_s)`` with ``weights=(w_f, w_s)``,
    default (0.75, 0.25). ``weights=(1, 0)`` needs no embeddings.

    Example: answer claims of 5, 3 and 4 words, the first two in the reference: P = 8 / 12 =
    0.6667; reference statements of 5, 3, 4 and 7 words, the first two covered: R = 8 / 19 =
    0.4211 -> F1 = 2 * 0.6667 * 0.4211 / (0.6667 + 0.4211) = 16 / 31 = 0.5161; similarity 0.6
    -> 0.75 * 0.5161 + 0.25 * 0.6 = 0.5371 (warn). Claims all in the reference that cover only
    its first statement: P = 1, R = 5 / 19 -> F1 = 0.4167.

    Not applicable without a reference. Thresholds: pass 0.7, warn 0.5 (an F1 of 0.6 with a
    close paraphrase, 0.9 similarity, passes; missing half the reference warns).
    """

    name = "answer_correctness"
    threshold = 0.7
    warn = 0.5
    requires = ("answer", "reference")
    profile_levels = {"legal": (0.8, 0.6), "medical": (0.8, 0.6)}

    def __init__(
        self, *, weights: Sequence[float] = (0.75, 0.25), threshold: float | None = None, warn: float | None = None
    ):
        super().__init__(threshold=threshold, warn=warn)
        w = [float(x) for x in weights]
        if len(w) != 2 or any(x < 0 for x in w) or sum(w) <= 0:
            raise ValueError("weights must be two non-negative numbers (factual, semantic) with a positive sum")
        self.weights = (w[0], w[1])

    async def embedding_inputs(self, sample: Sample, ctx: ScoringContext) -> list[str]:
        if self.weights[1] == 0 or self.missing_fields(sample):
            return []
        return [ctx.answer_text(), sample.reference]  # type: ignore[list-item]

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        reference = sample.reference or ""
        statements = split_sentences(reference)
        if not statements:
            return Score(self.name, None, explanation="not applicable: the reference has no statements")
        claims = await ctx.claims()
        claim_records: list[dict] = []
        statement_records: list[dict[str, Any]] = [
            {"statement": s, "in_answer": False, "support": 0.0} for s in statements
        ]
        if claims:
            out = await ctx.claim_comparison(claims, statements)
            # A judge that grades support (the offline judge) gives partial credit per claim and
            # statement; otherwise the verdict counts 1 or 0.
            claim_records = [
                {
                    "claim": c["text"],
                    "in_reference": v["in_reference"],
                    "support": float(v.get("support", v["in_reference"])),
                }
                for c, v in zip(claims, out["claims"])
            ]
            statement_records = [
                {"statement": s, "in_answer": v["in_answer"], "support": float(v.get("support", v["in_answer"]))}
                for s, v in zip(statements, out["statements"])
            ]
        precision = word_share([r["claim"] for r in claim_records], [r["support"] for r in claim_records])
        recall = word_share(statements, [r["support"] for r in statement_records])
        stated = sum(r["support"] >= 0.5 for r in claim_records)
        covered = sum(r["support"] >= 0.5 for r in statement_records)
        f1 = 2 * precision * recall / (precision + recall) if precision and recall else 0.0
        w_f, w_s = self.weights
        details: dict = {
            "weights": [w_f, w_s],
            "f1": f1,
            "precision": precision,
            "recall": recall,
            "claims": claim_records,
            "statements": statement_records,
        }
        similarity = None
        if w_s > 0:
            vectors = await ctx.embeddings()
            similarity = max(
                0.0, cosine(_vector(vectors, ctx.answer_text(), "answer"), _vector(vectors, reference, "reference"))
            )
            details["similarity"] = similarity
        value = (w_f * f1 + w_s * (similarity or 0.0)) / (w_f + w_s)
        explanation = (
            f"factual F1 {f1:.2f} (precision {precision:.2f}: {stated} of {len(claim_records)} claims "
            f"mostly in the reference; recall {recall:.2f}: {covered} of {len(statement_records)} reference "
            f"statements mostly covered; shares by words)"
        )
        if similarity is not None:
            explanation += f", similarity {similarity:.2f}, weights {w_f:g}/{w_s:g}"
        if not claims:
            explanation += "; the answer makes no factual claim"
        return Score(self.name, value, explanation=explanation, details=details)


class ResponseCompleteness(Metric):
    """Response completeness: does the answer cover every part of the question?

    The judge splits the question into the distinct parts it asks about and marks each covered
    or not (the ``parts`` of ``generate_questions``: the same call as answer relevancy, so it
    costs nothing extra when both run). Formula: covered parts / parts.

    Example: "When was Einstein born and where did he die?" -> parts "when born" (covered) and
    "where died" (not covered) -> 1 / 2 = 0.5 (fail).

    With a judge that measures completeness against the reference (``completeness_from_reference``,
    the offline judge) and a sample that has one, the score is instead the share of the
    reference's statements the answer covers (``compare_claims``, the call answer correctness
    makes; each statement's graded ``support`` when the judge gives one), each statement weighted
    by its number of words. Example: a reference of two statements of 6 and 4 words, the first
    covered fully (support 1.0), the second half (0.5) -> (6 * 1.0 + 4 * 0.5) / 10 = 0.8.

    Thresholds: pass 0.8, warn 0.6 (an answer should address at least four in five parts of what
    was asked; missing one of two fails).
    """

    name = "response_completeness"
    threshold = 0.8
    warn = 0.6
    requires = ("answer",)
    criterion = LabelingCriterion(
        "completeness",
        "Does the answer cover everything the question needs?",
        {
            "1": "misses the essential part",
            "3": "covers the main part, misses secondary parts",
            "5": "nothing needed is missing",
        },
    )

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        if sample.reference and getattr(ctx.judge, "completeness_from_reference", False):
            statements = split_sentences(sample.reference)
            if statements:
                return await self._against_reference(statements, ctx)
        out = await ctx.generated_questions()
        parts = out["parts"]
        covered = [p["text"] for p in parts if p["covered"]]
        missing = [p["text"] for p in parts if not p["covered"]]
        value = len(covered) / len(parts)
        explanation = f"{len(covered)} of {len(parts)} parts of the question covered"
        if missing:
            explanation += ": missing " + "; ".join(repr(m) for m in missing[:5])
        return Score(
            self.name, value, explanation=explanation, details={"parts": parts, "covered": covered, "missing": missing}
        )

    async def _against_reference(self, statements: list[str], ctx: ScoringContext) -> Score:
        """The share of the reference's statements the answer covers (graded when the judge grades)."""
        claims = await ctx.claims()
        if claims:
            out = (await ctx.claim_comparison(claims, statements))["statements"]
            covers = [float(v.get("support", v["in_answer"])) for v in out]
        else:
            covers = [0.0] * len(statements)
        records: list[dict[str, Any]] = [{"statement": s, "covered": c} for s, c in zip(statements, covers)]
        # "How much of the reference" counts words, so a long statement weighs more than a short one.
        value = word_share(statements, covers)
        missing = [r["statement"] for r in records if r["covered"] < 0.5]
        explanation = (
            f"the answer covers {value:.0%} of the reference ({len(statements) - len(missing)} of "
            f"{len(statements)} statements mostly covered)"
        )
        if not claims:
            explanation += "; the answer makes no factual claim"
        return Score(
            self.name,
            value,
            explanation=explanation,
            details={"method": "reference", "statements": records, "missing": missing},
        )
