"""``ragmeter labels`` (export, import, agreement) and the store's labels, on SQLite and PostgreSQL.

The command is registered through the ``ragmeter.cli`` entry point; here its ``register`` is
called on a parser of its own, as :func:`ragmeter.cli.build_parser` does for each plugin."""

from __future__ import annotations

import argparse
import csv
import json

import pytest
from test_labels_tasks import _result

from ragmeter.data import Score
from ragmeter.labels import Label
from ragmeter.labels.cli import register
from ragmeter.store import Store


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="ragmeter")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    return args.func(args)


def _fill(path, values: dict[str, dict[str, str]], annotator: str, out) -> None:
    rows = list(csv.DictReader(path.open(newline="")))
    for row in rows:
        row.update(annotator=annotator, **values.get(row["sample_id"], {}))
    with out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_labels_in_the_store_replace_per_sample_annotator_and_criterion(db_url):
    with Store(db_url) as store:
        assert (
            store.record_labels(
                [
                    Label("s1", "ann", "overall", 2),
                    Label("s1", "bob", "overall", 5),
                    Label("s2", "ann", "overall", None),
                ],
                source="a.csv",
            )
            == 3
        )
        assert store.record_labels([Label("s1", "ann", "overall", 4), Label("s1", "ann", "relevance", 3)]) == 2
        assert sorted(store.labels(), key=lambda lb: (lb.sample_id, lb.annotator, lb.criterion)) == [
            Label("s1", "ann", "overall", 4),
            Label("s1", "ann", "relevance", 3),
            Label("s1", "bob", "overall", 5),
            Label("s2", "ann", "overall", None),
        ]
        assert store.labels(sample_id="s1", criterion="overall") == [
            Label("s1", "bob", "overall", 5),
            Label("s1", "ann", "overall", 4),
        ]


def test_export_label_import_and_agreement(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    _result().to_jsonl(results)
    assert (
        run("labels", "export", str(results), "--out", str(tmp_path / "tasks.csv"), "--criteria", "faithfulness") == 0
    )
    assert "wrote 7 labeling tasks" in capsys.readouterr().out
    ann = {"s1": "5", "s2": "4", "s3": "4", "s4": "", "s5": "2", "s6": "3", "s7": "1"}
    bob = {"s1": "5", "s2": "3", "s3": "5", "s4": "2", "s5": "2", "s6": "2", "s7": "1"}
    _fill(tmp_path / "tasks.csv", {k: {"faithfulness": v} for k, v in ann.items()}, "ann", tmp_path / "ann.csv")
    _fill(tmp_path / "tasks.csv", {k: {"faithfulness": v} for k, v in bob.items()}, "bob", tmp_path / "bob.csv")
    db = str(tmp_path / "history.db")
    assert run("labels", "import", str(tmp_path / "ann.csv"), "--db", db) == 0
    assert "stored 7 labels" in (out := capsys.readouterr().out) and "(1 left blank)" in out
    assert run("labels", "import", str(tmp_path / "bob.csv"), "--db", db) == 0
    capsys.readouterr()
    # two judge versions scored the same samples; the second gives every value 0.1 more
    lenient = _result()
    lenient.judge = "ensemble-v2"
    for r in lenient:
        s = r["faithfulness"]
        r.scores["faithfulness"] = Score(
            "faithfulness", None if s.value is None else min(1.0, s.value + 0.1), error=s.error
        )
    with Store(db) as store:
        store.record_run(_result())
        store.record_run(lenient)
    assert run("labels", "agreement", db, "--results", str(results), "--bootstrap", "200") == 0
    text = capsys.readouterr().out
    assert text.startswith("faithfulness: 7 items, 2 annotators (ann, bob)")
    assert "Krippendorff alpha (ordinal)" in text and "Cohen kappa (quadratic) ann / bob" in text
    # the same numbers test_the_agreement_report_per_criterion_with_the_judge works out by hand
    assert "Spearman 0.943, Kendall 0.867, balanced accuracy 1.000 at threshold 0.85 (tp 2 fp 0 fn 0 tn 4)" in text
    assert "suggested threshold 0.880" in text
    # human means s1 5, s2 3.5, s3 4.5, s4 2, s5 2, s6 2.5, s7 1 (s4 has no judge value): humans pass 2 of 6;
    # v1 passes (>= 0.85) s1, s3: 2 of 6; v2 also s6 (0.93): 3 of 6, leniency +1/6
    assert "run 1 " in text and "judge ensemble: 6 items, judge passes 33%, humans 33%, leniency +0.00" in text
    assert "judge ensemble-v2: 6 items, judge passes 50%, humans 33%, leniency +0.17" in text
    # the dashboard shows the same: agreement against the newest run, and the leniency run by run
    from ragmeter.cli import main

    assert main(["dashboard", "--db", db, "--out", str(tmp_path / "dash.html")]) == 0
    capsys.readouterr()
    page = (tmp_path / "dash.html").read_text(encoding="utf-8")
    section = page.split('<section id="labels">', 1)[1].split("</section>", 1)[0]
    assert '<tr data-criterion="faithfulness"><td>faithfulness</td><td>7</td><td>2</td>' in section
    assert "ann / bob" in section and "faithfulness: Spearman" in section
    assert "<td>33%</td><td>33%</td><td>+0.00</td>" in section and "<td>50%</td><td>33%</td><td>+0.17</td>" in section
    assert run("labels", "agreement", db, "--json", "--bootstrap", "50") == 0
    report = json.loads(capsys.readouterr().out)["agreement"]
    assert report["faithfulness"]["alpha"]["items"] == 6 and "judge" not in report["faithfulness"]
    with pytest.raises(ValueError, match="no labels"):
        run("labels", "agreement", str(tmp_path / "empty.db"))


@pytest.mark.slow
def test_the_offline_judge_against_labels(tmp_path, capsys):
    """Any judge works, the offline one included: evaluate offline, export in queue order, label,
    compare."""
    import ragmeter as rm

    result = rm.evaluate("examples/rag_samples.jsonl", judge="offline", progress=False)
    results = tmp_path / "offline.jsonl"
    result.to_jsonl(results)
    assert run("labels", "export", str(results), "--out", str(tmp_path / "tasks.jsonl"), "-n", "8") == 0
    tasks = [json.loads(line) for line in (tmp_path / "tasks.jsonl").read_text().splitlines()]
    assert len(tasks) == 8 and all(t["reason"] for t in tasks) and "judge_verdicts" not in tasks[0]
    faith = {r.sample.id: r["faithfulness"].value for r in result}
    labels = [
        {
            "sample_id": t["sample_id"],
            "annotator": who,
            "criterion": "faithfulness",
            "value": max(1, min(5, round(1 + 4 * faith[t["sample_id"]]) + shift)),
        }
        for t in tasks
        for who, shift in (("a", 0), ("b", -1 if t["queue_rank"] % 3 == 0 else 0))
    ]
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    assert (
        run("labels", "agreement", str(tmp_path / "labels.json"), "--results", str(results), "--bootstrap", "100") == 0
    )
    text = capsys.readouterr().out
    assert "faithfulness: 8 items, 2 annotators (a, b)" in text and "judge faithfulness vs humans (8 items)" in text
