"""Inline captures recording into a store (``store=``): the LangChain handler on a real LCEL
chain, the LlamaIndex instrumentation on a real query engine and the span processor each write
SQLite rows equal to the results they return; a locked store never holds up the request path; a
full queue and failed writes are counted; several processes on one SQLite file lose nothing; and
the writer on a real PostgreSQL server (tests/helpers/postgres.py)."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import ragmeter as rm
from helpers import wait_for
from ragmeter.inline import BackgroundScorer
from ragmeter.store import Store
from ragmeter.store.writer import StoreWriter

QUESTIONS = ["What is the capital of France?", "What is the capital of Germany?", "What is the capital of Spain?"]


@pytest.fixture(autouse=True)
def _no_ci_environment(monkeypatch):
    for name in (
        "RAGMETER_APP_VERSION",
        "OTEL_RESOURCE_ATTRIBUTES",
        "RAGMETER_GIT_COMMIT",
        "GIT_COMMIT",
        "GITHUB_SHA",
        "CI_COMMIT_SHA",
        "RAGMETER_DB",
        "RAGMETER_CAPTURE_CONTENT",
    ):
        monkeypatch.delenv(name, raising=False)


def stored(path) -> tuple[rm.store.RunInfo, dict[str, rm.SampleResult]]:
    """The one inline run in the store at ``path`` and its samples' results by sample id."""
    store = Store(path)
    (run,) = store.runs(kind="inline")
    rows = store.samples(run_id=run.id, limit=None)
    store.close()
    return run, {s.result.sample.id: s.result for s in rows}


def assert_rows_match(path, results, source: str) -> None:
    run, rows = stored(path)
    assert (run.kind, run.source, run.samples) == ("inline", source, len(results))
    assert rows == {r.sample.id: r for r in results}  # every Score with its details, the sample, usage


def sample_result(i: int) -> rm.SampleResult:
    sample = rm.Sample(f"q{i}?", [f"chunk {i}"], answer=f"answer {i}", id=f"s{i}")
    return rm.SampleResult(sample, {"f": rm.Score("f", 0.5, label="warn", judge="code")})


# ---------------------------------------------------------------------------- the three captures


def test_langchain_handler_records_what_it_scored(tmp_path):
    from helpers.tracing import AnswerOverlap, ContextCount, langchain_chain
    from ragmeter.integrations.langchain import RagmeterCallbackHandler

    db = tmp_path / "lc.db"
    handler = RagmeterCallbackHandler([ContextCount(), AnswerOverlap()], store=db, attach_to_trace=False)
    chain = langchain_chain(["Paris is the capital of France [1]."] * 3)
    for q in QUESTIONS:
        chain.invoke(q, config={"callbacks": [handler]})
    assert handler.flush(30)
    results = list(handler.results)
    assert len(results) == 3 and all(r.sample.metadata["latency"]["total_s"] >= 0 for r in results)
    assert_rows_match(db, results, "langchain")
    run, rows = stored(db)
    assert run.metrics == ["context_count", "answer_overlap"] and run.thresholds["context_count"] == (0.5, 0.25)
    st = handler.stats
    assert (st["store_written"], st["store_dropped"], st["store_errors"]) == (3, 0, 0)
    assert handler.shutdown(10)


def test_langchain_without_content_stores_no_content(tmp_path):
    from helpers.tracing import ContextCount, langchain_chain
    from ragmeter.integrations.langchain import instrument, uninstrument

    db = tmp_path / "private.db"
    handler = instrument([ContextCount()], store=str(db), capture_content=False, attach_to_trace=False)
    try:
        langchain_chain().invoke(QUESTIONS[0])
    finally:
        uninstrument()
    assert handler.flush(30)
    [result] = handler.results
    assert result.sample.question == f"[not captured: {len(QUESTIONS[0])} chars]"
    assert_rows_match(db, [result], "langchain")
    text = Path(db).read_bytes()
    assert b"capital of France" not in text  # no question, chunk or answer anywhere in the file
    handler.shutdown(10)


@pytest.mark.slow  # building the index
def test_llamaindex_instrumentation_records_what_it_scored(tmp_path):
    pytest.importorskip("llama_index.core")
    from helpers.llamaindex_app import build_index, code_of, engine, question, scripted_judge
    from ragmeter.integrations.llamaindex import RagmeterInstrumentation

    db = tmp_path / "li.db"
    index = build_index()
    with RagmeterInstrumentation(["faithfulness"], judge=scripted_judge(), store=db, attach_to_trace=False) as meter:
        for animal in ("lynx", "gecko"):
            assert str(engine(index).query(question(animal))).endswith(f"{code_of(animal)}.")
    results = list(meter.results)
    assert [r.scores["faithfulness"].value for r in results] == [1.0, 1.0]
    assert_rows_match(db, results, "llamaindex")
    run, _ = stored(db)
    assert run.judge == "scripted" and run.thresholds == {"faithfulness": (0.85, 0.7)}
    assert meter.stats["store_written"] == 2
    meter.shutdown(10)


