"""Wall time, client CPU and peak memory of a whole run against a provider with real latency.

    python benchmarks/throughput.py [--sizes 20 1000] [--latency 0.3] [--json]

A local OpenAI-compatible server (``tests/helpers/servers.py`` ``FakeLLMServer``, in its own
process so its CPU and memory are not counted) answers every judge task validly after
``--latency`` seconds (embeddings too). ragmeter scores ``examples/rag_samples.jsonl`` (20
samples, 5 chunks each) repeated with distinct ids to each size, with the five metrics RAGAS
and DeepEval were compared on, the real OpenAI SDK and the *default* settings (no cache). Each
run is a fresh process, so its peak RSS is its own. Reports per size: wall seconds, client CPU
seconds (user + system), CPU ms per chat request and per sample (everything the client does:
requests, prompts, metrics), peak RSS, requests sent, score errors.

``--calls N`` measures the judge-call path alone instead: ``N`` judge calls (``extract_claims``
and ``rate_chunks`` in turn, 16 in flight, no metrics, no cache, no embeddings) through the
OpenAI and the Anthropic judge, and reports the client CPU ms per call.

``--ragmeter PATH`` runs another copy of the package (a directory holding ``ragmeter/``, e.g.
an export of an older commit) to compare before / after on the same server.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "examples" / "rag_samples.jsonl"
METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevance"]


def records(n: int) -> list[dict]:
    """``n`` records: the example samples repeated, each with a distinct id (and question suffix, so no
    two records are the same request)."""
    base = [json.loads(line) for line in SAMPLES.read_text().splitlines() if line.strip()]
    out = []
    for i in range(n):
        r = dict(base[i % len(base)])
        r["id"] = f"{r['id']}-{i}"
        if i >= len(base):
            r["question"] = f"{r['question']} (#{i // len(base)})"
        out.append(r)
    return out


def serve(latency: float) -> None:
    """Child process: serve until stdin closes; print the base URL first."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.servers import FakeLLMServer

    with FakeLLMServer(latency=latency) as server:
        print(server.openai_url, flush=True)
        sys.stdin.read()
        print(
            json.dumps(
                {
                    "chat": len(server.chat_requests),
                    "embed": len(server.embedding_requests),
                    "max_concurrent": server.max_concurrent,
                }
            ),
            flush=True,
        )


