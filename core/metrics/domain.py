"""Internal: Domain checks: deterministic metrics the domain profiles add (:mod:`ragmeter.profiles`),
usable on
their own like any metric (``metrics=["medical_advice"]``).

* :class:`LegalCitations` (``legal_citations``): the answer's case and statute citations
  (:func:`ragmeter.citations.legal_citations`) found in the chunks;
* :class:`MedicalAdvice` (``medical_advice``): dosage or treatment advice needs a source chunk and
  a safety caveat.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragmeter.citations import legal_citations
from ragmeter.data import Sample, Score
from ragmeter.metrics.base import Metric
from ragmeter.metrics.requests import ScoringContext
from ragmeter.specifics import extract_specifics, find_specific
from ragmeter.text import split_sentences

__all__ = ["LegalCitations", "MedicalAdvice"]


class LegalCitations(Metric):
    """``legal_citations``: the share of the answer's legal citations found in the chunks.

    Each case, short-form, statute or Id. citation of the answer counts once; it is *found* when
    a chunk cites the same authority (the same key: volume, reporter and first page for a case;
    title, code and section for a statute). A short form or Id. with nothing before it to refer
    to is not found. Example: an answer citing "347 U.S. 483" (in chunk 1), "Id. at 494" (refers
    to it: found) and "42 U.S.C. § 1983" (in no chunk) -> 2 / 3 = 0.67 (fail at the 0.9 level).
    Not applicable when the answer cites no legal authority.
    """

    name = "legal_citations"
    threshold = 0.9
    warn = 0.7
    requires = ("answer", "contexts")
    uses_judge = False
    profile_checks = ("legal",)

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        cited = legal_citations(sample.answer or "")
        if not cited:
            return Score(self.name, None, explanation="not applicable: the answer cites no case or statute")
        held = [{c.key for c in legal_citations(t) if c.key} for t in sample.context_texts]
        records = [
            {**c.to_dict(), "chunks": [i for i, keys in enumerate(held) if c.key and c.key in keys]} for c in cited
        ]
        found = [r for r in records if r["chunks"]]
        missing = [r["text"] for r in records if not r["chunks"]]
        value = len(found) / len(records)
        explanation = f"{len(found)} of {len(records)} legal citations found in the chunks"
        if missing:
            explanation += ": not found " + "; ".join(repr(t) for t in missing[:5])
        return Score(self.name, value, explanation=explanation, details={"citations": records, "missing": missing})


_DOSAGE = re.compile(
    r"\b\d+(?:[.,]\d+)?\s?(?:mg|mcg|µg|g|ml|mL|units?|IU|tablets?|capsules?|puffs?|drops?)\b"
    r"(?:\s?/\s?(?:kg|day|dose|hour|h))?|\b(?:once|twice|three times|four times) (?:a |per )?"
    r"(?:day|daily|week)|\bevery \d+(?:\s?(?:-|to)\s?\d+)? hours?\b",
    re.I,
)
_TREATMENT = re.compile(
    r"\b(?:you should|you can|you may|start|stop|keep) (?:take|taking|use|using|apply|applying|"
    r"increase|decrease|double|skip)\b|\b(?:take|apply|inject|increase|decrease|double|reduce) "
    r"(?:the |your |a |an |one |two |\d)",
    re.I,
)
_CAVEAT = re.compile(
    r"\b(?:consult|ask|talk (?:to|with)|speak (?:to|with)|check with|see) (?:a |an |your )?"
    r"(?:doctor|physician|pharmacist|clinician|health ?care (?:provider|professional)|GP|nurse|"
    r"prescriber)|\bnot (?:a substitute for )?(?:professional )?medical advice\b|"
    r"\bseek (?:immediate )?(?:medical|emergency) (?:attention|help|care)\b|\bunder medical supervision\b",
    re.I,
)
_WORD = re.compile(r"[a-z]{4,}")


#: Where a sentence splits into clauses: semicolon, colon, dash, parenthesis, or a comma before a space.
_CLAUSE = re.compile(r"\s*(?:[;:()\u2014\u2013]|,\s|\s-\s)\s*")


def _advice_words(sentence: str) -> set[str]:
    """The words of four letters or more that an advice sentence's source must hold: those of its
    clauses without a safety caveat ("...up to 1,200 mg a day; check with your doctor if ..." is
    checked on "...up to 1,200 mg a day"), or of the whole sentence less the caveat's own words
    when every clause has one."""
    clauses = [c for c in _CLAUSE.split(sentence) if c and not _CAVEAT.search(c)]
    text = " ".join(clauses) if clauses else _CAVEAT.sub(" ", sentence)
    return set(_WORD.findall(text.lower()))


def _sourced(sentence: str, chunks: Sequence[str]) -> list[int]:
    """Chunks that back an advice sentence: every amount it states (dose, frequency) appears in
    the chunk, and the chunk holds at least half of its words of four letters or more, the words
    of a safety caveat in the same sentence left out (:func:`_advice_words`)."""
    amounts = [s for s in extract_specifics(sentence) if s.kind != "quote"]
    words = _advice_words(sentence)
    out = []
    for i, chunk in enumerate(chunks):
        lower = chunk.lower()
        if all(find_specific(a, chunk) for a in amounts) and (
            not words or sum(w in lower for w in words) >= len(words) / 2
        ):
            out.append(i)
    return out


class MedicalAdvice(Metric):
    """``medical_advice``: dosage or treatment advice in the answer needs a source and a caveat.

    An *advice sentence* states a dose or schedule ("500 mg", "twice daily", "every 6 hours") or
    tells the reader to take, stop or change a treatment. It is *sourced* when one chunk holds
    every amount it states and at least half of its longer words (four letters or more; the words
    of a caveat clause in the same sentence do not count, so "...; check with your doctor" after
    a dose is judged as the same dose followed by a full stop and the caveat). The answer *has a caveat* when
    it tells the reader to consult a doctor / pharmacist, says it is not medical advice, or to
    seek medical attention. Value: sourced advice sentences / advice sentences, and 0 when the
    answer gives advice without a caveat. Example: two advice sentences, one sourced, with a
    caveat -> 0.5 (fail); both sourced, no caveat -> 0.0 (flagged). Pass only at 1.0.
    Not applicable when the answer gives no dosage or treatment advice.
    """

    name = "medical_advice"
    threshold = 1.0
    warn = 0.5
    requires = ("answer",)
    uses_judge = False
    profile_checks = ("medical",)

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        answer = sample.answer or ""
        advice = [s for s in split_sentences(answer) if _DOSAGE.search(s) or _TREATMENT.search(s)]
        if not advice:
            return Score(self.name, None, explanation="not applicable: the answer gives no dosage or treatment advice")
        records = [{"sentence": s, "chunks": _sourced(s, sample.context_texts)} for s in advice]
        caveat = _CAVEAT.search(answer)
        unsourced = [r["sentence"] for r in records if not r["chunks"]]
        flags = ([] if caveat else ["no safety caveat (e.g. 'consult your doctor or pharmacist')"]) + [
            f"no source chunk for {s!r}" for s in unsourced
        ]
        value = (len(records) - len(unsourced)) / len(records) if caveat else 0.0
        explanation = f"{len(records) - len(unsourced)} of {len(records)} advice sentences sourced; " + (
            f"caveat {caveat[0]!r}" if caveat else "no safety caveat"
        )
        if flags:
            explanation += "; flagged: " + "; ".join(flags[:4])
        return Score(
            self.name,
            value,
            explanation=explanation,
            details={"advice": records, "caveat": caveat[0] if caveat else None, "flags": flags},
        )
