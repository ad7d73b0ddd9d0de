"""Internal: The dashboard's "Sweeps" section: each parameter sweep (:func:`ragmeter.sweep` with ``store=``)
as a table of its settings, quality next to cost, and one chart per metric against each parameter.

A sweep is stored as one run of kind ``"sweep"`` per setting (see :mod:`ragmeter.store`): the
runs of one sweep share the ``source`` ``"sweep:<id>"``, and each run's tags name its setting
(``"top_k=3"``; the value is read back as JSON when it is, else as text). :func:`stored_sweeps`
reads them back; :func:`sweeps_section` renders them; :func:`main_effect` and :func:`sweep_chart`
are shared with :class:`ragmeter.sweep.SweepResult` (its SVG and PNG files).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from ragmeter.dashboard.charts import trend_chart
from ragmeter.data import label_for
from ragmeter.result import EvaluationResult
from ragmeter.verdicts import run_latency

__all__ = ["SweepEntry", "main_effect", "sweep_chart", "sweeps_section", "stored_sweeps", "setting_tags", "SWEEP_KIND"]

#: The store's run kind of one sweep setting.
SWEEP_KIND = "sweep"

#: The chart styles, inlined in a stand-alone SVG file (the page has them in its CSS).
_STYLE = (
    "<style>text{font-family:system-ui,sans-serif}.grid{stroke:#eaeef2}.tick{font-size:10px;fill:#59636e}"
    ".line{fill:none;stroke:#0969da;stroke-width:2}.pt{stroke:#fff;stroke-width:1.5;fill:#0969da}"
    ".s-pass{fill:#1a7f37}.s-warn{fill:#e39b2d}.s-fail{fill:#cf222e}.lvl{stroke-dasharray:4 3;stroke-width:1}"
    ".lvl-pass{stroke:#1a7f37}.lvl-warn{stroke:#e39b2d}.title{font-size:12px;font-weight:600;fill:#1f2328}</style>"
)


@dataclass
class SweepEntry:
    """One sweep: its ``label``, parameter names (``params``), and per setting (in grid order)
    the parameter values (``settings``) and the :class:`~ragmeter.EvaluationResult` (``results``)."""

    label: str
    params: list[str]
    settings: list[dict[str, Any]]
    results: list[EvaluationResult]

    @property
    def metrics(self) -> list[str]:
        """Every metric scored in any setting, in first-seen order."""
        return list(dict.fromkeys(m for r in self.results for m in r.metrics))

    def levels(self, metric: str) -> tuple[float, float] | None:
        """The (pass, warn) levels of ``metric`` (from the first setting that has them)."""
        return next(
            ((r.thresholds[metric][0], r.thresholds[metric][1]) for r in self.results if r.thresholds.get(metric)), None
        )


def main_effect(
    settings: Sequence[dict], results: Sequence[EvaluationResult], metric: str, param: str
) -> list[tuple[str, float | None, int, int]]:
    """The points of ``metric`` against ``param``: for each value of ``param`` (grid order), the
    mean of ``metric`` over every sample of the settings with that value (the other parameters
    averaged over), the number of values and of errors: ``("top_k=3", mean, count, errors)``."""
    points = []
    for value in dict.fromkeys(s[param] for s in settings):
        values, errors = [], 0
        for s, res in zip(settings, results):
            if s[param] == value:
                values += [v for v in res.values(metric) if v is not None]
                errors += sum(1 for sc in res.scores(metric) if sc.error)
        points.append((f"{param}={value}", sum(values) / len(values) if values else None, len(values), errors))
    return points


def sweep_chart(
    metric: str,
    param: str,
    points: Sequence[tuple[str, float | None, int, int]],
    levels: tuple[float, float] | None,
    *,
    standalone: bool = False,
    width: int = 360,
    height: int = 170,
) -> str:
    """An SVG line of ``metric`` against ``param`` (``points`` from :func:`main_effect`), every
    value labelled on the x axis; ``standalone`` adds the XML namespace, the styles and the title
    "<metric> vs <param>" so the SVG reads as a file on its own (on the page, the figure's
    caption is the title)."""
    svg = trend_chart(metric, points, levels, width=width, height=height)
    n = len(points)
    # the trend chart labels its first and last points: add the values in between, and a title
    inner = [
        f'<text class="tick" x="{30 + (width - 40) * i / (n - 1):.1f}" y="{height - 12}" '
        f'text-anchor="middle">{escape(str(label.split("=", 1)[1]))}</text>'
        for i, (label, *_) in enumerate(points)
        if 0 < i < n - 1
    ]
    title = (
        f'<text class="title" x="{width / 2:.0f}" y="{height - 2}" text-anchor="middle">'
        f'{escape(metric)} vs {escape(param)}</text>'
    )
    head = _STYLE + title if standalone else ""
    if standalone:
        svg = svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1)
    head_end = svg.index(">") + 1
    return svg[:head_end] + head + "".join(inner) + svg[head_end:]


def setting_tags(setting: dict[str, Any]) -> list[str]:
    """A setting as run tags: ``"<param>=<value>"``, the value as JSON unless it is text."""
    return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in setting.items()]


def _setting_of(tags: Sequence[str]) -> dict[str, Any]:
    setting: dict[str, Any] = {}
    for tag in tags:
        key, sep, raw = tag.partition("=")
        if not sep:
            continue
        try:
            setting[key] = json.loads(raw)
        except ValueError:
            setting[key] = raw
    return setting


def stored_sweeps(store: Any, limit: int = 5) -> list[SweepEntry]:
    """The last ``limit`` sweeps recorded in ``store`` (a :class:`ragmeter.store.Store`), oldest
    first, each with its settings in the order they ran."""
    groups: dict[str, list] = {}
    for info in reversed(store.runs(limit=None, kind=SWEEP_KIND)):  # oldest first
        groups.setdefault(info.source or f"run {info.id}", []).append(info)
    out = []
    for source, infos in list(groups.items())[-limit:]:
        settings = [_setting_of(i.tags) for i in infos]
        params = list(dict.fromkeys(k for s in settings for k in s))
        when = infos[0].created_at.strftime("%Y-%m-%d %H:%M UTC")
        label = f"{source} · runs {infos[0].id}-{infos[-1].id} · {when}"
        out.append(SweepEntry(label, params, settings, [store.run(i.id) for i in infos]))
    return out


def _cell(value: Any, levels: tuple[float, float] | None = None) -> str:
    if value is None:
        return '<td class="num">n/a</td>'
    if isinstance(value, float):
        cls = f"num {label_for(value, *levels)}" if levels else "num"
        return f'<td class="{cls}">{value:.4f}</td>'
    return f'<td class="num">{escape(str(value))}</td>'


def _table(sweep: SweepEntry) -> str:
    metrics = sweep.metrics
    latencies = [run_latency(res.results) for res in sweep.results]
    timed = any(latencies)
    head = "".join(
        f"<th>{escape(c)}</th>"
        for c in [
            *sweep.params,
            *metrics,
            *(("p50 s", "p95 s") if timed else ()),
            "samples",
            "not scored",
            "judge calls",
            "tokens",
            "cost (USD)",
        ]
    )
    rows = []
    for setting, res, lat in zip(sweep.settings, sweep.results, latencies):
        summary, usage = res.summary(), res.usage
        cells = [f"<td>{escape(str(setting.get(p, '-')))}</td>" for p in sweep.params]
        cells += [_cell((summary.get(m) or {}).get("mean"), sweep.levels(m)) for m in metrics]
        if timed:
            cells += [
                f'<td class="num" data-latency="{q}">{lat[f"{q}_s"]:.3f}</td>' if lat else '<td class="num">n/a</td>'
                for q in ("p50", "p95")
            ]
        cost = usage.cost_usd if usage.cost_usd is not None else (0.0 if usage.calls == 0 else None)
        failed = f'<td class="num" title="{escape("; ".join(str(e) for e in res.invalid[:5]))}">{len(res.invalid)}</td>'
        cells += [
            _cell(len(res)),
            failed,
            _cell(usage.calls),
            _cell(usage.prompt_tokens + usage.completion_tokens),
            '<td class="num">unknown</td>' if cost is None else f'<td class="num" data-cost>${cost:.6f}</td>',
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f'<table class="sweep-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def sweeps_section(sweeps: Sequence[SweepEntry]) -> str:
    """The "Sweeps" section: per sweep, its table (parameters, metric means coloured by their
    levels, the response time p50 / p95 in seconds when captured, samples, questions not scored (the pipeline failed, or the record was unreadable),
    judge calls, tokens, cost) and one chart per metric and parameter; empty text when there
    is no sweep."""
    if not sweeps:
        return ""
    parts = [
        '<section id="sweeps"><h2>Sweeps <span class="muted">(quality per setting, cost next to it; '
        'charts: the mean over every sample with that value, other parameters averaged over)</span></h2>'
    ]
    for n, sweep in enumerate(sweeps):
        parts.append(
            f'<div class="sweep" data-sweep="{n}"><h3>{escape(sweep.label)} <span class="muted">'
            f'({len(sweep.settings)} settings of {escape(", ".join(sweep.params))})</span></h3>'
            f'{_table(sweep)}<div class="cards">'
        )
        for metric in sweep.metrics:
            for param in sweep.params:
                points = main_effect(sweep.settings, sweep.results, metric, param)
                parts.append(
                    f'<figure class="card" data-chart="{escape(metric)} vs {escape(param)}"><figcaption>'
                    f'{escape(metric)} vs {escape(param)}</figcaption>'
                    f'{sweep_chart(metric, param, points, sweep.levels(metric))}</figure>'
                )
        parts.append("</div></div>")
    parts.append("</section>")
    return "".join(parts)
