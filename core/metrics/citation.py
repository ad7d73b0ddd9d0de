"""Citation parsing and citation metrics: per-citation verdicts, citation accuracy, precision, recall.

An answer is parsed once into *units* (sentences, split into clauses where a citation marker
stands in the middle of a sentence), each carrying the citations attached to it. The same units,
with the markers removed, are what ``extract_claims`` receives for faithfulness, answer
correctness and the citation metrics, so one claim extraction and one claim verification serve
them all: scoring citations next to :class:`~ragmeter.metrics.Faithfulness` costs no extra judge
call.

Recognised citation formats (numbers are 1-based chunk positions, other names are chunk ids)::

    "... in 1905 [1]."        "[1][3]"  "[1] [3]"  "[1], [3]"     "[1, 3]"  "[1; 3]"  "[1-3]"
    "[^2]" (footnote)         "(Source 2)"  "(Sources 1 and 3)"  "[Source 2]"  "(Doc 2)"
    "【1】"  "【1, 3】"  "【1†source】"                          "[doc-7]"  "[doc-7, doc-9]"

Not citations: years and other numbers >= 1000 that are no chunk position or id ("[1905]"),
intervals ("[0, 1]"), words ("[sic]", "[citation needed]"), markdown links ("[1](https://..)"),
anything inside inline code or code blocks, and the entries of a reference list (lines such as
"[1]: https://..." or "[^1]: note", lines after a "Sources:" / "References:" heading, and a
trailing block of lines that each start with a marker, "[1] Wikipedia - Albert Einstein"). The
reference list is left out of the units and reported as ``ParsedAnswer.reference_list``.

A bracket whose content looks like a chunk id (a letter, then letters / digits / ``-_.:#/`` with
at least one digit, e.g. ``doc-7``, ``chunk_12``, ``S2``) or equals a chunk id is a citation by
id; an id that no chunk has is an *invalid* citation, as is a position outside
``1..len(contexts)``. Invalid citations are reported, never raised. A number is a position
first; one outside ``1..len(contexts)`` that equals a chunk id cites that chunk (use
``numbers="ids"`` when numeric markers are always ids).

Marker placement: a marker applies to the text before it. Markers at the end of a sentence
(only punctuation after them, or right after the sentence's final period: "... 1905. [1]")
apply to the whole sentence, or to its last clause when the sentence was split. A marker in the
middle of a sentence ends a clause: "A [1] and B [2]." gives the units "A" [1] and "and B." [2].
Markers at the very start of the answer attach to the first unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..data import Context, Sample, Score
from ..text import split_sentences
from .base import Metric, ScoringContext

__all__ = [
    "Citation",
    "Unit",
    "ParsedAnswer",
    "CitationReport",
    "parse_citations",
    "strip_citations",
    "score_citations",
    "answer_units",
    "answer_claims",
    "claim_verdicts",
    "claim_evidence",
    "CitationAccuracy",
    "CitationPrecision",
    "CitationRecall",
    "CITATION_VERDICTS",
]

#: Per-citation verdicts. ``no_claim``: the cited unit makes no factual claim, so there is
#: nothing for the citation to support (left out of accuracy and precision).
CITATION_VERDICTS = ("supports", "partially", "does_not_support", "invalid", "no_claim")

# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Citation:
    """One cited chunk, as written in the answer.

    ``marker`` is the whole marker as written (``"[1, 3]"``), ``target`` the single position or
    id it names here (``"3"``), ``chunk`` the 0-based index of the cited chunk (None when the
    citation is invalid, ``error`` then says why), ``unit`` the index of the unit it is attached
    to (None when the answer has no text to attach it to), ``start`` / ``end`` the marker's
    offsets in the answer.
    """

    marker: str
    target: str
    chunk: int | None
    unit: int | None
    start: int
    end: int
    error: str | None = None

    @property
    def valid(self) -> bool:
        """True when the citation names an existing chunk."""
        return self.chunk is not None

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {"marker": self.marker, "target": self.target, "chunk": self.chunk, "unit": self.unit,
                "start": self.start, "end": self.end, "valid": self.valid, "error": self.error}


@dataclass
class Unit:
    """One sentence or clause of the answer (markers removed) and the citations attached to it.

    ``sentence`` is the index of the sentence the unit comes from.
    """

    text: str
    citations: list = field(default_factory=list)
    sentence: int = 0

    @property
    def chunks(self) -> list[int]:
        """The 0-based indices of the chunks this unit validly cites, in order, without repeats."""
        out: list[int] = []
        for c in self.citations:
            if c.chunk is not None and c.chunk not in out:
                out.append(c.chunk)
        return out

    @classmethod
    def of(cls, text: str, chunks: Iterable[int | None] = ()) -> "Unit":
        """A unit citing ``chunks`` (0-based indices; None stands for an invalid citation).
        Handy for building test cases without parsing an answer."""
        cites = [Citation(marker=f"[{'?' if c is None else c + 1}]", target="?" if c is None else str(c + 1),
                          chunk=c, unit=None, start=-1, end=-1,
                          error="invalid citation" if c is None else None) for c in chunks]
        return cls(text, cites)


@dataclass
class ParsedAnswer:
    """An answer parsed by :func:`parse_citations`.

    ``text`` is the answer with citation markers and the reference list removed; ``units`` its
    sentences / clauses with their citations; ``citations`` every citation in order of
    appearance (one per unit and chunk: a repeated citation of the same chunk by the same unit
    is kept once); ``reference_list`` the lines of a sources / reference list (not scored).
    """

    text: str
    units: list[Unit]
    citations: list[Citation]
    reference_list: list[str] = field(default_factory=list)

    @property
    def unit_texts(self) -> list[str]:
        """The units' texts: what ``extract_claims`` receives."""
        return [u.text for u in self.units]

    @property
    def invalid(self) -> list[Citation]:
        """The invalid citations (out-of-range positions, unknown ids)."""
        return [c for c in self.citations if not c.valid]

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {"text": self.text,
                "units": [{"text": u.text, "sentence": u.sentence, "chunks": u.chunks} for u in self.units],
                "citations": [c.to_dict() for c in self.citations],
                "reference_list": list(self.reference_list)}


