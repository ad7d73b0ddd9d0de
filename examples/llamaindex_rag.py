"""A LlamaIndex query engine scored by ragmeter: no API key, no network.

    python examples/llamaindex_rag.py

Part 1 captures every query of an ordinary ``VectorStoreIndex`` query engine with
``RagmeterInstrumentation`` and scores it inline, in the background (sync, async, streaming).
Part 2 runs ragmeter metrics as LlamaIndex evaluators in a ``BatchEvalRunner``.

The embedding model is a tiny bag-of-words hash, so retrieval finds the right chunks without a
model; the LLM is a stand-in that answers with the best-matching retrieved sentence (and, for one
question, "misremembers" a year, so you can see faithfulness catch it). The judge is ragmeter's
offline judge; swap in ``judge="openai:gpt-4o-mini"`` or ``judge=OpenAI(model=...)`` (any
LlamaIndex LLM) for an LLM judge.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import numpy as np
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.evaluation import BatchEvalRunner
from llama_index.core.instrumentation.dispatcher import instrument_tags
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import TextNode

from ragmeter.integrations.llamaindex import RagmeterInstrumentation, make_evaluators

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


class KeywordEmbedding(BaseEmbedding):
    """Bag of words, one fixed pseudo-random direction per word stem: crude, deterministic, offline."""

    def _vec(self, text: str) -> list[float]:
        v = np.zeros(256)
        for w in _words(text):
            seed = int(hashlib.md5(w[:6].encode()).hexdigest()[:8], 16)
            v += np.random.default_rng(seed).standard_normal(256)
        n = np.linalg.norm(v)
        return list(v / n if n else v)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vec(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vec(query)


class ExtractiveLLM(CustomLLM):
    """Stand-in for an LLM: answers with the context sentence sharing most words with the query.
    ``misremember`` rewrites some facts, the way a real model sometimes does."""

    misremember: dict = {}

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="extractive-demo")

    def _answer(self, prompt: str) -> str:
        m = re.search(r"-{5,}\n(.*?)\n-{5,}.*Query: (.*?)\n", prompt, re.S)
        context, query = (m.group(1), m.group(2)) if m else (prompt, prompt)
        sentences = [s for line in context.splitlines() for s in re.split(r"(?<=[.;])\s+", line) if s.strip()]
        q = set(_words(query))
        answer = max(sentences, key=lambda s: len(q & set(_words(s))), default="I do not know.")
        for wrong, right in self.misremember.items():
            answer = answer.replace(wrong, right)
        return answer

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = self._answer(prompt)
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        return CompletionResponse(text=text, additional_kwargs=usage)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        text = self._answer(prompt)

        def gen():
            sofar = ""
            for word in text.split(" "):
                delta = (" " if sofar else "") + word
                sofar += delta
                yield CompletionResponse(text=sofar, delta=delta)

        return gen()


def build_index() -> VectorStoreIndex:
    # One node per entry, with our own ids: ragmeter reports each context under its node id, so
    # relevant_ids below can name them. (Documents split by LlamaIndex get random node ids; the
    # document id is kept in each context's metadata["ref_doc_id"].)
    nodes = [
        TextNode(id_=key, text=text, metadata={"source": key.split("-")[0] + ".md"}) for key, text in KNOWLEDGE.items()
    ]
    return VectorStoreIndex(nodes, embed_model=KeywordEmbedding())


def part1_inline_capture(index: VectorStoreIndex) -> None:
    llm = ExtractiveLLM(misremember={"1965": "1956"})  # one wrong year, on purpose
    query_engine = index.as_query_engine(llm=llm, similarity_top_k=2)
    streaming_engine = index.as_query_engine(llm=llm, similarity_top_k=2, streaming=True)

    meter = RagmeterInstrumentation(
        metrics=["faithfulness", "answer_relevancy", "context_relevance", "hallucinated_specifics", "mrr"],
        judge="offline",  # no key, no network; e.g. "openai:gpt-4o-mini" for an LLM judge
    )
    with meter:  # attach to LlamaIndex's instrumentation; on exit: detach and wait for scoring
        # Ground truth, when you have it, rides along in LlamaIndex's instrument_tags.
        with instrument_tags({"reference": "In 1889.", "relevant_ids": ["eiffel-1"]}):
            query_engine.query("When was the Eiffel Tower completed?")
        query_engine.query("Who wrote the novel Dune and when was it first published?")

        async def concurrent():
            return await asyncio.gather(
                query_engine.aquery("Does Rust have a garbage collector?"),
                query_engine.aquery("Which award did Dune win?"),
            )

        asyncio.run(concurrent())
        streamed = streaming_engine.query("How is green tea made?")
        for _token in streamed.response_gen:  # scored once the stream has been read
            pass

    result = meter.results
    names = result.metrics
    print(f"{'question':58} " + " ".join(f"{n[:12]:>12}" for n in names) + f" {'total_s':>8} {'tokens':>6}")
    for r in result:
        s = r.sample
        cells = " ".join(f"{'-' if r[n].value is None else f'{r[n].value:.2f}':>12}" for n in names)
        tokens = s.metadata.get("token_usage", {}).get("total", "-")
        print(f"{s.question[:58]:58} {cells} {s.metadata['latency']['total_s']:8.3f} {tokens:>6}")
        print(f"    answer: {s.answer}")
    print()
    for name, row in result.summary().items():
        if row["count"]:
            print(f"{name:24} mean {row['mean']:.2f}  pass {row['pass']}  warn {row['warn']}  fail {row['fail']}")
    print()
    for p in result.problems():
        print(f"problem: {p['metric']} = {p['value']:.2f} on {p['question']!r}: {p['explanation']}")
    stats = meter.stats
    print(
        f"\ncaptured {stats['captured']} queries, scored {stats['scored']}, dropped {stats['dropped']}, "
        f"errored {stats['errored']}, partial {stats['partial']}"
    )


def part2_batch_eval_runner(index: VectorStoreIndex) -> None:
    query_engine = index.as_query_engine(llm=ExtractiveLLM(misremember={"1965": "1956"}), similarity_top_k=2)
    # One evaluator per metric; evaluators built together share judge work (claims extracted once).
    evaluators = make_evaluators(["faithfulness", "answer_relevancy", "context_relevance"], judge="offline")
    runner = BatchEvalRunner(evaluators, workers=4)
    questions = [
        "When was the Eiffel Tower completed?",
        "Who wrote the novel Dune and when was it first published?",
        "How is black tea different from green tea?",
    ]
    results = runner.evaluate_queries(query_engine, queries=questions)
    print("\nBatchEvalRunner")
    for name, rows in results.items():
        for row in rows:
            verdict = (
                "invalid: " + str(row.invalid_reason)
                if row.invalid_result
                else (f"{row.score:.2f} {'pass' if row.passing else row.label}")
            )
            print(f"  {name:18} {row.query[:50]:50} {verdict}")
    worst = min(results["faithfulness"], key=lambda r: r.score if r.score is not None else 2.0)
    print(f"\nworst faithfulness: {worst.query!r}: {worst.feedback}")
    for claim in worst.details.get("claims", []):
        print(f"  - {claim['verdict']:10} {claim['claim']}")


def main() -> None:
    index = build_index()
    part1_inline_capture(index)
    part2_batch_eval_runner(index)


if __name__ == "__main__":
    main()
