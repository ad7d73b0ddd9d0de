"""Inline capture under faults (issue 13): a shutdown that gives up, an unusable judge, a failure
repeated for every sample, content capture switched off, secrets in error texts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from helpers import TESTS
from helpers.servers import FakeLLMServer, hang
from ragmeter.data import Sample

TESTS_DIR = str(TESTS)

# ---------------------------------------------------------------------------- shutdown gives up

HANGING_JUDGE = """
import asyncio, json, sys, time
from ragmeter.data import Sample
from ragmeter.judges.base import Judge

class Hanging(Judge):
    name = "hanging"
    async def run(self, task, inputs):
        await asyncio.Event().wait()  # a judge call that never returns
"""

SHUTDOWN_SCRIPTS = {
    "scorer": HANGING_JUDGE
    + """
from ragmeter.inline import BackgroundScorer
owner = BackgroundScorer(["faithfulness"], Hanging(), concurrency=2)
for i in range(5):
    owner.submit(Sample(f"q{i}?", ["Some context."], answer="An answer.", id=f"s{i}"))
done = owner.shutdown(timeout=1.0)
stats = owner.stats
""",
    "langchain": HANGING_JUDGE
    + """
sys.path.insert(0, TESTS)
from helpers.tracing import langchain_chain
from ragmeter.integrations.langchain import RagmeterCallbackHandler
owner = RagmeterCallbackHandler(["faithfulness"], Hanging(), concurrency=2)
chain = langchain_chain()
for i in range(5):
    chain.invoke(f"What is the capital of France {i}?", config={"callbacks": [owner]})
done = owner.shutdown(timeout=1.0)
stats = owner.stats
""",
    "otel": """
import json, sys, time
sys.path.insert(0, TESTS)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from helpers.tracing import oi_rag
from ragmeter.judges.openai import OpenAIJudge
from ragmeter.tracing import RagmeterSpanProcessor
judge = OpenAIJudge("gpt-4o-mini", base_url=URL, api_key="test", cache=False, timeout=120)
provider = TracerProvider()
proc = RagmeterSpanProcessor(["faithfulness"], judge, tracer_provider=provider, shutdown_timeout=1.0, concurrency=2)
provider.add_span_processor(proc)
provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
for i in range(5):
    oi_rag(provider, question=f"What is the capital of France {i}?")
proc.force_flush(300)  # hands the calls to the scorer (milliseconds: the judge hangs, so this times out)
provider.shutdown()
done = None
stats = proc.stats
""",
}


@pytest.mark.slow  # starts a Python subprocess that waits for a timed-out shutdown
@pytest.mark.parametrize("path", sorted(SHUTDOWN_SCRIPTS))
def test_a_timed_out_shutdown_drops_what_is_pending_and_exit_does_not_wait(path):
    with FakeLLMServer(lambda req: hang(60)) as server:
        code = (
            f"TESTS = {TESTS_DIR!r}\nURL = {server.openai_url!r}\n"
            + textwrap.dedent(SHUTDOWN_SCRIPTS[path])
            + ("\nprint(json.dumps({'done': done, 'stats': stats}), flush=True)\n")
        )
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": TESTS_DIR},
        )
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["done"] in (False, None)  # the judge hangs: shutdown gave up at its timeout ...
    stats = out["stats"]  # ... and dropped the 5 samples it held, none left for exit to wait for
    assert stats["pending"] == 0 and stats["dropped"] == 5 and stats["scored"] == 0, (stats, proc.stderr)
    assert "Task was destroyed" not in proc.stderr
    # said once: interpreter exit, which would wait exit_timeout (30 s) and say it too, did not wait again
    assert proc.stderr.count("gave up") == 1, proc.stderr


@pytest.mark.slow  # starts a Python subprocess
def test_interpreter_exit_gives_up_after_exit_timeout_once():
    code = HANGING_JUDGE + textwrap.dedent("""
        from ragmeter.inline import BackgroundScorer
        scorer = BackgroundScorer(["faithfulness"], Hanging(), exit_timeout=1.0)
        for i in range(3):
            scorer.submit(Sample(f"q{i}?", ["Some context."], answer="An answer.", id=f"s{i}"))
        # no shutdown(): the exit hook waits exit_timeout, then gives up
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Task was destroyed" not in proc.stderr
    assert proc.stderr.count("gave up after 1 s: 3 sample(s)") == 1, proc.stderr  # waited once, gave up once


# ---------------------------------------------------------------------------- an unusable judge


def _creators():
    from ragmeter.inline import BackgroundScorer
    from ragmeter.integrations import langchain as rml
    from ragmeter.integrations.langchain import RagmeterCallbackHandler
    from ragmeter.integrations.llamaindex import RagmeterInstrumentation
    from ragmeter.tracing import RagmeterSpanProcessor

    return {
        "scorer": BackgroundScorer,
        "langchain handler": RagmeterCallbackHandler,
        "instrument()": rml.instrument,
        "llamaindex": RagmeterInstrumentation,
        "span processor": RagmeterSpanProcessor,
    }


