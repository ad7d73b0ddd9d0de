"""ragmeter: score retrieval-augmented generation.

>>> import ragmeter as rm
>>> result = rm.evaluate("examples/rag_samples.jsonl")          # doctest: +SKIP
>>> result.summary()["faithfulness"]["mean"]                    # doctest: +SKIP

The core imports no framework: LangChain, LlamaIndex and OpenTelemetry are loaded only by
``ragmeter.integrations.*`` and ``ragmeter.tracing``. ``import ragmeter`` loads nothing else
either: each public name below is imported from its module on first use (:mod:`ragmeter._lazy`),
and so is each public subpackage (``rm.metrics``, ``rm.judges`` ...).
"""

from __future__ import annotations

from ragmeter._lazy import keep_names, lazy_getattr

__version__ = "0.1.0"

_LAZY = {
    "compare": "ragmeter.comparison",
    "compare_variants": "ragmeter.comparison",
    "Context": "ragmeter.data",
    "Sample": "ragmeter.data",
    "Score": "ragmeter.data",
    "Dataset": "ragmeter.data",
    "RecordError": "ragmeter.data",
    "samples_from_records": "ragmeter.data",
    "load_samples": "ragmeter.readers",
    "save_samples": "ragmeter.readers",
    "EvaluationResult": "ragmeter.result",
    "SampleResult": "ragmeter.metrics.scoring",
    "evaluate": "ragmeter.runner",
    "aevaluate": "ragmeter.runner",
    "sweep": "ragmeter.sweep",
    "trust_card": "ragmeter.trust",
    "Limits": "ragmeter.metrics.requests",
    "Monitor": "ragmeter.monitor",
    "RayExecutor": "ragmeter.executors",
}

#: The public subpackages and modules, imported on first attribute access (``rm.metrics.REGISTRY``).
_MODULES = (
    "aggregate",
    "dashboard",
    "data",
    "judges",
    "labels",
    "metrics",
    "monitor",
    "store",
    "testing",
    "testset",
    "trust",
)

__all__ = [
    "compare",
    "compare_variants",
    "Context",
    "Sample",
    "Score",
    "Dataset",
    "RecordError",
    "EvaluationResult",
    "SampleResult",
    "evaluate",
    "aevaluate",
    "sweep",
    "trust_card",
    "Limits",
    "load_samples",
    "save_samples",
    "samples_from_records",
    "Monitor",
    "RayExecutor",
    "__version__",
]

__getattr__ = lazy_getattr(__name__, {**_LAZY, **{m: f"ragmeter.{m}" for m in _MODULES}}, _MODULES)
keep_names(__name__, _LAZY)  # rm.sweep stays the function once ragmeter/sweep.py is imported


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__) | set(_MODULES))
