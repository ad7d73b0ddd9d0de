"""Internal: Reports: summary tables in plain text and Markdown (the HTML page is :mod:`ragmeter.dashboard`,
comparisons of two runs :mod:`ragmeter.comparison`).

Functions take an :class:`~ragmeter.result.EvaluationResult` (anything with its ``summary()``,
``results``, ``usage`` ...); this module does not import it, so results and reports depend one
way (``result`` -> ``report``)."""

from __future__ import annotations

from typing import Any

from ragmeter.conversations import conversation_results
from ragmeter.profiles import get_profile, relevance_band, relevance_metrics

__all__ = ["summary_rows", "conversation_rows", "relevance_lines", "latency_line", "text_table", "markdown_report"]

_HEADER = ["metric", "mean", "median", "min", "max", "pass", "warn", "fail", "errors", "n/a"]


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4f}"
    return str(v)


def summary_rows(result: Any) -> list[list[str]]:
    """The summary as rows of strings: one row per metric, columns as in :data:`_HEADER`."""
    rows = []
    for metric, s in result.summary().items():
        rows.append([metric] + [_fmt(s[k]) for k in _HEADER[1:]])
    return rows


_CONVERSATION_HEADER = ["conversation", "metric", "turns", "worst turn", "slope/turn", "falling"]


