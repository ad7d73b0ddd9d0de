"""Internal: What the dashboard shows: runs (:class:`RunEntry`) and samples (:class:`SampleEntry`), and the
per-sample verdicts computed from them (:class:`SampleView`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ragmeter.data import Score
from ragmeter.judges.base import Usage
from ragmeter.metrics.scoring import SampleResult
from ragmeter.privacy import for_output
from ragmeter.result import EvaluationResult
from ragmeter.verdicts import (
    RESPONSE_TIME,
    Diagnosis,
    composite_inputs,
    composite_score,
    diagnose,
    grade,
    latency_seconds,
    response_time_score,
    run_latency,
    weakest_metric,
)

__all__ = ["RunEntry", "SampleEntry", "SampleView", "Verdicts", "with_response_time"]


def with_response_time(
    result: SampleResult, latency_s: float | None = None, verdicts: Verdicts | None = None
) -> dict[str, Score]:
    """The sample's Scores with its ``response_time`` Score at the page's levels when its latency
    is known (``latency_s``, else ``metadata["latency"]``): added to an inline sample's, recomputed
    (never doubled) over the one :func:`ragmeter.evaluate` gave, which used the default levels."""
    scores = dict(result.scores)
    latency = latency_s if latency_s is not None else latency_seconds(result.sample.metadata)
    if latency is not None:
        v = verdicts or Verdicts()
        scores[RESPONSE_TIME] = response_time_score(latency, v.pass_under, v.warn_under)
    return scores


@dataclass(frozen=True)
class Verdicts:
    """How samples are judged on the page: the composite ``method`` and ``weights`` (see
    :func:`ragmeter.verdicts.composite_score`), the diagnosis' ``low_labels`` (see
    :func:`ragmeter.verdicts.diagnose`) and the response time levels in seconds."""

    method: str = "weighted"
    weights: Mapping[str, float] | None = None
    low_labels: tuple[str, ...] = ("fail",)
    pass_under: float = 3.0
    warn_under: float = 5.0


@dataclass
class RunEntry:
    """One run as the dashboard shows it.

    ``summary`` is :meth:`ragmeter.EvaluationResult.summary` (per metric: count, mean, median,
    std, min, max, errors, n/a, pass, warn, fail); ``values`` the per-metric values for the
    distributions (may be empty for older runs that only feed the trends); ``thresholds`` metric
    -> (pass, warn). ``label`` names the run on the trend axis (default ``"run <id>"``).
    ``latency``: the app's response times in seconds (``count``, ``p50_s``, ``p95_s``, ``max_s``:
    :func:`ragmeter.verdicts.latency_summary`), None when no sample carries one; ``tags`` the
    run's tags; ``judges`` has one line per judge fingerprint (:func:`ragmeter.report.judge_lines`);
    ``complete`` is False for a run recorded as it is scored that has not ended (killed, or still
    running: :attr:`ragmeter.store.RunInfo.complete`).
    """

    id: str
    summary: dict[str, dict[str, Any]]
    thresholds: dict[str, tuple[float, float]] = field(default_factory=dict)
    values: dict[str, list[float]] = field(default_factory=dict)
    created_at: datetime | None = None
    label: str | None = None
    kind: str = "evaluate"
    dataset: str | None = None
    judge: str | None = None
    app_version: str | None = None
    git_commit: str | None = None
    samples: int = 0
    usage: Usage | None = None
    duration_s: float | None = None
    invalid: list[str] = field(default_factory=list)
    latency: dict[str, Any] | None = None
    tags: list[str] = field(default_factory=list)
    judges: list[str] = field(default_factory=list)
    complete: bool = True

    def __post_init__(self) -> None:
        self.id = str(self.id)

    @property
    def name(self) -> str:
        """The run's label, or ``"run <id>"``."""
        return self.label or f"run {self.id}"

    @classmethod
    def from_result(
        cls, result: EvaluationResult, id: str | int = "1", *, verdicts: Verdicts | None = None, **fields: Any
    ) -> RunEntry:
        """A run entry from an :class:`~ragmeter.EvaluationResult` (one run, e.g. ``store.run(id)``):
        summary, values, thresholds, judge, usage, duration, invalid records and the response
        times in seconds; ``response_time`` is added when samples carry a latency. ``fields`` set
        the rest (``created_at``, ``label``, ``kind``, ``dataset``, ``app_version``, ``git_commit``,
        ``tags``, ``complete``)."""
        verdicts = verdicts or Verdicts()
        results = [
            SampleResult(r.sample, with_response_time(r, verdicts=verdicts), r.usage, r.duration_s)
            for r in result.results
        ]
        metrics = list(result.metrics)
        if any(RESPONSE_TIME in r.scores for r in results) and RESPONSE_TIME not in metrics:
            metrics.append(RESPONSE_TIME)
        full = EvaluationResult(results, metrics, judge=result.judge, thresholds=result.thresholds)
        thresholds = dict(result.thresholds)
        if RESPONSE_TIME in metrics:
            thresholds.setdefault(RESPONSE_TIME, (1.0, 0.5))
        values = {m: [v for v in full.values(m) if v is not None] for m in metrics}
        from ragmeter.report import judge_lines

        base = {
            "judge": result.judge,
            "samples": len(result),
            "usage": result.usage,
            "duration_s": result.duration_s,
            "invalid": [str(e) for e in result.invalid],
            "latency": run_latency(result.results),
            "judges": judge_lines(result),
        }
        return cls(id=str(id), summary=full.summary(), thresholds=thresholds, values=values, **{**base, **fields})


