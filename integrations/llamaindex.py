"""LlamaIndex integration: ragmeter metrics as LlamaIndex evaluators, and inline capture of every
query through LlamaIndex's instrumentation module.

Evaluators (one per metric, usable in ``BatchEvalRunner``)::

    from llama_index.core.evaluation import BatchEvalRunner
    from ragmeter.integrations.llamaindex import make_evaluators, RagmeterFaithfulnessEvaluator

    evaluators = make_evaluators(["faithfulness", "answer_relevancy"], judge="offline")
    results = BatchEvalRunner(evaluators, workers=4).evaluate_queries(query_engine, queries=qs)
    results["faithfulness"][0].score, results["faithfulness"][0].details

An evaluator never raises (``BatchEvalRunner`` retries raising evaluators with back-off): a score
that could not be computed comes back with ``invalid_result=True`` and the reason.

Capture (inline scoring off the request path)::

    from ragmeter.integrations.llamaindex import RagmeterInstrumentation

    with RagmeterInstrumentation(["faithfulness"], judge="offline") as meter:
        query_engine.query("What is the capital of France?")
    meter.results[0].scores["faithfulness"].value

Only this module imports LlamaIndex. It translates LlamaIndex events into ragmeter Samples and
ragmeter Scores into LlamaIndex ``EvaluationResult`` objects; keeping, counting and scoring is
done by the core (:class:`ragmeter.capture.CaptureRecorder`, :func:`ragmeter.runner.score_sample`).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import copy
import datetime as _dt
import json
import logging
import math
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence

import numpy as np
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.evaluation import BaseEvaluator, EvaluationResult
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatInProgressEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionInProgressEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.instrumentation.events.query import QueryEndEvent, QueryStartEvent
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.instrumentation.events.synthesis import SynthesizeEndEvent, SynthesizeStartEvent
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..capture import REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY, CaptureRecorder
from ..data import Context, RecordError, Sample, Score
from ..inline import BackgroundScorer
from ..judges.base import Embedder, Judge, TaskResult, Usage
from ragmeter.metrics import Metric, get_metric, metric_class
from ..result import EvaluationResult as RagmeterEvaluationRun
from ..result import SampleResult
from ragmeter.judges.spec import resolve_judge
from ragmeter.loops import run_sync
from ragmeter.metrics.scoring import score_sample
from ragmeter.runner import resolve_metrics
from ._tracing import TraceLink, trace_metadata

__all__ = [
    "RagmeterInstrumentation",
    "RagmeterEvaluator",
    "RagmeterEvaluationResult",
    "make_evaluators",
    "RagmeterFaithfulnessEvaluator",
    "RagmeterAnswerRelevancyEvaluator",
    "RagmeterContextRelevanceEvaluator",
    "RagmeterContextPrecisionEvaluator",
    "RagmeterContextRecallEvaluator",
    "RagmeterAnswerCorrectnessEvaluator",
    "RagmeterResponseCompletenessEvaluator",
    "RagmeterEntityRecallEvaluator",
    "RagmeterHallucinatedSpecificsEvaluator",
    "RagmeterCitationAccuracyEvaluator",
    "RagmeterCitationPrecisionEvaluator",
    "RagmeterCitationRecallEvaluator",
]

log = logging.getLogger("ragmeter")


# =========================================================================== shared helpers


def _jsonable(value: Any, depth: int = 0) -> Any:
    """A JSON-serialisable copy of ``value`` (node metadata, tags): unknown objects become str."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth > 4:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, (np.integer, np.floating)):
        return _jsonable(value.item(), depth)
    return str(value)


def _node_context(nws: Any) -> Context:
    """A ragmeter Context from a LlamaIndex NodeWithScore (or node): text, node id, score, metadata."""
    node = getattr(nws, "node", nws)
    score = getattr(nws, "score", None)
    text = node.get_content() if hasattr(node, "get_content") else str(node)
    node_meta = getattr(node, "metadata", None)
    metadata: dict = _jsonable(dict(node_meta)) if isinstance(node_meta, Mapping) else {}
    ref = getattr(node, "ref_doc_id", None)
    if ref and "ref_doc_id" not in metadata:
        metadata["ref_doc_id"] = str(ref)  # the source document of this chunk
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        score = None  # absent, or not a finite number
    node_id = getattr(node, "node_id", None) or getattr(node, "id_", None)
    return Context(text=text, id=str(node_id) if node_id is not None else None, score=score, metadata=metadata)


def _contexts_from(values: Any) -> list:
    """Contexts from strings, dicts, ragmeter Contexts, LlamaIndex NodeWithScore or nodes."""
    out = []
    for i, v in enumerate(values or []):
        if isinstance(v, (str, Context, Mapping)):
            out.append(Context.from_value(v, i))
        elif isinstance(v, NodeWithScore) or hasattr(v, "get_content"):
            out.append(_node_context(v))
        else:
            raise RecordError(None, f"contexts[{i}]", f"expected a string, a node or a dict, got {type(v).__name__}")
    return out


def _query_text(query: Any) -> str | None:
    if query is None:
        return None
    if isinstance(query, QueryBundle):
        return query.query_str
    return str(query)


def _response_text(response: Any) -> str | None:
    """The answer text of a finished (non-streaming) LlamaIndex response."""
    if response is None:
        return None
    if isinstance(response, PydanticResponse):
        inner = response.response
        if inner is None:
            return None
        return inner.model_dump_json() if hasattr(inner, "model_dump_json") else str(inner)
    if isinstance(response, Response):
        return None if response.response is None else str(response.response)
    if isinstance(response, (StreamingResponse, AsyncStreamingResponse)):
        return response.response_txt
    if isinstance(response, str):
        return response
    return str(response)


