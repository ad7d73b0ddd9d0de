"""Test-set generation: questions, reference answers and the ids of the chunks that answer them.

>>> from ragmeter.testset import generate
>>> docs = [{"id": "fr", "text": "Paris is the capital and the largest city of France."}]
>>> ts = generate(docs, n=1, judge="offline")
>>> ts[0].question, ts[0].relevant_ids, ts[0].metadata["kind"]
('What is Paris?', ['fr'], 'extractive')

An LLM judge writes the questions through the ``write_questions`` judge task (validated,
cached, retried like every judge task): ``mix`` shares of ``simple`` / ``reasoning`` /
``multi_context`` questions plus ``edge_cases`` (a share of the set, spread over
``unanswerable``, ``ambiguous``, ``out_of_scope`` and ``multi_hop``), each kind filled to its
quota (near-duplicates removed, shortfalls asked again), so edge cases keep their share. The set
is interleaved by kind, so a prefix (``ts[:20]``) keeps the shares too. The offline judge writes
questions by rules instead (kind ``extractive``) and, in the ``edge_cases`` share, the edge cases
rules can make: ``numeric``, ``negation``, ``unanswerable`` and ``multi_chunk`` (see
:mod:`ragmeter.testset.extractive`, which says what it cannot make).

Every item is a :class:`~ragmeter.data.Sample` without answer or contexts (the pipeline under
test fills them) and with ``metadata``: ``kind``, ``edge_case``, ``source_chunks`` (the chunks
the generator was shown), ``generator`` (the judge's name). ``relevant_ids`` are the chunks the
reference answer comes from (None for unanswerable and out-of-scope questions).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragmeter.data import Context, Dataset, Sample
from ragmeter.fileio import json_text, write_text_atomic
from ragmeter.judges.base import Judge, JudgeError, Usage
from ragmeter.judges.tasks import QUESTION_KINDS
from ragmeter.loops import run_sync
from ragmeter.readers import save_samples
from ragmeter.testset.documents import chunk_documents, load_documents, tokens
from ragmeter.testset.extractive import OFFLINE_EDGE_KINDS, STOPWORDS, offline_items

__all__ = [
    "generate",
    "quotas",
    "TestSet",
    "DEFAULT_MIX",
    "EDGE_KINDS",
    "OFFLINE_EDGE_KINDS",
    "load_documents",
    "chunk_documents",
]

DEFAULT_MIX = {"simple": 0.5, "reasoning": 0.25, "multi_context": 0.25}
EDGE_KINDS = ("unanswerable", "ambiguous", "out_of_scope", "multi_hop")
_ROUNDS = 3  # how often a kind's shortfall (duplicates, failed answers) is asked again


class TestSet(Dataset):
    """The generated questions (a :class:`~ragmeter.data.Dataset` of Samples) plus ``chunks``
    (the corpus, with the ids ``relevant_ids`` refer to), ``quotas`` (kind -> requested count),
    ``usage`` (judge work), ``duplicates`` (near-duplicate questions dropped) and ``notes``."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        samples: Iterable[Sample],
        chunks: list[Context],
        quotas: dict[str, int],
        usage: Usage,
        duplicates: int = 0,
        notes: Iterable[str] = (),
    ):
        super().__init__(samples)
        self.chunks, self.quotas, self.usage, self.duplicates = chunks, quotas, usage, duplicates
        self.notes = list(notes)

    def counts(self) -> dict[str, int]:
        """Questions per kind."""
        out: dict[str, int] = {}
        for s in self:
            out[s.metadata["kind"]] = out.get(s.metadata["kind"], 0) + 1
        return out

    def save(self, path: Any, chunks_path: Any = None) -> None:
        """Write the questions to ``path`` (.jsonl / .csv) and, when given, the chunks to
        ``chunks_path`` (JSONL of ``{id, text, metadata}``)."""
        save_samples(self, path)
        if chunks_path is not None:
            write_text_atomic(
                Path(chunks_path),
                "".join(json_text({"id": c.id, "text": c.text, "metadata": c.metadata}) + "\n" for c in self.chunks),
            )


def quotas(n: int, mix: Mapping[str, float] | None = None, edge_cases: float = 0.1) -> dict[str, int]:
    """Questions per kind: ``round(n * edge_cases)`` edge cases spread evenly over
    :data:`EDGE_KINDS` (earlier kinds get the remainder), the rest split by ``mix`` with the
    largest-remainder method, so the counts add up to ``n``."""
    mix = dict(DEFAULT_MIX if mix is None else mix)
    unknown = [k for k in mix if k not in QUESTION_KINDS or k in EDGE_KINDS]
    if unknown:
        raise ValueError(
            f"unknown question kind(s) in mix: {unknown}; use {[k for k in QUESTION_KINDS if k not in EDGE_KINDS]} "
            f"(edge cases come from edge_cases=)"
        )
    if not 0 <= edge_cases <= 1 or any(w < 0 for w in mix.values()) or (sum(mix.values()) <= 0 and edge_cases < 1):
        raise ValueError("mix weights must be >= 0 with a positive sum, edge_cases between 0 and 1")
    n_edge = round(n * edge_cases)
    out = _split(n - n_edge, mix)
    out.update(_split(n_edge, {k: 1.0 for k in EDGE_KINDS}))
    return {k: v for k, v in out.items() if v}


