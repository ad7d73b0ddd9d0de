"""A small LlamaIndex RAG application for the LlamaIndex integration tests, on real
llama-index-core pieces and without network: a deterministic hashing embedding, an LLM that
answers from its context, an index of thirty "secret codes", and a ScriptedJudge that extracts
one claim per answer unit and verifies it by word overlap."""

from __future__ import annotations

import asyncio
import hashlib
import random
import re
from typing import Any

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import TextNode

from helpers.scripted import ScriptedJudge

ANIMALS = [
    "falcon",
    "otter",
    "badger",
    "heron",
    "lynx",
    "walrus",
    "gecko",
    "bison",
    "marten",
    "ibis",
    "jackal",
    "koala",
    "lemur",
    "manatee",
    "narwhal",
    "ocelot",
    "puffin",
    "quokka",
    "raven",
    "salmon",
    "tapir",
    "urchin",
    "vole",
    "wombat",
    "yak",
    "zebra",
    "alpaca",
    "beaver",
    "cougar",
    "dingo",
]


def code_of(animal: str) -> str:
    """The secret code of ``animal`` in the index."""
    return f"K{ANIMALS.index(animal) * 37 + 1000}"


def words(text: str) -> list[str]:
    """Lower-case words and numbers of ``text``."""
    return re.findall(r"[a-z0-9]+", text.lower())


def question(animal: str) -> str:
    """The question whose answer is the code of ``animal``."""
    return f"What is the secret code of the {animal}?"


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
        return CompletionResponse(
            text=text, additional_kwargs={"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())}
        )

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


def claims(inputs: dict) -> dict:
    """``extract_claims``: one claim per answer unit."""
    return {"claims": [{"unit": i, "text": u} for i, u in enumerate(inputs["units"])]}


def verify(inputs: dict) -> dict:
    """``verify_claims``: supported when a chunk holds every word of the claim."""
    verdicts = []
    for i, claim in enumerate(inputs["claims"]):
        hits = [j for j, chunk in enumerate(inputs["chunks"]) if set(words(claim)) <= set(words(chunk))]
        verdicts.append(
            {
                "claim": i,
                "verdict": "supported" if hits else "not_found",
                "evidence": [{"chunk": j, "quote": claim} for j in hits[:1]],
                "reason": "word overlap",
            }
        )
    return {"verdicts": verdicts}


def scripted_judge(name: str = "scripted") -> ScriptedJudge:
    """A ScriptedJudge that answers ``extract_claims`` and ``verify_claims``."""
    return ScriptedJudge({"extract_claims": claims, "verify_claims": verify}, name=name)


def build_index(delay: float = 0.0, metadata: bool = True) -> VectorStoreIndex:
    """The index of the thirty codes (node ids ``doc-<animal>``)."""
    nodes = [
        TextNode(
            id_=f"doc-{a}",
            text=f"The secret code of the {a} is {code_of(a)}.",
            metadata={"animal": a, "page": ANIMALS.index(a)} if metadata else {},
        )
        for a in ANIMALS
    ]
    return VectorStoreIndex(nodes, embed_model=HashEmbedding(delay=delay))


def engine(index: VectorStoreIndex, **kw: Any):
    """A query engine over ``index`` with an EchoLLM (``llm=``, ``top_k=`` and engine options)."""
    llm = kw.pop("llm", None) or EchoLLM()
    return index.as_query_engine(llm=llm, similarity_top_k=kw.pop("top_k", 2), **kw)


def dispatcher_handlers() -> tuple[list, list]:
    """The span and event handlers on LlamaIndex's root dispatcher."""
    d = get_dispatcher()
    return list(d.span_handlers), list(d.event_handlers)


# --------------------------------------------------------------------------- fixtures
# (import them into a test module: ``from helpers.llamaindex_app import index, judge, no_handler_leak``)


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    """The test index, built once per module."""
    return build_index()


@pytest.fixture
def judge() -> ScriptedJudge:
    """A fresh scripted judge."""
    return scripted_judge()


@pytest.fixture(autouse=True)
def no_handler_leak():
    """Every test leaves LlamaIndex's root dispatcher with the handlers it found."""
    before = dispatcher_handlers()
    yield
    after = dispatcher_handlers()
    assert [id(h) for h in after[0]] == [id(h) for h in before[0]]
    assert [id(h) for h in after[1]] == [id(h) for h in before[1]]
