"""RagmeterCallbackHandler on real LCEL chains built from langchain-core pieces.

Every entry point (invoke, ainvoke, batch, abatch, stream, astream), nested chains, two
retrievers, errors, abandoned streams, 100 concurrent runs, inline scoring that never blocks or
raises, offline capture and export.
"""

from __future__ import annotations

import asyncio
import logging
import random
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from helpers import wait_for

pytest.importorskip("langchain_core")

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

import ragmeter as rm
from ragmeter.data import Score
from ragmeter.integrations.langchain import RagmeterCallbackHandler
from ragmeter.judges.base import Judge
from ragmeter.metrics.base import Metric

RETRIEVAL = ["precision@2", "recall@2", "mrr"]

DOCS = [
    Document(
        id="doc-paris", page_content="Paris is the capital of France.", metadata={"source": "geo.txt", "score": 0.91}
    ),
    Document(id="doc-berlin", page_content="Berlin is the capital of Germany.", metadata={"source": "geo.txt"}),
    Document(
        id="doc-dune", page_content="Dune was written by Frank Herbert in 1965.", metadata={"source": "books.txt"}
    ),
    Document(id="doc-tea", page_content="Green tea is made from unoxidised leaves.", metadata={"source": "food.txt"}),
    Document(
        id="doc-rust",
        page_content="Rust guarantees memory safety without a garbage collector.",
        metadata={"source": "code.txt"},
    ),
]


# ---------------------------------------------------------------------------- chain pieces


class QuotingChatModel(GenericFakeChatModel):
    """Answers by quoting the first context line of its prompt ("[doc-7] text" ->
    "According to [doc-7], text"), so every answer is tied to the contexts its run retrieved.
    Reports token usage on the message (``usage_in="message"``) or in ``llm_output``."""

    messages: object = iter(())
    usage_in: str = "message"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        prompt = "\n".join(str(m.content) for m in messages)
        line = next((ln for ln in prompt.splitlines() if ln.startswith("[")), "")
        ident, _, text = line.partition("] ")
        answer = f"According to {ident}], {text}" if text else "I do not know."
        p, c = len(prompt.split()), len(answer.split())
        if self.usage_in == "message":
            msg = AIMessage(
                content=answer, usage_metadata={"input_tokens": p, "output_tokens": c, "total_tokens": p + c}
            )
            return ChatResult(generations=[ChatGeneration(message=msg)])
        usage = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=answer))], llm_output={"token_usage": usage}
        )


class KeyedRetriever(BaseRetriever):
    """Returns the documents stored under the query (``"q17"`` -> ``[doc-17]``), after a small
    random delay in async use so concurrent runs interleave; ``fail`` raises instead."""

    docs: dict
    jitter: float = 0.0
    fail: bool = False

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if self.fail:
            raise ConnectionError("vector store unreachable")
        return list(self.docs.get(query, []))

    async def _aget_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        if self.jitter:
            await asyncio.sleep(random.random() * self.jitter)
        return self._get_relevant_documents(query, run_manager=run_manager)


def format_docs(docs: list[Document]) -> str:
    return "\n".join(f"[{d.id}] {d.page_content}" for d in docs)


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the context only.\nContext:\n{context}"), ("human", "{question}")]
)


def rag_chain(retriever, model=None):
    model = model if model is not None else QuotingChatModel()
    return (
        {"context": retriever | RunnableLambda(format_docs), "question": RunnablePassthrough()}
        | PROMPT
        | model
        | StrOutputParser()
    )


@pytest.fixture(scope="module")
def retriever():
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(DOCS)
    return store.as_retriever(search_kwargs={"k": 2})


@pytest.fixture(scope="module")
def chain(retriever):
    return rag_chain(retriever)


def expected_ids(retriever, question):
    return [d.id for d in retriever.invoke(question)]


class GatedMetric(Metric):
    """Answer length / 100 (capped at 1), after waiting on ``gate`` (holds the worker busy)."""

    name = "gated_length"
    uses_judge = False
    requires = ("answer",)

    def __init__(self, gate: threading.Event):
        super().__init__()
        self.gate = gate

    async def compute(self, sample, ctx):
        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        return Score(self.name, min(1.0, len(sample.answer) / 100), explanation="length")


