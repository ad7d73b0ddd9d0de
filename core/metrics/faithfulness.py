"""Internal: Groundedness of the answer in the retrieved chunks: :class:`Faithfulness` (judge-based, claim
by claim) and :class:`HallucinatedSpecifics` (deterministic: numbers, dates, names and quotes of
the answer that no chunk states)."""

from __future__ import annotations

from typing import Any

from ragmeter.data import Sample, Score
from ragmeter.metrics.base import LabelingCriterion, Metric
from ragmeter.metrics.citation import claim_evidence
from ragmeter.metrics.requests import ScoringContext
from ragmeter.specifics import extract_specifics, find_specific

__all__ = ["Faithfulness", "HallucinatedSpecifics"]

_MODES = ("supported", "not_contradicted")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _norm(s: str) -> str:
    return " ".join(s.split()).lower()


class Faithfulness(Metric):
    """Faithfulness: the share of the answer's distinct claims that the retrieved chunks support.

    The answer is split into claims (``extract_claims``, once per answer, shared with answer
    correctness and the citation metrics); a claim repeated in the answer counts once (same text
    once case, whitespace, punctuation and citation markers are ignored), so repeating a
    supported sentence cannot outweigh an invented one. Each distinct claim is judged against
    all chunks (``verify_claims``): supported, contradicted or not found, with every supporting
    (or contradicting) chunk and a verbatim quote from each.

    Formula: ``mode="supported"`` (default): supported distinct claims / distinct claims; with a
    judge that grades each claim's support in [0, 1] (the offline judge's ``support``), the mean
    of those grades instead (a claim with a quarter of its words in the chunks no longer counts
    as fully supported: 3 claims graded 1.0, 0.9, 0.4 -> 2.3 / 3 = 0.767);
    ``mode="not_contradicted"``: (distinct claims - contradicted ones) / distinct claims (claims
    the chunks do not mention are not held against the answer).

    Example: an answer with 4 claims, 3 supported, 1 not found -> 3 / 4 = 0.75 (0.75 warns:
    below 0.85, above 0.7); in ``not_contradicted`` mode the same answer scores 4 / 4 = 1.0.
    With 1 of the 4 contradicted instead: 3 / 4 = 0.75 in both modes. Nine copies of a
    supported sentence and one invented claim: 2 distinct claims, 1 supported -> 1 / 2 = 0.5.

    An answer that makes no claim (a refusal, "I don't know") gets value None with the reason in
    the explanation (not applicable), or ``no_claims_value`` when set (e.g. 1.0: nothing
    unfaithful was said). Never NaN.

    Details: ``claims`` (text, unit, verdict, chunk indices, ``evidence``: per supporting or
    contradicting chunk its index, id, quote and ``quote_found`` (whether the quote appears
    verbatim in that chunk, ignoring case and whitespace); ``chunk``, ``chunk_id``, ``quote``,
    ``quote_found`` repeat the first evidence entry; reason; ``repeats``: the units that repeat
    the claim, when any), ``unsupported`` (not-found claims), ``contradicted``, counts
    (``repeated_count``: the repeats left out); with a judge that calibrates its graded support
    (the offline judge: :meth:`~ragmeter.judges.offline.OfflineJudge.confidence`), ``confidence``:
    the probability that a human reader finds the answer fully supported, per claim and for the
    answer.

    Thresholds: pass 0.85, warn 0.7 (common production targets for grounded answers).
    """

    name = "faithfulness"
    threshold = 0.85
    warn = 0.7
    requires = ("answer", "contexts")
    needs_question = False
    diagnosis = "generation"
    degradation_rule = "faithfulness_degradation"
    evidence = frozenset({"claims"})
    criterion = LabelingCriterion(
        "faithfulness",
        "Is every claim in the answer supported by the chunks?",
        {
            "1": "mostly unsupported or contradicted by the chunks",
            "3": "the main point is supported, some details are not",
            "5": "every claim is supported by the chunks",
        },
    )
    profile_levels = {"legal": (0.9, 0.8), "medical": (0.95, 0.9)}

    def __init__(
        self,
        *,
        mode: str = "supported",
        no_claims_value: float | None = None,
        threshold: float | None = None,
        warn: float | None = None,
    ):
        super().__init__(threshold=threshold, warn=warn)
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        if no_claims_value is not None and not 0.0 <= no_claims_value <= 1.0:
            raise ValueError("no_claims_value must be None or in [0, 1]")
        self.mode = mode
        self.no_claims_value = no_claims_value

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        parsed, claims = ctx.answer_units(), await ctx.claims()
        if not claims:
            reason = (
                "the answer makes no factual claim (e.g. a refusal or 'I don't know'), so there is nothing to verify"
            )
            details: dict[str, Any] = {"claims": [], "units": parsed.unit_texts, "mode": self.mode}
            if self.no_claims_value is None:
                return Score(self.name, None, explanation=f"not applicable: {reason}", details=details)
            return Score(
                self.name,
                self.no_claims_value,
                explanation=f"{reason}; scored {self.no_claims_value:g} as configured (no_claims_value)",
                details=details,
            )
        verdicts = await ctx.claim_verdicts()
        texts = sample.context_texts
        normed: dict[int, str] = {}  # each chunk normalised once, however many quotes it has

        def found(quote: str, chunk: int) -> bool:
            if chunk not in normed:
                normed[chunk] = _norm(texts[chunk])
            return bool(quote) and _norm(quote) in normed[chunk]

        records = []
        for c, v in zip(claims, verdicts):
            evidence = [
                {
                    "chunk": e["chunk"],
                    "chunk_id": sample.contexts[e["chunk"]].id,
                    "quote": e["quote"],
                    "quote_found": found(e["quote"], e["chunk"]),
                }
                for e in claim_evidence(v)
            ]
            first = evidence[0] if evidence else None
            records.append(
                {
                    "claim": c["text"],
                    "unit": c["unit"],
                    "verdict": v["verdict"],
                    "chunks": v["chunks"],
                    "evidence": evidence,
                    "chunk": first["chunk"] if first else None,
                    "chunk_id": first["chunk_id"] if first else None,
                    "quote": first["quote"] if first else "",
                    "quote_found": first["quote_found"] if first else None,
                    "reason": v["reason"],
                    **{k: v[k] for k in ("support", "confidence") if k in v},
                    **({"repeats": c["repeats"]} if c.get("repeats") else {}),
                }
            )
        n = len(records)
        repeated = sum(len(c.get("repeats", ())) for c in claims)
        supported = sum(r["verdict"] == "supported" for r in records)
        contradicted = [r["claim"] for r in records if r["verdict"] == "contradicted"]
        unsupported = [r["claim"] for r in records if r["verdict"] == "not_found"]
        claim_word = "distinct claim" if repeated else "claim"
        graded = all("support" in r for r in records)  # a judge that grades support (the offline judge)
        if self.mode == "supported" and graded:
            value = sum(r["support"] for r in records) / n
            explanation = (
                f"{supported} of {_plural(n, claim_word)} supported by the retrieved chunks, "
                f"mean graded support {value:.2f}"
            )
        elif self.mode == "supported":
            value = supported / n
            explanation = f"{supported} of {_plural(n, claim_word)} supported by the retrieved chunks"
        else:
            value = (n - len(contradicted)) / n
            explanation = (
                f"{n - len(contradicted)} of {_plural(n, claim_word)} not contradicted by the retrieved chunks"
            )
        parts = []
        if unsupported:
            parts.append(f"{len(unsupported)} not found")
        if contradicted:
            parts.append(f"{len(contradicted)} contradicted")
        if repeated:
            parts.append(f"{_plural(repeated, 'repeat')} counted once")
        if parts:
            explanation += " (" + ", ".join(parts) + ")"
        details = {
            "mode": self.mode,
            "claims": records,
            "unsupported": unsupported,
            "contradicted": contradicted,
            "supported_count": supported,
            "contradicted_count": len(contradicted),
            "not_found_count": len(unsupported),
            "claim_count": n,
            "repeated_count": repeated,
        }
        calibrate = getattr(ctx.judge, "confidence", None)
        if self.mode == "supported" and graded and callable(calibrate):
            details["confidence"] = calibrate(value)
        return Score(self.name, value, explanation=explanation, details=details)


