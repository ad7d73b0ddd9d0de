"""Internal: The hard checks: specifics, antonyms, negation and alignment of a claim against its best passage.

Each check returns ``("contradicted" | "not_found", reason)`` when it finds the claim says
something the passage does not, or None. They override the word-overlap support: a claim whose
words are all in the chunk is still unsupported when one of them fails.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ragmeter.judges.offline.align import aligned_difference
from ragmeter.judges.offline.lexicon import ANTONYMS, COUNTRY_OF, DEMONYM_OF, negative_base, unprefixed
from ragmeter.judges.offline.settings import OfflineSettings
from ragmeter.judges.offline.text import (
    EMPTY,
    Chunk,
    Text,
    content_words,
    context_stems,
    has_negation,
    normalise,
    split_words,
)
from ragmeter.specifics import Specific, find_specific
from ragmeter.specifics_extraction import _numeric_cached

Finding = tuple[str, str]


@lru_cache(maxsize=65536)
def _stated(spec: Specific, hedge: str, precision: int | None, text: str) -> bool:
    return find_specific(spec, text)


def stated(spec: Specific, text: str) -> bool:
    """:func:`~ragmeter.specifics.find_specific`, remembered: the same specific is looked up in the
    same chunk by word coverage and by the checks of several passages."""
    return _stated(spec, spec.hedge, spec.precision, text)


#: The hard checks in the order they run; a failed one is named in a verdict's features.
CHECKS = ("specifics", "antonym", "negation", "alignment")


def hard_checks(
    claim: Text, chunk: Chunk, window: tuple[int, int], coverage: float, settings: OfflineSettings, near: bool = True
) -> tuple[str | None, str, str]:
    """('contradicted' | 'not_found' | None, reason, check) for a claim against its best passage
    (sentences ``window`` of the chunk, holding ``coverage`` of the claim's content words), from
    specifics, antonyms, negation and alignment in that order (:data:`CHECKS`; ``check`` names the
    one that failed, "" when none did; ``near=False``: figures may be anywhere in the chunk, for
    chunks checked together)."""
    found = check_specifics(claim, chunk, window, coverage, settings, near)
    if found:
        return found[0], found[1], "specifics"
    found = check_antonyms(claim, chunk, window, settings)
    if found:
        return found[0], found[1], "antonym"
    found = check_negation(claim, chunk, window, coverage, settings)
    if found:
        return found[0], found[1], "negation"
    found = check_alignment(claim, chunk, window, coverage, settings)
    if found:
        return found[0], found[1], "alignment"
    return None, "", ""


def check_specifics(
    claim: Text, chunk: Chunk, window: tuple[int, int], coverage: float, settings: OfflineSettings, near: bool = True
) -> Finding | None:
    """Every number, date, amount, percentage, name and quote of the claim must be stated in the
    chunk (figures near the passage); a different value of the same kind in the passage makes the
    claim contradicted."""
    st = settings
    if not st.specifics_check or not claim.specifics:
        return None
    text = chunk.normalised
    passage_specs = None
    for spec in claim.specifics:
        if spec.kind == "name" and not st.name_check:
            continue
        if stated(spec, text) or (spec.kind == "name" and _demonym_found(spec.text, text)):
            if not near or st.specifics_near is None or spec.kind not in st.specifics_near_kinds:
                continue
            k = st.specifics_near
            # A figure is stated near the passage when one of those sentences states it (each
            # looked up once, whatever passage it is near).
            if any(stated(spec, normalise(x)) for x in chunk.sentences[max(0, window[0] - k) : window[1] + k]):
                continue
            if st.specifics_context and _placed(claim, spec, chunk, st.specifics_context):
                continue
            return "not_found", f"{spec.kind} {spec.text!r} appears in the chunk but not near the passage"
        if passage_specs is None:
            # rivals are figures: a name or a quote has none
            passage_specs = _numeric_cached(normalise(chunk.window_text(window)))
        kinds = {"number", "money", "percent"} if spec.kind in ("number", "money", "percent") else {spec.kind}
        rivals = [s for s in passage_specs if s.kind in kinds]
        small_word = spec.kind == "number" and not any(c.isdigit() for c in spec.text) and spec.value <= 10
        if small_word and st.soft_small_numbers:
            rivals = [s for s in rivals if s.kind == "number" and s.value <= 20]
        if spec.kind == "date":
            rivals = [s for s in rivals if _comparable_dates(spec.value, s.value)]
        if spec.kind in ("name", "quote"):
            rivals = []  # another name in the passage is no evidence of a different value
        if rivals and coverage >= 0.5:
            rivals.sort(key=lambda s: s.kind != spec.kind)  # name a rival of the same kind first
            return "contradicted", f"the claim says {spec.text!r} but the passage says {rivals[0].text!r}"
        if st.soft_small_numbers and small_word:
            continue  # "two friends": a small count written out is often inferred, not stated
        return "not_found", f"{spec.kind} {spec.text!r} does not appear in the chunk"
    return None


def check_antonyms(claim: Text, chunk: Chunk, window: tuple[int, int], settings: OfflineSettings) -> Finding | None:
    """A claim word absent from the passage (and the sentences around it) whose opposite is there,
    in the same place (next to one of the same words)."""
    st = settings
    if not st.antonym_check:
        return None
    lo, hi = window
    a_lo, a_hi = (
        (lo - st.antonym_range, hi + st.antonym_range) if st.antonym_range is not None else (0, len(chunk.sentences))
    )
    near = chunk.stems_between(a_lo, a_hi, every=True)
    cancelled = double_negations(claim, near)
    negated_near = chunk.negated_between(a_lo, a_hi)  # the passage's negated opposite says what the claim does
    for s in sorted(claim.all_stems):
        if s in near or s in cancelled:
            continue
        opposite = set(ANTONYMS.get(s, ()))
        base = unprefixed(s)
        if base:
            opposite.add(base)
        for o in sorted(opposite - negated_near):
            if (
                o in near
                and o not in context_stems(claim.words, s, 6, every=True)
                and _same_place(claim, s, chunk, a_lo, a_hi, o, st.antonym_context)
            ):
                return "contradicted", f"the claim says {s!r} where the passage says the opposite ({o!r})"
    for n in sorted(near - claim.all_stems - negated_near):  # "not untrue" in the passage is "true"
        base = unprefixed(n)
        if base and base in claim.all_stems and _same_place(claim, base, chunk, a_lo, a_hi, n, st.antonym_context):
            return "contradicted", f"the claim says {base!r} where the passage says the opposite ({n!r})"
    return None


def check_negation(
    claim: Text, chunk: Chunk, window: tuple[int, int], coverage: float, settings: OfflineSettings
) -> Finding | None:
    """A word the claim negates that the passage states plainly, or the reverse (how strictly:
    ``negation_strict``), and a negated claim against a passage without negation."""
    st = settings
    if not st.negation_check or coverage < st.negation_min_coverage:
        return None
    lo, hi = window
    passage = chunk.stems_between(lo, hi)
    passage_neg = chunk.negated_between(lo, hi)
    if st.negation_strict == "sentence":
        found = _negation_flip(claim, chunk, lo, hi)
        if found:
            return "contradicted", found
    elif not (st.negation_strict and passage_neg):
        for w in sorted(claim.negated):
            if w in passage and w not in passage_neg:
                return "contradicted", f"the claim negates {w!r}, the passage does not"
    if st.negation_strict != "sentence" and not (st.negation_strict and claim.negated):
        claim_stems = set(claim.stems)
        for w in sorted(passage_neg):
            if w in claim_stems and w not in claim.negated:
                return "contradicted", f"the passage negates {w!r}, the claim does not"
    if (
        st.negation_inserted is not None
        and coverage >= st.negation_inserted
        and not passage_neg
        and has_negation(claim.words)
        and not _only_double(claim, chunk.stems_between(lo, hi, every=True))
        and not any(has_negation(split_words(x)) for x in chunk.sentences[lo:hi])
        and not _negated_elsewhere(claim, chunk)
    ):
        return "contradicted", "the claim is negated, the passage is not"
    return None


def check_alignment(
    claim: Text, chunk: Chunk, window: tuple[int, int], coverage: float, settings: OfflineSettings
) -> Finding | None:
    """The alignment rules (:func:`~ragmeter.judges.offline.align.aligned_difference`) on the
    passage as a whole and, when that finds nothing, on each of its sentences."""
    st = settings
    if not st.align_rules or coverage < st.align_min_coverage:
        return None
    lo, hi = window
    found = aligned_difference(claim.text, chunk, lo, hi, st.align_rules, st.align_max_gap)
    if found[0] is None and hi - lo > 1:
        # A claim drawn from several sentences can align badly with all of them at once
        # (repeated phrases pull the matcher apart): each sentence on its own as well.
        for j in range(lo, hi):
            found = aligned_difference(claim.text, chunk, j, j + 1, st.align_rules, st.align_max_gap)
            if found[0] is not None:
                break
    verdict, reason = found
    return (verdict, reason) if verdict is not None else None


def double_negations(claim: Text, near: set | frozenset) -> set:
    """The words the claim negates whose opposite ``near`` (the passage's stems) states: "not
    untrue" where the passage says "true", "not closed" where it says "open". Two negations
    cancel: the claim states what the passage does."""
    out = set()
    for w in claim.negated:
        base = negative_base(w)
        if (base and base in near) or not ANTONYMS.get(w, EMPTY).isdisjoint(near):
            out.add(w)
    return out


def _only_double(claim: Text, near: set) -> bool:
    """Whether every negation of the claim falls on a negatively prefixed word ("it is not untrue
    that ...") or on a word whose opposite the passage states: the claim negates nothing it says."""
    cancelled = double_negations(claim, near)
    return bool(claim.negated) and all(w in cancelled or negative_base(w) is not None for w in claim.negated)


def _demonym_found(name: str, text: str) -> bool:
    """Whether ``text`` states ``name`` with a demonym for a country or the reverse ("Belgian" for
    "Belgium", "France" for "French"), case-insensitively."""
    words = name.lower().split()
    swapped = [COUNTRY_OF.get(w) or DEMONYM_OF.get(w) or w for w in words]
    if swapped == words:
        return False
    return re.search(r"\b" + re.escape(" ".join(swapped)) + r"\b", text.lower()) is not None


def _placed(claim: Text, spec: Specific, chunk: Chunk, k: int) -> bool:
    """Whether a figure of the claim that the chunk states away from the best passage stands
    there among the same words: some content word of the ``k`` words either side of it in the
    claim is also next to it in the chunk ("costs $185 per month")."""
    mine = _side_words(normalise(claim.text), spec.start, spec.end, k)
    if not mine:
        return False
    for sentence in map(normalise, chunk.sentences):
        if not find_specific(spec, sentence):
            continue
        for other in _numeric_cached(sentence):
            if other.key == spec.key and mine & _side_words(sentence, other.start, other.end, k):
                return True
    return False


def _negated_elsewhere(claim: Text, chunk: Chunk, word: str | None = None) -> bool:
    """Whether some sentence of the chunk, in or out of the best passage, negates ``word`` (any
    word the claim negates when None) among two more of the claim's words: "it's not very
    expensive for a remote control that has this functionality" further on in a meeting."""
    words = {word} if word else claim.negated
    claim_stems = set(claim.stems)
    return any(
        len((claim_stems & chunk.sent_stems[j]) - negated) >= 2
        for j, negated in enumerate(chunk.sent_negated)
        if words & negated
    )


def _negation_flip(claim: Text, chunk: Chunk, lo: int, hi: int) -> str:
    """A reason when the claim negates a word that every passage sentence holding it states
    plainly (no negation in those sentences), or states plainly (no negation at all) a word
    that every passage sentence holding it negates; "" otherwise."""
    rows = range(max(0, lo), min(len(chunk.sentences), hi))
    for w in sorted(claim.negated):
        holding = [j for j in rows if w in chunk.sent_stems[j]]
        if holding and not any(chunk.sent_negated[j] or has_negation(split_words(chunk.sentences[j])) for j in holding):
            if not _negated_elsewhere(claim, chunk, w):
                return f"the claim negates {w!r}, the passage does not"
    if claim.negated or has_negation(claim.words):
        return ""
    claim_stems = set(claim.stems)
    for w in sorted(chunk.negated_between(lo, hi) & claim_stems):
        holding = [j for j in rows if w in chunk.sent_stems[j]]
        if holding and all(w in chunk.sent_negated[j] for j in holding):
            return f"the passage negates {w!r}, the claim does not"
    return ""


def _same_place(claim: Text, word: str, chunk: Chunk, lo: int, hi: int, opposite: str, k: int) -> bool:
    """Whether ``opposite`` in the passage stands where ``word`` stands in the claim: the content
    words around them (``k`` tokens either side; 0 = anywhere) share at least one stem."""
    if not k:
        return True
    around_claim = context_stems(claim.words, word, k)
    if not around_claim:
        return True
    for j in range(max(0, lo), min(len(chunk.sentences), hi)):
        if opposite in chunk.sent_all[j] and around_claim & context_stems(split_words(chunk.sentences[j]), opposite, k):
            return True
    return False


def _side_words(text: str, start: int, end: int, k: int) -> set:
    """Content stems of the ``k`` content words either side of ``text[start:end]``."""
    if start < 0:
        return set()
    left = [w for w in content_words(text[:start]) if not w[:1].isdigit()][-k:]
    right = [w for w in content_words(text[end:]) if not w[:1].isdigit()][:k]
    return set(left) | set(right)


def _comparable_dates(a: Any, b: Any) -> bool:
    """Whether two DateValues state the same granularity (both give a year, a day, a time ...)."""
    return any(x is not None and y is not None for x, y in zip(a, b))