def _split(total: int, weights: Mapping[str, float]) -> dict[str, int]:
    s = sum(weights.values())
    if total <= 0 or s <= 0:
        return {}
    exact = {k: total * w / s for k, w in weights.items()}
    out = {k: math.floor(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: -(exact[k] - out[k]))[: total - sum(out.values())]:
        out[k] += 1
    return out


def _words(text: str) -> set[str]:
    return set(tokens(text)) - STOPWORDS


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


class _Groups:
    """Which chunks the generator is shown for each item: one chunk from a shuffled cycle, plus
    for multi-context its most similar chunk and for multi-hop its most similar chunk of another
    document (any other chunk when there is no other document)."""

    def __init__(self, chunks: list[Context], seed: int):
        self.chunks, self.rng = chunks, random.Random(seed)
        self.words = [_words(c.text) for c in chunks]
        self.order: dict[str, list[int]] = {}

    def _next(self, kind: str) -> int:
        """The next chunk of ``kind``'s own shuffled cycle: a kind covers the corpus before it repeats."""
        order = self.order.setdefault(kind, [])
        if not order:
            order += range(len(self.chunks))
            self.rng.shuffle(order)
        return order.pop()

    def _partner(self, i: int, other_document: bool) -> int:
        doc = self.chunks[i].metadata.get("document")
        others = [j for j in range(len(self.chunks)) if j != i]
        if other_document and any(self.chunks[j].metadata.get("document") != doc for j in others):
            others = [j for j in others if self.chunks[j].metadata.get("document") != doc]
        return max(others, key=lambda j: (_jaccard(self.words[i], self.words[j]), -j))

    def take(self, kind: str) -> list[int]:
        """The chunk indices for one item of ``kind``."""
        i = self._next(kind)
        if QUESTION_KINDS[kind][1] >= 2:
            return [i, self._partner(i, kind == "multi_hop")]
        return [i]


async def _ask(judge: Judge, kind: str, group: list[int], chunks: list[Context], avoid: list[str]) -> Any:
    try:
        return await judge.run(
            "write_questions", {"kind": kind, "n": 1, "chunks": [chunks[i].text for i in group], "avoid": avoid}
        )
    except JudgeError as err:
        return err


async def _generate_llm(
    judge: Judge, chunks: list[Context], wanted: dict[str, int], seed: int, accept: Any
) -> tuple[dict[str, list[dict]], Usage, list[str]]:
    """Ask for each kind's quota, one question per request; ask again for what duplicates and
    failures left short (up to ``_ROUNDS`` rounds). The questions already asked from the same
    chunks go along (``avoid``), so a repeated request is a new one, for the model and the cache."""
    groups = _Groups(chunks, seed)
    got: dict[str, list[dict]] = {k: [] for k in wanted}
    asked: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    usage, notes = Usage(), []
    for _ in range(_ROUNDS):
        todo = [(k, groups.take(k)) for k, q in wanted.items() for _ in range(q - len(got[k]))]
        if not todo:
            break
        answers = await asyncio.gather(
            *(_ask(judge, k, g, chunks, list(asked.get((k, tuple(g)), ()))) for k, g in todo)
        )
        for (kind, group), result in zip(todo, answers):
            usage = usage + result.usage
            if isinstance(result, JudgeError):
                notes.append(f"{kind}: {result}")
                continue
            for item in result.output["items"]:
                asked.setdefault((kind, tuple(group)), []).append(item["question"])
                if len(got[kind]) < wanted[kind] and accept(item["question"]):
                    got[kind].append({**item, "chunks": [group[i] for i in item["chunks"]], "shown": group})
    return got, usage, notes


def _interleave(got: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """Items ordered so that every prefix holds each regular kind, and the edge cases together,
    in about their share (edge kinds take turns within theirs)."""
    edge_kinds = tuple(dict.fromkeys(EDGE_KINDS + OFFLINE_EDGE_KINDS))
    groups: list[list[tuple[str, dict]]] = [[(k, i) for i in items] for k, items in got.items() if k not in edge_kinds]
    edge = [[(k, i) for i in got[k]] for k in edge_kinds if got.get(k)]
    groups.append([pair for turn in itertools.zip_longest(*edge) for pair in turn if pair is not None])
    keyed = [((j + 0.5) / len(g), n, pair) for n, g in enumerate(groups) for j, pair in enumerate(g)]
    return [pair for _, _, pair in sorted(keyed, key=lambda t: (t[0], t[1]))]


def _resolve(judge: Any) -> Judge:
    from ragmeter.judges.spec import default_judge, judge_from_spec

    judge = judge_from_spec(judge) if isinstance(judge, str) else judge if judge is not None else default_judge()
    judge.check()
    return judge


def generate(
    documents: Iterable[Any],
    n: int = 50,
    judge: Judge | str | None = None,
    *,
    mix: Mapping[str, float] | None = None,
    edge_cases: float = 0.1,
    seed: int = 0,
    chunk_size: int = 1000,
    dedup: float = 0.8,
) -> TestSet:
    """Generate ``n`` questions over ``documents`` (strings, ``{id, text}`` dicts, LangChain /
    LlamaIndex documents; longer than ``chunk_size`` characters: chunked, see
    :func:`~ragmeter.testset.documents.chunk_documents`).

    ``judge``: a Judge or spec (None: the default judge); an LLM judge writes ``mix`` (default
    :data:`DEFAULT_MIX`) plus ``edge_cases`` (share of ``n``), the offline judge an extractive
    set plus ``edge_cases`` of the kinds in :data:`OFFLINE_EDGE_KINDS`. ``dedup``: a question whose word set (stop words left out) has Jaccard similarity of at
    least this with an earlier one is dropped and asked again. ``seed`` fixes which chunks each
    question is written from. Judge failures do not stop the run: they are in ``notes``, and a
    kind that stays short of its quota is named there too. Fewer than ``n`` questions in all
    (the documents give no more) is also a warning (``UserWarning``).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    chunks = chunk_documents(documents, chunk_size)
    if not chunks:
        raise ValueError("no text in the documents")
    judge = _resolve(judge)
    kept: list[set[str]] = []
    duplicates = 0

    def accept(question: str) -> bool:
        nonlocal duplicates
        w = _words(question)
        if any(_jaccard(w, k) >= dedup for k in kept):
            duplicates += 1
            return False
        kept.append(w)
        return True

    if not judge.generates_questions:
        if not 0 <= edge_cases <= 1:
            raise ValueError(f"edge_cases must be between 0 and 1, got {edge_cases!r}")
        n_edge = round(n * edge_cases)
        wanted = {"extractive": n - n_edge, **_split(n_edge, {k: 1.0 for k in OFFLINE_EDGE_KINDS})}
        wanted = {k: v for k, v in wanted.items() if v}
        usage = Usage()
        notes = [
            f"{judge.name} judge: extractive questions (one sentence of one chunk each, by rules) and the edge "
            f"cases rules can make ({', '.join(OFFLINE_EDGE_KINDS)}); ambiguous, out-of-scope, multi-hop and "
            f"reasoning questions need an LLM judge"
        ]
        got, short = offline_items(chunks, wanted, seed, accept)
        notes += short
        if len(got.get("extractive", [])) < wanted.get("extractive", 0):
            notes.append(f"extractive: {len(got['extractive'])} of {wanted['extractive']} questions")
    else:
        wanted = quotas(n, mix, edge_cases)
        multi = [k for k in wanted if QUESTION_KINDS[k][1] >= 2]
        if len(chunks) < 2 and multi:
            wanted = {k: v for k, v in wanted.items() if k not in multi}
        got, usage, notes = run_sync(_generate_llm(judge, chunks, wanted, seed, accept))
        if len(chunks) < 2 and multi:
            notes.append(f"one chunk only: no {' / '.join(multi)} questions")
        notes += [f"{k}: {len(got.get(k, []))} of {q} questions" for k, q in wanted.items() if len(got.get(k, [])) < q]
    made = sum(len(v) for v in got.values())
    if made < n:
        why = (
            "the documents give no more: each sentence of 6-40 words is used once, near-duplicates are dropped"
            if not judge.generates_questions
            else "see the notes for the kinds that fell short"
        )
        notes.append(f"{made} of {n} questions: {why}")
        warnings.warn(f"ragmeter.testset.generate: {notes[-1]}", stacklevel=2)
    samples = []
    for i, (kind, item) in enumerate(_interleave(got), 1):
        ids = [chunks[j].id for j in item["chunks"]]
        samples.append(
            Sample(
                item["question"],
                reference=item["answer"],
                relevant_ids=ids or None,
                id=f"q{i:04d}",
                metadata={
                    "kind": kind,
                    "edge_case": kind in EDGE_KINDS or kind in OFFLINE_EDGE_KINDS,
                    "source_chunks": [chunks[j].id for j in item["shown"]],
                    "generator": judge.name,
                },
            )
        )
    return TestSet(samples, chunks, wanted, usage, duplicates, notes)
