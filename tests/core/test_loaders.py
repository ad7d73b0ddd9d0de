"""Data from the tools users come from: RAGAS datasets (JSONL and its ``to_csv()`` export, with
context ids) and DeepEval ``EvaluationDataset`` JSON (goldens and test cases) load whole, score
with the ID-based metrics, and round-trip through ragmeter's own files.

Neither ragas nor deepeval is installed here, so the files are written by hand in the shapes
their code writes: RAGAS ``SingleTurnSample`` fields (``EvaluationDataset.to_jsonl()`` one object
per line; ``to_csv()`` is pandas' ``to_csv`` of ``to_pandas()``, which writes list cells with
``str(list)``, Python's repr), DeepEval ``EvaluationDataset.save_as("json")`` (a list of goldens:
input, actual_output, expected_output, context, source_file) and the test-case JSON that
``add_test_cases_from_json_file`` reads (input, actual_output, expected_output, context,
retrieval_context), and DeepEval's ``save_as(file_type="csv")`` (the same fields, list cells
joined with ``|``, tools and metadata as JSON).
"""

from __future__ import annotations

import csv
import doctest
import json

import pytest

import ragmeter as rm
from ragmeter import fileio
from ragmeter.readers import load_samples, save_samples

RAGAS = [
    {
        "user_input": "When was the Eiffel Tower built?",
        "retrieved_contexts": ["Paris is in France.", "The tower was built from 1887 to 1889."],
        "retrieved_context_ids": ["c2", "c1"],
        "reference_contexts": ["The tower was built from 1887 to 1889."],
        "reference_context_ids": ["c1"],
        "response": "From 1887 to 1889.",
        "reference": "It was built between 1887 and 1889.",
        "multi_responses": None,
        "rubrics": None,
    },
    {
        "user_input": "Where is it?",
        "retrieved_contexts": ["It's in Paris, \"the capital\".", "Lyon is a city.", "Paris is in France."],
        "retrieved_context_ids": [7, 8, 9],
        "reference_contexts": ["It's in Paris."],
        "reference_context_ids": [7, 9],
        "response": "In Paris.",
        "reference": "Paris.",
    },
]
# precision@2 and mrr by hand: sample 1 has its relevant chunk at rank 2 of 2 -> 1/2 and 1/2;
# sample 2 at ranks 1 and 3 -> precision@2 = 1/2, mrr = 1
EXPECTED = {"precision@2": [0.5, 0.5], "mrr": [0.5, 1.0]}


def _scores(dataset) -> dict:
    result = rm.evaluate(dataset, metrics=list(EXPECTED), progress=False)
    return {m: [r.scores[m].value for r in result] for m in EXPECTED}


def _same_samples(a, b) -> None:
    assert [s.to_dict() for s in a] == [s.to_dict() for s in b]


def _check_ragas(ds) -> None:
    assert not ds.errors and len(ds) == 2
    first, second = ds
    assert first.retrieved_ids == ["c2", "c1"] and first.relevant_ids == ["c1"]
    assert first.context_texts == RAGAS[0]["retrieved_contexts"]
    assert second.retrieved_ids == ["7", "8", "9"] and second.relevant_ids == ["7", "9"]
    assert second.context_texts[0] == "It's in Paris, \"the capital\"."
    assert (first.answer, first.reference) == ("From 1887 to 1889.", "It was built between 1887 and 1889.")
    assert first.metadata["reference_contexts"] == RAGAS[0]["reference_contexts"]
    assert "retrieved_context_ids" not in first.metadata
    assert _scores(ds) == EXPECTED


def test_ragas_jsonl_loads_whole_and_round_trips(tmp_path):
    path = tmp_path / "ragas.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RAGAS))
    ds = load_samples(path)
    _check_ragas(ds)
    for suffix in (".jsonl", ".csv"):
        again = load_samples(save_samples(ds, tmp_path / f"ours{suffix}"))
        _same_samples(again, ds)
        assert _scores(again) == EXPECTED


