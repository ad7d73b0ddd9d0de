"""RayExecutor on a real local Ray runtime (2 CPUs, started once for the module): the real OpenAI SDK
in the workers against the fake server of ``helpers.servers``.

Checked: judges, embedders and metrics pickle (no Ray needed); then, on Ray, the same scores and
judge calls as the asyncio executor, the judge cache file shared with the workers, a
requests-per-minute limit that holds for all workers together (request times taken at the
server), a worker killed mid-run (its samples sent again), and a streamed run that is interrupted
and resumed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import signal
import time
from pathlib import Path

import pytest

import ragmeter as rm
from helpers import ROOT, cancel_when_lines
from helpers.servers import FakeLLMServer
from ragmeter.cli import build_parser, executor_from
from ragmeter.executors import RayExecutor
from ragmeter.judges import AnthropicJudge, EnsembleJudge, OfflineJudge, OpenAIJudge
from ragmeter.metrics import resolve_metrics
from ragmeter.metrics.scoring import sample_scorer

METRICS = ["faithfulness", "context_precision", "context_relevance"]
EXAMPLES = ROOT / "examples" / "rag_samples.jsonl"
KEY = "sk-test-not-a-real-key"


@pytest.fixture(scope="module")
def ray_runtime():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def records(n: int) -> list[dict]:
    """``n`` example records with distinct ids and questions."""
    base = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    out = []
    for i in range(n):
        r = dict(base[i % len(base)])
        r["id"], r["question"] = f"{r['id']}-{i}", f"{r['question']} (#{i})"
        out.append(r)
    return out


def values(result) -> dict:
    """sample id -> metric -> (value, label, error): what must not depend on the executor."""
    return {r.sample.id: {m: (s.value, s.label, s.error) for m, s in r.scores.items()} for r in result}


def judge(server, **kw) -> OpenAIJudge:
    return OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key=KEY, **kw)


def test_judges_embedders_and_metrics_pickle_and_a_copy_scores_the_same(tmp_path):
    data = records(2)
    with FakeLLMServer() as server:
        original = judge(server, cache=tmp_path / "c.sqlite", rpm=600)
        fn = sample_scorer(resolve_metrics(["faithfulness", "answer_relevancy", "mrr"]), original)
        copy = pickle.loads(pickle.dumps(fn))
        assert copy.keywords["judge"].cache is original.cache  # the same file, the instance of this process
        assert copy.keywords["judge"].dispatcher.limiter.rpm == 600  # a fresh limit (not shared: no Ray here)
        before = rm.evaluate(data, fn.keywords["metrics"], judge(server, cache=False), progress=False)
        after = rm.evaluate(data, copy.keywords["metrics"], copy.keywords["judge"], progress=False)
        assert values(after) == values(before)
    for other in (
        OfflineJudge(),
        AnthropicJudge(base_url="http://127.0.0.1:9", api_key=KEY),
        EnsembleJudge([OfflineJudge(), original]),
    ):
        assert repr(pickle.loads(pickle.dumps(other))) == repr(other)
    shown = [original, original.transport, original.transport._factory, original.embedder._factory, original.cache]
    assert not [x for x in shown if KEY in repr(x)]


def test_cli_names_the_ray_executor():
    args = build_parser().parse_args(
        ["evaluate", "x.jsonl", "--executor", "ray", "--ray-address", "auto", "--workers", "3", "--concurrency", "16"]
    )
    ex = executor_from(args)
    assert isinstance(ex, RayExecutor) and (ex.address, ex.workers, ex.concurrency) == ("auto", 3, 16)
    assert executor_from(build_parser().parse_args(["evaluate", "x.jsonl"])) is None


@pytest.mark.slow
@pytest.mark.heavy  # Ray: run in .ci/run's step of its own (python -m pytest -m heavy)
def test_same_scores_and_calls_as_asyncio_and_the_cache_file_is_shared(ray_runtime, tmp_path):
    data = records(8)
    with FakeLLMServer() as server:
        local = rm.evaluate(data, METRICS, judge(server, cache=False), progress=False)
        calls = len(server.chat_requests)
        server.reset()
        cache = tmp_path / "judge-cache.sqlite"
        distributed = rm.evaluate(
            data, METRICS, judge(server, cache=cache), progress=False, executor=RayExecutor(workers=2, concurrency=4)
        )
        assert [r.sample.id for r in distributed] == [r.sample.id for r in local]
        assert values(distributed) == values(local)
        assert len(server.chat_requests) == calls == local.usage.calls == distributed.usage.calls
        server.reset()
        again = rm.evaluate(data, METRICS, judge(server, cache=cache), progress=False)  # answers the workers stored
        assert values(again) == values(local)
        assert len(server.chat_requests) == 0 and again.usage.cached == calls
    # older Ray releases silence every existing logger when imported: ragmeter's are switched back on
    assert not any(
        logging.getLogger(name).disabled for name in ("ragmeter", "ragmeter.store.writer", "ragmeter.runner")
    )


@pytest.mark.slow
@pytest.mark.heavy  # Ray: run in .ci/run's step of its own (python -m pytest -m heavy)
def test_requests_per_minute_hold_for_all_workers_together(ray_runtime):
    # 600 rpm: 10 a second after a burst of 10, for both workers together: any 1 s holds at most
    # 10 + 10 (+1 at the window's edges). Two workers each with the whole limit would send 40 in the
    # first second, all 48 in 1.4 s. (A count per window: a busy machine only lowers it; how long the
    # 48 take is not asserted, it depends on when each request reaches the server.)
    data = records(16)
    with FakeLLMServer(latency=0.05) as server:
        result = rm.evaluate(
            data,
            ["faithfulness", "context_precision"],
            judge(server, cache=False, rpm=600),
            progress=False,
            executor=RayExecutor(workers=2, concurrency=8),
        )
        times = sorted(r.started for r in server.chat_requests)
    assert len(times) == result.usage.calls == 48
    assert max(sum(1 for t in times if s <= t < s + 1.0) for s in times) <= 21


@pytest.mark.slow
@pytest.mark.heavy  # Ray: run in .ci/run's step of its own (python -m pytest -m heavy)
def test_a_killed_worker_has_its_samples_scored_again(ray_runtime):
    data = records(12)
    with FakeLLMServer(latency=0.3) as server:
        baseline = rm.evaluate(data, METRICS, judge(server, cache=False), progress=False)
        server.reset()
        executor = RayExecutor(workers=2, concurrency=3)

        async def kill_one_mid_run() -> None:
            # 12 requests: each of the 6 samples in flight (3 per worker) has sent its first calls, so
            # the killed worker has requests out whatever order the workers started in (with 6, all
            # could come from the other worker, and nothing would be sent again)
            while len(server.chat_requests) < 12 or not executor.actors:
                await asyncio.sleep(0.05)
            os.kill(await executor.actors[0].pid.remote(), signal.SIGKILL)

        async def run():
            result, _ = await asyncio.gather(
                rm.aevaluate(data, METRICS, judge(server, cache=False), progress=False, executor=executor),
                kill_one_mid_run(),
            )
            return result

        result = asyncio.run(run())
    assert len(result) == 12
    assert values(result) == values(baseline)
    assert len(server.chat_requests) > baseline.usage.calls  # the killed worker's samples were sent again


def quiet_after_cancel(server: FakeLLMServer, quiet: float = 1.0, limit: float = 30.0) -> None:
    """Wait until ``server`` has received no request for ``quiet`` seconds: requests a cancelled
    run already had in flight on the workers must not be counted as the resumed run's."""
    deadline, seen, since = time.monotonic() + limit, len(server.requests), time.monotonic()
    while time.monotonic() - since < quiet and time.monotonic() < deadline:
        time.sleep(0.05)
        if len(server.requests) != seen:
            seen, since = len(server.requests), time.monotonic()