def _usage_of(resp: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens reported on a ChatResponse / CompletionResponse, or None.

    Looks at ``additional_kwargs`` (llama-index-llms-openai puts ``prompt_tokens`` /
    ``completion_tokens`` there) and at ``raw.usage`` (OpenAI ``prompt_tokens``, Anthropic
    ``input_tokens`` / ``output_tokens``; object or dict)."""
    if resp is None:
        return None
    candidates = [getattr(resp, "additional_kwargs", None)]
    raw = getattr(resp, "raw", None)
    if raw is not None:
        candidates.append(raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None))
        if isinstance(raw, Mapping):
            candidates.append(raw.get("usage_metadata"))
    for c in candidates:
        if c is None:
            continue
        get = c.get if isinstance(c, Mapping) else (lambda k, _c=c: getattr(_c, k, None))
        prompt = get("prompt_tokens") if get("prompt_tokens") is not None else get("input_tokens")
        completion = get("completion_tokens") if get("completion_tokens") is not None else get("output_tokens")
        if isinstance(prompt, int) or isinstance(completion, int):
            return (int(prompt or 0), int(completion or 0))
    return None


def _id_from_span(span_id: str) -> str:
    # LlamaIndex span ids read "RetrieverQueryEngine.query-<uuid4>"; the uuid is unique per query.
    _, _, rest = span_id.partition("-")
    return (rest or span_id).replace("-", "")[:16]


# =========================================================================== evaluators


def _stable_key(task: str, inputs: Any) -> str:
    return task + ":" + json.dumps(inputs, sort_keys=True, ensure_ascii=False, default=str)


class _SharedJudge(Judge):
    """Wraps a judge so that every evaluator built on it shares task answers.

    ``BatchEvalRunner`` calls each evaluator separately on the same query / response; through
    this wrapper a task (``extract_claims`` ...) asked by several metrics of the same sample runs
    once: concurrent askers await the same call, later ones get the stored answer (reported as
    ``Usage(cached=1)``, so cost is counted once). Keeps the last ``max_entries`` answers.
    """

    def __init__(self, inner: Judge, max_entries: int = 4096):
        self.inner = inner
        self.name = inner.name
        self.kind = getattr(inner, "kind", "LLM")
        self.generates_questions = getattr(inner, "generates_questions", True)
        inner_embedder = getattr(inner, "embedder", None)
        self.embedder = _shared_embedder(inner_embedder) if inner_embedder is not None else None
        self.max_entries = max_entries
        self._done: "collections.OrderedDict[str, TaskResult]" = collections.OrderedDict()
        self._inflight: dict[tuple[int, str], asyncio.Future] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:  # anything else (cache, model) from the real judge
        if name == "inner" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    @staticmethod
    def _cached(result: TaskResult) -> TaskResult:
        return TaskResult(result.task, result.output, Usage(cached=1), result.judge, result.note)

    async def run(self, task: str, inputs: dict) -> TaskResult:
        """The inner judge's answer, asked at most once for the same task and inputs."""
        key = _stable_key(task, inputs)
        loop = asyncio.get_running_loop()
        with self._lock:
            hit = self._done.get(key)
            if hit is not None:
                self._done.move_to_end(key)
                return self._cached(hit)
            fut = self._inflight.get((id(loop), key))
            owner = fut is None
            if owner:
                fut = loop.create_future()
                self._inflight[(id(loop), key)] = fut
        if not owner:
            return self._cached(await asyncio.shield(fut))
        try:
            result = await self.inner.run(task, inputs)
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # mark retrieved: no "exception never retrieved" warning without waiters
            raise
        finally:
            with self._lock:
                self._inflight.pop((id(loop), key), None)
        with self._lock:
            self._done[key] = result
            while len(self._done) > self.max_entries:
                self._done.popitem(last=False)
        fut.set_result(result)
        return result

    async def aclose(self) -> None:
        """Close the wrapped judge."""
        await self.inner.aclose()


class _SharedEmbedder(Embedder):
    """Wraps an embedder with a per-text vector cache shared by every evaluator that uses it."""

    def __init__(self, inner: Embedder, max_entries: int = 8192):
        self.inner = inner
        self.name = inner.name
        self.max_entries = max_entries
        self._vectors: "collections.OrderedDict[str, np.ndarray]" = collections.OrderedDict()
        self._lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, Usage]:
        """Vectors for ``texts``; only the texts not seen before are sent to the inner embedder."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        usage = Usage()
        if missing:
            vectors, usage = await self.inner.embed(missing)
            vectors = np.asarray(vectors, dtype=float)
            with self._lock:
                for t, v in zip(missing, vectors):
                    self._vectors[t] = v
                while len(self._vectors) > self.max_entries:
                    self._vectors.popitem(last=False)
            local = dict(zip(missing, vectors))
        else:
            local = {}
        with self._lock:
            rows = [local[t] if t in local else self._vectors[t] for t in texts]
        return np.asarray(rows, dtype=float), usage


# id(original) -> its sharing wrapper, alive while some evaluator holds the wrapper; the wrapper
# holds the original, so the id cannot be reused while the entry exists.
_SHARED: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_SPEC_JUDGES: dict[str, Judge | None] = {}
_SHARED_LOCK = threading.RLock()


def _shared_embedder(embedder: Embedder | None) -> Embedder | None:
    """The process-wide caching wrapper of ``embedder`` (the same wrapper for the same object)."""
    if embedder is None or isinstance(embedder, _SharedEmbedder):
        return embedder
    with _SHARED_LOCK:
        shared = _SHARED.get(id(embedder))
        if shared is None:
            shared = _SharedEmbedder(embedder)
            _SHARED[id(embedder)] = shared
        return shared


def _shared_judge(judge: Judge | None) -> Judge | None:
    """The process-wide sharing wrapper of ``judge`` (the same wrapper for the same judge object)."""
    if judge is None or isinstance(judge, _SharedJudge):
        return judge
    with _SHARED_LOCK:
        shared = _SHARED.get(id(judge))
        if shared is not None:
            return shared
        members = getattr(judge, "members", None)
        if members:  # an ensemble: share each member's task answers, keep the ensemble's combine()
            shared = copy.copy(judge)
            shared.members = [_shared_judge(m) for m in members]  # type: ignore[attr-defined]
            if getattr(judge, "embedder", None) is not None:
                shared.embedder = _shared_embedder(judge.embedder)
            shared._ragmeter_original = judge  # type: ignore[attr-defined]  # keeps the id taken
        else:
            shared = _SharedJudge(judge)
        _SHARED[id(judge)] = shared
        return shared


def _judge_for(judge: Any, metrics: Sequence[Metric]) -> Judge | None:
    """Resolve a judge spec once per process (so separately built evaluators share one judge)."""
    if not any(m.uses_judge for m in metrics):
        return None
    if judge is None or isinstance(judge, str):
        spec = "<default>" if judge is None else judge
        with _SHARED_LOCK:
            if spec in _SPEC_JUDGES:
                return _SPEC_JUDGES[spec]
        resolved = resolve_judge(judge, metrics)
        with _SHARED_LOCK:
            return _SPEC_JUDGES.setdefault(spec, resolved)
    return judge


class RagmeterEvaluationResult(EvaluationResult):
    """A LlamaIndex ``EvaluationResult`` carrying the full ragmeter Score.

    ``score`` is the metric value in [0, 1] (None when it could not be computed), ``passing`` is
    True when the ragmeter label is ``"pass"`` (False for warn / fail), ``feedback`` the
    explanation. When there is no value, ``invalid_result`` is True and ``invalid_reason`` says
    why (the error, or why the metric does not apply). ``metric``, ``label``, ``judge``,
    ``error``, ``details`` (claims, verdicts, per-chunk scores, judge usage) and ``sample_id``
    come from the ragmeter Score; :attr:`ragmeter_score` rebuilds it.
    """

    metric: Optional[str] = None
    label: Optional[str] = None
    judge: Optional[str] = None
    error: Optional[str] = None
    details: Dict[str, Any] = {}
    sample_id: Optional[str] = None
    usage: Optional[Dict[str, Any]] = None

    @property
    def ragmeter_score(self) -> Score | None:
        """The ragmeter :class:`~ragmeter.Score` behind this result (None if scoring never ran)."""
        if self.metric is None or (self.score is None and not (self.error or self.feedback)):
            return None
        return Score(self.metric, self.score, explanation=self.feedback or "", details=dict(self.details),
                     error=self.error, judge=self.judge, label=self.label)


def _invalid(metric: str, reason: str, query: Any = None, response: Any = None,
             contexts: Any = None) -> RagmeterEvaluationResult:
    return RagmeterEvaluationResult(
        query=query if isinstance(query, str) else None,
        response=response if isinstance(response, str) else None,
        contexts=[c for c in contexts if isinstance(c, str)] if isinstance(contexts, (list, tuple)) else None,
        passing=None, score=None, feedback=None, invalid_result=True, invalid_reason=reason,
        metric=metric, error=reason)


class RagmeterEvaluator(BaseEvaluator):
    """A ragmeter metric as a LlamaIndex evaluator.

    ``metric`` is a metric name (``"faithfulness"``, ``"ndcg@10"`` ...) or a Metric instance;
    ``judge`` a Judge, a spec (``"offline"``, ``"openai:gpt-4o-mini"``) or None for ragmeter's
    default judge; ``threshold`` / ``warn`` override the metric's pass / warn levels.

    ``aevaluate(query, response, contexts, reference=None, relevant_ids=None, sample_id=None)``
    takes strings (contexts may also be NodeWithScore / nodes / dicts with ids);
    ``aevaluate_response(query, response)`` takes the Response of a query engine and keeps the
    source nodes' ids and scores. Both return a :class:`RagmeterEvaluationResult` and never raise.

    With ``share=True`` (default) evaluators built on the same judge share judge work: a task
    needed by several metrics of the same sample (claims for faithfulness, citation accuracy and
    answer correctness) runs once even when ``BatchEvalRunner`` calls the evaluators separately.
    """

    metric_name: str | None = None

    def __init__(self, metric: "str | Metric | None" = None, judge: "Judge | str | None" = None, *,
                 embedder: Embedder | None = None, threshold: float | None = None, warn: float | None = None,
                 share: bool = True):
        spec = metric if metric is not None else self.metric_name
        if spec is None:
            raise TypeError("RagmeterEvaluator needs a metric (a name such as 'faithfulness' or a Metric)")
        self.metric = get_metric(spec).with_levels(threshold, warn)
        judge_obj = _judge_for(_as_judge(judge), [self.metric])
        embedder = _as_embedder(embedder)
        self.judge = _shared_judge(judge_obj) if share else judge_obj
        self.embedder = _shared_embedder(embedder) if share else embedder

    def __repr__(self) -> str:
        return f"{type(self).__name__}(metric={self.metric.name!r}, judge={getattr(self.judge, 'name', None)!r})"

    @property
    def name(self) -> str:
        """The metric name (the key to use in ``BatchEvalRunner(evaluators={...})``)."""
        return self.metric.name

    # PromptMixin: ragmeter prompts live in its judge tasks, not in the evaluator.
    def _get_prompts(self) -> dict:
        return {}

    def _get_prompt_modules(self) -> dict:
        return {}

    def _update_prompts(self, prompts: Any) -> None:
        return None

    async def aevaluate(self, query: Optional[str] = None, response: Optional[str] = None,
                        contexts: Optional[Sequence[Any]] = None, reference: Optional[str] = None, *,
                        relevant_ids: Any = None, sample_id: Optional[str] = None,
                        metadata: Optional[dict] = None, **kwargs: Any) -> RagmeterEvaluationResult:
        """Score one query / response / contexts (plus ``reference`` and ``relevant_ids`` for the
        metrics that need them). Extra LlamaIndex kwargs (``sleep_time_in_seconds`` ...) are ignored."""
        try:
            sample = Sample(question=query if query is not None else "", contexts=_contexts_from(contexts),
                            answer=response, reference=reference, relevant_ids=relevant_ids, id=sample_id,
                            metadata=dict(metadata or {}, source="llamaindex.evaluator"))
        except Exception as err:
            return _invalid(self.metric.name, f"invalid input: {err}", query, response, contexts)
        return await self._score(sample)

    async def aevaluate_response(self, query: Optional[str] = None, response: Any = None,
                                 **kwargs: Any) -> RagmeterEvaluationResult:
        """Score a query engine's Response: its text and its source nodes (ids and scores kept)."""
        try:
            text: Optional[str] = None
            nodes: list = []
            if response is not None:
                nodes = list(getattr(response, "source_nodes", None) or [])
                if isinstance(response, AsyncStreamingResponse):
                    text = (await response.get_response()).response
                elif isinstance(response, StreamingResponse):
                    text = response.get_response().response
                else:
                    text = _response_text(response)
            contexts = kwargs.pop("contexts", None) or nodes
        except Exception as err:
            return _invalid(self.metric.name, f"could not read the response: {type(err).__name__}: {err}", query)
        return await self.aevaluate(query=query, response=text, contexts=contexts, **kwargs)

    def evaluate(self, query: Optional[str] = None, response: Optional[str] = None,
                 contexts: Optional[Sequence[Any]] = None, **kwargs: Any) -> RagmeterEvaluationResult:
        """Synchronous :meth:`aevaluate` (also inside a running event loop)."""
        return run_sync(self.aevaluate(query=query, response=response, contexts=contexts, **kwargs))

    def evaluate_response(self, query: Optional[str] = None, response: Any = None,
                          **kwargs: Any) -> RagmeterEvaluationResult:
        """Synchronous :meth:`aevaluate_response` (also inside a running event loop)."""
        return run_sync(self.aevaluate_response(query=query, response=response, **kwargs))

    async def _score(self, sample: Sample) -> RagmeterEvaluationResult:
        try:
            result = await score_sample(sample, [self.metric], self.judge, self.embedder)
            score = result.scores[self.metric.name]
        except Exception as err:  # score_sample never raises; belt and braces for BatchEvalRunner
            return _invalid(self.metric.name, f"{type(err).__name__}: {err}", sample.question, sample.answer,
                            sample.context_texts)
        reason = None
        if score.value is None:
            reason = score.error or score.explanation or "no value"
        return RagmeterEvaluationResult(
            query=sample.question, response=sample.answer, contexts=sample.context_texts,
            passing=score.passed, score=score.value, feedback=score.explanation or None,
            invalid_result=score.value is None, invalid_reason=reason,
            metric=score.metric, label=score.label, judge=score.judge, error=score.error,
            details=score.details, sample_id=sample.id, usage=result.usage.to_dict())


