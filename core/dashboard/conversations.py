"""Internal: The dashboard's "Conversations" section: the samples of chat turns grouped by conversation.

Per conversation (per run when the page shows several): the turns in order with their score (the
composite score and grade; without a composite, e.g. deterministic metrics only, the first metric
with values), each a link to the sample's row, the turns without retrieval marked, the worst turn,
the trend (least-squares slope of the score over the turn number) and whether quality falls over
the conversation (:func:`ragmeter.conversations.conversation_results`), and, folded, every metric
turn by turn. Plain HTML: readable without JavaScript.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

from ragmeter.conversations import conversation_results, no_retrieval_turn
from ragmeter.dashboard.drilldown import fmt
from ragmeter.dashboard.model import SampleView

__all__ = ["conversations_section", "MAX_CONVERSATIONS", "FALLING_TOLERANCE"]

#: Conversations listed at most (the worst first); the section says how many more there are.
MAX_CONVERSATIONS = 200
#: A conversation is "falling" when its composite score drops by more than this per turn.
FALLING_TOLERANCE = 0.05


def _primary(views: Sequence[SampleView], metrics: Sequence[str]) -> tuple[str, Callable[[SampleView], float | None]]:
    """What a turn's score is: the composite score when any turn has one, else the first metric
    with a value (deterministic metrics make no composite)."""
    if any(v.composite is not None for v in views):
        return "composite", lambda v: v.composite
    for m in metrics:
        if any(v.scores.get(m) is not None and v.scores[m].value is not None for v in views):
            return m, lambda v, _m=m: v.scores[_m].value if v.scores.get(_m) is not None else None
    return "composite", lambda v: v.composite


def _turn_chip(view: SampleView, turn: int, value: float | None, metric: str) -> str:
    sample = view.result.sample
    if metric == "composite":
        chip = f'<span class="grade g-{view.grade or "none"}">{turn}</span>'
    else:
        s = view.scores.get(metric)
        chip = f'<span class="v {(s.label if s is not None and s.value is not None else None) or "na"}">{turn}</span>'
    extra = ' <span class="tag">no retrieval</span>' if no_retrieval_turn(sample) else ""
    title = f"turn {turn}: {sample.question}"
    return (
        f'<a class="turn" href="#sample-{view.index}" data-turn="{turn}" data-sample="{escape(view.id)}" '
        f'data-value="{"" if value is None else f"{value:.4f}"}" title="{escape(title[:300])}">{chip} '
        f'{fmt(value, 2)}{extra}</a>'
    )


def _metric_table(rows: list[tuple[int, SampleView]], metrics: Sequence[str]) -> str:
    head = "".join(f"<th>turn {t}</th>" for t, _ in rows)
    lines = []
    for m in metrics:
        cells = []
        for _, v in rows:
            s = v.scores.get(m)
            if s is None:
                cells.append('<td><span class="v none">·</span></td>')
            elif s.value is None:
                why = s.error or s.explanation
                cells.append(
                    f'<td><span class="v {"error" if s.error else "na"}" title="{escape(why)}">'
                    f'{"err" if s.error else "n/a"}</span></td>'
                )
            else:
                cells.append(f'<td><span class="v {s.label or ""}">{s.value:.2f}</span></td>')
        lines.append(f'<tr data-metric="{escape(m)}"><th scope="row">{escape(m)}</th>{"".join(cells)}</tr>')
    return (
        f'<details class="conv-metrics"><summary>every metric, turn by turn</summary><table class="mini">'
        f'<thead><tr><th>metric</th>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table></details>'
    )


def conversations_section(views: Sequence[SampleView], metrics: Sequence[str] = ()) -> str:
    """The section's HTML, or "" when no sample belongs to a conversation. ``metrics``: the
    metrics listed turn by turn (default: every metric the turns have)."""
    groups: dict[tuple, list[SampleView]] = {}
    for v in views:
        conv = v.result.sample.conversation_id
        if conv is not None:
            groups.setdefault((v.run_id, conv), []).append(v)
    if not groups:
        return ""
    several_runs = len({run for run, _ in groups}) > 1
    names = list(metrics) or list(dict.fromkeys(m for g in groups.values() for v in g for m in v.scores))
    primary, value_of = _primary([v for g in groups.values() for v in g], names)
    entries = []
    for (run, conv), group in groups.items():
        by_id = {id(v.result): v for v in group}

        def turn_value(r: object, _m: dict[int, SampleView] = by_id) -> float | None:
            return value_of(_m[id(r)])

        [res] = conversation_results([v.result for v in group], primary, FALLING_TOLERANCE, value=turn_value)
        by_sample: dict[str, SampleView] = {}
        for v in group:
            by_sample.setdefault(v.id, v)
        rows = [(t, by_sample[sid]) for t, sid, _ in res.turns]
        entries.append((run, conv, res, rows))
    entries.sort(key=lambda e: (not e[2].falling, e[2].worst[2] if e[2].worst else 2.0, str(e[1])))
    shown = entries[:MAX_CONVERSATIONS]
    body = []
    for run, conv, res, rows in shown:
        chips = " ".join(_turn_chip(v, t, value, primary) for (t, v), (_, _, value) in zip(rows, res.turns))
        if res.worst:
            t, sid, value = res.worst
            worst = next(v for tt, v in rows if tt == t and v.id == sid)
            worst_cell = f'<a href="#sample-{worst.index}" data-worst="{t}">turn {t}</a> ({fmt(value, 2)})'
        else:
            worst_cell = "-"
        trend = "-" if res.slope is None else f"{res.slope:+.3f} / turn"
        state = (
            '<span class="lab fail" data-falling="true">falling</span>'
            if res.falling
            else '<span class="lab pass" data-falling="false">steady</span>'
            if res.slope is not None
            else '<span class="lab na" data-falling="false">one scored turn</span>'
        )
        no_ret = sum(no_retrieval_turn(v.result.sample) for _, v in rows)
        run_cell = f'<td>{escape(str(run))}</td>' if several_runs else ""
        body.append(
            f'<tr class="conversation" data-conversation="{escape(str(conv))}">{run_cell}'
            f'<td class="sid">{escape(str(conv))}</td><td class="num">{len(rows)}</td>'
            f'<td class="num">{no_ret}</td><td class="turns">{chips}{_metric_table(rows, names)}</td>'
            f'<td>{worst_cell}</td><td class="num">{trend}</td><td>{state}</td></tr>'
        )
    falling = sum(e[2].falling for e in entries)
    more = (
        f'<p class="muted">{len(entries) - len(shown)} more conversations not listed (the {len(shown)} worst are).</p>'
        if len(entries) > len(shown)
        else ""
    )
    run_head = "<th>run</th>" if several_runs else ""
    what = "composite score" if primary == "composite" else escape(primary)
    return (
        f'<section id="conversations" data-metric="{escape(primary)}"><h2>Conversations <span class="muted">'
        f'({len(entries)} conversations, {falling} falling; {what} per turn, worst conversations first; '
        f'falling: the least-squares slope of the {what} over the turn number is below '
        f'-{FALLING_TOLERANCE:g} per turn)</span></h2>'
        f'<table id="conversations-table"><thead><tr>{run_head}<th>conversation</th><th>turns</th>'
        f'<th>no retrieval</th><th>turn scores</th><th>worst turn</th><th>trend</th><th>quality</th></tr></thead>'
        f'<tbody>{"".join(body)}</tbody></table>{more}</section>'
    )
