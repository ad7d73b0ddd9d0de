"""Exact retrieval metrics (trec_eval semantics), for one query or many at once.

Single-query functions all have the form ``f(retrieved_ids, relevant, k=None) -> float``:

``retrieved_ids``
    The ranked list of retrieved ids, best first (a list, tuple or 1-d array; a set is
    refused because it has no order). A later duplicate of an id occupies a rank but counts
    as not relevant, like a second copy of a document.
``relevant``
    Either a collection of relevant ids (binary relevance, every id has grade 1) or a dict
    ``id -> grade`` (graded relevance). An id is *relevant* when its grade is >= 1
    (:data:`RELEVANCE_LEVEL`, trec_eval's default ``relevance_level``); a grade of 0 or
    below means judged not relevant. Ids absent from ``relevant`` are not relevant.
    NDCG uses the grade itself as the gain (negative grades give gain 0).
``k``
    ``None`` evaluates the whole ranked list; otherwise a positive int, and only the top
    ``k`` ranks are evaluated.

No function returns NaN: where a ratio's denominator is zero (no relevant ids, an empty
ranking, an ideal DCG of zero) the value is 0.0, as in trec_eval.

Correspondence with trec_eval measures (checked against trec_eval's own test outputs and
against ``pytrec_eval``)::

    map          average_precision(ids, rel)        map_cut_k  average_precision(ids, rel, k)
    recip_rank   mrr(ids, rel)                      P_k        precision_at_k(ids, rel, k)
    recall_k     recall_at_k(ids, rel, k)           Rprec      r_precision(ids, rel)
    ndcg         ndcg_at_k(ids, rel)                ndcg_cut_k ndcg_at_k(ids, rel, k)

trec_eval ranks a query's results by score, highest first, and breaks ties by docno in
*descending* string order; :func:`rank_by_score` does the same, so a run given as
``{id: score}`` can be turned into the ranked list these functions take.

For many queries, :func:`relevance_matrix` builds a :class:`RelevanceMatrix` once and the
``batch_*`` functions compute per-query values for all queries with vectorised numpy. The
single-query functions run the same code on a one-row matrix, so both give bit-identical
results.

Differences from LlamaIndex's RetrieverEvaluator
------------------------------------------------
Checked against ``llama_index.core.evaluation.retrieval.metrics`` in llama-index-core
0.14.25. LlamaIndex's metrics take binary relevance only (an id is in ``expected_ids`` or it
is not), have no ``k``: they score whatever list the retriever returned (its
``similarity_top_k``), and raise ``ValueError`` when ``retrieved_ids`` or ``expected_ids``
is empty, where ragmeter returns 0.0. ``Precision`` and ``Recall`` are set-based:
``|set(retrieved) & set(expected)| / |set(retrieved)|`` and ``... / |set(expected)|``, so
duplicates collapse and precision divides by the number of distinct ids retrieved, whereas
``precision_at_k`` divides by ``k`` even when fewer than ``k`` ids were retrieved (trec_eval's
``P_k``) and a duplicate counts as a retrieved non-relevant id. ``AveragePrecision`` agrees
with trec_eval's ``map`` (divides by ``|set(expected)|``) except that it counts every copy of
a relevant id as a new hit, so duplicates can push it above 1 (``['a', 'a']`` against
``['a']`` scores 2.0). ``MRR`` agrees with ``mrr`` by default; ``use_granular_mrr=True``
instead averages the reciprocal ranks of all relevant hits (dividing by the number of hits),
which has no trec_eval counterpart. ``HitRate`` agrees with ``hit_rate`` by default;
``use_granular_hit_rate=True`` is hits / ``len(expected_ids)``, a recall that counts
duplicates. ``NDCG`` uses linear gain with rel in {0, 1} (its ``exponential`` mode is the same
for binary gains), DCG over the whole retrieved list (every copy of a relevant id earns gain
again, so duplicates can push it above 1), and ideal DCG
``sum_{i=1..len(expected_ids)} 1 / log2(i + 1)``: over *all* expected ids, not cut at the
number retrieved (nor at ``min(len(retrieved), len(expected))``, which the code used for a
while after PR #17126). So it equals trec_eval's ``ndcg`` (= ``ndcg_at_k(k=None)``)
for binary judgements without duplicates; but when the retriever returns ``k`` ids and more
than ``k`` are expected, it is lower than trec_eval's ``ndcg_cut_k`` (= ``ndcg_at_k(k=k)``,
whose ideal DCG is cut at ``k``) unless both are 0: retrieving ``['a', 'b']`` with expected
``{'a', 'b', 'c'}`` scores 0.7654 in LlamaIndex and 1.0 as ``ndcg_cut_2``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Union

import numpy as np

__all__ = [
    "RELEVANCE_LEVEL",
    "precision_at_k",
    "recall_at_k",
    "hit_rate",
    "mrr",
    "mean_reciprocal_rank",
    "average_precision",
    "ndcg_at_k",
    "r_precision",
    "context_precision",
    "rank_by_score",
    "RelevanceMatrix",
    "relevance_matrix",
    "batch_precision_at_k",
    "batch_recall_at_k",
    "batch_hit_rate",
    "batch_mrr",
    "batch_average_precision",
    "batch_ndcg_at_k",
    "batch_r_precision",
]

#: An id counts as relevant when its grade is at least this (trec_eval's default ``-l 1``).
RELEVANCE_LEVEL = 1.0

Relevant = Union[Mapping[Hashable, float], Iterable[Hashable]]


# --------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------

def _check_k(k: Any) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, Integral):
        raise TypeError(f"k must be a positive int or None, got {type(k).__name__} {k!r}")
    if k < 1:
        raise ValueError(f"k must be a positive int or None, got {k}")
    return int(k)


def _check_id(value: Any, where: str) -> None:
    if value is None:
        raise ValueError(f"{where} is None; ids must be hashable values such as str or int")
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"{where} is an unhashable {type(value).__name__}; "
                        "ids must be hashable values such as str or int") from None


def _as_ranking(ids: Any, name: str) -> list:
    """Validate a ranked list of ids and return it as a list."""
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must be a ranked sequence of ids (e.g. a list), "
                        f"not a single {type(ids).__name__}")
    if isinstance(ids, (Set, Mapping)):
        raise TypeError(f"{name} must be an ordered sequence of ids, best first; "
                        f"got an unordered {type(ids).__name__}")
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise ValueError(f"{name} must be 1-dimensional, got an array of shape {ids.shape}")
        ids = ids.tolist()
    elif not isinstance(ids, Sequence):
        raise TypeError(f"{name} must be an ordered sequence of ids (list or tuple), "
                        f"got {type(ids).__name__}")
    ids = list(ids)
    for i, doc in enumerate(ids):
        _check_id(doc, f"{name}[{i}]")
    return ids


def _as_grades(relevant: Any, name: str) -> dict:
    """Validate relevance judgements and return them as ``{id: float grade}``."""
    if isinstance(relevant, (str, bytes)):
        raise TypeError(f"{name} must be a collection of relevant ids or a dict id -> grade, "
                        f"not a single {type(relevant).__name__}")
    grades: dict = {}
    if isinstance(relevant, Mapping):
        for key, grade in relevant.items():
            _check_id(key, f"a key of {name}")
            where = f"{name}[{key!r}]"
            if grade is None:
                raise ValueError(f"{where} is None; grades must be finite numbers")
            if not isinstance(grade, Real):
                raise TypeError(f"{where} must be a number (the grade), got {type(grade).__name__}")
            grade = float(grade)
            if not math.isfinite(grade):
                raise ValueError(f"{where} is {grade}; grades must be finite numbers")
            grades[key] = grade
        return grades
    if isinstance(relevant, np.ndarray):
        if relevant.ndim != 1:
            raise ValueError(f"{name} must be 1-dimensional, got an array of shape {relevant.shape}")
        relevant = relevant.tolist()
    if not isinstance(relevant, Iterable):
        raise TypeError(f"{name} must be a collection of relevant ids or a dict id -> grade, "
                        f"got {type(relevant).__name__}")
    for doc in relevant:
        _check_id(doc, f"an id in {name}")
        grades[doc] = 1.0
    return grades


# --------------------------------------------------------------------------------------
# the relevance matrix
# --------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class RelevanceMatrix:
    """Judged grades of many ranked lists, laid out for vectorised metrics.

    Built by :func:`relevance_matrix`; all arrays are read-only.

    Attributes
    ----------
    query_ids : tuple
        The query of each row (the keys of ``runs`` when it is a mapping, else 0..n-1).
    grades : ndarray of shape (n_queries, depth)
        ``grades[q, r]`` is the grade of the document at rank ``r + 1`` of query ``q``: 0.0
        for an unjudged id, a later duplicate, or a rank past the end of the list.
    n_retrieved : ndarray of shape (n_queries,)
        Length of each full ranked list (duplicates included; may exceed ``depth``).
    n_relevant : ndarray of shape (n_queries,)
        Number of judged ids with grade >= 1 (the denominator of recall, AP and R-precision).
    ideal : ndarray of shape (n_queries, w)
        Every positive grade of the query's judgements, sorted descending and zero-padded;
        the ideal ranking for NDCG (``w >= 1``).

    Examples
    --------
    >>> m = relevance_matrix({"q1": ["a", "b", "a"]}, {"q1": {"a": 2, "c": 1}})
    >>> m.grades.tolist(), m.n_retrieved.tolist(), m.n_relevant.tolist(), m.ideal.tolist()
    ([[2.0, 0.0, 0.0]], [3], [2], [[2.0, 1.0]])
    """

    query_ids: tuple
    grades: np.ndarray
    n_retrieved: np.ndarray
    n_relevant: np.ndarray
    ideal: np.ndarray

    @property
    def depth(self) -> int:
        """Number of ranks stored per query (columns of ``grades``)."""
        return int(self.grades.shape[1])

    def __len__(self) -> int:
        return int(self.grades.shape[0])

    def __repr__(self) -> str:
        return f"RelevanceMatrix(n_queries={len(self)}, depth={self.depth})"


def _row(ranking: list, grades: dict, depth: int | None) -> tuple[list, int, int, list]:
    """Grades of the first ``depth`` ranks (later duplicates -> 0), list length, #relevant, ideal gains."""
    seen: set = set()
    row = []
    for doc in ranking if depth is None else ranking[:depth]:
        if doc in seen:
            row.append(0.0)
        else:
            seen.add(doc)
            row.append(grades.get(doc, 0.0))
    n_rel = sum(1 for g in grades.values() if g >= RELEVANCE_LEVEL)
    ideal = sorted((g for g in grades.values() if g > 0.0), reverse=True)
    return row, len(ranking), n_rel, ideal


