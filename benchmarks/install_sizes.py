"""How long each install line of the manual (docs/install.md) takes and how much it puts on disk.

For each extra named on the command line (default: the ones docs/install.md shows times for): a
fresh ``python -m venv``, pip upgraded (not timed), then ``pip install -e ".[EXTRA]"`` from this
checkout timed, and the size of the whole venv (``du``, pip and setuptools included, about 26 MB).
``--no-cache`` adds ``--no-cache-dir`` (a first install on a new machine downloads everything; with
pip's cache warm the time is mostly unpacking). ``torch`` in the list of requirements of an extra
line (``dev``) is installed first, as docs/install.md says, so pip takes the CPU build where the
index offers one.

Run::

    python benchmarks/install_sizes.py                       # local, langchain, llamaindex, otel, all, test
    python benchmarks/install_sizes.py test dev --no-cache
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["local", "langchain", "llamaindex", "otel", "all", "test"]
#: What an extra's install line puts before the project (docs/install.md).
FIRST = {"dev": ["torch==2.13.0"]}


def measure(extra: str, cache: bool) -> tuple[float, int]:
    """(seconds of pip install, MB of the venv) for ``pip install -e ".[extra]"`` in a fresh venv."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"] + ([] if cache else ["--no-cache-dir"])
        subprocess.run(pip + ["--upgrade", "pip"], check=True)
        start = time.perf_counter()
        subprocess.run(pip + FIRST.get(extra, []) + ["-e", f"{ROOT}[{extra}]"], check=True)
        seconds = time.perf_counter() - start
        du = subprocess.run(["du", "-sm", str(venv)], capture_output=True, text=True, check=True)
        size = int(du.stdout.split()[0])
    return seconds, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("extras", nargs="*", default=DEFAULT)
    parser.add_argument("--no-cache", action="store_true", help="pip install --no-cache-dir (download everything)")
    args = parser.parse_args()
    print("| extra | install | environment |")
    print("|---|---|---|")
    for extra in args.extras:
        seconds, size = measure(extra, cache=not args.no_cache)
        print(f"| `{extra}` | {seconds:.0f} s | {size} MB |", flush=True)


if __name__ == "__main__":
    main()
