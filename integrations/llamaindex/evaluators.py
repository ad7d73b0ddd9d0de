"""Internal: ragmeter metrics as LlamaIndex evaluators (usable in ``BatchEvalRunner``).

:class:`RagmeterEvaluator` scores one metric; the one-metric classes
(``RagmeterFaithfulnessEvaluator`` ...) are generated from :data:`ragmeter.metrics.REGISTRY`, one
per judged metric, named ``Ragmeter<Class>Evaluator``: registering a metric adds its evaluator.
Scoring is :func:`ragmeter.metrics.scoring.score_sample`; an evaluator never raises
(``BatchEvalRunner`` retries raising evaluators with back-off): a score that could not be computed
comes back with ``invalid_result=True`` and the reason.

``BatchEvalRunner`` calls each evaluator separately on the same query and response. So that a
sample still costs one judge call per task, evaluators share their judge through
:func:`ragmeter.sharing.share_judge` (``share=True``), and a judge given as a spec string is
resolved once per process (:data:`_SPEC_JUDGES`).
"""

from __future__ import annotations

import collections
import inspect
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.evaluation import BaseEvaluator, EvaluationResult

from ragmeter.data import RecordError, Sample, Score
from ragmeter.guard import never_raise
from ragmeter.integrations.llamaindex.nodes import _as_embedder, _as_judge, _contexts_from, _response_text
from ragmeter.judges.base import Embedder, Judge
from ragmeter.judges.spec import resolve_judge
from ragmeter.loops import run_sync
from ragmeter.metrics import REGISTRY, Metric, get_metric, load_plugins, metric_class, resolve_metrics
from ragmeter.metrics.scoring import SampleResult, score_sample
from ragmeter.sharing import share_embedder, share_judge

__all__ = [
    "RagmeterEvaluator",
    "RagmeterEvaluationResult",
    "make_evaluators",
    "evaluator_classes",
    "EVALUATOR_CLASSES",  # noqa: F822 (made on first access, module __getattr__)
    "QUERY_OPTIONAL",  # noqa: F822
]

#: Judges resolved from a spec (``"offline"``, ``"openai:gpt-4o-mini"``; ``"<default>"`` for
#: None), so that evaluators built separately from the same spec use one judge and share its
#: work. Process-wide and bounded: the :data:`_MAX_SPECS` most recently used specs are kept.
_SPEC_JUDGES: collections.OrderedDict[str, Judge | None] = collections.OrderedDict()
_MAX_SPECS = 16
_SPEC_LOCK = threading.Lock()


def _judge_for(judge: Any, metrics: Sequence[Metric]) -> Judge | None:
    """The judge for ``metrics``: None when none of them needs one; a spec (or None for the
    default judge) resolved once per process (see :data:`_SPEC_JUDGES`); a Judge as given."""
    if not any(m.uses_judge for m in metrics):
        return None
    if judge is not None and not isinstance(judge, str):
        return judge
    spec = "<default>" if judge is None else judge
    with _SPEC_LOCK:
        if spec in _SPEC_JUDGES:
            _SPEC_JUDGES.move_to_end(spec)
            return _SPEC_JUDGES[spec]
    resolved = resolve_judge(judge, metrics)
    with _SPEC_LOCK:
        resolved = _SPEC_JUDGES.setdefault(spec, resolved)
        while len(_SPEC_JUDGES) > _MAX_SPECS:
            _SPEC_JUDGES.popitem(last=False)
        return resolved


