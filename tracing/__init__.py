"""Traces: score RAG calls from OpenTelemetry spans and write the scores back into the traces.

>>> from opentelemetry.sdk.trace import TracerProvider                       # doctest: +SKIP
>>> from opentelemetry.sdk.trace.export import BatchSpanProcessor            # doctest: +SKIP
>>> from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # doctest: +SKIP
>>> from ragmeter.tracing import RagmeterSpanProcessor                       # doctest: +SKIP
>>> provider = TracerProvider()                                              # doctest: +SKIP
>>> provider.add_span_processor(RagmeterSpanProcessor(metrics=["faithfulness"], judge="offline",
...                                                   tracer_provider=provider))  # doctest: +SKIP
>>> provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))      # doctest: +SKIP

* :class:`RagmeterSpanProcessor`: reads OpenInference, OpenTelemetry GenAI and OpenLLMetry spans,
  one sample per RAG call, scored in the background, results written as evaluation spans.
* :class:`EvaluationWriter`, :class:`SpanTarget`, :func:`current_target`,
  :func:`writer_for_current_provider`: the writer the LangChain and LlamaIndex integrations use.
* :func:`evaluate_traces` (returns a :class:`TraceEvaluation`), :func:`read_otlp_json`, :class:`OTLPJsonFileExporter`: offline scoring
  of OTLP JSON exports (the OpenTelemetry Collector's file exporter format).
* :class:`PhoenixAnnotationSink`: the same results as Phoenix span and document annotations
  (``pip install "ragmeter[phoenix]"``).
* :class:`LangfuseScoreSink`: the same results as Langfuse scores (``pip install "ragmeter[langfuse]"``).
* :class:`EvaluationLogSink`: each score as a ``gen_ai.evaluation.result`` log record through the
  OpenTelemetry Logs API (names in :mod:`ragmeter.tracing.semconv`).

Importing this package imports the OpenTelemetry API and SDK; ``import ragmeter`` does not.
"""

from __future__ import annotations

from ragmeter._lazy import lazy_getattr

_LAZY = {
    "RagmeterSpanProcessor": "ragmeter.tracing.processor",
    "ResultSink": "ragmeter.tracing.sinks",
    "EvaluationWriter": "ragmeter.tracing.writer",
    "SpanTarget": "ragmeter.tracing.writer",
    "current_target": "ragmeter.tracing.writer",
    "writer_for_current_provider": "ragmeter.tracing.writer",
    "evaluate_traces": "ragmeter.tracing.offline",
    "TraceEvaluation": "ragmeter.tracing.offline",
    "read_otlp_json": "ragmeter.tracing.offline",
    "samples_from_spans": "ragmeter.tracing.offline",
    "OTLPJsonFileExporter": "ragmeter.tracing.offline",
    "PhoenixAnnotationSink": "ragmeter.tracing.phoenix",
    "LangfuseScoreSink": "ragmeter.tracing.langfuse",
    "EvaluationLogSink": "ragmeter.tracing.events",
    "carrier_scores": "ragmeter.tracing.offline",
    "content_id": "ragmeter.ids",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