def _pack(query_ids: tuple, rows: list, depth: int) -> RelevanceMatrix:
    n = len(rows)
    width = max([1] + [len(r[3]) for r in rows])
    grades = np.zeros((n, depth))
    ideal = np.zeros((n, width))
    for q, (row, _, _, best) in enumerate(rows):
        grades[q, :len(row)] = row
        ideal[q, :len(best)] = best
    n_ret = np.array([r[1] for r in rows], dtype=np.int64)
    n_rel = np.array([r[2] for r in rows], dtype=np.int64)
    for a in (grades, ideal, n_ret, n_rel):
        a.setflags(write=False)
    return RelevanceMatrix(query_ids, grades, n_ret, n_rel, ideal)


def _single(retrieved_ids: Any, relevant: Any) -> RelevanceMatrix:
    ranking = _as_ranking(retrieved_ids, "retrieved_ids")
    row = _row(ranking, _as_grades(relevant, "relevant"), None)
    return _pack((0,), [row], max(1, len(ranking)))


def rank_by_score(scores: Mapping[Hashable, float]) -> list:
    """Rank ids by score the way trec_eval does: score descending, ties by id descending.

    trec_eval ignores the rank column of a run file; it sorts each query's results by
    score, highest first, and breaks ties by comparing docnos as strings, larger first.

    Parameters
    ----------
    scores : dict
        ``id -> score`` (finite numbers). Ids that tie must be mutually comparable.

    Returns
    -------
    list
        The ids, best first.

    Examples
    --------
    >>> rank_by_score({"d1": 0.5, "d3": 0.9, "d2": 0.5})
    ['d3', 'd2', 'd1']
    """
    if not isinstance(scores, Mapping):
        raise TypeError(f"scores must be a dict id -> score, got {type(scores).__name__}")
    for doc, s in scores.items():
        _check_id(doc, "a key of scores")
        if s is None:
            raise ValueError(f"scores[{doc!r}] is None; scores must be finite numbers")
        if isinstance(s, bool) or not isinstance(s, Real):
            raise TypeError(f"scores[{doc!r}] must be a number, got {type(s).__name__}")
        if not math.isfinite(s):
            raise ValueError(f"scores[{doc!r}] is {s}; scores must be finite numbers")
    try:
        return sorted(scores, key=lambda doc: (float(scores[doc]), doc), reverse=True)
    except TypeError:
        raise TypeError("ids with equal scores must be comparable to break the tie "
                        "(use ids of one type, e.g. all str)") from None


