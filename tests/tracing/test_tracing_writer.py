"""EvaluationWriter: the carrier span's parent, link, attributes and events, exactly."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

import ragmeter
from helpers.tracing import carriers, memory_provider
from ragmeter.citations import parse_citations
from ragmeter.data import Sample, Score
from ragmeter.judges.base import Usage
from ragmeter.metrics.citation import score_citations
from ragmeter.metrics.scoring import SampleResult
from ragmeter.tracing import writer as writer_mod
from ragmeter.tracing.writer import EvaluationWriter, SpanTarget, current_target, writer_for_current_provider

TRACE = 0x5B8EFFF798038103D269B633813FC60C
TARGET = SpanTarget(TRACE, 0x00F067AA0BA902B7, "RunnableSequence")
ENTRY = SpanTarget(TRACE, 0x1111111111111111, "POST /ask")


def _result() -> SampleResult:
    sample = Sample(
        "What is the capital of France?",
        [{"id": "d1", "text": "Paris is the capital of France."}, {"id": "d2", "text": "Berlin is in Germany."}],
        answer="Paris is the capital of France [1]. Berlin is in Germany [7].",
        id="s-1",
    )
    parsed = parse_citations(sample.answer, sample.contexts)
    claims = [{"unit": 0, "text": "Paris is the capital of France."}, {"unit": 1, "text": "Berlin is in Germany."}]
    verdicts = [
        {"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "Paris is the capital of France."}]},
        {"claim": 1, "verdict": "supported", "evidence": [{"chunk": 1, "quote": "Berlin is in Germany."}]},
    ]
    details = score_citations(parsed.units, claims, verdicts, chunks=sample.context_texts).to_dict()
    scores = {
        "faithfulness": Score(
            "faithfulness",
            1.0,
            "2 of 2 claims supported",
            {"threshold": 0.85, "warn": 0.7},
            judge="openai:gpt-4o-mini",
            label="pass",
        ),
        "citation_accuracy": Score(
            "citation_accuracy",
            0.5,
            "1 of 2 citations support their statement",
            {**details, "threshold": 0.8, "warn": 0.6},
            judge="openai:gpt-4o-mini",
            label="fail",
        ),
        "context_count": Score("context_count", None, error="JudgeError: timed out after 3 attempts", judge="code"),
    }
    return SampleResult(
        sample, scores, Usage(calls=2, prompt_tokens=100, completion_tokens=20, cost_usd=0.001), duration_s=0.25
    )


def test_carrier_parent_link_attributes_and_events_exactly():
    provider, exporter = memory_provider()
    w = EvaluationWriter(provider)
    w.write(_result(), TARGET, ENTRY)
    (c,) = carriers(exporter)
    assert c.name == "ragmeter.evaluation"
    assert c.context.trace_id == TRACE
    assert c.parent.span_id == ENTRY.span_id and c.parent.trace_id == TRACE
    assert [(ln.context.trace_id, ln.context.span_id) for ln in c.links] == [(TRACE, TARGET.span_id)]
    assert c.end_time - c.start_time == 250_000_000
    assert c.instrumentation_scope.name == "ragmeter"
    v = ragmeter.__version__
    ident = f"ragmeter/{v}/openai:gpt-4o-mini/%s/00f067aa0ba902b7"
    expected = {
        "evaluations.0.evaluation.metadata": json.dumps(
            {"judge": "openai:gpt-4o-mini", "status": "ok", "threshold": 0.85, "warn": 0.7, "sample_id": "s-1"}
        ),
        "evaluations.1.evaluation.metadata": json.dumps(
            {"judge": "openai:gpt-4o-mini", "status": "ok", "threshold": 0.8, "warn": 0.6, "sample_id": "s-1"}
        ),
        "evaluations.2.evaluation.metadata": json.dumps(
            {"judge": "code", "status": "error", "error": "JudgeError: timed out after 3 attempts", "sample_id": "s-1"}
        ),
        "evaluations.0.evaluation.explanation": "2 of 2 claims supported",
        "evaluations.1.evaluation.explanation": "1 of 2 citations support their statement",
        "evaluations.2.evaluation.explanation": "JudgeError: timed out after 3 attempts",
        "evaluations.0.evaluation.identifier": ident % "faithfulness",
        "evaluations.1.evaluation.identifier": ident % "citation_accuracy",
        "evaluations.2.evaluation.identifier": f"ragmeter/{v}/code/context_count/00f067aa0ba902b7",
        "evaluations.0.evaluation.annotator_kind": "LLM",
        "evaluations.1.evaluation.annotator_kind": "LLM",
        "evaluations.2.evaluation.annotator_kind": "CODE",
        "evaluations.0.evaluation.label": "pass",
        "evaluations.1.evaluation.label": "fail",
        "evaluations.0.evaluation.score": 1.0,
        "evaluations.1.evaluation.score": 0.5,
        "evaluations.0.evaluation.name": "faithfulness",
        "evaluations.1.evaluation.name": "citation_accuracy",
        "evaluations.2.evaluation.name": "context_count",
        "output.value": "faithfulness=1.00 (pass), citation_accuracy=0.50 (fail), context_count=error",
        "ragmeter.version": v,
        "ragmeter.sample.id": "s-1",
        "ragmeter.judge": "code,openai:gpt-4o-mini",
        "ragmeter.judge.calls": 2,
        "ragmeter.cost_usd": 0.001,
        "ragmeter.citation.accuracy": 0.5,
        "ragmeter.citation.precision": 0.5,
        "ragmeter.citation.recall": 0.5,
        "ragmeter.citation.count": 2,
        "ragmeter.citation.supported_count": 1,
        "ragmeter.citation.partially_count": 0,
        "ragmeter.citation.unsupported_count": 0,
        "ragmeter.citation.invalid_count": 1,
        "ragmeter.citation.uncited_claims": 1,
        "ragmeter.faithfulness.score": 1.0,
        "ragmeter.faithfulness.label": "pass",
        "ragmeter.citation_accuracy.score": 0.5,
        "ragmeter.citation_accuracy.label": "fail",
        "ragmeter.context_count.error": "JudgeError: timed out after 3 attempts",
        "ragmeter.target.trace_id": "5b8efff798038103d269b633813fc60c",
        "ragmeter.target.name": "RunnableSequence",
        "ragmeter.target.span_id": "00f067aa0ba902b7",
        "openinference.span.kind": "EVALUATOR",
        "ragmeter.carrier": True,
    }
    assert dict(c.attributes) == expected
    events = [(e.name, dict(e.attributes)) for e in c.events]
    assert events == [
        (
            "gen_ai.evaluation.result",
            {
                "gen_ai.evaluation.name": "faithfulness",
                "gen_ai.evaluation.score.value": 1.0,
                "gen_ai.evaluation.score.label": "pass",
                "gen_ai.evaluation.explanation": "2 of 2 claims supported",
            },
        ),
        (
            "gen_ai.evaluation.result",
            {
                "gen_ai.evaluation.name": "citation_accuracy",
                "gen_ai.evaluation.score.value": 0.5,
                "gen_ai.evaluation.score.label": "fail",
                "gen_ai.evaluation.explanation": "1 of 2 citations support their statement",
            },
        ),
        (
            "gen_ai.evaluation.result",
            {
                "gen_ai.evaluation.name": "context_count",
                "gen_ai.evaluation.explanation": "JudgeError: timed out after 3 attempts",
                "error.type": "JudgeError",
            },
        ),
        (
            "ragmeter.citation.verdicts",
            {
                "ragmeter.citation.marker": ("[1]", "[7]"),
                "ragmeter.citation.statement": ("Paris is the capital of France.", "Berlin is in Germany."),
                "ragmeter.citation.chunk": (1, 0),
                "ragmeter.citation.chunk_id": ("d1", ""),
                "ragmeter.citation.verdict": ("supports", "invalid"),
                "ragmeter.citation.quote": ("Paris is the capital of France.", ""),
            },
        ),
    ]
    assert w.stats == {"written": 1, "no_sdk_provider": 0, "failed": 0, "truncated": 0}


def test_parent_defaults_to_the_target():
    provider, exporter = memory_provider()
    EvaluationWriter(provider).write(_result(), TARGET)
    (c,) = carriers(exporter)
    assert c.parent.span_id == TARGET.span_id == c.links[0].context.span_id


def test_span_limits_keep_the_flat_tags_and_report_truncation(caplog):
    provider, exporter = memory_provider(span_limits=SpanLimits(max_span_attributes=20))
    w = EvaluationWriter(provider)
    w.write(_result(), TARGET)
    (c,) = carriers(exporter)
    assert c.dropped_attributes > 0
    attrs = c.attributes
    for key in (
        "ragmeter.carrier",
        "ragmeter.target.span_id",
        "ragmeter.faithfulness.score",
        "ragmeter.citation_accuracy.label",
        "openinference.span.kind",
    ):
        assert key in attrs
    assert "evaluations.0.evaluation.metadata" not in attrs  # the least important went first
    (ev,) = [e for e in c.events if e.name == "ragmeter.carrier.truncated"]
    assert ev.attributes["ragmeter.dropped_attributes"] == c.dropped_attributes
    assert w.stats["truncated"] == 1
    assert "span limits" in caplog.text


def test_current_target():
    assert current_target() is None
    provider, _ = memory_provider()
    with provider.get_tracer("app").start_as_current_span("handler") as span:
        t = current_target()
    assert t == SpanTarget(span.get_span_context().trace_id, span.get_span_context().span_id, "handler")
    ctx = otel_trace.set_span_in_context(NonRecordingSpan(SpanContext(1, 2, False, TraceFlags(1))))
    from opentelemetry import context

    token = context.attach(ctx)
    try:
        assert current_target() == SpanTarget(1, 2, None)
    finally:
        context.detach(token)


def test_only_sdk_providers_get_writes(monkeypatch):
    monkeypatch.setattr(writer_mod.otel_trace, "get_tracer_provider", lambda: otel_trace.NoOpTracerProvider())
    assert writer_for_current_provider() is None
    w = EvaluationWriter()
    w.write(_result(), TARGET)
    assert w.stats["no_sdk_provider"] == 1 and w.stats["written"] == 0
    provider, exporter = memory_provider()
    monkeypatch.setattr(writer_mod.otel_trace, "get_tracer_provider", lambda: provider)
    w2 = writer_for_current_provider()
    assert isinstance(w2, EvaluationWriter)
    w2.write(_result(), TARGET)
    w.write(_result(), TARGET)  # the global provider is resolved again at each write until it is an SDK one
    assert len(carriers(exporter)) == 2


def test_write_never_raises():
    provider, exporter = memory_provider()
    w = EvaluationWriter(provider)
    w.write(object(), TARGET)  # not a SampleResult
    w.write(_result(), "not a target")  # type: ignore[arg-type]
    assert w.stats["failed"] == 2 and carriers(exporter) == []


@pytest.mark.parametrize(
    "judge,kind", [("code", "CODE"), ("offline", "CODE"), ("openai:gpt-4o", "LLM"), ("ensemble", "LLM"), (None, "CODE")]
)
def test_annotator_kind(judge, kind):
    assert writer_mod.annotator_kind(Score("m", 0.5, "x", judge=judge)) == kind
