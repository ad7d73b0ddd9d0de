"""Internal: Sample files: :func:`load_samples` reads ``.jsonl``, ``.json`` and ``.csv`` files (records, each
paired with its line / index / row number, or a :class:`~ragmeter.data.RecordError` in its place,
made samples by :func:`ragmeter.data.collect_samples`), :func:`save_samples` writes them.

The files of the tools users come from load as they are: RAGAS's ``EvaluationDataset.to_jsonl()``
and ``to_csv()`` (whose list cells pandas writes in Python's repr, ``"['a', 'b']"``, read here with
``ast.literal_eval``: literals only, never code), DeepEval's ``EvaluationDataset`` JSON (a list of
goldens or test cases, or an object holding one under ``goldens`` / ``test_cases``). Multi-turn
records (RAGAS ``MultiTurnSample``, DeepEval ``ConversationalTestCase``) are read whole here and
split into turns by :func:`ragmeter.data.turn_records`; in CSV files ``history`` holds a
JSON list of messages, ``turn`` an integer, and a ``user_input`` cell holding a list of message
objects (RAGAS's ``to_csv()`` of a ``MultiTurnSample``) is a conversation.

DeepEval's CSV (``EvaluationDataset.save_as(file_type="csv")``) is recognised by its ``input`` and
``actual_output`` columns: ``retrieval_context`` (the chunks) and ``context`` (the golden's ideal
context, kept in metadata) hold texts joined with ``|``, as DeepEval writes and reads them;
``tools_called``, ``expected_tools``, ``additional_metadata`` and ``custom_column_key_values``
hold JSON; ``name``, ``comments`` and ``source_file`` are kept in metadata.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragmeter.data import (
    CONTEXT_IDS,
    CONVERSATION_FIELDS,
    FIELD_ALIASES,
    Dataset,
    RecordError,
    Sample,
    collect_samples,
    samples_from_records,
)
from ragmeter.fileio import (
    JSON_ERRORS,
    json_problem,
    json_text,
    parse_json,
    python_literal,
    read_text,
    record_slices,
    write_text_atomic,
)

__all__ = [
    "load_samples",
    "save_samples",
    "as_dataset",
    "jsonl_records",
    "json_records",
    "csv_records",
    "RECORD_LISTS",
    "LIST_COLUMNS",
    "MAYBE_LIST_COLUMNS",
    "DEEPEVAL_SPLIT_COLUMNS",
    "DEEPEVAL_JSON_COLUMNS",
]

#: CSV columns that hold lists or objects (JSON, or Python's repr as RAGAS's ``to_csv()`` writes);
#: a cell that is neither is an error naming the row and the column.
LIST_COLUMNS = frozenset(
    FIELD_ALIASES["contexts"] + FIELD_ALIASES["relevant_ids"] + FIELD_ALIASES["history"] + ("metadata", CONTEXT_IDS)
)
#: RAGAS columns read as lists when they hold one, else kept as text.
MAYBE_LIST_COLUMNS = frozenset(("reference_contexts", "ground_truths", "multi_responses", "rubrics"))
#: DeepEval CSV columns holding texts joined with ``|`` (its ``save_as(file_type="csv")``).
DEEPEVAL_SPLIT_COLUMNS = frozenset(("retrieval_context", "context"))
#: DeepEval CSV columns holding JSON.
DEEPEVAL_JSON_COLUMNS = frozenset(("tools_called", "expected_tools", "additional_metadata", "custom_column_key_values"))


def jsonl_records(text: str) -> list[Any]:
    """(line number, record or RecordError) of each non-blank line of a JSON Lines text."""
    records: list[Any] = []
    for n, line in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028 is valid inside a string
        if not line.strip():
            continue
        try:
            records.append((n, parse_json(line)))
        except JSON_ERRORS as exc:
            records.append((n, RecordError(f"line {n}", None, json_problem(exc))))
    return records


RECORD_LISTS = ("samples", "test_cases", "goldens", "data")


def json_records(text: str, path: Path) -> list[Any]:
    """(index, record or RecordError) of a JSON document's record list (see :data:`RECORD_LISTS`)."""
    try:
        data = parse_json(text)
    except JSON_ERRORS as exc:
        slices = record_slices(text, RECORD_LISTS)
        if slices is None:
            where = f" at line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
            raise ValueError(
                f"{path}: invalid JSON{where}: {json_problem(exc).removeprefix('invalid JSON: ')}"
            ) from None
        records: list[Any] = []
        for i, (a, b) in enumerate(slices):
            try:
                records.append((i, parse_json(text[a:b])))
            except JSON_ERRORS as err:
                line = text.count("\n", 0, a) + 1
                records.append(
                    (i, RecordError(f"record {i}", None, f"{json_problem(err)} (item starting on line {line})"))
                )
        return records
    if isinstance(data, Mapping):
        data = next((data[k] for k in RECORD_LISTS if k in data), None)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of records (or an object with a 'samples' list)")
    return list(enumerate(data))


