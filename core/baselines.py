"""Trivial retrievers to beat: random, BM25 and embedding-only, over the same chunks as yours.

>>> import ragmeter as rm
>>> from ragmeter.baselines import BM25Retriever, RandomRetriever, compare_retrievers
>>> chunks = [{"id": "a", "text": "Paris is the capital of France."},
...           {"id": "b", "text": "Berlin is the capital of Germany."},
...           {"id": "c", "text": "The Rhine flows through Germany."}]
>>> qs = [rm.Sample("What is the capital of France?", relevant_ids=["a"])]
>>> cmp = compare_retrievers(qs, {"bm25": BM25Retriever(), "random": RandomRetriever(seed=0)}, k=1, chunks=chunks)
>>> cmp.means["bm25"]["mrr"]
1.0

Each retriever is indexed over the same chunks (by default every context of the samples, by id)
and asked the samples' questions; the retrieved lists are scored with the IR metrics
(:mod:`ragmeter.metrics.retrieval`) against the samples' ``relevant_ids``. ``BM25Retriever``
uses bm25s (``pip install "ragmeter[baselines]"``): Lucene's BM25, ``idf = ln(1 + (N - n + 0.5)
/ (n + 0.5))``, ``score = sum idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragmeter.comparison import IMPROVED, REGRESSED, Comparison, compare
from ragmeter.data import Context, Sample
from ragmeter.judges.base import Embedder, Usage
from ragmeter.loops import run_sync
from ragmeter.metrics import resolve_metrics
from ragmeter.readers import as_dataset
from ragmeter.result import EvaluationResult
from ragmeter.runner import evaluate
from ragmeter.testset.documents import as_context, tokens

__all__ = [
    "Retriever",
    "RandomRetriever",
    "BM25Retriever",
    "EmbeddingRetriever",
    "RetrieverComparison",
    "compare_retrievers",
    "pool_chunks",
]

_BM25_HINT = 'BM25Retriever needs bm25s: pip install "ragmeter[baselines]"'


class Retriever:
    """A baseline: :meth:`index` the chunks once, then :meth:`retrieve` the top ``k`` per question."""

    name = "retriever"

    def __init__(self) -> None:
        self.chunks: list[Context] = []

    def index(self, chunks: Iterable[Any]) -> Retriever:
        """Index ``chunks`` (Contexts, ``{id, text}`` dicts, LangChain / LlamaIndex documents); each needs an id."""
        self.chunks = [as_context(c, i) for i, c in enumerate(chunks)]
        missing = [i for i, c in enumerate(self.chunks) if c.id is None]
        if missing:
            raise ValueError(f"chunks at positions {missing[:5]} have no id; retrieval metrics need chunk ids")
        self._build()
        return self

    def _build(self) -> None:
        """Prepare the index over ``self.chunks``."""

    def _ranked(self, questions: list[str], k: int) -> list[list[tuple[int, float]]]:  # pragma: no cover - interface
        raise NotImplementedError

    def retrieve_many(self, questions: Sequence[str], k: int = 5) -> list[list[Context]]:
        """The top ``k`` chunks for each question, best first, with the retriever's score."""
        if not self.chunks:
            raise ValueError(f"{self.name}: call index(chunks) first")
        out = []
        for ranked in self._ranked(list(questions), min(k, len(self.chunks))):
            c = [self.chunks[i] for i, _ in ranked]
            out.append(
                [
                    Context(x.text, id=x.id, score=s, rank=r, metadata=x.metadata)
                    for r, (x, (_, s)) in enumerate(zip(c, ranked), 1)
                ]
            )
        return out

    def retrieve(self, question: str, k: int = 5) -> list[Context]:
        """The top ``k`` chunks for ``question``."""
        return self.retrieve_many([question], k)[0]

    def __call__(self, question: str, k: int = 5) -> list[Context]:
        """Same as :meth:`retrieve`."""
        return self.retrieve(question, k)


class RandomRetriever(Retriever):
    """``k`` chunks drawn uniformly without replacement; the draw depends only on ``seed`` and
    the question, so a run is reproducible. Expected hit rate@k with R relevant chunks out of
    N: ``1 - C(N-R, k) / C(N, k)``."""

    name = "random"

    def __init__(self, seed: int = 0):
        super().__init__()
        self.seed = seed

    def _ranked(self, questions: list[str], k: int) -> list[list[tuple[int, float]]]:
        return [
            [(i, 0.0) for i in random.Random(f"{self.seed}\x00{q}").sample(range(len(self.chunks)), k)]
            for q in questions
        ]


