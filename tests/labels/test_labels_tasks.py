"""ragmeter.labels tasks out and labels in: the review queue and its reasons, JSONL / CSV
exports (verdicts hidden unless asked), reading completed labels back, and the agreement report."""

from __future__ import annotations

import csv
import json

import pytest

from ragmeter.data import RecordError, Sample, Score
from ragmeter.labels import (
    CRITERIA,
    Label,
    agreement_report,
    answer_hash,
    cohen_kappa,
    export_tasks,
    import_labels,
    review_queue,
)
from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult


def _result() -> EvaluationResult:
    """Seven samples: an ensemble disagreement (spread 0.5, as EnsembleJudge records it), one of
    0.35, scores 0.83 and 0.88 near the 0.85 threshold, an error, and two ordinary ones."""

    def sample(n, **scores):
        return SampleResult(
            Sample(f"question {n}?", contexts=[f"chunk {n}a", f"chunk {n}b"], answer=f"answer {n}", id=f"s{n}"),
            {m: s for m, s in scores.items()},
        )

    f = "faithfulness"
    return EvaluationResult(
        [
            sample(1, faithfulness=Score(f, 0.95, label="pass")),
            sample(
                2,
                faithfulness=Score(
                    f, 0.7, label="warn", details={"members": [0.9, 0.7, 0.55], "spread": 0.35, "disagreement": True}
                ),
            ),
            sample(3, faithfulness=Score(f, 0.88, label="pass")),
            sample(4, faithfulness=Score(f, None, error="judge unreachable")),
            sample(
                5,
                faithfulness=Score(
                    f, 0.6, label="fail", details={"members": [0.9, 0.6, 0.4], "spread": 0.5, "disagreement": True}
                ),
            ),
            sample(6, faithfulness=Score(f, 0.83, label="warn")),
            sample(
                7,
                faithfulness=Score(
                    f, 0.2, label="fail", details={"members": [0.2, 0.2, 0.2], "spread": 0.0, "disagreement": False}
                ),
            ),
        ],
        ["faithfulness"],
        judge="ensemble",
        thresholds={"faithfulness": (0.85, 0.7)},
    )


def test_the_review_queue_puts_disagreement_then_borderline_then_errors_then_a_random_sample():
    queue = [(r.sample.id, why) for r, why in review_queue(_result(), seed=0)]
    assert queue[:5] == [
        ("s5", "ensemble disagreement: faithfulness spread 0.50 > 0.3"),
        ("s2", "ensemble disagreement: faithfulness spread 0.35 > 0.3"),
        ("s6", "near threshold: faithfulness 0.83 within 0.05 of 0.85"),
        ("s3", "near threshold: faithfulness 0.88 within 0.05 of 0.85"),
        ("s4", "error: faithfulness: judge unreachable"),
    ]
    assert sorted(queue[5:]) == [("s1", "random sample"), ("s7", "random sample")]
    orders = {tuple(r.sample.id for r, _ in review_queue(_result(), seed=s)[5:]) for s in range(10)}
    assert orders == {("s1", "s7"), ("s7", "s1")}  # the seed chooses the random order
    assert review_queue(_result(), seed=4) == review_queue(_result(), seed=4)


def test_jsonl_tasks_hide_the_judge_unless_asked(tmp_path):
    out = export_tasks(_result(), tmp_path / "tasks.jsonl", n=3)
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert [t["sample_id"] for t in tasks] == ["s5", "s2", "s6"] and [t["queue_rank"] for t in tasks] == [1, 2, 3]
    first = tasks[0]
    assert (
        first["question"] == "question 5?"
        and first["chunks"] == ["chunk 5a", "chunk 5b"]
        and first["answer"] == "answer 5"
    )
    assert list(first["criteria"]) == ["faithfulness", "relevance", "completeness", "citation_correctness", "overall"]
    assert set(first["criteria"]["faithfulness"]["anchors"]) == {"1", "3", "5"}
    assert "judge_verdicts" not in first and "0.6" not in out.read_text()
    shown = export_tasks(_result(), tmp_path / "shown.jsonl", criteria=["overall"], show_verdicts=True)
    task = json.loads(shown.read_text().splitlines()[0])
    assert task["judge_verdicts"] == {"faithfulness": {"value": 0.6, "label": "fail", "error": None}}
    assert list(task["criteria"]) == ["overall"]
    with pytest.raises(ValueError, match="unknown criteria"):
        export_tasks(_result(), tmp_path / "x.jsonl", criteria=["tone"])
    with pytest.raises(ValueError, match="unknown task file type"):
        export_tasks(_result(), tmp_path / "x.txt")


def test_a_filled_in_csv_task_file_reads_back_as_labels(tmp_path):
    path = export_tasks(_result(), tmp_path / "tasks.csv", criteria=["faithfulness", "overall"], n=2)
    rows = list(csv.DictReader(path.open(newline="")))
    assert [r["sample_id"] for r in rows] == ["s5", "s2"]
    assert rows[0]["chunks"] == "chunk 5a\n\nchunk 5b" and "faithfulness: Is every claim" in rows[0]["guide"]
    assert "judge_verdicts" not in rows[0] and rows[0]["faithfulness"] == "" and rows[0]["annotator"] == ""
    rows[0].update(annotator="ann", faithfulness="2", overall="3")
    rows[1].update(annotator="ann", faithfulness="4", overall="")  # overall left blank: a missing label
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    h5, h2 = answer_hash("answer 5"), answer_hash("answer 2")  # the labels name the answer they were given on
    assert rows[0]["answer_hash"] == h5
    assert import_labels(path) == [
        Label("s5", "ann", "faithfulness", 2, h5),
        Label("s5", "ann", "overall", 3, h5),
        Label("s2", "ann", "faithfulness", 4, h2),
        Label("s2", "ann", "overall", None, h2),
    ]