def csv_records(text: str) -> list[Any]:
    """(row number, record or RecordError) of each CSV row; list cells parsed (see :data:`LIST_COLUMNS`)."""
    reader = csv.DictReader(io.StringIO(text))
    deepeval = {"input", "actual_output"} <= set(reader.fieldnames or ())
    records: list[Any] = []
    n = 1  # row 1 is the header
    while True:
        n += 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a cell over the csv module's field size limit
            records.append((n, RecordError(f"row {n}", None, f"unreadable CSV row: {exc}")))
            continue
        record: dict[str, Any] = {}
        err = None
        for key, value in row.items():
            if key is None:
                err = RecordError(f"row {n}", None, "more cells than header columns")
                break
            if value is None or value == "":
                continue
            if deepeval and key in DEEPEVAL_SPLIT_COLUMNS:
                value = value.split("|")
            elif deepeval and key in DEEPEVAL_JSON_COLUMNS:
                try:
                    value = parse_json(value)
                except JSON_ERRORS:
                    err = RecordError(f"row {n}", key, "expected JSON in this DeepEval CSV cell")
                    break
            elif key == "turn" and value.strip().isdigit():
                value = int(value)
            elif key == "user_input" and value.startswith("[{"):  # RAGAS MultiTurnSample messages
                value = _messages_cell(value)
            elif key in LIST_COLUMNS or key in MAYBE_LIST_COLUMNS:
                try:
                    parsed = parse_json(value)
                except JSON_ERRORS as exc:
                    parsed = python_literal(value)  # RAGAS's to_csv() writes lists in Python's repr
                    if parsed is None and key in LIST_COLUMNS:
                        err = RecordError(
                            f"row {n}",
                            key,
                            "nested too deeply to read"
                            if isinstance(exc, RecursionError)
                            else "expected a JSON list/object (or a Python list) in this CSV cell",
                        )
                        break
                if key in LIST_COLUMNS or isinstance(parsed, (list, dict)):
                    value = parsed
            record[key] = value
        records.append((n, err if err else record))
    return records


def _messages_cell(value: str) -> Any:
    """A CSV ``user_input`` cell holding a list of message objects (JSON or Python's repr, as
    RAGAS's ``to_csv()`` writes a ``MultiTurnSample``) as that list; any other text unchanged."""
    try:
        parsed = parse_json(value)
    except JSON_ERRORS:
        parsed = python_literal(value)
    return parsed if isinstance(parsed, list) and parsed and all(isinstance(m, Mapping) for m in parsed) else value


def load_samples(source: Any, *, on_error: str = "collect") -> Dataset:
    """Load samples from a ``.jsonl`` / ``.json`` / ``.csv`` file or a pandas DataFrame.

    Field names of RAGAS and DeepEval are accepted (see :data:`FIELD_ALIASES`); RAGAS's
    ``retrieved_context_ids`` become the contexts' ids, ``reference_context_ids`` the relevant ids;
    a JSON object may hold its records under ``samples``, ``test_cases``, ``goldens`` or ``data``
    (DeepEval's ``EvaluationDataset`` files are a list of goldens or test cases). A conversation
    (RAGAS ``MultiTurnSample``, DeepEval ``ConversationalTestCase``) gives one sample per retrieval
    turn (see :func:`ragmeter.data.turn_records`). In CSV files the
    list cells (``contexts``, ``relevant_ids``, their aliases, ``metadata``) hold JSON, or Python's
    repr as RAGAS's ``EvaluationDataset.to_csv()`` writes them (read with ``ast.literal_eval``). Malformed records are collected in
    ``Dataset.errors`` (each naming the line / row and the field) and the rest are returned;
    ``on_error="raise"`` raises instead. A record that cannot be read (bytes that are not UTF-8,
    invalid JSON, nesting too deep, an integer over Python's digit limit) is one such error; a
    JSON document that does not parse as a whole is split into its records. An unreadable file
    raises ``OSError`` / ``ValueError``.
    """
    if hasattr(source, "to_dict") and hasattr(source, "columns"):  # pandas DataFrame
        rows = source.to_dict(orient="records")
        return collect_samples([(i, r) for i, r in zip(source.index, rows)], "row", on_error, None)
    path = Path(os.fspath(source))
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".ndjson", ".json", ".csv"):
        raise ValueError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json or .csv)")
    text = read_text(path)
    if suffix in (".jsonl", ".ndjson"):
        return collect_samples(jsonl_records(text), "line", on_error, str(path))
    if suffix == ".json":
        return collect_samples(json_records(text, path), "record", on_error, str(path))
    return collect_samples(csv_records(text), "row", on_error, str(path))


def save_samples(samples: Iterable[Sample], path: Any) -> Path:
    """Write samples to ``.jsonl`` or ``.csv`` (contexts as a JSON list cell); returns the path.
    The file is replaced atomically (see :func:`write_text_atomic`)."""
    path = Path(os.fspath(path))
    rows = [s.to_dict() for s in samples]
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        text = "".join(json_text(row) + "\n" for row in rows)
    elif suffix == ".csv":
        fields = ["id", "question", "contexts", "answer", "reference", "relevant_ids", "metadata"]
        fields += [f for f in CONVERSATION_FIELDS if any(f in row for row in rows)]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {
                    k: (
                        json_text(row[k])
                        if k in ("contexts", "relevant_ids", "metadata", "history") and k in row
                        else row.get(k, "")
                    )
                    for k in fields
                }
            )
        text = buf.getvalue()
    else:
        raise ValueError(f"unsupported output type {suffix!r} (use .jsonl or .csv)")
    return write_text_atomic(path, text)


def as_dataset(samples: Any) -> Dataset:
    """``samples`` as a :class:`~ragmeter.data.Dataset`: a Dataset as it is, a file path or a
    pandas DataFrame loaded (:func:`load_samples`), a Sample, a dict or a list of them validated
    (:func:`~ragmeter.data.samples_from_records`)."""
    if isinstance(samples, Dataset):
        return samples
    if isinstance(samples, (str, bytes)) or hasattr(samples, "__fspath__"):
        return load_samples(samples)
    if hasattr(samples, "to_dict") and hasattr(samples, "columns"):
        return load_samples(samples)
    if isinstance(samples, (Sample, dict)):
        samples = [samples]
    return samples_from_records(samples)
