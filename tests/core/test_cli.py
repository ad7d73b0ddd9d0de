"""The ragmeter command: exit codes, summary table, reports, report and compare verbs."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from ragmeter.cli import main

EXAMPLE = ROOT / "examples" / "rag_samples.jsonl"
RETRIEVAL = ["-m", "precision@5,recall@5,mrr,ndcg@10"]


def run(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_evaluate_prints_summary_and_writes_every_report_type(tmp_path, capsys):
    outs = [tmp_path / f"report.{ext}" for ext in ("md", "html", "json", "jsonl", "csv")]
    args = ["evaluate", EXAMPLE, *RETRIEVAL, "--no-progress"]
    for o in outs:
        args += ["--out", o]
    code, out, err = run(args, capsys)
    assert code == 0, err
    assert "20 samples scored, 0 invalid" in out
    assert "recall@5" in out and "ndcg@10" in out
    assert "judge calls: 0" in out and "cost: $0 (no paid calls)" in out
    for o in outs:
        assert o.exists() and o.stat().st_size > 0
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["summary"]["mrr"]["count"] == 20


def test_fail_under_exit_codes(tmp_path, capsys):
    # recall@5 is below 1 on the example (some relevant chunks were not retrieved)
    code, _, err = run(["evaluate", EXAMPLE, *RETRIEVAL, "--no-progress", "--fail-under", "recall@5=0.99"], capsys)
    assert code == 1 and "FAIL recall@5" in err
    code, _, _ = run(["evaluate", EXAMPLE, *RETRIEVAL, "--no-progress", "--fail-under", "mrr=0.5"], capsys)
    assert code == 0
    code, _, err = run(["evaluate", EXAMPLE, *RETRIEVAL, "--no-progress", "--fail-under", "nonsense=x"], capsys)
    assert code == 2 and "--fail-under" in err


def test_bad_records_are_reported_not_fatal(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    lines = EXAMPLE.read_text().splitlines()[:3] + ["{broken", json.dumps({"question": "q", "contexts": "x"})]
    data.write_text("\n".join(lines))
    code, out, err = run(["evaluate", data, *RETRIEVAL, "--no-progress"], capsys)
    assert code == 0
    assert "3 samples scored, 2 invalid" in out
    assert "line 4: invalid JSON" in err and "line 5: field 'contexts'" in err


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda p: None, "No such file"),
        (lambda p: p.write_text("{bad\n"), "no valid records"),
        (lambda p: p.write_text(json.dumps({"question": "q", "contexts": []}) + "\n"), "unknown metric"),
    ],
)
def test_unusable_input_exits_2(tmp_path, capsys, setup, message):
    path = tmp_path / "data.jsonl"
    setup(path)
    extra = ["-m", "faithfulnes"] if "unknown" in message else []
    code, _, err = run(["evaluate", path, *extra, "--no-progress"], capsys)
    assert code == 2 and message in err


def test_report_and_compare(tmp_path, capsys):
    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    assert run(["evaluate", EXAMPLE, *RETRIEVAL, "--no-progress", "-o", before], capsys)[0] == 0
    # a worse retriever: reverse every sample's contexts
    worse = tmp_path / "worse.jsonl"
    rows = [json.loads(line) for line in EXAMPLE.read_text().splitlines()]
    for r in rows:
        r["contexts"] = r["contexts"][::-1]
    worse.write_text("\n".join(json.dumps(r) for r in rows))
    assert run(["evaluate", worse, *RETRIEVAL, "--no-progress", "-o", after], capsys)[0] == 0
    code, out, _ = run(["report", before, "-o", tmp_path / "r.html"], capsys)
    assert code == 0 and "mrr" in out and (tmp_path / "r.html").exists()
    code, out, err = run(["compare", before, after], capsys)  # mrr and ndcg@10 fell: the gate fails
    assert code == 1 and "regression" in out and "20 shared samples" in out and "FAIL mrr: mean fell by 0.4125" in err
    code, _, _ = run(["compare", before, before, "--fail-on-sample-regression"], capsys)
    assert code == 0
    code, _, _ = run(["compare", before, after, "--tolerance", "1", "--fail-on-sample-regression"], capsys)
    assert code == 0  # nothing falls by more than 1
    code, _, _ = run(["compare", before, after, "--tolerance", "0.5", "--fail-on-sample-regression"], capsys)
    assert code == 1
    code, _, err = run(["report", EXAMPLE], capsys)
    assert code == 2 and "not a ragmeter results file" in err


@pytest.mark.slow
def test_console_script_help():
    exe = shutil.which("ragmeter", path=str(Path(sys.executable).parent))
    assert exe, "the ragmeter console script is installed next to the interpreter"
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    for verb in ("evaluate", "evaluate-traces", "report", "compare"):
        assert verb in out
    out = subprocess.run([exe, "evaluate", "--help"], capture_output=True, text=True, check=True).stdout
    for option in ("--metrics", "--judge", "--out", "--fail-under", "--concurrency"):
        assert option in out
    assert subprocess.run([exe], capture_output=True).returncode == 2


def test_evaluate_records_runs_in_the_history_store(tmp_path, capsys, monkeypatch):
    """--db records each run (dataset name, metrics, every score); RAGMETER_DB does the same."""
    from ragmeter.store import Store

    db = tmp_path / "history.db"
    code, out, err = run(["evaluate", EXAMPLE, *RETRIEVAL, "--no-progress", "--db", db], capsys)
    assert code == 0, err
    assert f"recorded run 1 in sqlite:///{db}" in out
    monkeypatch.setenv("RAGMETER_DB", str(db))
    code, out, err = run(["evaluate", EXAMPLE, "-m", "mrr", "--no-progress"], capsys)
    assert code == 0, err
    with Store(db) as store:
        runs = store.runs()
        assert [(r.id, r.dataset, r.samples) for r in runs] == [(2, "rag_samples", 20), (1, "rag_samples", 20)]
        trend = store.metric_trend("mrr")
        assert [(p.key, p.mean, p.count) for p in trend] == [(1, 1.0, 20), (2, 1.0, 20)]
        assert store.run(1).summary()["recall@5"]["mean"] == pytest.approx(0.8915, abs=1e-4)


def test_dashboard_of_the_history_store(tmp_path, capsys):
    """`dashboard` writes one page from the recorded runs: the newest run's summary, both runs
    on the trend lines; an empty store is a clear error (exit 2)."""
    db = tmp_path / "history.db"
    for metrics in ("mrr,recall@5", "mrr"):
        assert run(["evaluate", EXAMPLE, "-m", metrics, "--no-progress", "--db", db], capsys)[0] == 0
    page = tmp_path / "dash.html"
    code, out, err = run(["dashboard", "--db", db, "--out", page], capsys)
    assert code == 0, err
    html = page.read_text(encoding="utf-8")
    assert 'id="summary-table"' in html and "run 1" in html and "run 2" in html
    assert html.count("<details") >= 20  # a drill-down per sample of the newest run
    code, out, err = run(["dashboard", "--db", tmp_path / "empty.db", "--out", tmp_path / "x.html"], capsys)
    assert code == 2 and "no run is recorded" in err and not (tmp_path / "x.html").exists()


def _two_records(tmp_path) -> Path:
    path = tmp_path / "two.jsonl"
    path.write_text("\n".join(EXAMPLE.read_text().splitlines()[:2]) + "\n")
    return path


@pytest.mark.slow
def test_every_score_errored_is_exit_1_unless_allow_errors(tmp_path, capsys, monkeypatch):
    """An unreachable judge (here: one that rejects the key) errors every score: exit 1 naming
    how many errored and the first; --allow-errors exits 0. Some errors: exit 0, counted."""
    from helpers.servers import FakeLLMServer, error, oracle

    data = _two_records(tmp_path)
    first_q = json.loads(data.read_text().splitlines()[0])["question"]
    judged = ["-m", "faithfulness", "-j", "openai:gpt-4o-mini", "--no-progress", "--out", tmp_path / "r.jsonl"]
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "cache"))
    with FakeLLMServer(lambda req: error(401)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        code, out, err = run(["evaluate", data, *judged], capsys)
        assert code == 1
        assert "2 samples scored, 0 invalid, judge: openai:gpt-4o-mini, 2 scores errored" in out
        assert "ragmeter: error: all 2 of 2 scores errored; the first: sample py-gil, faithfulness: JudgeError:" in err
        assert "401" in err and "--allow-errors" in err
        assert (tmp_path / "r.jsonl").exists()  # the report is still written
        code, _, err = run(["evaluate", data, *judged, "--allow-errors"], capsys)
        assert code == 0 and "scores errored" not in err
    with FakeLLMServer(lambda req: error(401) if first_q in req.user_text else oracle(req)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        code, out, err = run(["evaluate", data, *judged], capsys)
        assert code == 0, err
        assert "judge: openai:gpt-4o-mini, 1 scores errored" in out and "error" not in err
    code, out, _ = run(["evaluate", data, *RETRIEVAL, "--no-progress"], capsys)
    assert code == 0 and "errored" not in out


def test_report_reads_the_json_that_evaluate_writes(tmp_path, capsys):
    """evaluate --out r.json and --out r.jsonl; report prints the same summary from either."""
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(EXAMPLE.read_text().splitlines()[:5] + ["{broken"]) + "\n")
    code, evaluated, _ = run(
        ["evaluate", data, *RETRIEVAL, "--no-progress", "-o", tmp_path / "r.json", "-o", tmp_path / "r.jsonl"], capsys
    )
    assert code == 0
    code, from_jsonl, err_jsonl = run(["report", tmp_path / "r.jsonl"], capsys)
    assert code == 0
    code, from_json, err_json = run(["report", tmp_path / "r.json", "-o", tmp_path / "again.jsonl"], capsys)
    assert code == 0
    assert from_json.replace(f"wrote {tmp_path / 'again.jsonl'}\n", "") == from_jsonl
    assert (
        err_json
        == err_jsonl
        == "invalid record: line 6: invalid JSON: Expecting property name enclosed in double quotes at column 2\n"
    )
    assert "5 samples scored, 1 invalid" in from_json
    table = evaluated.split("\n")[1:5]
    assert from_json.split("\n")[1:5] == table
    assert (tmp_path / "again.jsonl").read_text().splitlines()[1:] == (tmp_path / "r.jsonl").read_text().splitlines()[
        1:
    ]
    (tmp_path / "bad.json").write_text(json.dumps({"judge": "x"}))
    code, _, err = run(["report", tmp_path / "bad.json"], capsys)
    assert code == 2 and "not a ragmeter results file (no 'samples' list" in err


def test_concurrency_zero_is_an_error_not_the_default(capsys):
    """``--concurrency 0`` ran with the default (0 is falsy); now it is refused before any work."""
    import ragmeter as rm

    for bad in ("0", "-3", "2.5", "x"):
        with pytest.raises(SystemExit) as exit_:
            main(["evaluate", "examples/rag_samples.jsonl", "-j", "offline", "--concurrency", bad])
        assert exit_.value.code == 2
        assert f"argument --concurrency: expected a whole number of at least 1, got '{bad}'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["evaluate", "examples/rag_samples.jsonl", "--executor", "ray", "--workers", "0"])
    assert "argument --workers" in capsys.readouterr().err
    with pytest.raises(ValueError, match="concurrency must be a whole number of at least 1"):
        rm.evaluate("examples/rag_samples.jsonl", ["mrr"], concurrency=0, progress=False)
