"""Internal: Inline SVG charts for the dashboard: pass / warn / fail bars, trend lines and histograms.

Each function returns one ``<svg>`` element as text. Colours come from the page's CSS classes
(``s-pass``, ``s-warn``, ``s-fail``, ``s-error``, ``s-na``); every mark carries a ``<title>``
with its numbers, so the charts read without JavaScript and with a screen reader.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from ragmeter.data import label_for

__all__ = ["status_bar", "trend_chart", "histogram", "nice_ceiling"]

_STATUSES = (("pass", "pass"), ("warn", "warn"), ("fail", "fail"), ("errors", "error"), ("n/a", "na"))


def _n(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def status_bar(row: dict[str, Any], width: int = 160, height: int = 14) -> str:
    """A stacked bar of a summary row's pass / warn / fail / errors / n/a counts."""
    counts = [(key, cls, int(row.get(key) or 0)) for key, cls in _STATUSES]
    total = sum(c for _, _, c in counts)
    label = ", ".join(f"{c} {key}" for key, _, c in counts if c) or "no scores"
    parts = [
        f'<svg class="bar" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(label)}">',
        f'<rect class="s-empty" width="{width}" height="{height}" rx="2"/>',
    ]
    x = 0.0
    for key, cls, c in counts:
        if not c:
            continue
        w = width * c / total
        parts.append(
            f'<rect class="s-{cls}" x="{_n(x)}" width="{_n(w)}" height="{height}">'
            f'<title>{c} {escape(key)} ({100 * c / total:.0f}%)</title></rect>'
        )
        x += w
    parts.append("</svg>")
    return "".join(parts)


def _levels(levels: tuple[float, float] | None, y: Any, x0: float, x1: float) -> list[str]:
    if not levels:
        return []
    out = []
    for name, v in zip(("pass", "warn"), levels):
        out.append(
            f'<line class="lvl lvl-{name}" x1="{x0}" x2="{x1}" y1="{_n(y(v))}" y2="{_n(y(v))}">'
            f'<title>{name} level {v:g}</title></line>'
        )
    return out


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is >= ``value`` (an axis' top)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value - 1e-12)


def trend_chart(
    metric: str,
    points: Sequence[tuple[str, float | None, int, int]],
    levels: tuple[float, float] | None = None,
    width: int = 300,
    height: int = 140,
    *,
    y_max: float = 1.0,
    unit: str = "",
    stat: str = "mean",
) -> str:
    """A line of a metric's mean over runs or days: ``points`` are (label, mean, count, errors),
    oldest first; a point without a mean breaks the line. Dashed lines mark the pass / warn
    levels. The y axis runs from 0 to ``y_max`` (1 for scores; seconds for response times, with
    ``unit="s"`` and ``stat`` naming the value, e.g. ``"p95"``)."""
    left, right, top, bottom = 30, 10, 10, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(points)

    def x(i: int) -> float:
        return left + (plot_w / 2 if n == 1 else plot_w * i / (n - 1))

    def y(v: float) -> float:
        return top + plot_h * (1 - v / y_max)

    parts = [
        f'<svg class="chart trend" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(metric)} {escape(stat)} over {n} points" data-metric="{escape(metric)}">'
    ]
    for v in (0.0, y_max / 2, y_max):
        parts.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{_n(y(v))}" y2="{_n(y(v))}"/>'
            f'<text class="tick" x="{left - 4}" y="{_n(y(v) + 3)}" text-anchor="end">{v:g}{unit}</text>'
        )
    parts += _levels(levels, y, left, width - right)
    segments: list[list[str]] = [[]]
    for i, (_, mean, _, _) in enumerate(points):
        if mean is None:
            segments.append([])
        else:
            segments[-1].append(f"{_n(x(i))},{_n(y(mean))}")
    parts += [f'<polyline class="line" points="{" ".join(s)}"/>' for s in segments if len(s) > 1]
    for i, (label, mean, count, errors) in enumerate(points):
        if mean is None:
            continue
        cls = "pt" if not levels else f"pt s-{label_for(mean, *levels)}"
        err = f", {errors} errors" if errors else ""
        shown = f"{mean:.2f} {unit}" if unit else f"{mean:.4f}"
        parts.append(
            f'<circle class="{cls}" cx="{_n(x(i))}" cy="{_n(y(mean))}" r="3.5">'
            f'<title>{escape(label)}: {escape(stat)} {escape(shown)} ({count} values{err})</title></circle>'
        )
    if points:
        first, last = escape(points[0][0][:18]), escape(points[-1][0][:18])
        parts.append(
            f'<text class="tick" x="{_n(x(0))}" y="{height - 12}" text-anchor="{"middle" if n == 1 else "start"}">{first}</text>'
        )
        if n > 1:
            parts.append(f'<text class="tick" x="{_n(x(n - 1))}" y="{height - 12}" text-anchor="end">{last}</text>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(
    values: Sequence[float],
    levels: tuple[float, float] | None = None,
    bins: int = 10,
    width: int = 300,
    height: int = 120,
) -> str:
    """A histogram of values in [0, 1] in ``bins`` equal bins (the last one includes 1.0); each
    bar is coloured by the most common label of its values, dashed lines mark the levels."""
    left, right, top, bottom = 10, 10, 14, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    members: list[list[float]] = [[] for _ in range(bins)]
    for v in values:
        members[min(bins - 1, int(v * bins))].append(v)
    counts = [len(m) for m in members]
    peak = max(counts) or 1
    bw = plot_w / bins
    parts = [
        f'<svg class="chart hist" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="distribution of {len(values)} values">'
    ]
    for name, v in zip(("pass", "warn"), levels or ()):
        px = _n(left + plot_w * v)
        parts.append(
            f'<line class="lvl lvl-{name}" x1="{px}" x2="{px}" y1="{top}" y2="{top + plot_h}">'
            f'<title>{name} level {v:g}</title></line>'
        )
    for i, c in enumerate(counts):
        lo, hi = i / bins, (i + 1) / bins
        labels = [label_for(v, *levels) for v in members[i]] if levels else []
        cls = f"s-{max(labels, key=labels.count)}" if labels else "s-na"
        h = plot_h * c / peak
        parts.append(
            f'<rect class="{cls}" x="{_n(left + i * bw + 1)}" y="{_n(top + plot_h - h)}" width="{_n(bw - 2)}" '
            f'height="{_n(h)}"><title>{lo:.1f}-{hi:.1f}: {c} value{"" if c == 1 else "s"}</title></rect>'
        )
        if c:
            parts.append(
                f'<text class="tick" x="{_n(left + (i + 0.5) * bw)}" y="{_n(top + plot_h - h - 2)}" '
                f'text-anchor="middle">{c}</text>'
            )
    parts.append(f'<line class="axis" x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}"/>')
    for v, anchor in ((0.0, "start"), (0.5, "middle"), (1.0, "end")):
        parts.append(
            f'<text class="tick" x="{_n(left + plot_w * v)}" y="{height - 6}" text-anchor="{anchor}">{v:g}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
