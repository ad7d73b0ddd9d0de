"""Chunk ids from traces: OpenInference's LangChain instrumentation records a document's text and
metadata but not ``Document.id``. Ids come from the metadata keys the user names (``id_keys``),
else from the text (a content hash, marked as such), so retrieval metrics run on those traces and
say when they compare content hashes. Real LangChain retriever, real OpenInference instrumentor."""

from __future__ import annotations

import json

import pytest
from openinference.instrumentation.langchain import LangChainInstrumentor

from helpers.tracing import KB, instrumented, memory_provider, rag_provider
from ragmeter.cli import main
from ragmeter.ids import content_id, is_content_id
from ragmeter.tracing import evaluate_traces
from ragmeter.tracing.offline import encode_otlp_json

PARIS, BORDERS = KB["d1"], KB["d3"]


def test_content_id_is_the_sha256_of_the_text():
    # FIPS 180-2's test vector: SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...
    assert content_id("abc") == "sha256:ba7816bf8f01cfea"
    assert content_id(PARIS) == content_id(str(PARIS)) and content_id(PARIS) != content_id(PARIS + " ")
    assert is_content_id(content_id(PARIS)) and not is_content_id("d1") and not is_content_id("sha256:xyz")
    with pytest.raises(TypeError):
        content_id(None)


def chain():
    """A real LCEL RAG chain whose retriever returns LangChain Documents with ids and a source."""
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    class Retriever(BaseRetriever):
        def _get_relevant_documents(self, query, *, run_manager=None):
            return [
                Document(id="kb-3", page_content=BORDERS, metadata={"source": "kb/borders.md"}),
                Document(id="kb-1", page_content=PARIS, metadata={"source": "kb/paris.md"}),
            ]

    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    fmt = lambda docs: "\n".join(d.page_content for d in docs)  # noqa: E731
    return (
        {"context": Retriever() | fmt, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=["Paris is the capital of France."])
        | StrOutputParser()
    )


def run(relevant_ids, **kwargs):
    """Invoke the chain once under OpenInference with the processor; its one result."""
    proc, provider, exporter = rag_provider(["mrr", "hit_rate@1"], **kwargs)
    with instrumented(LangChainInstrumentor, provider):
        chain().invoke("What is the capital of France?", config={"metadata": {"relevant_ids": relevant_ids}})
    assert provider.force_flush(30_000)
    proc.shutdown()
    (result,) = proc.results
    return result, exporter


def test_without_document_ids_chunks_get_marked_content_hash_ids():
    result, _ = run([content_id(PARIS)])
    contexts = result.sample.contexts
    assert [c.id for c in contexts] == [content_id(BORDERS), content_id(PARIS)]  # not kb-3, kb-1: not recorded
    assert [c.metadata for c in contexts] == [
        {"source": "kb/borders.md", "id_source": "content_hash"},
        {"source": "kb/paris.md", "id_source": "content_hash"},
    ]
    # relevant_ids came from the chain's config metadata, recorded on the entry span
    assert result.sample.relevant_ids == [content_id(PARIS)]
    mrr = result["mrr"]
    assert mrr.value == 0.5 and result["hit_rate@1"].value == 0.0  # the relevant chunk is at rank 2
    assert mrr.details["content_hash_ids"] == 2
    assert mrr.explanation == (
        "1 of 1 relevant ids in the top 2 retrieved; 2 of 2 chunk ids are content hashes "
        "(no chunk id was recorded): they match only relevant_ids made with "
        "ragmeter.ids.content_id(text)"
    )


def test_retrieval_metrics_say_when_relevant_ids_cannot_match_content_hashes():
    result, _ = run(["kb-1"])  # the Document ids, which the trace does not hold
    assert result["mrr"].value == 0.0
    assert result["mrr"].explanation.endswith(
        "made with ragmeter.ids.content_id(text), and none of the relevant_ids is one"
    )


def test_ids_from_the_metadata_keys_the_user_names():
    result, _ = run(["kb/paris.md"], id_keys=("id", "source"))
    contexts = result.sample.contexts
    assert [c.id for c in contexts] == ["kb/borders.md", "kb/paris.md"]
    assert [c.metadata["id_source"] for c in contexts] == ["metadata.source"] * 2
    assert result["mrr"].value == 0.5 and "content hash" not in result["mrr"].explanation
    assert "content_hash_ids" not in result["mrr"].details
    with pytest.raises(ValueError, match="id_keys must be a non-empty list"):
        rag_provider(["mrr"], id_keys="source")  # one string is refused, not split into letters


def test_evaluate_traces_and_the_cli_take_id_keys(tmp_path, capsys):
    provider, exporter = memory_provider()
    with instrumented(LangChainInstrumentor, provider):
        chain().invoke("What is the capital of France?", config={"metadata": {"relevant_ids": ["kb/paris.md"]}})
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(encode_otlp_json(exporter.get_finished_spans())) + "\n")
    hashed = evaluate_traces(path, metrics=["mrr"], progress=False)
    assert all(is_content_id(c.id) for c in hashed.results[0].sample.contexts) and hashed.results[0]["mrr"].value == 0.0
    named = evaluate_traces(path, metrics=["mrr"], progress=False, id_keys=["source"])
    assert [c.id for c in named.results[0].sample.contexts] == ["kb/borders.md", "kb/paris.md"]
    assert named.results[0]["mrr"].value == 0.5
    code = main(["evaluate-traces", str(path), "-m", "mrr", "--no-progress", "--id-keys", "source"])
    out = capsys.readouterr().out
    assert code == 0 and "\nmrr     0.5000  0.5000" in out
