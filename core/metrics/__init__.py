"""Metrics: judge-based RAG metrics, citation metrics and deterministic retrieval metrics.

Classes are imported lazily. :func:`get_metric` turns a name (``"faithfulness"``,
``"ndcg@10"``) into a metric instance; :data:`METRIC_NAMES` lists the names.
"""

from __future__ import annotations

from .._lazy import lazy_getattr
from .base import Metric, ScoringContext, label_for

_LAZY = {
    "Faithfulness": ".faithfulness",
    "HallucinatedSpecifics": ".faithfulness",
    "AnswerRelevancy": ".answer",
    "AnswerCorrectness": ".answer",
    "ResponseCompleteness": ".answer",
    "ContextRelevance": ".context",
    "ContextPrecision": ".context",
    "ContextRecall": ".context",
    "EntityRecall": ".context",
    "CitationAccuracy": ".citation",
    "CitationPrecision": ".citation",
    "CitationRecall": ".citation",
    "RetrievalMetric": ".ir",
    "retrieval": ".retrieval",
}

#: Judge-based metric names accepted by :func:`get_metric` and the CLI, with their classes.
JUDGE_METRICS = {
    "faithfulness": "Faithfulness",
    "answer_relevancy": "AnswerRelevancy",
    "context_relevance": "ContextRelevance",
    "context_precision": "ContextPrecision",
    "context_recall": "ContextRecall",
    "answer_correctness": "AnswerCorrectness",
    "response_completeness": "ResponseCompleteness",
    "entity_recall": "EntityRecall",
    "hallucinated_specifics": "HallucinatedSpecifics",
    "citation_accuracy": "CitationAccuracy",
    "citation_precision": "CitationPrecision",
    "citation_recall": "CitationRecall",
}

#: Deterministic retrieval metric names; those marked ``@k`` take a cutoff (``precision@5``).
RETRIEVAL_METRICS = ("precision@k", "recall@k", "hit_rate@k", "mrr", "map", "ndcg@k", "r_precision")

METRIC_NAMES = tuple(JUDGE_METRICS) + RETRIEVAL_METRICS

#: What ``evaluate()`` runs when no metrics are given (retrieval metrics are added for samples
#: that carry ``relevant_ids``).
DEFAULT_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevance")
DEFAULT_RETRIEVAL_METRICS = ("precision@5", "recall@5", "mrr", "ndcg@10")

__all__ = ["Metric", "ScoringContext", "label_for", "get_metric", "METRIC_NAMES", "DEFAULT_METRICS", *_LAZY]

__getattr__ = lazy_getattr(__name__, _LAZY, modules=("retrieval",))


def get_metric(spec: "str | Metric") -> Metric:
    """A metric from its name: ``"faithfulness"``, ``"context_precision"``, ``"precision@5"``,
    ``"ndcg@10"``, ``"mrr"`` ... (see :data:`METRIC_NAMES`). Metric instances pass through."""
    if isinstance(spec, Metric):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a metric is a Metric instance or a name, got {type(spec).__name__}")
    name = spec.strip().lower().replace("-", "_")
    if name in JUDGE_METRICS:
        return __getattr__(JUDGE_METRICS[name])()
    base, _, k = name.partition("@")
    if base in {m.split("@")[0] for m in RETRIEVAL_METRICS}:
        from .ir import RetrievalMetric

        return RetrievalMetric(base, k=int(k) if k else None)
    raise ValueError(f"unknown metric {spec!r}; known: {', '.join(METRIC_NAMES)}")
