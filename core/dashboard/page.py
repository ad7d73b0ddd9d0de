"""Internal: The dashboard page: :func:`render` (many runs and samples) and :func:`render_result` (one run).

The page is one HTML file with its CSS and script inlined from the package's ``assets/``
folder: no CDN, no network, it opens from ``file://`` or a CI artifact. The summary, charts and
drill-downs are plain HTML and inline SVG (readable without JavaScript); the script only
filters and sorts the sample list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from ragmeter.dashboard.agreement import agreement_section
from ragmeter.dashboard.charts import histogram, status_bar
from ragmeter.dashboard.conversations import conversations_section
from ragmeter.dashboard.drilldown import drilldown, fmt
from ragmeter.dashboard.model import RunEntry, SampleEntry, SampleView, Verdicts, sample_views
from ragmeter.dashboard.runs import INCOMPLETE, latency_text, runs_section, trends_section
from ragmeter.dashboard.shell import asset, page_html
from ragmeter.dashboard.sweeps import sweeps_section
from ragmeter.dashboard.trust import trust_section
from ragmeter.data import label_for
from ragmeter.judges.base import Usage
from ragmeter.result import EvaluationResult
from ragmeter.verdicts import GRADE_THRESHOLDS, diagnosis_rule

__all__ = ["render", "render_result", "SUMMARY_COLUMNS"]

#: The summary table's numeric columns, in order (keys of ``EvaluationResult.summary()`` rows).
SUMMARY_COLUMNS = ("count", "mean", "median", "std", "min", "max", "errors", "n/a")
_DIAGNOSES = ("retrieval", "generation", "both", "fine", "unknown")
_LABELS = ("pass", "warn", "fail", "error", "n/a")


def _cell(value: Any) -> str:
    return fmt(value) if isinstance(value, float) else ("-" if value is None else str(value))


def _levels(run: RunEntry, metric: str) -> tuple[float, float] | None:
    pair = run.thresholds.get(metric)
    return (float(pair[0]), float(pair[1])) if pair else None


def _usage_text(u: Usage) -> str:
    cost = f"${u.cost_usd:.4f}" if u.cost_usd is not None else ("$0" if u.calls == 0 else "unknown")
    return (
        f"judge calls {u.calls} (cached {u.cached}, retries {u.retries}), tokens {u.prompt_tokens} prompt + "
        f"{u.completion_tokens} completion, cost {cost}"
    )


# --------------------------------------------------------------------------- sections


_SECTION = re.compile(r'<section id="([a-z-]+)"[^>]*><h2>([^<]+)')


def _nav(sections: Iterable[str]) -> str:
    """Links to the sections the page has, in page order (a section absent from the page has none)."""
    links = [
        f'<a href="#{m.group(1)}">{m.group(2).strip()}</a>'
        for m in (_SECTION.match(s) for s in sections)
        if m and m.group(1) != "invalid"
    ]
    return f"<nav>{' '.join(links)}</nav>"


def _header(title: str, runs: Sequence[RunEntry], views: list[SampleView], nav: str) -> str:
    latest = runs[-1]
    facts = [
        f"{len(runs)} run{'s' if len(runs) != 1 else ''}",
        f"{len(views)} samples shown",
        f"latest: {escape(latest.name)}" + ("" if latest.complete else f" {INCOMPLETE}"),
    ]
    for key in ("kind", "dataset", "judge", "app_version", "git_commit"):
        value = getattr(latest, key)
        if value:
            facts.append(f"{key.replace('_', ' ')} {escape(str(value)[:40])}")
    for line in latest.judges:  # each judge's fingerprint: id shown, its fields on hover
        fid, _, fields = line.partition(": ")
        facts.append(f'<span class="fingerprint" title="{escape(fields)}">fingerprint {escape(fid)}</span>')
    if latest.created_at is not None:
        facts.append(escape(latest.created_at.isoformat(timespec="seconds")))
    if latest.usage is not None:
        facts.append(escape(_usage_text(latest.usage)))
    if latest.duration_s is not None:
        facts.append(f"time {latest.duration_s:.2f} s")
    if latest.invalid:
        facts.append(f'<a href="#invalid">{len(latest.invalid)} invalid records</a>')
    if latest.latency:
        facts.append(f"response time {latency_text(latest.latency)}")
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return (
        f'<header><h1>{escape(title)}</h1><p class="facts">{" · ".join(facts)}</p>'
        f'<p class="muted small">generated {generated} by ragmeter</p>{nav}</header>'
    )


def _header_sweeps(title: str, sweeps: Sequence[Any], nav: str) -> str:
    settings = sum(len(s.settings) for s in sweeps)
    facts = [f"{len(sweeps)} sweep{'s' if len(sweeps) != 1 else ''} ({settings} settings)", "no evaluation run"]
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return (
        f'<header><h1>{escape(title)}</h1><p class="facts">{" · ".join(facts)}</p>'
        f'<p class="muted small">generated {generated} by ragmeter</p>{nav}</header>'
    )


def _summary(run: RunEntry, views: list[SampleView]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in SUMMARY_COLUMNS)
    rows = []
    for metric, row in run.summary.items():
        levels = _levels(run, metric)
        mean = row.get("mean")
        cls = f' class="num {label_for(mean, *levels)}"' if levels and mean is not None else ' class="num"'
        cells = "".join(
            f'<td data-stat="{escape(c)}"{cls if c == "mean" else " class=num"}>{_cell(row.get(c))}</td>'
            for c in SUMMARY_COLUMNS
        )
        counts = " · ".join(
            f'<span class="lab {k}">{int(row.get(k) or 0)} {k}</span>' for k in ("pass", "warn", "fail")
        )
        level = f"pass ≥ {levels[0]:g}, warn ≥ {levels[1]:g}" if levels else ""
        rows.append(
            f'<tr data-metric="{escape(metric)}"><th scope="row" title="{escape(level)}">{escape(metric)}</th>'
            f'{cells}<td class="bars">{status_bar(row)} {counts}</td></tr>'
        )
    table = (
        f'<table id="summary-table"><thead><tr><th>metric</th>{head}<th>pass / warn / fail</th></tr></thead>'
        f'<tbody>{"".join(rows)}</tbody></table>'
    )
    return (
        f'<section id="summary"><h2>Summary <span class="muted">({escape(run.name)}, {run.samples} samples)</span>'
        f'</h2>{table}{_latency(run)}{_verdict_counts(views)}</section>'
    )


def _latency(run: RunEntry) -> str:
    """The run's response times in seconds, as Langfuse and Phoenix show latency (empty without one)."""
    lat = run.latency
    if not lat:
        return ""
    return (
        f'<p class="latency" id="latency">Response time <span class="muted">(seconds, {lat["count"]} samples with '
        f'a captured latency)</span>: p50 <b data-latency="p50">{lat["p50_s"]:.2f}</b> s · p95 '
        f'<b data-latency="p95">{lat["p95_s"]:.2f}</b> s · max <b data-latency="max">{lat["max_s"]:.2f}</b> s</p>'
    )


