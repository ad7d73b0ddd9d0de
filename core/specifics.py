"""Internal: Specifics: the checkable details of a text — numbers, dates, money, percentages, proper names
and quoted strings — extracted deterministically, each with a normalised value, so that "1,000"
equals "1000", "5%" equals "5 percent" and "$25 billion" equals "25 billion dollars".

The public API is stable (the ``HallucinatedSpecifics`` metric and the offline judge use it):

- :func:`extract_specifics` ``(text) -> list[Specific]``
- :func:`find_specific` ``(specific, text) -> bool``: does ``text`` state the same value?
- :func:`missing_specifics` ``(answer, contexts) -> list[Specific]``: specifics of the answer that
  no context states.

>>> [(s.kind, s.text) for s in extract_specifics('On March 3, 2021 Acme Corp paid "Bob" $25 billion, up 5%.')]
[('date', 'March 3, 2021'), ('name', 'Acme Corp'), ('quote', '"Bob"'), ('money', '$25 billion'), ('percent', '5%')]
>>> find_specific(extract_specifics("It costs $25 billion.")[0], "a price of 25 billion dollars")
True
>>> [s.text for s in missing_specifics("Sales rose 7% to 1,000 units.", ["Sales rose 5% to 1000 units."])]
['7%']

Extraction (patterns, word lists, :class:`Specific`, :func:`extract_specifics`) lives in
:mod:`ragmeter.specifics_extraction`; this module compares specifics with other texts and is the
one to import from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import lru_cache

from ragmeter.specifics_extraction import (
    _DIGIT,
    _MONTHS,
    _NUMBER_WORDS,
    _ORDINALS,
    _RE_WORDS,
    _TENS,
    _TITLES,
    _WEEKDAYS,
    KINDS,
    DateValue,
    Specific,
    _numeric_cached,
    extract_specifics,
)

__all__ = ["Specific", "DateValue", "KINDS", "extract_specifics", "find_specific", "missing_specifics"]

_NAME_CONNECTORS = {
    "of",
    "de",
    "van",
    "von",
    "da",
    "del",
    "der",
    "la",
    "le",
    "du",
    "&",
    "and",
    "for",
    "the",
    "di",
    "bin",
    "al",
}
_QUARTER_WORDS = frozenset({"first", "second", "third", "fourth", "quarter"})
_RE_CAP = re.compile(r"[A-Z][\w'’.&-]*|[A-Z]")


# --------------------------------------------------------------------------- matching


def _round_sig(x: float, sig: int) -> float:
    if x == 0 or sig <= 0:
        return x
    return round(x, sig - int(math.floor(math.log10(abs(x)))) - 1)


def _same_amount(claim: Specific, value: float) -> bool:
    v = float(claim.value)
    if math.isclose(v, value, rel_tol=1e-9, abs_tol=1e-12):
        return True
    if claim.hedge and claim.precision and v:
        # A hedged round figure states the values one step of its last significant digit allows:
        # "about 69,000" 68,500-69,500; "over 69,000" 69,000-70,000; "nearly 70,000" 60,000-70,000.
        step = 10 ** (math.floor(math.log10(abs(v))) - claim.precision + 1)
        lo, hi = {"about": (-step / 2, step / 2), "over": (0, step), "under": (-step, 0)}[claim.hedge]
        return lo - 1e-9 * abs(v) <= value - v <= hi + 1e-9 * abs(v)
    # A scaled claim ("$25 billion") matches a more precise figure that rounds to it ("$25.3 billion").
    if claim.precision and re.search(r"(?i)thousand|million|billion|trillion|\d\s*(?:k|m|bn|mn|b)\b", claim.text):
        return math.isclose(_round_sig(value, claim.precision), v, rel_tol=1e-9)
    return False


def _date_matches(claim: DateValue, other: DateValue) -> bool:
    for a, b in zip(claim, other):
        if a is not None and a != b:
            return False
    return True


@lru_cache(maxsize=4096)
def _norm_text(text: str) -> str:
    t = text.lower().replace("’", "'").replace("'s ", " ").replace("&", " and ")
    return " " + re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", t)) + " "


@lru_cache(maxsize=4096)
def _capitalised_words(text: str) -> frozenset:
    return frozenset(re.sub(r"['’]s$", "", m.group(0)).lower().rstrip(".") for m in _RE_CAP.finditer(text))


_RE_DEMONYM = re.compile(r"(\w+?)(?:ese|ians?|ans?|ish|ic|i)")


_RE_DIGIT_SEP = re.compile(r"(?<=\d)[.,](?=\d)")


@lru_cache(maxsize=4096)
def _digits_view(text: str) -> tuple[str, bool]:
    """``text`` with separators inside numbers removed ("1,000.5" -> "10005"), and whether it
    has number words (then any amount may be stated)."""
    words = set(_RE_WORDS.findall(text.lower()))
    return _RE_DIGIT_SEP.sub("", text), not words.isdisjoint(_NUMBER_WORDS) or "hundred" in words


_RE_SEGMENT = re.compile(r"(?<=[.!?;])\s+|\n+")


@lru_cache(maxsize=4096)
def _segments(text: str) -> tuple[str, ...]:
    """``text`` cut into sentence-like segments (no specific spans two of them)."""
    return tuple(p for p in _RE_SEGMENT.split(text) if p.strip())


def _numeric_in(specific: Specific, text: str) -> bool:
    """Whether ``text`` states the number / amount / percentage / date ``specific``."""
    kind = specific.kind
    if kind == "date":
        others = _numeric_cached(text)
        if any(o.kind == "date" and _date_matches(specific.value, o.value) for o in others):
            return True
        t = specific.value.time
        if t is not None and all(v is None for v in specific.value[:5]):
            # "7 pm" is stated by "let's make it 7": a bare number equal to the hour (12-hour clock)
            hour = (t // 60) % 12 or 12
            return t % 60 == 0 and any(o.kind == "number" and o.value == hour for o in others)
        return False
    for o in _values_in(text, ("number", "money", "percent", "date")):
        if o.kind == "date":
            if kind == "number" and o.value.year is not None and all(v is None for v in o.value[1:]):
                if _same_amount(specific, float(o.value.year)):
                    return True
            continue
        if kind == "percent" and o.kind != "percent":
            continue
        if kind == "money" and o.kind == "money" and specific.unit and o.unit and specific.unit != o.unit:
            continue
        if kind == "number" and o.kind == "percent":
            continue
        if _same_amount(specific, float(o.value)):
            return True
    return False


def _may_state(specific: Specific, text: str) -> bool:
    """Cheap pre-check: can ``text`` state this value at all? Every way of writing an amount
    contains its leading significant digits ("$0.13", "13 cents" -> "13"; "$25 billion",
    "25,000,000,000" -> "25"), unless the text spells numbers out; a date needs its year digits,
    month or weekday name, or (a time) a digit."""
    if specific.kind == "date":
        d = specific.value
        low = None
        if d.year is not None:
            return str(d.year) in text or str(d.year)[2:] in text
        if d.month is not None:
            low = text.lower()
            return (
                any(name in low for name, num in _MONTHS.items() if num == d.month and len(name) > 3)
                or _DIGIT.search(text) is not None
            )
        if d.weekday is not None:
            low = text.lower()
            return any(name in low for name, num in _WEEKDAYS.items() if num == d.weekday)
        return _DIGIT.search(text) is not None or not set(_RE_WORDS.findall(text.lower())).isdisjoint(_QUARTER_WORDS)
    view, has_words = _digits_view(text)
    return has_words or bool(specific.hedge) or _lead_digits(specific) in view


def _lead_digits(specific: Specific) -> str:
    """The leading significant digits every way of writing an amount contains ("0" for zero)."""
    v = abs(float(specific.value))
    if v == 0:
        return "0"
    digits = f"{v:.15e}".split("e")[0].replace(".", "").rstrip("0") or "0"
    return digits[:1] if specific.precision and specific.precision <= 2 else digits[:2]


_RE_ASCII_DIGITS = re.compile(r"[0-9]+")


def _digit_grams(text: str) -> set[str]:
    """Every run of one or two ASCII digits in ``text``."""
    return {run[i : i + n] for run in _RE_ASCII_DIGITS.findall(text) for n in (1, 2) for i in range(len(run) - n + 1)}


@lru_cache(maxsize=1024)
def _segment_index(text: str) -> tuple[frozenset, dict[str, set], dict[str, set]]:
    """For :func:`_candidates`: the segments of ``text`` that spell numbers out, and per run of
    one or two digits the segments holding it in their digits view / as written."""
    spelled: set[int] = set()
    in_view: dict[str, set] = {}
    as_written: dict[str, set] = {}
    for i, seg in enumerate(_segments(text)):
        view, has_words = _digits_view(seg)
        if has_words:
            spelled.add(i)
        for g in _digit_grams(view):
            in_view.setdefault(g, set()).add(i)
        for g in _digit_grams(seg):
            as_written.setdefault(g, set()).add(i)
    return frozenset(spelled), in_view, as_written


def _candidates(specific: Specific, text: str) -> list[int] | None:
    """The segments of ``text`` that can pass :func:`_may_state` for ``specific``, found through an
    index instead of one check per segment (None: every segment). So looking up many specifics
    in a long text costs time in proportion to the matches, not specifics x segments."""
    spelled, in_view, as_written = _segment_index(text)
    if specific.kind == "date":
        year = specific.value.year
        # "2021" in a segment implies "21" in it: the 2-digit tail decides (see _may_state)
        tail = str(year)[2:] if year is not None else ""
        if year is None or not (tail.isascii() and tail.isdigit() and len(tail) <= 2):
            return None
        return sorted(as_written.get(tail, ()))
    lead = _lead_digits(specific)
    if specific.hedge or not (lead.isascii() and lead.isdigit()):
        return None  # a rounded figure may start with other digits ("nearly 70,000" for 69,250)
    return sorted(spelled | in_view.get(lead, set()))


_TENS_NAMES = {value: word for word, value in _TENS.items()}
_RE_ORDINAL_DIGITS = re.compile(r"\d+(?:st|nd|rd|th)", re.I)


def _ordinal_stated(specific: Specific, text: str) -> bool:
    """Whether ``text`` spells out the ordinal a number such as "1st" or "21st" writes in digits
    ("the first quarter" for "the 1st quarter")."""
    if not _RE_ORDINAL_DIGITS.fullmatch(specific.text):
        return False
    n = int(specific.value)
    if not 1 <= n <= 99:
        return False
    if n <= 20:
        word = _ORDINALS[n - 1]
    elif n % 10 == 0:
        word = _TENS_NAMES[n][:-1] + "ieth"
    else:
        word = _TENS_NAMES[n - n % 10] + r"[\s-]" + _ORDINALS[n % 10 - 1]
    return re.search(rf"\b{word}\b", text, re.I) is not None


def _values_in(text: str, kinds: Iterable[str]) -> list[Specific]:
    kinds = set(kinds)
    return [s for s in _numeric_cached(text) if s.kind in kinds]


def find_specific(specific: Specific, text: str) -> bool:
    """Whether ``text`` states ``specific`` (same value, under any usual format).

    Numbers compare by value ("1,000" == "1000" == "one thousand"; a scaled figure such as
    "$25 billion" also matches "$25.3 billion"; a hedged round figure the values its rounding
    allows: "about 69,000" 68,500-69,500, "over 69,000" 69,000-70,000, "nearly 70,000"
    60,000-70,000; "1st" is "first"), money by amount and currency (when both say),
    percentages by value, dates by every part the specific gives ("2021" is found in
    "March 3, 2021"), names case-insensitively (a title or a possessive does not matter; a
    multi-word name is also found when all its words appear capitalised), quotes by their words.

    >>> s = extract_specifics("The dividend is $0.13 per share.")[0]
    >>> find_specific(s, "a dividend of 13 cents"), find_specific(s, "a dividend of $0.15")
    (True, False)
    >>> find_specific(extract_specifics("It opened in 2021.")[0], "It opened on March 3, 2021.")
    True
    >>> find_specific(extract_specifics("They met President Biden.")[0], "Joe Biden met them.")
    True
    """
    if not text:
        return False
    kind = specific.kind
    if kind == "number" and _ordinal_stated(specific, text):
        return True
    if kind in ("number", "money", "percent", "date"):
        # Parse only the sentences that can state it (an index, then cheap digit / word pre-checks).
        segments = _segments(text)
        rows = _candidates(specific, text) if len(segments) > 16 else None
        return any(
            _numeric_in(specific, segments[i])
            for i in (range(len(segments)) if rows is None else rows)
            if _may_state(specific, segments[i])
        )
    if kind == "name":
        norm = _norm_text(text)
        target = _norm_text(specific.text).strip()
        if target and f" {target} " in norm:
            return True
        words = [w for w in target.split() if w not in _TITLES]
        if not words:
            return False
        if len(words) < len(target.split()) and f" {' '.join(words)} " in norm:
            return True
        caps = _capitalised_words(text)
        if len(words) > 1:
            return all(w in caps for w in words if w not in _NAME_CONNECTORS)
        if re.fullmatch(r"[a-z]{2,}s", words[0]) and specific.text.rstrip("s").isupper():
            words = [words[0][:-1]]  # "GANs" -> "GAN"
        # A single name word: found when the text has it capitalised (surname of a full name),
        # or, for a nationality word, its country ("Chinese" / "China", "Canadian" / "Canada").
        w = words[0]
        if w in caps:
            return True
        m = _RE_DEMONYM.fullmatch(w)
        if m and len(m.group(1)) >= 4:
            stem = m.group(1)
            return any(c.startswith(stem) for c in caps)
        return False
    if kind == "quote":
        return f" {specific.value} " in _norm_text(text) if specific.value else False
    raise ValueError(f"unknown kind of specific: {kind!r}")


def missing_specifics(answer: str, contexts: Iterable[str]) -> list[Specific]:
    """The specifics of ``answer`` that no text of ``contexts`` states, in order, without repeats.

    >>> [s.text for s in missing_specifics("Ann Lee joined IBM in 2019.", ["Ann Lee joined IBM in 2018."])]
    ['2019']
    """
    contexts = [c for c in contexts if c]
    out: list[Specific] = []
    seen: set = set()
    for spec in extract_specifics(answer):
        if spec.key in seen:
            continue
        seen.add(spec.key)
        if not any(find_specific(spec, c) for c in contexts):
            out.append(spec)
    return out