class ExplodingMetric(Metric):
    name = "exploding"
    uses_judge = False

    async def compute(self, sample, ctx):
        raise RuntimeError("metric bug")


class BrokenMetric(Metric):
    """Breaks the Metric contract itself: ``ascore`` raises."""

    name = "broken"
    uses_judge = False

    async def ascore(self, sample, ctx=None):
        raise RuntimeError("ascore bug")


class ExplodingJudge(Judge):
    name = "exploding-judge"

    async def run(self, task, inputs):
        raise RuntimeError("judge backend down")


# ---------------------------------------------------------------------------- entry points


def test_invoke_captures_question_contexts_answer_and_ground_truth(retriever, chain):
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    q = "What is the capital of France?"
    plain = chain.invoke(q)
    out = chain.invoke(
        q,
        config={
            "callbacks": [handler],
            "metadata": {"reference": "Paris.", "relevant_ids": ["doc-paris"], "sample_id": "geo-1", "user": "u7"},
        },
    )
    assert out == plain  # result unchanged
    assert handler.flush(10)
    [sample] = handler.samples
    assert sample.question == q
    assert sample.id == "geo-1"
    assert sample.reference == "Paris." and sample.relevant_ids == ["doc-paris"]
    ids = expected_ids(retriever, q)
    assert sample.retrieved_ids == ids
    by_id = {d.id: d for d in DOCS}
    assert [c.text for c in sample.contexts] == [by_id[i].page_content for i in ids]
    assert [c.metadata["source"] for c in sample.contexts] == [by_id[i].metadata["source"] for i in ids]
    assert [c.rank for c in sample.contexts] == [1, 2]
    for c in sample.contexts:  # a score kept in the Document's metadata becomes Context.score
        assert c.score == (0.91 if c.id == "doc-paris" else None)
    assert sample.answer == out == f"According to [{ids[0]}], {by_id[ids[0]].page_content}"
    meta = sample.metadata
    assert meta["status"] == "ok" and meta["source"] == "langchain"
    assert meta["run_metadata"] == {"user": "u7"}
    assert len(meta["run_id"]) == 36
    assert meta["retrievers"] == [
        {"name": "VectorStoreRetriever", "query": q, "documents": 2, "latency_s": meta["retrievers"][0]["latency_s"]}
    ]
    [result] = handler.results
    assert result.sample is sample
    assert set(result.scores) == set(RETRIEVAL)
    assert result["recall@2"].value == (1.0 if "doc-paris" in ids else 0.0)
    stats = handler.stats
    assert (stats["captured"], stats["ok"], stats["scored"], stats["dropped"]) == (1, 1, 1, 0)


def test_latency_and_token_usage_are_recorded(retriever):
    for usage_in in ("message", "llm_output"):
        chain = rag_chain(retriever, QuotingChatModel(usage_in=usage_in))
        handler = RagmeterCallbackHandler(mode="offline")
        chain.invoke("Who wrote Dune?", config={"callbacks": [handler]})
        meta = handler.samples[0].metadata
        lat = meta["latency"]
        assert set(lat) >= {"total_s", "retrieval_s", "generation_s"}
        assert 0 < lat["retrieval_s"] <= lat["total_s"] and 0 < lat["generation_s"] <= lat["total_s"]
        usage = meta["token_usage"]
        assert usage["prompt"] > 10 and usage["completion"] > 3
        assert usage["total"] == usage["prompt"] + usage["completion"]
        assert meta["llm_calls"] == 1


def test_fake_list_chat_model_and_ainvoke(retriever):
    chain = rag_chain(retriever, FakeListChatModel(responses=["Frank Herbert wrote Dune."]))
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    out = asyncio.run(
        chain.ainvoke("Who wrote Dune?", config={"callbacks": [handler], "metadata": {"relevant_ids": ["doc-dune"]}})
    )
    assert out == "Frank Herbert wrote Dune."
    handler.flush(10)
    [s] = handler.samples
    assert (s.question, s.answer) == ("Who wrote Dune?", out)
    assert s.retrieved_ids == expected_ids(retriever, "Who wrote Dune?")
    assert len(handler.results) == 1


