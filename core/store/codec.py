"""Internal: Rows to and from ragmeter objects: a :class:`~ragmeter.SampleResult` becomes one ``samples``
row and one ``scores`` row per metric, and comes back equal.

JSON columns hold :func:`ragmeter.fileio.json_text`: strict JSON (``allow_nan=False``) where
non-finite floats are null, tuples and sets lists, NumPy values their Python equivalents, and
anything else its ``str``. Text no database driver can encode is replaced by U+FFFD: lone
surrogates (e.g. from a broken ``\\ud800`` escape in a judge's answer) everywhere, and on
PostgreSQL, whose text cannot hold them, NUL characters in the plain text columns (JSON columns
escape NUL as ``\\u0000`` and keep it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, overload

from ragmeter.data import CONVERSATION_FIELDS, Sample, Score
from ragmeter.fileio import json_text
from ragmeter.judges.base import Usage
from ragmeter.metrics.scoring import SampleResult
from ragmeter.verdicts import latency_seconds

_SURROGATES = re.compile("[\ud800-\udfff]")
_SURROGATES_AND_NUL = re.compile("[\ud800-\udfff\x00]")

__all__ = [
    "dumps",
    "loads",
    "sample_row",
    "score_rows",
    "sample_result",
    "tags_of",
    "utc",
    "naive_utc",
    "started_at",
    "judge_of",
    "TextCleaner",
]


def dumps(obj: Any) -> str:
    """JSON text for a JSON column: :func:`ragmeter.fileio.json_text` (strict, NaN as null),
    with lone surrogates replaced (see the module docstring)."""
    return _SURROGATES.sub("\ufffd", json_text(obj))


def loads(text: str | None, default: Any = None) -> Any:
    """Inverse of :func:`dumps`; ``default`` for NULL."""
    return default if text is None else json.loads(text)


def utc(value: datetime) -> datetime:
    """A stored (naive UTC) datetime as an aware UTC datetime."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def naive_utc(value: datetime | None = None) -> datetime:
    """``value`` (now when None) as a naive UTC datetime, the form stored."""
    value = value or datetime.now(UTC)
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def started_at(sample: Sample) -> datetime | None:
    """When a captured interaction started (``metadata["started_at"]``, ISO 8601), else None."""
    value = sample.metadata.get("started_at")
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return naive_utc(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC))


def tags_of(extra: Iterable[str] | None, sample: Sample | None = None) -> list[str]:
    """Tags for a row: ``extra`` then the sample's own ``metadata["tags"]`` (a list of strings),
    without duplicates, in order."""
    tags = [str(t) for t in (extra or ())]
    own = sample.metadata.get("tags") if sample is not None else None
    if isinstance(own, (list, tuple)):
        tags += [t for t in own if isinstance(t, str)]
    return list(dict.fromkeys(tags))


def judge_of(results: Iterable[SampleResult]) -> str | None:
    """The judge named most often by the scores of ``results`` (None when none names one)."""
    counts = Counter(s.judge for r in results for s in r.scores.values() if s.judge)
    return counts.most_common(1)[0][0] if counts else None


class TextCleaner:
    """``cleaner(text)``: ``text`` storable on ``dialect`` (see the module docstring); None stays None."""

    def __init__(self, dialect: str):
        self.bad = _SURROGATES_AND_NUL if dialect == "postgresql" else _SURROGATES

    @overload
    def __call__(self, value: str) -> str: ...
    @overload
    def __call__(self, value: None) -> None: ...
    @overload
    def __call__(self, value: str | None) -> str | None: ...
    def __call__(self, value: str | None) -> str | None:
        return value if value is None or value.isascii() and "\x00" not in value else self.bad.sub("\ufffd", value)


def sample_row(result: SampleResult, run_id: int, created_at: datetime, tags: list[str], text: TextCleaner) -> dict:
    """The ``samples`` row of ``result``."""
    s = result.sample
    contexts = [{"text": c.text, "id": c.id, "score": c.score, "metadata": c.metadata} for c in s.contexts]
    return {
        "run_id": run_id,
        "sample_id": text(s.id),
        "created_at": created_at,
        "question": text(s.question),
        "answer": text(s.answer),
        "contexts": dumps(contexts),
        "reference": text(s.reference),
        "relevant_ids": None if s.relevant_ids is None else dumps(s.relevant_ids),
        "metadata": dumps(_with_turn(s)),
        "usage": dumps(result.usage.to_dict()),
        "scoring_s": float(result.duration_s),
        "tags": dumps(tags),
        "latency_s": latency_seconds(s.metadata),
    }


#: Key of the ``metadata`` JSON column that holds a chat turn's conversation fields (no column of its own).
TURN_KEY = "ragmeter:turn"


def _with_turn(sample: Sample) -> dict:
    """The metadata stored for ``sample``: its own, plus its conversation fields under :data:`TURN_KEY`."""
    turn = {k: getattr(sample, k) for k in CONVERSATION_FIELDS if getattr(sample, k)}
    return {**sample.metadata, TURN_KEY: turn} if turn else sample.metadata


def score_rows(result: SampleResult, sample_row_id: int, run_id: int, text: TextCleaner) -> list[dict]:
    """The ``scores`` rows of ``result``, in its metric order."""
    return [
        {
            "sample_row_id": sample_row_id,
            "run_id": run_id,
            "metric": text(name),
            "value": s.value,
            "label": s.label,
            "error": text(s.error),
            "explanation": text(s.explanation or ""),
            "details": dumps(s.details),
            "judge": text(s.judge),
            "judge_fingerprint": text(s.fingerprint),
        }
        for name, s in result.scores.items()
    ]


def sample_result(row: Any, score_rows_: Iterable[Any]) -> SampleResult:
    """A :class:`SampleResult` from a ``samples`` row and its ``scores`` rows (in id order)."""
    metadata = loads(row.metadata, {})
    turn = metadata.pop(TURN_KEY, None) or {}
    sample = Sample(
        question=row.question,
        contexts=loads(row.contexts, []),
        answer=row.answer,
        reference=row.reference,
        relevant_ids=loads(row.relevant_ids),
        id=row.sample_id,
        metadata=metadata,
        **{k: v for k, v in turn.items() if k in CONVERSATION_FIELDS},
    )
    scores = {
        r.metric: Score(
            metric=r.metric,
            value=r.value,
            explanation=r.explanation or "",
            details=loads(r.details, {}),
            error=r.error,
            judge=r.judge,
            label=r.label,
            fingerprint=r.judge_fingerprint,
        )
        for r in score_rows_
    }
    return SampleResult(
        sample=sample, scores=scores, usage=Usage.from_dict(loads(row.usage, {})), duration_s=row.scoring_s or 0.0
    )