def _verdict_counts(views: list[SampleView]) -> str:
    if not views:
        return ""
    diag = {k: sum(v.diagnosis.kind == k for v in views) for k in _DIAGNOSES}
    grades = {g: sum(v.grade == g for v in views) for g in [g for g, _ in GRADE_THRESHOLDS] + ["F"]}
    cuts = ", ".join(f"{g} ≥ {lo:g}" for g, lo in GRADE_THRESHOLDS) + ", else F"
    d_cells = "".join(
        f'<td><span class="diag d-{k}">{k}</span> <b data-diagnosis="{k}">{n}</b></td>' for k, n in diag.items()
    )
    g_cells = "".join(
        f'<td><span class="grade g-{g}">{g}</span> <b data-grade="{g}">{n}</b></td>' for g, n in grades.items()
    )
    return (
        f'<h3>Verdicts <span class="muted">(over the {len(views)} samples shown)</span></h3>'
        f'<table class="verdicts"><tr><th>diagnosis</th>{d_cells}</tr><tr><th>grade</th>{g_cells}</tr></table>'
        f'<p class="rule">Diagnosis rule: {escape(diagnosis_rule())} Grades of the composite score: {escape(cuts)}.</p>'
    )


def _daily_points(runs: Sequence[RunEntry], views: list[SampleView]) -> dict[str, list[tuple]]:
    """Per metric: (UTC day, mean, count, errors) of the samples of inline runs, oldest day first."""
    inline = {r.id for r in runs if r.kind == "inline"}
    per: dict[str, dict[str, list]] = {}
    for v in views:
        if v.run_id not in inline or v.created_at is None:
            continue
        day = (
            v.created_at.astimezone(UTC).date().isoformat() if v.created_at.tzinfo else v.created_at.date().isoformat()
        )
        for metric, s in v.scores.items():
            bucket = per.setdefault(metric, {}).setdefault(day, [[], 0])
            if s.value is not None:
                bucket[0].append(s.value)
            bucket[1] += s.status == "error"
    return {
        m: [(day, sum(vals) / len(vals) if vals else None, len(vals), err) for day, (vals, err) in sorted(days.items())]
        for m, days in per.items()
    }