def _ragas_to_csv(records: list, path) -> None:
    """What pandas' DataFrame.to_csv(index=False) writes for RAGAS's to_pandas(): str() of each cell,
    lists in Python's repr, None as an empty cell."""
    columns = list(dict.fromkeys(k for r in records for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for r in records:
            writer.writerow(["" if r.get(c) is None else str(r[c]) for c in columns])


def test_ragas_to_csv_export_loads_whole_and_round_trips(tmp_path):
    path = tmp_path / "ragas.csv"
    _ragas_to_csv(RAGAS, path)
    assert "['c2', 'c1']" in path.read_text()  # Python's repr, not JSON
    ds = load_samples(path)
    _check_ragas(ds)
    again = load_samples(save_samples(ds, tmp_path / "ours.csv"))
    _same_samples(again, ds)


def test_python_repr_cells_are_read_as_literals_only(tmp_path):
    path = tmp_path / "d.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["user_input", "retrieved_contexts"])
        writer.writerow(["q1", "['a', 'b']"])
        writer.writerow(["q2", "[__import__('os').system('touch pwned')]"])
        writer.writerow(["q3", "not a list"])
        writer.writerow(["q4", "'just a string'"])
    ds = load_samples(path)
    assert [s.context_texts for s in ds] == [["a", "b"]]
    assert [(e.location, e.field) for e in ds.errors] == [
        ("row 3", "retrieved_contexts"),
        ("row 4", "retrieved_contexts"),
        ("row 5", "retrieved_contexts"),
    ]
    assert not (tmp_path / "pwned").exists()
    assert fileio.python_literal("[" * 100_000) is None  # too deep: no crash
    assert doctest.testmod(fileio).failed == 0


def test_ragas_context_ids_errors_name_the_record_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    rows = [dict(RAGAS[0], retrieved_context_ids=["only-one"]), dict(RAGAS[0], retrieved_context_ids="c1"), RAGAS[1]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = load_samples(path)
    assert len(ds) == 1
    assert [(e.location, e.field) for e in ds.errors] == [
        ("line 1", "retrieved_context_ids"),
        ("line 2", "retrieved_context_ids"),
    ]
    assert "1 ids for 2 retrieved contexts" in str(ds.errors[0])


def test_ragas_ids_without_texts_still_score_the_ids():
    s = rm.Sample.from_dict({"user_input": "q", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]})
    assert s.retrieved_ids == ["a", "b"] and s.context_texts == ["", ""]
    assert rm.metrics.get_metric("mrr").score(s).value == 0.5


GOLDENS = [  # EvaluationDataset.save_as("json", ...)
    {
        "input": "When was the Eiffel Tower built?",
        "actual_output": None,
        "expected_output": "Between 1887 and 1889.",
        "context": ["The tower was built from 1887 to 1889."],
        "source_file": "eiffel.txt",
    },
    {"input": "Where is it?", "actual_output": None, "expected_output": "Paris.", "context": None, "source_file": None},
]
TEST_CASES = [  # the JSON add_test_cases_from_json_file reads
    {
        "input": "When was the Eiffel Tower built?",
        "actual_output": "From 1887 to 1889.",
        "expected_output": "Between 1887 and 1889.",
        "context": ["The tower was built from 1887 to 1889."],
        "retrieval_context": ["Paris is in France.", "The tower was built from 1887 to 1889."],
    },
]


@pytest.mark.parametrize("wrap", [False, True], ids=["list", "object"])
def test_deepeval_goldens_load_and_round_trip(tmp_path, wrap):
    path = tmp_path / "goldens.json"
    path.write_text(json.dumps({"goldens": GOLDENS} if wrap else GOLDENS, indent=4))
    ds = load_samples(path)
    assert not ds.errors and len(ds) == 2
    assert [s.question for s in ds] == [g["input"] for g in GOLDENS]
    assert [s.reference for s in ds] == ["Between 1887 and 1889.", "Paris."]
    assert ds[0].answer is None and ds[0].contexts == []
    assert ds[0].metadata == {"context": GOLDENS[0]["context"], "source_file": "eiffel.txt"}
    _same_samples(load_samples(save_samples(ds, tmp_path / "ours.jsonl")), ds)


@pytest.mark.parametrize("wrap", [False, True], ids=["list", "object"])
def test_deepeval_test_cases_load_score_and_round_trip(tmp_path, wrap):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"test_cases": TEST_CASES} if wrap else TEST_CASES))
    ds = load_samples(path)
    assert not ds.errors and len(ds) == 1
    case = ds[0]
    assert case.context_texts == TEST_CASES[0]["retrieval_context"]
    assert (case.answer, case.reference) == ("From 1887 to 1889.", "Between 1887 and 1889.")
    assert case.metadata == {"context": TEST_CASES[0]["context"]}
    token_f1 = rm.evaluate(ds, metrics=["token_f1"], progress=False)[0].scores["token_f1"].value
    assert token_f1 == pytest.approx(2 * (2 / 4) * (2 / 4) / (2 / 4 + 2 / 4))  # "1887", "1889" of 4 tokens each
    for suffix in (".jsonl", ".csv"):
        _same_samples(load_samples(save_samples(ds, tmp_path / f"ours{suffix}")), ds)


