"""Internal: The judge requests of one sample, built in one place: the cost promise held by code.

Every judge task a metric can use is asked through a method of :class:`JudgeRequests`, which
builds the task's inputs one way only. Because the inputs are identical, the
:class:`ScoringContext` memo answers every metric of a sample from one call per task, whatever
the number of metrics or chunks:

==========================  =====================  ============================================
request                     task                   used by
==========================  =====================  ============================================
``claims()``                extract_claims         faithfulness, answer correctness, citations
``claim_verdicts()``        verify_claims          faithfulness, citations
``chunk_ratings()``         rate_chunks            context relevance / precision, recall estimate
``reference_attribution()`` attribute_statements   context recall, entity recall
(both, one call)            review_context         a run with a metric of each of the two rows
                                                   above, a reference with statements and an
                                                   LLM judge (``combines_tasks``)
``generated_questions()``   generate_questions     answer relevancy, response completeness
``claim_comparison()``      compare_claims         answer correctness
``answer_rating()``         rate_answer            answer relevancy (``method="rating"``)
``embeddings()``            (embedder)             one embed() for every metric's texts (shared
                                                   requests with the samples in flight)
==========================  =====================  ============================================

``review_context`` answers ``rate_chunks`` and ``attribute_statements`` in one call (the chunks
sent once): :meth:`JudgeRequests.review_inputs` says when; each part of its answer is validated
as the task alone would be and served to :meth:`~JudgeRequests.chunk_ratings` /
:meth:`~JudgeRequests.reference_attribution` in the same shape, so every metric computes the same.
With a reference, the five core metrics (faithfulness, answer relevancy, context precision /
recall / relevance) thus cost 4 calls per sample instead of 5, all twelve judge metrics 5 instead
of 6 (without a reference there is no attribution to combine).

Run-level settings (:class:`RequestSettings`, e.g. the number of generated questions, and the
:class:`Limits` on the size of a record) are decided once per run, never by one metric on its own.

Claims are counted once: :meth:`JudgeRequests.claims` keeps the first of claims that are the same
once case, whitespace, punctuation and citation markers are ignored, so every metric built on
claims (faithfulness, answer correctness, the citation metrics) scores *distinct* claims.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ragmeter.citations import ParsedAnswer, parse_citations, strip_citations
from ragmeter.conversations import judged_question
from ragmeter.data import RecordError, Sample, Score
from ragmeter.judges.base import Embedder, Judge, JudgeError, TaskResult, Usage
from ragmeter.judges.tasks import REVIEW_PARTS
from ragmeter.text import split_sentences

__all__ = [
    "RequestSettings",
    "Limits",
    "LimitError",
    "JudgeRequests",
    "ScoringContext",
    "distinct_claims",
    "DEFAULT_N_QUESTIONS",
]

#: Questions ``generate_questions`` writes per answer when no metric of the run asks for more.
DEFAULT_N_QUESTIONS = 3

#: The requests ``review_context`` answers together: a run whose metrics read both (their
#: ``reads_requests``) asks it instead of the two tasks.
_REVIEWED_TOGETHER = frozenset({"chunk_ratings", "reference_attribution"})


class LimitError(RecordError):
    """A record past one of the run's :class:`Limits`: names the record, the field and the limit.

    ``str(err)`` reads ``"sample 'a7': field 'answer': 10,482,113 characters; the limit is 100,000
    (Limits.max_answer_chars)"``. Every score of the record that reads text carries it as its
    error (value None): the record is not scored, nor cut short.
    """

    def __init__(
        self, location: str | None, field_name: str, name: str, limit: int, actual: int, what: str = "characters"
    ):
        self.name, self.limit, self.actual = name, limit, actual
        super().__init__(location, field_name, f"{actual:,} {what}; the limit is {limit:,} (Limits.{name})")

    def score(self, metric: str) -> Score:
        """The error Score of ``metric`` on this record (details ``limit``: name, limit, actual)."""
        return Score(
            metric,
            None,
            error=f"{type(self).__name__}: {self}",
            details={"limit": {"name": self.name, "limit": self.limit, "actual": self.actual}},
        )


@dataclass(frozen=True)
class Limits:
    """The largest record a run scores (None: no limit). A record past a limit gets a
    :class:`LimitError` on every score that reads text (retrieval metrics read only ids and are
    still scored); nothing is truncated, so a score is never computed on part of a record.

    The defaults sit far above real RAG records (the bundled examples and the SummEdits
    documents, up to 8,226 characters, are scored exactly as without limits) and keep the worst
    record within them to seconds with the offline judge and within one judge prompt:

    - ``max_question_chars`` = 20,000: a question with a pasted page or a chat history still fits;
      ten times a long prompt.
    - ``max_answer_chars`` = ``max_reference_chars`` = 100,000 (~25,000 tokens): above the longest
      answer common models write (GPT-4o stops at 16,384 output tokens).
    - ``max_chunk_chars`` = 100,000: a whole 40-page document as one chunk (text splitters
      default to 1,000-4,000 characters).
    - ``max_chunks`` = 200: twice the candidates a re-ranker usually takes (top-k is 3-20).
    - ``max_context_chars`` = 400,000 (~100,000 tokens): all chunks of a record, as much as one
      128k-token judge prompt holds next to the instructions and the claims.
    - ``max_claims`` = 200 distinct claims per answer, and statements (sentences) per reference:
      each is checked against every chunk, and ``verify_claims`` writes a verdict with a quote per
      claim (~60 tokens): 200 of them (~12,000 tokens) is near the 16k-token output limit of
      common judge models. Claims are counted after ``extract_claims``, before ``verify_claims``.

    >>> Limits(max_answer_chars=None).max_answer_chars is None
    True
    """

    max_question_chars: int | None = 20_000
    max_answer_chars: int | None = 100_000
    max_reference_chars: int | None = 100_000
    max_chunk_chars: int | None = 100_000
    max_chunks: int | None = 200
    max_context_chars: int | None = 400_000
    max_claims: int | None = 200

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"Limits.{f.name} must be a positive integer or None, got {v!r}")

    @classmethod
    def unlimited(cls) -> Limits:
        """No limit at all (every field None)."""
        return cls(**{f.name: None for f in dataclasses.fields(cls)})

    def check(self, sample: Sample) -> LimitError | None:
        """The first limit ``sample`` is past (question, answer, reference, chunks), or None."""
        where = f"sample {sample.id!r}"

        def over(field_name: str, name: str, actual: int, what: str = "characters") -> LimitError | None:
            limit = getattr(self, name)
            return (
                LimitError(where, field_name, name, limit, actual, what)
                if limit is not None and actual > limit
                else None
            )

        texts = sample.context_texts
        return (
            over("question", "max_question_chars", len(sample.question))
            or over("answer", "max_answer_chars", len(sample.answer or ""))
            or over("reference", "max_reference_chars", len(sample.reference or ""))
            or over("contexts", "max_chunks", len(texts), "chunks")
            or next((e for i, t in enumerate(texts) if (e := over(f"contexts[{i}]", "max_chunk_chars", len(t)))), None)
            or over("contexts", "max_context_chars", sum(map(len, texts)), f"characters in {len(texts)} chunks")
        )

    def check_claims(self, sample: Sample, field_name: str, n: int, what: str) -> None:
        """Raise :class:`LimitError` when ``field_name`` has more than ``max_claims`` claims / statements."""
        if self.max_claims is not None and n > self.max_claims:
            raise LimitError(f"sample {sample.id!r}", field_name, "max_claims", self.max_claims, n, what)


@dataclass(frozen=True)
class RequestSettings:
    """Settings of the judge requests that hold for a whole run.

    ``n_questions``: how many questions ``generate_questions`` writes; :meth:`for_metrics` takes
    the largest ``n_questions`` any metric of the run declares (default 3), so answer relevancy
    and response completeness share one call. ``limits``: the run's :class:`Limits`.
    ``review_context``: whether the run's metrics read both chunk ratings and reference
    attribution (:meth:`for_metrics` decides), so one ``review_context`` call can answer both.
    """

    n_questions: int = DEFAULT_N_QUESTIONS
    limits: Limits = dataclasses.field(default_factory=Limits)
    review_context: bool = False

    @classmethod
    def for_metrics(cls, metrics: Sequence[Any], limits: Limits | None = None) -> RequestSettings:
        """The settings that serve every metric of ``metrics`` (``limits``: None for the defaults)."""
        wanted = [m.n_questions for m in metrics if getattr(m, "n_questions", None)]
        reads = frozenset().union(*(m.reads_requests for m in metrics))
        return cls(
            n_questions=max(wanted) if wanted else DEFAULT_N_QUESTIONS,
            limits=limits or Limits(),
            review_context=_REVIEWED_TOGETHER <= reads,
        )


_RE_NOT_WORD = re.compile(r"[^\w\s]")


def _claim_key(text: str) -> str:
    """A claim's text with case, whitespace, punctuation and citation markers ignored."""
    return " ".join(_RE_NOT_WORD.sub(" ", strip_citations(text).casefold()).split())


