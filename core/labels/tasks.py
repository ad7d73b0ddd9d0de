"""Internal: Labeling tasks out: the criteria people rate (with a 1-5 guide), the review queue (which
samples to label first, and why), and :func:`export_tasks` to JSONL or CSV."""

from __future__ import annotations

import csv
import io
import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragmeter.fileio import write_text_atomic
from ragmeter.labels.criteria import criteria as labeling_criteria
from ragmeter.labels.io import answer_hash
from ragmeter.metrics.scoring import SampleResult
from ragmeter.privacy import for_output
from ragmeter.result import EvaluationResult

__all__ = ["DISAGREEMENT_SPREAD", "NEAR_THRESHOLD", "review_queue", "export_tasks", "task_records"]

#: An ensemble judge's members disagree when their values spread more than this.
DISAGREEMENT_SPREAD = 0.3
#: A score this close to its metric's threshold is a borderline call.
NEAR_THRESHOLD = 0.05


def _reasons(r: SampleResult, thresholds: dict[str, tuple[float, float]]) -> tuple[int, float, str] | None:
    """(priority, order within it, reason) of a sample that needs a look; None otherwise."""
    spreads = [
        (s.details["spread"], m)
        for m, s in r.scores.items()
        if isinstance(s.details.get("spread"), (int, float)) and s.details["spread"] > DISAGREEMENT_SPREAD
    ]
    if spreads:
        spread, metric = max(spreads)
        return (0, -spread, f"ensemble disagreement: {metric} spread {spread:.2f} > {DISAGREEMENT_SPREAD}")
    near = [
        (abs(s.value - thresholds[m][0]), m, s.value)
        for m, s in r.scores.items()
        if s.value is not None and m in thresholds and abs(s.value - thresholds[m][0]) <= NEAR_THRESHOLD
    ]
    if near:
        dist, metric, value = min(near)
        return (1, dist, f"near threshold: {metric} {value:.2f} within {NEAR_THRESHOLD} of {thresholds[metric][0]}")
    errors = [(m, s.error) for m, s in r.scores.items() if s.error]
    if errors:
        return (2, 0.0, f"error: {errors[0][0]}: {errors[0][1]}")
    return None


def review_queue(result: EvaluationResult, *, seed: int = 0) -> list[tuple[SampleResult, str]]:
    """Every sample with the reason to label it, in the order to label them: ensemble
    disagreement above :data:`DISAGREEMENT_SPREAD` (widest first), then a score within
    :data:`NEAR_THRESHOLD` of its metric's threshold (closest first), then errors, then the rest
    in a seeded random order ("random sample", for an unbiased estimate)."""
    flagged, rest = [], []
    for n, r in enumerate(result):
        why = _reasons(r, result.thresholds)
        (flagged.append((why[0], why[1], n, r, why[2])) if why else rest.append(r))
    flagged.sort(key=lambda f: f[:3])
    random.Random(seed).shuffle(rest)
    return [(f[3], f[4]) for f in flagged] + [(r, "random sample") for r in rest]


def _verdicts(r: SampleResult) -> dict[str, Any]:
    return {m: {"value": s.value, "label": s.label, "error": s.error} for m, s in r.scores.items()}


def task_records(
    result: EvaluationResult,
    *,
    criteria: Sequence[str] | None = None,
    show_verdicts: bool = False,
    n: int | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The tasks :func:`export_tasks` writes, as dicts (the first ``n`` of :func:`review_queue`;
    ``criteria``: None for all of :func:`ragmeter.labels.criteria.criteria`)."""
    guides = labeling_criteria()
    criteria = list(guides) if criteria is None else criteria
    unknown = [c for c in criteria if c not in guides]
    if unknown:
        raise ValueError(f"unknown criteria {unknown} (choose from {', '.join(guides)})")
    queue = review_queue(result, seed=seed)[:n]
    tasks = []
    for rank, (r, reason) in enumerate(queue, start=1):
        r = for_output(r)  # no secrets; no content when captured without
        s = r.sample
        task = {
            "sample_id": s.id,
            "queue_rank": rank,
            "reason": reason,
            "question": s.question,
            "chunks": [getattr(c, "text", c) for c in s.contexts],
            "answer": s.answer,
            "answer_hash": answer_hash(s.answer),
            "criteria": {c: guides[c] for c in criteria},
        }
        if show_verdicts:
            task["judge_verdicts"] = _verdicts(r)
        tasks.append(task)
    return tasks


def _guide(criteria: dict[str, dict[str, Any]]) -> str:
    return "\n".join(
        f"{c}: {g['question']} " + "; ".join(f"{k} = {v}" for k, v in g["anchors"].items()) for c, g in criteria.items()
    )


def export_tasks(
    result: EvaluationResult,
    out: str | os.PathLike,
    *,
    criteria: Sequence[str] | None = None,
    show_verdicts: bool = False,
    n: int | None = None,
    seed: int = 0,
) -> Path:
    """Write labeling tasks for ``result``'s samples to ``out`` (.jsonl, .csv or .html).

    Each task has the question, the chunks, the answer and its hash (:func:`answer_hash`: the
    labels read back carry it, so they count only for runs with that answer), the ``criteria``
    to rate 1-5 with their guide (:func:`ragmeter.labels.criteria.criteria`; None: all of them),
    its place in the review queue and the reason it was chosen (:func:`review_queue`; ``n`` keeps
    the first ``n``). The judge's verdicts are left out unless ``show_verdicts`` (so they do not
    anchor the labels). JSONL: one task per line. CSV: one row
    per task, chunks separated by blank lines, an empty ``annotator`` column and one empty column
    per criterion to fill in (:func:`ragmeter.labels.import_labels` reads it back). HTML: an
    offline labeling page (:mod:`ragmeter.labels.page`).
    """
    path = Path(out)
    suffix = path.suffix.lower()
    criteria = list(labeling_criteria()) if criteria is None else list(criteria)
    tasks = task_records(result, criteria=criteria, show_verdicts=show_verdicts, n=n, seed=seed)
    if suffix == ".jsonl":
        write_text_atomic(path, "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks))
    elif suffix == ".csv":
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(
            [
                "sample_id",
                "queue_rank",
                "reason",
                "question",
                "chunks",
                "answer",
                "answer_hash",
                "guide",
                *(["judge_verdicts"] if show_verdicts else []),
                "annotator",
                *criteria,
            ]
        )
        for t in tasks:
            w.writerow(
                [
                    t["sample_id"],
                    t["queue_rank"],
                    t["reason"],
                    t["question"],
                    "\n\n".join(t["chunks"]),
                    t["answer"] or "",
                    t["answer_hash"],
                    _guide(t["criteria"]),
                    *([json.dumps(t["judge_verdicts"])] if show_verdicts else []),
                    "",
                    *([""] * len(criteria)),
                ]
            )
        write_text_atomic(path, buf.getvalue())
    elif suffix in (".html", ".htm"):
        from ragmeter.labels.page import labeling_page

        write_text_atomic(path, labeling_page(tasks))
    else:
        raise ValueError(f"unknown task file type {suffix or '(none)'!r} (use .jsonl, .csv or .html)")
    return path
