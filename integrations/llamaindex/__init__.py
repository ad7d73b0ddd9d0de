"""LlamaIndex integration: ragmeter metrics as LlamaIndex evaluators, and inline capture of every
query through LlamaIndex's instrumentation module.

Evaluators (one per metric, usable in ``BatchEvalRunner``)::

    from llama_index.core.evaluation import BatchEvalRunner
    from ragmeter.integrations.llamaindex import make_evaluators, RagmeterFaithfulnessEvaluator

    evaluators = make_evaluators(["faithfulness", "answer_relevancy"], judge="offline")
    results = BatchEvalRunner(evaluators, workers=4).evaluate_queries(query_engine, queries=qs)
    results["faithfulness"][0].score, results["faithfulness"][0].details

An evaluator never raises (``BatchEvalRunner`` retries raising evaluators with back-off): a score
that could not be computed comes back with ``invalid_result=True`` and the reason. There is one
``Ragmeter<Class>Evaluator`` per metric of :data:`ragmeter.metrics.REGISTRY`.

Capture (inline scoring off the request path)::

    from ragmeter.integrations.llamaindex import RagmeterInstrumentation

    with RagmeterInstrumentation(["faithfulness"], judge="offline") as meter:
        query_engine.query("What is the capital of France?")
    meter.results[0].scores["faithfulness"].value

Chat engines (condense-question, context, condense-plus-context) and agents with a query-engine or
retriever tool are captured turn by turn, with ``conversation_id``, ``turn``, ``history`` and the
condensed ``standalone_question`` (:mod:`.chat`).

Only this package imports LlamaIndex. It translates LlamaIndex objects and events into ragmeter
Samples (:mod:`.nodes`, :mod:`.spans`, :mod:`.chat`, :mod:`.capture`) and ragmeter Scores into LlamaIndex
``EvaluationResult`` objects (:mod:`.evaluators`); keeping, counting and scoring is done by the
core (:class:`ragmeter.capture.CaptureRecorder`, :func:`ragmeter.metrics.scoring.score_sample`).
"""

from __future__ import annotations

from typing import Any

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.integrations.llamaindex", "llamaindex", "llama_index"):
    from ragmeter.integrations.llamaindex import evaluators
    from ragmeter.integrations.llamaindex.capture import RagmeterInstrumentation
    from ragmeter.integrations.llamaindex.evaluators import (
        RagmeterEvaluationResult,
        RagmeterEvaluator,
        make_evaluators,
    )

__all__ = ["RagmeterInstrumentation", "RagmeterEvaluator", "RagmeterEvaluationResult", "make_evaluators"]
__all__ += [cls.__name__ for cls in evaluators.evaluator_classes().values()]


def __getattr__(name: str) -> Any:
    """The ``Ragmeter<Class>Evaluator`` classes, one per registered metric (made when asked)."""
    return getattr(evaluators, name)
