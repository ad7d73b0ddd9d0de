"""Internal: Citation metrics: per-citation verdicts, citation accuracy, precision and recall.

The answer is parsed once into units with their citations (:mod:`ragmeter.citations`); the same
units, with the markers removed, are what ``extract_claims`` receives for faithfulness, answer
correctness and the citation metrics, so one claim extraction and one claim verification serve
them all: scoring citations next to :class:`~ragmeter.metrics.Faithfulness` costs no extra judge
call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragmeter.citations import Unit, parse_citations
from ragmeter.data import Sample, Score
from ragmeter.metrics.base import LabelingCriterion, Metric
from ragmeter.metrics.requests import ScoringContext

__all__ = [
    "CitationReport",
    "score_citations",
    "claim_evidence",
    "CitationAccuracy",
    "CitationPrecision",
    "CitationRecall",
    "CITATION_VERDICTS",
]

#: Per-citation verdicts. ``no_claim``: the cited unit makes no factual claim of its own (none,
#: or only repeats of claims made earlier, which count once), so there is nothing for the
#: citation to support (left out of accuracy and precision).
CITATION_VERDICTS = ("supports", "partially", "does_not_support", "invalid", "no_claim")

# --------------------------------------------------------------------------- scoring (pure)


@dataclass
class CitationReport:
    """What :func:`score_citations` found.

    ``accuracy``, ``precision``, ``recall``: the three measures (None only when the policy for
    answers without citations says so; ``note`` then explains). ``citations``: one record per
    citation (statement, cited chunk, verdict, quote from the cited chunk, quote_found,
    precise). ``uncited_claims``: claims whose
    unit has no valid citation. ``unsupported_claims``: claims that carry citations none of
    which supports them. ``units``: per unit, its claims, citations and whether the union of its
    citations supports it. ``counts``: the numerators and denominators.
    """

    accuracy: float | None
    precision: float | None
    recall: float | None
    citations: list[dict]
    uncited_claims: list[dict]
    unsupported_claims: list[dict]
    units: list[dict]
    counts: dict
    note: str = ""

    def to_dict(self) -> dict:
        """Plain-dict form (what the citation metrics put in ``Score.details``)."""
        return {
            "accuracy": self.accuracy,
            "precision": self.precision,
            "recall": self.recall,
            "counts": self.counts,
            "citations": self.citations,
            "uncited_claims": self.uncited_claims,
            "unsupported_claims": self.unsupported_claims,
            "units": self.units,
            "note": self.note,
        }


def _norm(s: str) -> str:
    return " ".join(s.split()).lower()


def claim_evidence(verdict: dict, chunks: Sequence[str] | None = None) -> list[dict]:
    """The ``[{"chunk": c, "quote": q}]`` evidence of one ``verify_claims`` verdict: each chunk
    that supports the claim on its own (or contradicts it) with its verbatim quote.

    A verdict without an ``evidence`` list (hand-built, or the version-1 form ``{"chunks": [...],
    "quote": q}`` with one quote for all chunks) gets one entry per listed chunk; its quote goes
    to the first listed chunk whose text (``chunks``, when given) contains it, else to the first
    listed chunk, and the other chunks get the quote "".
    """
    evidence = verdict.get("evidence")
    if isinstance(evidence, list):
        return [
            {"chunk": e["chunk"], "quote": (e.get("quote") or "").strip()}
            for e in evidence
            if isinstance(e, dict) and isinstance(e.get("chunk"), int)
        ]
    listed = [c for c in (verdict.get("chunks") or []) if isinstance(c, int)]
    quote = (verdict.get("quote") or "").strip()
    owner = listed[0] if listed else None
    if quote and chunks is not None:
        owner = next((c for c in listed if 0 <= c < len(chunks) and _norm(quote) in _norm(chunks[c])), owner)
    return [{"chunk": c, "quote": quote if c == owner else ""} for c in listed]


def score_citations(
    units: Sequence[Unit | Sequence[int | None]],
    claims: Sequence[dict],
    verdicts: Sequence[dict],
    *,
    chunks: Sequence[str] | None = None,
    partial_credit: bool = False,
    at_most_citations: int | None = None,
    no_claims_value: float | None = 1.0,
    uncited_value: float | None = 0.0,
) -> CitationReport:
    """Score the citations of an answer from its claims and their verdicts (no judge involved).

    ``units``: :class:`Unit` objects (e.g. ``parse_citations(...).units``) or, for each unit, the
    list of 0-based chunk indices it cites (None for an invalid citation). ``claims``:
    ``[{"unit": u, "text": ...}]`` (``extract_claims`` output); ``verdicts``: one per claim,
    ``[{"claim": i, "verdict": "supported" | "contradicted" | "not_found", "evidence": [{"chunk":
    c, "quote": ...}], ...}]`` (``verify_claims`` output: for a supported claim, every chunk that
    supports it on its own, each with its own quote; verdicts in the older ``{"chunks", "quote"}``
    form are read by :func:`claim_evidence`). ``chunks``: the chunk texts, used only to check
    that a quote appears in the cited chunk (``quote_found``).

    Each citation record carries ``quote``: the quote of the cited chunk from the evidence of the
    statement's claims (a claim the chunk supports first, else one it contradicts), None when no
    claim of the statement has that chunk (with a quote) in its evidence; and ``quote_found``:
    whether that quote appears verbatim in the cited chunk, ignoring case and whitespace (None
    without a quote or without ``chunks``).

    Per citation of chunk c on unit u with claims C_u: ``supports`` when c supports every claim
    of C_u, ``partially`` when some, ``does_not_support`` when none, ``invalid`` when c is no
    chunk, ``no_claim`` when C_u is empty (nothing to support: left out of accuracy and
    precision; an invalid citation counts as invalid even there). A claim whose ``repeats``
    lists other units (see :func:`ragmeter.metrics.requests.distinct_claims`) counts once, in
    its own unit: the repeating units have no claim of their own.

    * accuracy = (supports [+ claims-fraction of partially when ``partial_credit``]) / citations
    * precision (ALCE): a citation is precise when its unit is supported by the union of its
      citations and (c supports the unit on its own, or the unit's other citations without c do
      not support it); invalid citations are never precise. precision = precise / citations
    * recall (ALCE): units with >= 1 claim whose claims are all supported by the union of their
      valid citations / units with >= 1 claim (a unit without citations counts as unsupported)

    "citations" counts every citation except ``no_claim`` ones. When the answer has no
    citation to score: ``no_claims_value`` (default 1.0) if it makes no claim, else
    ``uncited_value`` (default 0.0), for all three measures. ``at_most_citations`` reproduces
    ALCE's cap (its command line uses 3): only the first k valid citations of a unit count for
    precision and recall.
    """
    if at_most_citations is not None and at_most_citations < 1:
        raise ValueError("at_most_citations must be >= 1 or None")
    norm_units: list[Unit] = [u if isinstance(u, Unit) else Unit.of("", u) for u in units]
    n_units = len(norm_units)
    if len(verdicts) != len(claims):
        raise ValueError(f"got {len(verdicts)} verdicts for {len(claims)} claims")
    by_claim = {v.get("claim", i): v for i, v in enumerate(verdicts)}
    claims_of: list[list[int]] = [[] for _ in range(n_units)]
    for i, c in enumerate(claims):
        u = c.get("unit")
        if not isinstance(u, int) or not 0 <= u < n_units:
            raise ValueError(f"claim {i} has unit {u!r}, outside 0..{n_units - 1}")
        claims_of[u].append(i)
    repeat_of = {r: i for i, c in enumerate(claims) for r in c.get("repeats", ())}
    support: list[set[int]] = []
    against: list[set[int]] = []
    quotes: list[dict[int, str]] = []  # per claim: chunk -> its quote (non-empty ones)
    for i in range(len(claims)):
        v = by_claim.get(i, {})
        evidence = claim_evidence(v, chunks)
        ch = {e["chunk"] for e in evidence}
        support.append(ch if v.get("verdict") == "supported" else set())
        against.append(ch if v.get("verdict") == "contradicted" else set())
        quotes.append({e["chunk"]: e["quote"] for e in evidence if e["quote"]})

    def jointly(cl: list[int], chunkset: set[int]) -> bool:
        return bool(cl) and all(support[i] & chunkset for i in cl)

    normed: dict[int, str] = {}  # each cited chunk normalised once, however often it is cited

    def quoted(q: str, chunk: int) -> bool:
        if chunk not in normed:
            normed[chunk] = _norm(chunks[chunk])  # type: ignore[index]
        return _norm(q) in normed[chunk]

    records: list[dict] = []
    unit_records: list[dict] = []
    uncited: list[dict] = []
    unsupported: list[dict] = []
    n_scored = n_supports = n_precise = 0
    credit = 0.0
    units_with_claims = supported_units = 0
    for ui, unit in enumerate(norm_units):
        cl = claims_of[ui]
        valid = unit.chunks
        considered = valid[:at_most_citations] if at_most_citations is not None else valid
        joint = jointly(cl, set(considered))
        if cl:
            units_with_claims += 1
            supported_units += int(joint)
        unit_records.append(
            {
                "unit": ui,
                "text": unit.text,
                "claims": cl,
                "chunks": valid,
                "supported_by_citations": joint if cl else None,
            }
        )
        for i in cl:
            rec = {"claim": i, "text": claims[i].get("text", ""), "unit": ui, "statement": unit.text}
            if not valid:
                bad = [c.target for c in unit.citations if not c.valid]
                if bad:
                    rec["invalid_citations"] = bad
                uncited.append(rec)
            elif not (support[i] & set(valid)):
                unsupported.append({**rec, "cited_chunks": valid})
        for c in unit.citations:
            rec = {
                "citation": len(records),
                "marker": c.marker,
                "target": c.target,
                "unit": ui,
                "statement": unit.text,
                "chunk": c.chunk,
                "quote": None,
                "quote_found": None,
                "precise": None,
            }
            if not c.valid:
                rec.update(verdict="invalid", reason=c.error or "invalid citation", precise=False)
                n_scored += 1
                records.append(rec)
                continue
            if not cl:
                reason = "the cited text makes no factual claim"
                if ui in repeat_of:
                    i = repeat_of[ui]
                    reason = (
                        f"the cited text repeats claim {i} (statement {claims[i]['unit']}), which counts once there"
                    )
                rec.update(verdict="no_claim", reason=reason)
                records.append(rec)
                continue
            k = sum(1 for i in cl if c.chunk in support[i])
            verdict = "supports" if k == len(cl) else ("partially" if k else "does_not_support")
            rec.update(verdict=verdict, claims_supported=k, claims_total=len(cl))
            contradicted = [i for i in cl if c.chunk in against[i]]
            if contradicted:
                rec["contradicts_claims"] = contradicted
            # the cited chunk's own quote: from a claim it supports, else from one it contradicts
            q = next((quotes[i][c.chunk] for i in cl if c.chunk in support[i] and c.chunk in quotes[i]), None)
            if q is None:
                q = next((quotes[i][c.chunk] for i in cl if c.chunk in against[i] and c.chunk in quotes[i]), None)
            if q is not None:
                rec["quote"] = q
                if chunks is not None:
                    rec["quote_found"] = c.chunk < len(chunks) and quoted(q, c.chunk)
            n_scored += 1
            n_supports += int(verdict == "supports")
            credit += 1.0 if verdict == "supports" else (k / len(cl) if partial_credit else 0.0)
            if at_most_citations is not None and c.chunk not in considered:
                rec["precise"] = None  # beyond the cap: not part of precision (as in ALCE)
            else:
                alone = jointly(cl, {c.chunk})
                others = jointly(cl, set(considered) - {c.chunk})
                rec["precise"] = bool(joint and (alone or not others))
                n_precise += int(rec["precise"])
            records.append(rec)

    n_claims = len(claims)
    n_precision = sum(
        1 for r in records if r["verdict"] == "invalid" or (r["verdict"] != "no_claim" and r["precise"] is not None)
    )
    counts = {
        "citations": len(records),
        "scored_citations": n_scored,
        "supports": n_supports,
        "partially": sum(r["verdict"] == "partially" for r in records),
        "does_not_support": sum(r["verdict"] == "does_not_support" for r in records),
        "invalid": sum(r["verdict"] == "invalid" for r in records),
        "no_claim": sum(r["verdict"] == "no_claim" for r in records),
        "precise": n_precise,
        "precision_citations": n_precision,
        "claims": n_claims,
        "units_with_claims": units_with_claims,
        "supported_units": supported_units,
        "uncited_claims": len(uncited),
    }
    if n_scored == 0:
        if n_claims == 0:
            value, note = no_claims_value, "the answer makes no claim that needs a citation"
        else:
            value, note = (
                uncited_value,
                (f"the answer makes {n_claims} claim{'s' if n_claims != 1 else ''} but cites no chunk"),
            )
        return CitationReport(value, value, value, records, uncited, unsupported, unit_records, counts, note)
    accuracy = credit / n_scored
    precision = n_precise / n_precision
    recall = supported_units / units_with_claims if units_with_claims else no_claims_value
    return CitationReport(accuracy, precision, recall, records, uncited, unsupported, unit_records, counts)


# --------------------------------------------------------------------------- metrics


class _CitationMetric(Metric):
    measure = "accuracy"
    requires = ("answer", "contexts")
    evidence = frozenset({"claims", "citations"})

    def __init__(
        self,
        *,
        numbers: str = "positions",
        partial_credit: bool = False,
        at_most_citations: int | None = None,
        no_claims_value: float | None = 1.0,
        uncited_value: float | None = 0.0,
        threshold: float | None = None,
        warn: float | None = None,
    ):
        super().__init__(threshold=threshold, warn=warn)
        if numbers not in ("positions", "ids"):
            raise ValueError("numbers must be 'positions' or 'ids'")
        if at_most_citations is not None and at_most_citations < 1:
            raise ValueError("at_most_citations must be >= 1 or None")
        for name, v in (("no_claims_value", no_claims_value), ("uncited_value", uncited_value)):
            if v is not None and not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be None or in [0, 1]")
        self.numbers = numbers
        self.partial_credit = partial_credit
        self.at_most_citations = at_most_citations
        self.no_claims_value = no_claims_value
        self.uncited_value = uncited_value

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        parsed_units, claims = ctx.answer_units(), await ctx.claims()
        verdicts = await ctx.claim_verdicts()
        parsed = (
            parsed_units
            if self.numbers == "positions"
            else parse_citations(sample.answer or "", sample.contexts, numbers=self.numbers)
        )
        report = score_citations(
            parsed.units,
            claims,
            verdicts,
            chunks=sample.context_texts,
            partial_credit=self.partial_credit,
            at_most_citations=self.at_most_citations,
            no_claims_value=self.no_claims_value,
            uncited_value=self.uncited_value,
        )
        value = getattr(report, self.measure)
        details = report.to_dict()
        details["claims"] = [
            {
                "claim": i,
                "text": c["text"],
                "unit": c["unit"],
                "verdict": v["verdict"],
                "chunks": v["chunks"],
                "evidence": claim_evidence(v),
            }
            for i, (c, v) in enumerate(zip(claims, verdicts))
        ]
        details["invalid_citations"] = [r for r in report.citations if r["verdict"] == "invalid"]
        details["reference_list"] = parsed.reference_list
        c = report.counts
        if report.note:
            explanation = report.note + (
                f"; {self.measure} = {value:.2f} by the configured policy"
                if value is not None
                else f"; {self.measure} not applicable"
            )
        elif self.measure == "accuracy":
            explanation = (
                f"{c['supports']} of {c['scored_citations']} citations support their statement "
                f"({c['partially']} partially, {c['does_not_support']} not, {c['invalid']} invalid)"
            )
        elif self.measure == "precision":
            explanation = f"{c['precise']} of {c['precision_citations']} citations are precise (ALCE)"
        else:
            explanation = (
                f"{c['supported_units']} of {c['units_with_claims']} statements are fully supported by their citations"
            )
        if c["uncited_claims"]:
            explanation += f"; {c['uncited_claims']} claim{'s' if c['uncited_claims'] != 1 else ''} without a citation"
        return Score(self.name, value, explanation=explanation, details=details)


class CitationAccuracy(_CitationMetric):
    """Citation accuracy: the share of citations that support the statement they are attached to.

    Formula: accurate citations / citations, where a citation of chunk c on a statement (unit)
    is accurate when c on its own supports every claim extracted from that statement
    (``partial_credit=True`` also credits a citation supporting k of n claims with k/n).
    Invalid citations (out-of-range positions, unknown ids) count as inaccurate; citations on
    statements that make no claim ("See [2] for more.") are listed with verdict ``no_claim`` and
    left out. With no citation at all: ``no_claims_value`` (1.0) when the answer makes no claim,
    else ``uncited_value`` (0.0); set either to None for "not applicable".

    Example: "Paris is the capital of France [1]. It has 2.1 million inhabitants [2][3]." with
    claim 0 supported by chunk 0 and claim 1 supported by chunk 2 only: citations [1] supports,
    [2] does not support, [3] supports -> 2 / 3 = 0.667.

    Details (shared by the three citation metrics): ``accuracy``, ``precision``, ``recall``,
    ``citations`` (statement, cited chunk, verdict supports / partially / does_not_support /
    invalid / no_claim, quote from the cited chunk and whether it appears there verbatim,
    precise), ``uncited_claims``,
    ``unsupported_claims``, ``invalid_citations``, ``units``, ``counts``.

    Thresholds: pass 0.8, warn 0.6 (ALCE reports 70-80% citation quality for strong models; a
    production assistant whose citations users click should have at least four in five right).
    Judge calls: ``extract_claims`` + ``verify_claims``, shared with Faithfulness (zero extra).
    """

    name = "citation_accuracy"
    measure = "accuracy"
    threshold = 0.8
    warn = 0.6
    criterion = LabelingCriterion(
        "citation_correctness",
        "Do the citations point to the chunks that support each cited statement?",
        {
            "1": "citations missing or pointing to unrelated chunks",
            "3": "some citations are right, some wrong or missing",
            "5": "every citation points to a supporting chunk",
        },
    )
    profile_levels = {"legal": (0.9, 0.8), "medical": (0.9, 0.8)}


class CitationPrecision(_CitationMetric):
    """Citation precision as defined by ALCE (Gao et al., 2023; ``eval.py`` ``compute_autoais``).

    A citation is *precise* when its statement is supported by the union of the statement's
    citations and either the citation supports the statement on its own or the statement's
    other citations do not support it without it (i.e. it is not redundant). Invalid citations
    are never precise. Formula: precise citations / citations (``no_claim`` citations left out).

    Example: "Paris is the capital of France [1][2]." with the claim supported by chunk 0
    only: the union {0, 1} supports it; [1] supports on its own -> precise; [2] does not, and
    [1] without it still supports the statement -> imprecise. Precision = 1 / 2 = 0.5.

    Deviations from ALCE's script: a statement with an invalid citation is still judged on its
    valid ones (ALCE drops the whole sentence), and ``at_most_citations`` defaults to None (ALCE's
    command line caps at 3; pass 3 to reproduce it). Statements are judged claim by claim: a
    statement is supported by a set of chunks when every claim is supported by one of them.

    Thresholds: pass 0.8, warn 0.6 (same rationale as citation accuracy).
    """

    name = "citation_precision"
    measure = "precision"
    threshold = 0.8
    warn = 0.6
    profile_levels = {"legal": (0.8, 0.6)}


class CitationRecall(_CitationMetric):
    """Citation recall as defined by ALCE: statements fully supported by their citations.

    Formula: statements (units with >= 1 claim) whose claims are all supported by the union of
    their valid citations / statements with >= 1 claim. A statement without citations counts as
    unsupported; statements that make no claim are left out. ``uncited_claims`` in the details
    lists the claims that carry no citation.

    Example: "Paris is the capital [1]. It has 2.1 million inhabitants [2]. It hosted the 2024
    Olympics." with chunk 0 supporting claim 0, chunk 1 not supporting claim 1, and claim 2
    uncited: 1 of 3 statements supported -> 0.333.

    Thresholds: pass 0.8, warn 0.6 (ALCE's strongest systems reach roughly 0.7-0.8).
    """

    name = "citation_recall"
    measure = "recall"
    threshold = 0.8
    warn = 0.6
    profile_levels = {"legal": (0.8, 0.6)}
