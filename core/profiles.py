"""Domain profiles: ``get_profile("legal" | "medical" | "default")`` sets thresholds and extra checks in one word.

:func:`get_profile` gives the :class:`Profile` of a name. A profile holds pass / warn levels per metric and the deterministic checks the domain
adds; :meth:`Profile.metrics` turns metric names into metrics with the profile's levels, plus its
checks, ready for ``ragmeter.evaluate(samples, metrics=get_profile("legal").metrics())``.

=========  ===================================================  ==================================
profile    levels (pass / warn)                                 extra checks
=========  ===================================================  ==================================
default    each metric's own                                    none
legal      faithfulness 0.9 / 0.8, citation_accuracy 0.9 /      ``legal_citations``: the case and
           0.8, citation_precision and citation_recall          statute citations of the answer
           0.8 / 0.6, answer_correctness 0.8 / 0.6              found in the chunks
medical    faithfulness 0.95 / 0.9, citation_accuracy 0.9 /     ``medical_advice``: dosage or
           0.8, answer_correctness 0.8 / 0.6                    treatment advice needs a source
                                                                chunk and a safety caveat
=========  ===================================================  ==================================

Relevance bands (:func:`relevance_band`): excellent >= 0.8, good >= 0.5, else poor; legal and
medical: excellent >= 0.9, good >= 0.7. ``ragmeter.evaluate(..., profile="legal")`` applies a
profile in one word and names it on the result.

Legal citations (:func:`parse_citations` with ``profile="legal"``) are found with regular
expressions for the common U.S. forms: full case citations with an optional case name, pinpoint,
court and year ("Brown v. Board of Education, 347 U.S. 483, 495 (1954)"), short forms
("347 U.S. at 495"), statutes and regulations ("42 U.S.C. § 1983", "29 C.F.R. § 1910.1200",
"Cal. Civ. Code § 1714") and "Id." / "Ibid." (resolved to the citation before it). Reporters
recognised: U.S., S. Ct., L. Ed. (2d), F. (2d, 3d, 4th), F. Supp. (2d, 3d), F. App'x, the
regional reporters (A., N.E., N.W., S.E., S.W., So., P., with their series), Cal. Rptr., N.Y.S.
and B.R.; a one-letter reporter (A., F., P.) only with a case name or a year ("3 A. 4" alone is
prose). Chunk citation markers ("[1]") are :func:`ragmeter.citations.parse_citations`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

from ragmeter.data import Sample, Score
from ragmeter.metrics.base import Metric
from ragmeter.metrics.requests import ScoringContext
from ragmeter.specifics import extract_specifics, find_specific
from ragmeter.text import split_sentences

__all__ = ["LegalCitation", "parse_citations", "Profile", "get_profile", "PROFILES", "LegalCitations", "MedicalAdvice",
           "relevance_band", "RELEVANCE_METRICS"]

# --------------------------------------------------------------------------- legal citations

_REPORTERS = ["U.S.", "S. Ct.", "L. Ed. 2d", "L. Ed.", "F. Supp. 3d", "F. Supp. 2d", "F. Supp.", "F. App'x",
              "F.4th", "F.3d", "F.2d", "F.", "A.3d", "A.2d", "A.", "N.E.3d", "N.E.2d", "N.E.", "N.W.2d", "N.W.",
              "S.E.2d", "S.E.", "S.W.3d", "S.W.2d", "S.W.", "So. 3d", "So. 2d", "So.", "P.3d", "P.2d", "P.",
              "Cal. Rptr. 3d", "Cal. Rptr. 2d", "Cal. Rptr.", "N.Y.S.3d", "N.Y.S.2d", "N.Y.S.", "B.R."]


def _flexible(reporter: str) -> str:
    """A reporter abbreviation as a pattern: the space after a period optional ("F. 3d" = "F.3d")."""
    return r"\.\s?".join(re.escape(p.strip()) for p in reporter.split(".")).replace(r"\ ", r"\s?")


_REPORTER = "(?:" + "|".join(_flexible(r) for r in _REPORTERS) + ")"
_PARTY = r"(?:[A-Z][\w.'&-]*(?:,? (?:of|the|and|for|on|in|ex rel\.|&|[A-Z][\w.'&-]*))*)"
_NAME = rf"(?P<name>(?:In re |Ex parte ){_PARTY}|{_PARTY} v\. {_PARTY}),?\s+"
_PIN = r"\d+(?:\s?[-–]\s?\d+)?"
_CASE = re.compile(
    rf"(?:{_NAME})?(?P<volume>\d{{1,4}})\s+(?P<reporter>{_REPORTER})\s+"
    rf"(?:at\s+(?P<short_pin>{_PIN})|(?P<page>\d{{1,5}})(?:,\s*(?P<pin>{_PIN}))?)"
    rf"(?:\s*\((?P<court>[^()]*?)\s*(?P<year>1[6-9]\d\d|20\d\d)\))?")
_CODE = r"U\.\s?S\.\s?C\.(?:\s?A\.)?|C\.\s?F\.\s?R\.|Stat\.|(?:[A-Z][A-Za-z.]*\s){1,4}(?:Code|Stat\.)(?:\s?Ann\.)?"
_STATUTE = re.compile(rf"(?:(?P<title>\d{{1,3}})\s+)?(?P<code>{_CODE})\s*(?:§§?|[Ss]ec(?:tion|\.)|s\.)\s*"
                      rf"(?P<section>\d[\w.\-–]*(?:\([\w]+\))*)")
_FEDERAL = re.compile(r"U\.\s?S\.\s?C\.(?:\s?A\.)?|C\.\s?F\.\s?R\.")
_ID = re.compile(r"\b(?P<id>[Ii]d\.|[Ii]bid\.)(?:,?\s+at\s+(?P<pin>" + _PIN + "))?")
#: Words before a case name that are not part of it: signals ("See also", "Cf.") and sentence openers ("In").
_SIGNAL = re.compile(r"^(?:(?:See|see|Cf\.|But|but|Accord|E\.g\.,?|Compare|Contra|also|generally|In(?! re\b)|As|"
                     r"Under|Per|Citing|After|Following)\s+)+")


@dataclass(frozen=True)
class LegalCitation:
    """One legal citation as written: ``kind`` is ``"case"``, ``"short"`` (``347 U.S. at 495``),
    ``"statute"`` or ``"id"``; ``key`` identifies the authority ("347 U.S. 483", "42 U.S.C. §
    1983"; for short forms and Id., the key of the citation they refer to, None when there is
    none before them); ``pin`` the pinpoint page; ``start`` / ``end`` the offsets in the text."""

    kind: str
    text: str
    start: int
    end: int
    key: str | None
    name: str | None = None
    pin: str | None = None
    year: str | None = None
    fields: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {"kind": self.kind, "text": self.text, "start": self.start, "end": self.end, "key": self.key,
                "name": self.name, "pin": self.pin, "year": self.year, **self.fields}


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _reporter_key(volume: str, reporter: str) -> str:
    return f"{volume} {_squash(reporter)}"


def _legal_citations(text: str) -> list[LegalCitation]:
    found: list[LegalCitation] = []
    taken: list[tuple[int, int]] = []
    for m in _STATUTE.finditer(text):
        code = " ".join(m["code"].split())
        code = _squash(code) if _FEDERAL.fullmatch(code) else code  # "U. S. C." = "U.S.C."
        section = m["section"].rstrip(".")
        written = m[0].rstrip(".")
        key = " ".join(x for x in (m["title"], code, "§", section) if x)
        found.append(LegalCitation("statute", written, m.start(), m.start() + len(written), key,
                                   fields={"title": m["title"], "code": code, "section": section}))
        taken.append(m.span())
    for m in _CASE.finditer(text):
        if any(s <= m.start("volume") < e for s, e in taken):
            continue
        if len(_squash(m["reporter"])) == 2 and not (m["name"] or m["year"]):
            continue  # "3 A. 4" alone is too common in prose: a one-letter reporter needs a case name or a year
        name, start = None, m.start()
        if m["name"]:  # a leading signal ("See", "Cf.") is not part of the case name
            name = _SIGNAL.sub("", m["name"]).strip(" ,")
            start = m.start("name") + m["name"].index(name)
        base = _reporter_key(m["volume"], m["reporter"])
        if m["short_pin"]:
            found.append(LegalCitation("short", text[start:m.end()], start, m.end(), None, name, m["short_pin"],
                                       m["year"], {"volume": m["volume"], "reporter": _squash(m["reporter"])}))
        else:
            found.append(LegalCitation("case", text[start:m.end()], start, m.end(), f"{base} {m['page']}", name,
                                       m["pin"], m["year"], {"volume": m["volume"], "reporter": _squash(m["reporter"]),
                                                             "page": m["page"], "court": (m["court"] or "").strip() or None}))
    for m in _ID.finditer(text):
        found.append(LegalCitation("id", m[0], m.start(), m.end(), None, pin=m["pin"]))
    found.sort(key=lambda c: c.start)
    return _resolve(found)


def _resolve(citations: list[LegalCitation]) -> list[LegalCitation]:
    """Short forms get the key of the last full citation of the same volume and reporter; Id.
    the key (and name) of the citation just before it."""
    out: list[LegalCitation] = []
    for c in citations:
        if c.kind == "short":
            full = next((p for p in reversed(out) if p.kind == "case" and p.fields["volume"] == c.fields["volume"]
                         and p.fields["reporter"] == c.fields["reporter"]), None)
            c = replace(c, key=full.key if full else None, name=c.name or (full.name if full else None))
        elif c.kind == "id" and out:
            c = replace(c, key=out[-1].key, name=out[-1].name)
        out.append(c)
    return out


def parse_citations(text: str, profile: str = "legal") -> list[LegalCitation]:
    """The domain citations in ``text`` for ``profile``: with ``"legal"``, cases, short forms,
    statutes and Id. (see the module doc), in order; other profiles have none (chunk citation
    markers such as "[1]" are :func:`ragmeter.citations.parse_citations`).

    >>> [c.key for c in parse_citations("Brown v. Board of Education, 347 U.S. 483, 495 (1954). Id. at 494.")]
    ['347 U.S. 483', '347 U.S. 483']
    """
    get_profile(profile)
    return _legal_citations(text or "") if profile == "legal" else []


# --------------------------------------------------------------------------- checks


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

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        cited = parse_citations(sample.answer or "", "legal")
        if not cited:
            return Score(self.name, None, explanation="not applicable: the answer cites no case or statute")
        held = [{c.key for c in parse_citations(t, "legal") if c.key} for t in sample.context_texts]
        records = [{**c.to_dict(), "chunks": [i for i, keys in enumerate(held) if c.key and c.key in keys]}
                   for c in cited]
        found = [r for r in records if r["chunks"]]
        missing = [r["text"] for r in records if not r["chunks"]]
        value = len(found) / len(records)
        explanation = f"{len(found)} of {len(records)} legal citations found in the chunks"
        if missing:
            explanation += ": not found " + "; ".join(repr(t) for t in missing[:5])
        return Score(self.name, value, explanation=explanation, details={"citations": records, "missing": missing})


_DOSAGE = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:mg|mcg|µg|g|ml|mL|units?|IU|tablets?|capsules?|puffs?|drops?)\b"
                     r"(?:\s?/\s?(?:kg|day|dose|hour|h))?|\b(?:once|twice|three times|four times) (?:a |per )?"
                     r"(?:day|daily|week)|\bevery \d+(?:\s?(?:-|to)\s?\d+)? hours?\b", re.I)
_TREATMENT = re.compile(r"\b(?:you should|you can|you may|start|stop|keep) (?:take|taking|use|using|apply|applying|"
                        r"increase|decrease|double|skip)\b|\b(?:take|apply|inject|increase|decrease|double|reduce) "
                        r"(?:the |your |a |an |one |two |\d)", re.I)
_CAVEAT = re.compile(r"\b(?:consult|ask|talk (?:to|with)|speak (?:to|with)|check with|see) (?:a |an |your )?"
                     r"(?:doctor|physician|pharmacist|clinician|health ?care (?:provider|professional)|GP|nurse|"
                     r"prescriber)|\bnot (?:a substitute for )?(?:professional )?medical advice\b|"
                     r"\bseek (?:immediate )?(?:medical|emergency) (?:attention|help|care)\b|\bunder medical supervision\b",
                     re.I)
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
        if all(find_specific(a, chunk) for a in amounts) and (not words or
                                                               sum(w in lower for w in words) >= len(words) / 2):
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

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        answer = sample.answer or ""
        advice = [s for s in split_sentences(answer) if _DOSAGE.search(s) or _TREATMENT.search(s)]
        if not advice:
            return Score(self.name, None, explanation="not applicable: the answer gives no dosage or treatment advice")
        records = [{"sentence": s, "chunks": _sourced(s, sample.context_texts)} for s in advice]
        caveat = _CAVEAT.search(answer)
        unsourced = [r["sentence"] for r in records if not r["chunks"]]
        flags = ([] if caveat else ["no safety caveat (e.g. 'consult your doctor or pharmacist')"]) + \
                [f"no source chunk for {s!r}" for s in unsourced]
        value = (len(records) - len(unsourced)) / len(records) if caveat else 0.0
        explanation = (f"{len(records) - len(unsourced)} of {len(records)} advice sentences sourced; "
                       + (f"caveat {caveat[0]!r}" if caveat else "no safety caveat"))
        if flags:
            explanation += "; flagged: " + "; ".join(flags[:4])
        return Score(self.name, value, explanation=explanation,
                     details={"advice": records, "caveat": caveat[0] if caveat else None, "flags": flags})


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class Profile:
    """A domain profile: ``levels`` (metric name -> (pass, warn)), ``checks`` (factories of
    the deterministic metrics the domain adds) and ``bands`` (the lowest "excellent" and "good"
    relevance values, see :func:`relevance_band`)."""

    name: str
    levels: dict[str, tuple[float, float]] = field(default_factory=dict)
    checks: tuple[Callable[[], Metric], ...] = ()
    description: str = ""
    bands: tuple[float, float] = (0.8, 0.5)

    def apply(self, metric: Metric) -> Metric:
        """``metric`` with this profile's levels for its name (itself when the profile sets none)."""
        levels = self.levels.get(metric.name)
        return metric.with_levels(*levels) if levels else metric

    def metrics(self, metrics: Sequence[Any] | None = None) -> list[Metric]:
        """``metrics`` (names or Metric objects; None: the default metrics; the names of the
        profile's checks, such as ``"legal_citations"``, work too) with this profile's levels,
        followed by the profile's checks that are not already among them."""
        from ragmeter.metrics import DEFAULT_METRICS, get_metric

        checks = {c.name: c for c in (self.apply(make()) for make in self.checks)}
        out = [checks[m] if isinstance(m, str) and m in checks else self.apply(get_metric(m))
               for m in (DEFAULT_METRICS if metrics is None else metrics)]
        names = {m.name for m in out}
        return out + [c for name, c in checks.items() if name not in names]


PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("default", description="each metric's own levels, no extra checks"),
    Profile("legal", {"faithfulness": (0.9, 0.8), "citation_accuracy": (0.9, 0.8), "citation_precision": (0.8, 0.6),
                      "citation_recall": (0.8, 0.6), "answer_correctness": (0.8, 0.6)}, (LegalCitations,),
            "stricter support and citation levels; case and statute citations checked against the chunks", (0.9, 0.7)),
    Profile("medical", {"faithfulness": (0.95, 0.9), "citation_accuracy": (0.9, 0.8), "answer_correctness": (0.8, 0.6)},
            (MedicalAdvice,), "faithfulness above 0.9; dosage / treatment advice needs a source and a safety caveat",
            (0.9, 0.7)),
)}


def get_profile(name: "str | Profile") -> Profile:
    """The profile called ``name`` (a :class:`Profile` passes through); ValueError naming the known ones."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}") from None



#: The metrics whose values :func:`relevance_band` labels in reports.
RELEVANCE_METRICS = ("answer_relevancy", "context_relevance")


def relevance_band(value: float | None, profile: "str | Profile" = "default") -> str | None:
    """The relevance band of ``value`` under ``profile``: ``"excellent"`` when value >= the
    profile's first band level, ``"good"`` when >= the second, else ``"poor"``; None for None.

    Levels (``Profile.bands``): default excellent >= 0.8, good >= 0.5; legal and medical
    excellent >= 0.9, good >= 0.7. Meant for :data:`RELEVANCE_METRICS` (a sample's value or a
    run's mean); the pass / warn / fail label of a Score stays the metric's own.

    >>> relevance_band(0.8), relevance_band(0.79), relevance_band(0.5), relevance_band(0.49)
    ('excellent', 'good', 'good', 'poor')
    >>> relevance_band(0.85, profile="legal")
    'good'
    """
    if value is None:
        return None
    excellent, good = get_profile(profile).bands
    return "excellent" if value >= excellent else "good" if value >= good else "poor"
