"""The example scripts run as a user runs them, from the repository root, and leave the checkout
as they found it: what they write goes to a temporary folder (issue 38: one left ``sweep-out/``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

SCRIPTS = sorted(p.name for p in (ROOT / "examples").glob("*.py"))
#: What running Python or the tests writes anyway (ignored by git): not the examples' doing.
_IGNORED = {".git", ".venv", "__pycache__", ".pytest_cache", "build", "dist"}


def _tree() -> set[str]:
    """Every file and folder under the repository root, as relative paths (ignored ones left out)."""
    out = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in _IGNORED and not d.endswith(".egg-info")]
        rel = Path(folder).relative_to(ROOT)
        out.update(str(rel / name) for name in dirs + files)
    return out


def test_every_example_is_checked():
    assert {"sweep_dashboard.py", "langchain_rag.py", "llamaindex_rag.py", "conversations.py"} <= set(SCRIPTS)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_an_example_leaves_the_checkout_clean(script, tmp_path):
    before = _tree()
    env = {**os.environ, "RAGMETER_CACHE_DIR": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, f"examples/{script}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(_tree() - before) == []  # nothing new in the checkout
