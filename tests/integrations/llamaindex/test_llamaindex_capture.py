"""LlamaIndex capture on real llama-index-core pieces: the instrumentation dispatcher, query
engines (sync, async, streaming, nested, concurrent), inline and offline scoring, and results
written into the caller's OpenTelemetry trace (see helpers.llamaindex_app; no network, no key)."""

from __future__ import annotations

import asyncio
import gc
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("llama_index.core")

pytestmark = pytest.mark.filterwarnings("ignore:asyncio_module\\(\\) is deprecated:DeprecationWarning")

from llama_index.core.query_engine import CustomQueryEngine  # noqa: E402

import ragmeter as rm  # noqa: E402
from helpers.llamaindex_app import (  # noqa: E402
    ANIMALS,
    EchoLLM,
    build_index,
    code_of,
    engine,
    question,
)
from ragmeter.integrations.llamaindex import RagmeterInstrumentation  # noqa: E402


def test_capture_query_scores_inline_with_metadata(index, judge):
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        response = engine(index).query(question("lynx"))
    assert str(response) == f"The secret code of the lynx is {code_of('lynx')}."
    [sample] = meter.samples
    assert sample.question == question("lynx")
    assert sample.answer == str(response)
    assert sample.retrieved_ids[0] == "doc-lynx" and len(sample.contexts) == 2
    assert sample.contexts[0].score is not None and sample.contexts[0].score >= sample.contexts[1].score
    assert sample.contexts[0].metadata == {"animal": "lynx", "page": ANIMALS.index("lynx")}
    md = sample.metadata
    assert md["status"] == "ok" and md["source"] == "llamaindex" and md["streaming"] is False
    assert md["engine"] == "RetrieverQueryEngine" and md["models"] == ["echo-llm"] and md["llm_calls"] == 1
    assert md["token_usage"]["completion"] == len(sample.answer.split())
    assert md["token_usage"]["total"] == md["token_usage"]["prompt"] + md["token_usage"]["completion"]
    assert md["query_span_id"].startswith("RetrieverQueryEngine.query-") and "retrieved_ids" not in md
    lat = md["latency"]
    assert 0 <= lat["retrieval_s"] <= lat["total_s"] and 0 <= lat["generation_s"] <= lat["total_s"]
    [result] = meter.results
    assert result.sample.id == sample.id and result.scores["faithfulness"].value == 1.0
    stats = meter.stats
    assert stats["captured"] == stats["ok"] == stats["scored"] == 1 and stats["open"] == 0


def test_capture_aquery_counts_nested_llm_call_once(index, judge):
    async def main():
        return await engine(index).aquery(question("gecko"))

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        response = asyncio.run(main())
    [sample] = meter.samples
    assert sample.answer == str(response) and sample.question == question("gecko")
    assert sample.metadata["engine"] == "RetrieverQueryEngine"
    assert sample.metadata["llm_calls"] == 1  # acomplete -> complete is one call
    assert meter.results[0].scores["faithfulness"].value == 1.0


def test_streaming_consumed_is_scored_with_the_full_text(index, judge):
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        response = engine(index, streaming=True).query(question("bison"))
        assert meter.samples == []  # nothing yet: the text does not exist before the stream is read
        tokens = list(response.response_gen)
    expected = f"The secret code of the bison is {code_of('bison')}."
    assert "".join(tokens) == expected
    [sample] = meter.samples
    assert sample.answer == expected and sample.metadata["streaming"] is True
    assert sample.metadata["status"] == "ok" and sample.metadata["llm_calls"] == 1
    assert sample.metadata["models"] == ["echo-llm"]
    assert 0 <= sample.metadata["latency"]["first_token_s"] <= sample.metadata["latency"]["total_s"]
    assert meter.results[0].scores["faithfulness"].value == 1.0


def test_async_streaming_consumed(index, judge):
    async def main():
        response = await engine(index, streaming=True).aquery(question("marten"))
        return [t async for t in response.async_response_gen()]

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        tokens = asyncio.run(main())
    [sample] = meter.samples
    assert sample.answer == "".join(tokens) == f"The secret code of the marten is {code_of('marten')}."
    assert meter.results[0].scores["faithfulness"].value == 1.0


def test_streaming_abandoned_or_closed_early_is_partial_not_scored(index, judge):
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        qe = engine(index, streaming=True)
        dropped = qe.query(question("ibis"))
        del dropped
        gc.collect()
        early = qe.query(question("koala"))
        gen = early.response_gen
        first = next(gen)
        gen.close()
        kept = qe.query(question("lemur"))  # never read, still referenced
    assert meter.flush(5)
    by_q = {s.question: s for s in meter.samples}
    assert set(by_q) == {question("ibis"), question("koala")}
    for s in by_q.values():
        assert s.metadata["status"] == "partial" and s.answer is None and s.metadata["partial_reason"]
    assert "discarded" in by_q[question("ibis")].metadata["partial_reason"]
    assert by_q[question("koala")].metadata["partial_answer"] == first
    assert len(meter.results) == 0 and meter.stats["partial"] == 2 and meter.stats["submitted"] == 0
    assert meter.stats["open"] == 1  # the kept stream may still be read
    meter.shutdown()  # shutting down records it as partial
    assert meter.stats["partial"] == 3 and meter.stats["open"] == 0
    del kept


