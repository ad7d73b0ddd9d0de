"""CaptureRecorder on its own (no framework): keep, count, score inline or offline, export, and
write results through an injected trace writer that can never break the caller."""

import json
import logging
import subprocess
import sys
import textwrap
import threading

import pytest

import ragmeter as rm
from ragmeter.capture import STATS_KEYS, CaptureRecorder, scorable
from ragmeter.data import Sample, Score
from ragmeter.inline import BackgroundScorer, sampled
from ragmeter.metrics.base import Metric


class AnswerLength(Metric):
    """Answer length / 10, capped at 1: a metric with no judge. Waits on ``gate`` when given."""

    name = "answer_length"
    uses_judge = False
    requires = ("answer",)

    def __init__(self, gate: threading.Event | None = None, **levels):
        super().__init__(**levels)
        self.gate = gate

    async def compute(self, sample, ctx):
        import asyncio

        while self.gate is not None and not self.gate.is_set():
            await asyncio.sleep(0.005)
        return Score(self.name, min(1.0, len(sample.answer) / 10), explanation="length")


def sample(i: int, status: str | None = "ok", contexts=None, answer: str = "hello") -> Sample:
    metadata = {"started_at": f"2025-01-01T00:00:{i:02d}"}
    if status is not None:
        metadata["status"] = status
    ctx = [f"context {i}"] if contexts is None else contexts
    return Sample(f"question {i}?", ctx, answer=answer if status == "ok" else None, id=f"s{i}", metadata=metadata)


class Writer:
    """A trace writer that records its calls and answers ``outcome`` (or raises it)."""

    def __init__(self, outcome=True):
        self.outcome = outcome
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, result, target):
        with self.lock:
            self.calls.append((result, target))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


# ---------------------------------------------------------------------------- capture


def test_records_and_counts_by_status_and_scores_only_scorable_samples():
    rec = CaptureRecorder([AnswerLength()])
    rec.record(sample(1))
    rec.record(sample(2, "error"))
    rec.record(sample(3, "partial"))
    rec.record(sample(4, contexts=[]))  # ok but nothing retrieved: kept, not scored
    rec.record(sample(5, status=None))  # no status: taken as ok
    assert rec.flush(10) is True
    stats = rec.stats
    assert (stats["captured"], stats["ok"], stats["errored"], stats["partial"]) == (5, 3, 1, 1)
    assert stats["skipped_no_contexts"] == 1
    assert (stats["submitted"], stats["scored"], stats["capture_errors"]) == (2, 2, 0)
    assert [s.id for s in rec.samples] == ["s1", "s2", "s3", "s4", "s5"]
    assert rec.samples[4].metadata["status"] == "ok"
    assert [scorable(s) for s in rec.samples] == [True, False, False, False, True]
    results = rec.results
    assert [r.sample.id for r in results] == ["s1", "s5"]  # start order, whatever the finish order
    assert results.metrics == ["answer_length"] and results.judge == "code"
    assert results[0].scores["answer_length"].value == 0.5
    assert rec.shutdown(10) is True


def test_stats_keys_counters_and_count():
    rec = CaptureRecorder([AnswerLength()], mode="offline", counters=("skipped_no_retriever", "captured"))
    rec.count("skipped_no_retriever")
    rec.count("capture_errors", 2)
    stats = rec.stats
    want = list(STATS_KEYS[:5]) + ["skipped_no_retriever"] + list(STATS_KEYS[5:]) + list(BackgroundScorer.STATS_KEYS)
    assert list(stats) == want
    assert stats["skipped_no_retriever"] == 1 and stats["capture_errors"] == 2
    assert all(v == 0 for k, v in stats.items() if k not in ("skipped_no_retriever", "capture_errors"))


