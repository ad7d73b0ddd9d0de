"""Internal: Labels in: :class:`Label` and :func:`import_labels` (JSON, JSONL or CSV files of completed
labels).

A label belongs to the answer it was given on: it carries the answer's hash
(:func:`answer_hash`), and a run whose answer for that sample differs does not count it (see
:func:`ragmeter.labels.match_labels`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmeter.data import RecordError
from ragmeter.fileio import JSON_ERRORS, json_problem, parse_json, read_text
from ragmeter.labels.criteria import criteria
from ragmeter.labels.scales import SCALES, check_value

__all__ = ["Label", "LabelSet", "import_labels", "load_labels", "parse_label", "answer_hash"]

_MAX_NAME = 64  # the store's criterion column


def answer_hash(answer: str | None) -> str:
    """The hash a label keeps of the answer it was given on: the first 16 hex digits of the
    SHA-256 of the answer's UTF-8 text (no answer hashes as the empty text).

    >>> answer_hash("Paris is the capital of France.")
    '557be7eca214f188'
    """
    return hashlib.sha256((answer or "").encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Label:
    """One annotator's rating of one sample's answer on one criterion.

    ``criterion``: one of the labeling page's criteria (:data:`ragmeter.labels.CRITERIA`, rated
    1-5) or a metric's name; ``value``: the rating (binary 0 / 1, 1-5 or 0-1, see
    :mod:`ragmeter.labels.scales`), None when the annotator left it out; ``answer_hash``: the
    :func:`answer_hash` of the answer it was given on (None: not recorded, matched by sample id
    alone); ``cluster``: what the item belongs to (a document, a conversation, a query) when
    items are not independent; ``scale``: the scale when the file names it. ``where`` (not part
    of equality) says where it was read (``"labels.jsonl: line 4"``)."""

    sample_id: str
    annotator: str
    criterion: str
    value: float | int | None
    answer_hash: str | None = None
    cluster: str | None = None
    scale: str | None = None
    where: str | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The label as a JSON-ready dict (the unset optional fields left out)."""
        out: dict[str, Any] = {
            "sample_id": self.sample_id,
            "annotator": self.annotator,
            "criterion": self.criterion,
            "value": self.value,
        }
        for key in ("answer_hash", "cluster", "scale"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


class LabelSet(list):
    """A list of :class:`Label` plus ``errors``: the records that could not be read, each a
    :class:`~ragmeter.data.RecordError` naming the line and the field."""

    def __init__(self, labels: Iterable[Label] = (), errors: Iterable[RecordError] = ()):
        super().__init__(labels)
        self.errors: list[RecordError] = list(errors)


def _text(record: Mapping, location: str, *names: str, default: Any = None) -> str | None:
    """The first of the fields ``names`` that holds text (or ``default``), stripped; None when none does."""
    raw = next((record[n] for n in names if record.get(n) is not None and str(record[n]).strip()), default)
    if raw is None or not str(raw).strip():
        return None
    if isinstance(raw, (dict, list, bool)):
        raise RecordError(location, names[0], f"expected a string, got {type(raw).__name__}")
    return str(raw).strip()


def _required(record: Mapping, location: str, *names: str, default: Any = None) -> str:
    """:func:`_text`, or a :class:`RecordError` naming the first field when it is missing."""
    text = _text(record, location, *names, default=default)
    if text is None:
        raise RecordError(location, names[0], "missing")
    return text


def parse_label(record: Any, location: str, annotator: str | None = None) -> Label:
    """A :class:`Label` from a mapping: ``sample_id`` (or ``id``), ``annotator`` (or the file's
    default ``annotator``), ``criterion`` (or ``metric``), ``value``, and optionally
    ``answer_hash`` or ``answer`` (the answer's text, hashed; both given must agree),
    ``cluster`` and ``scale``. A value is checked against the record's ``scale``; without one, a
    criterion of the labeling page (``faithfulness``, ``overall``, ...) takes whole numbers 1-5
    and any other name (a metric's) 0 / 1, a whole number 1-5 or a number in [0, 1]. Raises :class:`RecordError` naming ``location`` and the field."""
    if not isinstance(record, Mapping):
        raise RecordError(location, None, f"expected an object, got {type(record).__name__}")
    sample_id = _required(record, location, "sample_id", "id")
    who = _required(record, location, "annotator", default=annotator)
    criterion = _required(record, location, "criterion", "metric")
    if len(criterion) > _MAX_NAME:
        raise RecordError(location, "criterion", f"longer than {_MAX_NAME} characters")
    scale = _text(record, location, "scale")
    if scale is not None and scale not in SCALES:
        raise RecordError(location, "scale", f"unknown scale {scale!r} (one of {', '.join(SCALES)})")
    page_scale = scale is None and criterion in criteria()
    try:
        value = check_value(record.get("value"), "1-5" if page_scale else scale)
    except ValueError as exc:
        hint = (
            (
                f" (the labeling page rates {criterion} 1-5; a label on another scale names it, e.g. "
                '"scale": "binary")'
            )
            if page_scale
            else ""
        )
        raise RecordError(location, "value", str(exc) + hint) from None
    given = _text(record, location, "answer_hash")
    answer = record.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise RecordError(location, "answer", f"expected the answer's text, got {type(answer).__name__}")
    hashed = answer_hash(answer) if isinstance(answer, str) else None
    if given is not None and hashed is not None and given != hashed:
        raise RecordError(location, "answer_hash", f"{given!r} is not the hash of the record's answer ({hashed!r})")
    cluster = _text(record, location, "cluster")
    return Label(sample_id, who, criterion, value, given or hashed, cluster, scale, where=location)


def _from_csv(text: str) -> Iterable[tuple[str, Mapping]]:
    """Long rows (sample_id, annotator, criterion, value) or the export's wide rows (one column per criterion)."""
    reader = csv.DictReader(io.StringIO(text))
    page = criteria()
    wide = "criterion" not in (reader.fieldnames or []) and any(c in page for c in reader.fieldnames or [])
    for n, row in enumerate(reader, start=2):
        if wide:
            for criterion in (c for c in reader.fieldnames or [] if c in page):
                yield f"line {n}", {**row, "criterion": criterion, "value": row.get(criterion)}
        else:
            yield f"line {n}", row


def import_labels(path: str | os.PathLike, *, on_error: str = "raise") -> LabelSet:
    """Read completed labels from ``path``.

    - ``.csv``: columns ``sample_id, annotator, criterion, value`` (and optionally
      ``answer_hash``, ``cluster``, ``scale``), or the task file written by
      :func:`ragmeter.labels.export_tasks` with its ``annotator`` and criterion columns filled in;
    - ``.jsonl``: one label object per line (see :func:`parse_label`);
    - ``.json``: a list of label objects, or ``{"annotator": ..., "labels": [...]}`` (what the
      HTML labeling page downloads; the top-level annotator is each label's default).

    Empty, null or NaN is a missing label (kept, value None). ``on_error="raise"`` (default)
    raises the first bad record as a :class:`ragmeter.data.RecordError` naming the line or item
    and the field; ``"collect"`` keeps going and returns the bad records on the result's
    ``errors`` (:class:`LabelSet`).
    """
    if on_error not in ("raise", "collect"):
        raise ValueError("on_error must be 'raise' or 'collect'")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".json"):
        raise ValueError(f"{path}: unknown labels file type {suffix or '(none)'!r} (use .json, .jsonl or .csv)")
    text = read_text(path)
    default: str | None = None
    out = LabelSet()
    records: list[tuple[str, Any]] = []
    if suffix == ".csv":
        records = list(_from_csv(text))
    elif suffix == ".jsonl":
        for n, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                try:
                    records.append((f"line {n}", parse_json(line)))
                except JSON_ERRORS as exc:
                    records.append((f"line {n}", RecordError(f"{path}: line {n}", None, json_problem(exc))))
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
    for location, record in records:
        try:
            if isinstance(record, RecordError):
                raise record
            out.append(parse_label(record, f"{path}: {location}", default))
        except RecordError as err:
            if on_error == "raise":
                raise
            out.errors.append(err)
    return out


def load_labels(labels: Any) -> tuple[list[Label], list[str]]:
    """``(labels, read errors)`` from a labels file (JSON, JSONL or CSV; bad records collected,
    each naming its line) or labels already read."""
    if isinstance(labels, (str, os.PathLike)):
        read = import_labels(labels, on_error="collect")
        return list(read), [str(e) for e in read.errors]
    return list(labels), [str(e) for e in getattr(labels, "errors", [])]