def test_unconsumed_stream_times_out_as_partial(index, judge):
    meter = RagmeterInstrumentation(["faithfulness"], judge=judge, stream_timeout=0.0).attach()
    try:
        response = engine(index, streaming=True).query(question("raven"))
        time.sleep(0.01)
        meter.flush(5)
        [sample] = meter.samples
        assert sample.metadata["status"] == "partial" and "stream_timeout" in sample.metadata["partial_reason"]
        list(response.response_gen)  # read late: already recorded, not recorded twice
        assert len(meter.samples) == 1 and len(meter.results) == 0
    finally:
        meter.shutdown()


def test_thirty_concurrent_aqueries_never_mix(judge):
    index = build_index(delay=0.02, metadata=False)
    qe = index.as_query_engine(llm=EchoLLM(delay=0.02), similarity_top_k=2)

    async def main():
        return await asyncio.gather(*(qe.aquery(question(a)) for a in ANIMALS))

    with RagmeterInstrumentation(["faithfulness"], judge=judge, concurrency=8) as meter:
        responses = asyncio.run(main())
    assert len(meter.samples) == 30 and len(meter.results) == 30
    assert [str(r) for r in responses] == [f"The secret code of the {a} is {code_of(a)}." for a in ANIMALS]
    for s in meter.samples:
        animal = re.search(r"of the (\w+)\?", s.question).group(1)
        assert s.retrieved_ids[0] == f"doc-{animal}"
        assert s.answer == f"The secret code of the {animal} is {code_of(animal)}."
        assert s.metadata["llm_calls"] == 1
    assert len({s.id for s in meter.samples}) == 30
    assert all(r.scores["faithfulness"].value == 1.0 for r in meter.results)


def test_queries_from_threads_never_mix(index, judge):
    qe = engine(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda a: qe.query(question(a)), ANIMALS[:16]))
    assert len(meter.samples) == 16
    for s in meter.samples:
        animal = re.search(r"of the (\w+)\?", s.question).group(1)
        assert code_of(animal) in s.answer and s.retrieved_ids[0] == f"doc-{animal}"


def test_errored_query_is_recorded_not_scored(index, judge):
    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        with pytest.raises(RuntimeError, match="LLM backend unavailable"):
            engine(index, llm=EchoLLM(fail=True)).query(question("tapir"))
    [sample] = meter.samples
    assert sample.metadata["status"] == "error" and "LLM backend unavailable" in sample.metadata["error"]
    assert sample.answer is None and sample.retrieved_ids[0] == "doc-tapir"
    assert meter.stats["errored"] == 1 and meter.stats["submitted"] == 0 and len(meter.results) == 0


def test_nested_query_engine_is_one_sample(index, judge):
    inner = engine(index)

    class Wrapper(CustomQueryEngine):
        def custom_query(self, query_str: str):
            return inner.query(query_str.replace("Please tell me: ", ""))

    with RagmeterInstrumentation(["faithfulness"], judge=judge) as meter:
        Wrapper().query("Please tell me: " + question("vole"))
    [sample] = meter.samples
    assert sample.question == "Please tell me: " + question("vole")
    assert sample.metadata["engine"] == "Wrapper" and code_of("vole") in sample.answer
    assert sample.retrieved_ids[0] == "doc-vole"


def test_offline_mode_export_is_readable_by_load_samples(index, judge, tmp_path):
    with RagmeterInstrumentation(["faithfulness"], judge=judge, mode="offline") as meter:
        qe = engine(index)
        for a in ANIMALS[:3]:
            qe.query(question(a))
        qe.query(question(ANIMALS[0]))  # the same question twice: still two distinct samples
        dropped = engine(index, streaming=True).query(question("yak"))
        del dropped
        gc.collect()
    assert len(meter.results) == 0 and meter.scorer is None
    assert meter.export_jsonl(tmp_path / "captured.jsonl") == 4
    loaded = rm.load_samples(tmp_path / "captured.jsonl")
    assert loaded.errors == [] and len(loaded) == 4
    assert [s.question for s in loaded] == [question(a) for a in ANIMALS[:3]] + [question(ANIMALS[0])]
    assert loaded[0].contexts[0].id == f"doc-{ANIMALS[0]}" and loaded[0].metadata["latency"]["total_s"] > 0
    assert loaded[0].contexts[0].score == meter.samples[0].contexts[0].score
    assert meter.export_jsonl(tmp_path / "all.jsonl", statuses=("ok", "partial")) == 5
    everything = rm.load_samples(tmp_path / "all.jsonl")
    assert len(everything) == 5 and everything[-1].metadata["status"] == "partial"
    report = meter.evaluate()
    assert report.summary()["faithfulness"]["mean"] == 1.0 and len(report) == 4
    assert len(meter.evaluate()) == 0  # only what was captured since the last call
    assert len(meter.results) == 4 and meter.stats["scored"] == 4


