"""Baseline retrievers (random, BM25, embedding) and compare_retrievers, on corpora small enough
to check by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ragmeter as rm
from helpers import ROOT
from ragmeter.baselines import BM25Retriever, EmbeddingRetriever, RandomRetriever, compare_retrievers, pool_chunks
from ragmeter.judges.base import Embedder, Usage

pytest.importorskip("bm25s")

TINY = [{"id": "a", "text": "cat sat mat"}, {"id": "b", "text": "dog sat"}, {"id": "c", "text": "bird flew"}]
CAPITALS = [
    {"id": "fr", "text": "Paris is the capital of France."},
    {"id": "de", "text": "Berlin is the capital of Germany."},
    {"id": "rhine", "text": "The Rhine flows through Germany and the Netherlands."},
    {"id": "seine", "text": "The Seine flows through Paris."},
]


def test_bm25_scores_are_lucene_bm25_worked_by_hand():
    # N = 3, avgdl = 7/3; idf(n) = ln(1 + (N - n + .5) / (n + .5)); tf part = tf / (tf + k1 (1 - b + b dl/avgdl))
    idf = lambda n: math.log(1 + (3 - n + 0.5) / (n + 0.5))  # noqa: E731
    norm = lambda dl: 1 / (1 + 1.5 * (0.25 + 0.75 * dl / (7 / 3)))  # noqa: E731
    bm25 = BM25Retriever(stopwords=None).index(TINY)
    scores = bm25.scores("cat sat?")
    assert scores == pytest.approx([(idf(1) + idf(2)) * norm(3), idf(2) * norm(2), 0.0], abs=1e-6)
    assert scores[0] == pytest.approx(0.51422, abs=1e-5)  # (0.98083 + 0.47000) / 2.82143
    top = bm25.retrieve("cat sat?", k=2)
    assert [c.id for c in top] == ["a", "b"] and [c.rank for c in top] == [1, 2]
    assert top[0].score == pytest.approx(scores[0])
    assert [c.id for c in bm25.retrieve("unknown words", k=2)] == ["a", "b"]  # all 0: the chunks' order


def test_bm25_leaves_stop_words_out():
    bm25 = BM25Retriever().index(CAPITALS)
    assert bm25.retrieve("What is the capital of France?", k=1)[0].id == "fr"
    assert bm25.retrieve("Which river flows through Paris?", k=1)[0].id == "seine"
    assert bm25.scores("what is the of")[0] == 0.0  # only stop words


def test_random_retriever_is_reproducible_and_draws_distinct_chunks():
    r = RandomRetriever(seed=3).index(CAPITALS)
    first = [c.id for c in r.retrieve("q1", k=3)]
    assert first == [c.id for c in RandomRetriever(seed=3).index(CAPITALS).retrieve("q1", k=3)]
    assert len(set(first)) == 3
    assert len(r.retrieve("q1", k=10)) == 4  # k past the corpus: every chunk once
    draws = {tuple(c.id for c in r.retrieve(f"q{i}", k=2)) for i in range(30)}
    assert len(draws) > 5  # depends on the question


def test_random_hit_rate_matches_its_expectation():
    # N = 10 chunks, one relevant, k = 3: expected hit rate 1 - C(9,3)/C(10,3) = 0.3
    chunks = [{"id": f"c{i}", "text": f"chunk {i}"} for i in range(10)]
    qs = [rm.Sample(f"question {i}", relevant_ids=[f"c{i % 10}"]) for i in range(300)]
    cmp = compare_retrievers(qs, {"random": RandomRetriever(seed=0)}, k=3, chunks=chunks)
    assert 1 - math.comb(9, 3) / math.comb(10, 3) == pytest.approx(0.3)
    assert cmp.means["random"]["hit_rate@3"] == pytest.approx(0.3, abs=0.05)


class TableEmbedder(Embedder):
    """Fixed 2-d vectors: cosines can be read off."""

    name = "table"
    VECTORS = {"fr": [1.0, 0.0], "de": [0.0, 1.0], "rhine": [0.6, 0.8], "seine": [0.8, 0.6]}

    def __init__(self):
        self.calls = []

    async def embed(self, texts):
        self.calls.append(list(texts))
        by_text = {c["text"]: self.VECTORS[c["id"]] for c in CAPITALS}
        return np.array([by_text.get(t, [3.0, 0.0]) for t in texts]), Usage(embedding_calls=1)


def test_embedding_retriever_ranks_by_cosine_and_embeds_each_chunk_once():
    emb = TableEmbedder()
    r = EmbeddingRetriever(emb).index(CAPITALS)
    lists = r.retrieve_many(["q1", "q2"], k=3)
    # question vector [3, 0]: cosines fr 1.0, seine 0.8, rhine 0.6, de 0.0
    assert [[c.id for c in lst] for lst in lists] == [["fr", "seine", "rhine"]] * 2
    assert [c.score for c in lists[0]] == pytest.approx([1.0, 0.8, 0.6])
    assert emb.calls == [[c["text"] for c in CAPITALS], ["q1", "q2"]]
    assert r.usage.embedding_calls == 2


def test_offline_lexical_embedder_works_as_a_baseline():
    from ragmeter.judges.offline import LexicalEmbedder

    r = EmbeddingRetriever(LexicalEmbedder()).index(CAPITALS)
    assert r.retrieve("capital of Germany", k=1)[0].id == "de"


def test_compare_retrievers_says_who_beats_whom_and_by_how_much():
    qs = [
        rm.Sample("What is the capital of France?", relevant_ids=["fr"]),
        rm.Sample("Which river flows through Paris?", relevant_ids=["seine"]),
    ]
    worst = lambda q: [CAPITALS[1], CAPITALS[2]]  # noqa: E731  - never the relevant chunk
    cmp = compare_retrievers(qs, {"bm25": BM25Retriever(), "worst": worst}, k=2, chunks=CAPITALS)
    assert cmp.metrics == ["hit_rate@2", "recall@2", "precision@2", "mrr", "ndcg@2"]
    assert cmp.means["bm25"] == pytest.approx(
        {"hit_rate@2": 1.0, "recall@2": 1.0, "precision@2": 0.5, "mrr": 1.0, "ndcg@2": 1.0}
    )
    assert cmp.means["worst"]["mrr"] == 0.0
    assert cmp.delta("bm25", "worst", "precision@2") == pytest.approx(0.5)
    assert cmp.verdicts("bm25") == [
        "bm25 beats worst: hit_rate@2 1.000 vs 0.000 (+1.000, 95% CI +1.000..+1.000); "
        "recall@2 1.000 vs 0.000 (+1.000, 95% CI +1.000..+1.000); precision@2 0.500 vs "
        "0.000 (+0.500, 95% CI +0.500..+0.500); mrr 1.000 vs 0.000 (+1.000, 95% CI "
        "+1.000..+1.000); ndcg@2 1.000 vs 0.000 (+1.000, 95% CI +1.000..+1.000)"
    ]
    assert cmp.verdicts("worst")[0].startswith("worst loses to bm25: hit_rate@2 0.000 vs 1.000 (-1.000")
    same = compare_retrievers(qs, {"one": BM25Retriever(), "two": BM25Retriever()}, k=2, chunks=CAPITALS)
    assert same.verdicts("one")[0].startswith(
        "one no detectable difference from two: hit_rate@2 1.000 vs 1.000 (+0.000"
    )
    assert cmp.to_markdown().splitlines()[2] == "| bm25 | 1.000 | 1.000 | 0.500 | 1.000 | 1.000 |"


def test_compare_retrievers_on_the_bundled_samples():
    """The numbers in the README: every retriever over the 100 chunks of the 20 bundled samples."""
    ds = rm.load_samples(ROOT / "examples" / "rag_samples.jsonl")
    assert len(pool_chunks(ds)) == 100
    cmp = compare_retrievers(ds, {"yours": None, "bm25": BM25Retriever(), "random": RandomRetriever(seed=0)}, k=5)
    assert cmp.means["yours"]["hit_rate@5"] == 1.0  # the samples' own (curated) contexts
    assert cmp.means["bm25"]["mrr"] == pytest.approx(0.95)
    assert cmp.means["random"]["mrr"] < 0.2
    assert cmp.verdicts("bm25")[-1].startswith("bm25 beats random")
    # yours is ahead on mrr too, but 20 questions cannot tell +0.05 from chance: the CI reaches 0
    assert "mrr 1.000 vs 0.950 (+0.050, 95% CI +0.000..+0.125)" in cmp.verdicts("yours")[0]
    assert cmp.compare("yours", "bm25").metrics["mrr"].verdict == "no detectable change"
    assert cmp.compare("yours", "bm25").metrics["ndcg@5"].verdict == "improved"


def test_compare_retrievers_rejects_what_it_cannot_score():
    with pytest.raises(ValueError, match="relevant_ids"):
        compare_retrievers([rm.Sample("q")], {"bm25": BM25Retriever()}, chunks=CAPITALS)
    with pytest.raises(ValueError, match="no id"):
        BM25Retriever().index(["a text without an id"])
    with pytest.raises(TypeError, match="retriever must be"):
        compare_retrievers([rm.Sample("q", relevant_ids=["fr"])], {"x": 42}, chunks=CAPITALS)
