"""Internal: Claim verification: how well each chunk supports each claim, and the verdict that follows.

A claim is supported by a chunk when enough of its content words are in the chunk and in its best
passage (a run of up to ``window`` sentences), with embedding similarity able to lift a
paraphrase, and no hard check (:mod:`ragmeter.judges.offline.checks`) fails. A claim that no chunk
supports alone but the chunks support together is supported by them together.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from ragmeter.judges.base import Embedder
from ragmeter.judges.offline.checks import CHECKS, hard_checks, stated
from ragmeter.judges.offline.embed import unit_vectors
from ragmeter.judges.offline.lexicon import stem
from ragmeter.judges.offline.settings import OfflineSettings
from ragmeter.judges.offline.text import (
    Chunk,
    Text,
    analyse,
    analyse_chunk,
    merged_chunks,
    split_words,
    word_overlap,
)


@dataclass
class Support:
    """How well one chunk supports one claim."""

    chunk: int
    lexical: float
    doc_coverage: float
    window_coverage: float
    window: tuple[int, int]
    similarity: float | None = None
    score: float = 0.0
    missing: list[str] = field(default_factory=list)


def support_threshold(settings: OfflineSettings, semantic: Embedder | None) -> float:
    """The support a claim needs (the embedding path has its own, tuned separately)."""
    return settings.embed_support_threshold if semantic is not None else settings.support_threshold


def lexical_support(claim: Text, chunk: Chunk, i: int, settings: OfflineSettings) -> Support:
    """The word-overlap support of chunk ``i`` for a claim, and its best passage."""
    stems = claim.stems
    if not stems:
        return Support(i, 0.0, 0.0, 0.0, (0, min(1, len(chunk.sentences))))
    present = [s for s in stems if s in chunk.stems]
    missing = [s for s in stems if s not in chunk.stems]
    doc_cov = len(present) / len(stems)
    # Best passage: the run of up to `window` sentences covering most claim words (the first
    # such run, shortest first). Only sentences holding a claim word can score, so only runs
    # touching one are looked at: the work grows with the hits, not with the chunk's length.
    n = len(chunk.sentences)
    # Each sentence's claim words as a bit mask: a run's words are the OR of its masks.
    masks: dict[int, int] = {}
    for bit, s in enumerate(present):
        for j in chunk.index[s]:
            masks[j] = masks.get(j, 0) | (1 << bit)
    best_score, best_span, best_mask = 0, (0, 1), 0
    rows = sorted(masks)
    for j in rows:
        count = masks[j].bit_count()
        if count > best_score:
            best_score, best_span, best_mask = count, (j, j + 1), masks[j]
    for w in range(2, min(settings.window, n) + 1):
        starts = sorted({j for h in rows for j in range(max(0, h - w + 1), min(h, n - w) + 1)})
        for j in starts:
            mask = 0
            for x in range(j, j + w):
                mask |= masks.get(x, 0)
            count = mask.bit_count()
            if count > best_score:
                best_score, best_span, best_mask = count, (j, j + w), mask
    best = best_mask.bit_count()
    win_cov = max(best, 0) / len(stems)
    lexical = settings.doc_weight * doc_cov + (1 - settings.doc_weight) * win_cov
    return Support(i, lexical, doc_cov, win_cov, best_span, missing=missing)


def _combine(sup: Support, settings: OfflineSettings) -> float:
    """The support score: lexical, lifted (or blended) by the embedding similarity when there is one."""
    st = settings
    if sup.similarity is None:
        return sup.lexical
    sim = (sup.similarity - st.embed_floor) / max(1e-9, st.embed_ceiling - st.embed_floor)
    sim = min(1.0, max(0.0, sim))
    blended = (1 - st.embed_weight) * sup.lexical + st.embed_weight * sim
    if st.embed_mode == "rescue":
        return max(sup.lexical, blended)
    return blended


def _checks(
    claim: Text, chunk: Chunk, sup: Support, settings: OfflineSettings, near: bool = True
) -> tuple[str | None, str, str]:
    """The hard checks of a claim against the best passage of ``sup``."""
    return hard_checks(claim, chunk, sup.window, sup.window_coverage, settings, near)


async def verify(
    claims: list[str],
    chunks: list[str],
    settings: OfflineSettings,
    semantic: Embedder | None,
    signals: Collection[str] | None = None,
) -> list[dict]:
    """One verdict per claim against the chunks (the core of verify / attribute / compare):
    ``claim``, ``verdict``, ``chunks``, ``evidence``, ``reason``, ``score`` (the best word
    support), ``best`` (the chunk with the best word support, None without chunks), ``passage``
    (the text of the passage the verdict rests on) and ``features`` (the signals the fitted
    combinations read, :func:`features`; ``signals`` names those wanted, None: all; word coverage
    and the rules' graded support, the costly ones, are computed only when wanted). ``semantic`` is
    the sentence-embedding model, or None for lexical signals only."""
    parsed = [analyse(c) for c in claims]
    cks = [analyse_chunk(c) for c in chunks]
    supports: list[list[Support]] = []
    for claim in parsed:
        supports.append([lexical_support(claim, ck, i, settings) for i, ck in enumerate(cks)])
    threshold = support_threshold(settings, semantic)
    if semantic is not None and claims and chunks:
        # Candidate passages: the best window per (claim, chunk), all embedded in one call. In
        # "rescue" mode similarity can only lift a claim that no chunk supports lexically, so
        # only those claims (and their three lexically closest chunks) are embedded.
        todo: list[tuple[str, list[Support]]] = []
        for c, row in zip(claims, supports):
            if settings.embed_mode == "rescue":
                if any(sup.lexical >= threshold for sup in row):
                    continue
                row = sorted(row, key=lambda x: (-x.lexical, x.chunk))[:3]
            todo.append((c, row))
        texts = [c for c, _ in todo] + [cks[sup.chunk].window_text(sup.window) for _, row in todo for sup in row]
        vec = await unit_vectors(semantic, texts)
        for c, row in todo:
            cv = vec.get(c)
            for sup in row:
                pv = vec.get(cks[sup.chunk].window_text(sup.window))
                if cv is not None and pv is not None:
                    sup.similarity = float(np.dot(cv, pv))
    graded_wanted = signals is None or not {"coverage", "graded"}.isdisjoint(signals)
    every = [ck.tokens for ck in cks]
    verdicts = []
    for k, (claim, row) in enumerate(zip(parsed, supports)):
        for sup in row:
            sup.score = _combine(sup, settings)
        verdict, on, check, failed = _verdict(k, claim, cks, row, threshold, settings)
        x = features(verdict, word_overlap(claims[k], every), on, check)
        if graded_wanted:
            x["coverage"] = cover = word_coverage(claim, cks)
            supported = verdict["verdict"] == "supported"
            x["graded"] = graded(cover, failed, settings, supported) if row and claim.stems else 0.0
        best = min(row, key=lambda s: (-s.score, s.chunk)).chunk if on is not None else None
        passage = _passage(cks, on) if on is not None else ""
        verdicts.append(verdict | {"best": best, "passage": passage, "features": x})
    return verdicts


def _verdict(
    k: int, claim: Text, cks: list[Chunk], row: list[Support], threshold: float, settings: OfflineSettings
) -> tuple[dict, Support | None, str, str | None]:
    """The rules' verdict on claim ``k``, the support it rests on (None without chunks), the hard
    check that failed ("" when none) and how the graded support is lowered ("contradicted",
    "check" or None)."""
    if not row or not claim.stems:
        return (
            {
                "claim": k,
                "verdict": "not_found",
                "chunks": [],
                "evidence": [],
                "reason": "no chunk to check against" if not row else "the claim has no content words",
                "score": 0.0,
            },
            None,
            "",
            None,
        )
    ranked = sorted(row, key=lambda s: (-s.score, s.chunk))
    supporting: list[Support] = []
    contradiction, first_issue = None, None
    for sup in ranked:
        if sup.score < threshold:
            break
        if supporting and sup.score < supporting[0].score - 0.25:
            break  # further chunks only count as support when about as close as the best
        status, why, check = _checks(claim, cks[sup.chunk], sup, settings)
        if status is None:
            supporting.append(sup)
        elif status == "contradicted" and contradiction is None:
            contradiction = (sup, why, check)
        elif first_issue is None:
            first_issue = (sup, why, check)
    best = ranked[0]
    if supporting:
        top = supporting[0]
        return (
            {
                "claim": k,
                "verdict": "supported",
                "chunks": sorted(s.chunk for s in supporting),
                "evidence": _evidence(cks, supporting, claim),
                "score": top.score,
                "reason": _reason(top, "supported", threshold),
            },
            top,
            "",
            None,
        )
    if contradiction is None and best.score < threshold:
        # Weakly matching passages can still show a contradicted specific or negation.
        status, why, check = _checks(claim, cks[best.chunk], best, settings)
        if status == "contradicted" and best.window_coverage >= 0.5:
            contradiction = (best, why, check)
    combined = _combined_support(claim, cks, row, threshold, settings) if len(cks) > 1 else None
    if combined is not None:
        return combined | {"claim": k, "together": True}, best, "", None
    if contradiction is not None:
        sup, why, check = contradiction
        return (
            {
                "claim": k,
                "verdict": "contradicted",
                "chunks": [sup.chunk],
                "evidence": _evidence(cks, [sup], claim),
                "score": sup.score,
                "reason": why,
            },
            sup,
            check,
            "contradicted",
        )
    why = first_issue[1] if first_issue else _reason(best, "not_found", threshold)
    check = first_issue[2] if first_issue else ""
    return (
        {"claim": k, "verdict": "not_found", "chunks": [], "evidence": [], "score": best.score, "reason": why},
        best,
        check,
        "check" if first_issue else None,
    )


def _passage(cks: list[Chunk], sup: Support) -> str:
    """The text of a support's best passage (what a grounding model reads against the claim)."""
    return cks[sup.chunk].window_text(sup.window)


def features(verdict: dict, overlap: float, best: Support | None, check: str) -> dict[str, float]:
    """The signals of one verdict, each in [0, 1], that the fitted combinations read
    (:mod:`ragmeter.judges.offline.model` names and explains them); ``verify`` adds ``coverage``
    and ``graded`` when they are wanted."""
    out = {
        "overlap": overlap,
        "passage": min(1.0, best.score) if best is not None else 0.0,
        "window": best.window_coverage if best is not None else 0.0,
        "supported": float(verdict["verdict"] == "supported"),
        "together": float(bool(verdict.pop("together", False))),
        "contradicted": float(verdict["verdict"] == "contradicted"),
        "unverified": float(verdict["verdict"] == "not_found" and bool(check)),
    }
    for name in CHECKS:
        out[name] = float(check == name)
    return out


def word_coverage(claim: Text, cks: list[Chunk]) -> float:
    """The share of the claim's words (all but a few function words, repeats counted, stemmed)
    that the best chunk states anywhere. The words of a number, amount, date or name the chunk
    states in another spelling count as stated ("$20 million" for "$20,000,000")."""
    words = claim.support_stems or tuple(claim.stems)
    if not words or not cks:
        return 0.0
    n = len(words)
    spelled = _specific_stems(claim)
    in_specifics = frozenset().union(*(stems for _, stems in spelled)) if spelled else frozenset()
    rows = []
    for ck in cks:
        missing = [w for w in words if w not in ck.every_stem]
        rows.append((n - len(missing), ck, missing))
    rows.sort(key=lambda r: -r[0])
    best = 0
    for count, ck, missing in rows:
        # Only the words of a specific the chunk states in another spelling can add to its count,
        # so the costly lookup runs only where that could beat the best chunk so far.
        respellable = [w for w in missing if w in in_specifics]
        if respellable and count + len(respellable) > best:
            wanted = set(respellable)
            respelled: set = set()
            for spec, stems in spelled:
                if not stems.isdisjoint(wanted) and stated(spec, ck.normalised):
                    respelled |= stems
            count += sum(w in respelled for w in respellable)
        best = max(best, count)
        if best == n:
            break
    return best / n


def _specific_stems(claim: Text) -> list[tuple]:
    """The claim's specifics, each with the stems of its words (computed once per claim)."""
    cached = claim.__dict__.get("_specific_stems")
    if cached is None:
        cached = claim.__dict__["_specific_stems"] = [
            (spec, frozenset(stem(w) for w in split_words(spec.text))) for spec in claim.specifics
        ]
    return cached


def graded(score: float, failed: str | None, settings: OfflineSettings, supported: bool = False) -> float:
    """A claim's graded support in [0, 1]: its :func:`word_coverage` ``score`` scaled so that
    ``settings.full_support`` and above count fully, lowered by a failed hard check (``failed``:
    "contradicted", or "check": a specific not found, an added restrictive word ...), blended with
    the verdict (``supported``) by ``settings.verdict_weight``."""
    st = settings
    base = min(1.0, max(0.0, score) / st.full_support)
    if failed == "contradicted":
        base *= st.contradicted_weight
    elif failed == "check":
        base *= st.check_weight
    verdict = min(1.0, max(0.0, score) / st.verdict_full) if supported and st.verdict_full else float(supported)
    return round(st.verdict_weight * verdict + (1 - st.verdict_weight) * base, 4)


def _combined_support(
    claim: Text, cks: list[Chunk], row: list[Support], threshold: float, settings: OfflineSettings
) -> dict | None:
    """A verdict for a claim that no chunk supports alone but the chunks support together
    (a synthesis across chunks), or None. The chunks listed are those holding its words."""
    stems = set(claim.stems)
    union_cov = len(stems & set().union(*(ck.stems for ck in cks))) / max(1, len(stems))
    best_cov = max((r.doc_coverage for r in row), default=0.0)
    if union_cov < threshold or (union_cov <= best_cov + 1e-9 and not claim.specifics):
        return None  # together the chunks hold no more of the claim than the best one alone
    contributing = sorted((r for r in row if stems & cks[r.chunk].stems), key=lambda r: (-r.doc_coverage, r.chunk))
    if not contributing or len(contributing) < 2 and contributing[0].score >= threshold:
        return None
    if settings.specifics_check and any(_figure_absent(spec, cks, settings) for spec in claim.specifics):
        return None  # a figure no chunk states fails the checks of the chunks together too
    union = merged_chunks(tuple(ck.text for ck in cks))
    sup = lexical_support(claim, union, -1, settings)
    sup.score = sup.lexical
    if sup.score < threshold or _checks(claim, union, sup, settings, near=False)[0] is not None:
        return None
    listed = sorted(r.chunk for r in contributing[:3])
    return {
        "verdict": "supported",
        "chunks": listed,
        "evidence": _evidence(cks, [r for r in row if r.chunk in listed], claim),
        "score": sup.score,
        "reason": (
            f"supported by chunks {', '.join(map(str, listed))} together: {sup.doc_coverage:.0%} of the "
            f"claim's content words in them (support {sup.score:.2f}, threshold {threshold:.2f})"
        ),
    }


def _figure_absent(spec, cks: list[Chunk], settings: OfflineSettings) -> bool:
    """Whether ``spec`` is a number, amount, percentage or date that no chunk states and whose
    absence fails the specifics check (a small count written out does not)."""
    if spec.kind not in ("number", "money", "percent", "date"):
        return False
    if (
        settings.soft_small_numbers
        and spec.kind == "number"
        and spec.value <= 10
        and not any(c.isdigit() for c in spec.text)
    ):
        return False
    return not any(stated(spec, ck.normalised) for ck in cks)


def _reason(sup: Support, verdict: str, threshold: float) -> str:
    """The reason of a verdict from word overlap (and similarity)."""
    parts = [
        f"{sup.doc_coverage:.0%} of the claim's content words in chunk {sup.chunk}",
        f"{sup.window_coverage:.0%} in its best passage",
    ]
    if sup.similarity is not None:
        parts.append(f"embedding similarity {sup.similarity:.2f}")
    text = ", ".join(parts) + f" (support {sup.score:.2f}, threshold {threshold:.2f})"
    if verdict == "not_found" and sup.missing:
        text += "; not in the chunk: " + ", ".join(sup.missing[:5])
    return text


def _evidence(cks: list[Chunk], sups: Sequence[Support], claim: Text) -> list[dict]:
    """``verify_claims`` evidence: per listed chunk (sorted), the verbatim quote of its
    best-matching passage for the claim (:meth:`Chunk.quote`: one sentence when it holds as many
    of the claim's words as the passage, else the passage)."""
    return [
        {"chunk": s.chunk, "quote": cks[s.chunk].quote(s.window, claim.stems)}
        for s in sorted(sups, key=lambda s: s.chunk)
    ]