@dataclass
class SampleEntry:
    """One scored sample as the dashboard shows it: the :class:`~ragmeter.SampleResult`, its run,
    time, tags and the app's response time. A :class:`ragmeter.store.StoredSample` has the same
    attributes and can be passed as it is. Empty ``tags`` fall back to ``metadata["tags"]``, a
    missing ``latency_s`` to ``metadata["latency"]``."""

    result: SampleResult
    run_id: str | int | None = None
    created_at: datetime | None = None
    tags: list[str] = field(default_factory=list)
    latency_s: float | None = None

    @classmethod
    def from_result(cls, result: EvaluationResult, run_id: str | int | None = "1") -> list[SampleEntry]:
        """One entry per sample of ``result``, all in run ``run_id``."""
        return [cls(r, run_id) for r in result.results]


@dataclass
class SampleView:
    """A sample with its verdicts, ready to show: ``scores`` (with ``response_time`` when the
    latency is known), ``composite`` and ``grade``, the metrics ``used`` and ``excluded`` from it,
    the ``weakest`` of them (metric, value), the ``diagnosis``, ``tags``, ``latency_s``, run id and
    time, and the ``verdicts`` settings used."""

    index: int
    result: SampleResult
    scores: dict[str, Score]
    composite: float | None
    grade: str | None
    used: dict[str, float]
    excluded: dict[str, str]
    diagnosis: Diagnosis
    tags: list[str]
    latency_s: float | None
    run_id: str | None
    created_at: datetime | None
    verdicts: Verdicts
    weakest: tuple[str, float] | None = None

    @property
    def id(self) -> str:
        """The sample's id."""
        return str(self.result.sample.id)


def _tags(entry: Any) -> list[str]:
    tags = list(getattr(entry, "tags", None) or ())
    if not tags:
        own = entry.result.sample.metadata.get("tags")
        tags = list(own) if isinstance(own, (list, tuple)) else []
    return list(dict.fromkeys(str(t) for t in tags))


def sample_views(samples: Iterable[Any], verdicts: Verdicts) -> list[SampleView]:
    """A :class:`SampleView` of each entry (a :class:`SampleEntry` or anything with its attributes)."""
    views = []
    for i, entry in enumerate(samples):
        r: SampleResult = for_output(entry.result)  # no secrets; no content when captured without
        latency = getattr(entry, "latency_s", None)
        latency = latency if latency is not None else latency_seconds(r.sample.metadata)
        scores = with_response_time(r, latency, verdicts)
        value = composite_score(scores, verdicts.weights, verdicts.method)
        used, excluded = composite_inputs(scores, verdicts.weights)
        run_id = getattr(entry, "run_id", None)
        views.append(
            SampleView(
                i,
                r,
                scores,
                value,
                None if value is None else grade(value),
                used,
                excluded,
                diagnose(scores, low_labels=verdicts.low_labels),
                _tags(entry),
                latency,
                None if run_id is None else str(run_id),
                getattr(entry, "created_at", None),
                verdicts,
                weakest_metric(scores, verdicts.weights),
            )
        )
    return views
