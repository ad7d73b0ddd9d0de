"""ragmeter.store: every API on SQLite and on a real PostgreSQL server (tests/helpers/postgres.py),
each test against a fresh database: runs and inline samples round-trip equal, trends and
worst-first queries compute what they say, environment tags are picked up."""

from __future__ import annotations

import math
import os
import sqlite3
import threading
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
import sqlalchemy as sa

import ragmeter as rm
from helpers import ROOT
from ragmeter.judges import OfflineJudge
from ragmeter.judges.base import Usage
from ragmeter.store import RunInfo, Store, TrendPoint
from ragmeter.store.engine import APP_VERSION_VARS, GIT_COMMIT_VARS, StoreError, database_url, environment_info, write

EXAMPLES = ROOT / "examples" / "rag_samples.jsonl"
ENV_VARS = (*APP_VERSION_VARS, "OTEL_RESOURCE_ATTRIBUTES", *GIT_COMMIT_VARS, "RAGMETER_DB")


@pytest.fixture(autouse=True)
def _no_ci_environment(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def evaluated() -> rm.EvaluationResult:
    """A real run: judged, code and retrieval metrics with their evidence, on the README's data."""
    return rm.evaluate(
        EXAMPLES,
        progress=False,
        metrics=[
            "faithfulness",
            "context_relevance",
            "citation_accuracy",
            "hallucinated_specifics",
            "precision@5",
            "mrr",
        ],
        judge=OfflineJudge(embeddings=False),
    )


def score(metric: str, value: float | None, label: str | None = None, **kw) -> rm.Score:
    if value is None and "error" not in kw:
        kw.setdefault("explanation", "does not apply")
    return rm.Score(metric, value, label=label, judge=kw.pop("judge", "offline"), **kw)


def result(sid: str, values: dict, *, metadata: dict | None = None, usage: Usage | None = None) -> rm.SampleResult:
    """A SampleResult with one Score per ``metric: value`` (``"error"`` for an errored score)."""
    scores = {}
    for m, v in values.items():
        if v == "error":
            scores[m] = score(m, None, error="judge unreachable")
        else:
            scores[m] = score(m, v, None if v is None else ("pass" if v >= 0.8 else "warn" if v >= 0.5 else "fail"))
    sample = rm.Sample(f"question {sid}?", [f"chunk of {sid}"], answer=f"answer {sid}", id=sid, metadata=metadata or {})
    return rm.SampleResult(sample, scores, usage or Usage(), 0.25)


def rich_result() -> rm.EvaluationResult:
    """Everything a result can carry: unicode, graded ground truth, context ids / scores /
    metadata, nested details, errors, n/a, usage with cost, invalid records, thresholds."""
    sample = rm.Sample(
        "Qu'est-ce que la \u00ab RAG \u00bb ? \U0001f50d",
        [
            {"text": "Retrieval-augmented generation\u2026", "id": "d1", "score": 0.91, "metadata": {"page": 3}},
            "second chunk",
        ],
        answer="It retrieves then generates [d1].",
        reference="RAG retrieves passages.",
        relevant_ids={"d1": 2, "d9": 1},
        id="s-1",
        metadata={"latency": {"total_s": 1.25, "retrieval_s": 0.2}, "tags": ["fr"], "n": [1, 2]},
    )
    details = {
        "claims": [
            {
                "claim": "It retrieves",
                "verdict": "supported",
                "chunks": [0],
                "evidence": [{"chunk": 0, "quote": "Retrieval\u2026"}],
            }
        ],
        "judge_calls": 2,
        "tokens": {"prompt": 120, "completion": 30},
        "nested": {"a": [None, True, 1.5]},
    }
    first = rm.SampleResult(
        sample,
        {
            "faithfulness": rm.Score(
                "faithfulness", 0.5, "1 of 2 claims supported", details, judge="openai:gpt-4o-mini", label="fail"
            ),
            "context_recall": rm.Score(
                "context_recall",
                None,
                "",
                {"attempts": 3},
                error="JudgeError: bad JSON after 3 tries",
                judge="openai:gpt-4o-mini",
            ),
            "citation_accuracy": rm.Score("citation_accuracy", None, "the answer cites nothing", judge="code"),
        },
        Usage(
            calls=3, retries=1, cached=1, prompt_tokens=120, completion_tokens=30, embedding_calls=2, cost_usd=0.00042
        ),
        1.5,
    )
    second = result("s-2", {"faithfulness": 1.0, "context_recall": 0.75, "citation_accuracy": 0.0})
    invalid = [rm.RecordError("line 3", "contexts", "expected a list, got str")]
    return rm.EvaluationResult(
        [first, second],
        ["faithfulness", "context_recall", "citation_accuracy"],
        judge="openai:gpt-4o-mini",
        invalid=invalid,
        duration_s=2.718281828,
        thresholds={"faithfulness": (0.85, 0.7), "context_recall": (0.8, 0.6)},
    )


def assert_same(stored: rm.EvaluationResult, original: rm.EvaluationResult) -> None:
    assert stored.results == original.results  # Samples, every Score with details, usage, duration
    assert stored.metrics == original.metrics and stored.judge == original.judge
    assert stored.thresholds == original.thresholds and stored.duration_s == original.duration_s
    assert stored.usage == original.usage
    assert [e.to_dict() for e in stored.invalid] == [e.to_dict() for e in original.invalid]
    assert stored.to_dict() == original.to_dict()
    assert [list(r.scores) for r in stored] == [list(r.scores) for r in original]  # metric order kept


def test_record_run_round_trips_every_score(db_url, evaluated):
    store = Store(db_url)
    rich = rich_result()
    ids = [store.record_run(evaluated, dataset="rag_samples", tags=["nightly"]), store.record_run(rich)]
    assert ids[1] > ids[0]
    assert_same(store.run(ids[0]), evaluated)
    assert_same(store.run(ids[1]), rich)
    assert_same(Store(db_url).run(ids[1]), rich)  # another connection, same answer
    with pytest.raises(KeyError, match="no run 999"):
        store.run(999)
    store.close()


def test_a_run_larger_than_one_score_batch_round_trips(db_url, evaluated, monkeypatch):
    """Score rows go to the database in batches while the run is written (memory bounded by the
    batch): 20 samples x 6 metrics = 120 rows in batches of 7 still read back equal."""
    import ragmeter.store.store as store_module

    monkeypatch.setattr(store_module, "_SCORE_BATCH", 7)
    store = Store(db_url)
    assert sum(len(r.scores) for r in evaluated) == 120
    assert_same(store.run(store.record_run(evaluated)), evaluated)
    store.close()


def test_runs_lists_newest_first_with_their_settings(db_url, evaluated, monkeypatch):
    monkeypatch.setenv("GITHUB_SHA", "0123abc")
    monkeypatch.setenv("RAGMETER_APP_VERSION", "2.4.0")
    store = Store(db_url)
    first = store.record_run(evaluated, dataset="rag_samples", tags=["nightly", "nightly", "gpu"])
    monkeypatch.setenv("GIT_COMMIT", "feedbeef")  # Jenkins' name wins over GitHub's
    second = store.record_run(rich_result(), dataset="other", app_version="3.0", git_commit="cafe")
    third = store.record_run(rich_result(), dataset="other")
    listed = store.runs()
    assert [r.id for r in listed] == [third, second, first]
    info = listed[2]
    assert isinstance(info, RunInfo) and info.kind == "evaluate" and info.dataset == "rag_samples"
    assert (info.app_version, info.git_commit, info.tags) == ("2.4.0", "0123abc", ["nightly", "gpu"])
    assert (
        info.judge == evaluated.judge == "offline-lexical"
        and info.samples == len(evaluated)
        and info.metrics == evaluated.metrics
    )
    assert info.thresholds == evaluated.thresholds and info.usage == evaluated.usage
    assert info.duration_s == evaluated.duration_s
    assert abs(info.created_at - datetime.now(UTC)) < timedelta(minutes=5)
    assert (listed[1].app_version, listed[1].git_commit) == ("3.0", "cafe")  # arguments beat the environment
    assert listed[0].git_commit == "feedbeef"
    assert [r.id for r in store.runs(limit=2)] == [third, second]
    assert [r.id for r in store.runs(dataset="other")] == [third, second]
    assert store.runs(kind="inline") == []
    assert store.run_info(first) == info


def test_metric_trend_per_run_and_per_day(db_url):
    store = Store(db_url)
    runs = [
        rm.EvaluationResult([result("a", {"f": 0.2}), result("b", {"f": 0.6}), result("c", {"f": "error"})], ["f"]),
        rm.EvaluationResult([result("a", {"f": 1.0, "g": 0.5}), result("b", {"f": None})], ["f", "g"]),
        rm.EvaluationResult([result("a", {"f": "error"})], ["f"]),
    ]
    ids = [store.record_run(r, dataset="d") for r in runs]
    trend = store.metric_trend("f")
    assert trend == [
        TrendPoint(ids[0], pytest.approx(0.4), 2, 1),
        TrendPoint(ids[1], 1.0, 1, 0),
        TrendPoint(ids[2], None, 0, 1),
    ]
    assert store.metric_trend("f", limit=2) == trend[1:]
    assert store.metric_trend("g") == [(ids[1], 0.5, 1, 0)]
    assert store.metric_trend("missing") == []
    assert store.metric_trend("f", dataset="elsewhere") == []
    # inline samples land on the day they happened (their started_at), in UTC
    day1 = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)
    day2 = datetime(2026, 3, 2, 0, 30, tzinfo=timezone(timedelta(hours=2)))  # 2026-03-01 22:30 UTC
    day3 = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
    store.record_samples(
        [
            result("x", {"f": 0.5}, metadata={"started_at": day1.isoformat()}),
            result("y", {"f": 0.7}, metadata={"started_at": day2.isoformat()}),
            result("z", {"f": "error"}, metadata={"started_at": day3.isoformat().replace("+00:00", "Z")}),
        ],
        "langchain",
    )
    assert store.metric_trend("f", by="day", kind="inline") == [
        ("2026-03-01", pytest.approx(0.6), 2, 0),
        ("2026-03-03", None, 0, 1),
    ]
    assert store.metric_trend("f", by="day", source="llamaindex") == []
    with pytest.raises(ValueError, match="by must be"):
        store.metric_trend("f", by="week")