def test_invalid_arguments():
    with pytest.raises(ValueError, match="mode"):
        CaptureRecorder([AnswerLength()], mode="sometimes")
    with pytest.raises(ValueError, match="keep"):
        CaptureRecorder([AnswerLength()], keep=0)
    with pytest.raises(ValueError):  # offline: unknown metric names fail at construction
        CaptureRecorder(["no_such_metric"], mode="offline")
    with pytest.raises(RuntimeError):
        CaptureRecorder([AnswerLength()]).evaluate()


def test_keep_bounds_samples_and_results():
    rec = CaptureRecorder([AnswerLength()], keep=3)
    for i in range(7):
        rec.record(sample(i))
    rec.flush(10)
    assert [s.id for s in rec.samples] == ["s4", "s5", "s6"]
    assert len(rec.results) == 3
    assert rec.stats["captured"] == 7 and rec.stats["scored"] == 7  # counters are not bounded
    offline = CaptureRecorder([AnswerLength()], mode="offline", keep=2)
    for i in range(5):
        offline.record(sample(i))
    assert len(offline.evaluate()) == 2 and len(offline.results) == 2


def test_inline_options_reach_the_scorer():
    seen = []
    rec = CaptureRecorder(
        [AnswerLength()],
        sample_rate=0.0,
        should_score=lambda s: s.id == "s2" or None,
        on_result=seen.append,
        name="capture-test",
    )
    for i in range(4):
        rec.record(sample(i))
    rec.flush(10)
    assert [r.sample.id for r in seen] == ["s2"]
    assert (rec.stats["forced"], rec.stats["sampled_out"], rec.stats["scored"]) == (1, 3, 1)
    assert rec.scorer is not None and rec.scorer.name == "capture-test"


def test_key_samples_all_records_of_a_key_alike():
    key = next(k for k in (f"trace-{i}" for i in range(100)) if sampled(k, 0.5))
    rec = CaptureRecorder([AnswerLength()], sample_rate=0.5)
    for i in range(20):
        rec.record(sample(i), key=key)
    rec.flush(10)
    assert rec.stats["scored"] == 20 and rec.stats["sampled_out"] == 0


def test_full_backlog_drops_and_counts():
    gate = threading.Event()
    rec = CaptureRecorder([AnswerLength(gate)], max_queue=2, concurrency=1)
    for i in range(5):
        rec.record(sample(i))  # never blocks
    stats = rec.stats
    assert (stats["captured"], stats["queued"], stats["dropped"], stats["pending"]) == (5, 2, 3, 2)
    gate.set()
    rec.flush(10)
    assert rec.stats["scored"] == 2


# ---------------------------------------------------------------------------- offline


def test_export_jsonl_is_readable_by_load_samples(tmp_path):
    rec = CaptureRecorder([AnswerLength()], mode="offline")
    for i, status in enumerate(["ok", "error", "ok", "partial"]):
        rec.record(sample(i, status))
    assert rec.export_jsonl(tmp_path / "ok.jsonl") == 2
    loaded = rm.load_samples(tmp_path / "ok.jsonl")
    assert not loaded.errors and [s.to_dict() for s in loaded] == [rec.samples[0].to_dict(), rec.samples[2].to_dict()]
    assert rec.export_jsonl(tmp_path / "all.jsonl", statuses=("ok", "error", "partial")) == 4
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    assert [json.loads(line)["metadata"]["status"] for line in lines] == ["ok", "error", "ok", "partial"]


def test_offline_evaluate_scores_only_what_is_new():
    rec = CaptureRecorder([AnswerLength()], mode="offline")
    assert rec.flush() is True and rec.shutdown() is True and rec.scorer is None
    rec.record(sample(1))
    rec.record(sample(2, "error"))
    rec.record(sample(3, answer="a longer answer"))
    first = rec.evaluate()
    assert [r.sample.id for r in first] == ["s1", "s3"]
    assert [r.scores["answer_length"].value for r in first] == [0.5, 1.0]
    empty = rec.evaluate()
    assert len(empty) == 0 and empty.metrics == ["answer_length"]  # nothing new since the last call
    rec.record(sample(4))
    assert [r.sample.id for r in rec.evaluate()] == ["s4"]
    assert [r.sample.id for r in rec.results] == ["s1", "s3", "s4"]
    assert rec.stats["scored"] == 3 and rec.stats["submitted"] == 0