def distinct_claims(claims: Sequence[dict]) -> list[dict]:
    """``claims`` without repeats: the first of claims with the same text once case, whitespace,
    punctuation and citation markers are ignored. A kept claim that was repeated lists the units
    of its repeats under ``repeats``; claims are copied, never changed in place.

    >>> distinct_claims([{"unit": 0, "text": "Paris is in France."}, {"unit": 1, "text": "paris is in France [2]"}])
    [{'unit': 0, 'text': 'Paris is in France.', 'repeats': [1]}]
    """
    kept: dict[str, dict] = {}
    out: list[dict] = []
    for c in claims:
        key = _claim_key(c["text"]) or c["text"]
        first = kept.get(key)
        if first is None:
            kept[key] = dict(c)
            out.append(kept[key])
        else:
            first.setdefault("repeats", []).append(c["unit"])
    return out


def _key(name: str, inputs: Any) -> str:
    return name + ":" + json.dumps(inputs, sort_keys=True, ensure_ascii=False, default=str)


class JudgeRequests:
    """The per-sample judge requests (see the module table). Subclasses provide ``sample``,
    ``judge``, ``settings``, ``parsed``, :meth:`task` and :meth:`once`."""

    sample: Sample
    judge: Judge | None
    settings: RequestSettings
    if TYPE_CHECKING:  # a cached property of ScoringContext; TaskRecorder passes it through

        @property
        def parsed(self) -> ParsedAnswer: ...

    async def task(self, name: str, inputs: dict) -> TaskResult:  # pragma: no cover - interface
        """The judge's answer to task ``name`` on ``inputs``."""
        raise NotImplementedError

    def once(self, key: str, build: Callable[[], Any]) -> Any:  # pragma: no cover - interface
        """``build()`` computed once per sample for ``key`` (the same object on every call)."""
        raise NotImplementedError

    def answer_units(self) -> ParsedAnswer:
        """The answer parsed into units with their citations (the same for every metric)."""
        return self.parsed

    def question_text(self) -> str:
        """The question as judges see it (:func:`ragmeter.conversations.judged_question`): the
        standalone question of a chat turn, else its recent history and the question, else the
        question unchanged (a sample without history sends the same inputs as ever)."""
        return judged_question(self.sample)

    def answer_text(self) -> str:
        """The answer as judges and embedders see it: citation markers and reference list removed."""
        return self.parsed.text or (self.sample.answer or "").strip()

    async def claims(self) -> list[dict]:
        """The answer's distinct claims ``[{unit, text}]`` (``extract_claims`` on the question and
        the unit texts, repeats dropped by :func:`distinct_claims`). An answer without text has
        no claims and costs no call. Raises :class:`LimitError` past ``Limits.max_claims``."""
        if not self.parsed.units:
            return []
        out = (
            await self.task("extract_claims", {"question": self.question_text(), "units": self.parsed.unit_texts})
        ).output
        claims = distinct_claims(out["claims"])
        self.settings.limits.check_claims(self.sample, "answer", len(claims), "distinct claims")
        return claims

    async def claim_verdicts(self) -> list[dict]:
        """One ``verify_claims`` verdict per claim of :meth:`claims` against all chunks (no call
        without claims)."""
        claims = await self.claims()
        if not claims:
            return []
        out = (
            await self.task(
                "verify_claims", {"claims": [c["text"] for c in claims], "chunks": self.sample.context_texts}
            )
        ).output
        return list(out["verdicts"])

    def _rating_inputs(self) -> dict:
        """The ``rate_chunks`` inputs (each chunk split into statements), built once per sample."""
        return self.once(
            "inputs:rate_chunks",
            lambda: {
                "question": self.question_text(),
                "reference": self.sample.reference or None,
                "chunks": [split_sentences(t) for t in self.sample.context_texts],
            },
        )

    def _attribution_inputs(self) -> dict:
        """The ``attribute_statements`` inputs, built once per sample; :class:`LimitError` past
        ``Limits.max_claims``."""
        inputs = self.once(
            "inputs:attribute_statements",
            lambda: {
                "question": self.question_text(),
                "statements": split_sentences(self.sample.reference or ""),
                "chunks": self.sample.context_texts,
            },
        )
        self.settings.limits.check_claims(self.sample, "reference", len(inputs["statements"]), "statements")
        return inputs

    def review_inputs(self) -> dict | None:
        """The inputs of the one ``review_context`` call that answers ``rate_chunks`` and
        ``attribute_statements`` together (each task's inputs under its name), or None when the
        sample asks them apart: the run's metrics read only one of them
        (``RequestSettings.review_context``), the judge does not say ``combines_tasks`` (the
        offline judge, a custom judge), or the reference has no statements (or too many)."""
        if not (self.settings.review_context and getattr(self.judge, "combines_tasks", False)):
            return None
        try:
            attribution = self._attribution_inputs()
        except LimitError:
            return None
        if not attribution["statements"]:
            return None
        return {"rate_chunks": self._rating_inputs(), "attribute_statements": attribution}

    async def _answer(self, task: str, inputs: dict) -> dict:
        """The answer to ``task`` on ``inputs``: its part of the sample's ``review_context``
        answer when there is one (see :meth:`review_inputs`), else the task's own."""
        review = self.review_inputs()
        if review is None:
            return (await self.task(task, inputs)).output
        out = (await self.task("review_context", review)).output
        return {k: out[k] for k in REVIEW_PARTS[task]}

    async def chunk_ratings(self) -> tuple[list[list[str]], dict]:
        """Each chunk split into statements, and the ``rate_chunks`` answer: per chunk the
        relevant statement indices and the ``useful`` verdict, and ``answerable`` (1..5)."""
        inputs = self._rating_inputs()
        return inputs["chunks"], await self._answer("rate_chunks", inputs)

    async def reference_attribution(self) -> tuple[list[str], dict | None]:
        """The reference's statements and the ``attribute_statements`` answer (statements
        attributed to chunks, the reference's entities found in them); None, without a call,
        when the reference has no statements."""
        inputs = self._attribution_inputs()
        if not inputs["statements"]:
            return inputs["statements"], None
        return inputs["statements"], await self._answer("attribute_statements", inputs)

    def generates_questions(self) -> bool:
        """Whether the judge can write questions (the offline judge cannot)."""
        return bool(getattr(self.judge, "generates_questions", True))

    async def generated_questions(self) -> dict:
        """The ``generate_questions`` answer: ``settings.n_questions`` questions the answer
        would answer (0 for a judge that cannot write them: it still reports ``noncommittal``
        and the question's ``parts``)."""
        n = self.settings.n_questions if self.generates_questions() else 0
        inputs = {"question": self.question_text(), "answer": self.answer_text(), "n": n}
        return (await self.task("generate_questions", inputs)).output

    async def claim_comparison(self, claims: Sequence[dict], statements: Sequence[str]) -> dict:
        """The ``compare_claims`` answer: which claims the reference states and which reference
        ``statements`` the answer covers (at most ``Limits.max_claims`` statements)."""
        self.settings.limits.check_claims(self.sample, "reference", len(statements), "statements")
        inputs = {
            "question": self.question_text(),
            "claims": [c["text"] for c in claims],
            "statements": list(statements),
        }
        return (await self.task("compare_claims", inputs)).output

    async def answer_rating(self) -> dict:
        """The ``rate_answer`` answer: a 0..1 rating of how well the answer addresses the question."""
        inputs = {"question": self.question_text(), "answer": self.answer_text()}
        return (await self.task("rate_answer", inputs)).output