class BM25Retriever(Retriever):
    """BM25 (bm25s, Lucene variant) over lower-cased word tokens, English stop words removed
    (``stopwords=None`` keeps them). Ties keep the chunks' order; chunks scoring 0 (no query
    word) are still returned after the others, so every retriever returns ``k`` chunks."""

    name = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75, stopwords: str | None = "en"):
        super().__init__()
        self.k1, self.b, self.stopwords = k1, b, stopwords

    def _tokens(self, text: str) -> list[str]:
        return [t for t in tokens(text) if t not in self._stop]

    def _build(self) -> None:
        try:
            import bm25s
            from bm25s.stopwords import STOPWORDS_EN
        except ImportError as err:
            raise ImportError(f"{_BM25_HINT}  [{err}]") from None
        self._stop = set(STOPWORDS_EN) if self.stopwords == "en" else set()
        self._bm25 = bm25s.BM25(k1=self.k1, b=self.b)
        self._bm25.index([self._tokens(c.text) for c in self.chunks], show_progress=False)

    def scores(self, question: str) -> np.ndarray:
        """The BM25 score of every chunk for ``question``."""
        q = [t for t in self._tokens(question) if t in self._bm25.vocab_dict]
        return np.asarray(self._bm25.get_scores(q), dtype=float) if q else np.zeros(len(self.chunks))

    def _ranked(self, questions: list[str], k: int) -> list[list[tuple[int, float]]]:
        out = []
        for q in questions:
            s = self.scores(q)
            order = sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]
            out.append([(i, float(s[i])) for i in order])
        return out


class EmbeddingRetriever(Retriever):
    """Cosine similarity of question and chunk vectors from a ragmeter :class:`Embedder`
    (``LocalEmbedder()``, ``OpenAIEmbedder(...)``, the offline ``LexicalEmbedder()``). Chunks
    are embedded once at :meth:`index`, the questions of one :meth:`retrieve_many` in one call;
    ``usage`` totals the embedding work."""

    name = "embedding"

    def __init__(self, embedder: Embedder):
        super().__init__()
        self.embedder = embedder
        self.usage = Usage()

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors, usage = run_sync(self.embedder.embed(texts))
        self.usage = self.usage + usage
        v = np.asarray(vectors, dtype=float)
        norms = np.linalg.norm(v, axis=1, keepdims=True)
        return v / np.where(norms == 0, 1.0, norms)

    def _build(self) -> None:
        self._matrix = self._embed([c.text for c in self.chunks])

    def _ranked(self, questions: list[str], k: int) -> list[list[tuple[int, float]]]:
        sims = self._embed(questions) @ self._matrix.T
        return [[(i, float(row[i])) for i in sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]] for row in sims]


def pool_chunks(samples: Iterable[Sample]) -> list[Context]:
    """Every context of ``samples`` with an id, once per id (first text wins), in order."""
    seen: dict[str, Context] = {}
    for s in samples:
        for c in s.contexts:
            if c.id is not None and c.id not in seen:
                seen[c.id] = c
    return list(seen.values())