class RagmeterEvaluationResult(EvaluationResult):
    """A LlamaIndex ``EvaluationResult`` carrying the full ragmeter Score.

    ``score`` is the metric value in [0, 1] (None when it could not be computed), ``passing`` is
    True when the ragmeter label is ``"pass"`` (False for warn / fail), ``feedback`` the
    explanation. When there is no value, ``invalid_result`` is True and ``invalid_reason`` says
    why (the error, or why the metric does not apply). ``metric``, ``label``, ``judge``,
    ``error``, ``details`` (claims, verdicts, per-chunk scores, judge usage) and ``sample_id``
    come from the ragmeter Score; :attr:`ragmeter_score` rebuilds it.
    """

    metric: str | None = None
    label: str | None = None
    judge: str | None = None
    error: str | None = None
    details: dict[str, Any] = {}
    sample_id: str | None = None
    usage: dict[str, Any] | None = None

    @property
    def ragmeter_score(self) -> Score | None:
        """The ragmeter :class:`~ragmeter.Score` behind this result (None if scoring never ran)."""
        if self.metric is None or (self.score is None and not (self.error or self.feedback)):
            return None
        return Score(
            self.metric,
            self.score,
            explanation=self.feedback or "",
            details=dict(self.details),
            error=self.error,
            judge=self.judge,
            label=self.label,
        )


def _scored(sample: Sample, score: Score, result: SampleResult) -> RagmeterEvaluationResult:
    """The evaluation result of ``score`` on ``sample`` (``result``: the scoring run, for its usage)."""
    reason = None
    if score.value is None:
        reason = score.error or score.explanation or "no value"
    return RagmeterEvaluationResult(
        query=sample.question or None,
        response=sample.answer,
        contexts=sample.context_texts,
        passing=score.passed,
        score=score.value,
        feedback=score.explanation or None,
        invalid_result=score.value is None,
        invalid_reason=reason,
        metric=score.metric,
        label=score.label,
        judge=score.judge,
        error=score.error,
        details=score.details,
        sample_id=sample.id,
        usage=result.usage.to_dict(),
    )


def _invalid(
    metric: str, reason: str, query: Any = None, response: Any = None, contexts: Any = None
) -> RagmeterEvaluationResult:
    """A result without a value: ``reason`` says why (what could be read of the input is kept)."""
    return RagmeterEvaluationResult(
        query=query if isinstance(query, str) else None,
        response=response if isinstance(response, str) else None,
        contexts=[c for c in contexts if isinstance(c, str)] if isinstance(contexts, (list, tuple)) else None,
        passing=None,
        score=None,
        feedback=None,
        invalid_result=True,
        invalid_reason=reason,
        metric=metric,
        error=reason,
    )


