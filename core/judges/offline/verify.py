"""Internal: Claim verification: how well each chunk supports each claim, and the verdict that follows.

A claim is supported by a chunk when enough of its content words are in the chunk and in its best
passage (a run of up to ``window`` sentences), with embedding similarity able to lift a
paraphrase, and no hard check (:mod:`ragmeter.judges.offline.checks`) fails. A claim that no chunk
supports alone but the chunks support together is supported by them together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ragmeter.judges.base import Embedder
from ragmeter.judges.offline.checks import hard_checks
from ragmeter.judges.offline.embed import unit_vectors
from ragmeter.judges.offline.settings import OfflineSettings
from ragmeter.judges.offline.lexicon import stem
from ragmeter.judges.offline.text import EMPTY, Chunk, Text, analyse, analyse_chunk, merged_chunks, split_words
from ragmeter.specifics import find_specific


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
    hits: dict[int, set] = {}
    for s in present:
        for j in chunk.index[s]:
            hits.setdefault(j, set()).add(s)
    best_score, best_span = 0.0, (0, 1)
    rows = sorted(hits)
    for j in rows:
        if len(hits[j]) > best_score + 1e-12:
            best_score, best_span = float(len(hits[j])), (j, j + 1)
    for w in range(2, min(settings.window, n) + 1):
        starts = sorted({j for h in rows for j in range(max(0, h - w + 1), min(h, n - w) + 1)})
        for j in starts:
            if sum(len(hits.get(x, ())) for x in range(j, j + w)) <= best_score + 1e-12:
                continue
            sc = len(set().union(*(hits.get(x, ()) for x in range(j, j + w))))
            if sc > best_score + 1e-12:
                best_score, best_span = float(sc), (j, j + w)
    best = len(set().union(*(hits.get(x, ()) for x in range(*best_span)))) if present else 0
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


def _checks(claim: Text, chunk: Chunk, sup: Support, settings: OfflineSettings,
            near: bool = True) -> tuple[str | None, str]:
    """The hard checks of a claim against the best passage of ``sup``."""
    return hard_checks(claim, chunk, sup.window, sup.window_coverage, settings, near)


async def verify(claims: list[str], chunks: list[str], settings: OfflineSettings,
                 semantic: Embedder | None) -> list[dict]:
    """One verdict per claim against the chunks (the core of verify / attribute / compare):
    ``claim``, ``verdict``, ``chunks``, ``evidence``, ``reason`` and ``score``. ``semantic`` is the
    sentence-embedding model, or None for lexical signals only."""
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
    verdicts = []
    for k, (claim, row) in enumerate(zip(parsed, supports)):
        cover = word_coverage(claim, cks)
        for sup in row:
            sup.score = _combine(sup, settings)
        if not row or not claim.stems:
            verdicts.append({"claim": k, "verdict": "not_found", "chunks": [], "evidence": [],
                             "reason": "no chunk to check against" if not row else "the claim has no content words",
                             "score": 0.0, "support": 0.0})
            continue
        ranked = sorted(row, key=lambda s: (-s.score, s.chunk))
        supporting, contradiction, first_issue = [], None, None
        for sup in ranked:
            if sup.score < threshold:
                break
            if supporting and sup.score < supporting[0].score - 0.25:
                break  # further chunks only count as support when about as close as the best
            status, why = _checks(claim, cks[sup.chunk], sup, settings)
            if status is None:
                supporting.append(sup)
            elif status == "contradicted" and contradiction is None:
                contradiction = (sup, why)
            elif first_issue is None:
                first_issue = (sup, why)
        best = ranked[0]
        if supporting:
            top = supporting[0]
            verdicts.append({"claim": k, "verdict": "supported", "chunks": sorted(s.chunk for s in supporting),
                             "evidence": _evidence(cks, supporting, claim), "score": top.score,
                             "support": graded(cover, None, settings, True),
                             "reason": _reason(top, "supported", threshold)})
            continue
        if contradiction is None and best.score < threshold:
            # Weakly matching passages can still show a contradicted specific or negation.
            status, why = _checks(claim, cks[best.chunk], best, settings)
            if status == "contradicted" and best.window_coverage >= 0.5:
                contradiction = (best, why)
        combined = _combined_support(claim, cks, row, threshold, settings) if len(cks) > 1 else None
        if combined is not None:
            verdicts.append(combined | {"claim": k, "support": graded(cover, None, settings, True)})
            continue
        if contradiction is not None:
            sup, why = contradiction
            verdicts.append({"claim": k, "verdict": "contradicted", "chunks": [sup.chunk],
                             "evidence": _evidence(cks, [sup], claim), "score": sup.score,
                             "support": graded(cover, "contradicted", settings), "reason": why})
            continue
        why = first_issue[1] if first_issue else _reason(best, "not_found", threshold)
        verdicts.append({"claim": k, "verdict": "not_found", "chunks": [], "evidence": [], "score": best.score,
                         "support": graded(cover, "check" if first_issue else None, settings),
                         "reason": why})
    return verdicts


def word_coverage(claim: Text, cks: list[Chunk]) -> float:
    """The share of the claim's words (all but a few function words, repeats counted, stemmed)
    that the best chunk states anywhere. The words of a number, amount, date or name the chunk
    states in another spelling count as stated ("$20 million" for "$20,000,000")."""
    words = claim.support_stems or tuple(claim.stems)
    if not words or not cks:
        return 0.0
    best = 0
    for ck in cks:
        stated = ck.every_stem
        respelled = {stem(w) for spec in claim.specifics if find_specific(spec, ck.normalised)
                     for w in split_words(spec.text)} if claim.specifics else EMPTY
        best = max(best, sum(w in stated or w in respelled for w in words))
    return best / len(words)


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


def confidence(support: float, settings: OfflineSettings) -> float:
    """The calibrated probability that a human reader finds an answer of faithfulness (mean graded
    support) ``support`` fully supported: ``1 / (1 + exp(-(settings.confidence_slope * support +
    settings.confidence_intercept)))`` (with the defaults 0.004 at 0, 0.14 at 0.6, 0.52 at 0.9 and
    0.67 at 1.0)."""
    z = settings.confidence_slope * support + settings.confidence_intercept
    return round(1.0 / (1.0 + math.exp(-z)), 4)


def _combined_support(claim: Text, cks: list[Chunk], row: list[Support], threshold: float,
                      settings: OfflineSettings) -> dict | None:
    """A verdict for a claim that no chunk supports alone but the chunks support together
    (a synthesis across chunks), or None. The chunks listed are those holding its words."""
    stems = set(claim.stems)
    union_cov = len(stems & set().union(*(ck.stems for ck in cks))) / max(1, len(stems))
    best_cov = max((r.doc_coverage for r in row), default=0.0)
    if union_cov < threshold or (union_cov <= best_cov + 1e-9 and not claim.specifics):
        return None  # together the chunks hold no more of the claim than the best one alone
    union = merged_chunks(tuple(ck.text for ck in cks))
    sup = lexical_support(claim, union, -1, settings)
    sup.score = sup.lexical
    if sup.score < threshold or _checks(claim, union, sup, settings, near=False)[0] is not None:
        return None
    contributing = sorted((r for r in row if stems & cks[r.chunk].stems), key=lambda r: (-r.doc_coverage, r.chunk))
    if not contributing or len(contributing) < 2 and contributing[0].score >= threshold:
        return None
    listed = sorted(r.chunk for r in contributing[:3])
    return {"verdict": "supported", "chunks": listed,
            "evidence": _evidence(cks, [r for r in row if r.chunk in listed], claim), "score": sup.score,
            "reason": (f"supported by chunks {', '.join(map(str, listed))} together: {sup.doc_coverage:.0%} of the "
                       f"claim's content words in them (support {sup.score:.2f}, threshold {threshold:.2f})")}


def _reason(sup: Support, verdict: str, threshold: float) -> str:
    """The reason of a verdict from word overlap (and similarity)."""
    parts = [f"{sup.doc_coverage:.0%} of the claim's content words in chunk {sup.chunk}",
             f"{sup.window_coverage:.0%} in its best passage"]
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
    return [{"chunk": s.chunk, "quote": cks[s.chunk].quote(s.window, claim.stems)}
            for s in sorted(sups, key=lambda s: s.chunk)]