def relevance_matrix(runs: Mapping | Sequence, qrels: Mapping | Sequence,
                     depth: int | None = None) -> RelevanceMatrix:
    """Build the :class:`RelevanceMatrix` of many queries for the ``batch_*`` metrics.

    Parameters
    ----------
    runs : dict or sequence
        Either ``{query_id: ranking}`` or a sequence of rankings. A ranking is a list of ids,
        best first, or a dict ``id -> score`` ranked by :func:`rank_by_score`.
    qrels : dict or sequence
        Judgements matching ``runs``: ``{query_id: relevant}`` (must have every query of
        ``runs``; extra queries are ignored, as trec_eval does) or a sequence of the same
        length. Each ``relevant`` is a collection of relevant ids or a dict ``id -> grade``.
    depth : int, optional
        Number of ranks to store. Default: the longest ranking (at least 1). A smaller depth
        saves memory; a metric that needs ranks beyond it raises ``ValueError``.

    Returns
    -------
    RelevanceMatrix
        ``grades[q, r]`` = grade of the id at rank ``r + 1`` of query ``q`` (0.0 if
        unjudged, a later duplicate, or past the end of the ranking).

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"], ["x"]], [{"a", "c"}, {"y": 2}])
    >>> m.grades.tolist()
    [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    >>> batch_precision_at_k(m, k=2).tolist()
    [0.5, 0.0]
    """
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, Integral):
            raise TypeError(f"depth must be a positive int or None, got {type(depth).__name__}")
        if depth < 1:
            raise ValueError(f"depth must be a positive int or None, got {depth}")
        depth = int(depth)
    if isinstance(runs, Mapping):
        if not isinstance(qrels, Mapping):
            raise TypeError("runs is a dict query_id -> ranking, so qrels must be a dict "
                            f"query_id -> relevant too, got {type(qrels).__name__}")
        query_ids = tuple(runs)
        for q in query_ids:
            if q not in qrels:
                raise ValueError(f"qrels has no judgements for query {q!r} of runs")
        pairs = [(runs[q], qrels[q], f"runs[{q!r}]", f"qrels[{q!r}]") for q in query_ids]
    elif isinstance(runs, Sequence) and not isinstance(runs, (str, bytes)):
        if isinstance(qrels, Mapping) or not isinstance(qrels, Sequence) or isinstance(qrels, (str, bytes)):
            raise TypeError("runs is a sequence of rankings, so qrels must be a sequence of the "
                            f"same length, got {type(qrels).__name__}")
        if len(runs) != len(qrels):
            raise ValueError(f"runs has {len(runs)} rankings but qrels has {len(qrels)} entries")
        query_ids = tuple(range(len(runs)))
        pairs = [(runs[i], qrels[i], f"runs[{i}]", f"qrels[{i}]") for i in query_ids]
    else:
        raise TypeError(f"runs must be a dict query_id -> ranking or a sequence of rankings, "
                        f"got {type(runs).__name__}")
    if not pairs:
        raise ValueError("runs is empty; need at least one query")
    rankings = []
    for run, _, where, _ in pairs:
        rankings.append(rank_by_score(run) if isinstance(run, Mapping) else _as_ranking(run, where))
    rows = [_row(ranking, _as_grades(rel, where), depth)
            for ranking, (_, rel, _, where) in zip(rankings, pairs)]
    if depth is None:
        depth = max(1, max(len(r) for r in rankings))
    return _pack(query_ids, rows, depth)