class _NamedEvaluator(RagmeterEvaluator):
    """Base of the one-metric evaluator classes: ``Cls(judge=None, *, embedder=None,
    threshold=None, warn=None, share=True, **metric_options)``; ``metric_options`` go to the
    metric class (e.g. ``RagmeterFaithfulnessEvaluator(judge, mode="not_contradicted")``)."""

    def __init__(self, judge: "Judge | str | None" = None, *, embedder: Embedder | None = None,
                 threshold: float | None = None, warn: float | None = None, share: bool = True,
                 **metric_options: Any):

        assert self.metric_name is not None
        cls = metric_class(self.metric_name)
        metric = cls(threshold=threshold, warn=warn, **metric_options)
        super().__init__(metric, judge, embedder=embedder, share=share)


class RagmeterFaithfulnessEvaluator(_NamedEvaluator):
    """Faithfulness: share of the answer's claims supported by the retrieved chunks."""

    metric_name = "faithfulness"


class RagmeterAnswerRelevancyEvaluator(_NamedEvaluator):
    """Answer relevancy: does the answer address the question (reverse questions + embeddings)."""

    metric_name = "answer_relevancy"


class RagmeterContextRelevanceEvaluator(_NamedEvaluator):
    """Context relevance: share of the retrieved statements relevant to the question."""

    metric_name = "context_relevance"


