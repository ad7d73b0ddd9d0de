"""Internal: Evaluation results: per sample, per metric Scores, with summaries and exports."""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ragmeter.conversations import ConversationResult, conversation_results
from ragmeter.data import RecordError, Score
from ragmeter.fileio import (
    JSON_ERRORS,
    finite_number,
    json_problem,
    json_text,
    parse_json,
    read_text,
    write_text_atomic,
)
from ragmeter.judges.base import Usage
from ragmeter.metrics.scoring import SampleResult
from ragmeter.privacy import for_output
from ragmeter.report import markdown_report

__all__ = ["EvaluationResult"]


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "std": None, "min": None, "max": None}
    return {
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "std": statistics.pstdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


class EvaluationResult:
    """The outcome of :func:`ragmeter.evaluate`.

    Iterate it for :class:`SampleResult` objects; ``invalid`` lists the input records that could
    not be loaded (each names its line / row and field); ``usage`` totals the judge work.
    """

    def __init__(
        self,
        results: list[SampleResult],
        metrics: list[str],
        judge: str = "code",
        invalid: list[RecordError] | None = None,
        duration_s: float = 0.0,
        thresholds: dict[str, tuple[float, float]] | None = None,
        profile: str | None = None,
    ):
        self.results = list(results)
        self.metrics = list(metrics)
        self.judge = judge
        self.invalid = list(invalid or [])
        self.duration_s = duration_s
        self.thresholds = dict(thresholds or {})
        self.profile = profile  # the domain profile's name (ragmeter.profiles), None without one

    def __iter__(self) -> Iterator[SampleResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: int) -> SampleResult:
        return self.results[i]

    def __repr__(self) -> str:
        """The per-metric means first (None when a metric has no value), then the run's size:
        ``EvaluationResult({'faithfulness': 0.8888, 'mrr': 1.0}, 20 samples, judge='offline', invalid=0)``."""
        means = {m: None if s["mean"] is None else round(s["mean"], 4) for m, s in self.summary().items()}
        return (
            f"EvaluationResult({means}, {len(self.results)} samples, judge={self.judge!r}, invalid={len(self.invalid)})"
        )

    @property
    def usage(self) -> Usage:
        """Total judge usage over all samples (each call counted once)."""
        total = Usage()
        for r in self.results:
            total = total + r.usage
        return total

    @property
    def judges(self) -> dict[str, dict[str, Any]]:
        """The fingerprints of the judges that scored this run: ``{id: fingerprint dict}`` (see
        :mod:`ragmeter.judges.fingerprint`; a composite judge's members included)."""
        from ragmeter.judges.fingerprint import fingerprints_of

        return fingerprints_of(s.fingerprint for r in self.results for s in r.scores.values())

    def fingerprints(self, metric: str) -> list[str]:
        """The fingerprint ids of the judges that scored ``metric``, most scores first (one for a
        run with one judge; an inline run may hold several)."""
        counts: dict[str, int] = {}
        for s in self.scores(metric):
            if s.fingerprint:
                counts[s.fingerprint] = counts.get(s.fingerprint, 0) + 1
        return sorted(counts, key=lambda k: -counts[k])

    def scores(self, metric: str) -> list[Score]:
        """Every sample's Score for ``metric``, in sample order."""
        return [r.scores[metric] for r in self.results if metric in r.scores]

    def values(self, metric: str) -> list[float | None]:
        """Every sample's value for ``metric`` (None where it has none)."""
        return [s.value for s in self.scores(metric)]

    def summary(self, labels: Any = None) -> dict[str, dict[str, Any]]:
        """Per metric: mean, median, std, min, max over the values, and the count of values,
        errors, not-applicable scores and pass / warn / fail labels.

        ``labels`` (a labels file or :class:`~ragmeter.labels.Label` objects): each labeled
        metric also gets its mean in human units from the judge and the labels (PPI++,
        :func:`ragmeter.trust.human_estimates`): ``human_mean``, ``human_ci`` (95%),
        ``human_n`` (labeled samples), ``human_scale``, or ``human_reason`` when it cannot be made."""
        out: dict[str, dict[str, Any]] = {}
        for metric in self.metrics:
            scores = self.scores(metric)
            values = [s.value for s in scores if s.value is not None]
            row: dict[str, Any] = _stats(values)
            row.update(
                {
                    "count": len(values),
                    "errors": sum(s.status == "error" for s in scores),
                    "n/a": sum(s.status == "n/a" for s in scores),
                    "pass": sum(s.label == "pass" for s in scores),
                    "warn": sum(s.label == "warn" for s in scores),
                    "fail": sum(s.label == "fail" for s in scores),
                }
            )
            out[metric] = row
        if labels is not None:
            self._add_human_estimates(out, labels)
        return out

    def _add_human_estimates(self, out: dict[str, dict[str, Any]], labels: Any) -> None:
        """Add the ``human_*`` entries of :meth:`summary` to its rows ``out``."""
        from ragmeter.trust.estimates import human_estimates

        for metric, est in human_estimates(self, labels).items():
            if metric in out:
                out[metric].update(
                    human_mean=est["mean"],
                    human_ci=est["ci"],
                    human_n=est["n"],
                    human_scale=est["scale"],
                    **({"human_reason": est["reason"]} if est["reason"] else {}),
                )

    def problems(self, threshold: float | None = None) -> list[dict[str, Any]]:
        """Scores that need a look, worst first: errors, ensemble disagreements, scores whose
        repeated judge calls were unstable (:mod:`ragmeter.trust.repeats`), and values below
        ``threshold`` (or, without one, scores labelled warn or fail against their metric's own
        thresholds). Texts as a report writes them (:func:`ragmeter.privacy.for_output`)."""
        rows = []
        for r in map(for_output, self.results):
            for name, s in r.scores.items():
                if (
                    s.status == "error"
                    or s.details.get("disagreement")
                    or (s.details.get("repeats") or {}).get("unstable")
                ):
                    bad = True
                elif s.value is None:
                    bad = False
                elif threshold is not None:
                    bad = s.value < threshold
                else:
                    bad = s.label in ("warn", "fail")
                if bad:
                    rows.append(
                        {
                            "sample_id": r.sample.id,
                            "question": r.sample.question,
                            "metric": name,
                            "value": s.value,
                            "label": s.label,
                            "error": s.error,
                            "explanation": s.explanation,
                        }
                    )
        rows.sort(key=lambda row: (row["value"] is not None, row["value"] if row["value"] is not None else 0.0))
        return rows

    def conversations(self, metric: str | None = None, tolerance: float = 0.05) -> list[ConversationResult]:
        """Per conversation (samples with a ``conversation_id``) the turn values of ``metric``
        (default: the run's first metric), the worst turn and whether quality falls over the
        turns: the least-squares slope of value over turn number is below ``-tolerance``. See
        :func:`ragmeter.conversations.conversation_results` (turns 1, 2, 3 scored 0.9, 0.8, 0.4:
        slope -0.25 per turn, worst turn 3, falling)."""
        metric = metric if metric is not None else (self.metrics[0] if self.metrics else "")
        return conversation_results(self.results, metric, tolerance)

    # ------------------------------------------------------------------ exports

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per sample: id, question, answer, then ``<metric>`` value and
        ``<metric>_label`` / ``<metric>_error`` columns; ``conversation_id`` and ``turn`` after the
        id when any sample belongs to a conversation. Texts as a report writes them
        (:func:`ragmeter.privacy.for_output`)."""
        rows = []
        chat = self._has_conversations()
        for r in map(for_output, self.results):
            row: dict[str, Any] = {"sample_id": r.sample.id}
            if chat:
                row.update(conversation_id=r.sample.conversation_id, turn=r.sample.turn)
            row.update(question=r.sample.question, answer=r.sample.answer)
            for m in self.metrics:
                s = r.scores.get(m)
                row[m] = s.value if s else None
                row[f"{m}_label"] = s.label if s else None
                row[f"{m}_error"] = s.error if s else None
            row["judge_calls"] = r.usage.calls
            row["cost_usd"] = r.usage.cost_usd
            rows.append(row)
        return rows

    def to_pandas(self):
        """A pandas DataFrame of :meth:`to_records` (needs pandas: ``pip install "ragmeter[pandas]"``)."""
        from ragmeter._extras import needs_extra

        with needs_extra("to_pandas()", "pandas", "pandas"):
            import pandas as pd

        return pd.DataFrame(self.to_records(), columns=self._columns())

    def _has_conversations(self) -> bool:
        return any(r.sample.conversation_id is not None for r in self.results)

    def _columns(self) -> list[str]:
        cols = (
            ["sample_id"] + (["conversation_id", "turn"] if self._has_conversations() else []) + ["question", "answer"]
        )
        for m in self.metrics:
            cols += [m, f"{m}_label", f"{m}_error"]
        return cols + ["judge_calls", "cost_usd"]

    def to_dict(self) -> dict[str, Any]:
        """Everything as one JSON-serialisable dict."""
        return {
            "judge": self.judge,
            "metrics": self.metrics,
            "thresholds": {k: list(v) for k, v in self.thresholds.items()},
            **({"profile": self.profile} if self.profile else {}),
            "judges": self.judges,
            "summary": self.summary(),
            "usage": self.usage.to_dict(),
            "duration_s": round(self.duration_s, 3),
            "invalid_records": [e.to_dict() for e in self.invalid],
            "samples": [r.to_dict() for r in self.results],
        }

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """Strict JSON text of :meth:`to_dict` (no bare NaN: see :func:`ragmeter.fileio.json_text`);
        also written to ``path`` when given (atomically)."""
        text = json_text(self.to_dict(), indent=1)
        if path is not None:
            write_text_atomic(path, text)
        return text

    def to_jsonl(self, path: str | os.PathLike | None = None) -> str:
        """JSONL: a header line (judge, metrics, thresholds, invalid records), then one line per
        sample with its Scores. ``ragmeter report`` / ``compare`` read it back."""
        header = {
            "ragmeter": "results",
            "judge": self.judge,
            "metrics": self.metrics,
            "thresholds": {k: list(v) for k, v in self.thresholds.items()},
            **({"profile": self.profile} if self.profile else {}),
            "judges": self.judges,
            "invalid_records": [e.to_dict() for e in self.invalid],
            "duration_s": round(self.duration_s, 3),
        }
        lines = [json_text(header)] + [json_text(r.to_dict()) for r in self.results]
        text = "\n".join(lines) + "\n"
        if path is not None:
            write_text_atomic(path, text)
        return text

    def to_csv(self, path: str | os.PathLike) -> None:
        """One row per sample (see :meth:`to_records`), written atomically."""
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=self._columns())
        writer.writeheader()
        for row in self.to_records():
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
        write_text_atomic(path, buf.getvalue())

    def to_markdown(self) -> str:
        """A Markdown report: summary table, usage, problems, invalid records."""
        return markdown_report(self)

    def to_html(self) -> str:
        """The run as ragmeter's self-contained HTML page (:func:`ragmeter.dashboard.render_result`):
        summary, distributions, worst samples first with filters, per-sample evidence."""
        from ragmeter.dashboard.page import render_result  # the one upward import (tests/project/test_import_graph.py)

        return render_result(self)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the report in the format of ``path``'s suffix: .md, .html, .json, .jsonl or .csv.
        The file is replaced atomically: a failed write leaves the previous one, never a
        truncated or empty file."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix in (".md", ".markdown"):
            write_text_atomic(path, self.to_markdown())
        elif suffix in (".html", ".htm"):
            write_text_atomic(path, self.to_html())
        elif suffix == ".json":
            self.to_json(path)
        elif suffix == ".jsonl":
            self.to_jsonl(path)
        elif suffix == ".csv":
            self.to_csv(path)
        else:
            raise ValueError(f"unknown report type {suffix!r} (use .md, .html, .json, .jsonl or .csv)")
        return path

    @classmethod
    def from_jsonl(cls, path: str | os.PathLike) -> EvaluationResult:
        """Read a results file written by :meth:`to_jsonl` (or ``ragmeter evaluate --out x.jsonl``).
        Raises ValueError naming the line and what is wrong when the file is malformed."""
        lines = [(n, ln) for n, ln in enumerate(read_text(path).split("\n"), start=1) if ln.strip()]
        if not lines:
            raise ValueError(f"{path}: empty results file")
        try:
            header = parse_json(lines[0][1])
        except JSON_ERRORS as exc:
            raise ValueError(
                f"{path}: line {lines[0][0]} is not JSON: {json_problem(exc).removeprefix('invalid JSON: ')}"
            ) from None
        if not isinstance(header, Mapping) or header.get("ragmeter") != "results":
            raise ValueError(f"{path}: not a ragmeter results file (line 1 has no 'ragmeter': 'results' header)")
        try:
            metrics, thresholds, invalid, duration = _header_fields(header)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: line 1: {exc}") from None
        results = []
        for n, line in lines[1:]:
            try:
                results.append(SampleResult.from_dict(parse_json(line)))
            except (*JSON_ERRORS, KeyError, TypeError) as exc:
                raise ValueError(f"{path}: line {n}: {_problem(exc)}") from None
        return cls(
            results,
            metrics or sorted({m for r in results for m in r.scores}),
            judge=str(header.get("judge", "code")),
            invalid=invalid,
            duration_s=duration,
            thresholds=thresholds,
            profile=_profile(header),
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> EvaluationResult:
        """Read a results file written by ``evaluate --out``: ``.jsonl`` (:meth:`from_jsonl`) or
        the ``.json`` document (:meth:`to_json`), with its thresholds, invalid records and
        duration. Raises ValueError naming the file and what is wrong."""
        if Path(path).suffix.lower() != ".json":
            return cls.from_jsonl(path)
        try:
            data = parse_json(read_text(path))
        except JSON_ERRORS as exc:
            raise ValueError(f"{path}: {json_problem(exc)}") from None
        if not isinstance(data, Mapping) or not isinstance(data.get("samples"), list):
            raise ValueError(
                f"{path}: not a ragmeter results file (no 'samples' list; write it with 'evaluate --out x.json')"
            )
        try:
            metrics, thresholds, invalid, duration = _header_fields(data)
            results = [SampleResult.from_dict(d) for d in data["samples"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {_problem(exc)}") from None
        return cls(
            results,
            metrics or sorted({m for r in results for m in r.scores}),
            judge=str(data.get("judge", "code")),
            invalid=invalid,
            duration_s=duration,
            thresholds=thresholds,
            profile=_profile(data),
        )


def _profile(header: Mapping) -> str | None:
    profile = header.get("profile")
    return profile if isinstance(profile, str) and profile else None


def _problem(exc: BaseException) -> str:
    if isinstance(exc, (json.JSONDecodeError, RecursionError)):
        return json_problem(exc)
    if isinstance(exc, KeyError):
        return f"missing key {exc}"
    return str(exc)


def _header_fields(header: Mapping) -> tuple[list[str], dict[str, tuple[float, float]], list[RecordError], float]:
    """The metrics, thresholds, invalid records and duration of a results file's header line."""
    read_judges(header.get("judges"))
    metrics = header.get("metrics") or []
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise ValueError("'metrics' must be a list of metric names")
    thresholds = header.get("thresholds") or {}
    if not isinstance(thresholds, Mapping):
        raise ValueError("'thresholds' must be an object of metric -> [threshold, warn]")
    limits = {}
    for name, pair in thresholds.items():
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError(f"threshold of {name!r} must be [threshold, warn]")
        limits[str(name)] = (finite_number(pair[0], f"thresholds.{name}"), finite_number(pair[1], f"thresholds.{name}"))
    invalid = header.get("invalid_records") or []
    if not isinstance(invalid, list) or not all(isinstance(e, Mapping) for e in invalid):
        raise ValueError("'invalid_records' must be a list of objects")
    errors = [RecordError(e.get("location"), e.get("field"), str(e.get("message", ""))) for e in invalid]
    return metrics, limits, errors, finite_number(header.get("duration_s", 0.0), "duration_s")


def read_judges(table: Any) -> None:
    """Register the judge fingerprints of a results file's ``judges`` table (``{id: fingerprint}``;
    see :mod:`ragmeter.judges.fingerprint`). ValueError naming the entry when one is malformed."""
    if table is None:
        return
    if not isinstance(table, Mapping):
        raise ValueError("'judges' must be an object of fingerprint id -> fingerprint")
    from ragmeter.judges.fingerprint import JudgeFingerprint

    for key, value in table.items():
        try:
            JudgeFingerprint.from_dict({**value, "id": value.get("id") or key} if isinstance(value, Mapping) else value)
        except ValueError as exc:
            raise ValueError(f"judges.{key}: {exc}") from None
