"""Internal: Ranked lists and relevance judgements, checked and laid out for the retrieval metrics.

:func:`rank_by_score` turns a run given as ``{id: score}`` into a ranked list the way trec_eval
does; :func:`relevance_matrix` lays out many (ranking, judgements) pairs as a
:class:`RelevanceMatrix`, the input of the vectorised metrics in
:mod:`ragmeter.metrics.retrieval_batch`; :func:`query_matrix` is the one-row matrix of a single
query. The metrics themselves, and what a ranking and judgements may be, are documented in
:mod:`ragmeter.metrics.retrieval`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from itertools import chain, repeat
from numbers import Integral, Real
from typing import Any

import numpy as np

__all__ = [
    "RELEVANCE_LEVEL",
    "Relevant",
    "RelevanceMatrix",
    "rank_by_score",
    "relevance_matrix",
    "query_matrix",
    "check_k",
]

#: An id counts as relevant when its grade is at least this (trec_eval's default ``-l 1``).
RELEVANCE_LEVEL = 1.0

Relevant = Mapping[Hashable, float] | Iterable[Hashable]


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
        raise TypeError(
            f"{where} is an unhashable {type(value).__name__}; ids must be hashable values such as str or int"
        ) from None


def _as_ranking(ids: Any, name: str) -> list:
    """Validate a ranked list of ids and return it as a list."""
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must be a ranked sequence of ids (e.g. a list), not a single {type(ids).__name__}")
    if isinstance(ids, (Set, Mapping)):
        raise TypeError(f"{name} must be an ordered sequence of ids, best first; got an unordered {type(ids).__name__}")
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1:
            raise ValueError(f"{name} must be 1-dimensional, got an array of shape {ids.shape}")
        ids = ids.tolist()
    elif not isinstance(ids, Sequence):
        raise TypeError(f"{name} must be an ordered sequence of ids (list or tuple), got {type(ids).__name__}")
    ids = list(ids)
    for i, doc in enumerate(ids):
        _check_id(doc, f"{name}[{i}]")
    return ids


def _as_grades(relevant: Any, name: str) -> dict:
    """Validate relevance judgements and return them as ``{id: float grade}``."""
    if isinstance(relevant, (str, bytes)):
        raise TypeError(
            f"{name} must be a collection of relevant ids or a dict id -> grade, not a single {type(relevant).__name__}"
        )
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
        raise TypeError(
            f"{name} must be a collection of relevant ids or a dict id -> grade, got {type(relevant).__name__}"
        )
    for doc in relevant:
        _check_id(doc, f"an id in {name}")
        grades[doc] = 1.0
    return grades


def _plain_ids(ids: Iterable) -> bool:
    """True when every id is a str, or every id an int: valid and mutually comparable, no per-id check needed."""
    types = set(map(type, ids))
    return types <= {str} or types <= {int}


def _plain_numbers(values: Iterable) -> bool:
    """True when every value is a finite int or float (not a bool), checked in bulk."""
    if not set(map(type, values)) <= {int, float}:
        return False
    try:
        return all(map(math.isfinite, values))
    except OverflowError:
        return False


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
        grades[q, : len(row)] = row
        ideal[q, : len(best)] = best
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
    if not _plain_ids(scores) or not _plain_numbers(scores.values()):
        for doc, s in scores.items():  # name the first bad id or score
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
        raise TypeError(
            "ids with equal scores must be comparable to break the tie (use ids of one type, e.g. all str)"
        ) from None


def relevance_matrix(runs: Mapping | Sequence, qrels: Mapping | Sequence, depth: int | None = None) -> RelevanceMatrix:
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

    Runs that are all plain dicts (or all lists / tuples) and qrels that are all plain dicts (or
    all sets) are checked and laid out in bulk with numpy (100,000 queries x 100 documents in
    under 3 s, faster than pytrec_eval: ``benchmarks/ir_speed.py``); any other input, or any
    invalid value, goes query by query, and the error names the query and the id.

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
            raise TypeError(
                "runs is a dict query_id -> ranking, so qrels must be a dict "
                f"query_id -> relevant too, got {type(qrels).__name__}"
            )
        query_ids = tuple(runs)
        for q in query_ids:
            if q not in qrels:
                raise ValueError(f"qrels has no judgements for query {q!r} of runs")
        run_list, qrel_list = list(runs.values()), [qrels[q] for q in query_ids]
        names: Iterable[tuple[str, str]] = ((f"runs[{q!r}]", f"qrels[{q!r}]") for q in query_ids)
    elif isinstance(runs, Sequence) and not isinstance(runs, (str, bytes)):
        if isinstance(qrels, Mapping) or not isinstance(qrels, Sequence) or isinstance(qrels, (str, bytes)):
            raise TypeError(
                "runs is a sequence of rankings, so qrels must be a sequence of the "
                f"same length, got {type(qrels).__name__}"
            )
        if len(runs) != len(qrels):
            raise ValueError(f"runs has {len(runs)} rankings but qrels has {len(qrels)} entries")
        query_ids = tuple(range(len(runs)))
        run_list, qrel_list = list(runs), list(qrels)
        names = ((f"runs[{i}]", f"qrels[{i}]") for i in query_ids)
    else:
        raise TypeError(f"runs must be a dict query_id -> ranking or a sequence of rankings, got {type(runs).__name__}")
    if not run_list:
        raise ValueError("runs is empty; need at least one query")
    fast = _bulk_matrix(query_ids, run_list, qrel_list, depth)
    if fast is not None:
        return fast
    # per-query path: any input the bulk path does not take, and the error naming the bad value
    names = list(names)
    rankings = [
        rank_by_score(run) if isinstance(run, Mapping) else _as_ranking(run, where)
        for run, (where, _) in zip(run_list, names)
    ]
    rows = [
        _row(ranking, _as_grades(rel, where), depth) for ranking, rel, (_, where) in zip(rankings, qrel_list, names)
    ]
    if depth is None:
        depth = max(1, max(len(r) for r in rankings))
    return _pack(query_ids, rows, depth)


def _lookup(ranking: dict, relevant: dict | set) -> Iterable:
    """The grade of each id of ``ranking`` in ``relevant`` (0 if unjudged)."""
    if isinstance(relevant, dict):
        return map(relevant.get, ranking, repeat(0.0))
    return map(relevant.__contains__, ranking)


def _lookup_first(ranking: list | tuple, relevant: dict | set) -> Iterable:
    """Like :func:`_lookup`, but a later duplicate of an id in ``ranking`` gets 0."""
    remaining = dict(relevant) if isinstance(relevant, dict) else dict.fromkeys(relevant, 1.0)
    return map(remaining.pop, ranking, repeat(0.0))


def _break_ties(order: np.ndarray, same: np.ndarray, runs: list, lengths: np.ndarray) -> np.ndarray | None:
    """``order`` (columns by score) with each run of equal scores re-ordered by id, descending;
    None when tied ids cannot be compared. ``same[q, r]``: rank r + 2 ties rank r + 1."""
    left = np.pad(same, ((0, 0), (1, 0)))  # ties the rank before it
    flat = np.flatnonzero(left | np.pad(same, ((0, 0), (0, 1))))  # tied cells, row-major
    cols = order.ravel()[flat]
    ids = list(chain.from_iterable(runs))
    starts = np.cumsum(lengths) - lengths
    tied_ids = [ids[i] for i in (starts[flat // order.shape[1]] + cols).tolist()]
    try:
        uniq = sorted(set(tied_ids))
    except TypeError:  # e.g. str and int ids tie somewhere: the per-query path sorts each query alone
        return None
    code = dict(zip(uniq, range(len(uniq))))
    codes = np.fromiter(map(code.__getitem__, tied_ids), dtype=np.int64, count=len(tied_ids))
    group = np.cumsum(~left.ravel()[flat])  # tied cells of one group are consecutive in ``flat``
    out = order.copy()
    out.ravel()[flat] = cols[np.lexsort((-codes, group))]
    return out


def _bulk_matrix(query_ids: tuple, runs: list, qrels: list, depth: int | None) -> RelevanceMatrix | None:
    """:func:`relevance_matrix` of the common case with numpy, or None to take the per-query path.

    Takes runs that are all ``{id: score}`` dicts or all lists/tuples of ids, and qrels that
    are all ``{id: grade}`` dicts or all sets of ids, with every score and grade a finite int or
    float and no id None, checked in bulk. Anything else (including any invalid value, whose
    error the per-query path names) returns None. The matrix is the per-query path's, value for
    value.
    """
    run_types = set(map(type, runs))
    if run_types <= {dict}:
        scored = True
    elif run_types <= {list, tuple}:
        scored = False
    else:
        return None
    qrel_types = set(map(type, qrels))
    if qrel_types <= {dict}:
        grade_list = list(chain.from_iterable(map(dict.values, qrels)))
        if not set(map(type, grade_list)) <= {int, float, bool}:
            return None
        grade_arr = np.fromiter(grade_list, dtype=float, count=len(grade_list))
    elif qrel_types <= {set, frozenset}:
        grade_arr = np.ones(sum(map(len, qrels)))
    else:
        return None
    try:
        if any(map(operator.contains, qrels, repeat(None))) or any(map(operator.contains, runs, repeat(None))):
            return None
    except (TypeError, ValueError):  # an id whose == is not a bool (e.g. an array)
        return None
    n = len(runs)
    lengths = np.fromiter(map(len, runs), dtype=np.int64, count=n)
    total = int(lengths.sum())
    try:
        if scored:
            score_list = list(chain.from_iterable(map(dict.values, runs)))
            if not set(map(type, score_list)) <= {int, float}:
                return None
            scores = np.fromiter(score_list, dtype=float, count=total)
        # the grade of each retrieved id, in the order given (a later duplicate in a list: 0)
        found = np.fromiter(
            chain.from_iterable(map(_lookup if scored else _lookup_first, runs, qrels)), dtype=float, count=total
        )
    except (OverflowError, TypeError):  # an int too large for a float; an unhashable id in a list
        return None
    if not (np.isfinite(grade_arr).all() and (not scored or np.isfinite(scores).all())):
        return None
    width = max(1, int(lengths.max()))
    if total == n * width:  # every ranking has the same length
        grades = found.reshape(n, width)
    else:
        valid = np.arange(width) < lengths[:, None]  # row-major order of valid cells = order of ids
        grades = np.zeros((n, width))
        grades[valid] = found
    if scored:  # trec_eval's order: score descending, ties by id descending
        if total == n * width:
            key = -scores.reshape(n, width)
        else:
            key = np.full((n, width), np.inf)
            key[valid] = -scores
        order = np.argsort(key, axis=1)
        ranked = np.take_along_axis(key, order, axis=1)
        same = (ranked[:, 1:] == ranked[:, :-1]) & np.isfinite(ranked[:, 1:])  # rank r+1 ties rank r
        if same.any():
            untied = _break_ties(order, same, runs, lengths)
            if untied is None:
                return None
            order = untied
        grades = np.take_along_axis(grades, order, axis=1)
    rel_rows = np.repeat(np.arange(n), np.fromiter(map(len, qrels), dtype=np.int64, count=n))
    depth = width if depth is None else depth
    if depth > width:
        grades = np.hstack([grades, np.zeros((n, depth - width))])
    grades = np.ascontiguousarray(grades[:, :depth])
    n_rel = np.bincount(rel_rows, weights=grade_arr >= RELEVANCE_LEVEL, minlength=n).astype(np.int64)
    # ideal gains: each query's positive grades, descending, zero-padded
    pos = grade_arr > 0.0
    pos_rows, pos_grades = rel_rows[pos], grade_arr[pos]
    ideal_order = np.lexsort((-pos_grades, pos_rows))
    pos_rows, pos_grades = pos_rows[ideal_order], pos_grades[ideal_order]
    counts = np.bincount(pos_rows, minlength=n)
    ideal = np.zeros((n, max(1, int(counts.max(initial=0)))))
    ideal[pos_rows, np.arange(pos_rows.size) - np.repeat(np.cumsum(counts) - counts, counts)] = pos_grades
    for a in (grades, ideal, lengths, n_rel):
        a.setflags(write=False)
    return RelevanceMatrix(query_ids, grades, lengths, n_rel, ideal)
