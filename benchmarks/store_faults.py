"""Store fault suite: inline results stream into a store while it fails; what is lost, counted.

Each scenario starts a fresh database, feeds a :class:`ragmeter.inline.BackgroundScorer`
(metric ``mrr``, ``store=``) ``--rate`` samples per second, ``--results`` in all, and injects its
fault once a tenth of them are in:

* ``pg-restart``: a real PostgreSQL server (tests/helpers/postgres.py) fast-shut-down (open
  sessions cut), down ``--down`` seconds (1), started again on the same port and data;
* ``pg-outage``: the same, down ``--outage`` seconds (9);
* ``sqlite-lock``: another connection holds a SQLite file's write lock ``--lock`` seconds (40,
  past the 30 s busy timeout);
* ``pg-past-retry``: PostgreSQL down for ``--past`` seconds (15) with ``retry_timeout`` 5 s: the
  batches given up are counted, not silently lost.

After the fault the scorer is shut down (it waits for the store) and the rows are counted in the
database. One JSON line per scenario: submitted, scored, written, dropped (queue), errors
(given up), rows, lost (scored but neither written nor counted) and the seconds from the last
submission (or the end of the fault, if later) to the last write::

    python benchmarks/store_faults.py                         # every scenario, 2,000 results at 100/s
    python benchmarks/store_faults.py --only sqlite-lock --results 600
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

SCENARIOS = ("pg-restart", "pg-outage", "sqlite-lock", "pg-past-retry")


def _sample(i: int):
    import ragmeter as rm

    return rm.Sample(
        f"question {i}?", [{"id": "a", "text": f"chunk {i}"}], answer=f"answer {i}", relevant_ids=["a"], id=f"s{i}"
    )


def _rows(url) -> int:
    from ragmeter.store import Store

    with Store(url) as store:
        return sum(r.samples for r in store.runs(limit=None, kind="inline"))


def run(name: str, url, fault, results: int, rate: float, retry_timeout: float | None = None) -> dict:
    """Stream ``results`` samples at ``rate`` per second into ``url``; ``fault()`` runs on its own
    thread once a tenth are in and returns when the fault ends."""
    from ragmeter.inline import BackgroundScorer

    if retry_timeout is not None:
        os.environ["RAGMETER_STORE_RETRY_TIMEOUT"] = str(retry_timeout)
    try:
        scorer = BackgroundScorer(["mrr"], store=url, store_source="bench")
    finally:
        os.environ.pop("RAGMETER_STORE_RETRY_TIMEOUT", None)
    ended = []

    def inject() -> None:
        fault()
        ended.append(time.monotonic())

    worker = threading.Thread(target=inject)
    start = time.monotonic()
    for i in range(results):
        scorer.submit(_sample(i))
        if i == results // 10:
            worker.start()
        time.sleep(max(0.0, start + (i + 1) / rate - time.monotonic()))
    fed = time.monotonic()
    worker.join()
    scorer.shutdown(600)
    drained = time.monotonic()
    st = scorer.stats
    rows = _rows(url)
    return {
        "scenario": name,
        "submitted": results,
        "rate_per_s": rate,
        "scored": st["scored"],
        "written": st["store_written"],
        "dropped": st["store_dropped"],
        "errors": st["store_errors"],
        "rows": rows,
        "lost": st["scored"] - rows - st["store_dropped"] - st["store_errors"],
        "drain_s": round(drained - max(fed, ended[0]), 2),
    }


def main(argv: list[str] | None = None) -> None:
    """Run the scenarios (see the module docstring); one JSON line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=100.0, help="samples submitted per second")
    parser.add_argument("--down", type=float, default=1.0)
    parser.add_argument("--outage", type=float, default=9.0)
    parser.add_argument("--lock", type=float, default=40.0)
    parser.add_argument("--past", type=float, default=15.0)
    parser.add_argument("--only", choices=SCENARIOS, action="append")
    args = parser.parse_args(argv)
    chosen = args.only or list(SCENARIOS)
    server = None
    if any(s.startswith("pg") for s in chosen):
        from helpers.postgres import PostgresServer

        server = PostgresServer.start()
    try:
        for name in chosen:
            if name == "sqlite-lock":
                with tempfile.TemporaryDirectory() as tmp:
                    db = Path(tmp) / "locked.db"
                    from ragmeter.store import Store

                    Store(db).close()
                    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)

                    def hold(conn: sqlite3.Connection = other) -> None:
                        conn.execute("BEGIN IMMEDIATE")
                        time.sleep(args.lock)
                        conn.execute("COMMIT")

                    print(json.dumps(run(f"{name}-{args.lock:g}s", db, hold, args.results, args.rate)), flush=True)
                    other.close()
                continue
            assert server is not None
            down = {"pg-restart": args.down, "pg-outage": args.outage, "pg-past-retry": args.past}[name]
            url = server.create_database()
            print(
                json.dumps(
                    run(
                        f"{name}-{down:g}s",
                        url,
                        lambda d=down: server.restart(down=d),
                        args.results,
                        args.rate,
                        retry_timeout=5.0 if name == "pg-past-retry" else None,
                    )
                ),
                flush=True,
            )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
