"""Internal: Reading and writing files without losing them to one bad byte: decoding, tolerant JSON, strict
JSON output and atomic writes. Used by :mod:`ragmeter.data`, :mod:`ragmeter.result` and the OTLP
reader of :mod:`ragmeter.tracing`; nothing here knows about samples.

* :func:`decode_text`: UTF-8 with an optional byte-order mark (Excel's "CSV UTF-8"); a byte that
  is not UTF-8 is kept as a lone surrogate (``surrogateescape``), so the record holding it is
  rejected by its validation and the rest of the file is read.
* :func:`parse_json`: ``json.loads`` that reads an integer over Python's int <-> str digit limit
  as a :class:`LongInt` marker instead of failing the whole document.
* :func:`record_slices`: the items of a JSON document's record list, found by matching brackets
  when the document does not parse as a whole (an item nested too deeply or broken fails alone).
* :func:`python_literal`: a list or dict cell written in Python's repr (pandas' ``to_csv`` of list
  columns, e.g. RAGAS's ``EvaluationDataset.to_csv()``), read with ``ast.literal_eval`` (literals only).
* :func:`json_text`: strict JSON (``allow_nan=False``): NaN and infinities are written as null.
* :func:`write_text_atomic`: temporary file + rename: a failed write never leaves a truncated or
  empty file.
"""

from __future__ import annotations

import ast
import datetime
import itertools
import json
import math
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "finite_number",
    "JSON_ERRORS",
    "LongInt",
    "decode_text",
    "read_text",
    "text_problem",
    "parse_json",
    "json_problem",
    "python_literal",
    "record_slices",
    "json_text",
    "write_text_atomic",
]

#: What reading one JSON value can raise: syntax errors and nesting past the parser's recursion limit.
JSON_ERRORS = (ValueError, RecursionError)

_BOM = b"\xef\xbb\xbf"


