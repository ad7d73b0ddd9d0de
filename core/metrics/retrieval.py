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
results. This module is the public one and re-exports them: the matrix and the input checks
live in :mod:`ragmeter.metrics.relevance`, the vectorised kernels and ``batch_*`` functions in
:mod:`ragmeter.metrics.retrieval_batch`.

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

from collections.abc import Iterable, Mapping, Sequence, Set
from numbers import Real

import numpy as np

from ragmeter.metrics.relevance import (
    RELEVANCE_LEVEL,
    RelevanceMatrix,
    Relevant,
    check_k,
    query_matrix,
    rank_by_score,
    relevance_matrix,
)
from ragmeter.metrics.retrieval_batch import (
    batch_average_precision,
    batch_hit_rate,
    batch_mrr,
    batch_ndcg_at_k,
    batch_precision_at_k,
    batch_r_precision,
    batch_recall_at_k,
)

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
    k = check_k(k)
    return float(batch_precision_at_k(query_matrix(retrieved_ids, relevant), k)[0])


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
    k = check_k(k)
    return float(batch_recall_at_k(query_matrix(retrieved_ids, relevant), k)[0])


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
    k = check_k(k)
    return float(batch_hit_rate(query_matrix(retrieved_ids, relevant), k)[0])


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
    k = check_k(k)
    return float(batch_mrr(query_matrix(retrieved_ids, relevant), k)[0])


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
    k = check_k(k)
    if isinstance(queries, (str, bytes, Mapping)) or not isinstance(queries, Iterable):
        raise TypeError(f"queries must be an iterable of (retrieved_ids, relevant) pairs, got {type(queries).__name__}")
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
    k = check_k(k)
    return float(batch_average_precision(query_matrix(retrieved_ids, relevant), k)[0])


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
    k = check_k(k)
    return float(batch_ndcg_at_k(query_matrix(retrieved_ids, relevant), k)[0])


def r_precision(retrieved_ids: Sequence, relevant: Relevant, k: int | None = None) -> float:
    """Precision at rank R, R = number of relevant ids (trec_eval ``Rprec``).

    ``R-prec = |relevant ids in the top R| / R``; 0.0 when nothing is relevant. With ``k``,
    the ranking is first cut to its top ``k`` (so the top ``min(R, k)`` ranks are counted).

    Examples
    --------
    >>> r_precision(["doc1", "doc2", "doc3", "doc4", "doc5"], {"doc1", "doc3", "doc7"})  # 2 of top 3
    0.6666666666666666
    """
    k = check_k(k)
    return float(batch_r_precision(query_matrix(retrieved_ids, relevant), k)[0])


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
        raise TypeError(
            f"verdicts must be a sequence of 0/1 or bool values in retrieval order, got {type(verdicts).__name__}"
        )
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
