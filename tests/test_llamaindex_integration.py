"""LlamaIndex integration on real llama-index-core pieces: VectorStoreIndex, query engines, the
instrumentation dispatcher and BatchEvalRunner, with a deterministic hashing embedding, a small
LLM that answers from its context, and a ScriptedJudge (no network, no key)."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import os
import random
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

pytestmark = pytest.mark.filterwarnings("ignore:asyncio_module\\(\\) is deprecated:DeprecationWarning")

sys.path.insert(0, os.path.dirname(__file__))

from helpers.scripted import ScriptedJudge  # noqa: E402

from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.embeddings import BaseEmbedding  # noqa: E402
from llama_index.core.evaluation import BatchEvalRunner  # noqa: E402
from llama_index.core.instrumentation import get_dispatcher  # noqa: E402
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.query_engine import CustomQueryEngine  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402

import ragmeter as rm  # noqa: E402
import ragmeter.integrations.llamaindex as li  # noqa: E402
from ragmeter.integrations.llamaindex import (  # noqa: E402
    RagmeterEvaluationResult, RagmeterEvaluator, RagmeterFaithfulnessEvaluator, RagmeterInstrumentation,
    make_evaluators,
)

# --------------------------------------------------------------------------- fixtures

ANIMALS = ["falcon", "otter", "badger", "heron", "lynx", "walrus", "gecko", "bison", "marten", "ibis",
           "jackal", "koala", "lemur", "manatee", "narwhal", "ocelot", "puffin", "quokka", "raven", "salmon",
           "tapir", "urchin", "vole", "wombat", "yak", "zebra", "alpaca", "beaver", "cougar", "dingo"]


def code_of(animal: str) -> str:
    return f"K{ANIMALS.index(animal) * 37 + 1000}"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class HashEmbedding(BaseEmbedding):
    """Bag of hashed words: texts sharing words are close, so retrieval is meaningful."""

    delay: float = 0.0

    def _vec(self, text: str) -> list[float]:
        v = np.zeros(256)
        for w in words(text):  # one fixed pseudo-random direction per word
            v += np.random.default_rng(int(hashlib.md5(w.encode()).hexdigest()[:8], 16)).standard_normal(256)
        n = np.linalg.norm(v)
        return list(v / n if n else v)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        if self.delay:
            await asyncio.sleep(random.random() * self.delay)
        return self._vec(query)


class EchoLLM(CustomLLM):
    """Answers with the context sentence that shares most words with the query; reports tokens."""

    delay: float = 0.0
    fail: bool = False

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="echo-llm")

    def _answer(self, prompt: str) -> str:
        if self.fail:
            raise RuntimeError("LLM backend unavailable")
        m = re.search(r"-{5,}\n(.*?)\n-{5,}.*Query: (.*?)\n", prompt, re.S)
        context, query = m.group(1), m.group(2)
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", context) if s.strip()]
        qw = set(words(query))
        return max(sentences, key=lambda s: len(qw & set(words(s))))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = self._answer(prompt)
        return CompletionResponse(text=text, additional_kwargs={"prompt_tokens": len(prompt.split()),
                                                                 "completion_tokens": len(text.split())})

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if self.delay:
            await asyncio.sleep(random.random() * self.delay)
        return self.complete(prompt, formatted=formatted)  # a nested LLM call, as CustomLLM does

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        text = self._answer(prompt)

        def gen():
            acc = ""
            for w in text.split(" "):
                delta = (" " if acc else "") + w
                acc += delta
                yield CompletionResponse(text=acc, delta=delta)

        return gen()


def _claims(inputs):
    return {"claims": [{"unit": i, "text": u} for i, u in enumerate(inputs["units"])]}


def _verify(inputs):
    verdicts = []
    for i, claim in enumerate(inputs["claims"]):
        hits = [j for j, chunk in enumerate(inputs["chunks"]) if set(words(claim)) <= set(words(chunk))]
        verdicts.append({"claim": i, "verdict": "supported" if hits else "not_found",
                         "evidence": [{"chunk": j, "quote": claim} for j in hits[:1]], "reason": "word overlap"})
    return {"verdicts": verdicts}


def scripted_judge() -> ScriptedJudge:
    return ScriptedJudge({"extract_claims": _claims, "verify_claims": _verify})


@pytest.fixture(scope="module")
def index():
    nodes = [TextNode(id_=f"doc-{a}", text=f"The secret code of the {a} is {code_of(a)}.",
                      metadata={"animal": a, "page": ANIMALS.index(a)}) for a in ANIMALS]
    return VectorStoreIndex(nodes, embed_model=HashEmbedding())


def engine(index, **kw):
    llm = kw.pop("llm", None) or EchoLLM()
    return index.as_query_engine(llm=llm, similarity_top_k=kw.pop("top_k", 2), **kw)


def question(animal: str) -> str:
    return f"What is the secret code of the {animal}?"


@pytest.fixture
def judge():
    return scripted_judge()


def _handlers():
    d = get_dispatcher()
    return list(d.span_handlers), list(d.event_handlers)


@pytest.fixture(autouse=True)
def _no_handler_leak():
    before = _handlers()
    yield
    after = _handlers()
    assert [id(h) for h in after[0]] == [id(h) for h in before[0]]
    assert [id(h) for h in after[1]] == [id(h) for h in before[1]]


# --------------------------------------------------------------------------- evaluators


def test_evaluate_response_keeps_node_ids_and_scores(index, judge):
    response = engine(index).query(question("otter"))
    ev = RagmeterFaithfulnessEvaluator(judge)
    res = ev.evaluate_response(query=question("otter"), response=response)
    assert isinstance(res, RagmeterEvaluationResult)
    assert res.invalid_result is False and res.invalid_reason is None
    assert res.score == 1.0 and res.passing is True and res.label == "pass"
    assert res.response == f"The secret code of the otter is {code_of('otter')}."
    assert res.contexts[0] == res.response and len(res.contexts) == 2
    assert res.feedback and res.metric == "faithfulness" and res.judge == "scripted"
    claim = res.details["claims"][0]
    assert claim["verdict"] == "supported" and claim["chunk_id"] == "doc-otter"
    assert res.ragmeter_score.value == 1.0 and res.ragmeter_score.label == "pass"
    assert res.usage["calls"] == 2
    assert '"chunk_id":"doc-otter"' in res.model_dump_json()  # serialisable, details included


def test_aevaluate_strings_and_invalid_inputs_never_raise(judge):
    ev = RagmeterFaithfulnessEvaluator(judge)

    async def main():
        ok = await ev.aevaluate(query="Who wrote Dune?", response="Frank Herbert wrote Dune.",
                                contexts=["Dune is a novel. Frank Herbert wrote Dune in 1965."])
        unsupported = await ev.aevaluate(query="Who wrote Dune?", response="Isaac Asimov wrote Dune.",
                                         contexts=["Frank Herbert wrote Dune."])
        no_contexts = await ev.aevaluate(query="Who wrote Dune?", response="Frank Herbert.", contexts=[])
        no_query = await ev.aevaluate(query=None, response="x", contexts=["y"])
        bad_context = await ev.aevaluate(query="q", response="a", contexts=[object()])
        return ok, unsupported, no_contexts, no_query, bad_context

    ok, unsupported, no_contexts, no_query, bad_context = asyncio.run(main())
    assert ok.score == 1.0 and ok.passing is True
    assert unsupported.score == 0.0 and unsupported.passing is False and unsupported.label == "fail"
    for r in (no_contexts, no_query, bad_context):
        assert r.invalid_result is True and r.score is None and r.passing is None and r.invalid_reason
    assert "not applicable" in no_contexts.invalid_reason
    assert "question" in no_query.invalid_reason


def test_retrieval_metric_evaluator_uses_node_ids(index):
    response = engine(index).query(question("heron"))
    ev = RagmeterEvaluator("mrr")
    res = ev.evaluate_response(query=question("heron"), response=response, relevant_ids=["doc-heron"])
    assert res.score == 1.0 and res.judge == "code"
    res = ev.evaluate_response(query=question("heron"), response=response, relevant_ids=["doc-zebra"])
    assert res.score == 0.0


class _BrokenJudge(ScriptedJudge):
    async def run(self, task, inputs):
        self.calls[task] += 1
        raise RuntimeError("judge backend down")


def test_batch_eval_runner_shares_judge_work_and_failures_return_fast(index, judge):
    qe = engine(index)
    animals = ANIMALS[:4]
    evaluators = make_evaluators(["faithfulness", "citation_accuracy", "hallucinated_specifics"], judge)
    evaluators["broken"] = RagmeterFaithfulnessEvaluator(_BrokenJudge({}))
    runner = BatchEvalRunner(evaluators, workers=4)
    t0 = time.perf_counter()
    results = runner.evaluate_queries(qe, queries=[question(a) for a in animals])
    elapsed = time.perf_counter() - t0
    assert elapsed < 3.0  # BatchEvalRunner's retry waits >= 4 s: nothing was retried
    assert [r.score for r in results["faithfulness"]] == [1.0] * 4
    assert all(r.passing for r in results["faithfulness"])
    assert [r.score for r in results["hallucinated_specifics"]] == [1.0] * 4
    assert all(isinstance(r, RagmeterEvaluationResult) for rs in results.values() for r in rs)
    for r in results["broken"]:
        assert r.invalid_result is True and r.score is None and "judge backend down" in r.invalid_reason
    # claims were extracted once per answer and shared by faithfulness and citation accuracy
    assert judge.calls["extract_claims"] == 4
    assert sorted(r.query for r in results["citation_accuracy"]) == sorted(question(a) for a in animals)


def test_judge_specs_resolve_once_and_offline_judge_works(monkeypatch):
    from ragmeter.judges import OfflineJudge

    resolved = []

    def resolve(spec, metrics):
        resolved.append(spec)
        return OfflineJudge(embeddings=False)  # "offline" without loading the local embedding model

    monkeypatch.setattr(li, "resolve_judge", resolve)
    monkeypatch.setattr(li, "_SPEC_JUDGES", {})
    evs = make_evaluators(["faithfulness", "answer_relevancy", "precision@2"], "offline")
    assert set(evs) == {"faithfulness", "answer_relevancy", "precision@2"}
    assert evs["faithfulness"].judge is evs["answer_relevancy"].judge
    assert evs["precision@2"].judge is None
    assert RagmeterFaithfulnessEvaluator("offline").judge is evs["faithfulness"].judge
    assert resolved == ["offline"]
    res = evs["faithfulness"].evaluate(query="Who wrote Dune?", response="Frank Herbert wrote Dune.",
                                       contexts=["Dune was written by Frank Herbert."])
    assert res.judge == "offline" and res.score == 1.0 and not res.invalid_result
    res = evs["answer_relevancy"].evaluate(query="Who wrote Dune?", response="Frank Herbert wrote Dune.",
                                           contexts=["Dune was written by Frank Herbert."])
    assert res.score is not None and res.details.get("judge_usage") is not None


# --------------------------------------------------------------------------- capture


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
    nodes = [TextNode(id_=f"doc-{a}", text=f"The secret code of the {a} is {code_of(a)}.") for a in ANIMALS]
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding(delay=0.02))
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
    with RagmeterInstrumentation(["faithfulness"], judge=judge, sample_rate=0.0,
                                 should_score=lambda s: True if "beaver" in s.question else None,
                                 on_result=lambda r: seen.append(r.sample.question)) as meter:
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
        with instrument_tags({"reference": "K1037", "relevant_ids": ["doc-otter"], "sample_id": "case-7",
                              "user": "u1"}):
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


def test_llamaindex_llm_as_judge_is_wrapped():
    from ragmeter.judges import LlamaIndexJudge

    meter = RagmeterInstrumentation(["faithfulness"], judge=EchoLLM(), mode="offline")
    assert isinstance(meter.judge, LlamaIndexJudge)
    ev = RagmeterFaithfulnessEvaluator(EchoLLM(), share=False)
    assert isinstance(ev.judge, LlamaIndexJudge)


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
    assert samples[0].metadata["trace"] == {"trace_id": format(ctx.trace_id, "032x"),
                                            "span_id": format(ctx.span_id, "016x")}
    assert samples[1].metadata["trace"]["trace_id"] == format(actx.trace_id, "032x")
    assert samples[2].metadata["trace"]["span_id"] == format(sctx.span_id, "016x")
    assert "trace" not in samples[3].metadata
    assert meter.stats["trace_writes"] == 3 and meter.stats["trace_errors"] == 0
    apps = {"POST /ask", "POST /ask-async", "POST /stream"}
    carriers = [s for s in exporter.get_finished_spans() if s.name not in apps]
    assert {s.context.trace_id for s in carriers} == {ctx.trace_id, actx.trace_id, sctx.trace_id}
    assert writer.SpanTarget  # the API this integration is written against


def test_shared_judge_wrappers_are_reused_and_released():
    import weakref

    judge = scripted_judge()
    a, b = RagmeterFaithfulnessEvaluator(judge), RagmeterEvaluator("citation_accuracy", judge)
    assert a.judge is b.judge and a.judge.inner is judge
    assert RagmeterFaithfulnessEvaluator(judge, share=False).judge is judge
    ref = weakref.ref(a.judge)
    del a, b
    gc.collect()
    assert ref() is None and id(judge) not in li._SHARED  # no evaluator left: the wrapper is gone


def test_ensemble_members_share_work():
    from ragmeter.judges import EnsembleJudge

    one, two = scripted_judge(), ScriptedJudge({"extract_claims": _claims, "verify_claims": _verify}, name="two")
    evs = make_evaluators(["faithfulness", "citation_accuracy"], EnsembleJudge([one, two]))
    runner = BatchEvalRunner(evs, workers=2)
    out = runner.evaluate_response_strs(queries=["Who wrote Dune?"], response_strs=["Frank Herbert wrote Dune."],
                                        contexts_list=[["Frank Herbert wrote Dune in 1965."]])
    assert out["faithfulness"][0].score == 1.0 and out["faithfulness"][0].judge == "ensemble"
    assert out["faithfulness"][0].details["members"]["two"]["value"] == 1.0
    assert one.calls["extract_claims"] == two.calls["extract_claims"] == 1