def test_batch_and_abatch_keep_runs_apart(retriever, chain):
    qs = ["What is the capital of France?", "Who wrote Dune?", "How is green tea made?"]
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    configs = [
        {"callbacks": [handler], "metadata": {"sample_id": f"b{i}", "relevant_ids": [DOCS[i].id]}} for i in range(3)
    ]
    outs = chain.batch(qs, config=configs)
    aouts = asyncio.run(chain.abatch(qs, config={"callbacks": [handler]}))
    assert outs == aouts
    handler.flush(10)
    samples = handler.samples
    assert len(samples) == 6
    by_q = {}
    for s in samples:
        by_q.setdefault(s.question, []).append(s)
    for q, out in zip(qs, outs):
        assert [s.answer for s in by_q[q]] == [out, out]
        assert all(s.retrieved_ids == expected_ids(retriever, q) for s in by_q[q])
    given = sorted(s.id for s in samples if len(s.id) != 36)
    assert given == ["b0", "b1", "b2"]  # the sample_id from config metadata, else the run id (a UUID)
    assert handler.stats["scored"] == 6


def test_stream_and_astream_resolve_the_input_placeholder(retriever, chain):
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    q = "Which language has memory safety?"
    chunks = list(chain.stream(q, config={"callbacks": [handler]}))

    async def astream():
        return [c async for c in chain.astream(q, config={"callbacks": [handler]})]

    achunks = asyncio.run(astream())
    assert "".join(chunks) == "".join(achunks) == chain.invoke(q)
    handler.flush(10)
    assert len(handler.samples) == 2
    for s in handler.samples:
        assert s.question == q  # not the "" placeholder LangChain starts streams with
        assert s.answer == "".join(chunks)
        assert s.retrieved_ids == expected_ids(retriever, q)
        assert s.metadata["status"] == "ok"
        assert 0 < s.metadata["latency"]["first_token_s"] <= s.metadata["latency"]["total_s"]
    assert handler.stats["scored"] == 2


def test_abandoned_streams_are_marked_partial_and_not_scored(retriever, chain):
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    q = "What is the capital of Germany?"
    full = chain.invoke(q)
    for _chunk in chain.stream(q, config={"callbacks": [handler]}):
        break  # the caller walks away after the first chunk

    async def abandon():
        async for _chunk in chain.astream(q, config={"callbacks": [handler]}):
            break
        await asyncio.sleep(0)  # LangChain's generator is closed by the loop's asyncgen hook

    asyncio.run(abandon())
    assert wait_for(lambda: handler.stats["captured"] == 2)
    handler.flush(10)
    for s in handler.samples:
        assert s.metadata["status"] == "partial"
        assert s.metadata["partial_reason"]
        assert s.question == q and s.retrieved_ids == expected_ids(retriever, q)
        assert s.answer is None  # never scored as a complete answer
        assert full.startswith(s.metadata["partial_answer"])  # what had been streamed so far, kept aside
    stats = handler.stats
    assert (stats["partial"], stats["submitted"], stats["scored"]) == (2, 0, 0)
    assert len(handler.results) == 0


def test_cancelled_ainvoke_is_partial():
    deadline = []  # the caller's timeout, which expires the moment the model starts generating

    class SlowModel(QuotingChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            deadline[0].reschedule(asyncio.get_running_loop().time())
            await asyncio.sleep(5)
            return self._generate(messages)

    chain = rag_chain(KeyedRetriever(docs={"q": [Document(id="d", page_content="Some fact.")]}), SlowModel())
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)

    async def call_with_timeout():
        with pytest.raises(asyncio.TimeoutError):
            async with asyncio.timeout(30) as timeout:
                deadline.append(timeout)
                await chain.ainvoke("q", config={"callbacks": [handler]})

    asyncio.run(call_with_timeout())
    [s] = handler.samples
    assert s.metadata["status"] == "partial" and "CancelledError" in s.metadata["partial_reason"]
    assert s.retrieved_ids == ["d"] and s.answer is None
    assert handler.stats["submitted"] == 0


