"""A closed stdout (``ragmeter evaluate ... | head -1``) is a normal end: the reports are written
before anything is printed, no traceback and no "Exception ignored ... BrokenPipeError" at
interpreter exit, and the exit status is the one the run would have had. The CLI runs as the
installed console script in a subprocess whose stdout is a real pipe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TESTS
from ragmeter.cli import _ClosedPipeSafe

EXAMPLE = TESTS.parent / "examples" / "rag_samples.jsonl"
TRACES = TESTS / "data" / "otlp" / "collector_genai_openllmetry.jsonl"


def _ragmeter() -> str:
    exe = shutil.which("ragmeter", path=str(Path(sys.executable).parent))
    assert exe, "the ragmeter console script is installed next to the interpreter"
    return exe


def run_with_closed_stdout(args: list, read_first_line: bool) -> tuple[int, str, bytes]:
    """Run ``ragmeter args`` with stdout a pipe whose read end is closed at once, or after the
    first line was read (what ``| head -1`` does). Returns (exit code, stderr, what was read)."""
    env = dict(os.environ, RAGMETER_JUDGE="offline")
    env.pop("RAGMETER_DB", None)
    if read_first_line:
        proc = subprocess.Popen([_ragmeter(), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        first = proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        return proc.wait(60), err.decode(), first
    r, w = os.pipe()
    os.close(r)  # nobody will ever read: the first write or flush fails with EPIPE
    try:
        proc = subprocess.run([_ragmeter(), *map(str, args)], stdout=w, stderr=subprocess.PIPE, env=env, timeout=60)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr.decode(), b""


def _complete_jsonl(path: Path, samples: int) -> None:
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["ragmeter"] == "results" and len(lines) == 1 + samples
    assert all(json.loads(ln)["scores"] for ln in lines[1:])


def test_a_closed_pipe_points_stdout_at_devnull(tmp_path):
    """In process: after EPIPE the stream's fd is /dev/null, so nothing fails again."""
    r, w = os.pipe()
    os.close(r)
    stream = os.fdopen(w, "w")
    safe = _ClosedPipeSafe(stream)
    safe.write("x" * 100_000)  # more than the buffer: the write itself hits the closed pipe
    safe.write("more\n")
    safe.flush()
    assert safe.closed_by_reader
    assert os.fstat(w).st_rdev == os.stat(os.devnull).st_rdev
    stream.close()


@pytest.mark.slow
@pytest.mark.parametrize("read_first_line", [False, True], ids=["closed-at-once", "head-1"])
def test_evaluate_into_a_closed_pipe_writes_reports_and_exits_0(tmp_path, read_first_line):
    outs = [tmp_path / "r.jsonl", tmp_path / "r.json", tmp_path / "r.html"]
    db = tmp_path / "h.db"
    code, err, first = run_with_closed_stdout(
        [
            "evaluate",
            EXAMPLE,
            "-m",
            "mrr,recall@5",
            "--no-progress",
            *[x for o in outs for x in ("--out", o)],
            "--db",
            db,
        ],
        read_first_line,
    )
    assert (code, err) == (0, "")
    if read_first_line:
        assert first.startswith(b"ragmeter: 20 samples scored")
    _complete_jsonl(outs[0], 20)
    assert len(json.loads(outs[1].read_text())["samples"]) == 20
    assert outs[2].read_text().rstrip().endswith("</html>")
    assert db.stat().st_size > 0


@pytest.mark.slow
def test_a_failing_gate_into_a_closed_pipe_still_exits_1(tmp_path):
    code, err, _ = run_with_closed_stdout(
        [
            "evaluate",
            EXAMPLE,
            "-m",
            "recall@5",
            "--no-progress",
            "--out",
            tmp_path / "r.jsonl",
            "--fail-under",
            "recall@5=0.99",
        ],
        read_first_line=False,
    )
    assert code == 1
    assert err.startswith("FAIL recall@5: mean 0.8915 < 0.99") and "Traceback" not in err and "Exception" not in err
    _complete_jsonl(tmp_path / "r.jsonl", 20)


@pytest.mark.slow
def test_report_and_evaluate_traces_into_a_closed_pipe(tmp_path):
    results = tmp_path / "r.jsonl"
    code, err, _ = run_with_closed_stdout(
        ["evaluate-traces", TRACES, "-m", "mrr", "--no-progress", "--out", results], read_first_line=False
    )
    assert (code, err) == (0, "")
    _complete_jsonl(results, 2)  # one scored, one read back from the evaluation span the workflow call carries
    code, err, _ = run_with_closed_stdout(["report", results, "--out", tmp_path / "r.md"], read_first_line=False)
    assert (code, err) == (0, "")
    assert "| mrr |" in (tmp_path / "r.md").read_text()