# --------------------------------------------------------------------------- parsing

_KEYWORD = r"(?:sources?|src|docs?|documents?|chunks?|passages?|contexts?|refs?|references?|citations?)"
_KEYWORD_PREFIX = re.compile(rf"^(?:see\s+|cf\.?\s+)?{_KEYWORD}\.?(?:\s*[:#]\s*|\s+)", re.I)
_MARKER = re.compile(
    r"(?P<sq>\[(?P<caret>\^?)(?P<sqc>[^\[\]\n]{1,120})\](?!\())"
    r"|(?P<cjk>【(?P<cjkc>[^【】\n]{1,80})】)"
    rf"|(?P<par>\((?P<parc>\s*(?:see\s+|cf\.?\s+)?{_KEYWORD}\.?(?:\s*[:#]\s*|\s+)[^()\n]{{1,80}})\))",
    re.I,
)
_ID_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_.:#/][A-Za-z0-9]+)*$")
_INT = re.compile(r"^#?(\d{1,6})$")
_RANGE = re.compile(r"^#?(\d{1,6})\s*[-–—]\s*#?(\d{1,6})$")
_ITEM_SPLIT = re.compile(r"\s*[,;]\s*|\s+and\s+|\s*&\s*", re.I)
_CODE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)|`[^`\n]+`", re.S)
_HEADER = re.compile(r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:sources|references|citations|bibliography|works cited|"
                     r"footnotes)\s*:?\s*(?:\*\*|__)?\s*:?\s*$", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•]\s+|\d+[.)]\s+)?")
_GROUP_GAP = re.compile(r"^[ \t,;]*$")
_RANGE_GAP = re.compile(r"^[ \t]*[-–—][ \t]*$")
_MAX_RANGE = 50


@dataclass
class _Item:
    target: str
    chunk: int | None
    error: str | None


@dataclass
class _Marker:
    start: int
    end: int
    text: str
    items: list[_Item]


def _context_ids(contexts: Sequence[Any]) -> list[str | None]:
    ids: list[str | None] = []
    for c in contexts:
        if isinstance(c, Context):
            ids.append(c.id)
        elif isinstance(c, dict):
            ids.append(None if c.get("id") is None else str(c.get("id")))
        else:
            ids.append(None)
    return ids


def _position(k: int, n: int, ids: list[str | None], numbers: str) -> _Item:
    """The citation item for the number ``k`` (a 1-based position, or an id with numbers="ids")."""
    id_index = {i: j for j, i in reversed(list(enumerate(ids))) if i is not None}
    key = str(k)
    if numbers == "ids":
        if key in id_index:
            return _Item(key, id_index[key], None)
        return _Item(key, None, f"unknown chunk id {key!r}" + ("" if any(ids) else " (the chunks have no ids)"))
    if 1 <= k <= n:
        return _Item(key, k - 1, None)
    if key in id_index:  # not a position, but a chunk's id
        return _Item(key, id_index[key], None)
    return _Item(key, None, f"position {k} is out of range (the sample has {n} chunk{'s' if n != 1 else ''})")


def _parse_items(content: str, n: int, ids: list[str | None], numbers: str, keyword_required: bool) -> list[_Item] | None:
    """The citation items of one marker's content, or None when the bracket is not a citation."""
    s = content.strip()
    if not s:
        return None
    id_index = {i: k for k, i in reversed(list(enumerate(ids))) if i is not None}
    lower_index = {i.lower(): k for i, k in id_index.items()}
    if s in id_index and (numbers == "ids" or not _INT.match(s)):
        # the whole content is a chunk id (ids may contain commas or spaces); numbers stay
        # positions unless numbers="ids"
        return [_Item(s, id_index[s], None)]
    m = _KEYWORD_PREFIX.match(s)
    if m:
        s = s[m.end():].strip()
    elif keyword_required:
        return None
    if not s:
        return None
    raw = [p.strip() for p in _ITEM_SPLIT.split(s)]
    if any(not p for p in raw):
        return None
    items: list[_Item] = []
    numbers_seen: list[int] = []

    for p in raw:
        mi = _INT.match(p)
        mr = _RANGE.match(p)
        if mi:
            k = int(mi.group(1))
            numbers_seen.append(k)
            items.append(_position(k, n, ids, numbers))
        elif mr:
            a, b = int(mr.group(1)), int(mr.group(2))
            if b < a or b - a >= _MAX_RANGE:
                return None
            numbers_seen.extend([a, b])
            items.extend(_position(k, n, ids, numbers) for k in range(a, b + 1))
        elif p in id_index:
            items.append(_Item(p, id_index[p], None))
        elif p.lower() in lower_index:
            items.append(_Item(p, lower_index[p.lower()], None))
        elif _ID_PATTERN.match(p) and any(ch.isdigit() for ch in p) and len(p) <= 64:
            items.append(_Item(p, None, f"unknown chunk id {p!r}" + ("" if any(ids) else " (the chunks have no ids)")))
        else:
            return None
    known = {i for i in ids if i is not None}
    for k in numbers_seen:
        # Years and other large numbers are not citations unless they name a chunk.
        if k >= 1000 and k > n and str(k) not in known:
            return None
    if len(raw) > 1 and 0 in numbers_seen:  # an interval such as [0, 1]
        return None
    return items


def _find_markers(text: str, masked: str, n: int, ids: list[str | None], numbers: str) -> list[_Marker]:
    markers: list[_Marker] = []
    for m in _MARKER.finditer(masked):
        if m.group("sq") is not None:
            content, keyword_required = m.group("sqc"), False
        elif m.group("cjk") is not None:
            content, keyword_required = m.group("cjkc").split("†")[0], False
        else:
            content, keyword_required = m.group("parc"), True
        items = _parse_items(content, n, ids, numbers, keyword_required)
        if items:
            markers.append(_Marker(m.start(), m.end(), text[m.start():m.end()], items))
    return markers


def _mask_code(text: str) -> str:
    """``text`` with code spans and blocks blanked out (same length, so offsets still match)."""
    return _CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _lines(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        spans.append((pos, pos + len(body)))
        pos += len(line)
    return spans


def _reference_lines(text: str, markers: list[_Marker]) -> set[int]:
    """Indices of the lines that form a reference list (not part of the answer's statements)."""
    spans = _lines(text)
    starts = {mk.start: mk for mk in markers}
    led: dict[int, bool] = {}  # line -> starts with a marker followed by text
    colon: set[int] = set()
    for i, (a, b) in enumerate(spans):
        line = text[a:b]
        lead = _BULLET.match(line).end()
        mk = starts.get(a + lead)
        if mk is None:
            continue
        rest = text[mk.end:b]
        if rest.strip():
            led[i] = True
            if rest.lstrip().startswith(":"):
                colon.add(i)
    out = set(colon)
    # Everything after a "Sources:" / "References:" heading.
    for i, (a, b) in enumerate(spans):
        if _HEADER.match(text[a:b]):
            out.update(range(i, len(spans)))
            break
    # A trailing block of marker-led lines, after at least one other non-empty line.
    nonempty = [i for i, (a, b) in enumerate(spans) if text[a:b].strip()]
    block: list[int] = []
    for i in reversed(nonempty):
        if led.get(i):
            block.append(i)
        else:
            break
    if block and len(block) < len(nonempty):
        out.update(block)
    return out


def _locate(sentences: list[str], text: str) -> list[tuple[int, int]]:
    """Character spans of ``sentences`` in ``text`` (searched in order, whitespace-tolerant)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for s in sentences:
        i = text.find(s, cursor)
        if i >= 0:
            spans.append((i, i + len(s)))
            cursor = i + len(s)
            continue
        pattern = r"\s+".join(re.escape(tok) for tok in s.split())
        m = re.compile(pattern).search(text, cursor) if pattern else None
        if m:
            spans.append((m.start(), m.end()))
            cursor = m.end()
        else:  # the splitter changed the text: keep the order, approximate the span
            spans.append((cursor, min(len(text), cursor + len(s))))
            cursor = spans[-1][1]
    return spans


_WORD = re.compile(r"\w")
_LEAD_PUNCT = re.compile(r"^[\s,;:\-–—]+")


def parse_citations(answer: str, contexts: Sequence[Any] = (), *, numbers: str = "positions") -> ParsedAnswer:
    """Parse ``answer`` into units with their citations (see the module docstring for formats).

    ``contexts`` are the sample's chunks (:class:`~ragmeter.Context`, dicts or strings), used to
    resolve positions and ids. ``numbers="positions"`` (default) reads numeric markers as 1-based
    positions in ``contexts``; ``numbers="ids"`` reads them as chunk ids (for pipelines whose
    chunk ids are numbers). Never raises on odd citations: they are returned as invalid.

    >>> p = parse_citations("Einstein was born in 1879 [1] and died in 1955 [2].", ["a", "b"])
    >>> [(u.text, u.chunks) for u in p.units]
    [('Einstein was born in 1879', [0]), ('and died in 1955.', [1])]
    """
    if not isinstance(answer, str):
        raise TypeError(f"answer must be a string, got {type(answer).__name__}")
    if numbers not in ("positions", "ids"):
        raise ValueError("numbers must be 'positions' or 'ids'")
    contexts = list(contexts)
    n = len(contexts)
    ids = _context_ids(contexts)
    masked = _mask_code(answer)
    markers = _find_markers(answer, masked, n, ids, numbers)

    # Reference list lines: removed with the markers in them.
    ref_lines = _reference_lines(answer, markers)
    spans = _lines(answer)
    reference_list = [answer[a:b].strip() for i, (a, b) in enumerate(spans) if i in ref_lines and answer[a:b].strip()]
    ref_ranges = [(spans[i][0], spans[i][1]) for i in sorted(ref_lines)]

    def in_refs(pos: int) -> bool:
        return any(a <= pos < b for a, b in ref_ranges)

    markers = [mk for mk in markers if not in_refs(mk.start)]

    # Groups of adjacent markers ("[1][3]", "[1], [3]").
    groups: list[list[_Marker]] = []
    for mk in markers:
        gap = answer[groups[-1][-1].end:mk.start] if groups else ""
        if groups and _GROUP_GAP.match(gap):
            groups[-1].append(mk)
        elif groups and _RANGE_GAP.match(gap) and len(groups[-1][-1].items) == 1 and len(mk.items) == 1 \
                and _INT.match(groups[-1][-1].items[0].target) and _INT.match(mk.items[0].target) \
                and 0 < int(mk.items[0].target) - int(groups[-1][-1].items[0].target) < _MAX_RANGE:
            # "[1]-[3]": a range written with two markers
            a, b = int(groups[-1][-1].items[0].target), int(mk.items[0].target)
            groups[-1][-1].items.extend(_position(k, n, ids, numbers) for k in range(a + 1, b))
            groups[-1].append(mk)
        else:
            groups.append([mk])

    # Build the clean text, recording where each group stood.
    removals: list[tuple[int, int, int | None]] = [(a, b, None) for a, b in ref_ranges]
    removals += [(g[0].start, g[-1].end, gi) for gi, g in enumerate(groups)]
    removals.sort()
    out: list[str] = []
    length = 0
    cursor = 0
    offsets: dict[int, int] = {}
    for a, b, gi in removals:
        if a < cursor:
            continue
        seg = answer[cursor:a]
        if gi is not None:
            seg = seg.rstrip(" \t")
        out.append(seg)
        length += len(seg)
        if gi is not None:
            offsets[gi] = length
            after = answer[b:b + 1]
            before = out[-1][-1:] if out and out[-1] else ""
            if before and after and _WORD.match(before) and _WORD.match(after):
                out.append(" ")
                length += 1
        cursor = b
    out.append(answer[cursor:])
    clean = "".join(out)
    clean_text = "\n".join(line.rstrip() for line in clean.strip().splitlines() if line.strip())

    sentences = split_sentences(clean)
    sent_spans = _locate(sentences, clean)

    # Attach each group to a sentence and to a cut position inside it.
    per_sentence: dict[int, list[tuple[int, int]]] = {}  # sentence -> [(relative pos, group)]
    orphans: list[int] = []
    for gi in range(len(groups)):
        p = offsets.get(gi)
        if p is None:
            continue
        if not sent_spans:
            orphans.append(gi)
            continue
        idx = 0
        for si, (a, _b) in enumerate(sent_spans):
            if a < p:
                idx = si
        a, b = sent_spans[idx]
        rel = max(0, min(p - a, b - a))
        per_sentence.setdefault(idx, []).append((rel, gi))

    units: list[Unit] = []
    unit_groups: list[list[int]] = []
    for si, (a, b) in enumerate(sent_spans):
        sent = clean[a:b]
        cuts: dict[int, list[int]] = {}
        end_groups: list[int] = []
        lead_groups: list[int] = []
        for rel, gi in per_sentence.get(si, []):
            if not _WORD.search(sent[rel:]):
                end_groups.append(gi)
            elif not _WORD.search(sent[:rel]):
                lead_groups.append(gi)
            else:
                cuts.setdefault(rel, []).append(gi)
        bounds = [0] + sorted(cuts) + [len(sent)]
        segs: list[tuple[str, list[int]]] = []
        for j in range(len(bounds) - 1):
            piece = _LEAD_PUNCT.sub("", sent[bounds[j]:bounds[j + 1]]).strip()
            gs = list(cuts.get(bounds[j + 1], [])) if j + 1 < len(bounds) - 1 else []
            segs.append((piece, gs))
        segs[-1] = (segs[-1][0], segs[-1][1] + end_groups)
        segs[0] = (segs[0][0], lead_groups + segs[0][1])
        # Pieces without words are not units: their citations go to the previous piece
        # (or the next one at the start of a sentence).
        merged: list[tuple[str, list[int]]] = []
        carry: list[int] = []
        for piece, gs in segs:
            if _WORD.search(piece):
                merged.append((piece, carry + gs))
                carry = []
            elif merged:
                merged[-1] = (merged[-1][0], merged[-1][1] + gs)
            else:
                carry += gs
        if not merged:
            if units:
                unit_groups[-1] += carry
            else:
                orphans.extend(carry)
            continue
        if carry:
            merged[-1] = (merged[-1][0], merged[-1][1] + carry)
        for piece, gs in merged:
            units.append(Unit(piece, [], si))
            unit_groups.append(gs)

    citations: list[Citation] = []

    def add(gs: list[int], ui: int | None) -> list[Citation]:
        seen: set = set()
        made: list[Citation] = []
        for gi in sorted(gs, key=lambda g: groups[g][0].start):
            for mk in groups[gi]:
                for it in mk.items:
                    key = ("c", it.chunk) if it.chunk is not None else ("t", it.target)
                    if key in seen:
                        continue
                    seen.add(key)
                    made.append(Citation(mk.text, it.target, it.chunk, ui, mk.start, mk.end, it.error))
        return made

    for ui, gs in enumerate(unit_groups):
        units[ui].citations = add(gs, ui)
    orphan_cites = add(orphans, None) if orphans else []
    citations = sorted([c for u in units for c in u.citations] + orphan_cites, key=lambda c: (c.start, c.end))
    return ParsedAnswer(clean_text, units, citations, reference_list)


def strip_citations(answer: str, contexts: Sequence[Any] = ()) -> str:
    """``answer`` with its citation markers and reference list removed."""
    return parse_citations(answer, contexts).text


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
        return {"accuracy": self.accuracy, "precision": self.precision, "recall": self.recall,
                "counts": self.counts, "citations": self.citations, "uncited_claims": self.uncited_claims,
                "unsupported_claims": self.unsupported_claims, "units": self.units, "note": self.note}


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
        return [{"chunk": e["chunk"], "quote": (e.get("quote") or "").strip()} for e in evidence
                if isinstance(e, dict) and isinstance(e.get("chunk"), int)]
    listed = [c for c in (verdict.get("chunks") or []) if isinstance(c, int)]
    quote = (verdict.get("quote") or "").strip()
    owner = listed[0] if listed else None
    if quote and chunks is not None:
        owner = next((c for c in listed if 0 <= c < len(chunks) and _norm(quote) in _norm(chunks[c])), owner)
    return [{"chunk": c, "quote": quote if c == owner else ""} for c in listed]


def score_citations(units: Sequence[Unit | Sequence[int | None]], claims: Sequence[dict], verdicts: Sequence[dict],
                    *, chunks: Sequence[str] | None = None, partial_credit: bool = False,
                    at_most_citations: int | None = None, no_claims_value: float | None = 1.0,
                    uncited_value: float | None = 0.0) -> CitationReport:
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
    precision; an invalid citation counts as invalid even there).

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
        unit_records.append({"unit": ui, "text": unit.text, "claims": cl, "chunks": valid,
                             "supported_by_citations": joint if cl else None})
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
            rec = {"citation": len(records), "marker": c.marker, "target": c.target, "unit": ui,
                   "statement": unit.text, "chunk": c.chunk, "quote": None, "quote_found": None, "precise": None}
            if not c.valid:
                rec.update(verdict="invalid", reason=c.error or "invalid citation", precise=False)
                n_scored += 1
                records.append(rec)
                continue
            if not cl:
                rec.update(verdict="no_claim", reason="the cited text makes no factual claim")
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
                    rec["quote_found"] = c.chunk < len(chunks) and _norm(q) in _norm(chunks[c.chunk])
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
    n_precision = sum(1 for r in records if r["verdict"] == "invalid" or (r["verdict"] != "no_claim" and r["precise"] is not None))
    counts = {"citations": len(records), "scored_citations": n_scored, "supports": n_supports,
              "partially": sum(r["verdict"] == "partially" for r in records),
              "does_not_support": sum(r["verdict"] == "does_not_support" for r in records),
              "invalid": sum(r["verdict"] == "invalid" for r in records),
              "no_claim": sum(r["verdict"] == "no_claim" for r in records),
              "precise": n_precise, "precision_citations": n_precision,
              "claims": n_claims, "units_with_claims": units_with_claims, "supported_units": supported_units,
              "uncited_claims": len(uncited)}
    if n_scored == 0:
        if n_claims == 0:
            value, note = no_claims_value, "the answer makes no claim that needs a citation"
        else:
            value, note = uncited_value, (f"the answer makes {n_claims} claim{'s' if n_claims != 1 else ''} "
                                          "but cites no chunk")
        return CitationReport(value, value, value, records, uncited, unsupported, unit_records, counts, note)
    accuracy = credit / n_scored
    precision = n_precise / n_precision
    recall = supported_units / units_with_claims if units_with_claims else no_claims_value
    return CitationReport(accuracy, precision, recall, records, uncited, unsupported, unit_records, counts)


# --------------------------------------------------------------------------- shared judge work


def answer_units(sample: Sample) -> ParsedAnswer:
    """The sample's answer parsed into units (the same for every metric, so judge calls are shared)."""
    return parse_citations(sample.answer or "", sample.contexts)


async def answer_claims(sample: Sample, ctx: ScoringContext) -> tuple[ParsedAnswer, list[dict]]:
    """The answer's units and its claims ``[{unit, text}]`` from the ``extract_claims`` task.

    Inputs are built the same way for every metric (question + unit texts), so faithfulness,
    answer correctness and the citation metrics share one judge call. An answer without text
    has no claims and costs no call.
    """
    parsed = answer_units(sample)
    if not parsed.units:
        return parsed, []
    result = await ctx.task("extract_claims", {"question": sample.question, "units": parsed.unit_texts})
    return parsed, list(result.output["claims"])


async def claim_verdicts(sample: Sample, ctx: ScoringContext, claims: Sequence[dict]) -> list[dict]:
    """One ``verify_claims`` verdict per claim against all retrieved chunks (no call without claims)."""
    if not claims:
        return []
    result = await ctx.task("verify_claims", {"claims": [c["text"] for c in claims], "chunks": sample.context_texts})
    return list(result.output["verdicts"])


# --------------------------------------------------------------------------- metrics


class _CitationMetric(Metric):
    measure = "accuracy"
    requires = ("answer", "contexts")

    def __init__(self, *, numbers: str = "positions", partial_credit: bool = False,
                 at_most_citations: int | None = None, no_claims_value: float | None = 1.0,
                 uncited_value: float | None = 0.0, threshold: float | None = None, warn: float | None = None):
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
        parsed_units, claims = await answer_claims(sample, ctx)
        verdicts = await claim_verdicts(sample, ctx, claims)
        parsed = parsed_units if self.numbers == "positions" else parse_citations(
            sample.answer or "", sample.contexts, numbers=self.numbers)
        report = score_citations(parsed.units, claims, verdicts, chunks=sample.context_texts,
                                 partial_credit=self.partial_credit, at_most_citations=self.at_most_citations,
                                 no_claims_value=self.no_claims_value, uncited_value=self.uncited_value)
        value = getattr(report, self.measure)
        details = report.to_dict()
        details["claims"] = [{"claim": i, "text": c["text"], "unit": c["unit"], "verdict": v["verdict"],
                              "chunks": v["chunks"], "evidence": claim_evidence(v)}
                             for i, (c, v) in enumerate(zip(claims, verdicts))]
        details["invalid_citations"] = [r for r in report.citations if r["verdict"] == "invalid"]
        details["reference_list"] = parsed.reference_list
        c = report.counts
        if report.note:
            explanation = report.note + (f"; {self.measure} = {value:.2f} by the configured policy" if value is not None
                                         else f"; {self.measure} not applicable")
        elif self.measure == "accuracy":
            explanation = (f"{c['supports']} of {c['scored_citations']} citations support their statement "
                           f"({c['partially']} partially, {c['does_not_support']} not, {c['invalid']} invalid)")
        elif self.measure == "precision":
            explanation = f"{c['precise']} of {c['precision_citations']} citations are precise (ALCE)"
        else:
            explanation = (f"{c['supported_units']} of {c['units_with_claims']} statements are fully supported by "
                           f"their citations")
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
