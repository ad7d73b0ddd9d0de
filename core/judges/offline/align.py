"""Internal: Word-by-word alignment of a claim with a passage, and the differences it shows.

The claim's words are aligned with the passage's (``difflib`` on stems); each short difference
standing between matching words is judged: a negation added or dropped, an antonym, another
value of a closed class, a word of opposite sentiment, another name in the same place, two words
trading places around a third, or a restrictive word the passage does not have.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from functools import lru_cache

from ragmeter.judges.offline.lexicon import (
    ANTONYMS,
    NEGATION_STEMS,
    NEGATIONS,
    ORDINALS,
    RESTRICTIVE,
    STOP_STEMS,
    closed_clash,
    negative_base,
    stem,
    unprefixed,
    valence,
)
from ragmeter.judges.offline.text import RE_DIGIT_COMMA, Chunk, negates, normalise
from ragmeter.specifics_extraction import _SCALES, _SHORT_SCALE, _SHORT_SCALES, sentence_starts

_RE_TOKEN_CASED = re.compile(r"[A-Za-z0-9]+(?:[.,'][A-Za-z0-9]+)*")
_RE_NT_CASED = re.compile(r"n['’]t\b", re.I)
# Figures and periods written two ways ("$8.2m" / "$8.2 million", "Q3" / "third quarter") are
# aligned in one spelling.
_SCALE_NAMES = {short: name for short, v in _SHORT_SCALES.items() for name, w in _SCALES.items() if w == v}
_RE_SCALE = re.compile(rf"([$£€¥]\s?\d[\d.]*)\s?({_SHORT_SCALE})\b", re.I)
_RE_PERIOD = re.compile(r"\b([QH])([1-4])\b")


@lru_cache(maxsize=65536)
def align_tokens(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]:
    """Every word of ``text`` in order, lower-cased (stop words and negations included), its stem,
    and whether it is capitalised where no sentence or clause starts (a name, most likely), or
    written in capitals."""
    t = normalise(text)
    if "'" in t:
        t = re.sub(r"(?i)\bwon't\b", "will not", t)
        t = re.sub(r"(?i)\bcan't\b", "can not", t)
        t = _RE_NT_CASED.sub(" not", t)
    if "annot" in t:
        t = re.sub(r"(?i)\bcannot\b", "can not", t)
    if "," in t:
        t = RE_DIGIT_COMMA.sub("", t)
    t = _RE_SCALE.sub(lambda m: m.group(1) + " " + _SCALE_NAMES[m.group(2).lower()], t)
    t = _RE_PERIOD.sub(lambda m: ORDINALS[int(m.group(2)) - 1] + (" quarter" if m.group(1) == "Q" else " half"), t)
    found = [(m.group(0), m.start()) for m in _RE_TOKEN_CASED.finditer(t)]
    words = [w for w, _ in found]
    lower = tuple(w.lower() for w in words)
    stems = tuple("~" + w if w in NEGATIONS and not negates(lower, i) else stem(w) for i, w in enumerate(lower))
    starts = sentence_starts(t)
    caps = tuple(
        (at not in starts and w[:1].isupper()) or (len(w) > 1 and w.isupper() and w.isalpha()) for w, at in found
    )
    return lower, stems, caps


def is_content(word_stem: str) -> bool:
    """Whether a stem is a content word (no stop word, no negation, not a single letter)."""
    return (
        word_stem not in STOP_STEMS and word_stem not in NEGATION_STEMS and (len(word_stem) > 1 or word_stem.isdigit())
    )


def _negates_within(words: Sequence[str]) -> bool:
    """Whether the negation in ``words`` (stems) bears on a content word after it there: the
    words are then an omitted, negated detail ("non-invasive and" left out of "is non-invasive
    and painless"), not a negation the claim drops."""
    last = max(i for i, x in enumerate(words) if x in NEGATION_STEMS)
    return any(is_content(x) for x in words[last + 1 :])


def _double_within(words: Sequence[str]) -> bool:
    """Whether the negation in ``words`` (stems) falls on a negatively prefixed word next to it: an
    added "it is not untrue that" negates nothing the passage says."""
    return any(
        x in NEGATION_STEMS and i + 1 < len(words) and negative_base(words[i + 1]) is not None
        for i, x in enumerate(words)
    )


def _anchor(ops: list, c_st: Sequence[str], k: int, step: int) -> int:
    """How firmly the claim and the passage match next to difference ``ops[k]`` on one side
    (``step`` -1: before it, +1: after it): 2 when the matching words there (across small
    differences of up to two words) hold two content words, or one and another word; 1 for one
    content word or three stop words; 0 otherwise."""
    content = tokens = 0
    i = k + step
    while 0 <= i < len(ops) and content < 2:
        tag, i1, i2, j1, j2 = ops[i]
        if tag == "equal":
            tokens += j2 - j1
            content += sum(1 for x in c_st[j1:j2] if is_content(x))
        elif j2 - j1 > 2 or i2 - i1 > 2 or not tokens:
            break
        i += step
    if content >= 2 or (content and tokens >= 2):
        return 2
    return 1 if content or tokens >= 3 else 0


def aligned_difference(
    claim: str, chunk: Chunk, lo: int, hi: int, rules: Sequence[str], max_gap: int
) -> tuple[str | None, str]:
    """Align the claim's words with those of sentences ``lo..hi-1`` of the chunk and judge each
    difference of at most ``max_gap`` words that stands between matching words, by the named
    ``rules`` (see :class:`~ragmeter.judges.offline.OfflineSettings`): ('contradicted' |
    'not_found', reason), or (None, "") when none applies."""
    c_w, c_st, c_cap = align_tokens(claim)
    w_w: list[str] = []
    w_st: list[str] = []
    w_cap: list[bool] = []
    for j in range(max(0, lo), min(len(chunk.sentences), hi)):
        a, b, c = align_tokens(chunk.sentences[j])
        w_w.extend(a)
        w_st.extend(b)
        w_cap.extend(c)
    if not c_st or not w_st:
        return None, ""
    ops = SequenceMatcher(None, w_st, c_st, autojunk=False).get_opcodes()
    claim_neg = any(x in NEGATION_STEMS for x in c_st)
    if "swap" in rules:
        found = swapped(c_w, c_st, w_st)
        if found:
            return "contradicted", found
    for k, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            continue
        left = _anchor(ops, c_st, k, -1)
        right = _anchor(ops, c_st, k, 1)
        at_start, at_end = j1 == 0, j2 == len(c_st)
        C, W = c_st[j1:j2], w_st[i1:i2]
        if tag == "replace" and at_end and not at_start and left == 2 and right == 0:
            W, right = w_st[i1 : i1 + len(C)], 2  # the claim ends where the passage goes on
        elif tag == "replace" and at_start and not at_end and right == 2 and left == 0:
            W, left = w_st[max(i1, i2 - len(C)) : i2], 2
        edge = tag == "replace" and len(W) != i2 - i1
        if tag == "insert" and at_start != at_end and (right if at_start else left) == 2:
            left = right = 2  # "Only the manager ...": an addition opening or closing the claim
        if not (left and right) or len(C) > max_gap or len(W) > max_gap:
            continue
        c_words = " ".join(c_w[j1:j2])
        w_words = " ".join(w_w[i1 : i1 + len(W)]) if W else ""
        c_neg = any(x in NEGATION_STEMS for x in C)
        w_neg = any(x in NEGATION_STEMS for x in W)
        if tag == "insert":
            if "insert_negation" in rules and c_neg and not _double_within(C):
                return "contradicted", f"the claim adds a negation ({c_words!r}) the passage does not have"
            if "insert_restrictive" in rules and left == 2 and right == 2:
                # A restrictive word the passage has elsewhere is a repetition, not an addition
                # ("the first corn was first domesticated" for "corn was first domesticated").
                if any(x in RESTRICTIVE and x not in w_st for x in C):
                    return "not_found", f"the claim adds {c_words!r}, which the passage does not say"
            continue
        if tag == "delete":
            if "delete_negation" in rules and w_neg and not claim_neg and not _negates_within(W):
                return "contradicted", f"the passage says {w_words!r} where the claim has no negation"
            continue
        cs, ws = set(C), set(W)
        only_c, only_w = cs - ws, ws - cs
        if not only_c or not only_w:
            continue
        if "negation" in rules and c_neg != w_neg and not edge:
            # Only a negation in or out: the rest of one side within the other's words, and no
            # negation just around the difference on the other side ("found no proof" is "not
            # found any evidence").
            c_rest, w_rest = cs - NEGATION_STEMS, ws - NEGATION_STEMS
            around: Sequence[str]
            if c_neg:
                around = w_st[max(0, i1 - 3) : i2 + 3]
            else:
                around = c_st[max(0, j1 - 3) : j2 + 3]
            other_neg = any(x in NEGATION_STEMS for x in around)
            if not other_neg and (c_rest <= ws or w_rest <= cs):
                return "contradicted", f"the claim says {c_words!r} where the passage says {w_words!r} (negation)"
        for x in sorted(only_c):
            for y in sorted(only_w):
                if "antonym" in rules and (y in ANTONYMS.get(x, ()) or unprefixed(x) == y or unprefixed(y) == x):
                    if c_neg != w_neg:
                        continue  # a negated opposite ("not untrue" for "true"): the two negations cancel
                    return (
                        "contradicted",
                        f"the claim says {c_words!r} where the passage says the opposite ({w_words!r})",
                    )
                if "closed" in rules and closed_clash(x, y):
                    return "contradicted", f"the claim says {c_words!r} where the passage says {w_words!r}"
        if "polarity" in rules and not edge:
            # One word for one word, of opposite sentiment ("poor" for "good", "triumphant" for
            # "troubled"): the claim turns the passage's description around.
            cc = [x for x in only_c if is_content(x)]
            wc = [x for x in only_w if is_content(x)]
            if len(cc) == 1 and len(wc) == 1:
                vc, vw = valence().get(cc[0]), valence().get(wc[0])
                if vc is not None and vw is not None and vc * vw < 0:
                    return (
                        "contradicted",
                        f"the claim says {c_words!r} where the passage says {w_words!r} (opposite sentiment)",
                    )
        if "name" in rules and not edge:
            # Another name in the same place: both differences made of capitalised words only.
            cn = [c_cap[j] for j in range(j1, j2) if is_content(c_st[j])]
            wn = [w_cap[i] for i in range(i1, i2) if is_content(w_st[i])]
            if cn and wn and all(cn) and all(wn):
                return "contradicted", f"the claim names {c_words!r} where the passage names {w_words!r}"
    return None, ""


def _neighbours(stems: Sequence[str], p: int, k: int = 3) -> tuple[str | None, str | None]:
    """The nearest content stems before and after position ``p`` (at most ``k`` words away)."""
    before = next((stems[i] for i in range(p - 1, max(-1, p - 1 - k), -1) if is_content(stems[i])), None)
    after = next((stems[i] for i in range(p + 1, min(len(stems), p + 1 + k)) if is_content(stems[i])), None)
    return before, after


def _numeric(stem: str) -> bool:
    return any(ch.isdigit() for ch in stem)


def swapped(c_w: Sequence[str], c_st: Sequence[str], w_st: Sequence[str]) -> str:
    """A reason when the claim has two content words on either side of a word in the reverse
    order of the passage ("Bob asked Ann" for "Ann asked Bob"; "Ann and Bob" for "Bob and Ann"
    is the same statement: "and" is no content word); "" otherwise. A number has no role to swap
    ("recording at Sun in 1954" for "in 1954, recording at Sun"), and a word the claim repeats
    has no single place to compare."""
    where: dict[str, list[int]] = {}
    for q, x in enumerate(w_st):
        if is_content(x):
            where.setdefault(x, []).append(q)
    for p, v in enumerate(c_st):
        if v not in where or not is_content(v):
            continue
        before, after = _neighbours(c_st, p)
        if (
            before is None
            or after is None
            or before == after
            or c_st.count(v) > 1
            or _numeric(before)
            or _numeric(after)
        ):
            continue
        for q in where[v]:
            if _neighbours(w_st, q) == (after, before):
                i, j = c_st.index(before), c_st.index(after)
                return f"the claim swaps {c_w[i]!r} and {c_w[j]!r} (the passage has them the other way round)"
    return ""