@pytest.mark.slow
@pytest.mark.heavy  # Ray: run in .ci/run's step of its own (python -m pytest -m heavy)
def test_an_interrupted_streamed_run_resumes_where_it_stopped(ray_runtime, tmp_path):
    src, out = tmp_path / "big.jsonl", tmp_path / "results.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records(16)))
    with FakeLLMServer(latency=0.2) as server:
        baseline = rm.evaluate(str(src), METRICS, judge(server, cache=False), progress=False)
        per_sample = baseline.usage.calls // 16
        server.reset()

        cancel_when_lines(
            lambda: rm.aevaluate(
                str(src),
                METRICS,
                judge(server, cache=False),
                out=out,
                progress=False,
                executor=RayExecutor(workers=2, concurrency=2),
            ),
            out,
            5,
            poll=0.05,
        )
        kept = len(out.read_text().splitlines()) - 1
        assert 4 <= kept < 16
        quiet_after_cancel(server)
        server.reset()
        result = rm.evaluate(
            str(src),
            METRICS,
            judge(server, cache=False),
            out=out,
            resume=True,
            progress=False,
            executor=RayExecutor(workers=2, concurrency=2),
        )
    assert (result.skipped, result.scored) == (kept, 16 - kept)
    assert len(server.chat_requests) == (16 - kept) * per_sample
    assert values(rm.EvaluationResult.load(out)) == values(baseline)