def conversation_rows(result: Any) -> list[list[str]]:
    """One row per conversation and metric (columns as in ``_CONVERSATION_HEADER``): the turn
    values in turn order (``2: 0.8000``), the worst turn, the slope of the value over the turns and
    whether it falls (see :func:`ragmeter.conversations.conversation_results`). Empty when no
    sample has a conversation id."""
    if not any(r.sample.conversation_id for r in result.results):
        return []
    rows = []
    for metric in result.metrics:
        for c in conversation_results(result.results, metric):
            turns = ", ".join(f"{t}: {_fmt(v)}" for t, _, v in c.turns)
            worst = f"{c.worst[0]} ({_fmt(c.worst[2])})" if c.worst else "-"
            rows.append([c.conversation_id, metric, turns, worst, _fmt(c.slope), "yes" if c.falling else "no"])
    order = {c: i for i, c in enumerate(dict.fromkeys(r.sample.conversation_id for r in result.results))}
    rows.sort(key=lambda row: order[row[0]])  # stable: metrics stay in run order within a conversation
    return rows


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """A fixed-width text table."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)] if rows else [len(h) for h in header]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(x.rstrip() for x in out)


def _usage_line(result: Any) -> str:
    u = result.usage
    if u.cost_usd is not None:
        cost = f"${u.cost_usd:.4f}"
    elif u.calls == 0:
        cost = "$0 (no paid calls)"
    else:
        cost = "unknown (no price for this model)"
    per = f" ({u.calls / len(result):.1f} per sample)" if len(result) else ""
    saved = f", LLM calls saved by the cascade: {u.saved_calls}" if u.saved_calls else ""
    return (
        f"judge calls: {u.calls}{per}, cached: {u.cached}, retries: {u.retries}, "
        f"embedding calls: {u.embedding_calls}, tokens: {u.prompt_tokens} prompt + "
        f"{u.completion_tokens} completion, cost: {cost}{saved}"
    )


def latency_line(result: Any) -> str | None:
    """``"response time: p50 1.20 s, p95 3.40 s, max 4.10 s (20 samples)"``: the app's response
    times captured on the samples (see :func:`ragmeter.verdicts.latency_summary`), None when no
    sample carries one."""
    from ragmeter.verdicts import run_latency  # it imports the result module, which imports this one

    lat = run_latency(result.results)
    if lat is None:
        return None
    return (
        f"response time: p50 {lat['p50_s']:.2f} s, p95 {lat['p95_s']:.2f} s, max {lat['max_s']:.2f} s "
        f"({lat['count']} samples)"
    )


def judge_lines(result: Any) -> list[str]:
    """One line per judge fingerprint of ``result`` (the metrics that need no judge left out):
    ``"94b632263819: offline, endpoint local, embedder local:all-MiniLM-L6-v2, rules 78a5..., ragmeter 0.1.0"``."""
    from ragmeter.judges.fingerprint import CODE_FINGERPRINT, JudgeFingerprint

    lines = []
    for fid, d in result.judges.items():
        if fid == CODE_FINGERPRINT.id:
            continue
        fp = JudgeFingerprint.from_dict(d)
        parts = [fp.name] + [
            f"{k} {v}"
            for k, v in (
                ("endpoint", fp.endpoint),
                ("prompts", fp.prompts),
                ("temperature", fp.temperature),
                ("seed", fp.seed),
                ("rules", fp.rules),
                ("embedder", fp.embedder),
            )
            if v is not None
        ]
        if fp.members:
            parts.append("members " + ", ".join(f"{m.name} ({m.id})" for m in fp.members))
        lines.append(f"{fid}: {', '.join(parts)}, ragmeter {fp.ragmeter}")
    return lines


def repeat_lines(result: Any) -> list[str]:
    """What the judge's repeats found (``evaluate(..., repeats=k)``, :mod:`ragmeter.trust.repeats`):
    per metric, the scores repeated, the extra judge calls and the unstable ones; nothing
    without repeats."""
    lines = []
    for metric in result.metrics:
        runs = [
            (r.sample.id, s.details["repeats"])
            for r in result
            for s in [r.scores.get(metric)]
            if s is not None and isinstance(s.details.get("repeats"), dict)
        ]
        if not runs:
            continue
        unstable = [str(sid) for sid, rep in runs if rep.get("unstable")]
        calls = sum(int(rep.get("calls") or 0) for _, rep in runs)
        shown = ", ".join(unstable[:10]) + (f" (+{len(unstable) - 10} more)" if len(unstable) > 10 else "")
        lines.append(
            f"repeats: {metric}: {len(runs)} scores asked {max(rep['k'] for _, rep in runs)} times "
            f"({calls} extra judge calls); {len(unstable)} unstable" + (f": {shown}" if unstable else "")
        )
    return lines


def relevance_lines(result: Any) -> list[str]:
    """The relevance band of each relevance metric's mean (see
    :func:`ragmeter.profiles.relevance_band`) under the run's profile (``result.profile``, else
    the default), as one Markdown line with the band levels; empty when the run has none."""
    profile = get_profile(result.profile or "default")
    summary = result.summary()
    means = [(m, summary[m]["mean"]) for m in relevance_metrics() if m in summary and summary[m]["mean"] is not None]
    if not means:
        return []
    excellent, good = profile.bands
    cells = "; ".join(f"{m} {v:.4f} **{relevance_band(v, profile)}**" for m, v in means)
    return [f"Relevance bands ({profile.name}: excellent ≥ {excellent:g}, good ≥ {good:g}, else poor): {cells}"]


def _md_cell(text: Any) -> str:
    return str(text if text is not None else "-").replace("|", "\\|").replace("\n", " ")


def markdown_report(result: Any, max_problems: int = 50) -> str:
    """A Markdown report of ``result``."""
    latency = latency_line(result)
    lines = [
        "# ragmeter report",
        "",
        f"- samples: {len(result)} scored, {len(result.invalid)} invalid records",
        f"- judge: {result.judge}",
        *[f"  - fingerprint {_md_cell(line)}" for line in judge_lines(result)],
        *([f"- profile: {result.profile} ({get_profile(result.profile).description})"] if result.profile else []),
        f"- {_usage_line(result)}",
        *([f"- {latency}"] if latency else []),
        f"- time: {result.duration_s:.2f} s",
        "",
        "## Summary",
        "",
        "| " + " | ".join(_HEADER) + " |",
        "|" + "---|" * len(_HEADER),
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in summary_rows(result)]
    bands = relevance_lines(result)
    if bands:
        lines += [""] + bands
    repeats = repeat_lines(result)
    if repeats:
        lines += [""] + [f"- {_md_cell(line)}" for line in repeats]
    problems = result.problems()
    if problems:
        lines += [
            "",
            f"## Problems ({len(problems)})",
            "",
            "| sample | metric | value | label | why |",
            "|---|---|---|---|---|",
        ]
        for p in problems[:max_problems]:
            why = p["error"] or p["explanation"]
            lines.append(
                f"| {_md_cell(p['sample_id'])} | {p['metric']} | {_fmt(p['value'])} | {p['label'] or 'error'} | {_md_cell(why)} |"
            )
        if len(problems) > max_problems:
            lines.append(f"\n… and {len(problems) - max_problems} more.")
    conversations = conversation_rows(result)
    if conversations:
        lines += [
            "",
            "## Conversations",
            "",
            "| " + " | ".join(_CONVERSATION_HEADER) + " |",
            "|" + "---|" * len(_CONVERSATION_HEADER),
        ]
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in conversations]
    if result.invalid:
        lines += ["", f"## Invalid records ({len(result.invalid)})", ""]
        lines += [f"- {_md_cell(str(e))}" for e in result.invalid]
    return "\n".join(lines) + "\n"