def finite_number(value: Any, name: str) -> float:
    """``value`` as a float when it is a finite int or float (not a bool); else ValueError naming
    ``name``: ``"'duration_s' must be a finite number, got 'x'"``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"'{name}' must be a finite number, got {value!r:.40}")
    return float(value)


def decode_text(raw: bytes) -> str:
    """``raw`` as text: UTF-8, a leading byte-order mark dropped, bytes that are not UTF-8 kept as
    lone surrogates U+DC80..U+DCFF (found again by the callers' text checks)."""
    if raw.startswith(_BOM):
        raw = raw[len(_BOM) :]
    return raw.decode("utf-8", "surrogateescape")


def read_text(path: Any) -> str:
    """The text of the file at ``path`` (see :func:`decode_text`)."""
    return decode_text(Path(os.fspath(path)).read_bytes())


_SURROGATE = re.compile("[\ud800-\udfff]")


def text_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate, or a byte that is not UTF-8 kept as
    one by :func:`decode_text`), or None when it is."""
    m = None if text.isascii() else _SURROGATE.search(text)
    if m is None:
        return None
    cp = ord(m.group())
    what = (
        f"byte 0x{cp - 0xDC00:02X} that is not UTF-8 (or lone surrogate U+{cp:04X})"
        if cp >= 0xDC80
        else f"lone surrogate U+{cp:04X}"
    )
    return f"not valid text: {what} at character {m.start()}"


class LongInt:
    """An integer literal over Python's int <-> str digit limit, kept as its length so that the
    record holding it is rejected, not the file."""

    __slots__ = ("digits",)

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"<integer of {self.digits} digits>"


def _parse_int(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return LongInt(len(text.lstrip("-")))


def parse_json(text: str) -> Any:
    """``json.loads`` that reads an over-long integer as a :class:`LongInt`. Raises one of
    :data:`JSON_ERRORS`."""
    return json.loads(text, parse_int=_parse_int)


def json_problem(exc: BaseException) -> str:
    """A short description of why a JSON value could not be read."""
    if isinstance(exc, RecursionError):
        return "invalid JSON: nested too deeply to read"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc.msg} at column {exc.colno}"
    return f"invalid JSON: {exc}"


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]', re.S)


def record_slices(text: str, list_keys: tuple[str, ...] = ()) -> list[tuple[int, int]] | None:
    """``(start, end)`` of each item of a JSON document's record list: its top-level list, else
    the list under the first of ``list_keys`` in its top-level object. Brackets are matched
    without parsing the items, so an item nested too deeply or broken can be rejected alone; the
    items of a truncated list are still found. None when there is no such list."""
    stack: list[str] = []
    where: dict[str, list[int]] = {"[": [], "{": []}  # stack positions of each kind of opener
    lists: dict[str, list[tuple[int, int]]] = {}
    key = prev = None
    name, start, level = "", 0, -1  # the record list being split: its key, item start, depth
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok[0] == '"':
            prev = tok
            continue
        if tok == ":" and stack == ["{"] and prev:
            key = prev[1:-1]
        prev = None
        if tok in "[{":
            if level < 0 and tok == "[" and (not stack or (stack == ["{"] and key in list_keys)):
                name, start, level = (key or "") if stack else "", m.end(), len(stack) + 1
                lists[name] = []
            where[tok].append(len(stack))
            stack.append(tok)
        elif tok in "]}":
            opened = where["[" if tok == "]" else "{"]
            if not opened:
                continue
            at = opened[-1]  # below the top when the brackets do not match (a broken item)
            if level > 0 and at == level - 1 and len(stack) > level:
                continue  # would close the record list from inside an item: part of a broken item
            del stack[at:]
            for opened in where.values():
                while opened and opened[-1] >= at:
                    opened.pop()
            if level > 0 and len(stack) < level:
                if text[start : m.start()].strip():
                    lists[name].append((start, m.start()))
                level = -1
        elif tok == "," and level > 0 and len(stack) == level:
            lists[name].append((start, m.start()))
            start = m.end()
    if level > 0 and text[start:].strip():  # a truncated document: its last item is reported
        lists[name].append((start, len(text)))
    for k in ("",) + tuple(list_keys):
        if k in lists:
            return lists[k]
    return None


_MAX_DEPTH = 200
#: Longest text kept for an object JSON has no type for (its ``str``), so that a large object in
#: captured metadata cannot swell a record.
_MAX_OBJECT_TEXT = 1000


def json_safe(value: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of ``value``, the one conversion every writer and integration uses: NaN
    and infinities become None, mappings dicts with string keys, lists / tuples / sets lists,
    numpy values plain numbers, dates and datetimes ISO strings, anything else its ``str`` (at
    most 1,000 characters); what is nested deeper than 200 levels is replaced by a note saying so.

    >>> import datetime, math
    >>> json_safe({"a": (1, math.nan), 2: datetime.date(2024, 5, 1), "s": {3}})
    {'a': [1, None], '2': '2024-05-01', 's': [3]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if depth > _MAX_DEPTH:
        return "[nested deeper than 200 levels]"
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v, depth + 1) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        try:
            return json_safe(value.tolist(), depth + 1)
        except Exception:  # an object with a tolist that is not numpy's
            pass
    return str(value)[:_MAX_OBJECT_TEXT]


def python_literal(text: str) -> list | dict | None:
    """The list or dict that ``text`` writes in Python's repr (``"['a', 'b']"``), or None.

    Only a cell that starts with ``[`` / ``{`` and ends with ``]`` / ``}`` is tried, with
    ``ast.literal_eval`` (which evaluates literals only, never code); anything else, a value
    that is not a list or dict, or input too deep or too large to read gives None.

    >>> python_literal("['a', 'b']"), python_literal("{'x': 1}"), python_literal("os.system('x')")
    (['a', 'b'], {'x': 1}, None)
    """
    stripped = text.strip()
    if (stripped[:1], stripped[-1:]) not in (("[", "]"), ("{", "}")):
        return None
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (list, dict)) else None


def json_text(value: Any, indent: int | None = None) -> str:
    """Strict JSON for everything ragmeter writes: NaN and infinities become ``null`` (never a
    bare ``NaN``, which most JSON readers refuse), sets and tuples lists, numpy values plain
    numbers, anything else its ``str``; non-ASCII text is kept as it is."""
    return json.dumps(json_safe(value), ensure_ascii=False, allow_nan=False, indent=indent)


_TMP_IDS = itertools.count()


def write_text_atomic(path: Any, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8) through a temporary file in the same folder, renamed
    over it: a failed write (full disk, an error while writing) leaves the previous file, never a
    truncated or empty one; the file keeps its permissions. A character UTF-8 cannot encode (a
    lone surrogate) is written as a ``\\udXXX`` escape. Returns the path."""
    path = Path(os.fspath(path))
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{next(_TMP_IDS)}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", errors="backslashreplace", newline="") as fh:
            fh.write(text)
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # keep the replaced file's permissions
        except FileNotFoundError:
            pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