def test_samples_worst_first_with_filters(db_url):
    store = Store(db_url)
    first = store.record_run(
        rm.EvaluationResult(
            [
                result("ok", {"f": 0.9, "g": 0.95}),
                result("low", {"f": 0.3, "g": 0.9}),
                result("err", {"f": "error", "g": 0.99}),
                result("na", {"f": None, "g": 0.7}),
                result("mid", {"f": 0.6, "g": 0.1}),
            ],
            ["f", "g"],
        ),
        tags=["batch-1"],
    )
    second = store.record_run(rm.EvaluationResult([result("new", {"f": 0.5})], ["f"]), tags=["Batch-1"])

    def ids(rows):
        return [r.result.sample.id for r in rows]

    assert ids(store.samples(run_id=first, metric="f")) == ["err", "low", "mid", "ok", "na"]
    assert ids(store.samples(metric="f")) == ["err", "low", "new", "mid", "ok", "na"]
    assert ids(store.samples(run_id=first, metric="f", limit=2)) == ["err", "low"]
    assert ids(store.samples(run_id=first, metric="g")) == ["mid", "na", "low", "ok", "err"]
    # without a metric: errors first, then by each sample's worst value
    assert ids(store.samples(run_id=first)) == ["err", "mid", "low", "na", "ok"]
    assert ids(store.samples(run_id=first, metric="f", label="warn")) == ["mid"]
    assert ids(store.samples(run_id=first, label="pass")) == ["err", "low", "ok"]  # any metric passing
    assert ids(store.samples(worst_first=False)) == ["new", "mid", "na", "err", "low", "ok"]
    assert ids(store.samples(tag="batch-1", worst_first=False)) == ["mid", "na", "err", "low", "ok"]  # case-sensitive
    assert ids(store.samples(tag="Batch-1")) == ["new"] and store.samples(tag="batch") == []
    row = store.samples(run_id=second)[0]
    assert row.run_id == second and row.tags == ["Batch-1"] and row.result == result("new", {"f": 0.5})
    with pytest.raises(ValueError, match="label must be"):
        store.samples(label="error")


