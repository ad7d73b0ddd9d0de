"""Internal: Retrieved-context quality: :class:`ContextRelevance`, :class:`ContextPrecision`,
:class:`ContextRecall` and :class:`EntityRecall`.

One ``rate_chunks`` call rates every chunk of a sample for relevance, precision and the
reference-free recall estimate; one ``attribute_statements`` call serves context recall and
entity recall. Neither grows with the number of chunks.
"""

from __future__ import annotations

from ragmeter.aggregate import decayed_relevance
from ragmeter.data import Sample, Score
from ragmeter.metrics.base import Metric
from ragmeter.metrics.requests import ScoringContext
from ragmeter.metrics.retrieval import context_precision

__all__ = ["ContextRelevance", "ContextPrecision", "ContextRecall", "EntityRecall"]


def _chunk_ref(sample: Sample, i: int) -> dict:
    c = sample.contexts[i]
    return {"chunk": i, "rank": i + 1, "id": c.id}


class ContextRelevance(Metric):
    """Context relevance: the share of the retrieved text that is relevant to the question.

    Each chunk is split into statements (sentences); the judge marks the statements that help
    answer the question (``rate_chunks``, one call for all chunks).

    Formula (``aggregate="statements"``, default): relevant statements / statements, over all
    chunks. With a judge that grades each statement's relevance in [0, 1] (the offline judge's
    ``support`` on each chunk: its relevance model's grade, so even a relevant statement may grade
    below 1), the sum of the grades / statements, so a passage that nearly answers the question
    still counts for something.
    ``aggregate="decayed"``: the position-decayed mean of the per-chunk scores
    (relevant / statements of each chunk, graded likewise; an empty chunk scores 0),
    ``sum_i s_i d^i / sum_i d^i`` with ``decay=d`` (0.9), so irrelevant text at the top costs more.

    Example: two chunks with 4 statements (2 irrelevant, 2 relevant) and 7 statements (all
    relevant): 9 relevant of 11 -> 9 / 11 = 0.8182 (pass). Per-chunk scores 0.5 and 1.0;
    decayed: (0.5 + 0.9 * 1.0) / 1.9 = 0.7368. Graded, with the two irrelevant statements at
    0.125 and 0.0625: (9 + 0.1875) / 11 = 0.8352.

    Details: per-chunk scores with the relevant statements, the count of relevant chunks
    (chunks with at least one relevant statement), totals.

    Thresholds: pass 0.5, warn 0.3: chunks are written for many questions, so half of the
    retrieved sentences bearing on the question is good retrieval; below 0.3 the prompt is
    mostly noise.
    """

    name = "context_relevance"
    threshold = 0.5
    warn = 0.3
    requires = ("contexts",)
    reads_requests = frozenset({"chunk_ratings"})
    diagnosis = "retrieval"
    diagnosis_rank = 1
    degradation_rule = "retrieval_degradation"
    evidence = frozenset({"chunk_relevance"})
    banded = True

    def __init__(
        self,
        *,
        aggregate: str = "statements",
        decay: float = 0.9,
        threshold: float | None = None,
        warn: float | None = None,
    ):
        super().__init__(threshold=threshold, warn=warn)
        if aggregate not in ("statements", "decayed"):
            raise ValueError("aggregate must be 'statements' or 'decayed'")
        if not 0.0 < decay <= 1.0:
            raise ValueError("decay must be in (0, 1]")
        self.aggregate = aggregate
        self.decay = decay

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        statements, out = await ctx.chunk_ratings()
        per_chunk = []
        graded = all("support" in v and len(v["support"]) == len(sts) for sts, v in zip(statements, out["chunks"]))
        for i, (sts, verdict) in enumerate(zip(statements, out["chunks"])):
            rel = verdict["relevant"]
            weight = sum(verdict["support"]) if graded else len(rel)
            per_chunk.append(
                {
                    **_chunk_ref(sample, i),
                    "statements": len(sts),
                    "relevant": len(rel),
                    "score": (weight / len(sts)) if sts else 0.0,
                    "relevant_statements": [sts[j] for j in rel],
                    **({"graded": round(weight, 4)} if graded else {}),
                }
            )
        total = sum(c["statements"] for c in per_chunk)
        relevant = sum(c["relevant"] for c in per_chunk)
        weight = sum(c["graded"] for c in per_chunk) if graded else relevant
        relevant_chunks = sum(1 for c in per_chunk if c["relevant"])
        details = {
            "aggregate": self.aggregate,
            "chunks": per_chunk,
            "relevant_statements": relevant,
            "total_statements": total,
            "relevant_chunks": relevant_chunks,
            "total_chunks": len(per_chunk),
        }
        if total == 0:
            return Score(
                self.name, None, explanation="not applicable: the retrieved chunks contain no text", details=details
            )
        if self.aggregate == "decayed":
            value = decayed_relevance([c["score"] for c in per_chunk], decay=self.decay)
            details["decay"] = self.decay
            explanation = (
                f"position-decayed mean of per-chunk relevance (decay {self.decay:g}): {value:.2f}; "
                f"{relevant} of {total} statements relevant"
            )
        else:
            value = weight / total
            explanation = f"{relevant} of {total} statements relevant to the question"
            if graded:
                explanation += f" (graded: {weight:.2f} of {total})"
        explanation += f"; {relevant_chunks} of {len(per_chunk)} chunks relevant"
        return Score(self.name, value, explanation=explanation, details=details)


