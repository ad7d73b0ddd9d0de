"""Metrics: judge-based RAG metrics, citation metrics and deterministic retrieval metrics.

:data:`REGISTRY` is the one place a judged metric is registered: its name, and the module and
class that implement it. Everything else is generated from it and from the class's facts
(:class:`~ragmeter.metrics.base.Metric`'s attributes, read through :func:`metric_classes`):
:func:`get_metric`, the CLI's ``--metrics`` help, the diagnosis' signals, the monitor's default
floors and degradation rules, the labeling criteria, the profiles' levels and checks, the
drill-down's evidence and the LlamaIndex evaluator classes (``Ragmeter<Class>Evaluator``).
Classes are imported lazily.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ragmeter._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from ragmeter.metrics.base import Metric

#: Judged (and claim-level) metrics: name -> (module, class). Adding a metric is one line here, or
#: one entry point in another package (group ``ragmeter.metrics``, :mod:`ragmeter.plugins`).
REGISTRY: dict[str, tuple[str, str]] = {
    "faithfulness": ("ragmeter.metrics.faithfulness", "Faithfulness"),
    "answer_relevancy": ("ragmeter.metrics.answer", "AnswerRelevancy"),
    "context_relevance": ("ragmeter.metrics.context", "ContextRelevance"),
    "context_precision": ("ragmeter.metrics.context", "ContextPrecision"),
    "context_recall": ("ragmeter.metrics.context", "ContextRecall"),
    "answer_correctness": ("ragmeter.metrics.answer", "AnswerCorrectness"),
    "response_completeness": ("ragmeter.metrics.answer", "ResponseCompleteness"),
    "entity_recall": ("ragmeter.metrics.context", "EntityRecall"),
    "hallucinated_specifics": ("ragmeter.metrics.faithfulness", "HallucinatedSpecifics"),
    "citation_accuracy": ("ragmeter.metrics.citation", "CitationAccuracy"),
    "citation_precision": ("ragmeter.metrics.citation", "CitationPrecision"),
    "citation_recall": ("ragmeter.metrics.citation", "CitationRecall"),
}

#: Deterministic string-overlap metrics of the answer against the reference (no judge; they reward
#: wording, not truth): name -> (module, class).
STRING_METRICS: dict[str, tuple[str, str]] = {
    "exact_match": ("ragmeter.metrics.strings", "ExactMatch"),
    "token_f1": ("ragmeter.metrics.strings", "TokenF1"),
    "rouge_l": ("ragmeter.metrics.strings", "RougeL"),
    "bleu": ("ragmeter.metrics.strings", "Bleu"),
}

#: Deterministic domain checks that the profiles add (:mod:`ragmeter.profiles`; no judge), usable on
#: their own like any metric (``metrics=["medical_advice"]``): name -> (module, class).
DOMAIN_METRICS: dict[str, tuple[str, str]] = {
    "legal_citations": ("ragmeter.metrics.domain", "LegalCitations"),
    "medical_advice": ("ragmeter.metrics.domain", "MedicalAdvice"),
}

#: Deterministic retrieval metric names; those marked ``@k`` take a cutoff (``precision@5``).
RETRIEVAL_METRICS = ("precision@k", "recall@k", "hit_rate@k", "mrr", "map", "ndcg@k", "r_precision")

#: Every metric name, plugins included (:func:`metric_names`, read when asked).
METRIC_NAMES: tuple[str, ...]

#: What ``evaluate()`` runs when no metrics are given (retrieval metrics are added for samples
#: that carry ``relevant_ids``).
DEFAULT_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevance")
DEFAULT_RETRIEVAL_METRICS = ("precision@5", "recall@5", "mrr", "ndcg@10")

_CLASSES = {cls: module for module, cls in REGISTRY.values()}
_CLASSES["RetrievalMetric"] = "ragmeter.metrics.ir"
_CLASSES.update({cls: module for module, cls in STRING_METRICS.values()})
_CLASSES.update({cls: module for module, cls in DOMAIN_METRICS.values()})
_CLASSES["Criteria"] = _CLASSES["FunctionMetric"] = "ragmeter.metrics.criteria"  # custom metrics (need arguments)

__all__ = [
    "Metric",
    "LabelingCriterion",
    "ScoringContext",
    "get_metric",
    "resolve_metrics",
    "metric_class",
    "metric_classes",
    "metric_names",
    "load_plugins",
    "metrics_help",
    "REGISTRY",
    "STRING_METRICS",
    "DOMAIN_METRICS",
    "METRIC_NAMES",
    "RETRIEVAL_METRICS",
    "DEFAULT_METRICS",
    "DEFAULT_RETRIEVAL_METRICS",
    "retrieval",
    *_CLASSES,
]


_lazy = lazy_getattr(
    __name__,
    {
        **_CLASSES,
        "Metric": "ragmeter.metrics.base",
        "LabelingCriterion": "ragmeter.metrics.base",
        "ScoringContext": "ragmeter.metrics.requests",
        "retrieval": "ragmeter.metrics.retrieval",
    },
    {"retrieval"},
)


def __getattr__(name: str) -> Any:
    """The metric classes (imported on first use) and ``METRIC_NAMES`` (:func:`metric_names`,
    plugins included)."""
    if name == "METRIC_NAMES":
        return metric_names()
    return _lazy(name)


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__))


_PLUGINS = threading.Lock()
_plugins_loaded = False


def _plugin_problem(name: str, obj: Any) -> str | None:
    """Why the object of the ``ragmeter.metrics`` entry point ``name`` is no metric to register."""
    from ragmeter.metrics.base import Metric

    if not (isinstance(obj, type) and issubclass(obj, Metric)):
        return f"expected a subclass of ragmeter.metrics.Metric, got {obj!r:.80}"
    if obj.name != name:
        return f"its class's name is {obj.name!r}, not the entry point's {name!r}"
    if getattr(importlib.import_module(obj.__module__), obj.__qualname__, None) is not obj:
        return "the class must be a module-level name of its module"
    if (
        name in REGISTRY
        or name in STRING_METRICS
        or name in DOMAIN_METRICS
        or name.partition("@")[0] in {m.split("@")[0] for m in RETRIEVAL_METRICS}
    ):
        return f"ragmeter already has a metric named {name!r}"
    return None


def load_plugins() -> None:
    """Register the metrics of installed plugins (the ``ragmeter.metrics`` entry-point group, see
    :mod:`ragmeter.plugins`) in :data:`REGISTRY`, once: each is then a metric like the built-in
    ones. Called by every lookup here; a plugin that cannot be registered is reported and left out."""
    global _plugins_loaded
    with _PLUGINS:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        from ragmeter.plugins import load_group

        def register(name: str, cls: Any) -> str | None:
            problem = _plugin_problem(name, cls)
            if problem is None:
                REGISTRY[name] = (cls.__module__, cls.__qualname__)
            return problem

        load_group("ragmeter.metrics", register)


def metric_names() -> tuple[str, ...]:
    """Every metric name: :data:`REGISTRY` (plugins included), :data:`STRING_METRICS`,
    :data:`DOMAIN_METRICS` and :data:`RETRIEVAL_METRICS` (``METRIC_NAMES``)."""
    load_plugins()
    return tuple(REGISTRY) + tuple(STRING_METRICS) + tuple(DOMAIN_METRICS) + RETRIEVAL_METRICS


def metric_class(name: str) -> type[Metric]:
    """The class registered under a metric's ``name`` (see :data:`REGISTRY`, :data:`STRING_METRICS`,
    :data:`DOMAIN_METRICS`; installed plugins included)."""
    load_plugins()
    for table in (REGISTRY, STRING_METRICS, DOMAIN_METRICS):
        if name in table:
            module, cls = table[name]
            return getattr(importlib.import_module(module), cls)
    raise KeyError(name)


def metric_classes() -> dict[str, type[Metric]]:
    """Every registered metric class by name (:data:`REGISTRY`, :data:`STRING_METRICS`,
    :data:`DOMAIN_METRICS`, in that order): where the diagnosis, the monitor, the labeling
    criteria, the profiles, reports and the integrations read a metric's facts (its class
    attributes, see :class:`~ragmeter.metrics.base.Metric`)."""
    load_plugins()
    return {name: metric_class(name) for table in (REGISTRY, STRING_METRICS, DOMAIN_METRICS) for name in table}


def get_metric(spec: str | Metric) -> Metric:
    """A metric from its name: ``"faithfulness"``, ``"context_precision"``, ``"precision@5"``,
    ``"ndcg@10"``, ``"mrr"`` ... (see :data:`METRIC_NAMES`). Metric instances pass through."""
    from ragmeter.metrics.base import Metric

    if isinstance(spec, Metric):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a metric is a Metric instance or a name, got {type(spec).__name__}")
    name = spec.strip().lower().replace("-", "_")
    load_plugins()
    if name in REGISTRY or name in STRING_METRICS or name in DOMAIN_METRICS:
        return metric_class(name)()
    base, _, k = name.partition("@")
    if base in {m.split("@")[0] for m in RETRIEVAL_METRICS}:
        from ragmeter.metrics.ir import RetrievalMetric

        return RetrievalMetric(base, k=int(k) if k else None)
    raise ValueError(f"unknown metric {spec!r}; known: {', '.join(metric_names())}")


def metrics_help() -> str:
    """The ``--metrics`` help text, generated from :data:`REGISTRY` (plugins included) and the defaults."""
    load_plugins()
    return (
        "comma-separated metric names (repeatable). Judge metrics: "
        + ", ".join(REGISTRY)
        + ". String metrics (answer vs reference; reward wording, not truth): "
        + ", ".join(STRING_METRICS)
        + ". Domain checks (the legal and medical profiles add them): "
        + ", ".join(DOMAIN_METRICS)
        + ". Retrieval metrics (need relevant_ids): "
        + ", ".join(m.replace("@k", "@K") for m in RETRIEVAL_METRICS)
        + ". Default: "
        + ", ".join(DEFAULT_METRICS)
        + " (+ "
        + ", ".join(DEFAULT_RETRIEVAL_METRICS)
        + " when records carry relevant_ids)"
    )


def resolve_metrics(metrics: Iterable[Any] | None, samples: Sequence[Any] = ()) -> list[Metric]:
    """Metric instances from instances or names. ``None`` -> the defaults: the judge metrics of
    :data:`ragmeter.metrics.DEFAULT_METRICS`, plus retrieval metrics when any sample carries
    ``relevant_ids``. Duplicate names are an error."""
    from ragmeter.metrics.base import Metric

    if metrics is None:
        names: list[Any] = list(DEFAULT_METRICS)
        if any(s.relevant_ids for s in samples):
            names += list(DEFAULT_RETRIEVAL_METRICS)
        metrics = names
    if isinstance(metrics, (str, Metric)):
        metrics = [metrics]
    out = [get_metric(m) for m in metrics]
    seen: set[str] = set()
    for m in out:
        if m.name in seen:
            raise ValueError(f"metric {m.name!r} is listed twice")
        seen.add(m.name)
    if not out:
        raise ValueError("no metrics to run")
    return out