def test_nested_chain_and_two_retrievers(retriever):
    keyword = KeyedRetriever(
        docs={"Who wrote Dune?": [DOCS[2], Document(id="doc-extra", page_content="Herbert lived in Tacoma.")]}
    )
    inner = (
        {
            "context": RunnableParallel(a=retriever, b=keyword)
            | RunnableLambda(lambda d: format_docs(d["a"] + d["b"])),
            "question": RunnablePassthrough(),
        }
        | PROMPT
        | QuotingChatModel()
        | StrOutputParser()
    )
    outer = RunnableLambda(lambda x: x["q"].strip()) | inner | RunnableLambda(lambda a: {"answer": a, "n": len(a)})
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    out = outer.invoke({"q": "  Who wrote Dune?  "}, config={"callbacks": [handler]})
    handler.flush(10)
    [s] = handler.samples  # one sample per root, however deep the chain
    assert s.question == "Who wrote Dune?"  # no known input key: the first retriever's query
    assert s.answer == out["answer"]
    vec = expected_ids(retriever, "Who wrote Dune?")
    want = vec + [i for i in ["doc-dune", "doc-extra"] if i not in vec]  # branch a then b, duplicates once
    assert s.retrieved_ids == want
    assert [r["name"] for r in s.metadata["retrievers"]] == ["VectorStoreRetriever", "KeyedRetriever"]
    assert [r["documents"] for r in s.metadata["retrievers"]] == [2, 2]

    # attached to the inner chain only: its run's parent was never seen, so it is the root
    inner_only = RagmeterCallbackHandler(metrics=RETRIEVAL)
    outer2 = RunnableLambda(lambda x: x["q"].strip()) | inner.with_config(callbacks=[inner_only])
    assert outer2.invoke({"q": " Who wrote Dune? "}) == out["answer"]
    [s2] = inner_only.samples
    assert (s2.question, s2.answer, s2.retrieved_ids) == ("Who wrote Dune?", out["answer"], want)
    assert s2.metadata["status"] == "ok"


@pytest.mark.slow  # waits real time
def test_parallel_branches_keep_their_declared_order_whatever_thread_starts_first(retriever):
    # branch "a" waits before retrieving, so its retriever starts after "b"'s on every run; the
    # sample still lists a's documents first, as the prompt below sees them
    keyword = KeyedRetriever(
        docs={"Who wrote Dune?": [Document(id="doc-extra", page_content="Herbert lived in Tacoma.")]}
    )
    late = RunnableLambda(lambda q: (time.sleep(0.2), q)[1]) | retriever
    chain = RunnableParallel(a=late, b=keyword, question=RunnablePassthrough()) | RunnableLambda(
        lambda d: {"answer": format_docs(d["a"] + d["b"])}
    )
    handler = RagmeterCallbackHandler(mode="offline")
    for _ in range(3):
        chain.invoke("Who wrote Dune?", config={"callbacks": [handler]})
    want = expected_ids(retriever, "Who wrote Dune?") + ["doc-extra"]
    assert [s.retrieved_ids for s in handler.samples] == [want] * 3
    assert [[r["name"] for r in s.metadata["retrievers"]] for s in handler.samples] == [
        ["VectorStoreRetriever", "KeyedRetriever"]
    ] * 3