class RagmeterContextPrecisionEvaluator(_NamedEvaluator):
    """Context precision: rank-aware precision of useful chunks (average precision of verdicts)."""

    metric_name = "context_precision"


class RagmeterContextRecallEvaluator(_NamedEvaluator):
    """Context recall: share of the reference's statements attributable to the chunks."""

    metric_name = "context_recall"


class RagmeterAnswerCorrectnessEvaluator(_NamedEvaluator):
    """Answer correctness against a ``reference`` answer (pass ``reference=...``)."""

    metric_name = "answer_correctness"


class RagmeterResponseCompletenessEvaluator(_NamedEvaluator):
    """Response completeness: does the answer cover every part of the question."""

    metric_name = "response_completeness"


class RagmeterEntityRecallEvaluator(_NamedEvaluator):
    """Entity recall: share of the reference's entities present in the chunks."""

    metric_name = "entity_recall"


class RagmeterHallucinatedSpecificsEvaluator(_NamedEvaluator):
    """Hallucinated specifics: numbers, dates, names of the answer that no chunk states."""

    metric_name = "hallucinated_specifics"


class RagmeterCitationAccuracyEvaluator(_NamedEvaluator):
    """Citation accuracy: do the answer's citations point at chunks that support the claim."""

    metric_name = "citation_accuracy"


class RagmeterCitationPrecisionEvaluator(_NamedEvaluator):
    """Citation precision: share of citations that support their claim."""

    metric_name = "citation_precision"


class RagmeterCitationRecallEvaluator(_NamedEvaluator):
    """Citation recall: share of claims that carry a supporting citation."""

    metric_name = "citation_recall"


def make_evaluators(metrics: Iterable[Any] | None = None, judge: "Judge | str | None" = None, *,
                    embedder: Embedder | None = None, share: bool = True) -> dict[str, RagmeterEvaluator]:
    """``{metric name: evaluator}`` for ``BatchEvalRunner(evaluators=...)``.

    ``metrics`` are names or Metric instances (default: ragmeter's default metrics); the judge is
    resolved once and, with ``share=True``, its task answers are shared between the evaluators.
    """
    metric_list = resolve_metrics(metrics)
    judge_obj = _judge_for(_as_judge(judge), metric_list)
    return {m.name: RagmeterEvaluator(m, judge_obj, embedder=embedder, share=share) for m in metric_list}


# =========================================================================== capture

#: Set while a wrapped stream pulls its next chunk: LLM spans and events started lazily by the
#: consumer (their LlamaIndex parent span is the consumer's, not the query's) join this query.
_STREAM_ROOT: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("ragmeter_llamaindex_stream", default=None)


class _Query:
    """What has been seen of one root query so far (internal)."""

    __slots__ = ("root_id", "engine", "question", "t0", "started_at", "t_end", "t_retr0", "t_retr1", "t_rerank1",
                 "t_synth0", "t_synth1", "t_first_token", "retrieved", "reranked", "nodes", "response",
                 "llm_calls", "prompt_tokens", "completion_tokens", "usage_reported", "span_ids",
                 "tags", "target", "streaming", "llm_open", "llm_nested", "models")

    def __init__(self, root_id: str, engine: str):
        self.root_id = root_id
        self.engine = engine
        self.question: Optional[str] = None
        self.t0 = time.perf_counter()
        self.started_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
        self.t_end: Optional[float] = None
        self.t_retr0: Optional[float] = None
        self.t_retr1: Optional[float] = None
        self.t_rerank1: Optional[float] = None
        self.t_synth0: Optional[float] = None
        self.t_synth1: Optional[float] = None
        self.t_first_token: Optional[float] = None
        self.retrieved: list = []
        self.reranked: Optional[list] = None
        self.nodes: Optional[list] = None
        self.response: Any = None
        self.llm_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.usage_reported = False
        self.models: list[str] = []
        self.span_ids: dict[str, Optional[str]] = {}  # span id -> parent span id, for this query
        self.tags: dict = {}
        self.target: Any = None
        self.streaming = False
        self.llm_open: set = set()  # spans of LLM chat / completion calls in progress
        self.llm_nested: set[str] = set()  # LLM calls made inside another (CustomLLM.acomplete -> complete)


