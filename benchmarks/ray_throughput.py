"""Throughput of RayExecutor with 1 and 2 workers, next to the default asyncio executor.

    python benchmarks/ray_throughput.py [--samples 300] [--latency 0.3] [--concurrency 64] [--json]

The fake OpenAI-compatible server of ``benchmarks/throughput.py`` (``tests/helpers/servers.py``,
in its own process) answers every judge task validly after ``--latency`` seconds. The same
samples (``examples/rag_samples.jsonl`` repeated with distinct ids), the five metrics of that
benchmark and the default ``OpenAIJudge`` (no cache) are scored by: the asyncio executor (one
process), then ``RayExecutor(workers=1)`` and ``RayExecutor(workers=2)`` on a local Ray runtime
(``ray.init(num_cpus=2)``, started before the clock runs), ``--concurrency`` samples in flight per
worker. Wall time includes starting the workers (unpickling the judge, importing the SDK);
``start s`` is that part (a run of one sample). Prints samples/s and the requests the server saw.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import METRICS, records  # noqa: E402  (same samples and metrics)


def run(data: list[dict], url: str, executor) -> dict:
    """One evaluate() of ``data`` with ``executor``; wall seconds, samples/s, calls and errors."""
    import ragmeter as rm
    from ragmeter.judges import OpenAIJudge

    judge = OpenAIJudge("gpt-4o-mini", base_url=url, api_key="bench", cache=False)
    t0 = time.perf_counter()
    result = rm.evaluate(data, metrics=METRICS, judge=judge, progress=False, executor=executor)
    wall = time.perf_counter() - t0
    return {
        "wall_s": round(wall, 2),
        "samples_per_s": round(len(data) / wall, 2),
        "calls": result.usage.calls,
        "errors": sum(s.status == "error" for r in result for s in r.scores.values()),
    }


def main(argv: list[str] | None = None) -> int:
    """Print one row per executor (and the raw numbers with --json)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--latency", type=float, default=0.3, help="seconds per request (default 0.3)")
    p.add_argument("--concurrency", type=int, default=64, help="samples in flight per worker (default 64)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    import ray

    from ragmeter.executors import AsyncioExecutor, RayExecutor

    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("throughput.py")), "--serve", str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    rows = []
    try:
        url = server.stdout.readline().strip()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        data = records(args.samples)
        setups = [
            ("asyncio", lambda: AsyncioExecutor(args.concurrency)),
            ("ray, 1 worker", lambda: RayExecutor(workers=1, concurrency=args.concurrency)),
            ("ray, 2 workers", lambda: RayExecutor(workers=2, concurrency=args.concurrency)),
        ]
        print(
            f"{args.samples} samples x {len(METRICS)} metrics, {args.latency:g} s latency, "
            f"{args.concurrency} samples in flight per worker"
        )
        print(f"{'executor':<16} {'start s':>8} {'wall s':>8} {'samples/s':>10} {'calls':>7} {'errors':>7}")
        for name, make in setups:
            start = run(records(1), url, make())["wall_s"]
            r = {"executor": name, "start_s": start, **run(data, url, make())}
            rows.append(r)
            print(
                f"{name:<16} {start:>8.2f} {r['wall_s']:>8.2f} {r['samples_per_s']:>10.2f} {r['calls']:>7} "
                f"{r['errors']:>7}",
                flush=True,
            )
    finally:
        ray.shutdown()
        server.communicate("", timeout=60)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
