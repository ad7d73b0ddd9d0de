"""Internal: Text analysis for the offline judge: words, stems, negations, and claims and chunks
analysed once.

A claim is analysed into a :class:`Text` (its words, content stems, negated stems and
specifics), a chunk into a :class:`Chunk` (its sentences with an inverted index stem ->
sentences). Both are cached by text, since the same claims and chunks come back across tasks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ragmeter.judges.offline.lexicon import (
    FUNCTION_WORDS,
    NEGATIONS,
    NOT_NEGATING,
    OVERLAP_STOP,
    STOP,
    STOP_STEMS,
    stem,
)
from ragmeter.specifics import Specific, extract_specifics
from ragmeter.text import split_sentences

_RE_TOKEN = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")
_RE_NT = re.compile(r"n['’]t\b")
RE_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d)")
# Text split by a tokeniser: "3, 000", "31. 8", "December 6 , 1975", "Falcone 's", "did n't".
_RE_SPACED_THOUSANDS = re.compile(r"(?<![\d.,])(\d{1,3}), (\d{3})\b")
_RE_DIGIT_COMMA_SPACE = re.compile(r"\d, \d{3}")
_RE_SPACED_DECIMAL = re.compile(r"(?<![\d.,])(\d{1,3})\. (\d+)(?=\s*(?:%|percent\b|per\b|[a-z]|$))")
_RE_SPACE_BEFORE = re.compile(r" +(?=[,.;:!?%)]|'s\b|'re\b|n't\b|'ll\b|'ve\b|'d\b|'m\b)")
_RE_SPACE_AFTER = re.compile(r"(?<=[($]) +")
# Where either of the two above can apply (one scan instead of two on most texts).
_RE_SPACED = re.compile(r" (?:[,.;:!?%)]|'s\b|'re\b|n't\b|'ll\b|'ve\b|'d\b|'m\b)|[($] ")
_RE_TOKENISED = re.compile(r" [,.](?: |$)| 's\b")
_RE_SPACED_HYPHEN = re.compile(r"(?<=[A-Za-z0-9]) - (?=[A-Za-z0-9])")
# Month and weekday names written in lower case ("december 6, 1975"); "may" and "march" only
# before a day or a year.
_RE_LOWER_CALENDAR = re.compile(
    r"\b(january|february|april|june|july|august|september|october|november|december|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday|(?:may|march)(?= \d))\b"
)
_CALENDAR_WORDS = (
    "january",
    "february",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "may",
    "march",
)
# "FY2022" / "FY 2022": the fiscal year, as bills and reports spell it out.
_RE_FISCAL_YEAR = re.compile(r"\bFY ?(\d{4})\b")
# Words a negation reaches: the first content word among the next four.
_NEG_SCOPE = 4
EMPTY: frozenset = frozenset()


@lru_cache(maxsize=32768)
def normalise(text: str) -> str:
    """``text`` with what a tokeniser split put back together ("3, 000" -> "3,000", "31. 8" ->
    "31.8", "December 6 , 1975" -> "December 6, 1975", "Falcone 's" -> "Falcone's") and month and
    weekday names capitalised ("december" -> "December"), so figures, dates and names read the
    same in tokenised or lower-cased text as in plain text; "FY2022" reads "fiscal year 2022".

    >>> normalise("about 3, 000 people on december 6 , 1975 ( 31. 8 % )")
    'about 3,000 people on December 6, 1975 (31.8%)'
    >>> normalise("funds for FY2022-FY2026")
    'funds for fiscal year 2022-fiscal year 2026'
    """
    t = text.replace("’", "'")
    if "FY" in t:
        t = _RE_FISCAL_YEAR.sub(r"fiscal year \1", t)
    tokenised = _RE_TOKENISED.search(t) is not None
    if " " in t:
        if _RE_SPACED.search(t):
            t = _RE_SPACE_BEFORE.sub("", t)
            t = _RE_SPACE_AFTER.sub("", t)
        if tokenised and " - " in t:
            t = _RE_SPACED_HYPHEN.sub("-", t)
        if ", " in t and _RE_DIGIT_COMMA_SPACE.search(t):
            t = _RE_SPACED_THOUSANDS.sub(r"\1,\2", t)
        if tokenised and ". " in t:
            t = _RE_SPACED_DECIMAL.sub(r"\1.\2", t)
    if any(w in t for w in _CALENDAR_WORDS):
        t = _RE_LOWER_CALENDAR.sub(lambda m: m.group(1).capitalize(), t)
    return t


def split_words(text: str) -> list[str]:
    """Lower-cased word tokens of the :func:`normalised <normalise>` text; "don't" -> "do", "not";
    "won't" -> "will", "not"."""
    t = normalise(text).lower()
    if "n't" in t:
        t = t.replace("won't", "will not").replace("can't", "can not").replace("shan't", "shall not")
        t = _RE_NT.sub(" not", t)
    if "cannot" in t:
        t = t.replace("cannot", "can not")
    if "," in t:
        t = RE_DIGIT_COMMA.sub("", t)  # "1,000" -> "1000"
    return _RE_TOKEN.findall(t)


def content_words(text: str) -> list[str]:
    """Stemmed content words of ``text`` in order, without repeats (stop words and negations left out).

    >>> content_words("The dividend was increased to $0.13 per share.")
    ['dividend', 'increas', '0.13', 'shar']
    """
    seen: dict[str, None] = {}
    for w in split_words(text):
        if w in STOP or w in NEGATIONS:
            continue
        s = stem(w)
        if s in STOP_STEMS or (len(s) < 2 and not s.isdigit()):
            continue
        seen.setdefault(s, None)
    return list(seen)


_RE_OVERLAP = re.compile(r"[a-z0-9]+")


def overlap_tokens(text: str) -> list[str]:
    """The tokens word overlap counts: lower-case ``[a-z0-9]+`` runs of ``text``, stop words
    (:data:`~ragmeter.judges.offline.lexicon.OVERLAP_STOP`) left out, repeats kept, nothing stemmed.

    >>> overlap_tokens("The dividend was increased to $0.13 per share.")
    ['dividend', 'increased', '0', '13', 'per', 'share']
    """
    return [w for w in _RE_OVERLAP.findall(text.lower()) if w not in OVERLAP_STOP]


def word_overlap(candidate: str, evidence: Sequence[frozenset]) -> float:
    """Word overlap, the trivial baseline of ``../shared/data/JUDGE-DEV.md``: the share of the
    candidate's :func:`overlap_tokens` (repeats counted) found anywhere in the evidence (the token
    sets of its texts, :attr:`Chunk.tokens`); 1.0 for a candidate without such tokens.

    >>> word_overlap("Revenue rose 7% in 2021.", [frozenset({"revenue", "rose", "2021"})])
    0.75
    """
    words = overlap_tokens(candidate)
    if not words:
        return 1.0
    return sum(any(w in e for e in evidence) for w in words) / len(words)


def negates(words: Sequence[str], i: int) -> bool:
    """Whether ``words[i]`` is a negation ("not" in "not only" is not)."""
    w = words[i]
    if w not in NEGATIONS:
        return False
    after = NOT_NEGATING.get(w)
    return not (after and i + 1 < len(words) and words[i + 1] in after)


def has_negation(words: Sequence[str]) -> bool:
    """Whether any word of ``words`` is a negation (see :func:`negates`)."""
    return not NEGATIONS.isdisjoint(words) and any(negates(words, i) for i in range(len(words)))


def negated_stems(words: list[str]) -> frozenset:
    """Stems of the words a negation applies to: the first content word after each negator
    ("did not have the money" -> money; "is not expensive" -> expens; "never agreed" -> agre)."""
    out = set()
    for i, _w in enumerate(words):
        if not negates(words, i):
            continue
        for nxt in words[i + 1 : i + 1 + _NEG_SCOPE]:
            if nxt in NEGATIONS:
                continue
            if nxt in STOP:
                continue
            st = stem(nxt)
            if st not in STOP_STEMS:
                out.add(st)
                break
    return frozenset(out)


def all_stems(words: list[str]) -> frozenset:
    """Stems of every word, stop words included (for antonyms such as more / less, before / after)."""
    return frozenset(map(stem, set(words) - NEGATIONS))


def context_stems(words: Sequence[str], target: str, k: int, every: bool = False) -> set:
    """Stems within ``k`` tokens of each occurrence of stem ``target`` in ``words``, negations
    never: content stems other than ``target``, or (``every``) all of them, stop words and
    ``target`` included ("net profit ... net loss": "profit" is not next to "loss")."""
    out: set = set()
    for i, w in enumerate(words):
        if stem(w) != target:
            continue
        for x in words[max(0, i - k) : i + 1 + k]:
            if x in NEGATIONS:
                continue
            st = stem(x)
            if every or (x not in STOP and st != target and st not in STOP_STEMS):
                out.add(st)
    return out


# --------------------------------------------------------------------------- claims


@dataclass
class Text:
    """A claim or statement, analysed once."""

    text: str
    words: list[str]
    stems: list[str]
    negated: frozenset
    all_stems: frozenset
    specifics: list[Specific]
    #: Stems of every word but the few function words, repeats kept (graded support).
    support_stems: tuple = ()


_RE_MAYBE_SPECIFIC = re.compile(
    r"\d|[\"“‘]|[^.!?]\s+[A-Z]|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|percent|dollars?|euros?)\b"
)


@lru_cache(maxsize=32768)
def analyse(text: str) -> Text:
    """The analysis of one claim or statement (its specifics only looked for when it may have some:
    a digit, a quote, a capitalised word inside, a number word)."""
    words = split_words(text)
    norm = normalise(text)
    specs = list(extract_specifics(norm)) if _RE_MAYBE_SPECIFIC.search(norm) else []
    support = tuple(stem(w) for w in words if w not in FUNCTION_WORDS)
    return Text(text, words, content_words(text), negated_stems(words), all_stems(words), specs, support)


# --------------------------------------------------------------------------- chunks


@dataclass
class Chunk:
    """A chunk split into sentences, with an inverted index stem -> sentence indices."""

    text: str
    sentences: list[str]
    sent_negated: list[frozenset]
    index: dict[str, list[int]]
    stems: frozenset
    sent_stems: list[frozenset]
    sent_all: list[frozenset]

    @property
    def every_stem(self) -> frozenset:
        """Stems of all the chunk's words, stop words included (computed once)."""
        cached = self.__dict__.get("_every")
        if cached is None:
            cached = self.__dict__["_every"] = frozenset().union(*self.sent_all)
        return cached

    @property
    def tokens(self) -> frozenset:
        """The chunk's :func:`overlap_tokens` as a set (computed once): what word overlap looks up."""
        cached = self.__dict__.get("_tokens")
        if cached is None:
            cached = self.__dict__["_tokens"] = frozenset(overlap_tokens(self.text))
        return cached

    @property
    def normalised(self) -> str:
        """The chunk's text :func:`normalised <normalise>` (computed once), where specifics are looked up."""
        cached = self.__dict__.get("_normalised")
        if cached is None:
            cached = self.__dict__["_normalised"] = normalise(self.text)
        return cached

    def stems_between(self, lo: int, hi: int, every: bool = False) -> set:
        """Content stems (``every``: all word stems) of sentences lo..hi-1, clipped to the chunk."""
        out: set = set()
        source = self.sent_all if every else self.sent_stems
        for j in range(max(0, lo), min(len(self.sentences), hi)):
            out |= source[j]
        return out

    def negated_between(self, lo: int, hi: int) -> set:
        """Negated stems of sentences lo..hi-1."""
        out: set = set()
        for j in range(max(0, lo), min(len(self.sentences), hi)):
            out |= self.sent_negated[j]
        return out

    def window_text(self, span: tuple[int, int]) -> str:
        """The sentences ``span[0]..span[1]-1`` joined by spaces."""
        return " ".join(self.sentences[span[0] : span[1]])

    def quote(self, span: tuple[int, int], stems: Sequence[str]) -> str:
        """A verbatim quote for a passage: the one sentence of the span holding as many of
        ``stems`` as the whole span, else the span, cut from the chunk text as written."""
        lo, hi = span
        wanted = set(stems)
        counts = [len(wanted & self.sent_stems[j]) for j in range(lo, hi)]
        whole = len(wanted & self.stems_between(lo, hi))
        if counts and max(counts) == whole:
            j = lo + counts.index(max(counts))
            lo, hi = j, j + 1
        first, last = self.sentences[lo], self.sentences[hi - 1]
        start = self.text.find(first)
        end = self.text.find(last, max(start, 0)) if start >= 0 else -1
        if start >= 0 and end >= 0:
            return self.text[start : end + len(last)].strip()
        return self.window_text((lo, hi))


