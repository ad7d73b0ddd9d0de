"""Parameter sweeps: run the user's pipeline once per setting of a grid, score every run the same
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
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ragmeter.dashboard.charts import trend_chart
from ragmeter.data import Sample
from ragmeter.judges.spec import resolve_judge
from ragmeter.result import EvaluationResult
from ragmeter.runner import _as_dataset, evaluate, resolve_metrics
from ragmeter.testset.documents import as_context

__all__ = ["sweep", "SweepResult", "run_pipeline"]

_ANSWER_KEYS = ("answer", "result", "output", "response")
_CONTEXT_KEYS = ("context", "contexts", "source_documents", "documents", "source_nodes")
#: The dashboard's chart styles, inlined so an SVG file reads on its own.
_STYLE = ("<style>text{font-family:system-ui,sans-serif}.grid{stroke:#eaeef2}.tick{font-size:10px;fill:#59636e}"
          ".line{fill:none;stroke:#0969da;stroke-width:2}.pt{stroke:#fff;stroke-width:1.5;fill:#0969da}"
          ".s-pass{fill:#1a7f37}.s-warn{fill:#e39b2d}.s-fail{fill:#cf222e}.lvl{stroke-dasharray:4 3;stroke-width:1}"
          ".lvl-pass{stroke:#1a7f37}.lvl-warn{stroke:#e39b2d}.title{font-size:12px;font-weight:600;fill:#1f2328}</style>")


def _answer_and_contexts(out: Any) -> tuple[str | None, list]:
    if isinstance(out, str):
        return out, []
    if isinstance(out, tuple) and len(out) == 2:
        return out
    if isinstance(out, Mapping):
        answer = next((out[k] for k in _ANSWER_KEYS if k in out), None)
        contexts = next((out[k] for k in _CONTEXT_KEYS if k in out), [])
        if not isinstance(answer, (str, type(None))):
            answer, more = _answer_and_contexts(answer)
            contexts = contexts or more
        return answer, list(contexts or [])
    if hasattr(out, "source_nodes"):  # LlamaIndex Response
        return getattr(out, "response", None), list(out.source_nodes or [])
    if isinstance(getattr(out, "content", None), str):  # a chat message
        return out.content, []
    raise TypeError(f"cannot read an answer and contexts from a {type(out).__name__}; return (answer, contexts), "
                    f"a dict with 'answer' and 'context', or a string")


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
        raise TypeError(f"a pipeline must have invoke() (LangChain), query() (LlamaIndex) or be callable, "
                        f"got {type(pipeline).__name__}")
    answer, contexts = _answer_and_contexts(out)
    return (None if answer is None else str(answer)), [as_context(c, i) for i, c in enumerate(contexts)]


@dataclass
class SweepResult:
    """One row per setting (``rows``: the parameters, each metric's mean, ``samples``,
    ``pipeline_errors``, ``judge_calls``, ``tokens``, ``cost_usd``), the :class:`EvaluationResult`
    of each setting (``results``), the ``params`` and ``metrics`` names, and pipeline failures
    (``errors``: setting index, question, message)."""

    rows: list[dict]
    results: list[EvaluationResult]
    params: list[str]
    metrics: list[str]
    errors: list[tuple[int, str, str]] = field(default_factory=list)

    def best(self, metric: str, lowest: bool = False) -> dict:
        """The row with the highest (``lowest=True``: lowest) mean of ``metric``."""
        rows = [r for r in self.rows if r.get(metric) is not None]
        if not rows:
            raise ValueError(f"no setting has a mean for {metric!r}")
        return (min if lowest else max)(rows, key=lambda r: r[metric])

    def to_markdown(self) -> str:
        """The table: parameters, metric means, then samples, errors, judge calls and cost."""
        cols = [*self.params, *self.metrics, "samples", "pipeline_errors", "judge_calls", "cost_usd"]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in self.rows:
            cells = []
            for c in cols:
                v = r.get(c)
                cells.append("n/a" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def chart(self, metric: str, param: str) -> str:
        """An SVG line of ``metric`` against ``param``: at each value of ``param``, the mean of
        ``metric`` over every sample of the settings with that value (the other parameters
        averaged over: a main-effect plot), the values evenly spaced in grid order. Stand-alone:
        styles are inlined."""
        points = []
        for value in dict.fromkeys(r[param] for r in self.rows):
            values, errors = [], 0
            for r, res in zip(self.rows, self.results):
                if r[param] == value:
                    values += [v for v in res.values(metric) if v is not None]
                    errors += sum(1 for s in res.scores(metric) if s.error)
            mean = sum(values) / len(values) if values else None
            points.append((f"{param}={value}", mean, len(values), errors))
        levels = next((res.thresholds.get(metric) for res in self.results if res.thresholds.get(metric)), None)
        width, height = 360, 170
        svg = trend_chart(metric, points, levels, width=width, height=height)
        # the trend chart labels its first and last points: add the values in between, and a title
        inner = [f'<text class="tick" x="{30 + (width - 40) * i / (len(points) - 1):.1f}" y="{height - 12}" '
                 f'text-anchor="middle">{escape(str(label.split("=", 1)[1]))}</text>'
                 for i, (label, *_) in enumerate(points) if 0 < i < len(points) - 1]
        title = f'<text class="title" x="{width / 2:.0f}" y="{height - 2}" text-anchor="middle">{escape(metric)} vs {escape(param)}</text>'
        svg = svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
        head_end = svg.index(">") + 1
        return svg[:head_end] + _STYLE + title + "".join(inner) + svg[head_end:]

    def charts(self) -> dict[str, str]:
        """Every chart: ``"<metric>_vs_<param>.svg"`` -> SVG text, one per metric and parameter."""
        safe = lambda s: "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in s)  # noqa: E731
        return {f"{safe(m)}_vs_{safe(p)}.svg": self.chart(m, p) for m in self.metrics for p in self.params}

    def save_charts(self, folder: str | Path) -> list[Path]:
        """Write :meth:`charts` into ``folder`` (created when missing); returns the paths."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, svg in self.charts().items():
            (folder / name).write_text(svg, encoding="utf-8")
            paths.append(folder / name)
        return paths