class ScoringContext(JudgeRequests):
    """Everything the metrics of one sample share: the judge, the embedder, the run's request
    settings and a memo of task results, so each judge task runs at most once per sample.

    ``usage`` totals what this sample cost (each call counted once). :meth:`embeddings` makes one
    embedding call for all texts the sample's metrics declared via ``Metric.embedding_inputs``.
    """

    def __init__(
        self,
        sample: Sample,
        judge: Judge | None = None,
        embedder: Embedder | None = None,
        metrics: Sequence[Any] = (),
        settings: RequestSettings | None = None,
    ):
        self.sample = sample
        self.judge = judge
        self.embedder = embedder if embedder is not None else getattr(judge, "embedder", None)
        self.metrics = list(metrics)
        self.settings = settings if settings is not None else RequestSettings.for_metrics(self.metrics)
        self.usage = Usage()
        self._memo: dict[str, asyncio.Future] = {}
        self._built: dict[str, Any] = {}

    @cached_property
    def limit_error(self) -> LimitError | None:
        """The first of the run's :class:`Limits` the sample is past, or None (checked once)."""
        return self.settings.limits.check(self.sample)

    @cached_property
    def parsed(self) -> ParsedAnswer:
        """The sample's answer parsed once (see :func:`ragmeter.citations.parse_citations`)."""
        return parse_citations(self.sample.answer or "", self.sample.contexts)

    def once(self, key: str, build: Callable[[], Any]) -> Any:
        """``build()`` computed once per ``key`` for this sample (request inputs every metric reads)."""
        if key not in self._built:
            self._built[key] = build()
        return self._built[key]

    async def shared(self, key: str, factory: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``factory()`` once per ``key`` for this sample; concurrent callers await the same result."""
        fut = self._memo.get(key)
        if fut is None:
            fut = asyncio.ensure_future(factory())
            self._memo[key] = fut
        return await asyncio.shield(fut)

    async def task(self, name: str, inputs: dict) -> TaskResult:
        """The judge's answer to task ``name`` on ``inputs`` (asked once per sample)."""
        judge = self.judge
        if judge is None:
            raise JudgeError(f"task {name!r} needs a judge; pass judge=... (e.g. OfflineJudge())", task=name)

        async def call() -> TaskResult:
            try:
                result = await judge.run(name, inputs)
            except JudgeError as err:
                self.usage = self.usage + err.usage
                raise
            self.usage = self.usage + result.usage
            return result

        return await self.shared(_key(name, inputs), call)

    async def embeddings(self) -> dict[str, np.ndarray]:
        """Vectors for every text any metric of this sample declared, from one ``embed()`` call
        (an SDK embedder sends the texts of samples in flight together: see
        :mod:`ragmeter.judges.embedding`)."""

        async def compute() -> dict[str, np.ndarray]:
            if self.embedder is None:
                raise JudgeError("no embedder: pass embedder=... or use a judge that has one")
            texts: list[str] = []
            for metric in self.metrics:
                for t in await metric.embedding_inputs(self.sample, self):
                    if t not in texts:
                        texts.append(t)
            if not texts:
                return {}
            vectors, usage = await self.embedder.embed(texts)
            self.usage = self.usage + usage
            vectors = np.asarray(vectors, dtype=float)
            if vectors.shape[0] != len(texts):
                raise JudgeError(f"embedder returned {vectors.shape[0]} vectors for {len(texts)} texts")
            return dict(zip(texts, vectors))

        return await self.shared("__embeddings__", compute)


class TaskRecorder(JudgeRequests):
    """A view of a :class:`ScoringContext` for one metric: the same memo, plus a record of the
    tasks this metric used (their usage and notes go on its Score's details)."""

    def __init__(self, ctx: ScoringContext):
        self._ctx = ctx
        self.used: dict[str, Usage] = {}
        self.notes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def once(self, key: str, build: Callable[[], Any]) -> Any:
        """The context's value for ``key`` (shared by every metric of the sample)."""
        return self._ctx.once(key, build)

    async def task(self, name: str, inputs: dict) -> TaskResult:
        """The context's answer to the task, recorded for this metric."""
        try:
            result = await self._ctx.task(name, inputs)
        except JudgeError as err:
            self.used[name] = err.usage  # a failed task still cost something: show it on the Score
            raise
        self.used[name] = result.usage
        if result.note and result.note not in self.notes:
            self.notes.append(result.note)
        return result
