"""Internal: Extraction of specifics: the numbers, dates, money, percentages, proper names and quoted
strings of a text, found deterministically (regular expressions and word lists, no model), each
with a normalised value. :func:`extract_specifics` is public through :mod:`ragmeter.specifics`,
which also compares specifics with other texts.

>>> [(s.kind, s.value) for s in extract_specifics("Revenue rose 5 percent to $1.2 million.")]
[('percent', 5.0), ('money', 1200000.0)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

__all__ = ["Specific", "DateValue", "KINDS", "extract_specifics"]

#: The kinds of specifics, in the order they are reported for one span.
KINDS = ("date", "money", "percent", "number", "name", "quote")


class DateValue(NamedTuple):
    """A (possibly partial) date or time: any field may be None. ``weekday`` is 0 (Monday) .. 6,
    ``quarter`` 1..4, ``time`` minutes after midnight ("3:30 pm" = 930)."""

    year: int | None = None
    month: int | None = None
    day: int | None = None
    weekday: int | None = None
    quarter: int | None = None
    time: int | None = None  # minutes after midnight


@dataclass(frozen=True)
class Specific:
    """One specific detail of a text.

    ``kind`` is one of :data:`KINDS`; ``text`` the span as written; ``value`` the normalised value:
    a float for ``number`` / ``percent`` (5.0 for "5%") / ``money`` (amount, scaled: 25e9 for
    "$25 billion"), a :class:`DateValue` for ``date``, a lower-cased string for ``name`` and
    ``quote``. ``unit`` is the currency of money ("USD", "EUR", ... or ""), ``start`` / ``end``
    the span's offsets in the text.

    >>> extract_specifics("It rose 5 percent.")[0].value
    5.0
    """

    kind: str
    text: str
    value: Any
    unit: str = ""
    start: int = field(default=-1, compare=False)
    end: int = field(default=-1, compare=False)
    precision: int | None = field(default=None, compare=False, repr=False)
    #: A hedge before an amount ("about" / "over" / "under" 69,000, see :data:`HEDGES`), else "".
    hedge: str = field(default="", compare=False, repr=False)

    @property
    def key(self) -> tuple:
        """What two specifics must share to be the same detail: (kind, value, unit)."""
        return (self.kind, self.value, self.unit)


# --------------------------------------------------------------------------- vocabularies

_MONTHS = {
    "january": 1,
    "jan": 1,
    "february": 2,
    "feb": 2,
    "march": 3,
    "mar": 3,
    "april": 4,
    "apr": 4,
    "may": 5,
    "june": 6,
    "jun": 6,
    "july": 7,
    "jul": 7,
    "august": 8,
    "aug": 8,
    "september": 9,
    "sep": 9,
    "sept": 9,
    "october": 10,
    "oct": 10,
    "november": 11,
    "nov": 11,
    "december": 12,
    "dec": 12,
}
_WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
_ORDINALS = (
    "first",
    "second",
    "third",
    "fourth",
    "fifth",
    "sixth",
    "seventh",
    "eighth",
    "ninth",
    "tenth",
    "eleventh",
    "twelfth",
    "thirteenth",
    "fourteenth",
    "fifteenth",
    "sixteenth",
    "seventeenth",
    "eighteenth",
    "nineteenth",
    "twentieth",
)
_ORDINAL_WORDS = {w: i + 1 for i, w in enumerate(_ORDINALS[:4])}  # the quarters
_UNITS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_SCALES = {"hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SHORT_SCALES = {"k": 1e3, "m": 1e6, "mn": 1e6, "mln": 1e6, "bn": 1e9, "b": 1e9, "tn": 1e12, "t": 1e12}
_CURRENCY_SYMBOLS = {
    "$": "USD",
    "us$": "USD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "usd": "USD",
    "eur": "EUR",
    "gbp": "GBP",
    "jpy": "JPY",
    "inr": "INR",
    "c$": "CAD",
    "a$": "AUD",
}
_CURRENCY_WORDS = {
    "dollar": "USD",
    "dollars": "USD",
    "euro": "EUR",
    "euros": "EUR",
    "pound": "GBP",
    "pounds": "GBP",
    "yen": "JPY",
    "rupees": "INR",
    "rupee": "INR",
    "cents": "USD",
    "cent": "USD",
    "usd": "USD",
    "eur": "EUR",
    "gbp": "GBP",
    "pence": "GBP",
}
# Capitalised words that are not names on their own.
_NOT_NAMES = {
    "i",
    "i'm",
    "i've",
    "i'll",
    "i'd",
    "a",
    "an",
    "the",
    "this",
    "that",
    "these",
    "those",
    "it",
    "its",
    "he",
    "she",
    "we",
    "they",
    "you",
    "my",
    "our",
    "your",
    "his",
    "her",
    "their",
    "in",
    "on",
    "at",
    "of",
    "for",
    "to",
    "from",
    "by",
    "with",
    "and",
    "but",
    "or",
    "so",
    "if",
    "as",
    "however",
    "also",
    "then",
    "there",
    "here",
    "when",
    "where",
    "what",
    "who",
    "why",
    "how",
    "which",
    "while",
    "after",
    "before",
    "during",
    "yes",
    "no",
    "not",
    "ok",
    "okay",
    "oh",
    "um",
    "uh",
    "hi",
    "hello",
    "thanks",
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sir",
    "madam",
    "all",
    "some",
    "many",
    "one",
    "each",
    "both",
    "other",
    "another",
    "such",
    "today",
    "tomorrow",
    "yesterday",
    "q",
    "is",
    "was",
    "are",
    "were",
    "be",
    "do",
    "does",
    "did",
    "has",
    "have",
    "had",
    "let",
    "please",
    "well",
    "yeah",
    "right",
    "sure",
    "just",
    "now",
    "still",
    "every",
    "any",
    "only",
    "even",
    "first",
    "second",
    "third",
    "last",
    "next",
    "new",
    "since",
    "because",
    "although",
    "though",
    "would",
    "could",
    "should",
    "must",
    "might",
    "shall",
    "again",
    "according",
    "overall",
    # imperatives that open instructions ("Use Menu > Settings", "Press Reset")
    "use",
    "open",
    "press",
    "click",
    "tap",
    "select",
    "choose",
    "enter",
    "type",
    "go",
    "set",
    "run",
    "add",
    "remove",
    "hold",
    "turn",
    "check",
    "make",
    "take",
    "read",
    "visit",
    "call",
    "contact",
    "install",
    "see",
    "note",
    "try",
    "keep",
    "find",
    "ask",
    "start",
    "stop",
    "follow",
    "log",
    "sign",
}
_TITLES = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sir",
    "president",
    "ceo",
    "senator",
    "governor",
    "king",
    "queen",
    "prince",
    "princess",
    "minister",
    "judge",
    "general",
    "captain",
    "st",
    "saint",
    "lord",
    "lady",
    "professor",
    "doctor",
    "mayor",
    "chancellor",
    "pope",
    "rev",
}

# --------------------------------------------------------------------------- patterns

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_SCALE_WORDS = r"(?:hundred|thousand|million|billion|trillion)"
_SHORT_SCALE = r"(?:k|m|mn|mln|bn|b|tn|t)"
_MONTH_NAMES = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December|"
    r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
)
_WORD_NUM = (
    r"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:\s?[- ]\s?(?:one|two|three|four|five|six|"
    r"seven|eight|nine))?|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen)"
)
_WORD_NUMBER = rf"(?=[zotfsenZOTFSEN])(?:{_WORD_NUM}(?:\s+(?:hundred|thousand|million|billion|trillion)(?:\s+(?:and\s+)?{_WORD_NUM})?)*)"

_RE_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_RE_SLASH = re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b")
_RE_MDY = re.compile(rf"\b({_MONTH_NAMES})\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?\b")
_RE_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_NAMES})(?:,?\s+(\d{{4}}))?\b")
_RE_MY = re.compile(rf"\b({_MONTH_NAMES})(?:\s+of)?,?\s+(\d{{4}})\b")
_RE_MONTH = re.compile(r"\b(January|February|March|April|June|July|August|September|October|November|December)\b")
_RE_WEEKDAY = re.compile(r"\b(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)s?\b")
_RE_QUARTER = re.compile(
    r"\b(?:Q([1-4])|(first|second|third|fourth)[- ]quarter)(?:\s+(?:of\s+)?(?:fiscal\s+)?(?:FY\s?)?'?(\d{4}|\d{2}))?\b",
    re.I,
)
_RE_TIME = re.compile(r"\b(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?\s?m\b\.?|\b(\d{1,2}):(\d{2})\b", re.I)
_RE_YEAR = re.compile(r"(?<![\d$€£¥.,])\b((?:1[5-9]|20)\d{2})(s)?\b(?![.,]\d|\s*(?:%|percent|per\s+cent))")
_RE_MONEY_PREFIX = re.compile(
    rf"(?<![\w$])(US\$|C\$|A\$|\$|€|£|¥|₹|USD|EUR|GBP|JPY|INR)\s?({_NUM})(?:\s*({_SCALE_WORDS})\b|({_SHORT_SCALE})\b)?",
    re.I,
)


def _money_suffix(num: str) -> re.Pattern:
    return re.compile(
        rf"\b({num})(?:\s*({_SCALE_WORDS})\b|({_SHORT_SCALE})\b)?\s*(?:US\s+)?"
        r"(dollars?|euros?|pounds?|yen|rupees?|cents?|pence|USD|EUR|GBP)\b",
        re.I,
    )


def _percent(num: str) -> re.Pattern:
    return re.compile(rf"(?<![\w.])({num})\s*(%|percent\b|per\s+cent\b|pct\b|percentage\s+points?\b)", re.I)


# Digit forms and spelled-out forms are separate patterns: the spelled-out ones only run on
# texts that contain a number word (they are slow to try at every position).
_RE_MONEY_SUFFIX = _money_suffix(_NUM)
_RE_MONEY_SUFFIX_W = _money_suffix(_WORD_NUMBER)
_RE_PERCENT = _percent(_NUM)
_RE_PERCENT_W = _percent(_WORD_NUMBER)
_RE_PERCENT_RANGE = re.compile(rf"(?<![\w.])({_NUM})\s*(?:-|–|to)\s*({_NUM})\s*(?:%|percent\b|per\s+cent\b)", re.I)
_RE_NUMBER = re.compile(rf"(?<![\w.,])({_NUM})(?:(?:st|nd|rd|th)\b)?(?:\s+({_SCALE_WORDS})\b)?(?![\w]|[.,]\d)", re.I)
_RE_NUMBER_W = re.compile(rf"\b({_WORD_NUMBER})\b(?:\s+({_SCALE_WORDS})\b)?", re.I)
_RE_WORDS = re.compile(r"[a-z]+")
_NUMBER_WORDS = frozenset(_UNITS) | frozenset(_TENS)
_MONTH_WORDS = frozenset(_MONTHS)
_CURRENCY_CODES = frozenset({"usd", "eur", "gbp", "jpy", "inr"})
_PERCENT_WORDS = frozenset({"percent", "per", "pct", "percentage"})
_TIME_WORDS = frozenset({"am", "pm", "m"})
_DIGIT = re.compile(r"\d")
_RE_QUOTE = re.compile(r"\"([^\"\n]{2,200})\"|“([^”\n]{2,200})”|(?<![\w])'([^'\n]{2,80})'(?![\w])|‘([^’\n]{2,80})’")


# A hedge right before an amount makes it a rounded figure ("about 69,000" for 69,250; "over
# 1,000" for 1,250): the word before it, and the direction the stated value may lie in.
_RE_HEDGE = re.compile(
    r"(?:\b(?P<about>about|around|approximately|approx\.|roughly|some|an\s+estimated|estimated|close\s+to|like)|"
    r"\b(?P<over>over|more\s+than|upwards\s+of|at\s+least|just\s+over|in\s+excess\s+of)|"
    r"\b(?P<under>under|less\s+than|fewer\s+than|nearly|almost|up\s+to|just\s+under|at\s+most)|(?P<tilde>~))\s*$",
    re.I,
)
#: The hedges :func:`extract_specifics` notes on an amount: "about", "over" or "under".
HEDGES = ("about", "over", "under")


def _hedge(text: str, start: int) -> str:
    """The hedge ("about", "over", "under") just before offset ``start`` of ``text``, or ""."""
    m = _RE_HEDGE.search(text, max(0, start - 24), start)
    if not m:
        return ""
    return "about" if m.group("tilde") else next(k for k in HEDGES if m.group(k))


def _parse_number(text: str) -> tuple[float, int | None] | None:
    """(value, significant digits) of a digit or spelled-out number ("1,000", "twenty-five")."""
    t = text.strip().lower().replace(",", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", t):
        digits = t.replace(".", "").lstrip("0")
        return float(t), max(1, len(digits.rstrip("0")) if "." not in t else len(digits))
    words = re.split(r"[\s-]+", t)
    total, current, seen = 0.0, 0.0, False
    for w in words:
        if w == "and":
            continue
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = (current or 1) * 100
        elif w in _SCALES:
            total += (current or 1) * _SCALES[w]
            current = 0.0
        else:
            return None
        seen = True
    if not seen:
        return None
    return total + current, None


def _scale(word: str | None, short: str | None = None) -> float:
    if word:
        return _SCALES[word.lower()]
    if short:
        return _SHORT_SCALES[short.lower()]
    return 1.0


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < e and s < end for s, e in spans)


def _month(name: str) -> int:
    return _MONTHS[name.lower().rstrip(".")]


def sentence_starts(text: str) -> set[int]:
    """Offsets where a sentence, line or clause starts (a capital there says nothing about names):
    after a sentence end, a line break, a colon, a bullet, an opening quote or bracket, a dash
    between spaces ("Rural Broadband Act of 2019 - Directs the Secretary ...") or a short bracketed
    marker that starts a sentence ("(Sec. 3) Requires ...")."""
    starts = {0}
    for m in re.finditer(r"(?:[.!?]\s+|\n\s*|:\s+|^\s*[-*•]\s+|\s(?:--?|[–—])\s+|[\"“(]\s*)", text):
        # the longest title ("messrs.") ends the 12 characters looked at: linear in the text
        if text[m.start()] == "." and _RE_TITLE_BEFORE.search(text, max(0, m.start() - 12), m.start() + 1):
            continue  # "Mr. Smith", "J. K. Rowling": a title or an initial, not a sentence end
        starts.add(m.end())
    # A short bracketed marker where a sentence starts ("(Sec. 3) Requires ...", "(a) The ...").
    for m in re.finditer(r"\([^()\n]{1,20}\)\s+", text):
        if m.start() in starts:
            starts.add(m.end())
    return starts


_RE_TITLE_BEFORE = re.compile(
    r"(?:(?<![\w.])(?:mr|mrs|ms|dr|prof|sr|jr|st|gen|gov|sen|rep|lt|col|capt|sgt|rev|hon|mme|messrs)"
    r"|(?<![\w.])[A-Z])\.$",
    re.I,
)


def _norm_name(text: str) -> str:
    t = re.sub(r"['’]s$", "", text.strip())
    t = t.strip(".,;:!?\"'’“”()")
    return re.sub(r"\s+", " ", t).lower()


def _norm_quote(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", text.lower())).strip()


_RE_CAP_TOKEN = re.compile(r"(?<![\w'’.&-])[A-Z][\w'’.&-]*")
_RE_CONNECTOR_GAP = re.compile(r" (?:(?:of|de|van|von|da|del|der|la|le|du|di|bin|al|for)(?: the)?|&) ")


def _extract_names(text: str, quotes: list[tuple[int, int, str]]) -> list[Specific]:
    starts = sentence_starts(text)
    caps = [(m.group(0), m.start(), m.end()) for m in _RE_CAP_TOKEN.finditer(text)]
    mid_caps = {tok.lower().rstrip(".") for tok, s, _ in caps if s not in starts}
    out: list[Specific] = []
    i = 0
    n = len(caps)
    while i < n:
        tok, s, e = caps[i]
        low = tok.lower().rstrip(".")
        if low in _MONTHS or low.rstrip("s") in _WEEKDAYS:
            i += 1
            continue
        # Collect a run of capitalised words (one space apart, or joined by "of", "de", ...).
        run = [i]
        j = i + 1
        while j < n:
            prev, t2 = caps[j - 1][0], caps[j][0]
            if prev.endswith(".") and len(prev) > 2 and "." not in prev[:-1] and prev[:-1].lower() not in _TITLES:
                break  # "TikTok. East Palestine": a sentence ended
            if t2.lower().rstrip(".") in _MONTHS:
                break
            gap = text[caps[j - 1][2] : caps[j][1]]
            if gap == " " or (_RE_CONNECTOR_GAP.fullmatch(gap) and t2.lower() not in _NOT_NAMES):
                run.append(j)
                j += 1
                continue
            break
        # A sentence-initial common word joined by a connector: "Employees of the European Commission".
        if len(run) > 1 and s in starts and low not in mid_caps and text[caps[run[0]][2] : caps[run[1]][1]] != " ":
            run = run[1:]
        # Drop leading / trailing words that are not part of names ("The", "However").
        while run and caps[run[0]][0].lower().rstrip(".") in _NOT_NAMES:
            run = run[1:]
        while run and caps[run[-1]][0].lower().rstrip(".") in _NOT_NAMES:
            run = run[:-1]
        if run:
            first = caps[run[0]]
            single = len(run) == 1
            name_text = text[first[1] : caps[run[-1]][2]]
            if name_text.endswith(".") and not re.search(r"(?:^|[\s.])[A-Z]\.$", name_text):
                name_text = name_text[:-1]
            name_text = re.sub(r"['’]s$", "", name_text)
            ok = bool(name_text)
            if single:
                lw = name_text.lower()
                ok = ok and (len(name_text) > 1 or name_text.isupper())
                if first[1] in starts and lw not in mid_caps:
                    ok = False  # sentence-initial capital: no evidence it is a name
                if (
                    lw in _NOT_NAMES
                    or lw in _TITLES
                    or re.fullmatch(r"Q[1-4]|FY\d*(?:[-–]FY\d*)?|([A-Z])\1+", name_text)
                ):
                    ok = False
            if re.search(r"-[a-z]", name_text):
                ok = False  # "P-make-like", "Covid-related": a compound word, not a name
            if ok:
                start = first[1]
                end = start + len(name_text)
                if not any(
                    qs <= start and end <= qe and _norm_quote(q) == _norm_quote(name_text) for qs, qe, q in quotes
                ):
                    out.append(Specific("name", name_text, _norm_name(name_text), start=start, end=end))
        i = max(j, i + 1)
    return out


_RE_DIGIT_RUN = re.compile(r"\d+")


def _at_digit_runs(regex: re.Pattern, text: str) -> Iterable[re.Match]:
    """``regex.finditer(text)`` for a pattern whose matches start where a run of digits starts (its
    first token is a digit and it refuses a digit before it): tried at those places only, which
    is several times faster than letting the regex engine try every position."""
    end = 0
    for run in _RE_DIGIT_RUN.finditer(text):
        if run.start() < end:
            continue
        m = regex.match(text, run.start())
        if m:
            end = m.end()
            yield m


@lru_cache(maxsize=4096)
def _numeric_cached(text: str) -> tuple[Specific, ...]:
    """Dates, times, money, percentages and numbers of ``text`` (no overlaps), in order."""
    found: list[Specific] = []
    taken: list[tuple[int, int]] = []

    def add(
        kind: str,
        m_start: int,
        m_end: int,
        value: Any,
        unit: str = "",
        precision: int | None = None,
        hedge: str | None = None,
    ) -> None:
        if _overlaps(taken, m_start, m_end):
            return
        taken.append((m_start, m_end))
        if hedge is None:
            hedge = _hedge(text, m_start) if kind != "date" else ""
        found.append(Specific(kind, text[m_start:m_end].strip(), value, unit, m_start, m_end, precision, hedge))

    has_digit = _DIGIT.search(text) is not None
    words = set(_RE_WORDS.findall(text.lower()))
    has_month = not words.isdisjoint(_MONTH_WORDS)
    has_number_word = not words.isdisjoint(_NUMBER_WORDS)
    # What each pattern cannot match without (a cheap test that skips most of them on most texts).
    has_currency = any(c in text for c in "$€£¥₹") or not words.isdisjoint(_CURRENCY_CODES)
    has_currency_word = not words.isdisjoint(_CURRENCY_WORDS)
    has_percent = "%" in text or not words.isdisjoint(_PERCENT_WORDS)
    has_time = ":" in text or not words.isdisjoint(_TIME_WORDS)

    def scan(regex: re.Pattern, gate: bool = True) -> Iterable[re.Match]:
        return regex.finditer(text) if gate else ()

    # Dates first (most specific), then money, percentages, numbers.
    for m in scan(_RE_ISO, has_digit and "-" in text):
        y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if 1 <= mo <= 12 and 1 <= d <= 31:
            add("date", m.start(), m.end(), DateValue(y, mo, d))
    for m in scan(_RE_SLASH, has_digit and "/" in text):
        a, b, y = int(m.group(1)), int(m.group(2)), int(m.group(3))
        mo, d = (a, b) if a <= 12 else (b, a)
        if 1 <= mo <= 12 and 1 <= d <= 31:
            add("date", m.start(), m.end(), DateValue(y, mo, d))
    for m in scan(_RE_MDY, has_digit and has_month):
        d = int(m.group(2))
        if 1 <= d <= 31 and not (m.group(1).lower() == "may" and not m.group(3)):
            add("date", m.start(), m.end(), DateValue(int(m.group(3)) if m.group(3) else None, _month(m.group(1)), d))
    for m in scan(_RE_DMY, has_digit and has_month):
        d = int(m.group(1))
        if 1 <= d <= 31:
            add("date", m.start(), m.end(), DateValue(int(m.group(3)) if m.group(3) else None, _month(m.group(2)), d))
    for m in scan(_RE_MY, has_digit and has_month):
        add("date", m.start(), m.end(), DateValue(int(m.group(2)), _month(m.group(1))))
    for m in scan(_RE_QUARTER, "quarter" in words or (has_digit and "q" in words)):
        q = int(m.group(1)) if m.group(1) else _ORDINAL_WORDS[m.group(2).lower()]
        y = m.group(3)
        year = None if not y else (int(y) if len(y) == 4 else 2000 + int(y))
        add("date", m.start(), m.end(), DateValue(year, quarter=q))
    for m in scan(_RE_MONTH, has_month):
        add("date", m.start(), m.end(), DateValue(month=_month(m.group(1))))
    for m in scan(_RE_WEEKDAY, not words.isdisjoint(_WEEKDAYS)):
        add("date", m.start(), m.end(), DateValue(weekday=_WEEKDAYS[m.group(1).lower()]))
    for m in scan(_RE_TIME, has_digit and has_time):
        if m.group(4):
            h, mi = int(m.group(4)), int(m.group(5))
        else:
            h, mi = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "p" else 0), int(m.group(2) or 0)
        if h < 24 and mi < 60:
            add("date", m.start(), m.end(), DateValue(time=h * 60 + mi))
    for m in scan(_RE_MONEY_PREFIX, has_digit and has_currency):
        parsed = _parse_number(m.group(2))
        if parsed:
            unit = _CURRENCY_SYMBOLS.get(m.group(1).lower(), "")
            add("money", m.start(), m.end(), parsed[0] * _scale(m.group(3), m.group(4)), unit, parsed[1])
    for m in (
        *scan(_RE_MONEY_SUFFIX, has_digit and has_currency_word),
        *scan(_RE_MONEY_SUFFIX_W, has_number_word and has_currency_word),
    ):
        parsed = _parse_number(m.group(1))
        if parsed:
            cur = m.group(4).lower()
            factor = 0.01 if cur in ("cents", "cent", "pence") else 1.0
            add(
                "money",
                m.start(),
                m.end(),
                parsed[0] * _scale(m.group(2), m.group(3)) * factor,
                _CURRENCY_WORDS.get(cur, cur.upper()),
                parsed[1],
            )
    for m in scan(_RE_PERCENT_RANGE, has_digit and has_percent):  # "4-7%", "3 to 5 percent": two percentages
        for g in (1, 2):
            parsed = _parse_number(m.group(g))
            if parsed and not _overlaps(taken, m.start(g), m.end(g)):
                taken.append((m.start(g), m.end(g)))
                found.append(Specific("percent", m.group(g), parsed[0], "", m.start(g), m.end(g), parsed[1]))
        taken.append((m.start(), m.end()))
    for m in (*scan(_RE_PERCENT, has_digit and has_percent), *scan(_RE_PERCENT_W, has_number_word and has_percent)):
        parsed = _parse_number(m.group(1))
        if parsed:
            add("percent", m.start(), m.end(), parsed[0], "", parsed[1])
    for m in _at_digit_runs(_RE_YEAR, text) if has_digit else ():
        add("date", m.start(), m.end(), DateValue(int(m.group(1))))
    for is_word, m in [
        *((False, m) for m in (_at_digit_runs(_RE_NUMBER, text) if has_digit else ())),
        *((True, m) for m in scan(_RE_NUMBER_W, has_number_word)),
    ]:
        raw, scale = m.group(1), m.group(2)
        if is_word and raw.lower() in ("one", "zero") and not scale:
            continue  # "one of them" is rarely a count worth checking
        parsed = _parse_number(raw)
        if parsed:
            hedge = _hedge(text, m.start())
            add(
                "number",
                m.start(),
                m.end(),
                parsed[0] * _scale(scale),
                "",
                parsed[1] if scale or hedge else None,
                hedge,
            )
    found.sort(key=lambda s: s.start)
    return tuple(found)


@lru_cache(maxsize=4096)
def _extract_cached(text: str) -> tuple[Specific, ...]:
    found = list(_numeric_cached(text))
    taken = [(s.start, s.end) for s in found]
    quotes: list[tuple[int, int, str]] = []
    for m in _RE_QUOTE.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        if not inner.strip() or not re.search(r"[A-Za-z]", inner):
            continue
        quotes.append((m.start(), m.end(), inner))
        found.append(Specific("quote", m.group(0), _norm_quote(inner), start=m.start(), end=m.end()))
    for spec in _extract_names(text, quotes):
        if not _overlaps(taken, spec.start, spec.end):
            found.append(spec)
    found.sort(key=lambda s: (s.start, KINDS.index(s.kind)))
    return tuple(found)


def extract_specifics(text: str) -> list[Specific]:
    """All specifics of ``text`` in order of appearance.

    Numbers inside a date, an amount of money or a percentage are reported once, as that date,
    amount or percentage. A 4-digit number from 1500 to 2099 on its own is a year (a ``date``).
    Capitalised words are names when they are not at the start of a sentence (or also appear
    capitalised mid-sentence), or when several follow each other ("East Palestine").

    >>> [(s.kind, s.value) for s in extract_specifics("In 2019 revenue was 1,000 units, or 12.5%.")][1:]
    [('number', 1000.0), ('percent', 12.5)]
    >>> extract_specifics("In 2019 revenue fell.")[0].value
    DateValue(year=2019, month=None, day=None, weekday=None, quarter=None, time=None)
    >>> [s.value for s in extract_specifics("He paid 13 cents, then twenty-five dollars.")]
    [0.13, 25.0]
    >>> [s.text for s in extract_specifics("Maggie told Will that the European Commission met.") if s.kind == "name"]
    ['Will', 'European Commission']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    return list(_extract_cached(text))
