"""Internal: The LangChain callback handler: LangChain's run events in, one recorded Sample per root run out.

The handler is a :class:`~ragmeter.integrations.langchain.tracker.RunTracker`: it assembles the
run tree of each root run from LangChain's callbacks, on the chain's threads, keeping only
references (no copies), and hands the finished tree to the capture thread, where
:func:`~ragmeter.integrations.langchain.runs.sample_from_run` turns it into a
:class:`ragmeter.Sample`. Keeping, counting and scoring the samples is the job of a
:class:`ragmeter.capture.CaptureRecorder` (scoring on a :class:`ragmeter.inline.BackgroundScorer`
worker); the chain's result is unchanged, and its thread pays only for the callbacks (see
``benchmarks/inline_overhead.py``). A failure in ragmeter is swallowed by :mod:`ragmeter.guard`,
never raised into the chain.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from contextvars import ContextVar, copy_context
from typing import Any

from langchain_core.language_models import BaseChatModel

from ragmeter.capture import CaptureRecorder
from ragmeter.data import MAX_HISTORY, Sample
from ragmeter.guard import guarded, never_raise
from ragmeter.integrations._tracing import TraceLink
from ragmeter.integrations.langchain.runs import has_open_runs, sample_from_run
from ragmeter.integrations.langchain.tracker import CapturedRun, RunTracker
from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult

__all__ = ["RagmeterCallbackHandler", "INSTALLED"]

_COUNTERS = ("skipped_no_retriever", "skipped_no_question")  # root runs that were not RAG runs
#: Where the guard reports failures of the two callbacks (see :func:`ragmeter.guard.failures`).
RUN_START, RUN_CAPTURE = "LangChain run start", "LangChain run capture"


class _Installed:
    """The handler :func:`~ragmeter.integrations.langchain.instrument` installed, process-wide.

    LangChain's configure hook calls :meth:`get` for every run it sets up
    (:mod:`ragmeter.integrations.langchain.hook`). Process-wide, not per context: a web server's
    request threads start with an empty context, and instrumenting at start-up must cover them.
    Only ragmeter's own scoring is left out (:func:`_outside_capture` pauses it in its context).
    """

    def __init__(self) -> None:
        self.handler: RagmeterCallbackHandler | None = None
        self._paused: ContextVar[bool] = ContextVar("ragmeter_langchain_paused", default=False)

    def get(self) -> RagmeterCallbackHandler | None:
        """The installed handler, or None (none installed, or inside ragmeter's own scoring)."""
        return None if self._paused.get() else self.handler

    def set(self, handler: RagmeterCallbackHandler | None) -> None:
        """Install ``handler`` (None: stop capturing new runs)."""
        self.handler = handler


#: The installed handler; LangChain's configure hook reads it.
INSTALLED = _Installed()


class RagmeterCallbackHandler(RunTracker):
    """Capture every RAG run of a LangChain chain as a :class:`~ragmeter.Sample` and score it.

    Pass it in ``config={"callbacks": [handler]}`` of ``invoke`` / ``ainvoke`` / ``batch`` /
    ``abatch`` / ``stream`` / ``astream`` (or ``chain.with_config(callbacks=[handler])``), or let
    :func:`ragmeter.integrations.langchain.instrument` attach one to every run.

    ``metrics`` / ``judge`` / ``embedder`` are what :func:`ragmeter.evaluate` takes (names or
    instances; ``judge`` may also be a spec such as ``"offline"`` or a LangChain chat model, which is
    wrapped in :class:`~ragmeter.judges.LangChainJudge`).

    ``mode="inline"`` scores each finished run on a background worker with a bounded backlog
    (``max_queue``; a full backlog drops and counts, never blocks). ``sample_rate`` (0..1,
    deterministic per sample id) and ``should_score(sample) -> True | False | None`` (True: always
    score, False: never, None: let ``sample_rate`` decide) choose what is scored; ``on_result`` is
    called with each :class:`~ragmeter.SampleResult` on the worker thread. ``mode="offline"`` only
    captures: :meth:`export_jsonl` writes the samples for ``ragmeter evaluate`` and
    :meth:`evaluate` scores them in one go.

    ``question_key`` / ``answer_key`` name the root input / output key holding the question /
    answer when the chain takes or returns a dict (defaults try
    :data:`~ragmeter.integrations.langchain.runs.QUESTION_KEYS` /
    :data:`~ragmeter.integrations.langchain.runs.ANSWER_KEYS`; the question falls back to the
    first retriever's query, the answer to the last LLM's output). ``config["metadata"]`` keys
    ``reference``, ``relevant_ids`` and ``sample_id`` are picked up; the other keys go to
    ``metadata["run_metadata"]`` through :func:`ragmeter.redact.redact_value` (credential-shaped
    strings and the values of secret-named keys such as ``api_key`` masked). ``keep`` bounds how many
    samples and results are held in memory (None: unbounded). With ``attach_to_trace`` and an
    OpenTelemetry SDK tracer provider (the global one, or ``tracer_provider``), each result is
    written as an evaluation span into the trace whose span was active when the run started (see
    TRACING.md).

    ``capture_content=False`` (default: the ``RAGMETER_CAPTURE_CONTENT`` environment variable,
    else True) scores each run as captured, in memory, but keeps and writes no content: the
    samples (:attr:`samples`, :meth:`export_jsonl`, ``result.sample``) and the results' scores
    are :func:`ragmeter.capture.without_content` copies, so the store, the evaluation spans and
    the log carry no question, chunk, answer, claim, quote or explanation (:mod:`ragmeter.privacy`).

    ``store`` (a :class:`ragmeter.store.Store`, a SQLite path or a ``postgresql://`` URL; None:
    off) records every result in the store as an inline sample of source ``"langchain"`` (what
    the result carries: no content with ``capture_content=False``), written by a background
    thread, never on the chain's; ``stats`` then count ``store_written``, ``store_dropped`` and
    ``store_errors``.

    The chain's thread only hands each finished root run over (ragmeter's hook takes
    microseconds); the run tree is turned into a Sample on the capture thread, and scored on the
    scoring worker (see :class:`ragmeter.capture.CaptureRecorder`).

    Runs that errored are recorded (``metadata["status"] == "error"``) and not scored; runs the
    caller abandoned (a stream closed early, a cancelled task) are recorded as ``"partial"`` and
    not scored; runs whose retrievers returned nothing are recorded and not scored. A chat turn
    (a chain with a chat history, a LangGraph message-state graph) that ran no retriever is
    recorded with no contexts and ``metadata["no_retrieval"]`` True (see
    :mod:`~ragmeter.integrations.langchain.turns`); a chat turn keeps the last ``max_history``
    (default :data:`ragmeter.data.MAX_HISTORY`, 10) messages of its history.
    """

    name = "ragmeter"

    def __init__(
        self,
        metrics: Iterable[Any] | None = None,
        judge: Any = None,
        *,
        mode: str = "inline",
        question_key: str | None = None,
        answer_key: str | None = None,
        sample_rate: float = 1.0,
        should_score: Callable[[Sample], bool | None] | None = None,
        on_result: Callable[[SampleResult], None] | None = None,
        max_queue: int = 1000,
        concurrency: int = 4,
        embedder: Any = None,
        keep: int | None = 10_000,
        attach_to_trace: bool = True,
        tracer_provider: Any = None,
        capture_content: bool | None = None,
        store: Any = None,
        max_history: int = MAX_HISTORY,
    ):
        super().__init__()
        if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 0:
            raise ValueError(f"max_history must be a non-negative integer, got {max_history!r}")
        self.question_key = question_key
        self.answer_key = answer_key
        self.max_history = max_history
        self.attach_to_trace = attach_to_trace
        self._judge_spec = _wrap_chat_model(judge)
        self._trace = TraceLink(tracer_provider)
        self._recorder = CaptureRecorder(
            metrics,
            self._judge_spec,
            mode=mode,
            embedder=embedder,
            sample_rate=sample_rate,
            should_score=should_score,
            on_result=on_result,
            max_queue=max_queue,
            concurrency=concurrency,
            keep=keep,
            write_trace=self._trace.write,
            counters=_COUNTERS,
            name="ragmeter-langchain",
            capture_content=capture_content,
            store=store,
            store_source="langchain",
        )
        self.mode = mode
        self._lock = threading.Lock()
        self._targets: dict[Any, Any] = {}  # root run id -> the span active when it started

    def __repr__(self) -> str:
        return f"RagmeterCallbackHandler(mode={self.mode!r}, captured={self._recorder.stats['captured']})"

    # ------------------------------------------------------------------ public API

    @property
    def capture_content(self) -> bool:
        """Whether samples keep their content (the ``capture_content`` argument, else
        ``RAGMETER_CAPTURE_CONTENT``, else True)."""
        return self._recorder.capture_content

    @property
    def samples(self) -> list[Sample]:
        """Every captured Sample in capture order, errored and partial runs included
        (``metadata["status"]`` is ``"ok"``, ``"error"`` or ``"partial"``)."""
        return self._recorder.samples

    @property
    def results(self) -> EvaluationResult:
        """What has been scored so far (inline worker and :meth:`evaluate`), as an
        :class:`~ragmeter.EvaluationResult` in run start order: iterate it, index it, or call
        ``summary()`` / ``to_pandas()`` / ``problems()``. Call :meth:`flush` first to include
        pending work."""
        return self._recorder.results

    @property
    def stats(self) -> dict[str, int]:
        """Counters. Capture: ``captured`` (samples recorded), ``ok``, ``errored``, ``partial``,
        ``skipped_no_contexts`` (recorded, not scored), ``skipped_no_retriever`` and
        ``skipped_no_question`` (root runs that were neither RAG runs nor chat turns; not recorded), ``capture_errors``,
        ``capture_dropped`` (the capture thread was too far behind). Scoring: ``submitted``,
        ``queued``, ``scored``, ``dropped`` (backlog full, or given up at a timed-out shutdown),
        ``sampled_out``, ``forced`` (``should_score`` said True), ``rejected_closed``, ``failed``,
        ``score_errors`` (samples with a score that could not be computed), ``callback_errors``,
        ``pending``. Traces: ``trace_writes`` (evaluation spans written) and
        ``trace_errors``. Store: ``store_written``, ``store_dropped`` (its queue was full),
        ``store_errors`` (writes that failed); 0 without a ``store``."""
        return self._recorder.stats

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued sample is scored (inline mode) and written to the ``store``;
        False if ``timeout`` seconds passed first."""
        return self._recorder.flush(timeout)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stop accepting samples for scoring, wait for pending ones (up to ``timeout``) and stop
        the worker. Capture continues; interpreter exit does this on its own."""
        return self._recorder.shutdown(timeout)

    def export_jsonl(self, path: str | os.PathLike, *, statuses: Iterable[str] = ("ok",)) -> int:
        """Write the captured samples whose status is in ``statuses`` to a JSONL file that
        ``ragmeter evaluate`` / :func:`ragmeter.load_samples` read; returns how many were written."""
        return self._recorder.export_jsonl(path, statuses=statuses)

    def evaluate(self, **kwargs: Any) -> EvaluationResult:
        """Offline mode: score the samples captured since the last call (status ok, with
        contexts) in one go with the handler's metrics and judge; ``kwargs`` go to
        :func:`ragmeter.evaluate` (e.g. ``concurrency``). The results are also added to
        :attr:`results`, and written to the run's trace when one was active."""
        return _outside_capture(self._recorder.evaluate, **kwargs)

    # ------------------------------------------------------------------ RunTracker hooks

    @guarded(RUN_START)
    def _on_root_start(self, run: CapturedRun) -> None:
        # On the thread / in the context where the root run starts (the caller's for invoke and
        # stream, the event loop's for ainvoke/astream): the place to see the caller's active
        # OpenTelemetry span. Must stay cheap.
        if not self.attach_to_trace:
            return
        target = self._trace.current_target()
        if target is not None:
            with self._lock:
                self._targets[run.id] = target

    def _persist_run(self, run: CapturedRun) -> None:
        # Once per root run, with the whole run tree, when the root ends, on the chain's thread:
        # hand the tree over and return. A tree with runs still open (an abandoned stream) may
        # change after this, so it is read now.
        with never_raise(RUN_CAPTURE, on_error=lambda _: self._recorder.count("capture_errors")):
            with self._lock:
                target = self._targets.pop(run.id, None)
            if has_open_runs(run):
                self._capture(run, target)
            else:
                self._recorder.defer(functools.partial(self._capture, run, target))

    def _capture(self, run: Any, target: Any) -> None:
        # On the capture thread: the run tree -> a Sample -> the recorder.
        with never_raise(RUN_CAPTURE, on_error=lambda _: self._recorder.count("capture_errors")):
            sample, reason = self._sample_from_run(run, target)
            if sample is None:
                self._recorder.count(reason)
                return
            _outside_capture(self._recorder.record, sample, target)

    # ------------------------------------------------------------------ internals

    def _sample_from_run(self, run: Any, target: Any) -> tuple[Sample | None, str]:
        return sample_from_run(run, target, self.question_key, self.answer_key, self.max_history)


def _outside_capture(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` in a copy of the current context with no handler installed: the scoring it
    starts inherits that context (the worker's task copies it), so a LangChain judge's own calls
    are never captured as application runs."""
    ctx = copy_context()
    ctx.run(INSTALLED._paused.set, True)
    return ctx.run(fn, *args, **kwargs)


def _wrap_chat_model(judge: Any) -> Any:
    """A LangChain chat model given as the judge becomes a LangChainJudge."""
    if isinstance(judge, BaseChatModel):
        from ragmeter.judges.langchain import LangChainJudge

        return LangChainJudge(judge)
    return judge
