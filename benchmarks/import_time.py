"""What ``import ragmeter`` (and each public face) costs: wall time and modules loaded, each in a
fresh interpreter.

Run::

    python benchmarks/import_time.py                    # this checkout (the installed ragmeter)
    python benchmarks/import_time.py --runs 21
    python benchmarks/import_time.py --src /tmp/old     # another tree: a folder holding core/,
                                                        # integrations/ and tracing/ (git archive)

Each face is imported ``--runs`` times, each time in a new ``python -c`` process; the table gives
the median wall time of the import itself (``time.perf_counter`` around it, so the interpreter's
own start-up is left out), the ragmeter modules it loaded and all the modules it loaded
(``sys.modules`` after the import; a bare interpreter holds about 40). With ``--src`` the tree is
linked into a temporary ``ragmeter`` package first on ``sys.path``, ahead of the installed one.

Measured on 2 CPUs shared with other jobs, median of 11 runs each; before: the tree of commit
cf19c65 (``git archive cf19c65`` unpacked, ``--src``), after: issue 36's lazy faces. A fresh
``python -c`` holds 78 modules before the import (the probe's own ``json``, ``time`` ...)::

    | import             | before: ms | ragmeter modules | all modules | after: ms | ragmeter modules | all modules |
    |--------------------|-----------:|-----------------:|------------:|----------:|-----------------:|------------:|
    | ragmeter           |  334 - 575 |               65 |         347 |     5 - 9 |                2 |          80 |
    | ragmeter.metrics   |        484 |               65 |         347 |         6 |                3 |          81 |
    | ragmeter.judges    |        513 |               65 |         347 |        17 |                4 |          97 |
    | ragmeter.store     |        825 |               71 |         491 |         5 |                3 |          81 |
    | ragmeter.dashboard |        518 |               65 |         347 |         5 |                3 |          81 |
    | ragmeter.labels    |        496 |               65 |         347 |         6 |                3 |          81 |
    | ragmeter.monitor   |        454 |               65 |         347 |         5 |                3 |          81 |
    | ragmeter.trust     |        388 |               65 |         347 |         5 |                3 |          81 |

Before, every face loaded the whole of ``import ragmeter`` (its package ``__init__`` runs first):
the dashboard, the monitor, the test-set generator, SQLAlchemy for the store. A name is now
imported on first use (:mod:`ragmeter._lazy`): the cost moves to the first ``rm.evaluate``.

The numbers are in the README's "Measured" section; tests/project/test_import_graph.py bounds the module
count (a count, not a time: times vary with the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

FACES = (
    "ragmeter",
    "ragmeter.metrics",
    "ragmeter.judges",
    "ragmeter.aggregate",
    "ragmeter.store",
    "ragmeter.dashboard",
    "ragmeter.labels",
    "ragmeter.monitor",
    "ragmeter.trust",
    "ragmeter.testset",
    "ragmeter.testing",
    "ragmeter.tracing",
)

_PROBE = """
import sys, time, json
before = set(sys.modules)
t = time.perf_counter()
import {face}
dt = time.perf_counter() - t
mods = set(sys.modules)
print(json.dumps({{"s": dt, "ragmeter": len([m for m in mods if m == "ragmeter" or m.startswith("ragmeter.")]),
                  "all": len(mods)}}))
"""


def link_tree(src: Path, into: Path) -> Path:
    """A ``ragmeter`` package of links to ``src``'s core/ (with integrations/ and tracing/ inside),
    as the installed package is laid out (pyproject's package-dir)."""
    package = into / "ragmeter"
    package.mkdir()
    for child in (src / "core").iterdir():
        if child.name != "__pycache__":
            (package / child.name).symlink_to(child.resolve())
    for sub in ("integrations", "tracing"):
        (package / sub).symlink_to((src / sub).resolve(), target_is_directory=True)
    return into


def measure(face: str, runs: int, path: str | None) -> dict:
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
    out = []
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE.format(face=face)], capture_output=True, text=True, env=env, check=True
        )
        out.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {"ms": statistics.median(o["s"] for o in out) * 1000, "ragmeter": out[-1]["ragmeter"], "all": out[-1]["all"]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=11, help="fresh interpreters per face (median; default 11)")
    ap.add_argument("--src", type=Path, help="measure this source tree instead of the installed ragmeter")
    ap.add_argument("--faces", nargs="*", default=list(FACES))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(link_tree(args.src, Path(tmp))) if args.src else None
        print("| import | ms (median) | ragmeter modules | all modules |")
        print("|---|---:|---:|---:|")
        for face in args.faces:
            try:
                m = measure(face, args.runs, path)
            except subprocess.CalledProcessError as exc:
                print(f"| {face} | failed: {exc.stderr.strip().splitlines()[-1] if exc.stderr else exc} | | |")
                continue
            print(f"| {face} | {m['ms']:.1f} | {m['ragmeter']} | {m['all']} |", flush=True)


if __name__ == "__main__":
    main()
