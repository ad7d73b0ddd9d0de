"""The store under faults, with real components: inline results streaming into a real PostgreSQL
server that is restarted mid-run (tests/helpers/postgres.py), a SQLite file held locked by another
connection for longer than the busy timeout, and a store that refuses every write. Transient
failures are retried with backoff while the batch waits in the writer's bounded queue, so nothing
is lost; a permanent failure is not retried, its samples are counted, and the one log line names
the store (password redacted) and the cause, never the samples' content. Asserted by counts.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

import pytest

import ragmeter as rm
from helpers import wait_for
from ragmeter.inline import BackgroundScorer
from ragmeter.store import Store
from ragmeter.store.writer import StoreWriter

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def own_postgres():
    """A PostgreSQL server of this module's own: restarting it disturbs no other test."""
    from helpers.postgres import PostgresServer, PostgresUnavailable, require  # imported here: also a plugin module

    try:
        server = PostgresServer.start()
    except (PostgresUnavailable, RuntimeError) as exc:
        require(exc)
    yield server
    server.stop()


def sample(i: int) -> rm.Sample:
    return rm.Sample(
        f"secret question {i}?",
        [{"id": "a", "text": f"private chunk {i}"}],
        answer=f"private answer {i}",
        relevant_ids=["a"],
        id=f"s{i}",
    )


def scored(i: int) -> rm.SampleResult:
    return rm.SampleResult(sample(i), {"mrr": rm.Score("mrr", 1.0, label="pass", judge="code")})


def stream(scorer: BackgroundScorer, n: int, during: int, fault) -> None:
    """Submit ``n`` samples at about 100 per second; once ``during`` are in, run ``fault()`` on a
    second thread while the rest keep coming."""
    worker = None
    for i in range(n):
        assert scorer.submit(sample(i))
        if i == during:
            worker = threading.Thread(target=fault)
            worker.start()
        time.sleep(0.01)
    assert worker is not None
    worker.join()


def stored_ids(url) -> list[str]:
    with Store(url) as store:
        return sorted(s.result.sample.id for s in store.samples(limit=None))


def test_a_postgresql_restart_mid_run_loses_nothing(own_postgres):
    """The server is stopped (fast shutdown: open sessions cut) and started again 3 s later while
    inline results stream in: every result is recorded once."""
    url = own_postgres.create_database()
    scorer = BackgroundScorer(["mrr"], store=url, store_source="otel")
    stream(scorer, 400, during=100, fault=lambda: own_postgres.restart(down=3.0))
    assert scorer.shutdown(120)
    st = scorer.stats
    assert (st["scored"], st["store_written"], st["store_dropped"], st["store_errors"]) == (400, 400, 0, 0)
    assert stored_ids(url) == sorted(f"s{i}" for i in range(400))


def test_a_postgresql_outage_longer_than_the_retry_budget_is_dropped_and_counted(own_postgres, caplog):
    """With the server down past ``retry_timeout`` the waiting batch is given up: counted in
    store_errors, one line naming the store (password redacted) and the cause; what comes after the
    restart is written."""
    url = own_postgres.create_database().replace("ragmeter@", "ragmeter:hunter2@")  # trust auth ignores it
    writer = StoreWriter(url, "otel", batch=10, interval=0.01, retry_timeout=1.0)
    own_postgres.stop(cleanup=False)
    try:
        with caplog.at_level(logging.DEBUG, logger="ragmeter"):
            for i in range(10):
                writer.add(scored(i))
            assert wait_for(lambda: writer.stats["store_errors"] == 10, timeout=60)
    finally:
        own_postgres.restart()
    for i in range(10, 20):
        writer.add(scored(i))
    assert writer.close(60)
    assert writer.stats == {"store_written": 10, "store_dropped": 0, "store_errors": 10}
    assert stored_ids(url) == sorted(f"s{i}" for i in range(10, 20))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2  # unavailable, retrying; then given up
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "hunter2" not in text and "ragmeter:[REDACTED]@127.0.0.1" in warnings[-1].getMessage()
    assert "10 sample(s)" in warnings[-1].getMessage() and "dropped" in warnings[-1].getMessage()
    assert "secret question" not in text and "private" not in text
    assert all(r.exc_info is None for r in warnings)


def test_a_sqlite_file_locked_past_the_busy_timeout_loses_nothing(tmp_path, monkeypatch):
    """Another connection holds the write lock for 4 s, eight times SQLite's busy timeout (0.5 s
    here): the writes fail with "database is locked", are retried, and nothing is lost."""
    monkeypatch.setattr("ragmeter.store.engine.BUSY_TIMEOUT_S", 0.5)
    db = tmp_path / "locked.db"
    Store(db).close()
    scorer = BackgroundScorer(["mrr"], store=db, store_source="langchain")
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)

    def hold_lock() -> None:
        other.execute("BEGIN IMMEDIATE")
        time.sleep(4.0)
        other.execute("COMMIT")

    stream(scorer, 300, during=50, fault=hold_lock)
    other.close()
    assert scorer.shutdown(120)
    st = scorer.stats
    assert (st["scored"], st["store_written"], st["store_dropped"], st["store_errors"]) == (300, 300, 0, 0)
    assert stored_ids(db) == sorted(f"s{i}" for i in range(300))


def test_a_permanently_failing_store_counts_its_drops_in_one_line(tmp_path, caplog):
    """A schema error is not retried: each batch is dropped at once and counted; one warning
    (however many batches) names the store and the cause and holds no question or answer."""
    db = tmp_path / "broken.db"
    writer = StoreWriter(db, "test", batch=5, interval=0.01)
    writer.add(scored(0))
    assert writer.flush(30) and writer.stats["store_written"] == 1
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE scores")
    with caplog.at_level(logging.DEBUG, logger="ragmeter"):
        for i in range(1, 31):
            writer.add(scored(i))
            if i % 5 == 0:
                assert writer.flush(30)  # six batches
    assert writer.stats == {"store_written": 1, "store_dropped": 0, "store_errors": 30}
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    line = warnings[0].getMessage()
    assert f"sqlite:///{db}" in line and "no such table: scores" in line and "\n" not in line
    assert warnings[0].exc_info is None
    everything = "\n".join(r.getMessage() + str(r.exc_text or "") for r in caplog.records)
    assert "secret question" not in everything and "private" not in everything
    assert writer.close(10)


def test_a_capture_created_while_postgresql_is_down_records_once_it_is_up(own_postgres):
    """An app that starts while its database restarts: the capture is created (the store is
    opened on the first write, retried like any write), and what it scored is recorded once the
    server is up. An unusable store (a bad URL) still raises at creation."""
    url = own_postgres.create_database()
    own_postgres.stop(cleanup=False)
    try:
        scorer = BackgroundScorer(["mrr"], store=url, store_source="otel")
        for i in range(20):
            assert scorer.submit(sample(i))
        assert wait_for(lambda: scorer.stats["scored"] == 20)
        assert scorer.stats["store_written"] == 0
    finally:
        own_postgres.restart()
    assert scorer.shutdown(120)
    assert (scorer.stats["store_written"], scorer.stats["store_errors"]) == (20, 0)
    assert stored_ids(url) == sorted(f"s{i}" for i in range(20))
    with pytest.raises(ValueError, match="unsupported database URL"):
        StoreWriter("mysql://u@h/db", "otel")