_STEMS: dict[str, str] = {}


def _stem(word: str) -> str:
    """:func:`~ragmeter.judges.offline.lexicon.stem` through a plain dict (cheaper than its LRU for
    the many words of chunks; the vocabulary of a process stays small)."""
    if len(_STEMS) > 200_000:
        _STEMS.clear()
    out = _STEMS[word] = stem(word)
    return out


@lru_cache(maxsize=65536)
def _sentence(text: str) -> tuple[frozenset, frozenset, frozenset]:
    """One sentence of a chunk analysed: its negated stems, the stems of all its words and its
    content stems (cached: overlapping chunks and boilerplate repeat sentences)."""
    words = split_words(text)
    negated = negated_stems(words) if not NEGATIONS.isdisjoint(words) else EMPTY
    stemmed = {w: _STEMS.get(w) or _stem(w) for w in set(words) - NEGATIONS}
    every = frozenset(stemmed.values())
    content = frozenset(st for w, st in stemmed.items() if w not in STOP and st not in STOP_STEMS)
    return negated, every, content


@lru_cache(maxsize=8192)
def analyse_chunk(text: str) -> Chunk:
    """The analysis of one chunk."""
    sentences = split_sentences(text) or [text.strip() or text]
    index: dict[str, list[int]] = {}
    negated = []
    sent_stems = []
    sent_all = []
    for i, s in enumerate(sentences):
        neg, every, stems = _sentence(s)
        negated.append(neg)
        sent_all.append(every)
        for st in stems:
            index.setdefault(st, []).append(i)
        sent_stems.append(stems)
    return Chunk(text, sentences, negated, index, frozenset(index), sent_stems, sent_all)


@lru_cache(maxsize=1024)
def merged_chunks(texts: tuple[str, ...]) -> Chunk:
    """All chunks as one (sentences in order), built from the per-chunk analyses."""
    parts = [analyse_chunk(t) for t in texts]
    sentences: list[str] = []
    index: dict[str, list[int]] = {}
    for ck in parts:
        offset = len(sentences)
        sentences.extend(ck.sentences)
        for st, rows in ck.index.items():
            index.setdefault(st, []).extend(r + offset for r in rows)
    return Chunk(
        "\n".join(texts),
        sentences,
        [n for ck in parts for n in ck.sent_negated],
        index,
        frozenset(index),
        [x for ck in parts for x in ck.sent_stems],
        [x for ck in parts for x in ck.sent_all],
    )