# --------------------------------------------------------------------------------------
# vectorised kernels (shared by the single-query and batched functions)
# --------------------------------------------------------------------------------------
# Sums are prefix sums (np.cumsum runs left to right), so zero padding never changes a
# value and one-row and many-row matrices give bit-identical results.

def _prefix(values: np.ndarray) -> np.ndarray:
    """(n, d) -> (n, d + 1): column j is the sum of the first j columns."""
    out = np.zeros((values.shape[0], values.shape[1] + 1))
    np.cumsum(values, axis=1, out=out[:, 1:])
    return out


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    num = np.asarray(num, dtype=float)
    den = np.broadcast_to(np.asarray(den, dtype=float), num.shape)
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


def _check_matrix(m: Any) -> RelevanceMatrix:
    if not isinstance(m, RelevanceMatrix):
        raise TypeError(f"expected a RelevanceMatrix (see relevance_matrix()), got {type(m).__name__}")
    return m


def _check_depth(m: RelevanceMatrix, needed: np.ndarray, what: str) -> None:
    bad = np.flatnonzero(needed > m.depth)
    if bad.size:
        q = bad[0]
        raise ValueError(f"{what} needs the top {int(needed[q])} ranks of query {m.query_ids[q]!r}, "
                         f"but the RelevanceMatrix stores only depth={m.depth}; "
                         "rebuild it with a larger depth (or depth=None)")