def test_inline_samples_go_to_one_run_per_source_and_process(db_url):
    store = Store(db_url)
    batch1 = [
        result("a", {"f": 0.5}, metadata={"latency": {"total_s": 2.5}}, usage=Usage(calls=2, cost_usd=0.01)),
        result("b", {"f": 1.0}, metadata={"latency_s": 0.4, "tags": ["vip"]}),
    ]
    batch2 = [result("c", {"f": 0.25, "g": 1.0}, usage=Usage(calls=1, prompt_tokens=10))]
    run_id = store.record_samples(batch1, "langchain", tags=["prod"], thresholds={"f": (0.8, 0.5)})
    assert store.record_samples(batch2, "langchain", judge="ignored: the run has a judge") == run_id
    assert store.record_samples([], "langchain") is None
    other = store.record_samples([result("d", {"f": 0.9})], "llamaindex")
    assert other != run_id
    assert Store(db_url).record_samples([result("e", {"f": 0.1})], "langchain") == run_id  # same process, same run
    info = store.run_info(run_id)
    assert (info.kind, info.source, info.samples, info.judge) == ("inline", "langchain", 4, "offline")
    assert info.process.split(":")[1] == str(os.getpid())
    assert info.metrics == ["f", "g"] and info.thresholds == {"f": (0.8, 0.5)}
    assert info.usage == Usage(calls=3, prompt_tokens=10, cost_usd=0.01)
    stored = {r.result.sample.id: r for r in store.samples(run_id=run_id)}
    assert stored["a"].latency_s == 2.5 and stored["b"].latency_s == 0.4 and stored["c"].latency_s is None
    assert stored["a"].tags == ["prod"] and stored["b"].tags == ["prod", "vip"]
    assert [r.result for r in stored.values()] == [stored[k].result for k in stored]
    assert store.run(run_id).results == batch1 + batch2 + [result("e", {"f": 0.1})]


