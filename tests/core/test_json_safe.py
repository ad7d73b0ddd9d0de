"""One JSON-safe conversion (``ragmeter.fileio.json_safe``) for every writer and both integrations:
results files, LangChain run metadata and LlamaIndex node metadata convert the same values the
same way."""

from __future__ import annotations

import datetime
import json
import math
import uuid

import numpy as np

from ragmeter.fileio import json_safe, json_text


class Opaque:
    def __str__(self) -> str:
        return "x" * 5000


def test_each_kind_of_value_converts_as_documented():
    when = datetime.datetime(2024, 5, 1, 12, 30)
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    value = {
        "nan": math.nan,
        "inf": -math.inf,
        "ok": 0.25,
        "tuple": (1, "a"),
        "set": {7},
        "np": [np.int64(3), np.float32(0.5), np.array([[1, 2]])],
        "when": when,
        "day": when.date(),
        "id": ident,
        3: True,
        "opaque": Opaque(),
    }
    out = json_safe(value)
    assert out == {
        "nan": None,
        "inf": None,
        "ok": 0.25,
        "tuple": [1, "a"],
        "set": [7],
        "np": [3, 0.5, [[1, 2]]],
        "when": "2024-05-01T12:30:00",
        "day": "2024-05-01",
        "id": "12345678-1234-5678-1234-567812345678",
        "3": True,
        "opaque": "x" * 1000,
    }
    assert json.loads(json.dumps(out, allow_nan=False)) == out  # strict JSON, nothing left to convert


def test_deep_nesting_is_cut_not_a_recursion_error():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    text = json_text(deep)
    assert text == "[" * 201 + '"[nested deeper than 200 levels]"' + "]" * 201


def test_integrations_use_the_same_conversion():
    from ragmeter.integrations.langchain import runs
    from ragmeter.integrations.llamaindex import nodes

    assert runs.json_safe is json_safe and nodes.json_safe is json_safe