def test_question_and_answer_keys(retriever):
    chain = RunnableParallel(
        docs=lambda x: retriever.invoke(x["query_text"]), query_text=lambda x: x["query_text"], lang=lambda x: x["lang"]
    ) | RunnableLambda(lambda x: {"reply": f"{x['docs'][0].page_content} ({x['lang']})", "sources": x["docs"]})
    handler = RagmeterCallbackHandler(mode="offline", question_key="query_text", answer_key="reply")
    out = chain.invoke({"query_text": "capital of France", "lang": "en"}, config={"callbacks": [handler]})
    [s] = handler.samples
    assert s.question == "capital of France" and s.answer == out["reply"]
    # defaults: "question" in, "answer" out
    chain2 = {"docs": (lambda x: x["question"]) | retriever, "question": lambda x: x["question"]} | RunnableLambda(
        lambda x: {"answer": x["docs"][0].page_content, "docs": x["docs"]}
    )
    h2 = RagmeterCallbackHandler(mode="offline")
    out2 = chain2.invoke({"question": "Who wrote Dune?", "user": "x"}, config={"callbacks": [h2]})
    [s2] = h2.samples
    assert s2.question == "Who wrote Dune?" and s2.answer == out2["answer"]


def test_retriever_error_is_recorded_not_scored(retriever):
    chain = rag_chain(KeyedRetriever(docs={}, fail=True))
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    with pytest.raises(ConnectionError, match="unreachable"):  # the chain's own error, unchanged
        chain.invoke("What is the capital of France?", config={"callbacks": [handler]})
    with pytest.raises(ConnectionError):
        asyncio.run(chain.ainvoke("Who wrote Dune?", config={"callbacks": [handler]}))
    handler.flush(10)
    assert [s.metadata["status"] for s in handler.samples] == ["error", "error"]
    s = handler.samples[0]
    assert s.question == "What is the capital of France?" and s.answer is None and s.contexts == []
    assert "ConnectionError" in s.metadata["error"]
    assert "ConnectionError" in s.metadata["retrievers"][0]["error"]
    stats = handler.stats
    assert (stats["errored"], stats["submitted"], stats["scored"]) == (2, 0, 0)


def test_empty_retrieval_recorded_not_scored_and_non_rag_roots_skipped(retriever):
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    rag_chain(KeyedRetriever(docs={})).invoke("Anything?", config={"callbacks": [handler]})
    QuotingChatModel().invoke("hello", config={"callbacks": [handler]})  # not a RAG run
    retriever.invoke("capital of Germany", config={"callbacks": [handler]})  # a retriever on its own
    handler.flush(10)
    stats = handler.stats
    assert stats["skipped_no_retriever"] == 1
    assert stats["skipped_no_contexts"] == 1
    assert stats["captured"] == 2 and stats["scored"] == 1
    only_retriever = handler.samples[1]
    assert only_retriever.question == "capital of Germany" and only_retriever.answer is None
    assert not handler.run_map  # nothing held after the runs end (the handler keeps no order_map)


# ---------------------------------------------------------------------------- concurrency


@pytest.mark.slow  # waits real time
def test_100_concurrent_abatch_runs_never_mix():
    n = 100
    docs = {
        f"q{i}": [
            Document(id=f"doc-{i}", page_content=f"Fact number {i} is {i * 7}."),
            Document(id=f"doc-{i}-b", page_content=f"Side note {i}."),
        ]
        for i in range(n)
    }
    chain = rag_chain(KeyedRetriever(docs=docs, jitter=0.01))
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    qs = [f"q{i}" for i in range(n)]
    configs = [
        {"callbacks": [handler], "metadata": {"relevant_ids": [f"doc-{i}"], "sample_id": f"s{i}"}} for i in range(n)
    ]
    outs = asyncio.run(chain.abatch(qs, config=configs, max_concurrency=n))
    assert len(set(outs)) == n  # distinct answers
    assert handler.flush(20)
    samples = {s.id: s for s in handler.samples}
    assert len(samples) == n
    for i, out in enumerate(outs):
        s = samples[f"s{i}"]
        assert s.question == f"q{i}"
        assert s.retrieved_ids == [f"doc-{i}", f"doc-{i}-b"]  # its own retriever output
        assert s.answer == out == f"According to [doc-{i}], Fact number {i} is {i * 7}."  # quotes its own context
        assert s.contexts[0].text in s.answer
    results = handler.results
    assert len(results) == n
    assert all(r["mrr"].value == 1.0 and r["precision@2"].value == 0.5 for r in results)


# ---------------------------------------------------------------------------- inline scoring


