"""Ranked lists and relevance judgements, checked and laid out for the retrieval metrics.

:func:`rank_by_score` turns a run given as ``{id: score}`` into a ranked list the way trec_eval
does; :func:`relevance_matrix` lays out many (ranking, judgements) pairs as a
:class:`RelevanceMatrix`, the input of the vectorised metrics in
:mod:`ragmeter.metrics.retrieval_batch`; :func:`query_matrix` is the one-row matrix of a single
query. The metrics themselves, and what a ranking and judgements may be, are documented in
:mod:`ragmeter.metrics.retrieval`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, Union

import numpy as np

__all__ = ["RELEVANCE_LEVEL", "Relevant", "RelevanceMatrix", "rank_by_score", "relevance_matrix", "query_matrix",
           "check_k"]

#: An id counts as relevant when its grade is at least this (trec_eval's default ``-l 1``).
RELEVANCE_LEVEL = 1.0

Relevant = Union[Mapping[Hashable, float], Iterable[Hashable]]


# --------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------

def check_k(k: Any) -> int | None:
    """``k`` as an int, or None; raises TypeError / ValueError unless it is None or a positive int."""
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


def query_matrix(retrieved_ids: Any, relevant: Any) -> RelevanceMatrix:
    """The one-row :class:`RelevanceMatrix` of a single query (errors name ``retrieved_ids`` and
    ``relevant``), stored to the full length of the ranking.

    >>> query_matrix(["a", "b", "a"], {"a"}).grades.tolist()
    [[1.0, 0.0, 0.0]]
    """
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
    >>> from ragmeter.metrics.retrieval import batch_precision_at_k
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
