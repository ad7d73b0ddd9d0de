"""Labels in: :class:`Label` and :func:`import_labels` (JSON, JSONL or CSV files of completed labels)."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ragmeter.data import RecordError
from ragmeter.fileio import JSON_ERRORS, json_problem, parse_json, read_text
from ragmeter.labels.tasks import CRITERIA

__all__ = ["Label", "import_labels", "parse_label"]

_SCALE = range(1, 6)


@dataclass(frozen=True)
class Label:
    """One annotator's rating of one sample on one criterion: ``value`` 1-5, or None when the
    annotator left it out."""

    sample_id: str
    annotator: str
    criterion: str
    value: int | None

    def to_dict(self) -> dict[str, Any]:
        """The label as a JSON-ready dict."""
        return asdict(self)


def _value(raw: Any) -> int | None:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool):
        raise ValueError(f"expected a whole number 1-5 or empty, got {raw!r}")
    try:
        number = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"expected a whole number 1-5 or empty, got {raw!r}") from None
    if number != number:  # NaN: missing
        return None
    if number != int(number) or int(number) not in _SCALE:
        raise ValueError(f"expected a whole number 1-5 or empty, got {raw!r}")
    return int(number)


def parse_label(record: Any, location: str, annotator: str | None = None) -> Label:
    """A :class:`Label` from a mapping with ``sample_id``, ``annotator`` (or the file's default
    ``annotator``), ``criterion`` and ``value``; raises :class:`RecordError` naming
    ``location`` and the field."""
    if not isinstance(record, Mapping):
        raise RecordError(location, None, f"expected an object, got {type(record).__name__}")
    fields = {}
    for name in ("sample_id", "annotator", "criterion"):
        raw = record.get(name, annotator if name == "annotator" else None)
        if raw is None or not str(raw).strip():
            raise RecordError(location, name, "missing")
        fields[name] = str(raw).strip()
    if fields["criterion"] not in CRITERIA:
        raise RecordError(location, "criterion", f"unknown criterion {fields['criterion']!r} (one of {', '.join(CRITERIA)})")
    try:
        value = _value(record.get("value"))
    except ValueError as exc:
        raise RecordError(location, "value", str(exc)) from None
    return Label(fields["sample_id"], fields["annotator"], fields["criterion"], value)


def _from_csv(text: str) -> Iterable[tuple[str, Mapping]]:
    """Long rows (sample_id, annotator, criterion, value) or the export's wide rows (one column per criterion)."""
    reader = csv.DictReader(io.StringIO(text))
    wide = "criterion" not in (reader.fieldnames or []) and any(c in CRITERIA for c in reader.fieldnames or [])
    for n, row in enumerate(reader, start=2):
        if wide:
            for criterion in (c for c in reader.fieldnames or [] if c in CRITERIA):
                yield f"line {n}", {**row, "criterion": criterion, "value": row.get(criterion)}
        else:
            yield f"line {n}", row


def import_labels(path: str | os.PathLike) -> list[Label]:
    """Read completed labels from ``path``.

    - ``.csv``: columns ``sample_id, annotator, criterion, value``, or the task file written by
      :func:`ragmeter.labels.export_tasks` with its ``annotator`` and criterion columns filled in;
    - ``.jsonl``: one label object per line;
    - ``.json``: a list of label objects, or ``{"annotator": ..., "labels": [...]}`` (what the
      HTML labeling page downloads; the top-level annotator is each label's default).

    A value is a whole number 1-5; empty, null or NaN is a missing label (kept, value None).
    Raises :class:`ragmeter.data.RecordError` naming the line or item and the field.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".json"):
        raise ValueError(f"{path}: unknown labels file type {suffix or '(none)'!r} (use .json, .jsonl or .csv)")
    text = read_text(path)
    default: str | None = None
    if suffix == ".csv":
        records: Iterable[tuple[str, Any]] = _from_csv(text)
    elif suffix == ".jsonl":
        records = []
        for n, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                try:
                    records.append((f"line {n}", parse_json(line)))
                except JSON_ERRORS as exc:
                    raise RecordError(f"{path}: line {n}", None, json_problem(exc)) from None
    else:
        try:
            doc = parse_json(text)
        except JSON_ERRORS as exc:
            raise RecordError(str(path), None, json_problem(exc)) from None
        if isinstance(doc, Mapping):
            default = doc.get("annotator")
            doc = doc.get("labels")
        if not isinstance(doc, list):
            raise RecordError(str(path), "labels", "expected a list of labels")
        records = [(f"item {n}", item) for n, item in enumerate(doc, start=1)]
    labels = []
    for location, record in records:
        labels.append(parse_label(record, f"{path}: {location}", default))
    return labels
