"""Internal: The dashboard's runs over time: the trend lines, one group of charts per dataset (runs of two
datasets never share a line), the app's response times in seconds next to them, and the "Runs"
table, whose filters (dataset, kind, tag) choose the table rows and the trend groups on the page.

A run's group is its dataset (:func:`series_of`); runs without one are grouped by kind ("inline"
samples of a deployment, ...). ``ragmeter dashboard --dataset / --kind / --tag`` chooses the runs
before the page is drawn (see :func:`ragmeter.dashboard.render_store`); the page's filters only
show and hide what is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ragmeter.dashboard.charts import nice_ceiling, trend_chart
from ragmeter.dashboard.model import RunEntry

__all__ = ["series_of", "trends_section", "runs_section", "latency_text"]


def series_of(run: RunEntry) -> str:
    """The trend group of ``run``: its dataset, else ``"<kind> runs without a dataset"``."""
    return run.dataset or f"{run.kind} runs without a dataset"


def latency_text(latency: Mapping[str, Any] | None) -> str:
    """``"p50 1.20 s · p95 3.40 s"`` (empty without a latency)."""
    if not latency:
        return ""
    return f"p50 {latency['p50_s']:.2f} s · p95 {latency['p95_s']:.2f} s"


def _levels(run: RunEntry, metric: str) -> tuple[float, float] | None:
    pair = run.thresholds.get(metric)
    return (float(pair[0]), float(pair[1])) if pair else None


def _card(metric: str, caption: str, svg: str) -> str:
    return f'<figure class="card"><figcaption>{caption}</figcaption>{svg}</figure>'


def _latency_cards(runs: Sequence[RunEntry]) -> list[str]:
    """The p50 and p95 response time of each run, in seconds (no cards when no run has one)."""
    timed = [r.latency for r in runs if r.latency]
    if not timed:
        return []
    top = nice_ceiling(max(latency["p95_s"] for latency in timed))
    cards = []
    for stat in ("p50", "p95"):
        points = [
            (r.name, r.latency[f"{stat}_s"] if r.latency else None, int(r.latency["count"]) if r.latency else 0, 0)
            for r in runs
        ]
        svg = trend_chart(f"response_time_{stat}_s", points, None, y_max=top, unit="s", stat=stat)
        cards.append(
            _card(f"response_time_{stat}_s", f'response time {stat} <span class="muted">(seconds)</span>', svg)
        )
    return cards


def _group(runs: Sequence[RunEntry], name: str | None) -> str:
    """One group's charts: each metric's mean per run, then the response times."""
    metrics = list(dict.fromkeys(m for r in runs for m in r.summary))
    cards = []
    for m in metrics:
        points = [
            (
                r.name,
                (r.summary.get(m) or {}).get("mean"),
                int((r.summary.get(m) or {}).get("count") or 0),
                int((r.summary.get(m) or {}).get("errors") or 0),
            )
            for r in runs
            if m in r.summary
        ]
        cards.append(_card(m, escape(m), trend_chart(m, points, _levels(runs[-1], m))))
    cards += _latency_cards(runs)
    title = "Mean per run" if name is None else f"{escape(name)}"
    attrs = f' data-series="{escape(name or "")}" data-runs="{escape(json.dumps([r.id for r in runs]))}"'
    return (
        f'<div class="trend-group"{attrs}><h3>{title} <span class="muted">({len(runs)} '
        f'run{"s" if len(runs) != 1 else ""}, oldest first)</span></h3><div class="cards">{"".join(cards)}</div></div>'
    )


def trends_section(runs: Sequence[RunEntry], daily: Mapping[str, Sequence[Sequence[Any]]]) -> str:
    """The "Trends" section: per dataset (:func:`series_of`), each metric's mean per run and the
    response time p50 / p95 in seconds; then the inline samples' mean per day (``daily``)."""
    parts = ['<section id="trends"><h2>Trends</h2>']
    groups: dict[str, list[RunEntry]] = {}
    for r in runs:
        groups.setdefault(series_of(r), []).append(r)
    if len(runs) < 2:
        parts.append(
            '<p class="muted">One run on this page: the per-run trend lines start with the second run '
            '(record runs with <code>--db</code>, then <code>ragmeter dashboard</code>).</p>'
        )
        if runs and runs[0].latency:
            parts.append(f'<p class="muted">Response time of this run: {latency_text(runs[0].latency)}.</p>')
    elif len(groups) == 1:
        parts.append(_group(runs, None))
    else:
        parts.append(
            f'<p class="muted">One group of charts per dataset ({len(groups)}): a line never joins the '
            f'runs of two datasets.</p>'
        )
        parts += [_group(group, name) for name, group in groups.items()]
    if daily:
        levels = {m: _levels(runs[-1], m) for m in daily} if runs else {}
        parts.append('<h3>Mean per day <span class="muted">(inline samples, UTC)</span></h3><div class="cards">')
        for m, points in daily.items():
            pts = [(str(p[0]), p[1], int(p[2]), int(p[3])) for p in points]
            parts.append(_card(m, escape(m), trend_chart(m, pts, levels.get(m))))
        parts.append("</div>")
    parts.append("</section>")
    return "".join(parts)