def _method_of(span_id: str) -> str:
    return span_id.partition("-")[0].rpartition(".")[2]


class _SpanTracker(BaseSpanHandler):
    """LlamaIndex span handler that forwards span enter / exit / drop to the capture (internal)."""

    def __init__(self, capture: "_Capture"):
        super().__init__()
        object.__setattr__(self, "_ragmeter_capture", capture)

    @classmethod
    def class_name(cls) -> str:
        """Class name."""
        return "RagmeterSpanTracker"

    def span_enter(self, id_: str, bound_args: Any, instance: Any = None, parent_id: Any = None,
                   tags: Any = None, **kwargs: Any) -> None:
        """Forward to the capture (open_spans is not used)."""
        self._ragmeter_capture.on_span_enter(id_, parent_id, instance, tags, bound_args)

    def span_exit(self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any) -> None:
        """Forward to the capture."""
        self._ragmeter_capture.on_span_exit(id_, result)

    def span_drop(self, id_: str, bound_args: Any, instance: Any = None, err: Any = None, **kwargs: Any) -> None:
        """Forward to the capture."""
        self._ragmeter_capture.on_span_drop(id_, err)

    def new_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused (spans are not stored)."""
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused."""
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
        """Unused."""
        return None


class _EventSink(BaseEventHandler):
    """LlamaIndex event handler that forwards events to the capture (internal)."""

    def __init__(self, capture: "_Capture"):
        super().__init__()
        object.__setattr__(self, "_ragmeter_capture", capture)

    @classmethod
    def class_name(cls) -> str:
        """Class name."""
        return "RagmeterEventSink"

    def handle(self, event: Any, **kwargs: Any) -> None:
        """Forward to the capture."""
        self._ragmeter_capture.on_event(event)


