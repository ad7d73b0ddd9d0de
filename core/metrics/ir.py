"""Internal: Retrieval metrics as :class:`Metric` objects, so ``evaluate()`` and the CLI can run them.

The arithmetic lives in :mod:`ragmeter.metrics.retrieval` (identical to trec_eval); this module
only reads the retrieved ids (the contexts' ids, in order) and ``Sample.relevant_ids``.
"""

from __future__ import annotations

from ragmeter.data import Sample, Score
from ragmeter.ids import content_hashed, is_content_id
from ragmeter.metrics import retrieval
from ragmeter.metrics.base import Metric
from ragmeter.metrics.requests import ScoringContext

__all__ = ["RetrievalMetric"]

# name -> (function, takes k, default pass threshold, default warn level)
_FUNCTIONS = {
    "precision": (retrieval.precision_at_k, True, 0.5, 0.3),
    "recall": (retrieval.recall_at_k, True, 0.8, 0.6),
    "hit_rate": (retrieval.hit_rate, True, 1.0, 1.0),
    "mrr": (retrieval.mrr, False, 0.5, 0.33),
    "map": (retrieval.average_precision, False, 0.7, 0.5),
    "ndcg": (retrieval.ndcg_at_k, True, 0.7, 0.5),
    "r_precision": (retrieval.r_precision, False, 0.5, 0.3),
}


class RetrievalMetric(Metric):
    """A deterministic retrieval metric on one sample: ``RetrievalMetric("ndcg", k=10)``.

    Names: precision, recall, hit_rate, ndcg (take ``k``; None = the whole list), mrr, map
    (average precision of the sample; the mean over samples is MAP), r_precision. The
    retrieved list is the contexts' ids in order; relevance comes from ``relevant_ids`` (ids, or
    id -> grade for graded NDCG). Formulas: see :mod:`ragmeter.metrics.retrieval`. A sample
    without ``relevant_ids`` is not applicable; contexts without ids are an error. When contexts
    carry content-hash ids (:mod:`ragmeter.ids`: the source recorded no chunk id, e.g. a trace of
    OpenInference's LangChain instrumentation) the explanation says so, and ``details`` counts
    them (``content_hash_ids``): such ids match ``relevant_ids`` made with
    :func:`ragmeter.ids.content_id` from the relevant chunks' texts, nothing else.

    Default thresholds (pass / warn): precision 0.5/0.3, recall 0.8/0.6, hit_rate 1.0/1.0,
    mrr 0.5/0.33 (first relevant chunk at rank 1-2 passes, rank 3 warns), map 0.7/0.5,
    ndcg 0.7/0.5, r_precision 0.5/0.3.
    """

    uses_judge = False
    reads_text = False
    requires = ("relevant_ids", "contexts")

    def __init__(self, kind: str, k: int | None = None, *, threshold: float | None = None, warn: float | None = None):
        if kind not in _FUNCTIONS:
            raise ValueError(f"unknown retrieval metric {kind!r}; known: {', '.join(_FUNCTIONS)}")
        fn, takes_k, default_pass, default_warn = _FUNCTIONS[kind]
        if k is not None:
            if not takes_k:
                raise ValueError(f"{kind} takes no cutoff (got @{k})")
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"{kind}: k must be a positive integer, got {k!r}")
        self.kind, self.k, self._fn, self._takes_k = kind, k, fn, takes_k
        self.name = f"{kind}@{k}" if k is not None else kind
        self.threshold, self.warn = default_pass, default_warn
        super().__init__(threshold=threshold, warn=warn)

    async def compute(self, sample: Sample, ctx: ScoringContext) -> Score:
        """Apply the retrieval function to the sample's context ids and ``relevant_ids``."""
        ids = sample.retrieved_ids
        missing = [c.rank for c in sample.contexts if c.id is None]
        if missing:
            raise ValueError(f"retrieval metrics need context ids; contexts at rank {missing} have none")
        relevant = sample.relevant_ids
        if not relevant:
            return Score(self.name, None, explanation="not applicable: relevant_ids is empty")
        value = self._fn(ids, relevant, self.k) if self._takes_k else self._fn(ids, relevant)
        graded = isinstance(relevant, dict)
        rel = {i for i, g in relevant.items() if g >= 1} if graded else set(relevant)
        cut = ids[: self.k] if self.k is not None else ids
        hits = [i for i in dict.fromkeys(cut) if i in rel]
        explanation = f"{len(hits)} of {len(rel)} relevant ids in the top {len(cut)} retrieved"
        details = {"k": self.k, "retrieved": len(ids), "relevant": len(rel), "relevant_retrieved": hits}
        hashed = content_hashed(sample.contexts)
        if hashed:
            details["content_hash_ids"] = hashed
            explanation += (
                f"; {hashed} of {len(ids)} chunk ids are content hashes (no chunk id was recorded): "
                "they match only relevant_ids made with ragmeter.ids.content_id(text)"
            )
            if not any(is_content_id(i) for i in rel):
                explanation += ", and none of the relevant_ids is one"
        return Score(self.name, value, explanation=explanation, details=details)
