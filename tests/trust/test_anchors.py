"""Anchor sets and judge drift (issue 34, item 4): a judge checked on a frozen labeled set, its
results stored per fingerprint; a new fingerprint shows its shift against the last one with an
interval (CLI and dashboard); compare attributes part of a change in means to the judge's shift
when both runs' judges were checked on the anchors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.servers import FakeLLMServer
from ragmeter.cli import main
from ragmeter.judges.offline import OfflineJudge
from ragmeter.judges.offline.settings import DEFAULT_SETTINGS
from ragmeter.labels import bootstrap_ci
from ragmeter.store import Store
from ragmeter.trust import check_anchors, judge_drift, load_anchors


def write_anchors(path: Path, n: int = 12) -> Path:
    """Anchors from the bundled samples: faithfulness labeled 1 for the first half, 0 after."""
    records = [json.loads(line) for line in (ROOT / "examples" / "rag_samples.jsonl").read_text().splitlines()][:n]
    for i, r in enumerate(records):
        r["labels"] = {"faithfulness": 1 if i < n // 2 else 0}
        r["scale"] = "binary"
        r["cluster"] = f"topic-{i % 4}"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def lexical(threshold: float | None = None) -> OfflineJudge:
    settings = DEFAULT_SETTINGS if threshold is None else replace(DEFAULT_SETTINGS, support_threshold=threshold)
    return OfflineJudge(embeddings=False, settings=settings)


def test_an_anchor_set_reads_its_labels_and_reports_what_it_leaves_out(tmp_path):
    path = write_anchors(tmp_path / "anchors.jsonl", 6)
    lines = path.read_text().splitlines()
    broken = json.loads(lines[0])
    del broken["labels"]
    broken["id"] = "no-labels"
    odd = json.loads(lines[1])
    odd.update(id="odd", labels={"faithfulness": 3})
    path.write_text("\n".join(lines + [json.dumps(broken), json.dumps(odd)]) + "\n")
    anchors = load_anchors(path)
    assert len(anchors.samples) == 6 and anchors.metrics == ["faithfulness"] and len(anchors.hash) == 16
    assert anchors.errors == [
        f"{path}: sample 'no-labels': field 'labels': an anchor needs labels: an object of metric -> human value",
        f"{path}: sample 'odd': field 'labels.faithfulness': expected 0 or 1 on the binary scale, got 3",
    ]
    assert {lb.cluster for lb in anchors.labels} == {"topic-0", "topic-1", "topic-2", "topic-3"}
    assert load_anchors(path).hash == anchors.hash  # the same content, the same set


def test_a_new_judge_shows_its_shift_on_the_anchors_with_an_interval(tmp_path):
    path = write_anchors(tmp_path / "anchors.jsonl")
    with Store(tmp_path / "h.db") as store:
        first = check_anchors(path, lexical(), store=store, n_boot=300)
        assert first.new and first.drift is None and "nothing to compare with" in first.to_text()
        again = check_anchors(path, lexical(), store=store, n_boot=300)
        assert not again.new and again.drift is None  # the same judge: no other one to compare with
        strict = lexical(0.99)
        second = check_anchors(path, strict, store=store, n_boot=300)
        assert second.new and second.drift is not None
        d = second.drift["metrics"]["faithfulness"]
        old, new = first.results["faithfulness"]["values"], second.results["faithfulness"]["values"]
        diffs = np.array([new[s] - old[s] for s in new])
        assert d["n"] == 12 and d["shift"] == pytest.approx(diffs.mean()) and d["shift"] < 0
        clusters = [f"topic-{i % 4}" for i in range(12)]
        assert d["ci"] == pytest.approx(
            list(bootstrap_ci(lambda idx: float(diffs[idx].mean()), 12, n_boot=300, clusters=clusters))
        )
        assert second.drift["changes"][0].startswith("rules: ")
        text = second.to_text()
        assert f"shift against {first.fingerprint}" in text and "faithfulness: mean " in text and "95% CI [" in text
        rows = store.anchor_results(second.anchors.hash)
        assert {r["fingerprint"] for r in rows} == {first.fingerprint, second.fingerprint} and len(rows) == 3
        assert judge_drift(store)["after"] == second.fingerprint


def test_a_judge_checked_in_another_process_is_named_field_by_field(tmp_path, monkeypatch):
    """Each ``ragmeter trust check`` is a process of its own: the store keeps the checked judge's
    fingerprint, so the next check names the fields that changed (it said "judge fields not
    recorded" when only a recorded run had stored the fingerprint)."""
    from ragmeter.judges import fingerprint

    path = write_anchors(tmp_path / "anchors.jsonl")
    with Store(tmp_path / "h.db") as store:
        first = check_anchors(path, lexical(), store=store, n_boot=100)
    monkeypatch.delitem(fingerprint._KNOWN, first.fingerprint)  # a new process knows only its own judge
    with Store(tmp_path / "h.db") as store:
        second = check_anchors(path, lexical(0.99), store=store, n_boot=100)
    assert second.drift["before"] == first.fingerprint
    assert len(second.drift["changes"]) == 1 and second.drift["changes"][0].startswith("rules: ")
    assert "judge fields not recorded" not in second.to_text()


def test_compare_attributes_a_change_in_means_to_the_judges_shift(tmp_path, capsys):
    path = write_anchors(tmp_path / "anchors.jsonl")
    db = str(tmp_path / "h.db")
    loose, strict = lexical(), lexical(0.99)
    with Store(db) as store:
        check_anchors(path, loose, store=store, n_boot=200)
        shift = check_anchors(path, strict, store=store, n_boot=200).drift["metrics"]["faithfulness"]["shift"]
    a = rm.evaluate("examples/rag_samples.jsonl", metrics=["faithfulness"], judge=loose, progress=False)
    b = rm.evaluate("examples/rag_samples.jsonl", metrics=["faithfulness"], judge=strict, progress=False)
    a.save(tmp_path / "a.jsonl")
    b.save(tmp_path / "b.jsonl")
    cmp = rm.compare(tmp_path / "a.jsonl", tmp_path / "b.jsonl", db=db, n_boot=200)
    change = cmp.metrics["faithfulness"].diff
    note = next(n for n in cmp.judge_notes if n.startswith("faithfulness: the mean changed by"))
    assert f"the judge's shift on the anchor set anchors is {shift:+.4f}" in note
    assert f"what the judge's shift does not account for: {change - shift:+.4f}" in note
    assert main(["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--db", db, "--n-boot", "200"]) == 1
    assert "note: faithfulness: the mean changed by" in capsys.readouterr().out
    # without anchor results for both judges: nothing is attributed
    assert not any("anchor" in n for n in rm.compare(a, b, n_boot=100).judge_notes)


def test_the_cli_checks_a_judge_and_evaluate_names_the_new_judges_shift(tmp_path, capsys, monkeypatch):
    path = write_anchors(tmp_path / "anchors.jsonl")
    db = str(tmp_path / "h.db")
    monkeypatch.setenv("RAGMETER_JUDGE", "offline")
    assert (
        main(
            [
                "trust",
                "check",
                "--anchors",
                str(path),
                "--judge",
                "offline",
                "--db",
                db,
                "--no-progress",
                "--bootstrap",
                "200",
                "--out",
                str(tmp_path / "check.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("anchor set anchors (") and "12 anchors, 12 labels; judge offline" in out
    assert "faithfulness: mean " in out and "nothing to compare with" in out
    assert json.loads((tmp_path / "check.json").read_text())["results"]["faithfulness"]["n"] == 12
    data = tmp_path / "data.jsonl"
    data.write_text((ROOT / "examples" / "rag_samples.jsonl").read_text())
    assert main(["evaluate", str(data), "-m", "faithfulness", "--db", db, "--no-progress"]) == 0
    capsys.readouterr()
    with FakeLLMServer() as server:  # another judge: an LLM behind an OpenAI-compatible server
        spec = f"openai:judge-model@{server.openai_url}"
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used-0000")
        assert (
            main(
                [
                    "trust",
                    "check",
                    "--anchors",
                    str(path),
                    "--judge",
                    spec,
                    "--db",
                    db,
                    "--no-progress",
                    "--bootstrap",
                    "200",
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert "shift against " in out and "backend: offline -> openai" in out and "model: none -> judge-model" in out
        assert main(["evaluate", str(data), "-m", "faithfulness", "--db", db, "--no-progress", "--judge", spec]) == 0
        out = capsys.readouterr().out
    assert "new judge for faithfulness since run 1 (backend: offline -> openai;" in out
    assert "its shift on the anchor set anchors is +" in out
    # the dashboard shows the drift of the newest run's judge
    assert main(["dashboard", "--db", db, "--out", str(tmp_path / "d.html")]) == 0
    page = (tmp_path / "d.html").read_text()
    assert '<div class="drift" data-anchor="anchors">' in page and "Judge drift on the anchor set" in page


def test_the_cli_refuses_an_incomplete_check(tmp_path, capsys):
    assert main(["trust", "check", "--judge", "offline"]) == 2
    assert "needs --anchors ANCHORS" in capsys.readouterr().err
    path = write_anchors(tmp_path / "anchors.jsonl", 4)
    assert main(["trust", "check", "--anchors", str(path)]) == 2
    assert "needs --judge SPEC" in capsys.readouterr().err
    assert main(["trust", "check", "--anchors", str(path), "--judge", "offline", "-m", "context_recall"]) == 2
    assert "the anchors have no labels for context_recall" in capsys.readouterr().err
