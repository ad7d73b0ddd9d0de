"""Evaluation results: per sample, per metric Scores, with summaries and exports."""

from __future__ import annotations

import json
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ragmeter.data import RecordError, Sample, Score
from ragmeter.judges.base import Usage
from ragmeter.report import html_report, markdown_report

__all__ = ["SampleResult", "EvaluationResult"]


@dataclass
class SampleResult:
    """The Scores of one sample (``scores[metric_name]``), what the judge work cost, and how long
    scoring took."""

    sample: Sample
    scores: dict[str, Score]
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0

    def __getitem__(self, metric: str) -> Score:
        return self.scores[metric]

    def to_dict(self) -> dict:
        """Plain-dict form: one JSONL line of a results file."""
        return {"sample": self.sample.to_dict(), "scores": {k: s.to_dict() for k, s in self.scores.items()},
                "usage": self.usage.to_dict(), "duration_s": round(self.duration_s, 6)}

    @classmethod
    def from_dict(cls, d: dict) -> "SampleResult":
        """Inverse of :meth:`to_dict`."""
        return cls(sample=Sample.from_dict(d["sample"]),
                   scores={k: Score.from_dict(v) for k, v in d["scores"].items()},
                   usage=Usage.from_dict(d.get("usage") or {}), duration_s=d.get("duration_s", 0.0))


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

    def __init__(self, results: list[SampleResult], metrics: list[str], judge: str = "code",
                 invalid: list[RecordError] | None = None, duration_s: float = 0.0,
                 thresholds: dict[str, tuple[float, float]] | None = None):
        self.results = list(results)
        self.metrics = list(metrics)
        self.judge = judge
        self.invalid = list(invalid or [])
        self.duration_s = duration_s
        self.thresholds = dict(thresholds or {})

    def __iter__(self) -> Iterator[SampleResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: int) -> SampleResult:
        return self.results[i]

    def __repr__(self) -> str:
        return f"EvaluationResult({len(self.results)} samples, metrics={self.metrics}, judge={self.judge!r}, invalid={len(self.invalid)})"

    @property
    def usage(self) -> Usage:
        """Total judge usage over all samples (each call counted once)."""
        total = Usage()
        for r in self.results:
            total = total + r.usage
        return total

    def scores(self, metric: str) -> list[Score]:
        """Every sample's Score for ``metric``, in sample order."""
        return [r.scores[metric] for r in self.results if metric in r.scores]

    def values(self, metric: str) -> list[float | None]:
        """Every sample's value for ``metric`` (None where it has none)."""
        return [s.value for s in self.scores(metric)]

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per metric: mean, median, std, min, max over the values, and the count of values,
        errors, not-applicable scores and pass / warn / fail labels."""
        out: dict[str, dict[str, Any]] = {}
        for metric in self.metrics:
            scores = self.scores(metric)
            values = [s.value for s in scores if s.value is not None]
            row: dict[str, Any] = _stats(values)
            row.update({
                "count": len(values),
                "errors": sum(s.status == "error" for s in scores),
                "n/a": sum(s.status == "n/a" for s in scores),
                "pass": sum(s.label == "pass" for s in scores),
                "warn": sum(s.label == "warn" for s in scores),
                "fail": sum(s.label == "fail" for s in scores),
            })
            out[metric] = row
        return out

    def problems(self, threshold: float | None = None) -> list[dict[str, Any]]:
        """Scores that need a look, worst first: errors, ensemble disagreements, and values below
        ``threshold`` (or, without one, scores labelled warn or fail against their metric's own
        thresholds)."""
        rows = []
        for r in self.results:
            for name, s in r.scores.items():
                if s.status == "error" or s.details.get("disagreement"):
                    bad = True
                elif s.value is None:
                    bad = False
                elif threshold is not None:
                    bad = s.value < threshold
                else:
                    bad = s.label in ("warn", "fail")
                if bad:
                    rows.append({"sample_id": r.sample.id, "question": r.sample.question, "metric": name,
                                 "value": s.value, "label": s.label, "error": s.error, "explanation": s.explanation})
        rows.sort(key=lambda row: (row["value"] is not None, row["value"] if row["value"] is not None else 0.0))
        return rows

    # ------------------------------------------------------------------ exports

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per sample: id, question, answer, then ``<metric>`` value and
        ``<metric>_label`` / ``<metric>_error`` columns."""
        rows = []
        for r in self.results:
            row: dict[str, Any] = {"sample_id": r.sample.id, "question": r.sample.question, "answer": r.sample.answer}
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
        """A pandas DataFrame of :meth:`to_records` (requires pandas)."""
        import pandas as pd

        return pd.DataFrame(self.to_records(), columns=self._columns())

    def _columns(self) -> list[str]:
        cols = ["sample_id", "question", "answer"]
        for m in self.metrics:
            cols += [m, f"{m}_label", f"{m}_error"]
        return cols + ["judge_calls", "cost_usd"]

    def to_dict(self) -> dict[str, Any]:
        """Everything as one JSON-serialisable dict."""
        return {
            "judge": self.judge,
            "metrics": self.metrics,
            "thresholds": {k: list(v) for k, v in self.thresholds.items()},
            "summary": self.summary(),
            "usage": self.usage.to_dict(),
            "duration_s": round(self.duration_s, 3),
            "invalid_records": [e.to_dict() for e in self.invalid],
            "samples": [r.to_dict() for r in self.results],
        }

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """JSON text of :meth:`to_dict`; also written to ``path`` when given."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=1, default=_json_default)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_jsonl(self, path: str | os.PathLike | None = None) -> str:
        """JSONL: a header line (judge, metrics, thresholds, invalid records), then one line per
        sample with its Scores. ``ragmeter report`` / ``compare`` read it back."""
        header = {"ragmeter": "results", "judge": self.judge, "metrics": self.metrics,
                  "thresholds": {k: list(v) for k, v in self.thresholds.items()},
                  "invalid_records": [e.to_dict() for e in self.invalid], "duration_s": round(self.duration_s, 3)}
        lines = [json.dumps(header, ensure_ascii=False, default=_json_default)]
        lines += [json.dumps(r.to_dict(), ensure_ascii=False, default=_json_default) for r in self.results]
        text = "\n".join(lines) + "\n"
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_csv(self, path: str | os.PathLike) -> None:
        """One row per sample (see :meth:`to_records`)."""
        import csv

        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self._columns())
            writer.writeheader()
            for row in self.to_records():
                writer.writerow({k: ("" if v is None else v) for k, v in row.items()})

    def to_markdown(self) -> str:
        """A Markdown report: summary table, usage, problems, invalid records."""
        return markdown_report(self)

    def to_html(self) -> str:
        """A self-contained HTML report (same content as :meth:`to_markdown`)."""
        return html_report(self)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the report in the format of ``path``'s suffix: .md, .html, .json, .jsonl or .csv."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix in (".md", ".markdown"):
            path.write_text(self.to_markdown(), encoding="utf-8")
        elif suffix in (".html", ".htm"):
            path.write_text(self.to_html(), encoding="utf-8")
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
    def from_jsonl(cls, path: str | os.PathLike) -> "EvaluationResult":
        """Read a results file written by :meth:`to_jsonl` (or ``ragmeter evaluate --out x.jsonl``)."""
        lines = [ln for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
        if not lines:
            raise ValueError(f"{path}: empty results file")
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line 1 is not JSON: {exc.msg}") from None
        if header.get("ragmeter") != "results":
            raise ValueError(f"{path}: not a ragmeter results file (line 1 has no 'ragmeter': 'results' header)")
        results = []
        for n, line in enumerate(lines[1:], start=2):
            try:
                results.append(SampleResult.from_dict(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{path}: line {n}: {exc}") from None
        invalid = [RecordError(e.get("location"), e.get("field"), e.get("message", "")) for e in header.get("invalid_records", [])]
        return cls(results, header.get("metrics") or sorted({m for r in results for m in r.scores}),
                   judge=header.get("judge", "code"), invalid=invalid, duration_s=header.get("duration_s", 0.0),
                   thresholds={k: tuple(v) for k, v in (header.get("thresholds") or {}).items()})


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    return str(obj)
