"""instrument() / uninstrument(): every LangChain run captured through LangChain's configure hook,
without ``callbacks=[...]``, on real langchain-core runnables, a real vector-store retriever and
LangChain's fake chat models."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.tracers.context import _configure_hooks
from langchain_core.vectorstores import InMemoryVectorStore

from ragmeter.integrations import langchain as rml
from ragmeter.integrations.langchain import RagmeterCallbackHandler, instrument, uninstrument
from ragmeter.integrations.langchain.handler import INSTALLED

RETRIEVAL = ["precision@2", "recall@2", "mrr"]
DOCS = [
    Document(id="doc-paris", page_content="Paris is the capital of France."),
    Document(id="doc-dune", page_content="Dune was written by Frank Herbert in 1965."),
    Document(id="doc-tea", page_content="Green tea is made from unoxidised leaves."),
]
PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the context only.\nContext:\n{context}"), ("human", "{question}")]
)
QS = ["Who wrote Dune?", "What is the capital of France?", "How is green tea made?"]


class EchoChatModel(GenericFakeChatModel):
    """Answers with the first line of its context, so every answer belongs to its own run."""

    messages: object = iter(())

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        from langchain_core.outputs import ChatGeneration, ChatResult

        context = str(messages[0].content).split("Context:\n", 1)[1]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=context.splitlines()[0]))])


@pytest.fixture(scope="module")
def retriever():
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    store.add_documents(DOCS)
    return store.as_retriever(search_kwargs={"k": 2})


@pytest.fixture(scope="module")
def chain(retriever):
    docs = RunnableLambda(lambda ds: "\n".join(f"[{d.id}] {d.page_content}" for d in ds))
    return (
        {"context": retriever | docs, "question": RunnablePassthrough()} | PROMPT | EchoChatModel() | StrOutputParser()
    )


@pytest.fixture(scope="module")
def plain(chain):
    """The chain's answers with nothing attached."""
    assert INSTALLED.get() is None
    return {q: chain.invoke(q) for q in QS}


@pytest.fixture(autouse=True)
def _uninstrumented():
    yield
    uninstrument()


def test_a_chain_called_without_callbacks_is_captured_and_scored(retriever, chain, plain):
    retrieved = [d.id for d in retriever.invoke(QS[0])]
    handler = instrument(metrics=RETRIEVAL)
    assert isinstance(handler, RagmeterCallbackHandler) and INSTALLED.get() is handler
    answers = [
        chain.invoke(QS[0], config={"metadata": {"relevant_ids": ["doc-dune"], "sample_id": "dune"}}),
        asyncio.run(chain.ainvoke(QS[1])),
        *chain.batch(QS),
        "".join(chain.stream(QS[2])),
    ]
    assert answers == [plain[QS[0]], plain[QS[1]], *plain.values(), plain[QS[2]]]  # answers unchanged
    assert handler.flush(10)
    assert (handler.stats["captured"], handler.stats["scored"]) == (6, 6)
    first = handler.samples[0]
    assert (first.id, first.question, first.answer) == ("dune", QS[0], plain[QS[0]])
    assert first.retrieved_ids == retrieved
    assert first.relevant_ids == ["doc-dune"]
    assert sorted(s.question for s in handler.samples) == sorted([QS[0], QS[1], *QS, QS[2]])
    assert handler.stats["skipped_no_retriever"] == 0  # one sample per root run, nothing else seen


def test_instrument_twice_captures_once_by_the_newest_handler(chain):
    first = instrument(metrics=RETRIEVAL)
    second = instrument(metrics=RETRIEVAL)
    assert second is not first
    chain.invoke(QS[0])
    asyncio.run(chain.ainvoke(QS[1]))
    assert second.flush(10)
    assert (first.stats["captured"], second.stats["captured"], second.stats["scored"]) == (0, 2, 2)
    assert len(second.results) == 2
    assert sum(var is INSTALLED for var, *_ in _configure_hooks) == 1  # the hook is registered once


def test_uninstrument_stops_capture(chain, plain):
    handler = instrument(metrics=RETRIEVAL)
    chain.invoke(QS[0])
    assert uninstrument() is handler
    assert uninstrument() is None  # nothing installed any more
    assert chain.invoke(QS[1]) == plain[QS[1]]
    asyncio.run(chain.ainvoke(QS[2]))
    assert handler.flush(10)
    assert [s.question for s in handler.samples] == [QS[0]]
    assert handler.stats["scored"] == 1  # what it captured before stays available


def test_explicit_callbacks_and_instrument_capture_and_score_once(chain, plain):
    handler = instrument(metrics=RETRIEVAL)
    own = RagmeterCallbackHandler(metrics=RETRIEVAL)  # another handler passed by hand still sees its runs
    config = {"callbacks": [handler]}
    answers = [
        chain.invoke(QS[0], config=config),
        chain.with_config(callbacks=[handler]).invoke(QS[1]),
        asyncio.run(chain.ainvoke(QS[2], config=config)),
        *chain.batch(QS, config=config),
        "".join(chain.stream(QS[0], config=config)),
        chain.invoke(QS[1], config={"callbacks": [handler, own]}),
    ]
    assert answers == [plain[q] for q in QS] + list(plain.values()) + [plain[QS[0]], plain[QS[1]]]
    assert handler.flush(10) and own.flush(10)
    assert (handler.stats["captured"], handler.stats["scored"], len(handler.results)) == (8, 8, 8)
    assert len({s.metadata["run_id"] for s in handler.samples}) == 8
    assert (own.stats["captured"], own.stats["scored"]) == (1, 1)


def test_capture_covers_every_thread_and_task(chain):
    """Instrumenting once at start-up covers runs in threads the application starts (a web
    server's request threads begin with an empty context), pools and asyncio tasks."""
    handler = instrument(mode="offline")
    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(chain.invoke, q) for q in QS[:2]]:
            future.result()

    async def in_tasks():
        await asyncio.gather(chain.ainvoke(QS[0]), asyncio.to_thread(chain.invoke, QS[2]))

    asyncio.run(in_tasks())
    thread = threading.Thread(target=chain.invoke, args=(QS[1],))
    thread.start()
    thread.join()
    assert sorted(s.question for s in handler.samples) == sorted([QS[0], QS[1], QS[0], QS[2], QS[1]])
    assert handler.stats["captured"] == 5


def test_a_langchain_judge_is_never_captured_as_an_application_run(chain):
    judge = FakeListChatModel(responses=['{"claims": []}'] * 100)
    inline = instrument(metrics=["faithfulness"], judge=judge)
    chain.invoke(QS[0])
    assert inline.flush(10)
    assert (inline.stats["captured"], inline.stats["scored"], inline.stats["skipped_no_retriever"]) == (1, 1, 0)
    assert inline.results[0]["faithfulness"].judge == "langchain:FakeListChatModel"

    offline = instrument(metrics=["faithfulness"], judge=judge, mode="offline")
    chain.invoke(QS[1])
    assert len(offline.evaluate()) == 1
    assert (offline.stats["captured"], offline.stats["skipped_no_retriever"]) == (1, 0)


def test_the_package_exports_what_it_names():
    assert all(hasattr(rml, name) for name in rml.__all__)
    assert (rml.instrument, rml.uninstrument) == (instrument, uninstrument)