@dataclass
class RetrieverComparison:
    """What :func:`compare_retrievers` found: ``results`` (name -> EvaluationResult), ``means``
    (name -> metric -> mean), ``metrics`` in order, and ``k``."""

    results: dict[str, EvaluationResult]
    metrics: list[str]
    k: int
    means: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.means:
            self.means = {
                name: {m: r.summary().get(m, {}).get("mean") for m in self.metrics} for name, r in self.results.items()
            }

    def delta(self, name: str, baseline: str, metric: str) -> float | None:
        """``name``'s mean minus ``baseline``'s on ``metric`` (None when either has none)."""
        a, b = self.means[name].get(metric), self.means[baseline].get(metric)
        return None if a is None or b is None else a - b

    def compare(self, name: str, baseline: str, **kwargs: Any) -> Comparison:
        """:func:`ragmeter.compare` of ``baseline`` (before) with ``name`` (after), paired by
        question: per metric the difference, its bootstrap 95% CI and a verdict (``kwargs``:
        ``tolerance``, ``n_boot``, ``seed``)."""
        return compare(self.results[baseline], self.results[name], paired=True, **kwargs)

    def verdicts(self, name: str, tolerance: float = 0.0) -> list[str]:
        """One line per other retriever: whether ``name`` beats it (improved on some metric, by
        more than ``tolerance`` with a 95% CI above zero, and worse on none), and by how much."""
        lines = []
        for other in self.means:
            if other == name:
                continue
            stats = self.compare(name, other, tolerance=tolerance).metrics
            parts = []
            for m in self.metrics:
                st = stats.get(m)
                if st is None or st.diff is None:
                    continue
                ci = f", 95% CI {st.ci[0]:+.3f}..{st.ci[1]:+.3f}" if st.ci else ""
                parts.append(f"{m} {st.mean_b:.3f} vs {st.mean_a:.3f} ({st.diff:+.3f}{ci})")
            won = [m for m, st in stats.items() if st.verdict == IMPROVED]
            lost = [m for m, st in stats.items() if st.verdict == REGRESSED]
            word = (
                "beats"
                if won and not lost
                else "loses to"
                if lost and not won
                else "mixed against"
                if won
                else "no detectable difference from"
            )
            lines.append(f"{name} {word} {other}: " + "; ".join(parts))
        return lines

    def to_markdown(self) -> str:
        """A table: one row per retriever, one column per metric mean."""
        head = "| retriever | " + " | ".join(self.metrics) + " |"
        rows = [head, "|" + "---|" * (len(self.metrics) + 1)]
        for name, means in self.means.items():
            rows.append(f"| {name} | " + " | ".join("n/a" if v is None else f"{v:.3f}" for v in means.values()) + " |")
        return "\n".join(rows)


def _retrieved(
    value: Any, questions: list[str], k: int, chunks: list[Context], samples: list[Sample]
) -> list[list[Context]]:
    if value is None:  # the contexts the samples already hold (the team's retriever, captured)
        return [list(s.contexts[:k]) for s in samples]
    if isinstance(value, Retriever):
        return value.index(chunks).retrieve_many(questions, k)
    if callable(value):
        return [[as_context(c, i) for i, c in enumerate(list(value(q))[:k])] for q in questions]
    raise TypeError(
        f"a retriever must be a ragmeter baseline, a function question -> chunks, or None (the samples' "
        f"own contexts), got {type(value).__name__}"
    )


def compare_retrievers(
    samples: Any,
    retrievers: Mapping[str, Any],
    k: int = 5,
    *,
    chunks: Iterable[Any] | None = None,
    metrics: Iterable[Any] | None = None,
) -> RetrieverComparison:
    """Score each retriever on the same questions with IR metrics.

    ``samples``: Samples (or anything :func:`ragmeter.evaluate` reads) with ``relevant_ids``.
    ``retrievers``: name -> a baseline (indexed here over ``chunks``), a function ``question ->
    chunks`` (yours; chunks as Contexts, dicts, LangChain / LlamaIndex documents, with ids), or
    None for the contexts already in the samples. ``chunks``: the corpus (default
    :func:`pool_chunks` of the samples). ``metrics``: default hit_rate@k, recall@k, precision@k,
    mrr, ndcg@k.
    """
    dataset = [s for s in as_dataset(samples) if s.relevant_ids]
    if not dataset:
        raise ValueError("compare_retrievers needs samples with relevant_ids")
    corpus = [as_context(c, i) for i, c in enumerate(chunks)] if chunks is not None else pool_chunks(dataset)
    metric_list = resolve_metrics(
        list(metrics) if metrics is not None else [f"hit_rate@{k}", f"recall@{k}", f"precision@{k}", "mrr", f"ndcg@{k}"]
    )
    questions = [s.question for s in dataset]
    results = {}
    for name, value in retrievers.items():
        lists = _retrieved(value, questions, k, corpus, dataset)
        scored = [
            Sample(
                s.question,
                contexts=ctx,
                reference=s.reference,
                relevant_ids=s.relevant_ids,
                id=s.id,
                metadata={**s.metadata, "retriever": name},
            )
            for s, ctx in zip(dataset, lists)
        ]
        results[name] = evaluate(scored, metric_list, judge=None, progress=False, response_time=None)
    return RetrieverComparison(results, [m.name for m in metric_list], k)