# DeepEval's EvaluationDataset.save_as(file_type="csv") header (single-turn goldens): list cells
# joined with "|", tools and metadata as JSON, empty cells for None
DEEPEVAL_CSV_HEADER = [
    "input",
    "actual_output",
    "expected_output",
    "retrieval_context",
    "context",
    "name",
    "comments",
    "source_file",
    "tools_called",
    "expected_tools",
    "additional_metadata",
    "custom_column_key_values",
]


def test_deepeval_csv_loads_scores_and_round_trips(tmp_path):
    path = tmp_path / "20250101_120000.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(DEEPEVAL_CSV_HEADER)
        writer.writerow(
            [
                "When was the Eiffel Tower built?",
                "From 1887 to 1889.",
                "Between 1887 and 1889.",
                "Paris is in France.|The tower was built from 1887 to 1889.",
                "The tower was built from 1887 to 1889.",
                "eiffel",
                "",
                "eiffel.txt",
                '[{"name": "search", "input_parameters": {"q": "eiffel"}}]',
                "",
                '{"topic": "landmarks", "difficulty": 2}',
                "",
            ]
        )
        writer.writerow(["Where is it?", "", "Paris.", "", "", "", "", "", "", "", "", ""])  # a golden: no output yet
    ds = load_samples(path)
    assert not ds.errors and len(ds) == 2
    case, golden = ds
    assert case.context_texts == ["Paris is in France.", "The tower was built from 1887 to 1889."]
    assert (case.answer, case.reference) == ("From 1887 to 1889.", "Between 1887 and 1889.")
    assert case.metadata == {
        "context": ["The tower was built from 1887 to 1889."],
        "name": "eiffel",
        "source_file": "eiffel.txt",
        "tools_called": [{"name": "search", "input_parameters": {"q": "eiffel"}}],
        "additional_metadata": {"topic": "landmarks", "difficulty": 2},
    }
    assert (golden.question, golden.answer, golden.contexts, golden.reference, golden.metadata) == (
        "Where is it?",
        None,
        [],
        "Paris.",
        {},
    )
    token_f1 = rm.evaluate([case], metrics=["token_f1"], progress=False)[0].scores["token_f1"].value
    assert token_f1 == pytest.approx(0.5)  # "1887", "1889" of 4 tokens each: P = R = 2 / 4
    for suffix in (".jsonl", ".csv"):
        _same_samples(load_samples(save_samples(ds, tmp_path / f"ours{suffix}")), ds)


def test_deepeval_csv_older_layout_and_bad_json_cell(tmp_path):
    path = tmp_path / "old.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["input", "actual_output", "expected_output", "context", "source_file"])  # deepeval < 3
        writer.writerow(["Where is it?", "", "Paris.", "Paris is a city.|It is in France.", "paris.txt"])
    (golden,) = load_samples(path)
    assert golden.metadata == {"context": ["Paris is a city.", "It is in France."], "source_file": "paris.txt"}
    bad = tmp_path / "bad.csv"
    with open(bad, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["input", "actual_output", "additional_metadata"])
        writer.writerow(["q1", "a1", "{not json"])
        writer.writerow(["q2", "a2", ""])
    ds = load_samples(bad)
    assert [s.question for s in ds] == ["q2"]
    assert [(e.location, e.field) for e in ds.errors] == [("row 2", "additional_metadata")]


def test_other_ragas_columns_are_lists_only_when_they_hold_one(tmp_path):
    path = tmp_path / "d.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["user_input", "reference_contexts", "ground_truths"])
        writer.writerow(["q1", "['a', 'b']", "['It is', 'Paris.']"])
        writer.writerow(["q2", "plain text, kept", "3"])
    first, second = load_samples(path)
    assert first.metadata["reference_contexts"] == ["a", "b"] and first.reference == "It is Paris."
    assert second.metadata["reference_contexts"] == "plain text, kept" and second.reference == "3"
