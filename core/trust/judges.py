"""Internal: Were two runs judged by the same judge? :func:`judge_changes` compares their fingerprints
metric by metric (:mod:`ragmeter.judges.fingerprint`); ``compare``, the gate and the pytest
plugin say what it finds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ragmeter.judges.fingerprint import lookup

__all__ = ["judge_changes", "describe_changes"]


def _describe(before: list[str], after: list[str]) -> list[str]:
    """What changed between the fingerprint ids of one metric in two runs (empty: the same)."""
    if before == after:
        return []
    if len(before) == 1 and len(after) == 1:
        a, b = lookup(before[0]), lookup(after[0])
        if a is not None and b is not None:
            return b.diff(a) or [f"fingerprint {a.id} -> {b.id}"]
        return [f"fingerprint {before[0]} -> {after[0]}"]
    return [f"judges {', '.join(before)} -> {', '.join(after)}"]


def judge_changes(a: Any, b: Any, metrics: Iterable[str]) -> tuple[dict[str, list[str]], list[str]]:
    """``(changes, notes)`` between runs ``a`` and ``b`` (EvaluationResults) over ``metrics``.

    ``changes``: metric -> what changed in the judge that scored it (one line per field, see
    :meth:`~ragmeter.judges.fingerprint.JudgeFingerprint.diff`), for the metrics judged
    differently. A run with several judges on one metric (an inline run whose judge changed)
    is listed by its fingerprint ids. ``notes``: what could not be told (a run written before
    fingerprints existed) and a ragmeter version that differs while the judge does not.
    """
    changes: dict[str, list[str]] = {}
    unknown: list[str] = []
    versions: set[str] = set()
    for m in metrics:
        before, after = a.fingerprints(m), b.fingerprints(m)
        if not before or not after:
            if a.scores(m) and b.scores(m):
                unknown.append(m)
            continue
        lines = _describe(before, after)
        if lines:
            changes[m] = lines
        elif len(before) == 1:
            fa, fb = lookup(before[0]), lookup(after[0])
            note = fb.version_note(fa) if fa is not None and fb is not None else None
            if note:
                versions.add(note)
    notes = (
        [
            f"judge not recorded for {', '.join(unknown)} in one run (written before judge fingerprints): "
            "cannot tell whether the judge changed"
        ]
        if unknown
        else []
    )
    notes += [f"{v}; same prompts, rules and settings" for v in sorted(versions)]
    return changes, notes


def describe_changes(changes: dict[str, list[str]]) -> list[str]:
    """One line per distinct change, naming the metrics it applies to:
    ``"faithfulness, answer_relevancy: model: gpt-4o-mini -> gpt-4o"``."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for metric, lines in changes.items():
        groups.setdefault(tuple(lines), []).append(metric)
    return [f"{', '.join(metrics)}: {'; '.join(lines)}" for lines, metrics in groups.items()]