def test_inline_writes_from_many_threads_lose_nothing(db_url):
    store = Store(db_url)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(10):
                store.record_samples([result(f"t{t}-{i}-{j}", {"f": j / 4}) for j in range(3)], "otel")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    (run,) = store.runs(kind="inline")
    assert run.samples == 240
    assert len({r.result.sample.id for r in store.samples(run_id=run.id, limit=None)}) == 240
    assert store.metric_trend("f") == [(run.id, pytest.approx(0.25), 240, 0)]


def test_text_and_json_columns_hold_what_they_can(db_url):
    store = Store(db_url)
    details = {
        "nan": math.nan,
        "inf": [math.inf, -math.inf],
        "tuple": (1, 2),
        "set": {3},
        "np": np.array([0.5, 1.5]),
        "np_scalar": np.float32(0.25),
        (1, 2): "tuple key",
        7: "int key",
        "obj": datetime(2026, 1, 1),
    }
    sample = rm.Sample("q\x00?", ["c\x00"], answer="a\x00b", id="nul")
    details["quote"] = "broken \ud83d escape"  # a lone surrogate, as a judge's bad JSON escape decodes
    r = rm.SampleResult(
        sample,
        {
            "f": rm.Score("f", 0.5, "why \udcff", details, label="warn"),
            "g": rm.Score("g", None, error="failed: \ud800"),
        },
    )
    run_id = store.record_run(rm.EvaluationResult([r], ["f", "g"]), dataset="data-\udcff.jsonl")
    back = store.run(run_id)[0]
    assert back.scores["f"].details == {
        "nan": None,
        "inf": [None, None],
        "tuple": [1, 2],
        "set": [3],
        "np": [0.5, 1.5],
        "np_scalar": 0.25,
        "(1, 2)": "tuple key",
        "7": "int key",
        "obj": "2026-01-01T00:00:00",  # a date as ISO text (ragmeter.fileio.json_safe)
        "quote": "broken \ufffd escape",
    }
    assert (back.scores["f"].explanation, back.scores["g"].error) == ("why \ufffd", "failed: \ufffd")
    assert store.run_info(run_id).dataset == "data-\ufffd.jsonl"
    assert back.sample.contexts[0].text == "c\x00"  # JSON keeps NUL everywhere
    nul = "\x00" if store.engine.dialect.name == "sqlite" else "\ufffd"  # PostgreSQL text cannot hold NUL
    assert (back.sample.question, back.sample.answer) == (f"q{nul}?", f"a{nul}b")


def test_app_version_and_commit_come_from_the_environment(monkeypatch):
    assert environment_info() == {"app_version": None, "git_commit": None}
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=rag, service.version=1.2.3")
    monkeypatch.setenv("CI_COMMIT_SHA", "abc123")
    assert environment_info() == {"app_version": "1.2.3", "git_commit": "abc123"}
    monkeypatch.setenv("RAGMETER_APP_VERSION", "2.0")
    monkeypatch.setenv("RAGMETER_GIT_COMMIT", "  ")  # blank: ignored
    assert environment_info() == {"app_version": "2.0", "git_commit": "abc123"}