def _distributions(run: RunEntry, views: list[SampleView]) -> str:
    parts = [
        f'<section id="distributions"><h2>Distributions <span class="muted">({escape(run.name)})</span></h2>'
        '<div class="cards">'
    ]
    composite = [v.composite for v in views if v.composite is not None]
    cuts = dict(GRADE_THRESHOLDS)
    if composite:
        parts.append(
            f'<figure class="card"><figcaption>composite score <span class="muted">({len(composite)} samples '
            f'shown; green: grade A-B, amber: C-D, red: F)</span></figcaption>{histogram(composite, (cuts["B"], cuts["D"]))}'
            '</figure>'
        )
    for m, values in run.values.items():
        parts.append(
            f'<figure class="card"><figcaption>{escape(m)} <span class="muted">({len(values)} values)</span>'
            f'</figcaption>{histogram(values, _levels(run, m))}</figure>'
        )
    parts.append("</div></section>")
    return "".join(parts)


def _metric_cell(view: SampleView, metric: str) -> str:
    s = view.scores.get(metric)
    if s is None:
        return '<span class="v none">·</span>'
    if s.value is None:
        kind = "error" if s.error else "na"
        return f'<span class="v {kind}" title="{escape(s.error or s.explanation)}">{"err" if s.error else "n/a"}</span>'
    return f'<span class="v {s.label or ""}" title="{escape(metric)}: {s.value:.4f}">{s.value:.2f}</span>'


def _row_data(view: SampleView, metrics: list[str]) -> str:
    labels = {}
    for m in metrics:
        s = view.scores.get(m)
        if s is not None:
            labels[m] = s.label or ("error" if s.error else "n/a")
    data = {
        "i": view.index,
        "id": view.id,
        "composite": view.composite,
        "diagnosis": view.diagnosis.kind,
        "tags": view.tags,
        "labels": labels,
        "values": {m: view.scores[m].value for m in metrics if m in view.scores},
    }
    return escape(json.dumps(data, allow_nan=False, ensure_ascii=False))


def _options(name: str, values: Iterable[str], everything: str) -> str:
    opts = "".join(f'<option value="{escape(v)}">{escape(v)}</option>' for v in values)
    return f'<label>{escape(name)} <select id="f-{escape(name)}"><option value="">{escape(everything)}</option>{opts}</select></label>'


def _samples(views: list[SampleView], metrics: list[str]) -> str:
    has_tags = any(v.tags for v in views)
    tags = sorted({t for v in views for t in v.tags})
    fixed = [1.0, 9.6, 6.2, 9.0] + [4.6] * len(metrics) + [9.0] * has_tags
    cols = [f"{w:g}rem" for w in fixed[:4]] + ["minmax(14rem, 1fr)"] + [f"{w:g}rem" for w in fixed[4:]]
    min_width = f"calc({sum(fixed) + 14:g}rem + {8 * len(fixed) + 20}px)"  # every row as wide: 1fr is the same in each
    head = [
        '<span></span>',
        '<button type="button" data-sort="composite" aria-sort="ascending">score</button>',
        '<button type="button" data-sort="diagnosis">diagnosis</button>',
        '<button type="button" data-sort="id">sample</button>',
        '<span>question</span>',
    ]
    head += [
        f'<button type="button" data-sort="m:{escape(m)}" title="{escape(m)}">{escape(m.replace("_", " "))}</button>'
        for m in metrics
    ]
    head += ["<span>tags</span>"] * has_tags
    controls = (
        '<form class="controls" id="filters">'
        + _options("metric", metrics, "any metric")
        + _options("label", _LABELS, "any label")
        + _options("diagnosis", _DIAGNOSES, "any diagnosis")
        + (_options("tag", tags, "any tag") if tags else "")
        + '<label>search <input id="f-search" type="search" placeholder="question or id"></label>'
        + '<button type="reset" id="f-reset">reset</button>'
        + f'<span class="count"><b id="shown">{len(views)}</b> of {len(views)} samples</span>'
        + '<button type="button" id="expand">expand shown</button><button type="button" id="collapse">collapse all</button>'
        + '</form>'
    )
    rows = []
    for v in sorted(
        views, key=lambda v: (v.composite is None, v.composite if v.composite is not None else 0.0, v.index)
    ):
        grade = v.grade or "-"
        weakest = (
            f'<span class="weakest" title="the weakest metric of the composite: {escape(v.weakest[0])} '
            f'{v.weakest[1]:.4f}">{escape(v.weakest[0].replace("_", " "))} {v.weakest[1]:.2f}</span>'
            if v.weakest and v.weakest[1] < 1.0
            else ""
        )
        cells = [
            '<span class="caret"></span>',
            f'<span class="score"><span class="grade g-{grade if v.grade else "none"}">{grade}</span> {fmt(v.composite, 2)}'
            f'{weakest}</span>',
            f'<span><span class="diag d-{v.diagnosis.kind}">{v.diagnosis.kind}</span></span>',
            f'<span class="sid" title="{escape(v.id)}">{escape(v.id)}</span>',
            f'<span class="q">{escape(v.result.sample.question)}</span>',
        ]
        cells += [_metric_cell(v, m) for m in metrics]
        if has_tags:
            cells.append(
                '<span class="tags">' + " ".join(f'<span class="tag">{escape(t)}</span>' for t in v.tags) + "</span>"
            )
        rows.append(
            f'<details class="sample" id="sample-{v.index}" data-row="{_row_data(v, metrics)}">'
            f'<summary class="row">{"".join(cells)}</summary>{drilldown(v)}</details>'
        )
    return (
        f'<section id="samples"><h2>Samples <span class="muted">(worst composite score first; click a row for '
        f'its evidence)</span></h2>{controls}<div class="list" style="--cols: {" ".join(cols)}; --min-width: {min_width}">'
        f'<div class="row head">{"".join(head)}</div><div id="rows">{"".join(rows)}</div></div></section>'
    )