class ContextPrecision(Metric):
    """Context precision: are the useful chunks ranked at the top?

    The judge gives each chunk a verdict: useful for arriving at the reference answer when the
    sample has one, else for answering the question (``rate_chunks``, the same call as context
    relevance). Formula: rank-aware average precision over the verdicts v_k,
    ``sum_k (precision@k * v_k) / number of useful chunks`` (0.0 when none is useful), see
    :func:`ragmeter.metrics.retrieval.context_precision`.

    Example: verdicts [no, yes, yes, no, no] -> (1/2 + 2/3) / 2 = 0.5833 (warn).

    Thresholds: pass 0.7, warn 0.5 (common production targets: the first useful chunk within
    the top two, most useful chunks ahead of the noise).
    """

    name = "context_precision"
    threshold = 0.7
    warn = 0.5
    requires = ("contexts",)
    reads_requests = frozenset({"chunk_ratings"})
    evidence = frozenset({"chunk_usefulness"})

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        _, out = await ctx.chunk_ratings()
        verdicts = [c["useful"] for c in out["chunks"]]
        value = context_precision(verdicts)
        against = "reference" if sample.reference else "question"
        useful = sum(verdicts)
        per_chunk = [{**_chunk_ref(sample, i), "useful": v} for i, v in enumerate(verdicts)]
        first = next((i + 1 for i, v in enumerate(verdicts) if v), None)
        explanation = (
            f"{useful} of {len(verdicts)} chunks useful for the {against}"
            + (f", first at rank {first}" if first else "")
            + f"; rank-aware precision {value:.2f}"
        )
        return Score(
            self.name,
            value,
            explanation=explanation,
            details={"against": against, "verdicts": verdicts, "chunks": per_chunk, "useful_chunks": useful},
        )


class ContextRecall(Metric):
    """Context recall: did retrieval bring everything needed for the reference answer?

    With a reference: each reference statement (sentence) is attributed to the chunks or not
    (``attribute_statements``); formula: attributed statements / statements.
    Example: reference "Einstein was born in 1879. He died in Princeton." with only the first
    statement in the chunks -> 1 / 2 = 0.5 (fail).

    Without a reference (``estimate=True``, default): an explicitly labelled *estimate*: the
    judge rates whether the chunks can fully answer the question, 1..5 (``answerable`` of the
    shared ``rate_chunks`` call), mapped to ``(rating - 1) / 4``: 4 -> 0.75. The explanation
    starts with "estimate" and ``details["estimate"]`` is True. ``estimate=False``: not
    applicable without a reference.

    Thresholds: pass 0.8, warn 0.6 (information missing from the context cannot reach the
    answer; four in five reference statements retrievable is a common target).
    """

    name = "context_recall"
    threshold = 0.8
    warn = 0.6
    requires = ("contexts",)
    reads_requests = frozenset({"reference_attribution"})
    diagnosis = "retrieval"
    degradation_rule = "retrieval_degradation"
    evidence = frozenset({"statements"})

    def __init__(self, *, estimate: bool = True, threshold: float | None = None, warn: float | None = None):
        super().__init__(threshold=threshold, warn=warn)
        self.estimate = estimate

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        if not (sample.reference and sample.reference.strip()):
            if not self.estimate:
                return Score(
                    self.name,
                    None,
                    explanation="not applicable: the sample has no reference",
                    details={"missing": ["reference"]},
                )
            _, ratings = await ctx.chunk_ratings()
            rating = ratings["answerable"]
            value = (rating - 1) / 4
            return Score(
                self.name,
                value,
                details={"estimate": True, "method": "reference-free", "answerable": rating},
                explanation=(
                    f"estimate (no reference): the judge rates the chunks {rating}/5 for fully "
                    f"answering the question -> {value:.2f}"
                ),
            )
        statements, out = await ctx.reference_attribution()
        if out is None:
            return Score(self.name, None, explanation="not applicable: the reference has no statements")
        records = [
            {"statement": statements[v["statement"]], "attributed": v["attributed"], "chunks": v["chunks"]}
            for v in out["statements"]
        ]
        attributed = sum(r["attributed"] for r in records)
        missing = [r["statement"] for r in records if not r["attributed"]]
        value = attributed / len(records)
        explanation = f"{attributed} of {len(records)} reference statements found in the retrieved chunks"
        return Score(
            self.name,
            value,
            explanation=explanation,
            details={"estimate": False, "statements": records, "missing": missing},
        )


class EntityRecall(Metric):
    """Entity recall: the share of the reference's named entities that the chunks mention.

    The judge lists the entities of the reference (people, organisations, places, products,
    dates, numbers with units) and marks each found in the chunks or not (the ``entities`` of
    ``attribute_statements``: the same call as context recall). Formula: found / entities.

    Example: reference entities Einstein, Ulm, 1879, Princeton; the chunks mention Einstein,
    Ulm and 1879 -> 3 / 4 = 0.75 (pass). Not applicable without a reference, or when the
    reference names no entity.

    Thresholds: pass 0.7, warn 0.5 (entity-heavy questions need most named facts retrieved;
    entity matching is stricter than statement attribution, so the bar sits below recall's).
    """

    name = "entity_recall"
    threshold = 0.7
    warn = 0.5
    requires = ("reference", "contexts")
    reads_requests = frozenset({"reference_attribution"})

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        statements, out = await ctx.reference_attribution()
        if out is None:
            return Score(self.name, None, explanation="not applicable: the reference has no statements")
        entities = out["entities"]
        if not entities:
            return Score(
                self.name, None, explanation="not applicable: the reference names no entities", details={"entities": []}
            )
        found = [e["text"] for e in entities if e["found"]]
        missing = [e["text"] for e in entities if not e["found"]]
        value = len(found) / len(entities)
        explanation = f"{len(found)} of {len(entities)} reference entities found in the retrieved chunks"
        if missing:
            explanation += ": missing " + ", ".join(repr(m) for m in missing[:8])
        return Score(
            self.name,
            value,
            explanation=explanation,
            details={"entities": entities, "found": found, "missing": missing},
        )
