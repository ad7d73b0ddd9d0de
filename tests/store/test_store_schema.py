"""ragmeter.store's schema over time and under load, on SQLite and a real PostgreSQL server: a
version-1 database (built here by hand from the frozen v1 definition) is upgraded on open with
its data kept and ends up identical to a fresh one; a newer database is refused; several
processes writing one database at once lose nothing."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import pytest
import sqlalchemy as sa

from helpers import wait_for
from helpers.store_schema import make_v1, schema_of
from ragmeter.labels import Label
from ragmeter.store import SCHEMA_VERSION, Store, StoreVersionError, schema
from ragmeter.store.engine import create_engine, database_url


def versions(url: str) -> list[int]:
    engine = create_engine(database_url(url))
    with engine.connect() as conn:
        rows = [v for (v,) in conn.execute(sa.text("SELECT version FROM schema_version ORDER BY version"))]
    engine.dispose()
    return rows


def test_a_version_1_database_is_upgraded_with_its_data(make_db, db_url):
    assert SCHEMA_VERSION == 4
    make_v1(db_url)
    store = Store(db_url)
    assert versions(db_url) == [1, 2, 3, 4]
    old = store.run(1)
    assert old.metrics == ["faithfulness"] and old.thresholds == {"faithfulness": (0.85, 0.7)} and old.duration_s == 3.5
    assert [(r.sample.id, r["faithfulness"].value, r["faithfulness"].error) for r in old] == [
        ("s1", 0.75, None),
        ("s2", None, "judge unreachable"),
    ]
    assert old[0]["faithfulness"].details == {"claims": [1]} and old[0].usage.calls == 1
    # v2's column was filled from each sample's metadata
    assert {s.result.sample.id: s.latency_s for s in store.samples(run_id=1)} == {"s1": 1.5, "s2": None}
    assert store.metric_trend("faithfulness") == [(1, 0.75, 1, 1)]
    new = store.record_run(old, dataset="after upgrade")
    assert store.run(new).results == old.results
    store.close()
    Store(db_url).close()  # opening again migrates nothing
    assert versions(db_url) == [1, 2, 3, 4]
    # the upgraded database is the same as one created at the current version
    fresh = make_db()
    Store(fresh).close()
    assert schema_of(db_url) == schema_of(fresh)


def test_a_version_2_database_gets_the_labels_table(make_db, db_url):
    """v2 -> v3 adds ``labels``: a v2 database (v1 upgraded by the v2 step alone) keeps its runs,
    takes labels, and ends up identical to a fresh v3 one."""
    make_v1(db_url)
    engine = create_engine(database_url(db_url))
    with engine.begin() as conn:
        schema.MIGRATIONS[0](conn)
        conn.execute(schema.schema_version.insert().values(version=2, applied_at=datetime(2026, 2, 1)))
        assert not sa.inspect(conn).has_table("labels")
    engine.dispose()
    store = Store(db_url)
    assert versions(db_url) == [1, 2, 3, 4]
    assert [r.sample.id for r in store.run(1)] == ["s1", "s2"] and store.labels() == []
    assert (
        store.record_labels(
            [Label("s1", "ann", "faithfulness", 4), Label("s2", "ann", "faithfulness", None)], source="labels.csv"
        )
        == 2
    )
    assert store.labels() == [Label("s1", "ann", "faithfulness", 4), Label("s2", "ann", "faithfulness", None)]
    store.close()
    fresh = make_db()
    Store(fresh).close()
    assert schema_of(db_url) == schema_of(fresh)


def test_a_newer_database_is_refused(db_url):
    Store(db_url).close()
    engine = create_engine(database_url(db_url))
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO schema_version (version, applied_at) VALUES (99, :at)"), {"at": datetime(2030, 1, 1)}
        )
    engine.dispose()
    with pytest.raises(
        StoreVersionError, match=r"schema version 99, newer than this ragmeter reads \(4\): upgrade ragmeter"
    ):
        Store(db_url)
    assert versions(db_url) == [4, 99]


def test_a_database_with_other_tables_named_runs_is_left_alone(db_url):
    engine = create_engine(database_url(db_url))
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE runs (name VARCHAR(20))"))
    engine.dispose()
    with pytest.raises(RuntimeError, match="not a ragmeter store"):
        Store(db_url)


def test_wal_switch_waits_for_a_writer_sqlite_would_not_wait_for(tmp_path):
    """SQLite answers "database is locked" at once, without its busy handler, when a connection
    switches a file to WAL while another holds a write lock (as when several processes open a new
    file together). Opening the store waits for the writer instead of failing."""
    import sqlite3
    import threading
    import time

    path = tmp_path / "new.db"
    plain = sqlite3.connect(path, isolation_level=None)
    plain.execute("CREATE TABLE other (x)")  # a rollback-journal file, as a first process leaves it
    plain.close()
    held, released = threading.Event(), []

    def writer() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO other VALUES (1)")
        held.set()
        time.sleep(0.4)
        released.append(True)
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    assert held.wait(5)
    raw = sqlite3.connect(path, timeout=5, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # what SQLite does on its own
        raw.execute("PRAGMA journal_mode = WAL")
    raw.close()
    store = Store(str(path))
    assert released  # it waited for the writer to let go (not an error, not before)
    thread.join()
    with sqlite3.connect(path) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


CHILD = """
import sys, time
from pathlib import Path
import ragmeter as rm
from ragmeter.store import Store

url, worker, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
(folder / f"ready-{worker}").touch()
while not (folder / "go").exists():
    time.sleep(0.002)
store = Store(url)
for i in range(50):
    results = [rm.SampleResult(rm.Sample(f"q{j}", [f"c{j}"], answer="a", id=f"w{worker}-r{i}-s{j}"),
                               {"f": rm.Score("f", j / 2, label="pass"), "g": rm.Score("g", None, error="x")})
               for j in range(3)]
    store.record_run(rm.EvaluationResult(results, ["f", "g"]), dataset=f"w{worker}-r{i}")
    store.record_samples(results[:1], "otel")
"""


@pytest.mark.slow
def test_four_processes_writing_one_database_lose_nothing(db_url, tmp_path):
    """4 processes x 50 runs (3 samples, 2 scores each) plus one inline sample per run, all at once
    on a database that does not exist yet (so they also race to create the schema)."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, db_url, str(w), str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    assert wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 4, timeout=60)
    (tmp_path / "go").touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    store = Store(db_url)
    runs = store.runs(limit=None)
    evaluated = [r for r in runs if r.kind == "evaluate"]
    assert len(evaluated) == 200 and len({r.id for r in runs}) == len(runs)
    assert sorted(r.dataset for r in evaluated) == sorted(f"w{w}-r{i}" for w in range(4) for i in range(50))
    assert all(r.samples == 3 for r in evaluated)
    inline = [r for r in runs if r.kind == "inline"]
    assert len(inline) == 4 and all(r.samples == 50 for r in inline) and len({r.process for r in inline}) == 4
    ids = sorted(s.result.sample.id for s in store.samples(limit=None) if s.run_id in {r.id for r in evaluated})
    assert ids == sorted(f"w{w}-r{i}-s{j}" for w in range(4) for i in range(50) for j in range(3))
    assert sum(p.count for p in store.metric_trend("f")) == 200 * 3 + 4 * 50
    assert sum(p.errors for p in store.metric_trend("g")) == 200 * 3 + 4 * 50
    assert versions(db_url) == [SCHEMA_VERSION]