def test_detach_stops_capture(index, judge):
    meter = RagmeterInstrumentation(["faithfulness"], judge=judge).attach()
    assert meter.attached
    qe = engine(index)
    qe.query(question("wombat"))
    meter.detach()
    assert not meter.attached
    qe.query(question("zebra"))
    meter.flush(5)
    assert [s.question for s in meter.samples] == [question("wombat")]
    meter.attach()
    qe.query(question("alpaca"))
    meter.shutdown()
    assert [s.question for s in meter.samples] == [question("wombat"), question("alpaca")]


def test_sampling_and_filter_are_counted(index, judge):
    seen = []
    with RagmeterInstrumentation(
        ["faithfulness"],
        judge=judge,
        sample_rate=0.0,
        should_score=lambda s: True if "beaver" in s.question else None,
        on_result=lambda r: seen.append(r.sample.question),
    ) as meter:
        qe = engine(index)
        qe.query(question("beaver"))
        qe.query(question("cougar"))
    assert seen == [question("beaver")]
    assert meter.stats["sampled_out"] == 1 and meter.stats["scored"] == 1 and len(meter.samples) == 2
    assert meter.results.summary()["faithfulness"]["count"] == 1


def test_handlers_failures_never_break_queries(index, judge, monkeypatch):
    meter = RagmeterInstrumentation(["faithfulness"], judge=judge)

    def boom(*a, **k):
        raise ValueError("capture bug")

    monkeypatch.setattr(meter, "_metadata", boom)
    monkeypatch.setattr(meter._capture, "_apply", boom)
    with meter:
        response = engine(index).query(question("dingo"))
    assert code_of("dingo") in str(response)
    assert meter.stats["capture_errors"] == 1 and meter.samples == []


def test_ground_truth_and_tags_from_instrument_tags(index, judge):
    from llama_index.core.instrumentation.dispatcher import instrument_tags

    with RagmeterInstrumentation(["faithfulness", "mrr"], judge=judge) as meter:
        qe = engine(index)
        with instrument_tags(
            {"reference": "K1037", "relevant_ids": ["doc-otter"], "sample_id": "case-7", "user": "u1"}
        ):
            qe.query(question("otter"))
        with instrument_tags({"relevant_ids": {"doc-heron": "very"}}):  # bad grade: kept, field dropped
            qe.query(question("heron"))
    first, second = meter.samples
    assert first.id == "case-7" and first.reference == "K1037" and first.relevant_ids == ["doc-otter"]
    assert first.metadata["tags"] == {"user": "u1"}
    assert second.relevant_ids is None and "relevant_ids" in second.metadata["capture_warning"]
    scores = {r.sample.id: r.scores for r in meter.results}
    assert scores["case-7"]["mrr"].value == 1.0
    assert scores[second.id]["mrr"].value is None  # not applicable without relevant ids


# --------------------------------------------------------------------------- OpenTelemetry


def test_results_attach_to_the_trace_active_at_query_start(index, judge):
    pytest.importorskip("opentelemetry.sdk")
    writer = pytest.importorskip("ragmeter.tracing.writer")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    qe = engine(index)
    with RagmeterInstrumentation(["faithfulness"], judge=judge, tracer_provider=provider) as meter:
        with tracer.start_as_current_span("POST /ask") as span:
            qe.query(question("falcon"))
            ctx = span.get_span_context()

        async def in_async():
            with tracer.start_as_current_span("POST /ask-async") as aspan:
                await qe.aquery(question("otter"))
                return aspan.get_span_context()

        actx = asyncio.run(in_async())
        with tracer.start_as_current_span("POST /stream") as sspan:
            streamed = engine(index, streaming=True).query(question("badger"))
            sctx = sspan.get_span_context()
        "".join(streamed.response_gen)  # consumed after the request span ended: same trace
        qe.query(question("heron"))  # no active span
    samples = meter.samples
    assert samples[0].metadata["trace"] == {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
    }
    assert samples[1].metadata["trace"]["trace_id"] == format(actx.trace_id, "032x")
    assert samples[2].metadata["trace"]["span_id"] == format(sctx.span_id, "016x")
    assert "trace" not in samples[3].metadata
    assert meter.stats["trace_writes"] == 3 and meter.stats["trace_errors"] == 0
    apps = {"POST /ask", "POST /ask-async", "POST /stream"}
    carriers = [s for s in exporter.get_finished_spans() if s.name not in apps]
    assert {s.context.trace_id for s in carriers} == {ctx.trace_id, actx.trace_id, sctx.trace_id}
    assert writer.SpanTarget  # the API this integration is written against
