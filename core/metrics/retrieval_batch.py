"""Internal: Retrieval metrics of many queries at once, vectorised with numpy over a :class:`RelevanceMatrix`.

Each ``batch_*`` function returns the per-query values of its single-query counterpart in
:mod:`ragmeter.metrics.retrieval` (which runs the same kernels on a one-row matrix, so both give
bit-identical results) as an array of shape (n_queries,). Build the matrix once with
:func:`~ragmeter.metrics.relevance.relevance_matrix` and compute every metric from it.

>>> from ragmeter.metrics.retrieval import relevance_matrix
>>> m = relevance_matrix({"q1": ["a", "b", "c"], "q2": ["x", "y"]}, {"q1": {"a", "c"}, "q2": {"y"}})
>>> batch_precision_at_k(m, k=2).tolist(), batch_mrr(m).tolist()
([0.5, 0.5], [1.0, 0.5])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ragmeter.metrics.relevance import RELEVANCE_LEVEL, RelevanceMatrix, check_k

__all__ = [
    "batch_precision_at_k",
    "batch_recall_at_k",
    "batch_hit_rate",
    "batch_mrr",
    "batch_average_precision",
    "batch_ndcg_at_k",
    "batch_r_precision",
]


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


def _safe_div(num: np.ndarray, den: np.ndarray | float) -> np.ndarray:
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
        raise ValueError(
            f"{what} needs the top {int(needed[q])} ranks of query {m.query_ids[q]!r}, "
            f"but the RelevanceMatrix stores only depth={m.depth}; "
            "rebuild it with a larger depth (or depth=None)"
        )


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
# batched metrics
# --------------------------------------------------------------------------------------


def batch_precision_at_k(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`precision_at_k` of every query: ``|relevant in top k| / k`` (``k=None``: / list length).

    Returns an array of shape (n_queries,).

    Examples
    --------
    >>> from ragmeter.metrics.retrieval import relevance_matrix
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c"}, {"y"}])
    >>> batch_precision_at_k(m, k=2).tolist()
    [0.5, 0.5]
    >>> batch_precision_at_k(m).tolist()
    [0.6666666666666666, 0.5]
    """
    k = check_k(k)
    return _precision(_check_matrix(matrix), k)


def batch_recall_at_k(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`recall_at_k` of every query: ``|relevant in top k| / |relevant|`` (0.0 if none relevant).

    Examples
    --------
    >>> from ragmeter.metrics.retrieval import relevance_matrix
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c"}, {"y", "z"}])
    >>> batch_recall_at_k(m, k=1).tolist()
    [0.5, 0.0]
    """
    k = check_k(k)
    return _recall(_check_matrix(matrix), k)


def batch_hit_rate(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`hit_rate` of every query: ``1[|relevant in top k| > 0]``; its mean is the hit rate.

    Examples
    --------
    >>> from ragmeter.metrics.retrieval import relevance_matrix
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"c"}, {"y"}])
    >>> batch_hit_rate(m, k=2).tolist()
    [0.0, 1.0]
    """
    k = check_k(k)
    return _hit_rate(_check_matrix(matrix), k)


def batch_mrr(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Reciprocal rank of every query: ``1 / rank of the first relevant id`` (0.0 if none in top k).

    ``batch_mrr(m, k).mean()`` is the mean reciprocal rank.

    Examples
    --------
    >>> from ragmeter.metrics.retrieval import relevance_matrix
    >>> m = relevance_matrix([["a", "b", "c"]] * 3, [{"b"}, {"z"}, {"c"}])
    >>> batch_mrr(m).tolist()
    [0.5, 0.0, 0.3333333333333333]
    >>> round(float(batch_mrr(m).mean()), 4)
    0.2778
    """
    k = check_k(k)
    return _reciprocal_rank(_check_matrix(matrix), k)


def batch_average_precision(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`average_precision` of every query: ``(1/|relevant|) * sum_{relevant r <= k} P@r``.

    Examples
    --------
    >>> from ragmeter.metrics.retrieval import relevance_matrix
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c", "z"}, {"y"}])
    >>> [round(v, 4) for v in batch_average_precision(m).tolist()]
    [0.5556, 0.5]
    """
    k = check_k(k)
    return _average_precision(_check_matrix(matrix), k)


def batch_ndcg_at_k(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`ndcg_at_k` of every query: ``DCG@k / IDCG@k`` with gain = grade, discount ``log2(r + 1)``.

    ``k=None`` is trec_eval's ``ndcg`` (whole ranking, whole ideal list), ``k=10`` its ``ndcg_cut_10``.

    Examples
    --------
    >>> from ragmeter.metrics.retrieval import relevance_matrix
    >>> m = relevance_matrix([["a", "b", "c"], ["x"]], [{"a": 1, "b": 2}, {"y": 3}])
    >>> [round(v, 4) for v in batch_ndcg_at_k(m).tolist()]
    [0.8597, 0.0]
    """
    k = check_k(k)
    return _ndcg(_check_matrix(matrix), k)


def batch_r_precision(matrix: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """:func:`r_precision` of every query: ``|relevant in top R| / R``, R = number of relevant ids.

    Examples
    --------
    >>> from ragmeter.metrics.retrieval import relevance_matrix
    >>> m = relevance_matrix([["a", "b", "c"], ["x", "y"]], [{"a", "c"}, {"y"}])
    >>> batch_r_precision(m).tolist()
    [0.5, 0.0]
    """
    k = check_k(k)
    return _r_precision(_check_matrix(matrix), k)
