"""Parameter sweeps: a plain function, a real LangChain runnable and a LlamaIndex query engine as
pipelines; means worked out by hand; judge cost per setting from the real OpenAI SDK against
the fake server; one stand-alone SVG chart per metric and parameter."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from helpers.servers import FakeLLMServer

import ragmeter as rm
from ragmeter.sweep import run_pipeline

CHUNKS = {"a": "Paris is the capital of France.", "b": "France is in Europe.", "c": "Dune is a novel."}
ORDER = ["a", "c", "b"]
QUESTION = rm.Sample("Where is Paris?", relevant_ids=["a", "b"], reference="Paris is in France, in Europe.")


def build(top_k: int, chunk_size: int):
    """A function pipeline: the first ``top_k`` chunks of ORDER (chunk_size only changes the name)."""
    return lambda q: (f"Paris ({chunk_size}).", [{"id": i, "text": CHUNKS[i]} for i in ORDER[:top_k]])


def test_function_pipeline_table_and_charts(tmp_path):
    table = rm.sweep(build, {"top_k": [1, 2, 3], "chunk_size": [256, 512]}, [QUESTION],
                     metrics=["recall@3", "precision@3"], charts=tmp_path, progress=False)
    # retrieved a | a c | a c b; relevant a, b: recall 1/2, 1/2, 2/2; precision@3 1/3, 1/3, 2/3
    got = [(r["top_k"], r["chunk_size"], r["recall@3"], round(r["precision@3"], 4)) for r in table.rows]
    assert got == [(1, 256, 0.5, 0.3333), (1, 512, 0.5, 0.3333), (2, 256, 0.5, 0.3333),
                   (2, 512, 0.5, 0.3333), (3, 256, 1.0, 0.6667), (3, 512, 1.0, 0.6667)]
    assert all(r["samples"] == 1 and r["pipeline_errors"] == 0 and r["judge_calls"] == 0 for r in table.rows)
    assert table.metrics == ["recall@3", "precision@3", "response_time"]  # the pipeline's latency is scored too
    assert table.best("recall@3")["top_k"] == 3
    assert table.results[1].results[0].sample.answer == "Paris (512)."
    assert table.to_markdown().splitlines()[2].startswith("| 1 | 256 | 0.5000 | 0.3333 |")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted(f"{m}_vs_{p}.svg" for m in ("recall_3", "precision_3", "response_time")
                           for p in ("top_k", "chunk_size"))
    svg = ET.fromstring((tmp_path / "recall_3_vs_top_k.svg").read_text())  # well-formed, stand-alone
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    titles = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert "top_k=1: mean 0.5000 (2 values)" in titles and "top_k=3: mean 1.0000 (2 values)" in titles
    # against chunk_size, top_k is averaged over: (1/2 + 1/2 + 1) / 3 at each size
    titles = [t.text for t in ET.fromstring(table.chart("recall@3", "chunk_size")).iter("{http://www.w3.org/2000/svg}title")]
    assert "chunk_size=256: mean 0.6667 (3 values)" in titles


def test_pipeline_failures_are_counted_not_scored():
    def build_failing(top_k):
        def pipeline(q):
            if "boom" in q:
                raise RuntimeError("index offline")
            return "Paris.", [{"id": "a", "text": CHUNKS["a"]}]
        return pipeline

    table = rm.sweep(build_failing, {"top_k": [1]}, ["Where is Paris?", "boom?"], metrics=["mrr"], progress=False)
    assert table.rows[0]["samples"] == 1 and table.rows[0]["pipeline_errors"] == 1
    assert table.errors == [(0, "boom?", "RuntimeError: index offline")]
    with pytest.raises(ValueError, match="at least one value"):
        rm.sweep(build_failing, {"top_k": []}, ["q"], metrics=["mrr"])


def test_judge_cost_is_reported_per_setting():
    pytest.importorskip("openai")
    from ragmeter.judges.openai import OpenAIJudge
    from ragmeter.judges.pricing import cost_of, price_for
    from ragmeter.metrics.answer import AnswerRelevancy

    questions = [rm.Sample("Where is Paris?"), rm.Sample("What is Dune?")]
    with FakeLLMServer() as server:
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False)
        table = rm.sweep(build, {"top_k": [1, 2], "chunk_size": [256]}, questions,
                         metrics=[AnswerRelevancy(method="rating")], judge=judge, progress=False)
        assert len(server.chat_requests) == 4  # one rate_answer per question and setting
    for row in table.rows:  # the fake server bills 100 prompt + 20 completion tokens per request
        assert row["judge_calls"] == 2 and row["tokens"] == 240
        assert row["cost_usd"] == pytest.approx(cost_of(price_for("gpt-4o-mini"), 200, 40))
        assert row["answer_relevancy"] is not None


def test_langchain_runnable_pipeline():
    pytest.importorskip("langchain_core")
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableParallel, RunnablePassthrough

    docs = [Document(id="doc-paris", page_content="Paris is the capital of France."),
            Document(id="doc-berlin", page_content="Berlin is the capital of Germany."),
            Document(id="doc-dune", page_content="Dune was written by Frank Herbert.")]

    class OverlapRetriever(BaseRetriever):
        """The ``k`` documents sharing the most words with the query (ties: listed order)."""

        k: int

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            q = set(query.lower().strip("?").split())
            ranked = sorted(docs, key=lambda d: -len(q & set(d.page_content.lower().strip(".").split())))
            return ranked[: self.k]

    prompt = ChatPromptTemplate.from_messages([("system", "Context: {context}"), ("human", "{question}")])

    def build_chain(top_k):
        model = FakeListChatModel(responses=[f"answer with {top_k}"])
        return RunnableParallel(context=OverlapRetriever(k=top_k), question=RunnablePassthrough()).assign(
            answer=prompt | model | StrOutputParser())

    questions = [rm.Sample("What is the capital of France?", relevant_ids=["doc-paris", "doc-berlin"]),
                 rm.Sample("Who wrote Dune?", relevant_ids=["doc-dune"])]
    answer, contexts = run_pipeline(build_chain(2), "Who wrote Dune?")
    assert answer == "answer with 2" and [c.id for c in contexts] == ["doc-dune", "doc-paris"]
    table = rm.sweep(build_chain, {"top_k": [1, 2]}, questions, metrics=["recall@2", "mrr"], progress=False)
    # France: paris | paris berlin -> recall 1/2, 1; Dune: dune -> 1, 1
    assert [(r["top_k"], r["recall@2"], r["mrr"]) for r in table.rows] == [(1, 0.75, 1.0), (2, 1.0, 1.0)]
    assert [s.sample.answer for s in table.results[0]] == ["answer with 1"] * 2


@pytest.mark.slow  # imports LlamaIndex
def test_llamaindex_query_engine_pipeline():
    pytest.importorskip("llama_index.core")
    from helpers.llamaindex_app import build_index, code_of, engine, question

    index = build_index()
    animals = ["otter", "heron"]
    qs = [rm.Sample(question(a), relevant_ids=[f"doc-{a}"], reference=f"{code_of(a)}") for a in animals]
    table = rm.sweep(lambda top_k: engine(index, top_k=top_k), {"top_k": [1, 3]}, qs, metrics=["hit_rate@3"],
                     progress=False)
    for row, res in zip(table.rows, table.results):
        for r in res:
            assert len(r.sample.contexts) == row["top_k"]
            assert all(c.id.startswith("doc-") and c.score is not None for c in r.sample.contexts)
            assert r.sample.answer
    assert table.rows[1]["hit_rate@3"] >= table.rows[0]["hit_rate@3"]