def test_where_the_database_is(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert database_url().database == str(tmp_path / "ragmeter.db")
    monkeypatch.setenv("RAGMETER_DB", str(tmp_path / "from-env.db"))
    assert database_url().database == str(tmp_path / "from-env.db")
    assert database_url(tmp_path / "x" / "given.db").database == str(tmp_path / "x" / "given.db")
    assert database_url("postgresql://u:secret@db:5432/rag").drivername == "postgresql+psycopg"
    assert database_url("postgres://u@db/rag").drivername == "postgresql+psycopg"
    assert database_url("sqlite:///rel.db").database == "rel.db"
    with pytest.raises(ValueError, match=r"unsupported database URL 'mysql://u:\[REDACTED\]@h/db'"):
        database_url("mysql://u:pw@h/db")
    with Store(tmp_path / "new" / "dir" / "h.db") as store:  # parent directories are created
        assert store.runs() == []
    assert (tmp_path / "new" / "dir" / "h.db").exists()
    assert repr(Store(tmp_path / "r.db")) == f"Store('sqlite:///{tmp_path / 'r.db'}')"


def test_a_sqlite_writer_waits_for_another_writers_lock(tmp_path):
    """A writer holding the lock makes record_run wait (busy timeout), not fail or lose the run."""
    path = tmp_path / "locked.db"
    store = Store(path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, other.execute, args=("COMMIT",))
    release.start()
    run_id = store.record_run(rm.EvaluationResult([result("a", {"f": 0.5})], ["f"]))
    release.join()
    other.close()
    assert store.run(run_id)[0] == result("a", {"f": 0.5})


def test_write_retries_a_locked_database(tmp_path):
    store = Store(tmp_path / "r.db")
    calls = []

    def fn(conn):
        calls.append(1)
        if len(calls) < 3:
            raise sa.exc.OperationalError("INSERT ...", {}, Exception("database is locked"))
        return conn.execute(sa.text("SELECT 1")).scalar()

    assert write(store.engine, fn) == 1 and len(calls) == 3
    with pytest.raises(StoreError, match=r"^store sqlite:///.*r\.db: no such table: nowhere$") as caught:
        write(store.engine, lambda conn: conn.execute(sa.text("SELECT * FROM nowhere")))
    assert not caught.value.transient and isinstance(caught.value.__cause__, sa.exc.OperationalError)


def test_a_forked_child_writes_its_own_inline_run(db_url):
    """After fork the child gets fresh connections and its own inline run (it is another process)."""
    store = Store(db_url)
    parent_run = store.record_samples([result("parent", {"f": 0.5})], "langchain")
    pid = os.fork()
    if pid == 0:  # child: exit code 0 only when its samples were stored in a new run
        code = 1
        try:
            child_run = store.record_samples([result("child", {"f": 0.5})], "langchain")
            code = 0 if child_run != parent_run and store.run_info(child_run).samples == 1 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.record_samples([result("parent-2", {"f": 0.5})], "langchain") == parent_run  # parent unaffected
    assert sorted(r.samples for r in store.runs(kind="inline")) == [1, 2]


def test_a_run_recorded_as_it_goes_is_finished_once(db_url):
    """begin_run / add_results / finish_run (evaluate --db): the run is incomplete until finished;
    finishing adds exactly what the batches left out (missing samples, missing scores) and marks
    it complete; finishing again changes nothing; find_run finds it by key or by dataset."""
    store = Store(db_url)
    run_id = store.begin_run("docs", judge="offline", metrics=["f"], thresholds={"f": (0.8, 0.5)}, key="k-1")
    store.add_results(run_id, [result("a", {"f": 0.9}, usage=Usage(calls=2)), result("b", {"f": 0.4})])
    info = store.run_info(run_id)
    assert (info.complete, info.samples, info.usage.calls, info.metrics) == (False, 2, 2, ["f"])
    assert store.find_run(key="k-1") == info and store.find_run(key="k-2") is None
    assert store.find_run(dataset="docs") == info and store.sample_ids(run_id) == {"a", "b"}
    final = [
        result("a", {"f": 0.9, "g": 1.0}, usage=Usage(calls=2)),
        result("b", {"f": 0.4}),
        result("c", {"f": "error"}, usage=Usage(calls=1)),
    ]
    done = rm.EvaluationResult(
        final, ["f", "g"], judge="offline", duration_s=3.5, thresholds={"f": (0.8, 0.5), "g": (0.5, 0.3)}
    )
    assert store.finish_run(run_id, done) == 1
    assert store.finish_run(run_id, done) == 0
    info = store.run_info(run_id)
    assert (info.complete, info.samples, info.usage.calls, info.metrics, info.duration_s) == (
        True,
        3,
        3,
        ["f", "g"],
        3.5,
    )
    assert store.run(run_id)[0] == final[0] and len(store.run(run_id)) == 3  # the score added to "a" too
    assert [p.count for p in store.metric_trend("f")] == [2] and [p.errors for p in store.metric_trend("f")] == [1]
    assert store.find_run(key="k-1").complete
    with pytest.raises(StoreError, match="no run 99"):
        store.add_results(99, [result("x", {"f": 0.1})])
    store.close()