def _cutoff(m: RelevanceMatrix, k: int | None, what: str) -> np.ndarray:
    """Number of ranks evaluated per query: min(k, list length)."""
    cut = m.n_retrieved if k is None else np.minimum(m.n_retrieved, k)
    _check_depth(m, cut, what)
    return cut


def _hits(m: RelevanceMatrix, cut: np.ndarray) -> np.ndarray:
    rel = (m.grades >= RELEVANCE_LEVEL).astype(float)
    return _prefix(rel)[np.arange(len(m)), cut]


def _precision(m: RelevanceMatrix, k: int | None) -> np.ndarray:
    cut = _cutoff(m, k, "precision")
    return _safe_div(_hits(m, cut), m.n_retrieved if k is None else k)


def _recall(m: RelevanceMatrix, k: int | None) -> np.ndarray:
    return _safe_div(_hits(m, _cutoff(m, k, "recall")), m.n_relevant)


def _hit_rate(m: RelevanceMatrix, k: int | None) -> np.ndarray:
    return (_hits(m, _cutoff(m, k, "hit_rate")) > 0).astype(float)


def _reciprocal_rank(m: RelevanceMatrix, k: int | None) -> np.ndarray:
    cut = _cutoff(m, k, "mrr")
    rel = (m.grades >= RELEVANCE_LEVEL) & (np.arange(m.depth) < cut[:, None])
    first = rel.argmax(axis=1)
    return np.where(rel.any(axis=1), 1.0 / (first + 1.0), 0.0)


def _average_precision(m: RelevanceMatrix, k: int | None) -> np.ndarray:
    cut = _cutoff(m, k, "average_precision")
    rel = m.grades >= RELEVANCE_LEVEL
    prec = np.cumsum(rel, axis=1) / np.arange(1.0, m.depth + 1.0)
    terms = np.where(rel, prec, 0.0)
    return _safe_div(_prefix(terms)[np.arange(len(m)), cut], m.n_relevant)


def _ndcg(m: RelevanceMatrix, k: int | None) -> np.ndarray:
    rows = np.arange(len(m))
    cut = _cutoff(m, k, "ndcg")
    gains = np.maximum(m.grades, 0.0)
    dcg = _prefix(gains / np.log2(np.arange(2.0, m.depth + 2.0)))[rows, cut]
    width = m.ideal.shape[1]
    icut = np.full(len(m), width if k is None else min(k, width))
    idcg = _prefix(m.ideal / np.log2(np.arange(2.0, width + 2.0)))[rows, icut]
    return _safe_div(dcg, idcg)


