"""Internal: The dashboard's "Human labels" section: annotator agreement and the judge against people
(:func:`ragmeter.labels.agreement_report`), and the judge's leniency run by run
(:func:`ragmeter.labels.judge_leniency`). Plain HTML tables: readable without JavaScript."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["agreement_section"]


def _num(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _ci(ci: Sequence[Any]) -> str:
    return f'<span class="muted">[{_num(ci[0])}, {_num(ci[1])}]</span>'


def agreement_section(
    report: Mapping[str, Any], leniency: Mapping[str, Sequence[Mapping[str, Any]]] | None = None
) -> str:
    """The section's HTML, or "" without labels. ``report``: per criterion, what
    :func:`ragmeter.labels.agreement_report` returns; ``leniency``: per criterion, the rows of
    :func:`ragmeter.labels.judge_leniency`."""
    if not report:
        return ""
    rows = []
    for criterion, e in report.items():
        a, j = e["alpha"], e.get("judge") or {}
        judge = (
            (
                f'{escape(j["metric"])}: Spearman {_num(j["spearman"])}, Kendall {_num(j["kendall"])}, '
                f'balanced accuracy {_num(j["balanced_accuracy"])} at {j["threshold"]:.2f}; '
                f'suggested threshold {_num(j["suggested_threshold"])} {_ci(j["suggested_ci"])}'
            )
            if j
            else "n/a"
        )
        kappas = "; ".join(f"{escape(p)} {_num(k['kappa'])} {_ci(k['ci'])}" for p, k in e["kappa"].items()) or "n/a"
        rows.append(
            f'<tr data-criterion="{escape(criterion)}"><td>{escape(criterion)}</td><td>{e["items"]}</td>'
            f'<td>{len(e["annotators"])}</td><td>{_num(a["alpha"])} {_ci(a["ci"])}</td><td>{kappas}</td>'
            f"<td>{judge}</td></tr>"
        )
    parts = [
        '<section id="labels"><h2>Human labels <span class="muted">(Krippendorff\'s ordinal alpha, '
        "quadratic-weighted Cohen's kappa, 95% bootstrap intervals)</span></h2>",
        "<table><thead><tr><th>criterion</th><th>items</th><th>annotators</th><th>alpha</th><th>kappa</th>"
        "<th>judge vs humans</th></tr></thead><tbody>",
        *rows,
        "</tbody></table>",
    ]
    for criterion, runs in (leniency or {}).items():
        if not runs:
            continue
        lines = "".join(
            f'<tr><td>{r["run_id"]}</td><td>{r["created_at"]:%Y-%m-%d %H:%M}</td><td>{escape(str(r["judge"]))}</td>'
            f'<td>{r["items"]}</td><td>{r["judge_pass_rate"]:.0%}</td><td>{r["human_pass_rate"]:.0%}</td>'
            f'<td>{r["leniency"]:+.2f}</td></tr>'
            for r in runs
        )
        parts.append(
            f"<h3>Judge leniency on {escape(criterion)} <span class=\"muted\">(judge pass rate - human pass "
            f"rate on the labelled samples; rising = drifting towards leniency)</span></h3><table><thead><tr>"
            "<th>run</th><th>time</th><th>judge</th><th>items</th><th>judge passes</th><th>humans pass</th>"
            f"<th>leniency</th></tr></thead><tbody>{lines}</tbody></table>"
        )
    parts.append("</section>")
    return "".join(parts)