@pytest.mark.slow  # waits real time
def test_full_queue_drops_counts_and_never_blocks(retriever, chain, caplog):
    gate = threading.Event()
    handler = RagmeterCallbackHandler(metrics=[GatedMetric(gate)], max_queue=1)
    qs = [f"Question {i} about France?" for i in range(5)]
    with caplog.at_level(logging.WARNING, logger="ragmeter"):
        outs = [chain.invoke(q, config={"callbacks": [handler]}) for q in qs]
    assert outs == [chain.invoke(q) for q in qs]
    stats = handler.stats  # 5 answers while the gate holds all scoring: the chain did not wait for it
    assert (stats["captured"], stats["queued"], stats["dropped"], stats["pending"], stats["scored"]) == (5, 1, 4, 1, 0)
    assert any("backlog full" in r.getMessage() for r in caplog.records)
    assert handler.flush(timeout=0.05) is False
    gate.set()
    assert handler.flush(timeout=10) is True
    assert handler.stats["scored"] == 1 and len(handler.results) == 1


@pytest.mark.slow  # starts a subprocess
def test_interpreter_exit_waits_for_pending_scoring():
    script = textwrap.dedent("""
        import asyncio
        from langchain_core.documents import Document
        from langchain_core.retrievers import BaseRetriever
        from langchain_core.language_models import FakeListChatModel
        from langchain_core.runnables import RunnableLambda, RunnablePassthrough
        from ragmeter.data import Score
        from ragmeter.metrics.base import Metric
        from ragmeter.integrations.langchain import RagmeterCallbackHandler

        class Slow(Metric):
            name = "slow"
            uses_judge = False
            async def compute(self, sample, ctx):
                await asyncio.sleep(0.3)
                return Score(self.name, 1.0, explanation="done")

        class R(BaseRetriever):
            def _get_relevant_documents(self, query, *, run_manager):
                return [Document(id="d1", page_content="Some context.")]

        chain = {"context": R(), "question": RunnablePassthrough()} | RunnableLambda(lambda x: x["question"]) | FakeListChatModel(responses=["ok"])
        handler = RagmeterCallbackHandler(metrics=[Slow()], on_result=lambda r: print("scored", r.sample.question, flush=True))
        chain.invoke("Exit question?", config={"callbacks": [handler]})
        print("returned", handler.stats["pending"], flush=True)
    """)  # no flush(): the exit hook waits
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["returned 1", "scored Exit question?"]


def test_a_capture_failure_is_swallowed_logged_once_and_leaves_the_answer_unchanged(chain, caplog):
    from ragmeter.guard import failures
    from ragmeter.integrations.langchain.handler import RUN_CAPTURE

    handler = RagmeterCallbackHandler(metrics=RETRIEVAL)
    handler._sample_from_run = lambda run, target: {}["a bug in ragmeter's capture"]
    q = "Who wrote Dune?"
    before = failures().get(RUN_CAPTURE, 0)
    config = {"callbacks": [handler]}
    with caplog.at_level(logging.DEBUG, logger="ragmeter"):
        answers = [
            chain.invoke(q, config=config),
            asyncio.run(chain.ainvoke(q, config=config)),
            *chain.batch([q, q], config=config),
        ]  # batch: callbacks on LangChain's worker threads
        handler.flush(10)  # the run trees are read on the capture thread
    assert answers == [chain.invoke(q)] * 4
    assert failures()[RUN_CAPTURE] == before + 4
    assert (handler.stats["capture_errors"], handler.stats["captured"]) == (4, 0)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and RUN_CAPTURE in r.getMessage()]
    assert len(warnings) == (0 if before else 1)  # the first failure here in this process, with its traceback
    assert all(r.exc_info and r.exc_info[0] is KeyError for r in warnings)
    again = [r for r in caplog.records if r.levelno == logging.DEBUG and RUN_CAPTURE in r.getMessage()]
    assert len(again) == 4 - len(warnings)  # later ones: one debug line each


