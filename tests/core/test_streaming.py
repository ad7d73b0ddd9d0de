"""Streamed runs (``evaluate(path, out="results.jsonl", resume=True)`` / ``evaluate --resume``): the
same results as an in-memory run, memory bounded by the concurrency, an interrupted run resumed by
sample id (the real OpenAI SDK against the fake server), and the results file checked on resume."""

from __future__ import annotations

import json
import tracemalloc

import pytest

import ragmeter as rm
from helpers import cancel_when_lines
from helpers.servers import FakeLLMServer
from ragmeter.cli import main
from ragmeter.judges import OpenAIJudge
from ragmeter.streaming import StreamedResult

IR = ["precision@1", "mrr", "ndcg@3"]


def write_records(path, n: int, *, padding: int = 0, bad: bool = False) -> None:
    """``n`` records, sample ``i`` with the relevant chunk at rank ``i % 3 + 1`` (MRR 1, 1/2, 1/3);
    ``padding`` characters of extra text per chunk; ``bad``: a line that is not JSON at the end."""
    with open(path, "w") as fh:
        for i in range(n):
            contexts = [{"id": c, "text": f"chunk {c} of sample {i} " + "x" * padding} for c in "abc"]
            relevant = "abc"[i % 3]
            fh.write(
                json.dumps(
                    {
                        "id": f"s{i}",
                        "question": f"question {i}?",
                        "contexts": contexts,
                        "answer": "an answer",
                        "relevant_ids": [relevant],
                    }
                )
                + "\n"
            )
        if bad:
            fh.write("{not json\n")


def values(result) -> dict:
    return {r.sample.id: {m: (s.value, s.label, s.error) for m, s in r.scores.items()} for r in result}


def test_a_streamed_run_writes_what_an_in_memory_run_returns(tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "results.jsonl"
    write_records(src, 30, bad=True)
    memory = rm.evaluate(str(src), IR, progress=False)
    streamed = rm.evaluate(str(src), IR, out=out, progress=False)
    assert isinstance(streamed, StreamedResult) and (streamed.scored, streamed.skipped) == (30, 0)
    assert streamed.summary() == memory.summary()
    assert streamed.summary()["mrr"]["mean"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)
    loaded = rm.EvaluationResult.load(out)
    assert values(loaded) == values(memory) and len(streamed) == 30
    assert [str(e) for e in loaded.invalid] == [str(e) for e in memory.invalid] != []
    assert loaded.metrics == IR and loaded.thresholds == memory.thresholds


@pytest.mark.slow
def test_memory_is_bounded_by_the_concurrency_not_the_dataset(tmp_path):
    # Each sample carries 3 chunks of 8 kB. In memory, 300 samples hold ~7 MB of samples and
    # results (the peak is ~3x that with the copies made on the way); streamed, only the 4 in
    # flight are alive, so 300 samples peak no higher than 30 do, but for one id per sample (kept
    # to reject duplicate ids and to skip the samples already scored on resume).
    write_records(tmp_path / "warm.jsonl", 2)
    rm.evaluate(str(tmp_path / "warm.jsonl"), IR, out=tmp_path / "warm-out.jsonl", progress=False)  # first-use imports
    peaks = {}
    for n in (30, 300):
        src = tmp_path / f"in{n}.jsonl"
        write_records(src, n, padding=8000)
        tracemalloc.start()
        result = rm.evaluate(str(src), IR, out=tmp_path / f"out{n}.jsonl", concurrency=4, progress=False)
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert result.scored == n
    tracemalloc.start()
    rm.evaluate(str(tmp_path / "in300.jsonl"), IR, concurrency=4, progress=False)
    in_memory = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert in_memory > 7_000_000
    assert peaks[300] < peaks[30] + 200_000  # ~57 kB of ids; one more sample would be 24 kB
    assert peaks[300] * 4 < in_memory


@pytest.mark.slow
def test_an_interrupted_run_resumes_by_sample_id(tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "results.jsonl"
    write_records(src, 12)
    metrics = ["faithfulness", "context_precision"]
    with FakeLLMServer(latency=0.05) as server:

        def judge() -> OpenAIJudge:
            return OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="sk-test-key", cache=False)

        baseline = rm.evaluate(str(src), metrics, judge(), progress=False)
        per_sample = baseline.usage.calls // 12
        server.reset()

        cancel_when_lines(
            lambda: rm.aevaluate(str(src), metrics, judge(), out=out, concurrency=2, progress=False), out, 4
        )
        lines = out.read_text().splitlines()
        # as if the process died while writing the last line: that line is dropped, its sample scored again
        out.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
        kept = len(lines) - 2  # the header and the line cut off
        server.reset()
        result = rm.evaluate(str(src), metrics, judge(), out=out, resume=True, progress=False)
    assert 2 <= kept < 12
    assert (result.skipped, result.scored) == (kept, 12 - kept)
    assert len(server.chat_requests) == (12 - kept) * per_sample
    loaded = rm.EvaluationResult.load(out)
    assert values(loaded) == values(baseline) and len(loaded) == 12


def test_resume_refuses_a_file_of_another_run(tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "results.jsonl"
    write_records(src, 3)
    rm.evaluate(str(src), IR, out=out, progress=False)
    with pytest.raises(ValueError, match=r"metrics \['precision@1', 'mrr', 'ndcg@3'\].*resume with the same"):
        rm.evaluate(str(src), ["mrr"], out=out, resume=True, progress=False)
    with pytest.raises(ValueError, match="needs out="):
        rm.evaluate(str(src), IR, resume=True, progress=False)
    again = rm.evaluate(str(src), IR, out=out, resume=True, progress=False)
    assert (again.scored, again.skipped) == (0, 3)


def test_cli_resume_streams_into_the_jsonl_out(tmp_path, capsys):
    src, out, md = tmp_path / "big.jsonl", tmp_path / "results.jsonl", tmp_path / "report.md"
    write_records(src, 9)
    assert main(["evaluate", str(src), "-m", "mrr", "--out", str(out), "--resume", "--no-progress"]) == 0
    assert "9 samples scored now, 0 already in" in capsys.readouterr().out
    db = tmp_path / "history.db"
    assert (
        main(
            [
                "evaluate",
                str(src),
                "-m",
                "mrr",
                "--out",
                str(out),
                "--out",
                str(md),
                "--resume",
                "--no-progress",
                "--db",
                str(db),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "0 samples scored now, 9 already in" in printed and "ragmeter: 9 samples scored" in printed
    assert "recorded run 1" in printed and "mrr" in md.read_text()
    from ragmeter.store import Store

    with Store(db) as store:
        assert store.runs()[0].samples == 9
    assert main(["evaluate", str(src), "-m", "mrr", "--out", str(md), "--resume"]) == 2
    assert "--resume needs exactly one .jsonl --out" in capsys.readouterr().err