def _invalid(run: RunEntry) -> str:
    if not run.invalid:
        return ""
    items = "".join(f"<li>{escape(e)}</li>" for e in run.invalid)
    return f'<section id="invalid"><h2>Invalid records ({len(run.invalid)})</h2><ul>{items}</ul></section>'


# --------------------------------------------------------------------------- pages


def render(
    runs: Sequence[RunEntry],
    samples: Iterable[Any],
    *,
    title: str = "ragmeter dashboard",
    verdicts: Verdicts | None = None,
    daily: Mapping[str, Sequence[Sequence[Any]]] | None = None,
    agreement: Mapping[str, Any] | None = None,
    leniency: Mapping[str, Sequence[Any]] | None = None,
    sweeps: Sequence[Any] = (),
    trust: Mapping[str, Any] | None = None,
    drift: Mapping[str, Any] | None = None,
) -> str:
    """The dashboard page as HTML text.

    ``runs``: :class:`RunEntry` objects, oldest first; the last one is the summary's and the
    distributions' run, all of them draw the trend lines. ``samples``: :class:`SampleEntry`
    objects (or :class:`ragmeter.store.StoredSample`, same attributes), listed worst composite
    score first with their drill-downs. ``verdicts`` sets the composite method and weights, the
    diagnosis' low labels and the response time levels. ``daily``: per metric the points
    (UTC day, mean, count, errors) of the "over time" chart, e.g. ``Store.metric_trend(m,
    by="day")``; without it they are computed from the given samples of inline runs.
    ``agreement`` / ``leniency``: the "Human labels" section (:mod:`ragmeter.dashboard.agreement`).
    ``sweeps``: :class:`~ragmeter.dashboard.sweeps.SweepEntry` objects, the "Sweeps" section
    (with no run, the page is that section alone). ``trust`` / ``drift``: the "Trust" section
    (:mod:`ragmeter.dashboard.trust`): the latest run's trust card (its dict) and the judge's shift
    on the anchor set. Raises ValueError when ``runs`` and ``sweeps`` are both empty.
    """
    runs = list(runs)
    if not runs and not sweeps:
        raise ValueError("the dashboard needs at least one run or sweep")
    verdicts = verdicts or Verdicts()
    views = sample_views(samples, verdicts)
    if not runs:  # a store of sweeps only: their settings are no runs to trend or summarise
        sections = [sweeps_section(sweeps)]
        header = _header_sweeps(title, sweeps, _nav(sections))
    else:
        latest = runs[-1]
        metrics = list(latest.summary) + [
            m for m in dict.fromkeys(m for v in views for m in v.scores) if m not in latest.summary
        ]
        daily = dict(daily) if daily is not None else _daily_points(runs, views)
        sections = [
            _summary(latest, views),
            trends_section(runs, daily),
            runs_section(runs),
            sweeps_section(sweeps),
            _distributions(latest, views),
            conversations_section(views, metrics),
            _samples(views, metrics),
            agreement_section(agreement or {}, leniency),
            trust_section(trust, drift),
            _invalid(latest),
        ]
        header = _header(title, runs, views, _nav(sections))
    body = "".join([header, "<main>", *sections, "</main>"])
    return page_html(title, body, asset("dashboard.js"))


def render_result(
    result: EvaluationResult,
    *,
    title: str = "ragmeter report",
    verdicts: Verdicts | None = None,
    trust: Mapping[str, Any] | None = None,
) -> str:
    """The dashboard page of one run (what ``ragmeter evaluate --out report.html`` writes);
    ``trust``: its trust card (:meth:`ragmeter.trust.TrustCard.to_dict`), shown in a panel."""
    run = RunEntry.from_result(result, verdicts=verdicts)
    return render([run], SampleEntry.from_result(result, run.id), title=title, verdicts=verdicts, trust=trust)
