"""BackgroundScorer: inline scoring that never blocks, never raises, counts drops, flushes."""

import subprocess
import sys
import textwrap
import threading

import pytest

from ragmeter.data import Sample, Score
from ragmeter.inline import BackgroundScorer, sampled
from ragmeter.metrics.base import Metric


class SlowLength(Metric):
    """Answer length / 10 (capped at 1), after waiting on an event (to hold the worker busy)."""

    name = "slow_length"
    uses_judge = False
    requires = ("answer",)

    def __init__(self, gate: threading.Event | None = None, delay: float = 0.0):
        super().__init__()
        self.gate, self.delay = gate, delay

    async def compute(self, sample, ctx):
        import asyncio

        while self.gate is not None and not self.gate.is_set():
            await asyncio.sleep(0.005)
        await asyncio.sleep(self.delay)
        return Score(self.name, min(1.0, len(sample.answer) / 10), explanation="length")


def sample(i: int, answer: str = "hello") -> Sample:
    return Sample(f"question {i}?", [f"context {i}"], answer=answer, id=f"s{i}")


def test_submit_returns_immediately_and_flush_waits():
    gate = threading.Event()
    scorer = BackgroundScorer([SlowLength(gate)])
    assert all(scorer.submit(sample(i)) for i in range(20))  # returned while the gate holds all scoring:
    assert scorer.stats["pending"] == 20 and scorer.stats["scored"] == 0  # so submit did not wait for it
    assert scorer.flush(timeout=0.05) is False
    gate.set()
    assert scorer.flush(timeout=10) is True
    assert scorer.stats["scored"] == 20
    assert sorted(r.sample.id for r in scorer.results) == sorted(f"s{i}" for i in range(20))
    assert all(r.scores["slow_length"].value == 0.5 for r in scorer.results)
    scorer.shutdown()


def test_full_backlog_drops_and_counts():
    gate = threading.Event()
    scorer = BackgroundScorer([SlowLength(gate)], max_queue=3)
    accepted = [scorer.submit(sample(i)) for i in range(10)]
    assert accepted == [True] * 3 + [False] * 7
    gate.set()
    scorer.flush(10)
    stats = scorer.stats
    assert (stats["submitted"], stats["queued"], stats["dropped"], stats["scored"]) == (10, 3, 7, 3)
    scorer.shutdown()


def test_sampling_and_predicate():
    keys = [f"k{i}" for i in range(2000)]
    assert 0.2 < sum(sampled(k, 0.3) for k in keys) / len(keys) < 0.4
    assert [sampled(k, 0.3) for k in keys] == [sampled(k, 0.3) for k in keys]  # deterministic
    scorer = BackgroundScorer([SlowLength()], sample_rate=0.0, should_score=lambda s: "urgent" in s.question)
    assert scorer.submit(Sample("urgent question?", ["c"], answer="a"))
    assert not scorer.submit(Sample("ordinary?", ["c"], answer="a"))
    scorer.flush(10)
    s = scorer.stats
    assert (s["scored"], s["forced"], s["sampled_out"]) == (1, 1, 1)
    scorer.shutdown()
    # False from the predicate does not veto the sample rate
    everything = BackgroundScorer([SlowLength()], sample_rate=1.0, should_score=lambda s: False)
    assert everything.submit(Sample("ordinary?", ["c"], answer="a"))
    everything.flush(10)
    assert everything.stats["scored"] == 1 and everything.stats["forced"] == 0
    everything.shutdown()


def test_default_metrics_add_retrieval_metrics_for_samples_with_relevant_ids():
    from ragmeter.judges.offline import OfflineJudge

    scorer = BackgroundScorer(None, OfflineJudge(embeddings=False))
    scorer.submit(
        Sample(
            "Who wrote Dune?",
            [{"id": "d1", "text": "Dune is by Frank Herbert."}],
            answer="Frank Herbert.",
            relevant_ids=["d1"],
            id="with",
        )
    )
    scorer.submit(Sample("Who wrote Dune?", ["Dune is by Frank Herbert."], answer="Frank Herbert.", id="without"))
    assert scorer.flush(30)
    scorer.shutdown()
    names = {r.sample.id: set(r.scores) for r in scorer.results}
    assert {"faithfulness", "mrr", "ndcg@10"} <= names["with"]
    assert "faithfulness" in names["without"] and "mrr" not in names["without"]


def test_callbacks_and_failures_never_propagate():
    seen = []

    def bad_callback(result):
        seen.append(result.sample.id)
        raise RuntimeError("user callback bug")

    def bad_predicate(s):
        raise ValueError("predicate bug")

    class Exploding(Metric):
        name = "exploding"
        uses_judge = False

        async def compute(self, s, ctx):
            raise ZeroDivisionError("metric bug")

    scorer = BackgroundScorer([Exploding()], on_result=bad_callback, should_score=bad_predicate)
    assert scorer.submit(sample(1))
    assert scorer.flush(10)
    assert seen == ["s1"]
    assert scorer.stats["callback_errors"] == 1
    score = scorer.results[0].scores["exploding"]
    assert score.value is None and "metric bug" in score.error
    scorer.shutdown()
    assert scorer.submit(sample(2)) is False and scorer.stats["rejected_closed"] == 1


def test_submit_from_many_threads():
    scorer = BackgroundScorer([SlowLength()], max_queue=10_000)
    threads = [
        threading.Thread(target=lambda j=j: [scorer.submit(sample(j * 100 + i)) for i in range(50)]) for j in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert scorer.flush(20)
    assert scorer.stats["scored"] == 400 and len({r.sample.id for r in scorer.results}) == 400
    scorer.shutdown()


@pytest.mark.slow  # starts a Python subprocess
def test_interpreter_exit_waits_for_pending(tmp_path):
    out = tmp_path / "scored.txt"
    code = textwrap.dedent(f"""
        import asyncio
        from ragmeter.data import Sample, Score
        from ragmeter.inline import BackgroundScorer
        from ragmeter.metrics.base import Metric

        class Slow(Metric):
            name = "slow"; uses_judge = False
            async def compute(self, s, ctx):
                await asyncio.to_thread(lambda: __import__("time").sleep(0.05))  # needs the thread pool at exit
                return Score(self.name, 1.0, explanation="ok")

        def record(result):
            with open({str(out)!r}, "a") as fh:
                fh.write(result.sample.id + "\\n")

        scorer = BackgroundScorer([Slow()], on_result=record, concurrency=2)
        for i in range(10):
            scorer.submit(Sample(f"q{{i}}?", ["c"], answer="a", id=f"s{{i}}"))
        # no flush: the interpreter exit hook must wait for the 10 pending samples
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert sorted(out.read_text().split()) == sorted(f"s{i}" for i in range(10))


def test_scoring_runs_with_opentelemetry_instrumentation_suppressed():
    from opentelemetry import context

    seen = []

    class Probe(Metric):
        name = "probe"
        uses_judge = False

        async def compute(self, s, ctx):
            seen.append(
                (
                    context.get_value(context._SUPPRESS_INSTRUMENTATION_KEY),
                    context.get_value("suppress_instrumentation"),
                )
            )
            return Score(self.name, 1.0, explanation="ok")

    scorer = BackgroundScorer([Probe()])
    scorer.submit(sample(1))
    assert scorer.flush(10)
    scorer.shutdown()
    assert seen == [(True, True)]
    assert context.get_value(context._SUPPRESS_INSTRUMENTATION_KEY) is None  # the caller's context is untouched
