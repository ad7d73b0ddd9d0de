"""Internal: The offline judge's word lists and the stemmer that normalises them.

The lists are data files in ``data/`` (one entry a line, ``#`` comments), read once at import;
the sentiment lexicon ``valence.txt`` only when the polarity check first needs it. The tables
here are keyed by stem (:func:`stem`), like the words of claims and chunks they are looked up with.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files

_DATA = files("ragmeter.judges.offline").joinpath("data")


def read_rows(name: str) -> list[list[str]]:
    """The entries of data file ``name``, each split into its whitespace-separated fields
    (comment lines starting with ``#`` and blank lines left out)."""
    rows = []
    for line in _DATA.joinpath(name).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            rows.append(line.split())
    return rows


def read_words(name: str) -> list[str]:
    """The words of a data file holding one word a line."""
    return [row[0] for row in read_rows(name)]


# --------------------------------------------------------------------------- words as written

STOP = frozenset(read_words("stop_words.txt"))
NEGATIONS = frozenset(read_words("negations.txt"))
QUESTION_WORDS = frozenset(read_words("question_words.txt"))
#: The few words a claim's graded support leaves out (see ``function_words.txt``).
FUNCTION_WORDS = frozenset(read_words("function_words.txt"))
#: The stop words of word overlap, the trivial baseline's signal (``overlap_stop_words.txt``).
OVERLAP_STOP = frozenset(read_words("overlap_stop_words.txt"))


def _not_negating() -> dict[str, frozenset]:
    table: dict[str, set] = {}
    for negation, word in read_rows("not_negating.txt"):
        table.setdefault(negation, set()).add(word)
    return {k: frozenset(v) for k, v in table.items()}


#: A negator followed by one of these words does not negate: "not only", "not until", "no doubt".
NOT_NEGATING = _not_negating()
#: Irregular inflection -> base form (WordNet 3.0's exception lists): "rose" -> "rise".
IRREGULAR = {inflected: base for inflected, base in read_rows("irregular.txt")}
#: Demonym -> country ("belgian" -> "belgium") and country -> demonym, lower case.
COUNTRY_OF = {demonym: country for demonym, country in read_rows("demonyms.txt")}
DEMONYM_OF = {country: demonym for demonym, country in reversed(read_rows("demonyms.txt"))}

# --------------------------------------------------------------------------- stemming

_STEM_RULES = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("ization", "ize"),
    ("isation", "ize"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("nesses", ""),
    ("ness", ""),
    ("ments", "ment"),
)
_MENT = re.compile(r"^(\w{5,})ments?$")
_MENT_KEPT = ("comm", "docu", "experi", "argu", "instru", "segm", "elem", "mom", "pay", "equip", "ship")
_RE_CLITIC = re.compile(r"'(?:s|m|re|ve|ll|d)$")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix-stripping stemmer: increase / increased / increasing / increases -> increas."""
    w = IRREGULAR.get(word, word)
    if w in COUNTRY_OF:
        w = COUNTRY_OF[w]  # "belgian" and "belgium" are one word
    elif w[-1:] == "s" and w[:-1] in COUNTRY_OF:
        w = COUNTRY_OF[w[:-1]]  # "canadians"
    if "'" in w:
        w = _RE_CLITIC.sub("", w)  # "company's" -> "company", "i'm" -> "i"
        w = IRREGULAR.get(w, w)
    if len(w) <= 3 or not w.isalpha():
        return w
    for suf, rep in _STEM_RULES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)] + rep
            break
    m = _MENT.match(w)
    if m and not w.startswith(_MENT_KEPT):
        w = m.group(1)
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        w = w[:-1]
    if w.endswith("ing") and len(w) > 5 and re.search(r"[aeiouy]", w[:-3]):
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 4 and re.search(r"[aeiouy]", w[:-2]):
        w = w[:-2]
    elif w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz" and w[-1].isalpha() and w[-1] not in "aeiou":
        w = w[:-1]  # stopp -> stop
    if w.endswith("y") and len(w) > 3:
        w = w[:-1] + "i"
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


NEGATION_STEMS = frozenset(stem(w) for w in NEGATIONS) | NEGATIONS
STOP_STEMS = frozenset(stem(w) for w in STOP) | STOP
QUESTION_STEMS = frozenset(stem(w) for w in QUESTION_WORDS) | QUESTION_WORDS

# --------------------------------------------------------------------------- opposites


def _antonyms() -> dict[str, frozenset]:
    table: dict[str, set] = {}
    for words in read_rows("antonyms.txt") + read_rows("wordnet_antonyms.txt"):
        if len(words) != 2:
            continue
        a, b = stem(words[0]), stem(words[1])
        if a == b:
            continue
        table.setdefault(a, set()).add(b)
        table.setdefault(b, set()).add(a)
    return {k: frozenset(v) for k, v in table.items()}


#: Stem -> the stems of its antonyms (both directions): "increas" -> {"decreas", "reduc", ...}.
ANTONYMS = _antonyms()
# Negative prefixes: "inflexible" against "flexible", "disagree" against "agree".
_NEG_PREFIXES = ("non", "dis", "un", "in", "im", "ir", "il", "sub", "de")
_NOT_PREFIXED = frozenset(stem(w) for w in read_words("not_prefixed.txt"))


@lru_cache(maxsize=65536)
def unprefixed(word_stem: str) -> str | None:
    """The base of a negatively prefixed stem ("inflexibl" -> "flexibl"), or None."""
    if word_stem in _NOT_PREFIXED:
        return None
    for p in _NEG_PREFIXES:
        if word_stem.startswith(p) and len(word_stem) - len(p) >= 5:
            return word_stem[len(p) :].lstrip("-")
    return None


def negative_base(word_stem: str) -> str | None:
    """The word a negatively prefixed stem negates: :func:`unprefixed`, or a short antonym it is
    made of ("untru" -> "true"), or None.

    >>> negative_base(stem("untrue")), negative_base(stem("inflexible")), negative_base(stem("under"))
    ('true', 'flexibl', None)
    """
    base = unprefixed(word_stem)
    if base:
        return base
    for p in _NEG_PREFIXES:
        rest = word_stem[len(p) :] if word_stem.startswith(p) else ""
        for a in sorted(ANTONYMS.get(word_stem, ())) if rest else ():
            if a.startswith(rest) and len(a) - len(rest) <= 1:  # "untru" and "true"
                return a
    return None


# --------------------------------------------------------------------------- closed classes


def _closed_classes() -> tuple[dict[str, tuple[tuple[str, int], ...]], tuple[str, ...]]:
    """Stem -> the (class, value) pairs it belongs to ("second" is an ordinal and a time unit),
    and the ordinals in order."""
    table: dict[str, list[tuple[str, int]]] = {}
    values: dict[str, int] = {}
    ordinals = []
    for name, *words in read_rows("closed_classes.txt"):
        value = values[name] = values.get(name, -1) + 1
        if name == "ordinal":
            ordinals.append(words[0])
        for w in words:
            table.setdefault(stem(w), []).append((name, value))
    return {k: tuple(v) for k, v in table.items()}, tuple(ordinals)


CLASS_OF, ORDINALS = _closed_classes()
#: Words that restrict a statement: added to the passage's wording, they say more than it does.
RESTRICTIVE = frozenset(stem(w) for w in read_words("restrictive.txt"))


#: Quantities from weak to strong: the passage's quantity implies every weaker one ("many
#: creatures" states that some do), so a claim that says less is no clash.
QUANTITY_SCALE = tuple(dict(CLASS_OF[stem(w)])["quantity"] for w in ("some", "many", "most", "all"))


def closed_clash(a: str, b: str) -> str | None:
    """The class in which the claim's stem ``a`` and the passage's stem ``b`` hold different
    values, or None; a weaker quantity than the passage's is no clash ("some" for "many").

    >>> closed_clash("fourth", "first"), closed_clash(stem("some"), stem("many")), closed_clash(stem("all"), stem("many"))
    ('ordinal', None, 'quantity')
    """
    for ca, ga in CLASS_OF.get(a, ()):
        for cb, gb in CLASS_OF.get(b, ()):
            if ca == cb and ga != gb:
                if (
                    ca == "quantity"
                    and ga in QUANTITY_SCALE
                    and gb in QUANTITY_SCALE
                    and QUANTITY_SCALE.index(ga) < QUANTITY_SCALE.index(gb)
                ):
                    continue
                return ca
    return None


@lru_cache(maxsize=1)
def valence() -> dict[str, float]:
    """Stem -> mean valence of the sentiment words in ``valence.txt`` (VADER's, |valence| >= 1.5)."""
    acc: dict[str, list[float]] = {}
    for word, value in read_rows("valence.txt"):
        acc.setdefault(stem(word), []).append(float(value))
    return {k: sum(v) / len(v) for k, v in acc.items() if min(v) * max(v) > 0}