@pytest.mark.parametrize("where", ["scorer", "langchain handler", "instrument()", "llamaindex", "span processor"])
@pytest.mark.parametrize("judge", ["openai:gpt-4o-mini", None])
def test_an_unusable_judge_is_an_error_at_creation(where, judge, monkeypatch):
    from ragmeter.integrations.langchain.handler import INSTALLED

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    if judge is None:  # the default judge, chosen by the environment
        monkeypatch.setenv("RAGMETER_JUDGE", "openai:gpt-4o-mini")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        _creators()[where](["faithfulness"], judge)
    assert INSTALLED.handler is None  # instrument() installed nothing


def test_a_usable_judge_is_resolved_once_at_creation():
    from ragmeter.inline import BackgroundScorer
    from ragmeter.judges.offline import OfflineJudge

    scorer = BackgroundScorer(["faithfulness"], "offline")
    assert isinstance(scorer.judge, OfflineJudge)  # resolved at creation, not on the first sample
    assert BackgroundScorer(["mrr"], None).judge is None  # no metric needs a judge: none resolved


# ---------------------------------------------------------------------------- a failure on every sample


@pytest.mark.slow  # 200 runs, 400 judge requests
def test_a_failure_repeated_on_every_sample_is_logged_once_with_a_count(caplog):
    import logging

    from helpers.servers import error
    from helpers.tracing import langchain_chain
    from ragmeter.integrations.langchain import RagmeterCallbackHandler
    from ragmeter.judges.openai import OpenAIJudge

    chain = langchain_chain()
    key = "sk-test-abcdefghijklmnopqrstuvwx"
    with (
        FakeLLMServer(lambda req: error(401, message=f"invalid api key {key}")) as server,
        caplog.at_level(logging.INFO, logger="ragmeter"),
    ):
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key=key, cache=False, max_retries=0)
        handler = RagmeterCallbackHandler(["faithfulness", "answer_relevancy"], judge)
        for i in range(200):
            chain.invoke(f"What is the capital of France {i}?", config={"callbacks": [handler]})
        assert handler.shutdown(60)
    stats = handler.stats
    assert stats["scored"] == 200 and stats["score_errors"] == 200
    lines = [r for r in caplog.records if r.name.startswith("ragmeter")]
    assert len(lines) == 2, [r.getMessage() for r in lines]  # the first failure, then the count at shutdown
    first, summary = (r.getMessage() for r in lines)
    assert "faithfulness" in first and "401" in first
    assert "200 of 200" in summary and "faithfulness" in summary and "answer_relevancy" in summary
    assert key not in caplog.text  # the echoed key is redacted


# ---------------------------------------------------------------------------- the request thread


def test_the_run_tree_is_read_off_the_request_thread():
    import threading

    from helpers.tracing import langchain_chain
    from ragmeter.integrations.langchain import RagmeterCallbackHandler
    from ragmeter.integrations.langchain.runs import sample_from_run

    gate, threads = threading.Event(), []
    handler = RagmeterCallbackHandler(["mrr"], mode="offline")

    def held(run, target):  # building the sample waits for the gate
        threads.append(threading.current_thread())
        gate.wait(10)
        return sample_from_run(run, target)

    handler._sample_from_run = held
    chain = langchain_chain()
    answers = [chain.invoke(f"What is the capital of France {i}?", config={"callbacks": [handler]}) for i in range(3)]
    assert answers == [chain.invoke("What is the capital of France?")] * 3
    assert len(threads) <= 1  # 3 answers while at most the first sample is being built (held by the gate)
    gate.set()
    samples = handler.samples  # waits for the capture thread
    assert [s.question for s in samples] == [f"What is the capital of France {i}?" for i in range(3)]  # in order
    assert threads and all(t is not threading.main_thread() for t in threads)


def test_deferred_capture_is_bounded_and_counted(monkeypatch):
    import threading

    import ragmeter.capture as capture
    from ragmeter.capture import CaptureRecorder

    monkeypatch.setattr(capture, "MAX_DEFERRED", 5)
    rec = CaptureRecorder(["mrr"], mode="offline")
    gate = threading.Event()
    rec.defer(gate.wait)  # holds the capture thread
    for i in range(7):
        rec.defer(lambda i=i: rec.record(Sample(f"q{i}?", ["c"], answer="a", id=f"s{i}")))
    gate.set()
    stats = rec.stats
    assert stats["captured"] == 4 and stats["capture_dropped"] == 3
    assert [s.id for s in rec.samples] == ["s0", "s1", "s2", "s3"]


def test_runs_captured_around_a_shutdown_are_all_recorded():
    import threading

    from ragmeter.capture import CaptureRecorder

    rec = CaptureRecorder(["mrr"])
    builders = set()

    def build(i):
        builders.add(threading.current_thread().name)
        rec.record(Sample(f"q{i}?", [{"id": "d1", "text": "c"}], answer="a", relevant_ids=["d1"], id=f"s{i}"))

    for i in range(50):
        rec.defer(lambda i=i: build(i))
    assert rec.shutdown(30)
    for i in range(50, 60):  # after the shutdown: recorded on the recorder's own thread, not scored
        rec.defer(lambda i=i: build(i))
    assert [s.id for s in rec.samples] == [f"s{i}" for i in range(60)]
    stats = rec.stats
    assert stats["scored"] == 50 and stats["rejected_closed"] == 10 and stats["captured"] == 60
    assert builders == {"ragmeter-capture", "ragmeter-capture-build"}  # the scorer's worker, then its own
