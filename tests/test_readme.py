"""The README tells the truth: the output it shows is what the command prints today, and the
command-line synopsis names every command the parser has."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragmeter.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def shown_output(command: str) -> str:
    """The ```text block of the README that starts with ``$ command``, without that line."""
    for block in re.findall(r"```text\n(.*?)```", README, re.S):
        first, _, rest = block.partition("\n")
        if first.strip() == f"$ {command}":
            return rest
    raise AssertionError(f"the README shows no output of {command!r}")


@pytest.mark.slow
def test_quick_start_output_is_what_the_command_prints(tmp_path):
    env = {**os.environ, "RAGMETER_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "120"}
    out = subprocess.run([sys.executable, "-m", "ragmeter.cli", "evaluate", "examples/rag_samples.jsonl",
                          "--no-progress"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == shown_output("ragmeter evaluate examples/rag_samples.jsonl")


EXAMPLES = [b.partition("\n")[0][2:].strip() for b in re.findall(r"```text\n(.*?)```", README, re.S)
            if b.startswith("$ python examples/")]


def test_readme_shows_example_outputs():
    assert {"python examples/monitor_degradation.py", "python examples/custom_metrics.py",
            "python examples/conversations.py"} <= set(EXAMPLES)


@pytest.mark.parametrize("section, example", [("## Custom metrics", "custom_metrics.py"),
                                              ("## Conversations", "conversations.py")])
def test_shown_code_is_the_example_file(section, example):
    """The README's code in ``section`` is examples/``example`` (whose output it shows)."""
    block = README.split(section, 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = (ROOT / "examples" / example).read_text(encoding="utf-8")
    assert code.split('"""', 2)[2].lstrip("\n") == block


@pytest.mark.parametrize("command", EXAMPLES)
def test_example_output_is_what_the_script_prints(command, tmp_path):
    """Every ``$ python examples/...`` block in the README is that script's output today."""
    env = {**os.environ, "RAGMETER_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, *command.split()[1:]], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == shown_output(command)


def test_synopsis_lists_every_command():
    """Every subcommand the parser knows (plugins included) appears in the README's synopsis."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    synopsis = README.split("## Command line", 1)[1].split("```", 2)[1]
    assert sorted(c for c in commands if f"ragmeter {c} " not in synopsis) == []


def test_adding_a_metric_example_runs(capsys, monkeypatch):
    """The README's custom metric runs as shown and agrees with the verdicts faithfulness reports."""
    block = README.split("### Adding a metric", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    mean = float(capsys.readouterr().out.strip())
    result = namespace["result"]
    values = [r.scores["no_contradiction"].value for r in result]
    assert mean == pytest.approx(sum(values) / len(values)) and 0.0 <= mean <= 1.0
    # worked from the same claims: contradicted claims are a subset of the unsupported ones
    for r in result:
        claims = r.scores["faithfulness"].details["claims"]
        contradicted = sum(c["verdict"] == "contradicted" for c in claims)
        assert r.scores["no_contradiction"].value == pytest.approx(1 - contradicted / len(claims) if claims else 1.0)


def test_span_processor_settings_table_matches_the_code():
    """Every RAGMETER_* setting of the span processor is in the README's table, with its default."""
    from ragmeter.tracing.settings import SETTINGS

    rows = dict(re.findall(r"^\| `(RAGMETER_[A-Z_]+)` \| ([0-9.]+) \|", README, re.M))
    assert {s.env: float(s.default) for s in SETTINGS} == {k: float(v) for k, v in rows.items()}
