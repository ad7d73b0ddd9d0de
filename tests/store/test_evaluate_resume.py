"""`ragmeter evaluate --db` keeps what it scored when it is killed: a real subprocess scores
against a slow local OpenAI-compatible judge server (tests/helpers/servers.py), is SIGKILLed
midway, and `--resume` finishes the same stored run, sending exactly the judge calls of the
samples it lacks; resuming a finished run records nothing twice. Asserted by counts."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

import ragmeter as rm
from helpers import wait_for
from helpers.servers import FakeLLMServer
from ragmeter.cli import main
from ragmeter.judges import OpenAIJudge
from ragmeter.store import Store

pytestmark = pytest.mark.slow

N = 30
JUDGED = ["-m", "faithfulness", "-j", "openai:gpt-4o-mini", "--concurrency", "2", "--no-progress"]


def write_records(path, n: int = N) -> None:
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(
                json.dumps(
                    {
                        "id": f"s{i}",
                        "question": f"What does clause {i} say?",
                        "contexts": [f"Clause {i} says the fee is {i} euros."],
                        "answer": f"The fee is {i} euros.",
                    }
                )
                + "\n"
            )


def stored_rows(db) -> int:
    """Sample rows in the SQLite file now (0 before the schema exists), read without the store."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT count(*) FROM samples").fetchone()[0]
    except sqlite3.Error:
        return 0


def result_lines(path) -> int:
    """Complete sample lines in a results file (a last line cut off by the kill is not one)."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    return max(0, data.count(b"\n") - 1)


@pytest.fixture
def judge_env(tmp_path, monkeypatch):
    """The slow judge server, its URL and a key in this process's environment; a fresh judge
    cache per command (``cache(name)``), so that every call the run needs reaches the server."""
    with FakeLLMServer(latency=0.25) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_url)
        monkeypatch.delenv("RAGMETER_DB", raising=False)

        def cache(name: str) -> None:
            monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / f"cache-{name}"))

        yield server, cache


def calls_per_sample(server, tmp_path) -> int:
    src = tmp_path / "one.jsonl"
    write_records(src, 1)
    server.reset()
    rm.evaluate(
        str(src),
        ["faithfulness"],
        OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False),
        progress=False,
    )
    n = len(server.chat_requests)
    server.reset()
    assert n >= 1
    return n


def kill_midway(args: list, db, at_least: int) -> None:
    """Run ``ragmeter <args>`` in a subprocess and SIGKILL it once the store holds ``at_least``
    samples (the run is far from done by then: 30 samples at 2 in flight, 0.25 s per call)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragmeter.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    try:
        assert wait_for(lambda: stored_rows(db) >= at_least or proc.poll() is not None, timeout=120)
        assert proc.poll() is None, proc.communicate()[1].decode()[-3000:]
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def test_a_killed_run_keeps_its_results_and_resume_finishes_it(tmp_path, judge_env, capsys):
    server, cache = judge_env
    per_sample = calls_per_sample(server, tmp_path)
    src, db, out = tmp_path / "contracts.jsonl", tmp_path / "history.db", tmp_path / "results.jsonl"
    write_records(src)
    cache("killed")
    kill_midway(["evaluate", src, *JUDGED, "--db", db, "--out", out], db, at_least=6)

    stored, kept = stored_rows(db), result_lines(out)
    assert 6 <= stored <= kept < N  # written as they were scored: the file first, the store in batches
    with Store(db) as store:
        (run,) = store.runs()
        assert (run.dataset, run.complete, run.samples, run.judge) == ("contracts", False, stored, "openai:gpt-4o-mini")
        assert run.metrics == ["faithfulness"]

    cache("resumed")
    server.reset()
    assert main([str(a) for a in ["evaluate", src, *JUDGED, "--db", db, "--out", out, "--resume"]]) == 0
    printed = capsys.readouterr().out
    assert f"{N - kept} samples scored now, {kept} already in {out}" in printed
    assert f"ragmeter: {N} samples scored" in printed and f"recorded run {run.id} in sqlite:///{db}" in printed
    assert len(server.chat_requests) == (N - kept) * per_sample  # only the samples the file lacked
    with Store(db) as store:
        (again,) = store.runs()
        assert (again.id, again.complete, again.samples) == (run.id, True, N)
        ids = [s.result.sample.id for s in store.samples(run_id=run.id, limit=None)]
        assert sorted(ids) == sorted(f"s{i}" for i in range(N))  # each once: the file's extra lines added
        assert store.metric_trend("faithfulness")[0].count == N
    assert result_lines(out) == N

    server.reset()  # a finished run resumed again: nothing scored, nothing recorded twice
    assert main([str(a) for a in ["evaluate", src, *JUDGED, "--db", db, "--out", out, "--resume"]]) == 0
    assert f"0 samples scored now, {N} already in" in capsys.readouterr().out
    assert len(server.chat_requests) == 0
    with Store(db) as store:
        assert [(r.id, r.samples, r.complete) for r in store.runs()] == [(run.id, N, True)]


def test_a_killed_run_without_a_results_file_resumes_from_the_store(tmp_path, judge_env, capsys):
    server, cache = judge_env
    per_sample = calls_per_sample(server, tmp_path)
    src, db = tmp_path / "contracts.jsonl", tmp_path / "history.db"
    write_records(src)
    cache("killed")
    kill_midway(["evaluate", src, *JUDGED, "--db", db], db, at_least=6)
    stored = stored_rows(db)
    assert 6 <= stored < N
    with Store(db) as store:
        assert [(r.complete, r.samples) for r in store.runs()] == [(False, stored)]

    cache("resumed")
    server.reset()
    report = tmp_path / "report.json"
    assert main([str(a) for a in ["evaluate", src, *JUDGED, "--db", db, "--resume", "--out", report]]) == 0
    printed = capsys.readouterr().out
    assert f"ragmeter: {N - stored} samples scored now, {stored} already in run 1" in printed
    assert len(server.chat_requests) == (N - stored) * per_sample
    assert len(json.loads(report.read_text())["samples"]) == N  # the report holds the whole run
    with Store(db) as store:
        assert [(r.id, r.complete, r.samples) for r in store.runs()] == [(1, True, N)]
        assert sorted(s.result.sample.id for s in store.samples(limit=None)) == sorted(f"s{i}" for i in range(N))

    server.reset()
    assert main([str(a) for a in ["evaluate", src, *JUDGED, "--db", db, "--resume"]]) == 0
    assert f"0 samples scored now, {N} already in run 1" in capsys.readouterr().out
    assert len(server.chat_requests) == 0
    with Store(db) as store:
        assert [(r.id, r.samples) for r in store.runs()] == [(1, N)]