def ctrl_c(args: list[str], server: FakeLLMServer, tmp_path: Path, after_requests: int = 3) -> tuple[int, str, str]:
    """Run ``ragmeter ARGS`` in its own process group against ``server``, press Ctrl-C (SIGINT to
    the group, as a terminal does) once the server has seen ``after_requests`` requests."""
    import subprocess
    import sys

    env = dict(
        os.environ,
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=server.openai_url,
        RAGMETER_CACHE_DIR=str(tmp_path / "cache"),
        PYTHONUNBUFFERED="1",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragmeter.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while len(server.chat_requests) < after_requests and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err


@pytest.mark.slow
@pytest.mark.heavy  # Ray: run in .ci/run's step of its own (python -m pytest -m heavy)
def test_ctrl_c_on_a_ray_run_stops_cleanly_with_the_resume_hint(tmp_path):
    """Ctrl-C printed a traceback (RuntimeError, CancelledError, KeyboardInterrupt) and exited 1,
    and Ray printed the retries of the tasks it had out; now: exit 130, one line saying what was
    kept and how to go on."""
    src, out = tmp_path / "big.jsonl", tmp_path / "results.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records(40)))
    with FakeLLMServer(latency=0.3) as server:
        code, stdout, stderr = ctrl_c(
            [
                "evaluate",
                str(src),
                "-m",
                "faithfulness",
                "-j",
                "openai:gpt-4o-mini",
                "--executor",
                "ray",
                "--workers",
                "2",
                "--concurrency",
                "2",
                "--no-progress",
                "--resume",
                "-o",
                str(out),
            ],
            server,
            tmp_path,
        )
    assert code == 130, stderr
    assert "Traceback" not in stderr + stdout and "retries remaining" not in stdout + stderr
    kept = len(out.read_text().splitlines()) - 1
    assert f"ragmeter: interrupted; {kept} results so far in {out}; run the same command again" in stderr
    assert kept < 40


def test_ctrl_c_without_resume_says_how_to_keep_results(tmp_path):
    src = tmp_path / "data.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records(20)))
    with FakeLLMServer(latency=0.3) as server:
        code, stdout, stderr = ctrl_c(
            [
                "evaluate",
                str(src),
                "-m",
                "faithfulness",
                "-j",
                "openai:gpt-4o-mini",
                "--concurrency",
                "2",
                "--no-progress",
                "-o",
                str(tmp_path / "r.html"),
            ],
            server,
            tmp_path,
            after_requests=2,
        )
    assert code == 130 and "Traceback" not in stderr, stderr
    assert stderr.strip().endswith(
        "ragmeter: interrupted; no report was written; to keep each result as it is "
        "scored, run with --resume --out results.jsonl: after an interruption the same "
        "command then scores only the rest"
    )
    assert not (tmp_path / "r.html").exists()