def test_handler_never_raises_into_the_chain(retriever, chain):
    def bad_callback(result):
        raise ValueError("on_result bug")

    def bad_predicate(sample):
        raise ValueError("predicate bug")

    handler = RagmeterCallbackHandler(
        metrics=[ExplodingMetric(), "faithfulness"],
        judge=ExplodingJudge(),
        on_result=bad_callback,
        should_score=bad_predicate,
    )
    q = "Who wrote Dune?"
    assert chain.invoke(q, config={"callbacks": [handler]}) == chain.invoke(q)
    assert asyncio.run(chain.ainvoke(q, config={"callbacks": [handler]})) == chain.invoke(q)
    handler.flush(10)
    stats = handler.stats
    assert stats["scored"] == 2 and stats["callback_errors"] == 2
    for r in handler.results:
        assert "metric bug" in r["exploding"].error and r["exploding"].value is None
        assert "judge backend down" in r["faithfulness"].error

    broken = RagmeterCallbackHandler(metrics=[BrokenMetric()])
    assert chain.invoke(q, config={"callbacks": [broken]}) == chain.invoke(q)
    broken.flush(10)
    assert broken.stats["failed"] == 1 and broken.stats["scored"] == 0

    capture_bug = RagmeterCallbackHandler(metrics=RETRIEVAL)
    capture_bug._sample_from_run = lambda run, target: 1 / 0
    assert chain.invoke(q, config={"callbacks": [capture_bug]}) == chain.invoke(q)
    assert capture_bug.stats["capture_errors"] == 1


def test_sample_rate_and_should_score(chain):
    urgent = lambda s: True if "medication" in s.question else None  # noqa: E731
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL, sample_rate=0.0, should_score=urgent)
    chain.batch(
        ["What medication dose is safe?", "What is the capital of France?", "Who wrote Dune?"],
        config={"callbacks": [handler]},
    )
    handler.flush(10)
    stats = handler.stats
    assert (stats["captured"], stats["scored"], stats["sampled_out"]) == (3, 1, 2)
    assert handler.results[0].sample.question == "What medication dose is safe?"

    never = RagmeterCallbackHandler(metrics=RETRIEVAL, sample_rate=0.0, should_score=lambda s: False)
    half = RagmeterCallbackHandler(metrics=RETRIEVAL, sample_rate=0.5)
    # a plain boolean predicate forces its picks and leaves the rest to the sample rate
    picked = RagmeterCallbackHandler(
        metrics=RETRIEVAL, sample_rate=0.5, should_score=lambda s: s.question.startswith("Question 1")
    )
    chain.batch([f"Question {i}?" for i in range(40)], config={"callbacks": [never, half, picked]})
    for h in (never, half, picked):
        h.flush(10)
    assert never.stats["sampled_out"] == 40 and never.stats["scored"] == 0
    assert 5 < half.stats["scored"] < 35 and half.stats["scored"] + half.stats["sampled_out"] == 40
    scored = {r.sample.question for r in picked.results}
    ones = {f"Question {i}?" for i in [1] + list(range(10, 20))}
    assert ones <= scored and picked.stats["forced"] == 11
    assert picked.stats["scored"] + picked.stats["sampled_out"] == 40


def test_on_result_and_judge_metrics(chain):
    from ragmeter.judges.offline import OfflineJudge

    seen = []
    handler = RagmeterCallbackHandler(
        metrics=["faithfulness", "context_relevance"], judge=OfflineJudge(embeddings=False), on_result=seen.append
    )
    chain.invoke("What is the capital of France?", config={"callbacks": [handler]})
    handler.flush(10)
    [r] = seen
    assert r is handler.results[0]
    assert r["faithfulness"].value is not None and r["faithfulness"].value > 0  # it quotes its context
    assert r["context_relevance"].value is not None
    assert r["faithfulness"].judge == "offline-lexical"  # the judge says it used no embeddings
    assert handler.results.summary()["faithfulness"]["count"] == 1


# ---------------------------------------------------------------------------- offline mode