class RagmeterEvaluator(BaseEvaluator):
    """A ragmeter metric as a LlamaIndex evaluator.

    ``metric`` is a metric name (``"faithfulness"``, ``"ndcg@10"`` ...) or a Metric instance;
    ``judge`` a Judge, a spec (``"offline"``, ``"openai:gpt-4o-mini"``), a LlamaIndex LLM or None
    for ragmeter's default judge; ``threshold`` / ``warn`` override the metric's pass / warn levels.

    ``aevaluate(query, response, contexts, reference=None, relevant_ids=None, sample_id=None)``
    takes strings (``query`` may be left out for a metric that does not read the question, such
    as faithfulness: :attr:`~ragmeter.metrics.base.Metric.needs_question`, LlamaIndex's own
    FaithfulnessEvaluator takes none either) (contexts may also be NodeWithScore / nodes / dicts
    with ids);
    ``aevaluate_response(query, response)`` takes the Response of a query engine and keeps the
    source nodes' ids and scores. Both return a :class:`RagmeterEvaluationResult` and never raise.

    With ``share=True`` (default) evaluators built on the same judge share judge work: a task
    needed by several metrics of the same sample (claims for faithfulness, citation accuracy and
    answer correctness) runs once even when ``BatchEvalRunner`` calls the evaluators separately.
    """

    metric_name: str | None = None

    def __init__(
        self,
        metric: str | Metric | None = None,
        judge: Judge | str | None = None,
        *,
        embedder: Embedder | None = None,
        threshold: float | None = None,
        warn: float | None = None,
        share: bool = True,
    ):
        spec = metric if metric is not None else self.metric_name
        if spec is None:
            raise TypeError("RagmeterEvaluator needs a metric (a name such as 'faithfulness' or a Metric)")
        self.metric = get_metric(spec).with_levels(threshold, warn)
        judge_obj = _judge_for(_as_judge(judge), [self.metric])
        embedder = _as_embedder(embedder)
        self.judge = share_judge(judge_obj) if share else judge_obj
        self.embedder = share_embedder(embedder) if share else embedder

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

    async def aevaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        reference: str | None = None,
        *,
        relevant_ids: Any = None,
        sample_id: str | None = None,
        metadata: dict | None = None,
        **kwargs: Any,
    ) -> RagmeterEvaluationResult:
        """Score one query / response / contexts (plus ``reference`` and ``relevant_ids`` for the
        metrics that need them). Extra LlamaIndex kwargs (``sleep_time_in_seconds`` ...) are ignored."""
        sample: Sample | None = None
        failure: list[BaseException] = []
        no_query = not self.metric.needs_question and (query is None or (isinstance(query, str) and not query.strip()))
        with never_raise("LlamaIndex evaluator: reading the input", on_error=failure.append):
            try:
                sample = Sample(
                    question="(no query)" if no_query else query if query is not None else "",
                    contexts=_contexts_from(contexts),
                    answer=response,
                    reference=reference,
                    relevant_ids=relevant_ids,
                    id=sample_id,
                    metadata=dict(metadata or {}, source="llamaindex.evaluator"),
                )
                if no_query:  # validated with a stand-in; the metric and the judge see no question
                    sample.question = ""
            except RecordError as err:  # the caller's input: said on the result, not logged
                failure.append(err)
        if sample is None:
            return _invalid(self.metric.name, f"invalid input: {failure[0]}", query, response, contexts)
        return await self._score(sample)

    async def aevaluate_response(
        self, query: str | None = None, response: Any = None, **kwargs: Any
    ) -> RagmeterEvaluationResult:
        """Score a query engine's Response: its text and its source nodes (ids and scores kept)."""
        read: tuple[str | None, list] | None = None
        failure: list[BaseException] = []
        with never_raise("LlamaIndex evaluator: reading the response", on_error=failure.append):
            read = await _read_response(response)
        if read is None:
            err = failure[0]
            return _invalid(self.metric.name, f"could not read the response: {type(err).__name__}: {err}", query)
        text, nodes = read
        contexts = kwargs.pop("contexts", None) or nodes
        return await self.aevaluate(query=query, response=text, contexts=contexts, **kwargs)

    def evaluate(
        self,
        query: str | None = None,
        response: str | None = None,
        contexts: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> RagmeterEvaluationResult:
        """Synchronous :meth:`aevaluate` (also inside a running event loop)."""
        return run_sync(self.aevaluate(query=query, response=response, contexts=contexts, **kwargs))

    def evaluate_response(
        self, query: str | None = None, response: Any = None, **kwargs: Any
    ) -> RagmeterEvaluationResult:
        """Synchronous :meth:`aevaluate_response` (also inside a running event loop)."""
        return run_sync(self.aevaluate_response(query=query, response=response, **kwargs))

    async def _score(self, sample: Sample) -> RagmeterEvaluationResult:
        failure: list[BaseException] = []
        # score_sample never raises; the guard keeps BatchEvalRunner from retrying if it ever did
        with never_raise("LlamaIndex evaluator: scoring", on_error=failure.append):
            result = await score_sample(sample, [self.metric], self.judge, self.embedder)
            return _scored(sample, result.scores[self.metric.name], result)
        err = failure[0]
        return _invalid(
            self.metric.name,
            f"{type(err).__name__}: {err}",
            sample.question or None,
            sample.answer,
            sample.context_texts,
        )


async def _read_response(response: Any) -> tuple[str | None, list]:
    """The answer text and source nodes of a query engine's response (a stream is read to its end)."""
    if response is None:
        return None, []
    nodes = list(getattr(response, "source_nodes", None) or [])
    if isinstance(response, AsyncStreamingResponse):
        return (await response.get_response()).response, nodes
    if isinstance(response, StreamingResponse):
        return response.get_response().response, nodes
    return _response_text(response), nodes


class _NamedEvaluator(RagmeterEvaluator):
    """Base of the one-metric evaluator classes: ``Cls(judge=None, *, embedder=None,
    threshold=None, warn=None, share=True, **metric_options)``; ``metric_options`` go to the
    metric class (e.g. ``RagmeterFaithfulnessEvaluator(judge, mode="not_contradicted")``)."""

    def __init__(
        self,
        judge: Judge | str | None = None,
        *,
        embedder: Embedder | None = None,
        threshold: float | None = None,
        warn: float | None = None,
        share: bool = True,
        **metric_options: Any,
    ):
        assert self.metric_name is not None
        metric = metric_class(self.metric_name)(threshold=threshold, warn=warn, **metric_options)
        super().__init__(metric, judge, embedder=embedder, share=share)


def _evaluator_class(name: str) -> type[RagmeterEvaluator]:
    """``Ragmeter<Class>Evaluator`` for the registered metric ``name``; its docstring is the
    metric class's summary."""
    cls = metric_class(name)
    class_name = f"Ragmeter{REGISTRY[name][1]}Evaluator"
    summary = " ".join((inspect.getdoc(cls) or name).split("\n\n")[0].split())
    doc = (
        f"{summary}\n\nThe ``{name}`` metric as a LlamaIndex evaluator: ``{class_name}(judge=None, *, "
        f"embedder=None, threshold=None, warn=None, share=True, **metric_options)``, the options going "
        f"to :class:`{cls.__module__}.{cls.__name__}`."
    )
    return type(
        class_name,
        (_NamedEvaluator,),
        {"__doc__": doc, "__module__": __name__, "__qualname__": class_name, "metric_name": name},
    )


_EVALUATORS: dict[str, type[RagmeterEvaluator]] = {}


def evaluator_classes() -> dict[str, type[RagmeterEvaluator]]:
    """The one-metric evaluator classes by metric name, one per :data:`ragmeter.metrics.REGISTRY`
    entry, plugins included (a metric registered later gets its class when next asked; a class, once
    made, stays)."""
    load_plugins()
    for name in REGISTRY:
        if name not in _EVALUATORS:
            _EVALUATORS[name] = _evaluator_class(name)
    return {name: _EVALUATORS[name] for name in REGISTRY}


def __getattr__(name: str) -> Any:
    """``EVALUATOR_CLASSES`` (:func:`evaluator_classes`), ``QUERY_OPTIONAL`` (the registered metrics
    that need no question) and the ``Ragmeter<Class>Evaluator`` classes, read from the registry
    when asked."""
    if name == "EVALUATOR_CLASSES":
        return evaluator_classes()
    if name == "QUERY_OPTIONAL":
        return frozenset(n for n in REGISTRY if not metric_class(n).needs_question)
    for cls in evaluator_classes().values():
        if cls.__name__ == name:
            return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ += [c.__name__ for c in evaluator_classes().values()]


def make_evaluators(
    metrics: Iterable[Any] | None = None,
    judge: Judge | str | None = None,
    *,
    embedder: Embedder | None = None,
    share: bool = True,
) -> dict[str, RagmeterEvaluator]:
    """``{metric name: evaluator}`` for ``BatchEvalRunner(evaluators=...)``.

    ``metrics`` are names or Metric instances (default: ragmeter's default metrics); the judge is
    resolved once and, with ``share=True``, its task answers are shared between the evaluators.
    """
    metric_list = resolve_metrics(metrics)
    judge_obj = _judge_for(_as_judge(judge), metric_list)
    embedder = _as_embedder(embedder)
    return {m.name: RagmeterEvaluator(m, judge_obj, embedder=embedder, share=share) for m in metric_list}