def _r_precision(m: RelevanceMatrix, k: int | None) -> np.ndarray:
    top = m.n_relevant if k is None else np.minimum(m.n_relevant, k)
    cut = np.minimum(top, m.n_retrieved)
    _check_depth(m, cut, "r_precision")
    return _safe_div(_hits(m, cut), m.n_relevant)


# --------------------------------------------------------------------------------------
# single-query metrics
# --------------------------------------------------------------------------------------

def precision_at_k(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """Fraction of the top ``k`` ranks that hold a relevant id (trec_eval ``P_k``).

    ``P@k = |relevant ids in the top k| / k``. With ``k=None`` the denominator is the length
    of the ranked list. As in trec_eval, the denominator stays ``k`` when fewer than ``k``
    ids were retrieved. An empty ranking with ``k=None`` gives 0.0.

    Examples
    --------
    >>> precision_at_k(["doc1", "doc2", "doc3", "doc4", "doc5"], {"doc1", "doc3", "doc7"}, k=5)
    0.4
    >>> precision_at_k(["doc1", "doc2"], {"doc1"}, k=4)  # 1 relevant / k=4
    0.25
    """
    k = _check_k(k)
    return float(_precision(_single(retrieved_ids, relevant), k)[0])


def recall_at_k(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """Fraction of the relevant ids found in the top ``k`` ranks (trec_eval ``recall_k``).

    ``recall@k = |relevant ids in the top k| / |relevant ids|``; 0.0 when nothing is relevant.

    Examples
    --------
    >>> round(recall_at_k(["doc1", "doc2", "doc3", "doc4", "doc5"], {"doc1", "doc3", "doc7"}), 4)
    0.6667
    >>> recall_at_k(["doc1", "doc2", "doc3"], {"doc1", "doc3"}, k=2)
    0.5
    """
    k = _check_k(k)
    return float(_recall(_single(retrieved_ids, relevant), k)[0])


def hit_rate(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """1.0 if any relevant id is in the top ``k`` ranks, else 0.0.

    ``hit@k = 1[|relevant ids in the top k| > 0]``; averaged over queries this is the hit rate.

    Examples
    --------
    >>> hit_rate(["doc4", "doc3"], {"doc3"})
    1.0
    >>> hit_rate(["doc4", "doc3"], {"doc3"}, k=1)
    0.0
    """
    k = _check_k(k)
    return float(_hit_rate(_single(retrieved_ids, relevant), k)[0])


def mrr(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """Reciprocal rank of the first relevant id in the top ``k`` (trec_eval ``recip_rank``).

    ``RR = 1 / rank of the first relevant id`` (ranks start at 1); 0.0 when no relevant id
    is in the top ``k``. Its mean over queries is the MRR (:func:`mean_reciprocal_rank`).

    Examples
    --------
    >>> mrr(["doc4", "doc3", "doc1"], {"doc1", "doc3"})
    0.5
    >>> mrr(["doc4", "doc3", "doc1"], {"doc1", "doc3"}, k=1)
    0.0
    """
    k = _check_k(k)
    return float(_reciprocal_rank(_single(retrieved_ids, relevant), k)[0])


def mean_reciprocal_rank(queries: Iterable[tuple[Sequence, Relevant]], k: int | None = None) -> float:
    """Mean over queries of :func:`mrr`: ``MRR = (1/|Q|) * sum_q 1 / rank_q``.

    Parameters
    ----------
    queries : iterable of (retrieved_ids, relevant) pairs
        One pair per query; a query with no relevant id in its top ``k`` contributes 0.
    k : int, optional
        Only the top ``k`` ranks of each query are searched.

    Examples
    --------
    First relevant id at rank 2, nowhere, and rank 3: (1/2 + 0 + 1/3) / 3.

    >>> round(mean_reciprocal_rank([
    ...     (["a", "b", "c"], {"b"}),
    ...     (["a", "b", "c"], {"z"}),
    ...     (["a", "b", "c"], {"c"}),
    ... ]), 4)
    0.2778
    """
    k = _check_k(k)
    if isinstance(queries, (str, bytes, Mapping)) or not isinstance(queries, Iterable):
        raise TypeError("queries must be an iterable of (retrieved_ids, relevant) pairs, "
                        f"got {type(queries).__name__}")
    runs, qrels = [], []
    for i, pair in enumerate(queries):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise TypeError(f"queries[{i}] must be a (retrieved_ids, relevant) pair")
        runs.append(pair[0])
        qrels.append(pair[1])
    if not runs:
        raise ValueError("queries is empty; the mean over zero queries is undefined")
    return float(np.mean(batch_mrr(relevance_matrix(runs, qrels), k)))


def average_precision(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """Average precision (trec_eval ``map`` per query; ``map_cut_k`` with ``k``).

    ``AP@k = (1 / |relevant ids|) * sum over ranks r <= k holding a relevant id of P@r``.
    Relevant ids never retrieved contribute 0 precision; 0.0 when nothing is relevant.

    Examples
    --------
    Relevant at ranks 1 and 3 of 3 relevant ids: (1/1 + 2/3) / 3.

    >>> round(average_precision(["doc1", "doc2", "doc3", "doc4", "doc5"], {"doc1", "doc3", "doc7"}), 4)
    0.5556
    """
    k = _check_k(k)
    return float(_average_precision(_single(retrieved_ids, relevant), k)[0])


def ndcg_at_k(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """Normalised discounted cumulative gain with trec_eval's linear gain.

    ``DCG@k = sum_{r=1..k} gain_r / log2(r + 1)`` with ``gain_r`` the grade of the id at rank
    ``r`` (0 if unjudged, not positive, or a duplicate); ``IDCG@k`` is the same sum over all
    positive judged grades sorted descending, cut at ``k``; ``NDCG@k = DCG@k / IDCG@k``
    (0.0 when IDCG is 0). ``k=None`` uses the whole ranking and the whole ideal list, which is
    trec_eval's ``ndcg``; ``k=10`` is trec_eval's ``ndcg_cut_10``. A set of relevant ids means
    binary gains (1 each).

    Examples
    --------
    Graded: DCG = 1 + 2/log2(3), IDCG = 2 + 1/log2(3).

    >>> round(ndcg_at_k(["a", "b", "c"], {"a": 1, "b": 2, "x": 0}), 4)
    0.8597
    >>> round(ndcg_at_k(["doc1", "doc2"], {"doc1", "doc9"}, k=2), 4)  # 1 / (1 + 1/log2(3))
    0.6131
    """
    k = _check_k(k)
    return float(_ndcg(_single(retrieved_ids, relevant), k)[0])


def r_precision(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """Precision at rank R, R = number of relevant ids (trec_eval ``Rprec``).

    ``R-prec = |relevant ids in the top R| / R``; 0.0 when nothing is relevant. With ``k``,
    the ranking is first cut to its top ``k`` (so the top ``min(R, k)`` ranks are counted).

    Examples
    --------
    >>> r_precision(["doc1", "doc2", "doc3", "doc4", "doc5"], {"doc1", "doc3", "doc7"})  # 2 of top 3
    0.6666666666666666
    """
    k = _check_k(k)
    return float(_r_precision(_single(retrieved_ids, relevant), k)[0])


def context_precision(verdicts: Sequence) -> float:
    """Rank-aware precision of retrieved chunks from binary relevance verdicts.

    ``CP = sum_k (P@k * v_k) / sum_k v_k`` over the chunks in retrieval order, where
    ``v_k`` is 1 when chunk ``k`` was judged relevant and ``P@k`` is the fraction of
    relevant chunks among the first ``k``. It is the average precision over the
    relevant chunks that were retrieved. 0.0 when no chunk is relevant.

    Parameters
    ----------
    verdicts : sequence of bool or 0/1
        One verdict per retrieved chunk, in retrieval order; must not be empty.

    Examples
    --------
    >>> round(context_precision([0, 1, 1, 0, 0]), 4)  # (1/2 + 2/3) / 2
    0.5833
    >>> context_precision([False, False])
    0.0
    """
    if isinstance(verdicts, (str, bytes, Set, Mapping)) or not isinstance(verdicts, (Sequence, np.ndarray)):
        raise TypeError("verdicts must be a sequence of 0/1 or bool values in retrieval order, "
                        f"got {type(verdicts).__name__}")
    values = list(verdicts.tolist() if isinstance(verdicts, np.ndarray) else verdicts)
    if not values:
        raise ValueError("verdicts is empty; context precision needs at least one retrieved chunk")
    total, hits = 0.0, 0
    for i, v in enumerate(values):
        if isinstance(v, np.generic):  # numpy bool / int / float scalars
            v = v.item()
        if v is None:
            raise ValueError(f"verdicts[{i}] is None; each verdict must be 0/1 or a bool")
        if not isinstance(v, Real) or v not in (0, 1):
            raise ValueError(f"verdicts[{i}] is {v!r}; each verdict must be 0/1 or a bool")
        if v:
            hits += 1
            total += hits / (i + 1)
    return total / hits if hits else 0.0


# --------------------------------------------------------------------------------------
# batched metrics
# --------------------------------------------------------------------------------------

def batch_precision_at_k(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`precision_at_k` of every query: ``|relevant in top k| / k`` (``k=None``: / list length).

    Returns an array of shape (n_queries,).

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c"}, {"y"}])
    >>> batch_precision_at_k(m, k=2).tolist()
    [0.5, 0.5]
    >>> batch_precision_at_k(m).tolist()
    [0.6666666666666666, 0.5]
    """
    k = _check_k(k)
    return _precision(_check_matrix(matrix), k)


def batch_recall_at_k(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`recall_at_k` of every query: ``|relevant in top k| / |relevant|`` (0.0 if none relevant).

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c"}, {"y", "z"}])
    >>> batch_recall_at_k(m, k=1).tolist()
    [0.5, 0.0]
    """
    k = _check_k(k)
    return _recall(_check_matrix(matrix), k)


def batch_hit_rate(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`hit_rate` of every query: ``1[|relevant in top k| > 0]``; its mean is the hit rate.

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"c"}, {"y"}])
    >>> batch_hit_rate(m, k=2).tolist()
    [0.0, 1.0]
    """
    k = _check_k(k)
    return _hit_rate(_check_matrix(matrix), k)


def batch_mrr(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Reciprocal rank of every query: ``1 / rank of the first relevant id`` (0.0 if none in top k).

    ``batch_mrr(m, k).mean()`` is the mean reciprocal rank.

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"]] * 3, [{"b"}, {"z"}, {"c"}])
    >>> batch_mrr(m).tolist()
    [0.5, 0.0, 0.3333333333333333]
    >>> round(float(batch_mrr(m).mean()), 4)
    0.2778
    """
    k = _check_k(k)
    return _reciprocal_rank(_check_matrix(matrix), k)


def batch_average_precision(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`average_precision` of every query: ``(1/|relevant|) * sum_{relevant r <= k} P@r``.

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c", "z"}, {"y"}])
    >>> [round(v, 4) for v in batch_average_precision(m).tolist()]
    [0.5556, 0.5]
    """
    k = _check_k(k)
    return _average_precision(_check_matrix(matrix), k)


def batch_ndcg_at_k(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`ndcg_at_k` of every query: ``DCG@k / IDCG@k`` with gain = grade, discount ``log2(r + 1)``.

    ``k=None`` is trec_eval's ``ndcg`` (whole ranking, whole ideal list), ``k=10`` its ``ndcg_cut_10``.

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"], ["x"]], [{"a": 1, "b": 2}, {"y": 3}])
    >>> [round(v, 4) for v in batch_ndcg_at_k(m).tolist()]
    [0.8597, 0.0]
    """
    k = _check_k(k)
    return _ndcg(_check_matrix(matrix), k)


def batch_r_precision(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`r_precision` of every query: ``|relevant in top R| / R``, R = number of relevant ids.

    Examples
    --------
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c"}, {"y"}])
    >>> batch_r_precision(m).tolist()
    [0.5, 0.0]
    """
    k = _check_k(k)
    return _r_precision(_check_matrix(matrix), k)
