"""Internal: Compare two runs: regression gates (paired) and A/B tests (unpaired), with statistics.

>>> cmp = rm.compare("baseline.jsonl", "current.jsonl", tolerance={"faithfulness": 0.03, "*": 0.05})  # doctest: +SKIP
>>> cmp.passed, cmp.metrics["faithfulness"].verdict, cmp.regressions[:3]   # doctest: +SKIP
>>> ab = rm.compare_variants(production_run, tag_key="variant", min_detectable=0.02)  # doctest: +SKIP

A run is an :class:`~ragmeter.EvaluationResult`, a results file (``.jsonl`` / ``.json`` from
``ragmeter evaluate --out``), or a run in the history store (``db``, default ``$RAGMETER_DB``):
a run id (``"12"``) or a tag (the newest run carrying it).

**Paired** (the same sample ids in both runs; ``paired=None`` decides: paired when at least half
of the smaller run's ids are in the other run and no id repeats): per metric, over the samples
with a value in both runs, the two means and the mean difference d = current - baseline, a
percentile bootstrap 95% interval of d (``n_boot`` resamples of the pairs, ``seed``), the paired
t-test and Wilcoxon signed-rank p-values (scipy: without it every p-value is None and ``p_note``
says why; the rest needs numpy only), and Cohen's dz = mean(d) / sd(d) (sd with n - 1).

**Unpaired** (A/B traffic): the two means over all values, the difference of means with a
bootstrap interval (each group resampled on its own), Welch's t-test and Mann-Whitney U p-values,
Hedges' g (Cohen's d on the pooled sd, times 1 - 3 / (4 (n_a + n_b) - 9)), and the sample size per
group needed to detect ``min_detectable`` (default: the metric's tolerance) at the observed
variance with power 0.8 at alpha 0.05 (two-sided): n = 2 (z_0.975 + z_0.8)^2 s^2 / delta^2 with s^2
the pooled variance; paired runs give the number of pairs n = (z_0.975 + z_0.8)^2 s_d^2 / delta^2.

**Verdict** per metric, with tolerance t: ``"regressed"`` when the mean fell by more than t
(d < -t) AND the interval excludes zero (its upper end < 0), or when the share of samples with no
value (n/a or error) rose by more than t (paired: over the shared samples that have the metric in
both runs; unpaired: each run over its own samples): answers that went blank or "I don't know."
become n/a and leave the pairs, so the mean alone would not see them; ``"improved"`` when d > t and
the lower end > 0; otherwise ``"no detectable change"`` (a small change, or one the data cannot
tell from noise). Fewer than two values on a side give no interval, hence no change of the mean.

``tolerance`` (and ``min_detectable``) is one number or metric -> number, ``"*"`` for the rest;
a metric name that is in neither run is an error that suggests the nearest name.

**Judges** (:func:`ragmeter.trust.judge_changes`): each metric's judge fingerprints in the two
runs are compared; a metric judged differently (another model, prompt, setting or rule) fails the
gate unless ``allow_judge_change``, since the two means then measure different things. With a
store (``db``) holding both judges' anchor results, the notes say how much of the change the
judge's shift on the anchors accounts for.

**Human units** (``labels=``): each labeled metric's change is also estimated in human units with
PPI++ (:mod:`ragmeter.trust.ppi`), with the same tolerance rule; a fall there fails the gate, and
a metric judged differently is gated on it alone.

**Per sample** (matched by id): a regression is a value that fell by more than the tolerance,
became n/a, or became an error; samples present in only one run are listed. Human ratings
(``metadata`` numbers under a ``human_*`` key, or the keys named by ``ratings=``) are compared
like metrics: ragmeter has no separate field for human labels.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.metrics.scoring import SampleResult
from ragmeter.report import _md_cell, text_table
from ragmeter.result import EvaluationResult
from ragmeter.store.store import load_run
from ragmeter.trust.ppi import MIN_LABELS

__all__ = [
    "compare",
    "compare_variants",
    "difference_estimates",
    "required_sample_size",
    "check_metric_names",
    "Comparison",
    "MetricComparison",
    "SampleChange",
    "REGRESSED",
    "IMPROVED",
    "NO_CHANGE",
]

REGRESSED, IMPROVED, NO_CHANGE = "regressed", "improved", "no detectable change"
_ALPHA, _POWER = 0.05, 0.8


@dataclass
class MetricComparison:
    """One metric: ``mean_a`` (baseline) and ``mean_b`` (current) over the compared values (pairs
    when paired), ``diff`` = mean_b - mean_a, its bootstrap interval ``ci`` (None below two values
    a side), ``p_values`` (paired: ``t`` and ``wilcoxon``; unpaired: ``welch`` and
    ``mann_whitney``; None where undefined, e.g. no variance), ``effect_size`` (``effect`` names it:
    ``"cohen_dz"`` or ``"hedges_g"``), ``required_n`` (pairs, or samples per group, to detect
    ``min_detectable``), the ``tolerance``, the ``verdict``, and ``p_note``: why no p-value was
    computed (scipy is not installed), else None."""

    metric: str
    paired: bool
    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci: tuple[float, float] | None
    p_values: dict[str, float | None]
    effect: str
    effect_size: float | None
    tolerance: float
    min_detectable: float
    required_n: int | None
    verdict: str
    p_note: str | None = None
    #: samples without a value (``na`` + ``errors``) out of ``counted``, baseline and current
    #: (paired: the shared samples that have the metric in both runs)
    na: tuple[int, int] = (0, 0)
    errors: tuple[int, int] = (0, 0)
    counted: tuple[int, int] = (0, 0)

    @property
    def missing_rates(self) -> tuple[float, float] | None:
        """The share of counted samples without a value (n/a or error) in each run; None when
        a run counted none."""
        if not all(self.counted):
            return None
        return ((self.na[0] + self.errors[0]) / self.counted[0], (self.na[1] + self.errors[1]) / self.counted[1])

    @property
    def missing_regressed(self) -> bool:
        """Whether the share of samples without a value rose by more than the tolerance."""
        rates = self.missing_rates
        return rates is not None and rates[1] - rates[0] > self.tolerance + 1e-12

    def missing_change(self) -> str:
        """``"0 -> 2 of 3"``: samples without a value, baseline -> current (``"-"`` with none counted)."""
        if not any(self.counted):
            return "-"
        a, b = self.na[0] + self.errors[0], self.na[1] + self.errors[1]
        return f"{a} -> {b} of {self.counted[1]}" if self.paired else f"{a}/{self.counted[0]} -> {b}/{self.counted[1]}"


@dataclass
class SampleChange:
    """One sample's metric between the runs: ``kind`` is ``"fell"`` / ``"became n/a"`` /
    ``"became error"`` (regressions) or ``"rose"`` / ``"recovered"`` (improvements)."""

    sample_id: str
    metric: str
    kind: str
    before: float | None
    after: float | None
    delta: float | None = None
    error: str | None = None

    def describe(self) -> str:
        """``id: 0.9000 -> 0.1000`` or ``id: 0.8570 -> error (timeout)``."""
        after = {"became n/a": "n/a", "became error": "error"}.get(self.kind, _num(self.after))
        why = f" ({self.error})" if self.error else ""
        return f"{self.sample_id}: {_num(self.before)} -> {after}{why}"


@dataclass
class Comparison:
    """The result of :func:`compare`: ``metrics`` (name -> :class:`MetricComparison`),
    ``regressions`` and ``improvements`` (:class:`SampleChange`, worst first), ``only_a`` /
    ``only_b`` (sample ids in one run only), ``shared`` (ids in both), the two runs' names and
    per-metric means of the current run over all its values (``floors`` check these)."""

    paired: bool
    metrics: dict[str, MetricComparison]
    regressions: list[SampleChange]
    improvements: list[SampleChange]
    only_a: list[str]
    only_b: list[str]
    shared: int
    names: tuple[str, str] = ("baseline", "current")
    current_means: dict[str, float | None] = field(default_factory=dict)
    #: metric -> what changed in the judge that scored it (see :func:`ragmeter.trust.judge_changes`)
    judge_changes: dict[str, list[str]] = field(default_factory=dict)
    #: what could not be told about the judges, and a ragmeter version change that left them as they were
    judge_notes: list[str] = field(default_factory=list)
    #: gate across judges: when False (default), a metric judged differently fails the gate
    allow_judge_change: bool = False
    #: metric -> the change in human units from labels (see :func:`difference_estimates`)
    human: dict[str, dict[str, Any]] = field(default_factory=dict)

    def gate(self, fail_under: Mapping[str, float] | None = None, fail_on_sample_regression: bool = False) -> list[str]:
        """Why the gate fails (empty when it passes): a metric that regressed (see the module
        doc), a current mean under its floor (``fail_under``: metric -> floor, ``"*"`` for all),
        and with ``fail_on_sample_regression`` any per-sample regression."""
        out = []
        for m, c in self.metrics.items():
            if c.verdict != REGRESSED or (m in self.judge_changes and self._in_human_units(m)):
                continue  # a metric judged differently is gated in human units alone
            worst = [r.describe() for r in self.regressions if r.metric == m][:3]
            if c.diff is not None and c.ci is not None and c.diff < -c.tolerance and c.ci[1] < 0:
                out.append(
                    f"{m}: mean fell by {-c.diff:.4f} ({c.mean_a:.4f} -> {c.mean_b:.4f}, 95% CI "
                    f"{c.ci[0]:+.4f} to {c.ci[1]:+.4f}, tolerance {c.tolerance})"
                    + (f"; worst samples: {', '.join(worst)}" if worst else "")
                )
            if c.missing_regressed:
                rates = c.missing_rates or (0.0, 0.0)
                gone = [
                    r.describe() for r in self.regressions if r.metric == m and r.kind in ("became n/a", "became error")
                ]
                out.append(
                    f"{m}: samples without a value rose {c.missing_change()} (n/a {c.na[0]} -> {c.na[1]}, errors "
                    f"{c.errors[0]} -> {c.errors[1]}; share {rates[0]:.1%} -> {rates[1]:.1%}, tolerance "
                    f"{c.tolerance})" + (f"; e.g. {', '.join(gone[:3])}" if gone else "")
                )
        for m, floor in (fail_under or {}).items():
            names = list(self.current_means) if m == "*" else [m]
            for name in names:
                if name not in self.current_means:
                    import difflib

                    near = difflib.get_close_matches(name, list(self.current_means), n=1, cutoff=0.6)
                    out.append(
                        f"{name}: no such metric in the current run" + (f" (did you mean {near[0]!r}?)" if near else "")
                    )
                    continue
                mean = self.current_means[name]
                if mean is None or mean < floor:
                    out.append(f"{name}: mean {_num(mean)} < {floor} (--fail-under)")
        if fail_on_sample_regression and self.regressions:
            out.append(
                f"{len(self.regressions)} sample regressions; worst: "
                + ", ".join(f"{r.metric} {r.describe()}" for r in self.regressions[:3])
            )
        out += self._judge_gate() + self._human_gate()
        return out

    def _in_human_units(self, metric: str) -> bool:
        """Whether labels put both runs' ``metric`` in human units (``human``, with a verdict)."""
        return (self.human.get(metric) or {}).get("verdict") is not None

    def _human_gate(self) -> list[str]:
        """The gate in human units (``compare(..., labels=...)``): a metric whose mean, corrected
        by the labels (PPI++), fell by more than its tolerance with an interval below zero."""
        out = []
        for m, h in self.human.items():
            if h.get("verdict") == REGRESSED:
                out.append(
                    f"{m}: in human units ({h['scale']}) the mean fell by {-h['mean']:.4f} ({h['method']}, 95% CI "
                    f"{h['ci'][0]:+.4f} to {h['ci'][1]:+.4f}, tolerance {h['tolerance']:g})"
                )
        return out

    def _human_lines(self) -> list[str]:
        if not self.human:
            return []
        rows = []
        for m, h in self.human.items():
            a, b = h["baseline"], h["current"]
            ci = f"[{h['ci'][0]:+.4f}, {h['ci'][1]:+.4f}]" if h.get("ci") else "-"
            rows.append(
                [
                    m,
                    h["scale"],
                    f"{a['n']}/{b['n']}",
                    _num(a["mean"]),
                    _num(b["mean"]),
                    _num(h["mean"], True),
                    ci,
                    h["method"].removeprefix("PPI++ ") if h.get("mean") is not None else (h.get("reason") or "-"),
                    h.get("verdict") or "-",
                ]
            )
        header = ["metric", "labels", "labeled", self.names[0], self.names[1], "diff", "95% CI", "method", "verdict"]
        return ["", "in human units (PPI++: the judge's scores corrected by the labels):", text_table(header, rows)]

    def _judge_gate(self) -> list[str]:
        """The gate's verdict on the judges: a metric judged differently in the two runs fails
        unless ``allow_judge_change``."""
        changes = {m: c for m, c in self.judge_changes.items() if not self._in_human_units(m)}
        if not changes or self.allow_judge_change:
            return []
        from ragmeter.trust.judges import describe_changes

        return [
            f"judged differently ({line}): the two runs' scores are not comparable; "
            "--allow-judge-change / allow_judge_change=True to gate across judges, or --labels to compare "
            "in human units"
            for line in describe_changes(changes)
        ]

    def _judge_lines(self) -> list[str]:
        from ragmeter.trust.judges import describe_changes

        lines = [f"JUDGE CHANGED {line}" for line in describe_changes(self.judge_changes)]
        if lines and self.allow_judge_change:
            lines.append("(--allow-judge-change: gated across judges)")
        return lines + [f"note: {n}" for n in self.judge_notes]

    @property
    def passed(self) -> bool:
        """True when the default gate passes (:meth:`gate` with no options): no metric regressed,
        none was judged by another judge (unless ``allow_judge_change``), none fell in human units."""
        return not self.gate()

    def to_dict(self) -> dict[str, Any]:
        """Everything as one JSON-serialisable dict."""
        return {
            "paired": self.paired,
            "names": list(self.names),
            "shared": self.shared,
            "passed": self.passed,
            "metrics": {
                m: {
                    **asdict(c),
                    "ci": list(c.ci) if c.ci else None,
                    "na": list(c.na),
                    "errors": list(c.errors),
                    "counted": list(c.counted),
                    "missing_regressed": c.missing_regressed,
                }
                for m, c in self.metrics.items()
            },
            "regressions": [asdict(r) for r in self.regressions],
            "improvements": [asdict(r) for r in self.improvements],
            "only_a": self.only_a,
            "only_b": self.only_b,
            "current_means": self.current_means,
            "judge_changes": self.judge_changes,
            "judge_notes": self.judge_notes,
            "allow_judge_change": self.allow_judge_change,
            "human": self.human,
        }

    def _rows(self) -> tuple[list[str], list[list[str]]]:
        tests = ("t", "wilcoxon") if self.paired else ("welch", "mann_whitney")
        header = [
            "metric",
            "n",
            self.names[0],
            self.names[1],
            "diff",
            "95% CI",
            *(f"p {t}" for t in tests),
            "dz" if self.paired else "g",
            "n needed",
            "n/a+errors",
            "verdict",
        ]
        rows = []
        for m, c in self.metrics.items():
            n = str(c.n_a) if c.paired else f"{c.n_a}/{c.n_b}"
            ci = f"[{c.ci[0]:+.4f}, {c.ci[1]:+.4f}]" if c.ci else "-"
            rows.append(
                [
                    m,
                    n,
                    _num(c.mean_a),
                    _num(c.mean_b),
                    _num(c.diff, True),
                    ci,
                    *(_p(c.p_values.get(t)) for t in tests),
                    _num(c.effect_size, True),
                    "-" if c.required_n is None else str(c.required_n),
                    c.missing_change(),
                    c.verdict,
                ]
            )
        return header, rows

    def _p_notes(self) -> list[str]:
        """Why p-values are missing (one line per distinct reason)."""
        return [f"p-values: {note}" for note in dict.fromkeys(c.p_note for c in self.metrics.values() if c.p_note)]

    def _headline(self) -> str:
        if not self.paired:  # independent groups: no sample is expected in both, so none is "only in" one
            return (
                f"unpaired comparison, {self.names[0]} -> {self.names[1]}: {self.shared + len(self.only_a)} "
                f"samples in {self.names[0]}, {self.shared + len(self.only_b)} in {self.names[1]}"
            )
        return (
            f"paired comparison, {self.names[0]} -> {self.names[1]}: {self.shared} shared samples "
            f"({len(self.only_a)} only in {self.names[0]}, {len(self.only_b)} only in {self.names[1]})"
        )

    def _one_run_only(self) -> list[tuple[list[str], str]]:
        """The samples of one run only, per run: listed for a paired comparison (a sample that
        lost its pair), not for an unpaired one (every sample is in one group only)."""
        return [(self.only_a, self.names[0]), (self.only_b, self.names[1])] if self.paired else []

    def to_text(self, max_rows: int = 20) -> str:
        """A plain-text report: the metric table, then the worst per-sample regressions (at most
        ``max_rows``, saying how many were left out) and, when paired, the samples in one run only."""
        header, rows = self._rows()
        lines = [
            self._headline(),
            *self._judge_lines(),
            text_table(header, rows),
            *self._p_notes(),
            *self._human_lines(),
            "",
            f"{len(self.regressions)} sample regressions, {len(self.improvements)} improvements",
        ]
        shown = self.regressions[:max_rows]
        if len(shown) < len(self.regressions):
            lines.append(f"showing {len(shown)} of {len(self.regressions)} regressions (worst first)")
        lines += [f"  {r.metric:<20} {r.kind:<12} {r.describe()}" for r in shown]
        for ids, name in self._one_run_only():
            if ids:
                more = f" (+{len(ids) - max_rows} more)" if len(ids) > max_rows else ""
                lines.append(f"only in {name}: {', '.join(ids[:max_rows])}{more}")
        return "\n".join(lines) + "\n"

    def to_markdown(self, max_rows: int = 50) -> str:
        """The same report in Markdown."""
        header, rows = self._rows()
        lines = [
            "# ragmeter comparison",
            "",
            f"{self._headline()}. Gate: **{'passed' if self.passed else 'FAILED'}**.",
            "",
            *[f"- {_md_cell(line)}" for line in self._judge_lines()],
            *([""] if self._judge_lines() else []),
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
        ]
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
        lines += ["", *notes] if (notes := self._p_notes()) else []
        if self.human:
            lines += ["", "```text", *self._human_lines()[1:], "```"]
        if self.regressions:
            lines += ["", f"## Sample regressions ({len(self.regressions)})", ""]
            if len(self.regressions) > max_rows:
                lines += [f"showing {max_rows} of {len(self.regressions)} regressions (worst first)", ""]
            lines += ["| sample | metric | change | before | after |", "|---|---|---|---|---|"]
            for r in self.regressions[:max_rows]:
                after = {"became n/a": "n/a", "became error": f"error ({r.error})"}.get(r.kind, _num(r.after))
                lines.append(
                    f"| {_md_cell(r.sample_id)} | {r.metric} | {r.kind} | {_num(r.before)} | {_md_cell(after)} |"
                )
        for ids, name in self._one_run_only():
            if ids:
                lines += ["", f"Only in {name} ({len(ids)}): " + ", ".join(_md_cell(i) for i in ids[:max_rows])]
        return "\n".join(lines) + "\n"

    def save(self, path: str | os.PathLike, max_rows: int = 50) -> Path:
        """Write the report as ``.md``, ``.json`` or ``.txt`` (from the suffix), atomically."""
        from ragmeter.fileio import json_text, write_text_atomic

        path = Path(path)
        suffix = path.suffix.lower()
        writers = {
            ".md": lambda: self.to_markdown(max_rows),
            ".markdown": lambda: self.to_markdown(max_rows),
            ".json": lambda: json_text(self.to_dict(), indent=1),
            ".txt": lambda: self.to_text(max_rows),
        }
        if suffix not in writers:
            raise ValueError(f"unknown comparison report type {suffix or '(none)'!r} (use .md, .json or .txt)")
        write_text_atomic(path, writers[suffix]())
        return path

    def __str__(self) -> str:
        return self.to_text()