def test_offline_evaluate_passes_kwargs_and_levels():
    rec = CaptureRecorder([AnswerLength(threshold=0.9, warn=0.2)], mode="offline")
    rec.record(sample(1))
    result = rec.evaluate(concurrency=1)
    assert result[0].scores["answer_length"].label == "warn"
    assert rec.results.thresholds == {"answer_length": (0.9, 0.2)}


# ---------------------------------------------------------------------------- trace writer


def test_injected_writer_gets_result_and_target_inline_and_offline():
    writer = Writer()
    rec = CaptureRecorder([AnswerLength()], write_trace=writer)
    rec.record(sample(1), target="span-1")
    rec.record(sample(2))  # no target: nothing to write
    rec.record(sample(3, "error"), target="span-3")  # not scored: nothing to write
    rec.flush(10)
    assert [(r.sample.id, t) for r, t in writer.calls] == [("s1", "span-1")]
    assert (rec.stats["trace_writes"], rec.stats["trace_errors"]) == (1, 0)

    offline_writer = Writer()
    offline = CaptureRecorder([AnswerLength()], mode="offline", write_trace=offline_writer)
    offline.record(sample(1), target=("trace", 1))
    offline.record(sample(2))
    offline.evaluate()
    [(result, target)] = offline_writer.calls
    assert result.sample.id == "s1" and target == ("trace", 1) and result is offline.results[0]
    assert offline.stats["trace_writes"] == 1


def test_writer_outcomes_are_counted_and_never_raised(caplog):
    caplog.set_level(logging.DEBUG, logger="ragmeter")  # the guard logs a place's later failures at debug
    outcomes = {"raises": RuntimeError("exporter down"), "fails": False, "nothing": None}
    for mode in ("inline", "offline"):
        recs = {}
        for label, outcome in outcomes.items():
            rec = recs[label] = CaptureRecorder([AnswerLength()], mode=mode, write_trace=Writer(outcome))
            rec.record(sample(1), target="span")
            rec.record(sample(2), target="span")
            if mode == "offline":
                assert len(rec.evaluate()) == 2  # the writer's failure does not lose the results
            rec.flush(10)
            assert len(rec.results) == 2 and rec.stats["scored"] == 2
        assert (recs["raises"].stats["trace_errors"], recs["raises"].stats["trace_writes"]) == (2, 0)
        assert (recs["fails"].stats["trace_errors"], recs["fails"].stats["trace_writes"]) == (2, 0)
        assert (recs["nothing"].stats["trace_errors"], recs["nothing"].stats["trace_writes"]) == (0, 0)
        assert recs["raises"].stats["callback_errors"] == 0  # handled by the recorder, not the scorer
    assert "capture: attach scores to the trace failed" in caplog.text


# ---------------------------------------------------------------------------- import hygiene


@pytest.mark.slow  # starts a Python subprocess
def test_capture_imports_no_framework_and_never_the_tracing_package(tmp_path):
    code = textwrap.dedent("""
        import json, sys
        from ragmeter.capture import CaptureRecorder
        from ragmeter.data import Sample
        rec = CaptureRecorder(["mrr"], mode="offline", write_trace=lambda r, t: True)
        rec.record(Sample("q?", [{"id": "a", "text": "t"}], answer="a", relevant_ids=["a"], metadata={"status": "ok"}),
                   target="span")
        rec.evaluate()
        assert rec.stats["trace_writes"] == 1
        print(json.dumps(sorted(sys.modules)))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    mods = json.loads(out.stdout.strip().splitlines()[-1])
    roots = {m.split(".")[0] for m in mods}
    assert not roots & {"langchain", "langchain_core", "llama_index", "opentelemetry"}
    assert not [m for m in mods if m.startswith(("ragmeter.tracing", "ragmeter.integrations"))]