class _Capture:
    """Groups LlamaIndex spans and events into one record per root query (internal).

    A root query is the outermost ``BaseQueryEngine.query`` / ``aquery`` span; every span below it
    (found through LlamaIndex's parent span ids, which follow asyncio tasks and threads) and every
    event emitted in those spans belongs to it, so concurrent queries never mix.
    """

    def __init__(self, owner: "RagmeterInstrumentation"):
        self.owner = owner
        self.lock = threading.RLock()
        self.open: dict[str, _Query] = {}
        self.span_root: dict[str, str] = {}
        self._last_sweep = time.monotonic()

    # ---------------------------------------------------------------- spans

    def on_span_enter(self, id_: str, parent_id: Optional[str], instance: Any, tags: Any,
                      bound_args: Any = None) -> None:
        try:
            root = self.span_root.get(parent_id) if parent_id else None
            if root is None and isinstance(instance, BaseQueryEngine) and _method_of(id_) in ("query", "aquery"):
                q = _Query(id_, type(instance).__name__)
                arguments = getattr(bound_args, "arguments", None) or {}
                q.question = _query_text(arguments.get("str_or_query_bundle"))
                if self.owner.attach_to_trace:  # the caller's OTel span, in the caller's context
                    q.target = self.owner._trace.current_target()
                if tags:
                    q.tags = _jsonable(dict(tags))
                with self.lock:
                    self.open[id_] = q
                    self.span_root[id_] = id_
                    q.span_ids[id_] = None
                self._maybe_sweep()
                return
            if root is None:
                root = _STREAM_ROOT.get()
            if root is None:
                return
            with self.lock:
                q = self.open.get(root)
                if q is None:
                    return
                self.span_root[id_] = root
                q.span_ids[id_] = parent_id
        except Exception:  # never break the user's query
            log.exception("ragmeter: LlamaIndex span_enter failed")

    def on_span_exit(self, id_: str, result: Any) -> None:
        q = self.open.get(id_)
        if q is None or q.root_id != id_:
            return
        try:
            self._query_returned(q, result if result is not None else q.response)
        except Exception:
            log.exception("ragmeter: LlamaIndex span_exit failed")

    def on_span_drop(self, id_: str, err: Any) -> None:
        q = self.open.get(id_)
        if q is None or q.root_id != id_:
            return
        try:
            q.t_end = time.perf_counter()
            reason = f"{type(err).__name__}: {err}" if err is not None else "query failed"
            if isinstance(err, (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt)):
                self.finalize(q, None, partial_reason=f"the query was interrupted ({type(err).__name__})")
            else:
                self.finalize(q, None, error=reason)
        except Exception:
            log.exception("ragmeter: LlamaIndex span_drop failed")

    # ---------------------------------------------------------------- events

    def on_event(self, event: Any) -> None:
        sid = getattr(event, "span_id", None)
        root = self.span_root.get(sid) if sid else None
        if root is None:
            root = _STREAM_ROOT.get()
            if root is None:
                return
        q = self.open.get(root)
        if q is None:
            return
        try:
            self._apply(q, event, sid)
        except Exception:
            log.exception("ragmeter: could not read LlamaIndex event %s", type(event).__name__)

    def _apply(self, q: _Query, event: Any, sid: Optional[str]) -> None:
        now = time.perf_counter()
        if isinstance(event, QueryStartEvent):
            if sid == q.root_id:
                q.question = _query_text(event.query) or q.question
                if event.tags:
                    q.tags.update(_jsonable(dict(event.tags)))
        elif isinstance(event, QueryEndEvent):
            if sid == q.root_id:
                q.response = event.response
        elif isinstance(event, RetrievalStartEvent):
            if q.t_retr0 is None:
                q.t_retr0 = now
        elif isinstance(event, RetrievalEndEvent):
            q.t_retr1 = now
            q.retrieved.extend(event.nodes or [])
        elif isinstance(event, ReRankEndEvent):
            q.t_rerank1 = now
            q.reranked = list(event.nodes or [])
        elif isinstance(event, SynthesizeStartEvent):
            if q.t_synth0 is None:
                q.t_synth0 = now
        elif isinstance(event, SynthesizeEndEvent):
            q.t_synth1 = now
        elif isinstance(event, (LLMChatStartEvent, LLMCompletionStartEvent)):
            if sid is not None:
                # a call made inside another LLM call (CustomLLM.acomplete -> complete) is the same
                # call; while a stream is consumed the inner span has no parent, so any open call counts
                if self._inside_llm_call(q, sid) or (q.streaming and q.llm_open - {sid}):
                    q.llm_nested.add(sid)
                q.llm_open.add(sid)
            md = event.model_dict or {}
            model = md.get("model") or md.get("model_name")
            if model and str(model) not in q.models:
                q.models.append(str(model))
        elif isinstance(event, (LLMChatInProgressEvent, LLMCompletionInProgressEvent)):
            if q.streaming and q.t_first_token is None:
                q.t_first_token = now
        elif isinstance(event, (LLMChatEndEvent, LLMCompletionEndEvent)):
            q.llm_open.discard(sid)
            if sid in q.llm_nested:
                return  # the outer call reports it
            q.llm_calls += 1
            usage = _usage_of(event.response)
            if usage is not None:
                q.usage_reported = True
                q.prompt_tokens += usage[0]
                q.completion_tokens += usage[1]

    @staticmethod
    def _inside_llm_call(q: _Query, sid: str) -> bool:
        parent = q.span_ids.get(sid)
        for _ in range(64):
            if parent is None:
                return False
            if parent in q.llm_open:
                return True
            parent = q.span_ids.get(parent)
        return False

    # ---------------------------------------------------------------- completion

    def _query_returned(self, q: _Query, response: Any) -> None:
        q.t_end = time.perf_counter()
        q.response = None  # keep no reference: an abandoned stream must be garbage-collectable
        nodes = list(getattr(response, "source_nodes", None) or [])
        q.nodes = nodes
        unread = getattr(response, "response_txt", "") is None and getattr(response, "response_gen", None) is not None
        if isinstance(response, StreamingResponse) and unread:
            q.streaming = True
            tap = _tap_stream(self, q, response.response_gen)
            weakref.finalize(tap, self._stream_dropped, q.root_id)
            response.response_gen = tap
            return
        if isinstance(response, AsyncStreamingResponse) and unread:
            q.streaming = True
            atap = _atap_stream(self, q, response.response_gen)
            weakref.finalize(atap, self._stream_dropped, q.root_id)
            response.response_gen = atap
            return
        self.finalize(q, _response_text(response))

    def stream_first_token(self, q: _Query) -> None:
        if q.t_first_token is None:
            q.t_first_token = time.perf_counter()

    def stream_done(self, q: _Query, text: str) -> None:
        q.t_end = time.perf_counter()
        self.finalize(q, text)

    def stream_incomplete(self, q: _Query, text: str, reason: str, error: Optional[str] = None) -> None:
        q.t_end = time.perf_counter()
        self.finalize(q, None, partial_text=text, partial_reason=reason, error=error)

    def _stream_dropped(self, root_id: str) -> None:
        q = self.open.get(root_id)
        if q is not None:
            self.stream_incomplete(q, "", "the streaming response was discarded before its stream was consumed")

    def _maybe_sweep(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep < 1.0:
            return
        self._last_sweep = now
        self.sweep()

    def sweep(self, force: bool = False) -> None:
        """Finalize streams left unconsumed longer than ``stream_timeout`` (all with ``force``) as
        partial, and evict the oldest open queries beyond ``max_open``."""
        timeout = self.owner.stream_timeout
        now = time.perf_counter()
        with self.lock:
            queries = list(self.open.values())
        for q in queries:
            if q.streaming and q.t_end is not None and (force or now - q.t_end > timeout):
                self.stream_incomplete(q, "", "the stream was not consumed within stream_timeout"
                                       if not force else "the stream was still open when capture was closed")
        with self.lock:
            excess = len(self.open) - self.owner.max_open
            oldest = sorted(self.open.values(), key=lambda x: x.t0)[:excess] if excess > 0 else []
        for q in oldest:
            self.finalize(q, None, partial_reason="evicted: too many queries still open (max_open)")

    def finalize(self, q: _Query, answer: Optional[str], *, error: Optional[str] = None,
                 partial_text: Optional[str] = None, partial_reason: Optional[str] = None) -> None:
        """Turn a finished query into a Sample; score it unless it failed or is partial."""
        with self.lock:
            if self.open.pop(q.root_id, None) is None:
                return  # already finalized (stream finished after a timeout, finalizer after close ...)
            for sid in q.span_ids:
                self.span_root.pop(sid, None)
        self.owner._record(q, answer, error=error, partial_text=partial_text, partial_reason=partial_reason)


def _tap_stream(capture: _Capture, q: _Query, inner: Any):
    """A pass-through token generator that reports the full text (or its abandonment) to the capture."""
    parts: list[str] = []
    try:
        while True:
            token = _STREAM_ROOT.set(q.root_id)
            try:
                item = next(inner)
            except StopIteration:
                break
            finally:
                _STREAM_ROOT.reset(token)
            if not parts:
                capture.stream_first_token(q)
            parts.append(item if isinstance(item, str) else str(item))
            yield item
    except GeneratorExit:
        capture.stream_incomplete(q, "".join(parts), "the stream was closed before its end")
        try:
            inner.close()
        except Exception:
            pass
        raise
    except BaseException as err:
        capture.stream_incomplete(q, "".join(parts), "the stream raised", error=f"{type(err).__name__}: {err}")
        raise
    capture.stream_done(q, "".join(parts))


async def _atap_stream(capture: _Capture, q: _Query, inner: Any):
    """Async twin of :func:`_tap_stream` for ``AsyncStreamingResponse``."""
    parts: list[str] = []
    try:
        while True:
            token = _STREAM_ROOT.set(q.root_id)
            try:
                item = await inner.__anext__()
            except StopAsyncIteration:
                break
            finally:
                _STREAM_ROOT.reset(token)
            if not parts:
                capture.stream_first_token(q)
            parts.append(item if isinstance(item, str) else str(item))
            yield item
    except GeneratorExit:
        capture.stream_incomplete(q, "".join(parts), "the stream was closed before its end")
        raise
    except BaseException as err:
        capture.stream_incomplete(q, "".join(parts), "the stream raised", error=f"{type(err).__name__}: {err}")
        raise
    capture.stream_done(q, "".join(parts))


def _dedup_nodes(nodes: Sequence[Any]) -> list:
    seen: set = set()
    out = []
    for n in nodes:
        nid = getattr(getattr(n, "node", n), "node_id", None) or id(n)
        if nid in seen:
            continue
        seen.add(nid)
        out.append(n)
    return out


def _as_judge(judge: Any) -> Any:
    """A LlamaIndex LLM given as the judge becomes a :class:`~ragmeter.judges.LlamaIndexJudge`."""
    from llama_index.core.base.llms.base import BaseLLM

    if isinstance(judge, BaseLLM):
        from ..judges.llamaindex import LlamaIndexJudge

        return LlamaIndexJudge(judge)
    return judge


def _as_embedder(embedder: Any) -> Any:
    """A LlamaIndex embedding model becomes a :class:`~ragmeter.judges.LlamaIndexEmbedder`."""
    from llama_index.core.base.embeddings.base import BaseEmbedding

    if isinstance(embedder, BaseEmbedding):
        from ..judges.llamaindex import LlamaIndexEmbedder

        return LlamaIndexEmbedder(embedder)
    return embedder


class RagmeterInstrumentation:
    """Capture every LlamaIndex query as a :class:`~ragmeter.Sample` and score it off the request path.

    ``metrics`` / ``judge`` / ``embedder`` are what :func:`ragmeter.evaluate` takes (``judge`` may
    also be a spec such as ``"offline"`` or a LlamaIndex LLM, wrapped in
    :class:`~ragmeter.judges.LlamaIndexJudge`). ``mode="inline"`` scores each finished query on a
    :class:`ragmeter.inline.BackgroundScorer` worker: a bounded backlog (``max_queue``; full means
    dropped and counted, never blocking), ``sample_rate`` and ``should_score(sample) -> True |
    False | None`` choose what is scored, ``on_result(SampleResult)`` runs on the worker.
    ``mode="offline"`` only captures: :meth:`export_jsonl` writes the samples for
    ``ragmeter evaluate``, :meth:`evaluate` scores them in one go.

    Register with :meth:`attach` (or ``with RagmeterInstrumentation(...) as meter:``), remove with
    :meth:`detach`. A query is the outermost ``query`` / ``aquery`` of a query engine (query
    engines called inside it are part of it); LlamaIndex's span ids keep concurrent queries
    apart. Contexts are the response's source nodes (node id, retriever score, metadata). Ground
    truth rides along in LlamaIndex's ``instrument_tags({"reference": ..., "relevant_ids": [...],
    "sample_id": ...})``.

    Streaming responses reach the end of ``query()`` before their text exists: ragmeter wraps
    ``response_gen`` in a pass-through generator and records the sample when the stream ends. A
    stream discarded unread, closed early, or left unconsumed for ``stream_timeout`` seconds is
    recorded as ``"partial"`` (text so far in ``metadata["partial_answer"]``) and not scored. A query
    that raises is recorded as ``"error"`` and not scored; one with no retrieved context is
    recorded and not scored (``skipped_no_contexts``).

    With ``attach_to_trace`` and an OpenTelemetry SDK tracer provider (the global one, or
    ``tracer_provider``), each result is written as an evaluation span into the trace whose span
    was active when the query started (see TRACING.md).
    """

    def __init__(self, metrics: Iterable[Any] | None = None, judge: Any = None, *, mode: str = "inline",
                 embedder: Any = None, sample_rate: float = 1.0,
                 should_score: Callable[[Sample], Optional[bool]] | None = None,
                 on_result: Callable[[SampleResult], None] | None = None, max_queue: int = 1000,
                 concurrency: int = 4, keep: Optional[int] = 10_000, stream_timeout: float = 600.0,
                 attach_to_trace: bool = True, tracer_provider: Any = None, dispatcher: Any = None):
        self._trace = TraceLink(tracer_provider)
        self._recorder = CaptureRecorder(
            resolve_metrics(metrics), _as_judge(judge), mode=mode, embedder=_as_embedder(embedder),
            sample_rate=sample_rate, should_score=should_score, on_result=on_result, max_queue=max_queue,
            concurrency=concurrency, keep=keep, write_trace=self._trace.write, name="ragmeter-llamaindex")
        self.mode = mode
        self.stream_timeout = float(stream_timeout)
        self.max_open = 10_000
        self.attach_to_trace = attach_to_trace
        self._capture = _Capture(self)
        self._span_handler = _SpanTracker(self._capture)
        self._event_handler = _EventSink(self._capture)
        self._dispatcher = dispatcher
        self._attached_to: Any = None

    def __repr__(self) -> str:
        return (f"RagmeterInstrumentation(mode={self.mode!r}, attached={self.attached}, "
                f"captured={self._recorder.stats['captured']})")

    @property
    def metrics(self) -> list[Metric]:
        """The metrics scored (resolved: the defaults when none were given)."""
        return self._recorder.metrics

    @property
    def judge(self) -> Any:
        """The judge as given (a LlamaIndex LLM wrapped in a LlamaIndexJudge)."""
        return self._recorder.judge

    @property
    def embedder(self) -> Any:
        """The embedder as given (a LlamaIndex embedding model wrapped in a LlamaIndexEmbedder)."""
        return self._recorder.embedder

    @property
    def scorer(self) -> BackgroundScorer | None:
        """The background scorer (inline mode), or None (offline mode)."""
        return self._recorder.scorer

    # ---------------------------------------------------------------- lifecycle

    def attach(self) -> "RagmeterInstrumentation":
        """Register the span and event handlers on LlamaIndex's root dispatcher (or the
        ``dispatcher`` given); returns self."""
        if self._attached_to is None:
            d = self._dispatcher if self._dispatcher is not None else get_dispatcher()
            d.add_span_handler(self._span_handler)
            d.add_event_handler(self._event_handler)
            self._attached_to = d
        return self

    def detach(self) -> None:
        """Unregister the handlers: later queries are not captured. Streams already returned still
        record their sample when consumed; pending scoring continues (see :meth:`flush`)."""
        d = self._attached_to
        if d is None:
            return
        # by identity: pydantic models compare equal field by field
        d.span_handlers = [h for h in d.span_handlers if h is not self._span_handler]
        d.event_handlers = [h for h in d.event_handlers if h is not self._event_handler]
        self._attached_to = None

    @property
    def attached(self) -> bool:
        """True while the handlers are registered."""
        return self._attached_to is not None

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every queued sample is scored (inline mode); False if ``timeout`` seconds
        passed first. Streams unconsumed for ``stream_timeout`` are recorded as partial first."""
        self._capture.sweep()
        return self._recorder.flush(timeout)

    def shutdown(self, timeout: Optional[float] = None) -> bool:
        """Detach, record streams still open as partial, wait for pending scoring (up to
        ``timeout``) and stop the worker. Interpreter exit waits for pending scoring on its own."""
        self.detach()
        self._capture.sweep(force=True)
        return self._recorder.shutdown(timeout)

    def __enter__(self) -> "RagmeterInstrumentation":
        return self.attach()

    def __exit__(self, *exc: Any) -> None:
        """Detach and wait for pending scoring."""
        self.detach()
        self.flush()

    # ---------------------------------------------------------------- results

    @property
    def samples(self) -> list[Sample]:
        """Every captured query in capture order (the last ``keep``), failed and partial ones
        included: ``metadata["status"]`` is ``"ok"``, ``"error"`` or ``"partial"``."""
        return self._recorder.samples

    @property
    def results(self) -> RagmeterEvaluationRun:
        """What has been scored so far (inline worker and :meth:`evaluate`) as a
        :class:`ragmeter.EvaluationResult` in query start order: iterate it, index it, call
        ``summary()`` / ``problems()`` / ``to_pandas()``. Call :meth:`flush` first to include
        pending work."""
        return self._recorder.results

    @property
    def stats(self) -> dict[str, int]:
        """Counters. Capture: ``captured``, ``ok``, ``errored``, ``partial``,
        ``skipped_no_contexts`` (recorded, not scored), ``capture_errors``, ``open`` (queries and
        streams in progress). Scoring: ``submitted``, ``queued``, ``scored``, ``dropped`` (backlog
        full), ``sampled_out``, ``forced`` (by ``should_score``), ``rejected_closed``, ``failed``,
        ``callback_errors``, ``pending``; and ``trace_writes`` / ``trace_errors``."""
        out = self._recorder.stats
        out["open"] = len(self._capture.open)
        return out

    def export_jsonl(self, path: Any, *, statuses: Iterable[str] = ("ok",)) -> int:
        """Write the captured samples whose status is in ``statuses`` to a JSONL file that
        ``ragmeter evaluate`` / :func:`ragmeter.load_samples` read; returns how many were written."""
        return self._recorder.export_jsonl(path, statuses=statuses)

    def evaluate(self, **kwargs: Any) -> RagmeterEvaluationRun:
        """Offline mode: score the samples captured since the last call (status ok, with
        contexts) in one go with this instance's metrics and judge; ``kwargs`` go to
        :func:`ragmeter.evaluate`. Results are added to :attr:`results` and written to the query's
        trace when one was active."""
        return self._recorder.evaluate(**kwargs)

    # ---------------------------------------------------------------- internals

    def _metadata(self, q: _Query, contexts: list[Context]) -> dict:
        def span(a: Optional[float], b: Optional[float]) -> Optional[float]:
            return round(b - a, 6) if a is not None and b is not None and b >= a else None

        latency = {
            "total_s": span(q.t0, q.t_end),
            "retrieval_s": span(q.t_retr0, q.t_retr1),
            "rerank_s": span(q.t_retr1, q.t_rerank1),
            "generation_s": span(q.t_synth0, q.t_end if q.streaming else q.t_synth1),
            "first_token_s": span(q.t0, q.t_first_token) if q.streaming else None,
        }
        md: dict[str, Any] = {
            "source": "llamaindex",
            "query_span_id": q.root_id,
            "engine": q.engine,
            "started_at": q.started_at,
            "streaming": q.streaming,
            "latency": {k: v for k, v in latency.items() if v is not None},
            "llm_calls": q.llm_calls,
        }
        if q.models:
            md["models"] = list(q.models)
        if q.usage_reported:
            md["token_usage"] = {"prompt": q.prompt_tokens, "completion": q.completion_tokens,
                                 "total": q.prompt_tokens + q.completion_tokens}
        ids = (getattr(getattr(n, "node", n), "node_id", None) for n in _dedup_nodes(q.retrieved))
        retrieved = [str(i) for i in ids if i is not None]
        if retrieved and retrieved != [c.id for c in contexts]:
            md["retrieved_ids"] = retrieved  # before postprocessing / reranking
        if q.reranked is not None:
            md["reranked"] = True
        target = q.target
        if target is not None:
            md["trace"] = trace_metadata(target)
        extra = {k: v for k, v in q.tags.items() if k not in (REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY)}
        if extra:
            md["tags"] = extra
        return md

    def _record(self, q: _Query, answer: Optional[str], *, error: Optional[str], partial_text: Optional[str],
                partial_reason: Optional[str]) -> None:
        try:
            nodes = q.nodes or q.reranked or _dedup_nodes(q.retrieved)
            contexts = [_node_context(n) for n in nodes or []]
            md = self._metadata(q, contexts)
            if partial_reason is not None:
                status = "partial"
                md["partial_reason"] = partial_reason
                if error:
                    md["error"] = error
                if partial_text:
                    md["partial_answer"] = partial_text
            elif error is not None:
                status = "error"
                md["error"] = error
            else:
                status = "ok"
            md["status"] = status
            question = q.question or ""
            given_id = q.tags.get(SAMPLE_ID_KEY)
            sample_id = str(given_id) if given_id not in (None, "") else _id_from_span(q.root_id)
            truth = {"reference": q.tags.get(REFERENCE_KEY), "relevant_ids": q.tags.get(RELEVANT_KEY)}
            if truth["reference"] is not None and not isinstance(truth["reference"], str):
                truth["reference"] = str(truth["reference"])
            answer = answer if status == "ok" else None
            try:
                sample = Sample(question, contexts, answer=answer, id=sample_id, metadata=md, **truth)
            except RecordError as err:
                if "question" in str(err.field or ""):
                    raise
                md["capture_warning"] = str(err)  # bad ground truth in the tags: keep the query
                sample = Sample(question, contexts, answer=answer, id=sample_id, metadata=md)
        except Exception as err:
            self._recorder.count("capture_errors")
            log.warning("ragmeter: could not capture LlamaIndex query %s: %s", q.root_id, err)
            return
        # a trace is sampled in or out as a whole: its id is the sample_rate key
        key = md["trace"]["trace_id"] if q.target is not None else None
        self._recorder.record(sample, q.target, key=key)