# --------------------------------------------------------------------------- statistics


def _num(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _p(v: float | None) -> str:
    return "-" if v is None else (f"{v:.4f}" if v >= 1e-4 else f"{v:.1e}")


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _z_sum() -> float:
    nd = statistics.NormalDist()
    return nd.inv_cdf(1 - _ALPHA / 2) + nd.inv_cdf(_POWER)


def required_sample_size(variance: float, delta: float, paired: bool = False) -> int | None:
    """Samples per group (unpaired: n = 2 (z_0.975 + z_0.8)^2 variance / delta^2) or pairs
    (paired, variance of the differences: n = (z_0.975 + z_0.8)^2 variance / delta^2) needed to
    detect a difference ``delta`` with power 0.8 at two-sided alpha 0.05, rounded up; None when
    ``delta`` is not positive or there is no variance to estimate from.

    >>> required_sample_size(0.2 ** 2, 0.05)
    252
    """
    if not delta or delta <= 0 or variance <= 0:
        return None
    n = (1 if paired else 2) * _z_sum() ** 2 * variance / delta**2
    return max(2, math.ceil(n - 1e-9))


def _bootstrap_ci(a: np.ndarray, b: np.ndarray, paired: bool, n_boot: int, seed: int) -> tuple[float, float] | None:
    if len(a) < 2 or len(b) < 2:
        return None
    rng = np.random.default_rng(seed)
    if paired:
        d = b - a
        means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    else:
        means = b[rng.integers(0, len(b), size=(n_boot, len(b)))].mean(axis=1) - a[
            rng.integers(0, len(a), size=(n_boot, len(a)))
        ].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


#: ``MetricComparison.p_note`` when scipy cannot be imported.
NO_SCIPY = 'not computed: scipy is not installed (pip install "ragmeter[stats]")'


def _p_values(a: np.ndarray, b: np.ndarray, paired: bool) -> tuple[dict[str, float | None], str | None]:
    """The tests' p-values (None where undefined: no variance, no difference) and, when scipy is
    missing, every p-value None and the note saying so."""
    tests = ("t", "wilcoxon") if paired else ("welch", "mann_whitney")
    try:
        from scipy import stats
    except ImportError:
        return dict.fromkeys(tests), NO_SCIPY
    p: dict[str, float | None] = {}
    if paired:
        d = b - a
        sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
        p["t"] = _finite(stats.ttest_rel(b, a).pvalue) if sd > 0 else None
        p["wilcoxon"] = _finite(stats.wilcoxon(d).pvalue) if np.any(d != 0) and len(d) > 1 else None
    else:
        ok = len(a) > 1 and len(b) > 1
        p["welch"] = (
            _finite(stats.ttest_ind(b, a, equal_var=False).pvalue)
            if ok and float(a.var(ddof=1)) + float(b.var(ddof=1)) > 0
            else None
        )
        p["mann_whitney"] = (
            _finite(stats.mannwhitneyu(b, a, alternative="two-sided").pvalue)
            if len(a) and len(b) and np.ptp(np.concatenate([a, b])) > 0
            else None
        )
    return p, None


def _stats(
    metric: str,
    a: np.ndarray,
    b: np.ndarray,
    paired: bool,
    tolerance: float,
    min_detectable: float,
    n_boot: int,
    seed: int,
) -> MetricComparison:
    mean_a = float(a.mean()) if len(a) else None
    mean_b = float(b.mean()) if len(b) else None
    diff = mean_b - mean_a if mean_a is not None and mean_b is not None else None
    ci = _bootstrap_ci(a, b, paired, n_boot, seed)
    p, p_note = _p_values(a, b, paired)
    effect: float | None = None
    required: int | None = None
    if paired:
        d = b - a
        sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
        if sd > 0:
            effect = float(d.mean()) / sd
        required = required_sample_size(sd**2, min_detectable, paired=True) if len(d) > 1 else None
    else:
        var_a = float(a.var(ddof=1)) if len(a) > 1 else None
        var_b = float(b.var(ddof=1)) if len(b) > 1 else None
        if var_a is not None and var_b is not None:
            pooled = ((len(a) - 1) * var_a + (len(b) - 1) * var_b) / (len(a) + len(b) - 2)
            if pooled > 0 and diff is not None:  # (two values a side: both means are there)
                effect = diff / math.sqrt(pooled) * (1 - 3 / (4 * (len(a) + len(b)) - 9))
            required = required_sample_size(pooled, min_detectable)
    if diff is not None and ci is not None and diff < -tolerance and ci[1] < 0:
        verdict = REGRESSED
    elif diff is not None and ci is not None and diff > tolerance and ci[0] > 0:
        verdict = IMPROVED
    else:
        verdict = NO_CHANGE
    return MetricComparison(
        metric,
        paired,
        len(a),
        len(b),
        mean_a,
        mean_b,
        diff,
        ci,
        p,
        "cohen_dz" if paired else "hedges_g",
        effect,
        tolerance,
        min_detectable,
        required,
        verdict,
        p_note,
    )


# --------------------------------------------------------------------------- comparing


#: Per sample: metric -> (value, status, error).
_Cells = dict[str, tuple[float | None, str, str | None]]


def _cells(result: EvaluationResult, ratings: Iterable[str]) -> tuple[list[str], list[tuple[str, _Cells]]]:
    """Metric names (human ratings included) and, per sample in order, (id, metric -> (value,
    status, error))."""
    names = list(result.metrics)
    rows = []
    for r in result:
        cells = {m: (s.value, s.status, s.error) for m, s in r.scores.items()}
        for key, v in r.sample.metadata.items():
            if (
                (key in ratings or key.startswith("human_"))
                and isinstance(v, (int, float))
                and not isinstance(v, bool)
                and math.isfinite(v)
            ):
                cells[key] = (float(v), "ok", None)
                if key not in names:
                    names.append(key)
        rows.append((str(r.sample.id), cells))  # (Sample makes every id a string)
    return names, rows


def _values(rows: list[tuple[str, _Cells]], metric: str) -> np.ndarray:
    return np.array([c[metric][0] for _, c in rows if metric in c and c[metric][0] is not None], dtype=float)


def _first(rows: list[tuple[str, _Cells]]) -> dict[str, _Cells]:
    """Sample id -> cells, in order; a repeated id keeps its first occurrence."""
    out: dict[str, _Cells] = {}
    for sid, cells in rows:
        out.setdefault(sid, cells)
    return out


def _tolerance(tolerance: float | Mapping[str, float], metric: str) -> float:
    if isinstance(tolerance, Mapping):
        return float(tolerance.get(metric, tolerance.get("*", 0.05)))
    return float(tolerance)


def _sample_changes(metric: str, sid: str, before: tuple, after: tuple, tol: float) -> SampleChange | None:
    (bv, bs, _), (av, as_, aerr) = before, after
    if as_ == "error" and bs != "error":
        return SampleChange(sid, metric, "became error", bv, None, error=aerr)
    if bv is not None and as_ == "n/a":
        return SampleChange(sid, metric, "became n/a", bv, None)
    if bv is not None and av is not None and abs(av - bv) > tol:
        return SampleChange(sid, metric, "fell" if av < bv else "rose", bv, av, av - bv)
    if bv is None and av is not None:
        return SampleChange(sid, metric, "recovered", None, av)
    return None


def compare(
    a: Any,
    b: Any,
    *,
    tolerance: float | Mapping[str, float] = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    paired: bool | None = None,
    min_detectable: float | Mapping[str, float] | None = None,
    ratings: Sequence[str] = (),
    db: str | os.PathLike | None = None,
    allow_judge_change: bool = False,
    labels: Any = None,
) -> Comparison:
    """Compare baseline ``a`` with current ``b`` (see the module doc for the statistics and the
    verdict). ``a`` / ``b``: EvaluationResults, results files, or store run ids / tags (``db``).
    ``tolerance``: one number or metric -> number (``"*"`` for the rest). ``paired``: None decides
    from the sample ids. ``min_detectable``: the difference the required sample size is for
    (default: the tolerance). ``ratings``: numeric ``metadata`` keys compared like metrics
    (``human_*`` keys always are). The runs' judges are compared metric by metric
    (``judge_changes``, :func:`ragmeter.trust.judge_changes`): a metric judged differently fails
    the gate unless ``allow_judge_change``. ``labels`` (a labels file or Label objects): each
    labeled metric is also compared in human units (``human``: PPI++, see
    :func:`difference_estimates`); a fall there beyond the tolerance fails
    the gate too, and a metric judged differently is then gated in human units alone."""
    (ra, name_a), (rb, name_b) = load_run(a, db), load_run(b, db)
    if name_a == name_b:
        name_a, name_b = "baseline", "current"
    metrics_a, rows_a = _cells(ra, ratings)
    metrics_b, rows_b = _cells(rb, ratings)
    cells_a, cells_b = _first(rows_a), _first(rows_b)
    shared = [sid for sid in cells_a if sid in cells_b]
    unique = len(cells_a) == len(rows_a) and len(cells_b) == len(rows_b)
    if paired is None:
        paired = unique and bool(shared) and len(shared) >= 0.5 * min(len(cells_a), len(cells_b))
    elif paired and not unique:
        raise ValueError("paired comparison needs unique sample ids in each run")
    for what, given in (("tolerance", tolerance), ("min_detectable", min_detectable)):
        if isinstance(given, Mapping):
            check_metric_names(given, [*metrics_a, *(m for m in metrics_b if m not in metrics_a)], what)
    metrics = [m for m in metrics_a if m in metrics_b]
    out: dict[str, MetricComparison] = {}
    regressions: list[SampleChange] = []
    improvements: list[SampleChange] = []
    for m in metrics:
        tol = _tolerance(tolerance, m)
        delta = tol if min_detectable is None else _tolerance(min_detectable, m)
        if paired:
            pairs = [
                (cells_a[s][m][0], cells_b[s][m][0])
                for s in shared
                if m in cells_a[s] and m in cells_b[s] and cells_a[s][m][0] is not None and cells_b[s][m][0] is not None
            ]
            va = np.array([x for x, _ in pairs], dtype=float)
            vb = np.array([y for _, y in pairs], dtype=float)
        else:
            va, vb = _values(rows_a, m), _values(rows_b, m)
        c = out[m] = _stats(m, va, vb, paired, tol, delta, n_boot, seed)
        if paired:
            both = [(cells_a[s][m], cells_b[s][m]) for s in shared if m in cells_a[s] and m in cells_b[s]]
            side_a, side_b = [x for x, _ in both], [y for _, y in both]
        else:
            side_a, side_b = [c_[m] for _, c_ in rows_a if m in c_], [c_[m] for _, c_ in rows_b if m in c_]
        c.na = (sum(x[1] == "n/a" for x in side_a), sum(x[1] == "n/a" for x in side_b))
        c.errors = (sum(x[1] == "error" for x in side_a), sum(x[1] == "error" for x in side_b))
        c.counted = (len(side_a), len(side_b))
        if c.missing_regressed:
            c.verdict = REGRESSED
        for sid in shared:
            if m in cells_a[sid] and m in cells_b[sid]:
                change = _sample_changes(m, sid, cells_a[sid][m], cells_b[sid][m], tol)
                if change is not None:
                    (regressions if change.kind in ("fell", "became n/a", "became error") else improvements).append(
                        change
                    )
    order = {"became error": 0, "became n/a": 1, "fell": 2}
    regressions.sort(key=lambda r: (order[r.kind], r.delta if r.delta is not None else -(r.before or 0.0)))
    improvements.sort(key=lambda r: -(r.delta if r.delta is not None else r.after or 0.0))
    means = {m: float(v.mean()) if len(v := _values(rows_b, m)) else None for m in metrics_b}
    from ragmeter.trust.judges import judge_changes

    changes, notes = judge_changes(ra, rb, [m for m in metrics if m in ra.metrics and m in rb.metrics])
    human = {}
    if labels is not None:
        human = difference_estimates(ra, rb, labels, paired=paired, tolerance=tolerance)
    cmp = Comparison(
        paired,
        out,
        regressions,
        improvements,
        [s for s in cells_a if s not in cells_b],
        [s for s in cells_b if s not in cells_a],
        len(shared),
        (name_a, name_b),
        means,
        judge_changes=changes,
        judge_notes=notes,
        allow_judge_change=allow_judge_change,
        human=human,
    )
    _attribute_to_anchors(cmp, ra, rb, db, n_boot, seed)
    return cmp


def _attribute_to_anchors(
    cmp: Comparison, a: EvaluationResult, b: EvaluationResult, db: Any, n_boot: int, seed: int
) -> None:
    """For each metric judged differently whose two judges were checked on one anchor set in the
    store: how much of the change in means the judge's shift on the anchors accounts for
    (:func:`ragmeter.trust.anchors.anchor_attribution`), as notes."""
    db = db or os.environ.get("RAGMETER_DB")
    if not cmp.judge_changes or not db:
        return
    from ragmeter.store import Store
    from ragmeter.trust.anchors import anchor_attribution

    with Store(db) as store:
        for m in cmp.judge_changes:
            fa, fb, c = a.fingerprints(m), b.fingerprints(m), cmp.metrics.get(m)
            if len(fa) != 1 or len(fb) != 1 or c is None or c.diff is None:
                continue
            att = anchor_attribution(store, fa[0], fb[0], m, c.diff, n_boot=n_boot, seed=seed)
            if att is None:
                continue
            share = f" ({att['share']:.0%} of it)" if att["share"] is not None and 0 < abs(att["share"]) < 10 else ""
            cmp.judge_notes.append(
                f"{m}: the mean changed by {c.diff:+.4f}; the judge's shift on the anchor set {att['anchor_set']} is "
                f"{att['shift']:+.4f} [{att['ci'][0]:+.4f}, {att['ci'][1]:+.4f}] over {att['n']} anchors{share}; "
                f"what the judge's shift does not account for: {att['left']:+.4f}"
            )


def check_metric_names(given: Mapping[str, Any], known: Sequence[str], what: str) -> None:
    """Raise ValueError for a key of ``given`` (besides ``"*"``) that is not in ``known``, naming
    the nearest known name: ``--tolerance faithfulnes=0.3`` is a typo, not a rule for nothing."""
    import difflib

    for name in given:
        if name != "*" and name not in known:
            near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ValueError(
                f"{what} for {name!r}: no such metric in these runs{hint} (metrics: {', '.join(known) or 'none'})"
            )


def compare_variants(
    result: Any, tag_key: str = "variant", a: str | None = None, b: str | None = None, **kw: Any
) -> Comparison:
    """An unpaired A/B comparison of one run whose samples carry ``metadata[tag_key]`` (e.g.
    ``"A"`` / ``"B"``): baseline variant ``a`` against ``b`` (default: the two variants present,
    in sorted order; more than two need ``a`` and ``b``). Keyword arguments go to :func:`compare`."""
    run, _ = load_run(result, kw.pop("db", None))
    groups: dict[str, list[SampleResult]] = {}
    for r in run:
        value = r.sample.metadata.get(tag_key)
        if value is not None:
            groups.setdefault(str(value), []).append(r)
    if a is None or b is None:
        if len(groups) != 2:
            raise ValueError(f"metadata[{tag_key!r}] has {len(groups)} variants {sorted(groups)}; name a and b")
        a, b = sorted(groups)
    for v in (a, b):
        if v not in groups:
            raise ValueError(f"no sample has metadata[{tag_key!r}] == {v!r} (variants: {sorted(groups)})")
    kw.setdefault("paired", False)
    cmp = compare(
        EvaluationResult(groups[a], run.metrics, run.judge), EvaluationResult(groups[b], run.metrics, run.judge), **kw
    )
    cmp.names = (f"{tag_key}={a}", f"{tag_key}={b}")
    return cmp


def difference_estimates(
    a: Any,
    b: Any,
    labels: Any,
    *,
    paired: bool,
    metrics: Iterable[str] | None = None,
    tolerance: Any = 0.05,
    min_labels: int = MIN_LABELS,
) -> dict[str, dict[str, Any]]:
    """Per metric labeled in both runs: the change from run ``a`` to run ``b`` in human units
    (:func:`ragmeter.trust.ppi.ppi_mean_diff`: on the per-sample differences when ``paired`` and
    enough samples are labeled on both answers, else the difference of the runs' own estimates),
    with the tolerance in human units (the metric's tolerance times the scale's span) and the
    verdict by the rule the gate uses (regressed: the change is below minus the tolerance and
    its interval excludes zero)."""
    from ragmeter.labels.io import load_labels
    from ragmeter.labels.matching import match_labels
    from ragmeter.labels.scales import span
    from ragmeter.trust.estimates import estimate, judged_in_human_units
    from ragmeter.trust.ppi import ppi_mean_diff

    read = load_labels(labels)[0]
    ma, mb = match_labels(a, read, metrics=metrics), match_labels(b, read, metrics=metrics)
    out: dict[str, dict[str, Any]] = {}
    for metric in (m for m in ma.items if m in mb.items):
        scale = ma.scales[metric]
        if mb.scales[metric] != scale:
            continue
        ea, eb = estimate(a, ma, metric, min_labels), estimate(b, mb, metric, min_labels)
        pairs = None
        if paired:
            ja, jb = judged_in_human_units(a, metric, scale), judged_in_human_units(b, metric, scale)
            ia, ib = ma.items[metric], mb.items[metric]
            both = [s for s in ia if s in ib and s in ja and s in jb]
            rest = [s for s in ja if s in jb and s not in set(both)]
            pairs = (
                [ib[s].human - ia[s].human for s in both],
                [jb[s] - ja[s] for s in both],
                [jb[s] - ja[s] for s in rest],
            )
        est = ppi_mean_diff(ea, eb, paired=pairs, min_labels=min_labels)
        tol = _tolerance(tolerance, metric) * span(scale)
        if est.mean is not None and est.ci is not None and est.mean < -tol and est.ci[1] < 0:
            verdict = REGRESSED
        elif est.mean is not None and est.ci is not None and est.mean > tol and est.ci[0] > 0:
            verdict = IMPROVED
        else:
            verdict = NO_CHANGE
        out[metric] = {
            "scale": scale,
            "tolerance": tol,
            "verdict": verdict if est.mean is not None else None,
            "baseline": ea.to_dict(),
            "current": eb.to_dict(),
            **est.to_dict(),
        }
    return out
