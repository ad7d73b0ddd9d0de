"""Internal: Inline capture of every LlamaIndex query through LlamaIndex's instrumentation module.

:class:`RagmeterInstrumentation` registers the span and event handlers of
:mod:`ragmeter.integrations.llamaindex.spans` and turns each finished query into a
:class:`~ragmeter.Sample` (contexts, answer, latency, tokens, ground truth from
``instrument_tags``). Keeping, counting and scoring is done by the core
(:class:`ragmeter.capture.CaptureRecorder`); writing results into the caller's trace by
:class:`ragmeter.integrations._tracing.TraceLink`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, cast

from llama_index.core.instrumentation import get_dispatcher

from ragmeter.capture import REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY, CaptureRecorder
from ragmeter.conversations import NO_RETRIEVAL_KEY
from ragmeter.data import Context, RecordError, Sample
from ragmeter.guard import never_raise
from ragmeter.inline import BackgroundScorer
from ragmeter.integrations._tracing import TraceLink, trace_metadata
from ragmeter.integrations.llamaindex.chat import turn_fields
from ragmeter.integrations.llamaindex.nodes import _as_embedder, _as_judge, _dedup_nodes, _node_context
from ragmeter.integrations.llamaindex.spans import _Capture, _EventSink, _Query, _SpanTracker
from ragmeter.metrics import Metric, resolve_metrics
from ragmeter.metrics.scoring import SampleResult
from ragmeter.redact import redact, redact_value
from ragmeter.result import EvaluationResult as RagmeterEvaluationRun

__all__ = ["RagmeterInstrumentation"]


def _id_from_span(span_id: str) -> str:
    """A sample id from a root query's span id."""
    # LlamaIndex span ids read "RetrieverQueryEngine.query-<uuid4>"; the uuid is unique per query.
    _, _, rest = span_id.partition("-")
    return (rest or span_id).replace("-", "")[:16]


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

    Chat engines (condense-question, context, condense-plus-context) and agents with a query-engine
    or retriever tool are captured turn by turn (see :mod:`ragmeter.integrations.llamaindex.chat`):
    one Sample per ``chat`` / ``achat`` / ``stream_chat`` / ``astream_chat`` or agent ``run``, with
    ``conversation_id``, ``turn``, ``history`` and the condensed ``standalone_question``; the query
    engines and tools called inside a turn are part of it. A streamed turn is recorded when
    LlamaIndex has consumed its stream, with the full text. A turn in which no retriever ran is
    recorded with no contexts and ``metadata["no_retrieval"] = True``; inline, ``on_result`` also
    receives it, unscored (``scores`` empty), so that a :class:`ragmeter.Monitor` counts it in its
    no-retrieval rate (subject to ``sample_rate``, as scored samples are).

    With ``attach_to_trace`` and an OpenTelemetry SDK tracer provider (the global one, or
    ``tracer_provider``), each result is written as an evaluation span into the trace whose span
    was active when the query started (see TRACING.md).

    The tags other than the ground truth go to ``metadata["tags"]``, and node metadata to each
    context, through :func:`ragmeter.redact.redact_value` (credentials masked); error texts are
    redacted. ``capture_content=False`` (default: ``RAGMETER_CAPTURE_CONTENT``, else True) scores
    each query as captured, in memory, but keeps and writes no content: the samples
    (:attr:`samples`, :meth:`export_jsonl`, ``result.sample``) and the results' scores are
    :func:`ragmeter.capture.without_content` copies, so the store, the evaluation spans and the
    log carry no question, chunk, answer, claim, quote or explanation (:mod:`ragmeter.privacy`). The query's thread only hands the finished query over; the Sample is
    built on the capture thread.

    ``store`` (a :class:`ragmeter.store.Store`, a SQLite path or a ``postgresql://`` URL; None:
    off) records every result in the store as an inline sample of source ``"llamaindex"`` (as the
    result carries it), written by a background thread; ``stats`` count ``store_written``,
    ``store_dropped`` and ``store_errors``.
    """

    def __init__(
        self,
        metrics: Iterable[Any] | None = None,
        judge: Any = None,
        *,
        mode: str = "inline",
        embedder: Any = None,
        sample_rate: float = 1.0,
        should_score: Callable[[Sample], bool | None] | None = None,
        on_result: Callable[[SampleResult], None] | None = None,
        max_queue: int = 1000,
        concurrency: int = 4,
        keep: int | None = 10_000,
        stream_timeout: float = 600.0,
        attach_to_trace: bool = True,
        tracer_provider: Any = None,
        dispatcher: Any = None,
        capture_content: bool | None = None,
        store: Any = None,
    ):
        self._trace = TraceLink(tracer_provider)
        self._recorder = CaptureRecorder(
            resolve_metrics(metrics),
            _as_judge(judge),
            mode=mode,
            embedder=_as_embedder(embedder),
            sample_rate=sample_rate,
            should_score=should_score,
            on_result=on_result,
            max_queue=max_queue,
            concurrency=concurrency,
            keep=keep,
            write_trace=self._trace.write,
            name="ragmeter-llamaindex",
            capture_content=capture_content,
            store=store,
            store_source="llamaindex",
        )
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
        return (
            f"RagmeterInstrumentation(mode={self.mode!r}, attached={self.attached}, "
            f"captured={self._recorder.stats['captured']})"
        )

    @property
    def metrics(self) -> list[Metric]:
        """The metrics scored (resolved: the defaults when none were given)."""
        return cast("list[Metric]", self._recorder.metrics)  # resolved when the recorder was made

    @property
    def judge(self) -> Any:
        """The judge as given (a LlamaIndex LLM wrapped in a LlamaIndexJudge)."""
        return self._recorder.judge

    @property
    def embedder(self) -> Any:
        """The embedder as given (a LlamaIndex embedding model wrapped in a LlamaIndexEmbedder)."""
        return self._recorder.embedder

    @property
    def capture_content(self) -> bool:
        """Whether samples keep their content (the ``capture_content`` argument, else
        ``RAGMETER_CAPTURE_CONTENT``, else True)."""
        return self._recorder.capture_content

    @property
    def scorer(self) -> BackgroundScorer | None:
        """The background scorer (inline mode), or None (offline mode)."""
        return self._recorder.scorer

    # ---------------------------------------------------------------- lifecycle

    def attach(self) -> RagmeterInstrumentation:
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

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued sample is scored (inline mode) and written to the ``store``;
        False if ``timeout`` seconds passed first. Streams unconsumed for ``stream_timeout`` are recorded as partial first."""
        self._capture.sweep()
        return self._recorder.flush(timeout)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Detach, record streams still open as partial, wait for pending scoring (up to
        ``timeout``) and stop the worker. Interpreter exit waits for pending scoring on its own."""
        self.detach()
        self._capture.sweep(force=True)
        return self._recorder.shutdown(timeout)

    def __enter__(self) -> RagmeterInstrumentation:
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
        ``callback_errors``, ``pending``; ``trace_writes`` / ``trace_errors``; ``store_written``,
        ``store_dropped``, ``store_errors`` (0 without a ``store``)."""
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
        def span(a: float | None, b: float | None) -> float | None:
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
            md["token_usage"] = {
                "prompt": q.prompt_tokens,
                "completion": q.completion_tokens,
                "total": q.prompt_tokens + q.completion_tokens,
            }
        ids = (getattr(getattr(n, "node", n), "node_id", None) for n in _dedup_nodes(q.retrieved))
        retrieved = [str(i) for i in ids if i is not None]
        if retrieved and retrieved != [c.id for c in contexts]:
            md["retrieved_ids"] = retrieved  # before postprocessing / reranking
        if q.reranked is not None:
            md["reranked"] = True
        if q.kind != "query":
            md["turn_kind"] = q.kind
            if q.t_retr0 is None:  # no retriever ran (ragmeter.conversations.no_retrieval_turn)
                md[NO_RETRIEVAL_KEY] = True
        target = q.target
        if target is not None:
            md["trace"] = trace_metadata(target)
        extra = {k: v for k, v in q.tags.items() if k not in (REFERENCE_KEY, RELEVANT_KEY, SAMPLE_ID_KEY)}
        if extra:  # the application's own tags: kept, without credentials
            md["tags"] = redact_value(extra)
        return md

    def _record(
        self, q: _Query, answer: str | None, *, error: str | None, partial_text: str | None, partial_reason: str | None
    ) -> None:
        """Hand a finished query over: it becomes a Sample on the recorder's capture thread (the
        query is complete and no longer changed, so the request thread returns at once)."""
        self._recorder.defer(
            functools.partial(
                self._record_now, q, answer, error=error, partial_text=partial_text, partial_reason=partial_reason
            )
        )

    def _record_now(
        self, q: _Query, answer: str | None, *, error: str | None, partial_text: str | None, partial_reason: str | None
    ) -> None:
        """Record a finished query as a Sample; a query that cannot be turned into one is counted
        in ``capture_errors``."""
        sample: Sample | None = None
        with never_raise(
            "LlamaIndex capture: record a query", on_error=lambda err: self._recorder.count("capture_errors")
        ):
            sample = self._sample(q, answer, error=error, partial_text=partial_text, partial_reason=partial_reason)
        if sample is None:
            return
        # a trace is sampled in or out as a whole: its id is the sample_rate key
        key = sample.metadata["trace"]["trace_id"] if q.target is not None else None
        self._recorder.record(sample, q.target, key=key)

    def _sample(
        self, q: _Query, answer: str | None, *, error: str | None, partial_text: str | None, partial_reason: str | None
    ) -> Sample:
        if q.kind == "query":
            nodes = q.nodes or q.reranked or _dedup_nodes(q.retrieved)
        else:  # the chat engine's source nodes, else the query engines' and retrievers' inside the turn
            nodes = q.nodes or _dedup_nodes(q.query_nodes) or q.reranked or _dedup_nodes(q.retrieved)
        contexts = [_node_context(n) for n in nodes or []]
        for c in contexts:  # node metadata as captured: without credentials
            c.metadata = redact_value(c.metadata)
        md = self._metadata(q, contexts)
        if partial_reason is not None:
            status = "partial"
            md["partial_reason"] = redact(partial_reason)
            if error:
                md["error"] = redact(error)
            if partial_text:
                md["partial_answer"] = partial_text
        elif error is not None:
            status = "error"
            md["error"] = redact(error)
        else:
            status = "ok"
        md["status"] = status
        question = q.question or ""
        given_id = q.tags.get(SAMPLE_ID_KEY)
        sample_id = str(given_id) if given_id not in (None, "") else _id_from_span(q.root_id)
        truth: dict[str, Any] = {"reference": q.tags.get(REFERENCE_KEY), "relevant_ids": q.tags.get(RELEVANT_KEY)}
        if truth["reference"] is not None and not isinstance(truth["reference"], str):
            truth["reference"] = str(truth["reference"])
        answer = answer if status == "ok" else None
        turn = turn_fields(q) if q.kind != "query" else {}
        try:
            return Sample(question, contexts, answer=answer, id=sample_id, metadata=md, **truth, **turn)
        except RecordError as err:
            if "question" in str(err.field or ""):
                raise
            md["capture_warning"] = redact(str(err))  # bad ground truth in the tags: keep the query
            return Sample(question, contexts, answer=answer, id=sample_id, metadata=md, **turn)