def run_one(n: int, url: str) -> dict:
    """Child process: one evaluate() of ``n`` records with default settings; the numbers as a dict."""
    import ragmeter as rm
    from ragmeter.judges import OpenAIJudge

    data = records(n)
    judge = OpenAIJudge("gpt-4o-mini", base_url=url, api_key="bench", cache=False)
    cpu0, t0 = time.process_time(), time.perf_counter()
    result = rm.evaluate(data, metrics=METRICS, judge=judge, progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    usage = result.usage
    return {
        "samples": n,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "calls": usage.calls,
        "retries": usage.retries,
        "embedding_calls": usage.embedding_calls,
        "errors": sum(s.status == "error" for r in result for s in r.scores.values()),
        "ragmeter": rm.__file__,
    }


def run_calls(n: int, url: str, backend: str) -> dict:
    """Child process: ``n`` judge calls alone (16 in flight) after 32 to warm up; the client CPU as a dict."""
    import asyncio

    from ragmeter.judges import AnthropicJudge, OpenAIJudge

    kw: dict = {"api_key": "bench-key-0123456789", "cache": False, "max_concurrency": 16, "adaptive_concurrency": False}
    make = (
        (lambda: OpenAIJudge("gpt-4o-mini", base_url=url, embedder=None, **kw))
        if backend == "openai"
        else (lambda: AnthropicJudge("claude-haiku-4-5", base_url=url.rsplit("/v1", 1)[0], **kw))
    )
    try:
        judge = make()
    except TypeError:  # a copy older than adaptive concurrency (--ragmeter)
        del kw["adaptive_concurrency"]
        judge = make()
    data = records(n)

    async def one(i: int, r: dict) -> None:
        if i % 2:
            await judge.run("extract_claims", {"question": r["question"], "units": [r["answer"], r["answer"][:50]]})
        else:
            await judge.run("rate_chunks", {"question": r["question"], "chunks": [[c["text"]] for c in r["contexts"]]})

    async def calls() -> float:
        await asyncio.gather(*(one(i, r) for i, r in enumerate(data[:32])))
        cpu0 = time.process_time()
        await asyncio.gather(*(one(i, r) for i, r in enumerate(data)))
        return time.process_time() - cpu0

    return {"backend": backend, "calls": n, "cpu_s": round(asyncio.run(calls()), 3)}


def measure(n: int, latency: float, package: str | None, backend: str | None = None) -> dict:
    """Start a server, run ``n`` samples (or, with ``backend``, ``n`` judge calls alone) in a fresh
    process against it, return the numbers."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        url = server.stdout.readline().strip()
        env = dict(os.environ)
        if package:
            env["PYTHONPATH"] = package + os.pathsep + env.get("PYTHONPATH", "")
        child = ["--child-calls", str(n), url, backend] if backend else ["--child", str(n), url]
        out = subprocess.run(
            [sys.executable, __file__, *child], env=env, check=True, capture_output=True, text=True, cwd="/tmp"
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        stats, _ = server.communicate("", timeout=60)
    seen = json.loads(stats.strip().splitlines()[-1])
    if backend:
        result["cpu_ms_per_call"] = round(1000 * result["cpu_s"] / n, 3)
        return result
    result.update(server_chat=seen["chat"], server_embed=seen["embed"], max_in_flight=seen["max_concurrent"])
    result["cpu_ms_per_call"] = round(1000 * result["cpu_s"] / max(1, seen["chat"]), 2)
    result["cpu_ms_per_sample"] = round(1000 * result["cpu_s"] / max(1, n), 2)
    return result


def main(argv: list[str] | None = None) -> int:
    """Print one line per size (and the raw numbers with --json)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[20, 1000])
    p.add_argument("--latency", type=float, default=0.3, help="seconds per request (default 0.3)")
    p.add_argument("--ragmeter", help="directory holding another ragmeter package to measure instead")
    p.add_argument("--calls", type=int, help="measure N judge calls alone (client CPU per call), not whole runs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--child-calls", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.child:
        print(json.dumps(run_one(int(args.child[0]), args.child[1])))
        return 0
    if args.child_calls:
        n, url, backend = args.child_calls
        print(json.dumps(run_calls(int(n), url, backend)))
        return 0
    if args.calls:
        rows = [measure(args.calls, args.latency, args.ragmeter, backend) for backend in ("openai", "anthropic")]
        for r in rows:
            print(
                f"{r['backend']:>9}: {r['calls']} judge calls, client CPU {r['cpu_s']:.2f} s, {r['cpu_ms_per_call']:.3f} ms/call"
            )
        if args.json:
            print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{'samples':>8} {'wall s':>8} {'CPU s':>7} {'CPU ms/call':>11} {'ms/sample':>9} {'peak RSS MB':>11} {'chat':>6} "
        f"{'embed':>6} {'in flight':>9} {'retries':>7} {'errors':>6}"
    )
    rows = []
    for n in args.sizes:
        r = measure(n, args.latency, args.ragmeter)
        rows.append(r)
        print(
            f"{n:>8} {r['wall_s']:>8.2f} {r['cpu_s']:>7.2f} {r['cpu_ms_per_call']:>11.2f} {r['cpu_ms_per_sample']:>9.2f} "
            f"{r['peak_rss_mb']:>11.1f} "
            f"{r['server_chat']:>6} {r['server_embed']:>6} {r['max_in_flight']:>9} {r['retries']:>7} {r['errors']:>6}",
            flush=True,
        )
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
