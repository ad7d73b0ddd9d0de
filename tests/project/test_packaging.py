"""Packaging and import hygiene: the core imports no framework; a normal (non-editable) wheel
install works from any directory and carries every subpackage."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT

FRAMEWORKS = (
    "langchain",
    "langchain_core",
    "llama_index",
    "opentelemetry",
    "openai",
    "anthropic",
    "torch",
    "sentence_transformers",
    "pandas",
)


def _loaded_after(statement: str, cwd: Path) -> list[str]:
    code = f"import sys; {statement}; print(__import__('json').dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True)
    mods = json.loads(out.stdout)
    return sorted({m.split(".")[0] for m in mods} & set(FRAMEWORKS))


@pytest.mark.slow
def test_import_ragmeter_loads_no_framework(tmp_path):
    assert _loaded_after("import ragmeter", tmp_path) == []
    # the public metric, judge and result names are reachable without loading a framework either
    assert (
        _loaded_after(
            "import ragmeter.metrics, ragmeter.judges, ragmeter.cli, ragmeter.inline; "
            "from ragmeter.metrics import retrieval; from ragmeter import aggregate",
            tmp_path,
        )
        == []
    )


@pytest.mark.slow
def test_wheel_contains_all_packages_and_imports_from_elsewhere(tmp_path):
    # built from a copy of the source: setuptools' in-tree build/ directory could hold stale files
    # (a deleted module would still be packed) and two runs at once would share it
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".venv"))
    wheel_dir = tmp_path / "wheel"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheel_dir), str(source)],
        check=True,
        timeout=300,
    )
    (wheel,) = wheel_dir.glob("ragmeter-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # every module and data file of the source tree is in the wheel (a subpackage missing from
    # pyproject's package list would otherwise only show on a user's machine)
    layers = {"core": "ragmeter", "integrations": "ragmeter/integrations", "tracing": "ragmeter/tracing"}
    expected = {
        f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder, prefix in layers.items()
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert (
        "ragmeter/judges/offline/data/valence.txt" in expected and "ragmeter/integrations/langchain/hook.py" in expected
    )
    assert sorted(expected - names) == []
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", "import ragmeter, ragmeter.integrations, ragmeter.tracing; print(ragmeter.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip().startswith(str(target))
    # The offline judge's data file is read from the installed package (the polarity check).
    check = (
        "import asyncio; from ragmeter.judges import OfflineJudge; "
        "out = asyncio.run(OfflineJudge(embeddings=False).run('verify_claims', {'claims': ['The results were poor "
        "this year.'], 'chunks': ['The results were good this year.']})).output; print(out['verdicts'][0]['reason'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", check], cwd=elsewhere, env=env, capture_output=True, text=True, check=True
    )
    assert "opposite sentiment" in out.stdout


def _oldest_pins() -> dict[str, str]:
    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / ".ci" / "oldest.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            if spec.operator == "==":
                pins[req.name.lower()] = spec.version
    return pins


def test_every_lower_bound_is_the_pinned_oldest_version_that_ci_tests():
    """pyproject.toml's lower bounds are claims: .ci/run installs .ci/oldest.txt's exact pins and
    runs the suite on them, so each runtime bound must be pinned there, at the same version."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _oldest_pins()
    groups = {"dependencies": project["dependencies"], **project["optional-dependencies"]}
    checked = []
    for group, reqs in groups.items():
        for raw in reqs:
            req = Requirement(raw)
            if req.name == "ragmeter":  # the "all" / "dev" extras name other extras
                continue
            floors = [s.version for s in req.specifier if s.operator == ">="]
            assert len(floors) == 1, f"{group}: {raw!r} needs exactly one lower bound (>=)"
            name = req.name.lower()
            if group in ("dev", "test", "docs") and name not in pins:
                continue  # test and docs tools: only those pinned in oldest.txt are claimed
            assert name in pins, f"{group}: {raw!r} has no exact pin in .ci/oldest.txt"
            assert Version(pins[name]) == Version(floors[0]), f"{group}: {raw!r} but .ci/oldest.txt pins {pins[name]}"
            checked.append(name)
    assert {
        "numpy",
        "openai",
        "anthropic",
        "langchain-core",
        "llama-index-core",
        "opentelemetry-sdk",
        "sentence-transformers",
    } <= set(checked)