def test_span_processor_records_what_it_scored(tmp_path):
    from helpers.tracing import carriers, genai_rag, rag_provider

    db = tmp_path / "otel.db"
    proc, provider, exporter = rag_provider(store=db)
    tracer = provider.get_tracer("app")
    for q, a in (
        ("How tall is the Eiffel Tower?", "It is 330 metres tall [1]."),
        ("When was it completed?", "In 1889 [2]."),
    ):
        with tracer.start_as_current_span("POST /chat"):
            genai_rag(tracer, question=q, answer=a)
    assert provider.force_flush(10_000)
    assert len(carriers(exporter)) == 2
    results = list(proc.results)
    assert_rows_match(db, results, "otel")
    assert proc.stats["store_written"] == 2
    proc.shutdown()
    with pytest.raises(ValueError, match="shared scorer"):
        rag_provider(store=db, scorer=proc.scorer)


# ---------------------------------------------------------------------------- never on the request path


def test_a_locked_store_does_not_hold_up_the_chain(tmp_path):
    """Another connection holds SQLite's write lock: the chain calls return and are scored while
    nothing can be written; after the lock is released the writer catches up, losing nothing."""
    from helpers.tracing import ContextCount, langchain_chain
    from ragmeter.integrations.langchain import RagmeterCallbackHandler

    db = tmp_path / "locked.db"
    handler = RagmeterCallbackHandler([ContextCount()], store=db, attach_to_trace=False)
    chain = langchain_chain(["Paris is the capital of France [1]."] * 4)
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # held until COMMIT below
    try:
        chain.invoke(QUESTIONS[0], config={"callbacks": [handler]})
        assert not handler.flush(0.3)  # scored, but the write waits for the lock
        for q in QUESTIONS:
            assert chain.invoke(q, config={"callbacks": [handler]}).startswith("Paris")
        assert wait_for(lambda: handler.stats["scored"] == 4)
        assert handler.stats["store_written"] == 0  # still locked: nothing written, nothing lost
    finally:
        other.execute("COMMIT")
        other.close()
    assert handler.flush(60)
    st = handler.stats
    assert (st["store_written"], st["store_dropped"], st["store_errors"]) == (4, 0, 0)
    assert_rows_match(db, list(handler.results), "langchain")
    handler.shutdown(10)


def test_a_full_queue_drops_and_counts(tmp_path, caplog):
    writer = StoreWriter(tmp_path / "full.db", "test", max_queue=2, batch=100, interval=60.0)
    with caplog.at_level(logging.WARNING, logger="ragmeter"):
        added = [writer.add(sample_result(i)) for i in range(5)]  # nothing written yet: interval 60 s
    assert added == [True, True, False, False, False]
    assert writer.stats == {"store_written": 0, "store_dropped": 3, "store_errors": 0}
    assert sum("store queue is full" in r.message for r in caplog.records) == 1
    assert writer.close(30)
    assert writer.stats == {"store_written": 2, "store_dropped": 3, "store_errors": 0}
    assert writer.add(sample_result(9)) is False and writer.stats["store_dropped"] == 4  # closed
    run, rows = stored(tmp_path / "full.db")
    assert sorted(rows) == ["s0", "s1"]


def test_batches_and_failed_writes(tmp_path, caplog):
    db = tmp_path / "b.db"
    store = Store(db)
    writer = StoreWriter(store, "test", batch=3, interval=60.0)
    for i in range(3):
        writer.add(sample_result(i))
    assert wait_for(lambda: writer.stats["store_written"] == 3)  # a full batch goes without a flush
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE scores")
    with caplog.at_level(logging.WARNING, logger="ragmeter"):
        for i in range(3, 8):
            writer.add(sample_result(i))
        assert writer.flush(30)
    assert writer.stats == {"store_written": 3, "store_errors": 5, "store_dropped": 0}
    assert sum("refused 3 sample(s) (no such table: scores); not retried" in r.message for r in caplog.records) == 1
    assert writer.close(10)
    assert store.runs(kind="inline")  # a Store given by the caller stays open
    store.close()


def test_a_result_after_an_idle_spell_is_written_within_the_interval(tmp_path):
    """The writer thread sleeps while the queue is empty; the next result wakes it, so a partial
    batch goes out ``interval`` seconds after it arrived, not only when a full batch or a flush
    comes (a result scored after a quiet minute used to wait for the next 99)."""
    writer = StoreWriter(tmp_path / "idle.db", "test", batch=100, interval=0.05)
    for i in range(3):
        writer.add(sample_result(i))
        assert wait_for(lambda i=i: writer.stats["store_written"] == i + 1, timeout=20), writer.stats
    assert writer.close(10)