def test_offline_mode_captures_exports_and_evaluates(tmp_path, retriever, chain):
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL, mode="offline")
    qs = ["What is the capital of France?", "Who wrote Dune?"]
    chain.batch(
        qs,
        config=[
            {"callbacks": [handler], "metadata": {"relevant_ids": [d], "reference": r}}
            for d, r in [("doc-paris", "Paris"), ("doc-dune", "Frank Herbert")]
        ],
    )
    with pytest.raises(ConnectionError):
        rag_chain(KeyedRetriever(docs={}, fail=True)).invoke("Broken?", config={"callbacks": [handler]})
    assert handler.flush() is True and handler.stats["scored"] == 0 and len(handler.results) == 0
    path = tmp_path / "captured.jsonl"
    assert handler.export_jsonl(path) == 2  # errored run left out
    assert handler.export_jsonl(tmp_path / "all.jsonl", statuses=("ok", "error", "partial")) == 3
    loaded = rm.load_samples(path)
    assert not loaded.errors and len(loaded) == 2
    for got, want in zip(
        sorted(loaded, key=lambda s: s.question), sorted(handler.samples[:2], key=lambda s: s.question)
    ):
        assert got.to_dict() == want.to_dict()
        assert got.metadata["latency"]["total_s"] > 0
    direct = rm.evaluate(path, metrics=RETRIEVAL, progress=False)
    result = handler.evaluate()
    assert result.summary() == direct.summary()
    assert len(handler.results) == 2 and handler.stats["scored"] == 2
    assert len(handler.evaluate()) == 0  # nothing new since the last call
    chain.invoke("Who wrote Dune?", config={"callbacks": [handler]})
    assert len(handler.evaluate()) == 1 and len(handler.results) == 3
    with pytest.raises(RuntimeError):
        RagmeterCallbackHandler(metrics=RETRIEVAL).evaluate()


def test_chat_model_as_judge():
    from ragmeter.judges import LangChainJudge as Core

    handler = RagmeterCallbackHandler(
        metrics=["faithfulness"], judge=FakeListChatModel(responses=["{}"]), mode="offline"
    )
    assert isinstance(handler._judge_spec, Core)
    with pytest.raises(ValueError):
        RagmeterCallbackHandler(mode="sometimes")


# ---------------------------------------------------------------------------- OpenTelemetry


def test_results_attach_to_the_active_trace(chain):
    pytest.importorskip("opentelemetry.sdk")
    writer = pytest.importorskip("ragmeter.tracing.writer")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    handler = RagmeterCallbackHandler(metrics=RETRIEVAL, tracer_provider=provider)
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask") as span:
        chain.invoke("Who wrote Dune?", config={"callbacks": [handler], "metadata": {"relevant_ids": ["doc-dune"]}})
        ctx = span.get_span_context()

    async def in_async():
        with tracer.start_as_current_span("POST /ask-async") as aspan:
            await chain.ainvoke(
                "Who wrote Dune?", config={"callbacks": [handler], "metadata": {"relevant_ids": ["doc-dune"]}}
            )
            return aspan.get_span_context()

    actx = asyncio.run(in_async())
    chain.invoke("No trace here?", config={"callbacks": [handler]})
    handler.flush(10)
    samples = handler.samples
    assert samples[0].metadata["trace"] == {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
    }
    assert samples[1].metadata["trace"]["trace_id"] == format(actx.trace_id, "032x")
    assert "trace" not in samples[2].metadata
    assert handler.stats["trace_writes"] == 2 and handler.stats["trace_errors"] == 0
    carriers = [s for s in exporter.get_finished_spans() if s.name == writer.CARRIER_NAME]
    assert len(carriers) == 2
    for carrier, want in zip(sorted(carriers, key=lambda c: c.context.trace_id != ctx.trace_id), (ctx, actx)):
        assert carrier.context.trace_id == want.trace_id
        assert carrier.parent.span_id == want.span_id  # a child of the span active when the chain started
        assert [link.context.span_id for link in carrier.links] == [want.span_id]
        assert carrier.attributes[writer.CARRIER_MARKER] is True
        assert "ragmeter.mrr.score" in carrier.attributes
