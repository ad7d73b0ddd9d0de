"""Internal: Citation parsing: an answer split into units (sentences / clauses) with the citations attached to
each (chunk markers such as "[1]"), and the legal authorities a text cites.

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

Legal citations (:func:`legal_citations`, what the legal profile's ``legal_citations`` check
reads) are the authorities an answer cites, found with regular expressions for the common U.S.
forms: full case citations with an optional case name (and docket number), pinpoint, court and
year ("Brown v. Board of Education, 347 U.S. 483, 495 (1954)"; "Smith v. Jones, No. 96-1234, 123
F.3d 456"), short forms ("347 U.S. at 495"), statutes and
regulations ("42 U.S.C. § 1983", "29 C.F.R. § 1910.1200", "Cal. Civ. Code § 1714") and "Id." /
"Ibid." (resolved to the citation before it). Reporters recognised: U.S., S. Ct., L. Ed. (2d), F.
(2d, 3d, 4th), F. Supp. (2d, 3d), F. App'x, the regional reporters (A., N.E., N.W., S.E., S.W.,
So., P., with their series), Cal. Rptr., N.Y.S. and B.R.; a one-letter reporter (A., F., P.) only
with a case name or a year ("3 A. 4" alone is prose).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ragmeter.data import Context
from ragmeter.text import split_sentences

__all__ = ["Citation", "Unit", "ParsedAnswer", "parse_citations", "strip_citations", "LegalCitation", "legal_citations"]

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
        return {
            "marker": self.marker,
            "target": self.target,
            "chunk": self.chunk,
            "unit": self.unit,
            "start": self.start,
            "end": self.end,
            "valid": self.valid,
            "error": self.error,
        }


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
    def of(cls, text: str, chunks: Iterable[int | None] = ()) -> Unit:
        """A unit citing ``chunks`` (0-based indices; None stands for an invalid citation).
        Handy for building test cases without parsing an answer."""
        cites = [
            Citation(
                marker=f"[{'?' if c is None else c + 1}]",
                target="?" if c is None else str(c + 1),
                chunk=c,
                unit=None,
                start=-1,
                end=-1,
                error="invalid citation" if c is None else None,
            )
            for c in chunks
        ]
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
        return {
            "text": self.text,
            "units": [{"text": u.text, "sentence": u.sentence, "chunks": u.chunks} for u in self.units],
            "citations": [c.to_dict() for c in self.citations],
            "reference_list": list(self.reference_list),
        }


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
_HEADER = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:sources|references|citations|bibliography|works cited|"
    r"footnotes)\s*:?\s*(?:\*\*|__)?\s*:?\s*$",
    re.I,
)
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


def _parse_items(
    content: str, n: int, ids: list[str | None], numbers: str, keyword_required: bool
) -> list[_Item] | None:
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
        s = s[m.end() :].strip()
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
            markers.append(_Marker(m.start(), m.end(), text[m.start() : m.end()], items))
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
        bullet = _BULLET.match(line)  # (it matches every line: all of it is optional)
        lead = bullet.end() if bullet else 0
        mk = starts.get(a + lead)
        if mk is None:
            continue
        rest = text[mk.end : b]
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
        gap = answer[groups[-1][-1].end : mk.start] if groups else ""
        if groups and _GROUP_GAP.match(gap):
            groups[-1].append(mk)
        elif (
            groups
            and _RANGE_GAP.match(gap)
            and len(groups[-1][-1].items) == 1
            and len(mk.items) == 1
            and _INT.match(groups[-1][-1].items[0].target)
            and _INT.match(mk.items[0].target)
            and 0 < int(mk.items[0].target) - int(groups[-1][-1].items[0].target) < _MAX_RANGE
        ):
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
            after = answer[b : b + 1]
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
            piece = _LEAD_PUNCT.sub("", sent[bounds[j] : bounds[j + 1]]).strip()
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


# --------------------------------------------------------------------------- legal citations

_REPORTERS = [
    "U.S.",
    "S. Ct.",
    "L. Ed. 2d",
    "L. Ed.",
    "F. Supp. 3d",
    "F. Supp. 2d",
    "F. Supp.",
    "F. App'x",
    "F.4th",
    "F.3d",
    "F.2d",
    "F.",
    "A.3d",
    "A.2d",
    "A.",
    "N.E.3d",
    "N.E.2d",
    "N.E.",
    "N.W.2d",
    "N.W.",
    "S.E.2d",
    "S.E.",
    "S.W.3d",
    "S.W.2d",
    "S.W.",
    "So. 3d",
    "So. 2d",
    "So.",
    "P.3d",
    "P.2d",
    "P.",
    "Cal. Rptr. 3d",
    "Cal. Rptr. 2d",
    "Cal. Rptr.",
    "N.Y.S.3d",
    "N.Y.S.2d",
    "N.Y.S.",
    "B.R.",
]


def _flexible(reporter: str) -> str:
    """A reporter abbreviation as a pattern: the space after a period optional ("F. 3d" = "F.3d")."""
    return r"\.\s?".join(re.escape(p.strip()) for p in reporter.split(".")).replace(r"\ ", r"\s?")


_REPORTER = "(?:" + "|".join(_flexible(r) for r in _REPORTERS) + ")"
# A docket number's lead-in: "No.", "Docket No.", "Case No.".
_DOCKET = r"(?:Docket |Case )?No\."
# A party's later words never start a docket number ("Smith v. Jones, Docket No. 96-1234, ...").
_PARTY = rf"(?:[A-Z][\w.'&-]*(?:,? (?!{_DOCKET} )(?:of|the|and|for|on|in|ex rel\.|&|[A-Z][\w.'&-]*))*)"
# A docket number between the name and the reporter ("Smith v. Jones, No. 96-1234, 123 F.3d 456") is skipped.
_NAME = rf"(?P<name>(?:In re |Ex parte ){_PARTY}|{_PARTY} v\. {_PARTY}),?\s+(?:{_DOCKET}\s?[\w.:-]+,?\s+)?"
_PIN = r"\d+(?:\s?[-–]\s?\d+)?"
_CASE = re.compile(
    rf"(?:{_NAME})?(?P<volume>\d{{1,4}})\s+(?P<reporter>{_REPORTER})\s+"
    rf"(?:at\s+(?P<short_pin>{_PIN})|(?P<page>\d{{1,5}})(?:,\s*(?P<pin>{_PIN}))?)"
    rf"(?:\s*\((?P<court>[^()]*?)\s*(?P<year>1[6-9]\d\d|20\d\d)\))?"
)
_STATUTE_CODE = (
    r"U\.\s?S\.\s?C\.(?:\s?A\.)?|C\.\s?F\.\s?R\.|Stat\.|(?:[A-Z][A-Za-z.]*\s){1,4}(?:Code|Stat\.)(?:\s?Ann\.)?"
)
_STATUTE = re.compile(
    rf"(?:(?P<title>\d{{1,3}})\s+)?(?P<code>{_STATUTE_CODE})\s*(?:§§?|[Ss]ec(?:tion|\.)|s\.)\s*"
    rf"(?P<section>\d[\w.\-–]*(?:\([\w]+\))*)"
)
_FEDERAL = re.compile(r"U\.\s?S\.\s?C\.(?:\s?A\.)?|C\.\s?F\.\s?R\.")
_ID = re.compile(r"\b(?P<id>[Ii]d\.|[Ii]bid\.)(?:,?\s+at\s+(?P<pin>" + _PIN + "))?")
#: Words before a case name that are not part of it: signals ("See also", "Cf.") and sentence openers ("In"),
#: and a clause ending in "in" before the first party ("The Court in Smith v. Jones").
_SIGNAL = re.compile(
    r"^(?:(?:See|see|Cf\.|But|but|Accord|E\.g\.,?|Compare|Contra|also|generally|In(?! re\b)|As|"
    r"Under|Per|Citing|After|Following)\s+)+|^(?:(?! v\. ).)* in (?=(?:(?! v\. ).)+ v\. )"
)


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
        return {
            "kind": self.kind,
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "key": self.key,
            "name": self.name,
            "pin": self.pin,
            "year": self.year,
            **self.fields,
        }


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _reporter_key(volume: str, reporter: str) -> str:
    return f"{volume} {_squash(reporter)}"


def legal_citations(text: str) -> list[LegalCitation]:
    """The legal citations of ``text``, in order: cases, short forms, statutes and Id. (see the
    module doc), short forms and Id. resolved to the citation they refer to.

    >>> [c.key for c in legal_citations("Brown v. Board of Education, 347 U.S. 483, 495 (1954). Id. at 494.")]
    ['347 U.S. 483', '347 U.S. 483']
    """
    found: list[LegalCitation] = []
    taken: list[tuple[int, int]] = []
    for m in _STATUTE.finditer(text):
        code = " ".join(m["code"].split())
        code = _squash(code) if _FEDERAL.fullmatch(code) else code  # "U. S. C." = "U.S.C."
        section = m["section"].rstrip(".")
        written = m[0].rstrip(".")
        key = " ".join(x for x in (m["title"], code, "§", section) if x)
        found.append(
            LegalCitation(
                "statute",
                written,
                m.start(),
                m.start() + len(written),
                key,
                fields={"title": m["title"], "code": code, "section": section},
            )
        )
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
            found.append(
                LegalCitation(
                    "short",
                    text[start : m.end()],
                    start,
                    m.end(),
                    None,
                    name,
                    m["short_pin"],
                    m["year"],
                    {"volume": m["volume"], "reporter": _squash(m["reporter"])},
                )
            )
        else:
            found.append(
                LegalCitation(
                    "case",
                    text[start : m.end()],
                    start,
                    m.end(),
                    f"{base} {m['page']}",
                    name,
                    m["pin"],
                    m["year"],
                    {
                        "volume": m["volume"],
                        "reporter": _squash(m["reporter"]),
                        "page": m["page"],
                        "court": (m["court"] or "").strip() or None,
                    },
                )
            )
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
            full = next(
                (
                    p
                    for p in reversed(out)
                    if p.kind == "case"
                    and p.fields["volume"] == c.fields["volume"]
                    and p.fields["reporter"] == c.fields["reporter"]
                ),
                None,
            )
            c = replace(c, key=full.key if full else None, name=c.name or (full.name if full else None))
        elif c.kind == "id" and out:
            c = replace(c, key=out[-1].key, name=out[-1].name)
        out.append(c)
    return out
