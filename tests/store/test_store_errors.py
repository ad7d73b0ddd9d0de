"""Store failures on the command line: one line naming the store (password redacted) and the
cause, never a SQLAlchemy traceback (``RAGMETER_DEBUG=1`` adds it); with the store down,
``evaluate`` still prints its summary and writes its reports (exit 2: the store was not
written). ``dashboard`` reads a store on a read-only mount without writing a byte."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from helpers import ROOT
from helpers.process import free_port
from ragmeter.cli import main
from ragmeter.labels import Label
from ragmeter.store import Store
from ragmeter.store.engine import StoreError

EXAMPLE = ROOT / "examples" / "rag_samples.jsonl"
RETRIEVAL = ["-m", "mrr,recall@5", "--no-progress"]


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("RAGMETER_DEBUG", raising=False)
    monkeypatch.delenv("RAGMETER_DB", raising=False)


def run(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def newer_store(path: Path) -> Path:
    """A SQLite store a newer ragmeter has written (schema version 99)."""
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (99, ?)", (datetime(2030, 1, 1),))
    return path


def down_url() -> str:
    """A PostgreSQL URL with a password where nothing listens (connection refused at once)."""
    pytest.importorskip("psycopg")
    return f"postgresql://app:hunter2@127.0.0.1:{free_port()}/history"


@pytest.mark.parametrize("outs", [["r.md", "r.html"], ["r.jsonl", "r.html"]], ids=["in-memory", "streamed"])
def test_evaluate_with_the_store_down_prints_its_summary_and_one_line(tmp_path, capsys, outs):
    outs = [tmp_path / o for o in outs]
    code, out, err = run(
        ["evaluate", EXAMPLE, *RETRIEVAL, "--db", down_url(), *[x for o in outs for x in ("--out", o)]], capsys
    )
    assert code == 2
    assert out.startswith("ragmeter: 20 samples scored, 0 invalid") and "mrr" in out  # the summary, as usual
    assert all(f"wrote {o}" in out and o.stat().st_size > 0 for o in outs)
    assert "recorded run" not in out
    (line,) = err.splitlines()
    assert line.startswith("ragmeter: error: store postgresql+psycopg://app:[REDACTED]@127.0.0.1:")
    assert "Connection refused" in line and line.endswith("the run was not recorded")
    assert "hunter2" not in out + err


def test_every_command_gives_one_line_for_a_newer_store(tmp_path, capsys):
    db = newer_store(tmp_path / "newer.db")
    expected = f"ragmeter: error: store sqlite:///{db}: schema version 99, newer than this ragmeter reads"
    code, out, err = run(["evaluate", EXAMPLE, *RETRIEVAL, "--db", db, "--out", tmp_path / "r.md"], capsys)
    assert code == 2 and "ragmeter: 20 samples scored" in out and (tmp_path / "r.md").exists()
    (line,) = err.splitlines()
    assert line.startswith(expected) and "upgrade ragmeter" in line
    for args in (
        ["dashboard", "--db", db, "--out", tmp_path / "d.html"],
        ["compare", "1", "2", "--db", db],
        ["labels", "agreement", db],
    ):
        code, out, err = run(args, capsys)
        assert code == 2 and err.splitlines() == [err.strip()] and err.startswith(expected), (args, err)


def test_a_store_error_traceback_only_with_ragmeter_debug(tmp_path, capsys, monkeypatch):
    db = newer_store(tmp_path / "newer.db")
    code, _, err = run(["dashboard", "--db", db, "--out", tmp_path / "d.html"], capsys)
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    monkeypatch.setenv("RAGMETER_DEBUG", "1")
    code, _, err = run(["dashboard", "--db", db, "--out", tmp_path / "d.html"], capsys)
    assert code == 2 and err.startswith("ragmeter: error: store sqlite:///")
    assert "Traceback (most recent call last)" in err and "StoreVersionError" in err


def test_a_store_run_lookup_that_fails_is_one_line(tmp_path, capsys):
    code, out, err = run(["compare", "1", "2", "--db", down_url()], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("ragmeter: error: store postgresql+psycopg://app:[REDACTED]@") and "hunter2" not in err


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _bind_read_only(folder: Path) -> str | None:
    """The shell words that make ``folder`` a read-only bind mount in a private mount namespace
    (``unshare -m``; a real read-only mount, which stops root too), or None where this machine
    does not allow it."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return None
    where = shlex.quote(str(folder))
    words = f"mount --bind {where} {where} && mount -o remount,bind,ro {where}"
    probe = subprocess.run([unshare, "-m", "sh", "-c", f"{words} && ! touch {where}/.probe"], capture_output=True)
    return words if probe.returncode == 0 and not (folder / ".probe").exists() else None


def test_dashboard_reads_a_store_on_a_read_only_mount(tmp_path, capsys):
    """The store's folder is a read-only mount (where this machine allows one: ``unshare -m``
    and a read-only bind mount, a subprocess) and, in any case, ``chmod a-w`` (root passes every
    permission check, so ragmeter goes by the permission bits and opens the file with SQLite's
    ``mode=ro&immutable=1``): the page is written elsewhere, and the folder's listing and every
    byte in it are unchanged."""
    folder = tmp_path / "mount"
    folder.mkdir()
    db = folder / "history.db"
    for metrics in ("mrr,recall@5", "mrr"):
        assert run(["evaluate", EXAMPLE, "-m", metrics, "--no-progress", "--db", db], capsys)[0] == 0
    before = _snapshot(folder)
    assert list(before) == ["history.db"]  # the last connection checkpointed and removed the WAL
    mount = _bind_read_only(folder)
    if mount is not None:
        page = tmp_path / "mounted.html"
        command = (
            f"{mount} && exec {shlex.quote(sys.executable)} -m ragmeter.cli dashboard --db {shlex.quote(str(db))} "
            f"--out {shlex.quote(str(page))}"
        )
        done = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "run 2" in page.read_text(encoding="utf-8") and _snapshot(folder) == before
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        page = tmp_path / "dash.html"
        code, out, err = run(["dashboard", "--db", db, "--out", page], capsys)
        assert code == 0, err
        assert "run 1" in page.read_text(encoding="utf-8") and "run 2" in page.read_text(encoding="utf-8")
        assert _snapshot(folder) == before
        with Store(db, read_only=True) as store:
            assert [r.id for r in store.runs()] == [2, 1]
            with pytest.raises(StoreError, match="readonly database"):
                store.record_labels([Label("s", "a", "overall", 3)])
        assert _snapshot(folder) == before
    finally:
        folder.chmod(0o755)
        db.chmod(0o644)


def test_a_read_only_store_is_never_created_or_upgraded(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        Store(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="no ragmeter tables"):
        Store(tmp_path / "other.db", read_only=True)
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == '["other.db"]'


@pytest.mark.parametrize(
    "url, cause",
    [
        ("postgresql://u:pw1234@h:notaport/db", "invalid literal for int()"),
        ("mysql://u:pw1234@h/db", "use a file path, sqlite:///path or postgresql://"),
        ("://x", "Could not parse"),
    ],
)
def test_a_bad_database_url_is_one_line(tmp_path, capsys, url, cause):
    code, out, err = run(["dashboard", "--db", url, "--out", tmp_path / "d.html"], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and cause in err and "pw1234" not in err