def test_scorer_flush_and_shutdown_wait_for_the_store(tmp_path):
    db = tmp_path / "s.db"
    scorer = BackgroundScorer(["mrr"], store=db, store_source="batch")
    samples = [rm.Sample(f"q{i}", [{"id": "a", "text": "t"}], relevant_ids=["a"], id=f"s{i}") for i in range(5)]
    assert all(scorer.submit(s) for s in samples)
    assert scorer.flush(30) and scorer.stats["store_written"] == 5
    scorer.submit(rm.Sample("late", [{"id": "a", "text": "t"}], relevant_ids=["a"], id="late"))
    assert scorer.shutdown(30) and scorer.stats["store_written"] == 6
    run, rows = stored(db)
    assert (
        run.source == "batch"
        and run.metrics == ["mrr"]
        and sorted(rows) == sorted([f"s{i}" for i in range(5)] + ["late"])
    )
    assert set(BackgroundScorer.STATS_KEYS) >= set(StoreWriter.STATS_KEYS)
    assert all(BackgroundScorer(["mrr"]).stats[k] == 0 for k in StoreWriter.STATS_KEYS)


def test_offline_capture_records_what_evaluate_scored(tmp_path):
    from ragmeter.capture import CaptureRecorder

    db = tmp_path / "offline.db"
    rec = CaptureRecorder(["mrr"], mode="offline", store=db, store_source="offline")
    for i in range(3):
        rec.record(rm.Sample(f"q{i}", [{"id": "a", "text": "t"}], relevant_ids=["a"], id=f"s{i}"))
    assert rec.stats["store_written"] == 0
    result = rec.evaluate()
    assert rec.flush(30) and rec.stats["store_written"] == 3
    assert_rows_match(db, list(result), "offline")
    assert rec.shutdown(10)


# ---------------------------------------------------------------------------- several processes


CHILD = """
import sys, time
from pathlib import Path
import ragmeter as rm
from ragmeter.inline import BackgroundScorer
from ragmeter.store.writer import StoreWriter

db, worker, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
scorer = BackgroundScorer(["mrr"], store=db, store_source="otel", max_queue=1000)
(folder / f"ready-{worker}").touch()
while not (folder / "go").exists():
    time.sleep(0.002)
samples = [rm.Sample(f"q{i}", [{"id": "a", "text": "t"}], relevant_ids=["a"], id=f"w{worker}-{i}") for i in range(60)]
if worker == "2":  # results straight to a writer that would wait 60 s for a full batch
    writer = StoreWriter(db, "otel", batch=100, interval=60.0)
    for s in samples:
        writer.add(rm.SampleResult(s, {"mrr": rm.Score("mrr", 1.0, label="pass", judge="code")}))
else:
    for s in samples:
        scorer.submit(s)
# no flush: interpreter exit scores and records what is pending
"""


@pytest.mark.slow
def test_several_processes_on_one_sqlite_file_lose_nothing(tmp_path):
    db = tmp_path / "shared.db"
    Store(db).close()  # the schema exists; the children race on writes only
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(db), str(w), str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(3)
    ]
    assert wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 3, timeout=60)
    (tmp_path / "go").touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    store = Store(db)
    runs = store.runs(kind="inline")
    assert len(runs) == 3 and all(r.samples == 60 and r.source == "otel" for r in runs)
    ids = sorted(s.result.sample.id for s in store.samples(limit=None))
    assert ids == sorted(f"w{w}-{i}" for w in range(3) for i in range(60))
    assert store.metric_trend("mrr", by="day")[0].count == 180


# ---------------------------------------------------------------------------- PostgreSQL


def test_writer_on_postgresql(postgres_server):
    url = postgres_server.create_database()
    scorer = BackgroundScorer(["mrr"], store=url, store_source="langchain")
    samples = [
        rm.Sample(
            f"q{i}",
            [{"id": "a", "text": "t"}, {"id": "b", "text": "u"}],
            relevant_ids=["b"],
            id=f"pg{i}",
            metadata={"latency": {"total_s": 0.5 * i}},
        )
        for i in range(4)
    ]
    for s in samples:
        scorer.submit(s)
    assert scorer.shutdown(60)
    assert scorer.stats["store_written"] == 4
    with Store(url) as store:
        (run,) = store.runs(kind="inline")
        rows = {s.result.sample.id: s for s in store.samples(run_id=run.id, limit=None)}
        assert {k: r.result for k, r in rows.items()} == {r.sample.id: r for r in scorer.results}
        assert [rows[f"pg{i}"].latency_s for i in range(4)] == [0.0, 0.5, 1.0, 1.5]
        assert all(r.result.scores["mrr"].value == 0.5 for r in rows.values())