def test_labels_files_in_every_format_and_their_errors(tmp_path):
    (tmp_path / "l.jsonl").write_text(
        '{"sample_id": "s1", "annotator": "a", "criterion": "overall", "value": 5}\n\n'
        '{"sample_id": "s2", "annotator": "a", "criterion": "overall", "value": null}\n'
    )
    assert import_labels(tmp_path / "l.jsonl") == [Label("s1", "a", "overall", 5), Label("s2", "a", "overall", None)]
    (tmp_path / "page.json").write_text(
        json.dumps(
            {
                "ragmeter": "labels",
                "annotator": "b",
                "labels": [
                    {"sample_id": "s1", "criterion": "relevance", "value": 4.0},
                    {"sample_id": "s1", "annotator": "c", "criterion": "relevance", "value": 1},
                ],
            }
        )
    )
    assert import_labels(tmp_path / "page.json") == [Label("s1", "b", "relevance", 4), Label("s1", "c", "relevance", 1)]
    (tmp_path / "long.csv").write_text("sample_id,annotator,criterion,value\ns1,a,completeness,3\ns2,a,completeness,\n")
    assert import_labels(tmp_path / "long.csv") == [
        Label("s1", "a", "completeness", 3),
        Label("s2", "a", "completeness", None),
    ]
    bad = {
        "six.csv": (
            "sample_id,annotator,criterion,value\ns1,a,overall,6\n",
            r"line 2: field 'value': expected a whole number 1-5",
        ),
        "half.jsonl": (
            '{"sample_id": "s1", "annotator": "a", "criterion": "overall", "value": 2.5}\n',
            r"line 1: field 'value'",
        ),
        "who.json": (
            '[{"sample_id": "s1", "criterion": "overall", "value": 2}]',
            r"item 1: field 'annotator': missing",
        ),
        "seven.json": (
            '[{"sample_id": "s1", "annotator": "a", "criterion": "tone", "value": 7}]',
            r"field 'value': expected 0 or 1, a whole number 1-5 or a number in \[0, 1\]",
        ),
        "scale.json": (
            '[{"sample_id": "s1", "annotator": "a", "metric": "tone", "value": 1, "scale": "1-10"}]',
            r"item 1: field 'scale': unknown scale '1-10'",
        ),
        "binary.json": (
            '[{"sample_id": "s1", "annotator": "a", "metric": "tone", "value": 0.5, "scale": "binary"}]',
            r"item 1: field 'value': expected 0 or 1 on the binary scale",
        ),
        "hash.json": (
            '[{"sample_id": "s1", "annotator": "a", "metric": "tone", "value": 1, "answer": "x", '
            '"answer_hash": "abc"}]',
            r"field 'answer_hash': 'abc' is not the hash of the record's answer",
        ),
        "broken.jsonl": ('{"sample_id": \n', r"line 1: invalid JSON"),
    }
    for name, (text, message) in bad.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(RecordError, match=message):
            import_labels(tmp_path / name)
    with pytest.raises(ValueError, match="unknown labels file type"):
        import_labels(tmp_path / "tasks.txt")


def test_the_agreement_report_per_criterion_with_the_judge():
    result = _result()
    values = {"s1": (5, 5), "s2": (4, 3), "s3": (4, 5), "s5": (2, 2), "s6": (3, 2), "s7": (1, 1)}
    labels = [Label(s, who, "faithfulness", v[i]) for s, v in values.items() for i, who in enumerate(("ann", "bob"))]
    labels += [Label("s4", "ann", "faithfulness", None), Label("s4", "bob", "faithfulness", 2)]
    report = agreement_report(labels, result, n_boot=200)
    entry = report["faithfulness"]
    assert entry["annotators"] == ["ann", "bob"] and entry["items"] == 7
    assert entry["alpha"]["items"] == 6  # s4 has one label
    pair = entry["kappa"]["ann / bob"]
    assert pair["items"] == 6 and pair["kappa"] == pytest.approx(
        cohen_kappa([5, 4, 4, 2, 3, 1], [5, 3, 5, 2, 2, 1], "quadratic")
    )
    judge = entry["judge"]
    # judge values (s1..s7 without the error s4): 0.95 0.7 0.88 0.6 0.83 0.2; human means 5 3.5 4.5 2 2.5 1
    # judge passes (>= 0.85) s1, s3; humans pass (>= 4) s1, s3: a perfect table
    assert judge["metric"] == "faithfulness" and judge["items"] == 6
    assert judge["confusion"] == {"tp": 2, "fp": 0, "fn": 0, "tn": 4} and judge["balanced_accuracy"] == 1.0
    # ranks agree but for s2 / s6 (judge 0.7 < 0.83, humans 3.5 > 2.5): rho = 1 - 6 * 2 / (6 * 35), tau = (14 - 1) / 15
    assert judge["spearman"] == pytest.approx(1 - 12 / 210) and judge["kendall"] == pytest.approx(13 / 15)
    assert judge["suggested_threshold"] == 0.88  # of the perfect thresholds (0.88), the one nearest 0.85
    assert set(CRITERIA) >= set(report)
