"""Packaging and import hygiene: the core imports no framework; a normal (non-editable) wheel
install works from any directory and carries every subpackage."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("langchain", "langchain_core", "llama_index", "opentelemetry", "openai", "anthropic", "torch", "sentence_transformers", "pandas")


def _loaded_after(statement: str, cwd: Path) -> list[str]:
    code = f"import sys; {statement}; print(__import__('json').dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True)
    mods = json.loads(out.stdout)
    return sorted({m.split(".")[0] for m in mods} & set(FRAMEWORKS))


def test_import_ragmeter_loads_no_framework(tmp_path):
    assert _loaded_after("import ragmeter", tmp_path) == []
    # the public metric, judge and result names are reachable without loading a framework either
    assert _loaded_after("import ragmeter.metrics, ragmeter.judges, ragmeter.cli, ragmeter.inline; "
                         "from ragmeter.metrics import retrieval; from ragmeter import aggregate", tmp_path) == []


def test_wheel_contains_all_packages_and_imports_from_elsewhere(tmp_path):
    wheel_dir = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(ROOT)],
                   check=True, timeout=300)
    (wheel,) = wheel_dir.glob("ragmeter-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("ragmeter/__init__.py", "ragmeter/cli.py", "ragmeter/metrics/retrieval.py",
                     "ragmeter/judges/tasks.py", "ragmeter/judges/valence.txt", "ragmeter/integrations/__init__.py",
                     "ragmeter/tracing/__init__.py"):
        assert required in names, required
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", "import ragmeter, ragmeter.integrations, ragmeter.tracing; print(ragmeter.__file__)"],
                         cwd=elsewhere, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip().startswith(str(target))
    # The offline judge's data file is read from the installed package (the polarity check).
    check = ("import asyncio; from ragmeter.judges import OfflineJudge; "
             "out = asyncio.run(OfflineJudge(embeddings=False).run('verify_claims', {'claims': ['The results were poor "
             "this year.'], 'chunks': ['The results were good this year.']})).output; print(out['verdicts'][0]['reason'])")
    out = subprocess.run([sys.executable, "-c", check], cwd=elsewhere, env=env, capture_output=True, text=True, check=True)
    assert "opposite sentiment" in out.stdout
