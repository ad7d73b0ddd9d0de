"""Internal: Parameter sweeps: run the user's pipeline once per setting of a grid, score every run the same
way, and show quality next to cost.

>>> import ragmeter as rm
>>> chunks = [{"id": "a", "text": "Paris is the capital of France."}, {"id": "b", "text": "Rome is in Italy."}]
>>> def build(top_k):
...     return lambda q: ("Paris.", chunks[:top_k])
>>> qs = [rm.Sample("What is the capital of France?", relevant_ids=["a"])]
>>> table = rm.sweep(build, {"top_k": [1, 2]}, qs, metrics=["precision@2"], progress=False)
>>> [(row["top_k"], row["precision@2"]) for row in table.rows]
[(1, 0.5), (2, 0.5)]

``build_pipeline(**setting)`` returns what answers a question: a LangChain runnable
(``invoke``), a LlamaIndex query engine (``query``) or a function ``question -> (answer,
contexts)``. Their outputs are read duck-typed (no framework is imported): a pair, a dict with
``answer`` / ``result`` / ``output`` / ``response`` and ``context`` / ``contexts`` /
``source_documents`` / ``documents`` / ``source_nodes``, a LlamaIndex ``Response``
(``response``, ``source_nodes``), a message (``content``) or a string. Contexts may be strings,
dicts, LangChain ``Document``s or LlamaIndex nodes; their ids make retrieval metrics work.

Charts: one per metric and parameter, as SVG (:meth:`SweepResult.save_charts`) or PNG
(``format="png"``, drawn by :mod:`ragmeter.dashboard.png` with numpy and zlib: no plotting
library, no browser). ``store=`` records every setting, and ``ragmeter dashboard`` shows the
sweep in its "Sweeps" section (:mod:`ragmeter.dashboard.sweeps`), quality next to cost.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmeter.dashboard.sweeps import SWEEP_KIND, main_effect, setting_tags, sweep_chart
from ragmeter.data import RecordError, Sample
from ragmeter.judges.spec import resolve_judge
from ragmeter.metrics import resolve_metrics
from ragmeter.readers import as_dataset
from ragmeter.result import EvaluationResult
from ragmeter.runner import evaluate
from ragmeter.testset.documents import as_context
from ragmeter.verdicts import run_latency

__all__ = ["sweep", "SweepResult", "run_pipeline"]

_ANSWER_KEYS = ("answer", "result", "output", "response")
_CONTEXT_KEYS = ("context", "contexts", "source_documents", "documents", "source_nodes")


def _answer_and_contexts(out: Any) -> tuple[str | None, list]:
    if isinstance(out, str):
        return out, []
    if isinstance(out, tuple) and len(out) == 2:
        return out
    if isinstance(out, Mapping):
        answer = next((out[k] for k in _ANSWER_KEYS if k in out), None)
        contexts: Any = next((out[k] for k in _CONTEXT_KEYS if k in out), [])
        if not isinstance(answer, (str, type(None))):
            answer, more = _answer_and_contexts(answer)
            contexts = contexts or more
        return answer, list(contexts or [])
    if hasattr(out, "source_nodes"):  # LlamaIndex Response
        return getattr(out, "response", None), list(out.source_nodes or [])
    if isinstance(getattr(out, "content", None), str):  # a chat message
        return out.content, []
    raise TypeError(
        f"cannot read an answer and contexts from a {type(out).__name__}; return (answer, contexts), "
        f"a dict with 'answer' and 'context', or a string"
    )


def run_pipeline(pipeline: Any, question: str) -> tuple[str | None, list]:
    """Ask ``pipeline`` (runnable, query engine or function) ``question``; return the answer and
    the contexts as :class:`~ragmeter.data.Context` objects, in retrieval order."""
    if hasattr(pipeline, "invoke"):
        out = pipeline.invoke(question)
    elif hasattr(pipeline, "query"):
        out = pipeline.query(question)
    elif callable(pipeline):
        out = pipeline(question)
    else:
        raise TypeError(
            f"a pipeline must have invoke() (LangChain), query() (LlamaIndex) or be callable, "
            f"got {type(pipeline).__name__}"
        )
    answer, contexts = _answer_and_contexts(out)
    return (None if answer is None else str(answer)), [as_context(c, i) for i, c in enumerate(contexts)]


@dataclass
class SweepResult:
    """One row per setting (``rows``: the parameters, each metric's mean, the pipeline's response
    time in seconds ``p50_s`` / ``p95_s``, ``samples``, ``pipeline_errors``, ``judge_calls``,
    ``tokens``, ``cost_usd``), the :class:`EvaluationResult`
    of each setting (``results``), the ``params`` and ``metrics`` names, and pipeline failures
    (``errors``: setting index, question, message); ``run_ids``: the store's run of each setting
    when the sweep was recorded (``store=``)."""

    rows: list[dict]
    results: list[EvaluationResult]
    params: list[str]
    metrics: list[str]
    errors: list[tuple[int, str, str]] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)

    def best(self, metric: str, lowest: bool = False) -> dict:
        """The row with the highest (``lowest=True``: lowest) mean of ``metric``."""
        rows = [r for r in self.rows if r.get(metric) is not None]
        if not rows:
            raise ValueError(f"no setting has a mean for {metric!r}")
        return (min if lowest else max)(rows, key=lambda r: r[metric])

    def to_markdown(self) -> str:
        """The table: parameters, metric means, response time p50 / p95 in seconds, then samples,
        errors, judge calls and cost."""
        cols = [*self.params, *self.metrics, "p50_s", "p95_s", "samples", "pipeline_errors", "judge_calls", "cost_usd"]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in self.rows:
            cells = []
            for c in cols:
                v = r.get(c)
                cells.append("n/a" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def _settings(self) -> list[dict]:
        return [{p: r[p] for p in self.params} for r in self.rows]

    def chart(self, metric: str, param: str) -> str:
        """An SVG line of ``metric`` against ``param``: at each value of ``param``, the mean of
        ``metric`` over every sample of the settings with that value (the other parameters
        averaged over: a main-effect plot, see :func:`ragmeter.dashboard.sweeps.main_effect`),
        the values evenly spaced in grid order. Stand-alone: styles are inlined."""
        points = main_effect(self._settings(), self.results, metric, param)
        levels = next((res.thresholds.get(metric) for res in self.results if res.thresholds.get(metric)), None)
        return sweep_chart(metric, param, points, levels, standalone=True)

    def chart_png(self, metric: str, param: str, scale: int = 2) -> bytes:
        """The PNG of :meth:`chart` (same points, levels and labels), drawn by
        :func:`ragmeter.dashboard.png.line_chart_png`: no plotting library, no browser."""
        from ragmeter.dashboard.png import line_chart_png

        points = main_effect(self._settings(), self.results, metric, param)
        levels = next((res.thresholds.get(metric) for res in self.results if res.thresholds.get(metric)), None)
        return line_chart_png(f"{metric} vs {param}", points, levels, scale=scale)

    def charts(self) -> dict[str, str]:
        """Every chart: ``"<metric>_vs_<param>.svg"`` -> SVG text, one per metric and parameter."""
        return {f"{name}.svg": self.chart(m, p) for name, m, p in self._chart_names()}

    def _chart_names(self) -> list[tuple[str, str, str]]:
        safe = lambda s: "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in s)  # noqa: E731
        return [(f"{safe(m)}_vs_{safe(p)}", m, p) for m in self.metrics for p in self.params]

    def save_charts(self, folder: str | Path, format: str = "svg") -> list[Path]:
        """Write one chart per metric and parameter into ``folder`` (created when missing) as
        ``"<metric>_vs_<param>.svg"`` (``format="svg"``) or ``.png`` (``format="png"``, see
        :meth:`chart_png`); returns the paths."""
        if format not in ("svg", "png"):
            raise ValueError(f"format must be 'svg' or 'png', got {format!r}")
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, metric, param in self._chart_names():
            path = folder / f"{name}.{format}"
            if format == "svg":
                path.write_text(self.chart(metric, param), encoding="utf-8")
            else:
                path.write_bytes(self.chart_png(metric, param))
            paths.append(path)
        return paths


def _recorder(store: Any) -> Any:
    """``store`` as a Store (opened from a path or URL), or None."""
    if store is None or hasattr(store, "record_run"):
        return store
    from ragmeter.store import Store

    return Store(store)


def _questions(questions: Any) -> tuple[list[Sample], list[RecordError]]:
    """The questions as Samples (a string is a question) and the records that could not be read."""
    if isinstance(questions, (list, tuple)):
        questions = [Sample(q) if isinstance(q, str) else q for q in questions]
    dataset = as_dataset(questions)
    return list(dataset), list(dataset.errors)


def sweep(
    build_pipeline: Callable[..., Any],
    grid: Mapping[str, Iterable[Any]],
    questions: Any,
    metrics: Iterable[Any] | None = None,
    judge: Any = None,
    *,
    charts: str | Path | None = None,
    progress: bool = True,
    concurrency: int = 8,
    store: Any = None,
) -> SweepResult:
    """Run ``build_pipeline(**setting)`` for every setting of ``grid`` (all combinations, in
    order) on ``questions`` (strings, or Samples / records / a file with ``reference`` and
    ``relevant_ids``), score each run with :func:`ragmeter.evaluate` (same ``metrics``, same
    ``judge``, resolved once so its cache serves every setting) and return a
    :class:`SweepResult`. The pipeline's latency is recorded, so a ``response_time`` column
    appears. ``charts``: a folder to write one SVG per metric and parameter into (PNG files:
    :meth:`SweepResult.save_charts` with ``format="png"``).

    ``store`` (a :class:`ragmeter.store.Store`, or a SQLite path / ``postgresql://`` URL) records
    each setting as a run of kind ``"sweep"`` (tags ``"<param>=<value>"``, source
    ``"sweep:<id>"``), so ``ragmeter dashboard`` shows the sweep in its "Sweeps" section; the
    run ids are in ``SweepResult.run_ids``.

    A question the pipeline fails on is left out of that setting's scores and counted in its
    row's ``pipeline_errors`` (messages in ``errors``, and in the setting's ``result.invalid``,
    with the question records that could not be read); it never becomes a score.
    """
    params = list(grid)
    values = [list(v) for v in grid.values()]
    if not params or any(not v for v in values):
        raise ValueError("grid needs at least one parameter, each with at least one value")
    base, unreadable = _questions(questions)
    metric_list = resolve_metrics(metrics, base)
    judge_obj = resolve_judge(judge, metric_list)
    rows, results, errors, run_ids = [], [], [], []
    recorder, source = _recorder(store), f"sweep:{uuid.uuid4().hex[:8]}"
    for n, combo in enumerate(itertools.product(*values)):
        setting = dict(zip(params, combo))
        pipeline = build_pipeline(**setting)
        samples, failed = [], []
        for q, s in enumerate(base, start=1):
            start = time.perf_counter()
            try:
                answer, contexts = run_pipeline(pipeline, s.question)
            except Exception as err:  # the user's pipeline: any failure is reported, never scored
                errors.append((n, s.question, f"{type(err).__name__}: {err}"))
                failed.append(RecordError(f"question {q}", None, f"the pipeline failed: {type(err).__name__}: {err}"))
                continue
            latency = time.perf_counter() - start
            samples.append(
                Sample(
                    s.question,
                    contexts=contexts,
                    answer=answer,
                    reference=s.reference,
                    relevant_ids=s.relevant_ids,
                    id=s.id,
                    metadata={**s.metadata, "setting": setting, "latency": {"total_s": latency}},
                )
            )
        result = evaluate(samples, metric_list, judge_obj, progress=progress, concurrency=concurrency)
        result.invalid += unreadable + failed  # kept with the run (and in the store): the dashboard counts them
        summary, usage = result.summary(), result.usage
        times = run_latency(result.results) or {}
        rows.append(
            {
                **setting,
                **{m: summary.get(m, {}).get("mean") for m in result.metrics},
                "p50_s": times.get("p50_s"),
                "p95_s": times.get("p95_s"),
                "samples": len(samples),
                "pipeline_errors": len(base) - len(samples),
                "judge_calls": usage.calls,
                "tokens": usage.prompt_tokens + usage.completion_tokens,
                "cost_usd": usage.cost_usd,
            }
        )
        results.append(result)
        if recorder is not None:
            run_ids.append(recorder.record_run(result, tags=setting_tags(setting), source=source, kind=SWEEP_KIND))
    if recorder is not None and recorder is not store:
        recorder.close()
    names = list(dict.fromkeys(m for r in results for m in r.metrics))
    out = SweepResult(rows, results, params, names, errors, run_ids)
    if charts is not None:
        out.save_charts(charts)
    return out
