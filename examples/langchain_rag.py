"""A LangChain RAG chain scored inline by ragmeter: no API key, no network.

    python examples/langchain_rag.py

The chain is ordinary LCEL: an ``InMemoryVectorStore`` retriever, a ``ChatPromptTemplate``, a
chat model and a ``StrOutputParser``. The only ragmeter line is the callback handler passed in
``config``. The chat model is a stand-in that answers from the best-matching retrieved sentence
(and, for one question, "misremembers" a year, so you can see faithfulness catch it); the
embeddings are a tiny bag-of-words hash, so retrieval finds the right chunks without a model.
The judge is ragmeter's offline judge; swap in ``judge="openai:gpt-4o-mini"`` or
``judge=ChatOpenAI(...)`` (any LangChain chat model) for an LLM judge.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from ragmeter.integrations.langchain import RagmeterCallbackHandler

KNOWLEDGE = {
    "eiffel-1": "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall.",
    "eiffel-2": "Gustave Eiffel's company designed and built the tower; it was the tallest structure in the world until 1930.",
    "dune-1": "Dune is a science fiction novel by Frank Herbert, first published in 1965.",
    "dune-2": "Dune won the first Nebula Award for Best Novel and shared the 1966 Hugo Award.",
    "tea-1": "Green tea is made from Camellia sinensis leaves that are not withered or oxidised.",
    "tea-2": "Black tea is fully oxidised, which gives it a darker colour and a stronger flavour.",
    "rust-1": "Rust guarantees memory safety through ownership and borrowing, without a garbage collector.",
    "rust-2": "The Rust compiler's borrow checker rejects programs with data races at compile time.",
}

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the is was are of in for by to and or what who which how when it its that does do with from".split()
)


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class KeywordEmbeddings(Embeddings):
    """Bag-of-words hashed into 256 dimensions: crude, deterministic, offline."""

    def _embed(self, text: str) -> list[float]:
        vec = [0.0] * 256
        for w in _words(text):
            vec[int(hashlib.md5(w[:6].encode()).hexdigest(), 16) % 256] += 1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


class ExtractiveChatModel(GenericFakeChatModel):
    """Stand-in for an LLM: answers with the context sentence sharing most words with the question.
    ``misremember`` rewrites some facts, the way a real model sometimes does."""

    messages: object = iter(())
    misremember: dict = {}

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        system, question = str(messages[0].content), str(messages[-1].content)
        sentences = [s for line in system.splitlines()[1:] for s in re.split(r"(?<=[.;])\s+", line) if s]
        q = set(_words(question))
        best = max(sentences, key=lambda s: len(q & set(_words(s))), default="I do not know.")
        answer = best
        for wrong, right in self.misremember.items():
            answer = answer.replace(wrong, right)
        prompt_tokens, completion_tokens = len((system + question).split()), len(answer.split())
        message = AIMessage(
            content=answer,
            usage_metadata={
                "input_tokens": prompt_tokens,
                "output_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def build_chain():
    store = InMemoryVectorStore(KeywordEmbeddings())
    store.add_documents(
        [Document(id=k, page_content=v, metadata={"source": k.split("-")[0] + ".md"}) for k, v in KNOWLEDGE.items()]
    )
    retriever = store.as_retriever(search_kwargs={"k": 2})
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer the question using only this context:\n{context}"),
            ("human", "{question}"),
        ]
    )
    model = ExtractiveChatModel(misremember={"1965": "1956"})  # one wrong year, on purpose
    format_docs = RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs))
    return {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | model | StrOutputParser()


def main() -> None:
    chain = build_chain()
    handler = RagmeterCallbackHandler(
        metrics=["faithfulness", "answer_relevancy", "context_relevance", "hallucinated_specifics", "recall@2"],
        judge="offline",  # no key, no network; e.g. "openai:gpt-4o-mini" for an LLM judge
        mode="inline",
    )
    callbacks = {"callbacks": [handler]}

    # Ground truth, when you have it, rides along in config["metadata"].
    chain.invoke(
        "When was the Eiffel Tower completed?",
        config={**callbacks, "metadata": {"reference": "In 1889.", "relevant_ids": ["eiffel-1"]}},
    )
    chain.invoke(
        "Who wrote the novel Dune and when was it first published?",
        config={**callbacks, "metadata": {"relevant_ids": ["dune-1"]}},
    )
    for _ in chain.stream("How is green tea made?", config=callbacks):  # streaming works the same
        pass
    asyncio.run(chain.abatch(["Does Rust have a garbage collector?", "Which award did Dune win?"], config=callbacks))

    handler.flush(timeout=120)  # scoring ran in the background; wait for it before reading results
    result = handler.results

    names = result.metrics
    print(f"{'question':58} " + " ".join(f"{n[:12]:>12}" for n in names) + f" {'total_s':>8} {'tokens':>6}")
    for r in result:
        s = r.sample
        cells = " ".join(f"{'-' if r[n].value is None else f'{r[n].value:.2f}':>12}" for n in names)
        meta = s.metadata
        tokens = meta.get("token_usage", {}).get("total", "-")
        print(f"{s.question[:58]:58} {cells} {meta['latency']['total_s']:8.3f} {tokens:>6}")
        print(f"    answer: {s.answer}")
    print()
    for name, row in result.summary().items():
        if row["count"]:
            print(f"{name:24} mean {row['mean']:.2f}  pass {row['pass']}  warn {row['warn']}  fail {row['fail']}")
    print()
    for p in result.problems(threshold=0.6):  # scores below 0.6, worst first
        print(f"problem: {p['metric']} = {p['value']:.2f} on {p['question']!r}: {p['explanation']}")
    stats = handler.stats
    print(
        f"\ncaptured {stats['captured']} runs, scored {stats['scored']}, dropped {stats['dropped']}, "
        f"errored {stats['errored']}, partial {stats['partial']}"
    )


if __name__ == "__main__":
    main()