class HallucinatedSpecifics(Metric):
    """Hallucinated specifics: numbers, dates, money, percentages, names and quotes in the answer
    that no retrieved chunk states (deterministic: no judge call, see :mod:`ragmeter.specifics`).

    Formula: grounded specifics / specifics, over the distinct specifics of the answer (citation
    markers removed), where a specific is grounded when some chunk states the same value in any
    usual format ("1,000" = "1000", "$25 billion" = "25 billion dollars") or, with
    ``allow_question=True`` (default), when the question itself states it (repeating the
    question's "2019" is not a hallucination). The hallucinated ones are listed in the details.

    Example: answer "Acme paid $25 billion in March 2021, up 7%." against a chunk "In March 2021
    Acme paid 25 billion dollars, up 5%.": specifics $25 billion, March 2021, 7%; 7% is in no
    chunk -> 2 / 3 = 0.667 (fail), details ``hallucinated = [{"kind": "percent", "text": "7%"}]``.

    An answer with no specifics has nothing hallucinated: value ``no_specifics_value`` (1.0;
    None for "not applicable").

    Thresholds: pass 1.0, warn 0.75: a single invented figure or name is a defect users notice
    and a compliance risk, so any hallucinated specific leaves "pass"; several make it fail.
    """

    name = "hallucinated_specifics"
    threshold = 1.0
    warn = 0.75
    requires = ("answer", "contexts")
    uses_judge = False
    needs_question = False

    def __init__(
        self,
        *,
        allow_question: bool = True,
        no_specifics_value: float | None = 1.0,
        threshold: float | None = None,
        warn: float | None = None,
    ):
        super().__init__(threshold=threshold, warn=warn)
        if no_specifics_value is not None and not 0.0 <= no_specifics_value <= 1.0:
            raise ValueError("no_specifics_value must be None or in [0, 1]")
        self.allow_question = allow_question
        self.no_specifics_value = no_specifics_value

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        text = ctx.answer_units().text
        specifics = []
        seen: set = set()
        for s in extract_specifics(text):
            if s.key not in seen:
                seen.add(s.key)
                specifics.append(s)
        if not specifics:
            explanation = "the answer states no specific number, date, name or quote"
            if self.no_specifics_value is None:
                return Score(self.name, None, explanation=f"not applicable: {explanation}", details={"specifics": []})
            return Score(
                self.name,
                self.no_specifics_value,
                explanation=explanation + ", so none is hallucinated",
                details={"specifics": [], "hallucinated": []},
            )
        records = []
        for s in specifics:
            where = next((i for i, c in enumerate(sample.context_texts) if c and find_specific(s, c)), None)
            in_question = where is None and self.allow_question and find_specific(s, sample.question)
            records.append(
                {
                    "kind": s.kind,
                    "text": s.text,
                    "found": where is not None or in_question,
                    "chunk": where,
                    "from_question": bool(in_question),
                }
            )
        hallucinated = [r for r in records if not r["found"]]
        n = len(records)
        value = (n - len(hallucinated)) / n
        if hallucinated:
            listed = ", ".join(repr(r["text"]) for r in hallucinated[:8]) + (" ..." if len(hallucinated) > 8 else "")
            explanation = f"{len(hallucinated)} of {_plural(n, 'specific')} in no retrieved chunk: {listed}"
        else:
            explanation = (
                "the answer's only specific appears in the retrieved chunks"
                if n == 1
                else f"all {n} specifics of the answer appear in the retrieved chunks"
            )
        details = {
            "specifics": records,
            "hallucinated": [{"kind": r["kind"], "text": r["text"]} for r in hallucinated],
            "hallucinated_count": len(hallucinated),
            "specific_count": n,
        }
        return Score(self.name, value, explanation=explanation, details=details)
