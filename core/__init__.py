"""ragmeter: score retrieval-augmented generation.

>>> import ragmeter as rm
>>> result = rm.evaluate("examples/rag_samples.jsonl")          # doctest: +SKIP
>>> result.summary()["faithfulness"]["mean"]                    # doctest: +SKIP

The core imports no framework: LangChain, LlamaIndex and OpenTelemetry are loaded only by
``ragmeter.integrations.*`` and ``ragmeter.tracing``.
"""

__version__ = "0.1.0"  # first: modules imported below read it

from ragmeter.comparison import compare, compare_variants
from ragmeter.data import Context, Dataset, RecordError, Sample, Score, load_samples, samples_from_records, save_samples
from ragmeter.metrics.requests import Limits
from ragmeter.monitor import Monitor
from ragmeter.result import EvaluationResult, SampleResult
from ragmeter.runner import aevaluate, evaluate
from ragmeter.sweep import sweep
from ragmeter.trust import trust_card

__all__ = [
    "compare", "compare_variants",
    "Context", "Sample", "Score", "Dataset", "RecordError", "EvaluationResult", "SampleResult",
    "evaluate", "aevaluate", "sweep", "trust_card", "Limits", "load_samples", "save_samples", "samples_from_records", "Monitor", "__version__",
]