def _questions(questions: Any) -> list[Sample]:
    if isinstance(questions, (list, tuple)) and all(isinstance(q, str) for q in questions):
        return [Sample(q) for q in questions]
    return list(_as_dataset(questions))


def sweep(build_pipeline: Callable[..., Any], grid: Mapping[str, Iterable[Any]], questions: Any,
          metrics: Iterable[Any] | None = None, judge: Any = None, *, charts: str | Path | None = None,
          progress: bool = True, concurrency: int = 8) -> SweepResult:
    """Run ``build_pipeline(**setting)`` for every setting of ``grid`` (all combinations, in
    order) on ``questions`` (strings, or Samples / records / a file with ``reference`` and
    ``relevant_ids``), score each run with :func:`ragmeter.evaluate` (same ``metrics``, same
    ``judge``, resolved once so its cache serves every setting) and return a
    :class:`SweepResult`. The pipeline's latency is recorded, so a ``response_time`` column
    appears. ``charts``: a folder to write one SVG per metric and parameter into.

    A question the pipeline fails on is left out of that setting's scores and counted in its
    row's ``pipeline_errors`` (messages in ``errors``); it never becomes a score.
    """
    params = list(grid)
    values = [list(v) for v in grid.values()]
    if not params or any(not v for v in values):
        raise ValueError("grid needs at least one parameter, each with at least one value")
    base = _questions(questions)
    metric_list = resolve_metrics(metrics, base)
    judge_obj = resolve_judge(judge, metric_list)
    rows, results, errors = [], [], []
    for n, combo in enumerate(itertools.product(*values)):
        setting = dict(zip(params, combo))
        pipeline = build_pipeline(**setting)
        samples = []
        for s in base:
            start = time.perf_counter()
            try:
                answer, contexts = run_pipeline(pipeline, s.question)
            except Exception as err:  # the user's pipeline: any failure is reported, never scored
                errors.append((n, s.question, f"{type(err).__name__}: {err}"))
                continue
            latency = time.perf_counter() - start
            samples.append(Sample(s.question, contexts=contexts, answer=answer, reference=s.reference,
                                  relevant_ids=s.relevant_ids, id=s.id,
                                  metadata={**s.metadata, "setting": setting, "latency": {"total_s": latency}}))
        result = evaluate(samples, metric_list, judge_obj, progress=progress, concurrency=concurrency)
        summary, usage = result.summary(), result.usage
        rows.append({**setting, **{m: summary.get(m, {}).get("mean") for m in result.metrics},
                     "samples": len(samples), "pipeline_errors": len(base) - len(samples), "judge_calls": usage.calls,
                     "tokens": usage.prompt_tokens + usage.completion_tokens, "cost_usd": usage.cost_usd})
        results.append(result)
    names = list(dict.fromkeys(m for r in results for m in r.metrics))
    out = SweepResult(rows, results, params, names, errors)
    if charts is not None:
        out.save_charts(charts)
    return out
