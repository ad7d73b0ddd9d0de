"""RagmeterSpanProcessor with the SDK's InMemorySpanExporter: real OpenInference LangChain and
LlamaIndex pipelines, hand-built GenAI / OpenLLMetry trees, streaming, eviction, sampling,
drops, suppression of the judge's own spans, flush and shutdown ordering."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from opentelemetry import context as otel_context

from helpers import TESTS, wait_for
from helpers.scripted import ScriptedJudge
from helpers.tracing import (
    ContextCount,
    GatedMetric,
    by_name,
    carriers,
    genai_rag,
    instrumented,
    langchain_chain,
    llamaindex_index,
    llamaindex_query_engine,
    memory_provider,
    oi_rag,
    openllmetry_rag,
    rag_provider,
)
from ragmeter.inline import sampled
from ragmeter.judges import OfflineJudge
from ragmeter.suppression import is_suppressed
from ragmeter.tracing import RagmeterSpanProcessor
from ragmeter.tracing.processor import WAKE_BATCH
from ragmeter.tracing.settings import SETTINGS


def make(metrics=None, judge=None, **kw):
    """The documented setup: provider, ragmeter processor writing to it, in-memory exporter after."""
    return rag_provider(metrics, judge, **kw)


def finish(proc, provider):
    assert provider.force_flush(10_000)


def test_langchain_pipeline_gets_one_carrier_in_its_trace():
    from openinference.instrumentation.langchain import LangChainInstrumentor

    proc, provider, exporter = make()
    with instrumented(LangChainInstrumentor, provider):
        answer = langchain_chain().invoke("What is the capital of France?")
    finish(proc, provider)
    (c,) = carriers(exporter)
    root = next(s for s in exporter.get_finished_spans() if s.parent is None)
    assert root.name == "RunnableSequence"
    assert c.context.trace_id == root.context.trace_id
    assert c.parent.span_id == root.context.span_id
    assert [ln.context.span_id for ln in c.links] == [root.context.span_id]
    assert c.attributes["ragmeter.context_count.score"] == 0.75
    assert c.attributes["ragmeter.answer_overlap.score"] == 1.0
    assert c.attributes["ragmeter.target.name"] == "RunnableSequence"
    assert [e.name for e in c.events] == ["gen_ai.evaluation.result"] * 2
    (r,) = list(proc.results)
    assert r.sample.answer == answer
    st = proc.stats
    assert st["invocations"] == 1 and st["samples_submitted"] == 1 and st["scored"] == 1
    assert st["carriers_written"] == 1 and st["spans_dropped"] == 0
    proc.shutdown()


def test_two_rag_calls_inside_one_outer_request_give_two_carriers():
    from openinference.instrumentation.langchain import LangChainInstrumentor

    proc, provider, exporter = make()
    chain = langchain_chain(["Paris is the capital of France [1].", "Madrid is the capital of Spain [1]."])
    with instrumented(LangChainInstrumentor, provider):
        with provider.get_tracer("app").start_as_current_span("POST /ask"):
            chain.invoke("What is the capital of France?")
            chain.invoke("What is the capital of Spain?")
    finish(proc, provider)
    roots = [
        s
        for s in by_name(exporter, "RunnableSequence")
        if s.parent and s.parent.span_id == by_name(exporter, "POST /ask")[0].context.span_id
    ]
    assert len(roots) == 2
    cs = carriers(exporter)
    assert sorted(c.parent.span_id for c in cs) == sorted(r.context.span_id for r in roots)
    assert {r.sample.question for r in proc.results} == {
        "What is the capital of France?",
        "What is the capital of Spain?",
    }
    proc.shutdown()


def test_llamaindex_query_engine_and_streaming():
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    index = llamaindex_index()
    proc, provider, exporter = make()
    with instrumented(LlamaIndexInstrumentor, provider):
        llamaindex_query_engine(index).query("What is the capital of France?")
        streamed = llamaindex_query_engine(index, streaming=True).query("What is the capital of Spain?")
        text = "".join(streamed.response_gen)
    finish(proc, provider)
    cs = carriers(exporter)
    entries = by_name(exporter, "RetrieverQueryEngine.query")
    assert len(cs) == 2 and sorted(c.parent.span_id for c in cs) == sorted(e.context.span_id for e in entries)
    answers = {r.sample.question: r.sample.answer for r in proc.results}
    assert text.startswith(answers["What is the capital of Spain?"])
    proc.shutdown()


def test_genai_and_openllmetry_span_trees():
    proc, provider, exporter = make()
    tracer = provider.get_tracer("my-app")
    with tracer.start_as_current_span("POST /chat") as request:
        genai_rag(tracer)
        genai_rag(tracer, question="When was it completed?", answer="In 1889 [2].")
    openllmetry_rag(provider)
    finish(proc, provider)
    cs = carriers(exporter)
    assert len(cs) == 3
    chats = by_name(exporter, "chat gpt-4o-mini")
    genai = [c for c in cs if c.parent.span_id == request.get_span_context().span_id]
    assert sorted(c.links[0].context.span_id for c in genai) == sorted(s.context.span_id for s in chats)
    (wf,) = by_name(exporter, "RunnableSequence.workflow")
    (ol,) = [c for c in cs if c.context.trace_id == wf.context.trace_id]
    assert ol.parent.span_id == wf.context.span_id == ol.links[0].context.span_id
    assert ol.attributes["ragmeter.context_count.score"] == 0.5
    proc.shutdown()


@pytest.mark.slow
def test_streaming_entry_ends_before_its_llm_span():
    proc, provider, exporter = make(grace_period=5.0)
    chain, llm = oi_rag(provider, end_entry_first=True)
    time.sleep(0.1)
    assert carriers(exporter) == []  # waiting: the LLM span below the entry is still open
    llm.set_attribute("llm.output_messages.0.message.content", "Paris is the capital of France.")
    llm.end()
    assert wait_for(lambda: proc.stats["scored"] == 1)
    finish(proc, provider)
    (c,) = carriers(exporter)
    assert c.parent.span_id == chain.get_span_context().span_id
    (r,) = list(proc.results)
    assert r.sample.answer == "Paris is the capital of France."
    proc.shutdown()


@pytest.mark.slow
def test_streaming_llm_that_never_ends_is_scored_after_the_grace_period_or_skipped():
    proc, provider, exporter = make(grace_period=0.2)
    chain, llm = oi_rag(provider, end_entry_first=True)
    assert wait_for(lambda: proc.stats["invocations"] == 1, timeout=5)
    assert proc.stats["skipped_no_answer"] == 1 and carriers(exporter) == []
    llm.end()  # too late: counted, not re-scored
    finish(proc, provider)
    assert proc.stats["late_spans"] == 1 and carriers(exporter) == []
    proc.shutdown()


@pytest.mark.slow
def test_groups_that_never_complete_are_evicted_after_the_ttl():
    proc, provider, _ = make(ttl=0.3)
    tracer = provider.get_tracer("openinference.instrumentation.manual")
    entry = tracer.start_span("rag", attributes={"openinference.span.kind": "CHAIN"})
    from opentelemetry import trace as t

    with tracer.start_as_current_span(
        "retrieve", context=t.set_span_in_context(entry), attributes={"openinference.span.kind": "RETRIEVER"}
    ) as r:
        r.set_attribute("retrieval.documents.0.document.content", "x")
    assert wait_for(lambda: proc.stats["evicted_incomplete"] == 1, timeout=5)
    assert proc.stats["traces_tracked"] == 0 and proc.stats["invocations"] == 0
    entry.end()
    proc.shutdown()


def test_sampling_by_trace_id_hash_is_deterministic():
    proc, provider, exporter = make(sample_rate=0.5)
    ids = []
    for i in range(40):
        chain, _ = oi_rag(provider, question=f"q{i}?")
        ids.append(chain.get_span_context().trace_id)
    finish(proc, provider)
    expected = [t for t in ids if sampled(format(t, "032x"), 0.5)]
    assert 5 < len(expected) < 35
    assert sorted(c.context.trace_id for c in carriers(exporter)) == sorted(expected)
    assert proc.stats["traces_sampled_out"] == 40 - len(expected)
    proc.shutdown()


def test_full_scoring_backlog_drops_and_counts():
    gate = threading.Event()
    proc, provider, exporter = make([GatedMetric(gate)], max_queue=2)
    for i in range(6):
        oi_rag(provider, question=f"q{i}?")
    assert wait_for(lambda: proc.stats["invocations"] == 6)
    st = proc.stats
    assert st["samples_submitted"] == 2 and st["samples_not_queued"] == 4 and st["dropped"] == 4
    gate.set()
    finish(proc, provider)
    assert len(carriers(exporter)) == 2
    proc.shutdown()


@pytest.mark.slow
def test_full_inbox_drops_spans_and_on_start_on_end_never_raise():
    proc, provider, exporter = make(max_buffered_spans=3)
    proc._stop.set()  # hold the collector so the inbox fills up
    time.sleep(0.05)
    for i in range(3):
        oi_rag(provider, question=f"q{i}?")
    assert proc.stats["spans_dropped"] > 0
    proc.on_start(object())  # garbage in: nothing raises
    proc.on_end(None)
    proc.on_start(None, parent_context=42)
    assert len(exporter.get_finished_spans()) == 9  # the application's spans are untouched
    proc.shutdown()


def test_judge_runs_with_instrumentation_suppressed_and_its_spans_are_ignored():
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from openinference.instrumentation.langchain import LangChainInstrumentor

    seen = {}
    holder = {}

    def extract(inputs):
        seen["suppressed"] = is_suppressed()
        seen["trace"] = otel_context.get_current()
        # an instrumented LangChain model called by the judge: OpenInference must not trace it
        FakeListChatModel(responses=["ok"]).invoke("judge prompt")
        # a span made with the SDK directly (instrumentation-agnostic): ignored by the processor
        with holder["provider"].get_tracer("judge-sdk").start_as_current_span("judge work"):
            pass
        return {"claims": [{"unit": i, "text": u} for i, u in enumerate(inputs["units"])]}

    def verify(inputs):
        return {
            "verdicts": [
                {"claim": i, "verdict": "supported", "evidence": [{"chunk": 0, "quote": ""}], "reason": ""}
                for i in range(len(inputs["claims"]))
            ]
        }

    judge = ScriptedJudge({"extract_claims": extract, "verify_claims": verify})
    proc, provider, exporter = make(["faithfulness"], judge)
    holder["provider"] = provider
    with instrumented(LangChainInstrumentor, provider):
        chain, _ = oi_rag(provider)
        finish(proc, provider)
    assert seen["suppressed"] is True
    assert by_name(exporter, "FakeListChatModel") == []  # suppressed: OpenInference made no span
    (judge_span,) = by_name(exporter, "judge work")
    assert judge_span.context.trace_id != chain.get_span_context().trace_id  # never joins the user's trace
    assert judge_span.parent is None
    (c,) = carriers(exporter)
    assert c.attributes["ragmeter.faithfulness.score"] == 1.0
    assert proc.stats["traces"] == 1  # neither the judge's span nor the carrier was tracked
    proc.shutdown()


@pytest.mark.slow
def test_force_flush_waits_for_evaluations_before_the_batch_exporter_flushes():
    gate = threading.Event()
    proc, provider, exporter = make([GatedMetric(gate)], batch=True, schedule_delay=60)
    oi_rag(provider)
    threading.Timer(0.2, gate.set).start()
    assert provider.force_flush(10_000)
    assert len(carriers(exporter)) == 1  # scored, written, then exported by the batch processor's flush
    provider.shutdown()


def test_shutdown_scores_what_ended_and_the_exporter_gets_it():
    proc, provider, exporter = make([ContextCount()], batch=True)
    proc._stop.set()  # the collector stops at its next wake: shutdown itself must score what ended
    oi_rag(provider)
    provider.shutdown()
    assert len(carriers(exporter)) == 1
    proc.on_end(None)  # after shutdown: still never raises
    assert proc.stats["incomplete_at_shutdown"] == 0


@pytest.mark.slow
def test_nothing_is_lost_at_interpreter_exit(tmp_path):
    out = tmp_path / "spans.jsonl"
    script = textwrap.dedent(f"""
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from ragmeter.tracing import RagmeterSpanProcessor, OTLPJsonFileExporter
        from helpers.tracing import ContextCount, oi_rag
        provider = TracerProvider()
        provider.add_span_processor(RagmeterSpanProcessor(metrics=[ContextCount()], tracer_provider=provider,
                                                          schedule_delay=30))
        provider.add_span_processor(BatchSpanProcessor(OTLPJsonFileExporter({str(out)!r}), schedule_delay_millis=60000))
        oi_rag(provider)
        # no flush, no shutdown: the TracerProvider's exit handler must get the carrier out
    """)
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60, env=env)
    from ragmeter.tracing import read_otlp_json

    spans = read_otlp_json(out)
    names = sorted(s.name for s in spans)
    assert names == ["llm", "rag", "ragmeter.evaluation", "retrieve"]


def test_shared_scorer_and_extra_sinks():
    from ragmeter.inline import BackgroundScorer

    got = []

    class Sink:
        def write(self, result, target, parent=None):
            got.append((result.sample.id, target.span_id, parent))

    scorer = BackgroundScorer([ContextCount()])
    proc = RagmeterSpanProcessor(scorer=scorer, sinks=[Sink()], write_spans=False)
    provider, exporter = memory_provider(proc)
    chain, _ = oi_rag(provider)
    finish(proc, provider)
    assert carriers(exporter) == [] and len(got) == 1
    assert got[0][1] == chain.get_span_context().span_id and got[0][2] is None
    proc.shutdown()
    assert scorer.submit(oi_sample()) is True  # a shared scorer is not shut down by the processor
    scorer.shutdown()


def oi_sample():
    from ragmeter.data import Sample

    return Sample("q?", ["c"], answer="a")


def test_offline_judge_metrics_end_to_end():
    from openinference.instrumentation.langchain import LangChainInstrumentor

    proc, provider, exporter = make(["faithfulness", "citation_accuracy"], OfflineJudge(embeddings=False))
    with instrumented(LangChainInstrumentor, provider):
        langchain_chain().invoke("What is the capital of France?")
    finish(proc, provider)
    (c,) = carriers(exporter)
    assert c.attributes["ragmeter.faithfulness.label"] == "pass"
    assert c.attributes["ragmeter.citation.count"] == 1
    (ev,) = [e for e in c.events if e.name == "ragmeter.citation.verdicts"]
    assert ev.attributes["ragmeter.citation.chunk_id"] == ("d1",)
    proc.shutdown()


def test_the_collector_is_woken_by_the_spans_not_polled():
    # schedule delay and grace period far above the test's wait: only on_end can wake the collector
    proc, provider, exporter = make(schedule_delay=600, grace_period=600)
    chain, _ = oi_rag(provider)  # a retriever and an LLM span end, then the entry span
    assert wait_for(lambda: len(carriers(exporter)) == 1)
    assert proc._timeouts == 0 and 1 <= proc._wakeups <= 3
    tracer = provider.get_tracer("my-app")
    with tracer.start_as_current_span("POST /chat") as request:
        genai_rag(tracer)
    # the end of the request span (the call's synthetic entry) wakes the collector: no grace period
    assert wait_for(lambda: len(carriers(exporter)) == 2)
    assert carriers(exporter)[1].parent.span_id == request.get_span_context().span_id
    assert proc._timeouts == 0
    proc.shutdown()


def test_plain_spans_wake_the_collector_in_batches():
    proc, provider, _ = make(schedule_delay=600)
    tracer = provider.get_tracer("app")
    for _ in range(WAKE_BATCH):
        with tracer.start_as_current_span("GET /health"):
            pass
    assert wait_for(lambda: proc.stats["traces"] >= WAKE_BATCH // 2)
    assert proc._timeouts == 0 and proc._wakeups >= 1
    proc.shutdown()


def test_settings_come_from_the_environment_unless_given(monkeypatch):
    monkeypatch.setenv("RAGMETER_SAMPLE_RATE", "0.25")
    monkeypatch.setenv("RAGMETER_GRACE_PERIOD", "7.5")
    monkeypatch.setenv("RAGMETER_MAX_QUEUE", "12")
    monkeypatch.setenv("RAGMETER_SCHEDULE_DELAY", "42")
    proc = RagmeterSpanProcessor([ContextCount()], write_spans=False, grace_period=1.0)
    assert proc.sample_rate == 0.25 and proc.schedule_delay == 42.0 and proc.scorer.max_queue == 12
    assert proc.grace_period == 1.0  # the argument wins
    assert proc.ttl == 300.0  # neither: the default
    proc.shutdown()


def test_every_setting_is_documented_with_its_variable_and_default():
    import ragmeter.tracing.processor as module

    for s in SETTINGS:
        assert f"``{s.name}`` / ``{s.env}`` ({s.default})" in module.__doc__


@pytest.mark.parametrize(
    "name,value",
    [
        ("RAGMETER_SAMPLE_RATE", "2"),
        ("RAGMETER_SAMPLE_RATE", "half"),
        ("RAGMETER_MAX_TRACES", "1.5"),
        ("RAGMETER_TTL", "0"),
        ("RAGMETER_SCHEDULE_DELAY", "inf"),
    ],
)
def test_invalid_environment_values_are_warned_about_and_defaulted(monkeypatch, caplog, name, value):
    monkeypatch.setenv(name, value)
    setting = next(s for s in SETTINGS if s.env == name)
    with caplog.at_level(logging.WARNING, logger="ragmeter"):
        proc = RagmeterSpanProcessor([ContextCount()], write_spans=False)
    assert getattr(proc, setting.name) == setting.default
    assert name in caplog.text
    proc.shutdown()


def test_invalid_arguments():
    with pytest.raises(ValueError):
        RagmeterSpanProcessor([ContextCount()], sample_rate=2)
    with pytest.raises(ValueError):
        RagmeterSpanProcessor([ContextCount()], ttl=0)
    with pytest.raises(ValueError):
        RagmeterSpanProcessor([ContextCount()], schedule_delay=0)


def test_content_capture_off_and_dropped_attributes_are_counted_not_scored():
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    proc, provider, exporter = make()
    with instrumented(
        LangChainInstrumentor, provider, config=TraceConfig(hide_outputs=True, hide_output_messages=True)
    ):
        langchain_chain().invoke("What is the capital of France?")
    finish(proc, provider)
    assert carriers(exporter) == []
    assert proc.stats["invocations"] == 1 and proc.stats["skipped_no_contexts"] == 1 and proc.stats["scored"] == 0
    proc.shutdown()

    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=12), shutdown_on_exit=False)
    proc = RagmeterSpanProcessor([ContextCount()], tracer_provider=provider)
    provider.add_span_processor(proc)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    oi_rag(provider, n_docs=8)
    finish(proc, provider)
    assert proc.stats["skipped_truncated"] == 1 and carriers(exporter) == []
    proc.shutdown()


def test_marked_carriers_are_ignored_even_outside_a_suppressed_context():
    proc, provider, exporter = make()
    chain, _ = oi_rag(provider)
    from opentelemetry import trace as t

    tracer = provider.get_tracer("elsewhere")
    with tracer.start_as_current_span(
        "ragmeter.evaluation",
        context=t.set_span_in_context(chain),
        attributes={
            "ragmeter.carrier": True,
            "openinference.span.kind": "RETRIEVER",
            "retrieval.documents.0.document.content": "x",
        },
    ):
        pass
    finish(proc, provider)
    assert proc.stats["invocations"] == 1 and proc.stats["late_spans"] == 0
    assert len(carriers(exporter)) == 2  # the hand-made one and ragmeter's
    proc.shutdown()
