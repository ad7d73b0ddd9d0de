"""The data model: validation, field aliases, loading and saving, and error locations."""

import json
import math

import pytest

import ragmeter as rm
from ragmeter.data import Context, RecordError, Sample, Score, samples_from_records
from ragmeter.readers import load_samples, save_samples


def test_sample_coerces_contexts_and_ranks():
    s = Sample("q?", ["a", {"text": "b", "id": 7, "score": 0.5}, Context("c", id="x")], answer="A")
    assert [c.text for c in s.contexts] == ["a", "b", "c"]
    assert [c.rank for c in s.contexts] == [1, 2, 3]
    assert s.contexts[1].id == "7" and s.contexts[1].score == 0.5
    assert s.retrieved_ids == [None, "7", "x"]


def test_stable_default_id():
    a = Sample("q?", ["a"], answer="x")
    b = Sample("q?", ["a"], answer="x")
    c = Sample("q?", ["a"], answer="y")
    assert a.id == b.id != c.id


@pytest.mark.parametrize(
    "record, field",
    [
        ({"contexts": ["a"]}, "question"),
        ({"question": "", "contexts": []}, "question"),
        ({"question": 3, "contexts": []}, "question"),
        ({"question": "q", "contexts": "not a list"}, "contexts"),
        ({"question": "q", "contexts": [1]}, "contexts[0]"),
        ({"question": "q", "contexts": [{"id": "x"}]}, "contexts[0]"),
        ({"question": "q", "contexts": [], "answer": 5}, "answer"),
        ({"question": "q", "contexts": [], "relevant_ids": {"a": "high"}}, "relevant_ids"),
        ({"question": "q", "contexts": [], "relevant_ids": "abc"}, "relevant_ids"),
    ],
)
def test_record_errors_name_the_field(record, field):
    with pytest.raises(RecordError) as info:
        Sample.from_dict(record, "line 9")
    assert info.value.field == field
    assert info.value.location == "line 9"
    assert str(info.value).startswith(f"line 9: field '{field}'")


def test_ragas_and_deepeval_names():
    ragas = Sample.from_dict({"user_input": "q", "retrieved_contexts": ["c"], "response": "a", "reference": "r"})
    deepeval = Sample.from_dict(
        {"input": "q", "retrieval_context": ["c"], "actual_output": "a", "expected_output": "r"}
    )
    old_ragas = Sample.from_dict({"question": "q", "contexts": ["c"], "answer": "a", "ground_truth": "r"})
    for s in (ragas, deepeval, old_ragas):
        assert (s.question, s.context_texts, s.answer, s.reference) == ("q", ["c"], "a", "r")


def test_jsonl_bad_lines_are_reported_and_good_ones_kept(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"question": "q1", "contexts": ["a"]}),
                "{not json",
                json.dumps({"question": "q3", "contexts": "oops"}),
                "",
                json.dumps({"contexts": ["a"]}),
                json.dumps({"question": "q6", "contexts": ["b"], "answer": "x"}),
            ]
        )
    )
    ds = load_samples(path)
    assert [s.question for s in ds] == ["q1", "q6"]
    errors = {(e.location, e.field) for e in ds.errors}
    assert errors == {("line 2", None), ("line 3", "contexts"), ("line 5", "question")}
    assert "invalid JSON" in str(ds.errors[0])
    with pytest.raises(RecordError, match="line 2"):
        load_samples(path, on_error="raise")


def test_duplicate_ids_are_errors():
    ds = samples_from_records(
        [{"id": "a", "question": "q", "contexts": []}, {"id": "a", "question": "r", "contexts": []}]
    )
    assert len(ds) == 1 and ds.errors[0].field == "id" and ds.errors[0].location == "record 2"


def test_json_and_csv_round_trip(tmp_path):
    samples = [
        Sample("q1", [{"text": "a", "id": "d1"}, "b"], answer="x", reference="r", relevant_ids={"d1": 2}, id="s1"),
        Sample("q2, with comma", ["c"], id="s2", metadata={"k": 1}),
    ]
    for suffix in (".jsonl", ".csv"):
        path = save_samples(samples, tmp_path / f"out{suffix}")
        back = load_samples(path)
        assert not back.errors
        assert [s.to_dict() for s in back] == [s.to_dict() for s in samples]
    (tmp_path / "d.json").write_text(json.dumps({"samples": [s.to_dict() for s in samples]}))
    assert [s.id for s in load_samples(tmp_path / "d.json")] == ["s1", "s2"]


def test_csv_bad_cell_names_row_and_field(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text('question,contexts\nq1,"[""a""]"\nq2,not-json\n')
    ds = load_samples(path)
    assert len(ds) == 1
    assert (ds.errors[0].location, ds.errors[0].field) == ("row 3", "contexts")


@pytest.mark.slow  # importing pandas takes ~0.7 s
def test_pandas_round_trip():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(
        {"user_input": ["q1", "q2", None], "retrieved_contexts": [["a"], ["b"], ["c"]], "response": ["x", None, "z"]}
    )
    ds = load_samples(df)
    assert [s.question for s in ds] == ["q1", "q2"]
    assert ds[1].answer is None  # a missing cell is missing, not NaN
    assert ds.errors[0].location == "row 2" and ds.errors[0].field == "question"
    out = rm.data.samples_to_pandas(ds)
    assert list(out["question"]) == ["q1", "q2"]


def test_unsupported_file_type(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("hi")
    with pytest.raises(ValueError, match="unsupported file type"):
        load_samples(p)


def test_score_never_nan_and_needs_a_reason():
    with pytest.raises(ValueError):
        Score("m", math.nan)
    with pytest.raises(ValueError):
        Score("m", 1.5)
    with pytest.raises(ValueError, match="no reason"):
        Score("m", None)
    assert Score("m", None, error="judge failed").status == "error"
    assert Score("m", None, explanation="no claims").status == "n/a"
    s = Score("m", 0.5, label="warn")
    assert s.status == "ok" and s.passed is False
    assert Score.from_dict(s.to_dict()) == s