def _select(name: str, label: str, values: Sequence[str], everything: str) -> str:
    opts = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
    return (
        f'<label>{escape(label)} <select id="r-{name}"><option value="">{escape(everything)}</option>{opts}'
        f'</select></label>'
    )


# A run recorded as it is scored that has not ended: its samples so far, not the whole dataset.
INCOMPLETE = (
    '<span class="badge incomplete" title="the run has not ended (killed, or still running): its scores '
    "are those of the samples scored so far; 'ragmeter evaluate ... --db ... --resume' finishes it\">incomplete</span>"
)


def runs_section(runs: Sequence[RunEntry]) -> str:
    """The "Runs" table (newest first: time, kind, dataset, tags, samples, response time p50 /
    p95 in seconds, judge, app version; a run that has not ended marked "incomplete") with the
    page's filters by dataset, kind and tag, which also show only the trend groups holding a chosen
    run; empty text for fewer than two runs."""
    if len(runs) < 2:
        return ""
    datasets = sorted({series_of(r) for r in runs})
    kinds = sorted({r.kind for r in runs})
    tags = sorted({t for r in runs for t in r.tags})
    controls = [
        '<form class="controls" id="run-filters">',
        _select("dataset", "dataset", datasets, "any dataset"),
        _select("kind", "kind", kinds, "any kind"),
    ]
    if tags:
        controls.append(_select("tag", "tag", tags, "any tag"))
    controls.append(
        f'<button type="reset">reset</button><span class="count"><b id="runs-shown">{len(runs)}</b> of '
        f'{len(runs)} runs</span></form>'
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("run", "time (UTC)", "kind", "dataset", "tags", "samples", "p50 s", "p95 s", "judge", "app version")
    )
    rows = []
    for r in reversed(runs):
        when = r.created_at.strftime("%Y-%m-%d %H:%M") if r.created_at else "-"
        lat = r.latency or {}
        cells = [
            escape(r.name) + ("" if r.complete else f" {INCOMPLETE}"),
            when,
            escape(r.kind),
            escape(r.dataset or "-"),
            escape(", ".join(r.tags) or "-"),
            str(r.samples),
            f"{lat['p50_s']:.2f}" if lat else "-",
            f"{lat['p95_s']:.2f}" if lat else "-",
            escape(r.judge or "-"),
            escape(r.app_version or "-"),
        ]
        data = (
            f' data-run="{escape(r.id)}" data-series="{escape(series_of(r))}" data-kind="{escape(r.kind)}" '
            f'data-tags="{escape(json.dumps(r.tags))}" data-complete="{str(r.complete).lower()}"'
        )
        rows.append(f"<tr{data}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return (
        f'<section id="runs"><h2>Runs <span class="muted">(newest first; the filters also choose the trend '
        f'groups)</span></h2>{"".join(controls)}<table id="runs-table"><thead><tr>{head}</tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table></section>'
    )
