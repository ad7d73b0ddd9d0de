"""Plugins (:mod:`ragmeter.plugins`): a separate package adds a metric (entry-point group
``ragmeter.metrics``) and a judge backend (``ragmeter.judges``, a spec prefix) without editing
ragmeter, and a broken plugin is reported by name without breaking ragmeter.

The plugin is a tiny distribution written to a temp folder: a module and a ``.dist-info`` with
its ``entry_points.txt``, which ``importlib.metadata`` reads from ``sys.path`` (as pip would have
installed it, without touching the test environment). Each check runs in a fresh interpreter with
the folder on ``PYTHONPATH``, since plugins are read once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN = '''
"""A ragmeter plugin: one metric, one judge backend."""
from dataclasses import replace

from ragmeter.data import Score
from ragmeter.judges import Judge, OfflineJudge
from ragmeter.metrics import Metric


class ShortAnswer(Metric):
    """``short_answer``: 1 for an answer of at most 5 words, else 5 / words (7 words: 0.7143)."""

    name = "short_answer"
    threshold, warn = 0.9, 0.5
    requires = ("answer",)
    uses_judge = False
    needs_question = False

    async def compute(self, sample, ctx):
        words = len((sample.answer or "").split())
        return Score(self.name, min(1.0, 5 / words), explanation=f"{words} words")


class DemoJudge(Judge):
    """The offline judge under another name: ``demojudge:MODEL``."""

    kind = "CODE"

    def __init__(self, model):
        self.name = f"demojudge:{model or 'default'}"
        self.inner = OfflineJudge(embeddings=False)
        self.generates_questions = self.inner.generates_questions

    async def run(self, task, inputs):
        return replace(await self.inner.run(task, inputs), judge=self.name)


def build(spec, model, url, kwargs):
    return DemoJudge(model)


NOT_CALLABLE = 42


def register_broken(subparsers):
    raise RuntimeError("this command cannot register")
'''

GOOD = {
    "ragmeter.metrics": {"short_answer": "ragmeter_demo_plugin:ShortAnswer"},
    "ragmeter.judges": {"demojudge": "ragmeter_demo_plugin:build"},
}
BROKEN = {
    "ragmeter.metrics": {
        "missing_module": "ragmeter_no_such_module:Metric",  # cannot be imported
        "not_a_metric": "ragmeter_demo_plugin:build",  # a function, not a Metric
        "faithfulness": "ragmeter_demo_plugin:ShortAnswer",  # a name ragmeter has
        "explodes": "ragmeter_demo_plugin_explodes:Boom",
    },  # raises on import
    "ragmeter.judges": {
        "offline": "ragmeter_demo_plugin:build",  # a spec ragmeter has
        "notcallable": "ragmeter_demo_plugin:NOT_CALLABLE",
    },
    "ragmeter.cli": {"broken-cmd": "ragmeter_demo_plugin:register_broken"},
}


def write_distribution(root: Path, name: str, groups: dict[str, dict[str, str]]) -> None:
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
            for group, entries in groups.items()
        )
    )


@pytest.fixture
def plugins(tmp_path) -> Path:
    """A folder holding the demo plugin package and its distribution, and a broken one."""
    (tmp_path / "ragmeter_demo_plugin.py").write_text(PLUGIN)
    (tmp_path / "ragmeter_demo_plugin_explodes.py").write_text("raise RuntimeError('a bug at import')\n")
    write_distribution(tmp_path, "ragmeter_demo_plugin", GOOD)
    return tmp_path


def run(code: str, path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, cwd=path, timeout=300
    )


EVALUATE = """
    import json
    import ragmeter as rm
    from ragmeter.metrics import REGISTRY, metric_names

    sample = rm.Sample("Who wrote Dune?", ["Dune is a novel by Frank Herbert."],
                       answer="Dune is a novel by Frank Herbert.")
    result = rm.evaluate([sample], metrics=["faithfulness", "short_answer"], judge="demojudge:tiny", progress=False)
    scores = result[0].scores
    from ragmeter.plugins import problems
    print(json.dumps({"short": [scores["short_answer"].value, scores["short_answer"].label],
                      "judge": [result.judge, scores["faithfulness"].judge, scores["faithfulness"].value],
                      "registered": "short_answer" in REGISTRY and "short_answer" in metric_names(),
                      "problems": sorted(problems())}))
"""


def test_a_plugin_adds_a_metric_and_a_judge_backend(plugins):
    out = run(EVALUATE, plugins)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["short"] == [pytest.approx(5 / 7), "warn"]  # 7 words: 5 / 7, between warn 0.5 and pass 0.9
    judge, faithfulness_judge, faithfulness = got["judge"]
    assert judge == faithfulness_judge == "demojudge:tiny"
    assert faithfulness == 1.0  # the answer is the chunk: every claim supported (the offline judge's verdict)
    assert got["registered"] and got["problems"] == []


def test_the_cli_lists_and_runs_the_plugin(plugins):
    data = plugins / "data.jsonl"
    data.write_text(
        json.dumps(
            {
                "question": "Who wrote Dune?",
                "contexts": ["Dune is a novel by Frank Herbert."],
                "answer": "Dune is a novel by Frank Herbert.",
            }
        )
        + "\n"
    )
    helped = run("from ragmeter.cli import main; main(['evaluate', '--help'])", plugins)
    flat = " ".join(helped.stdout.split())
    assert "short_answer" in flat and "demojudge[:MODEL][@BASE_URL]" in flat, helped.stdout
    out = run(
        f"from ragmeter.cli import main; raise SystemExit(main(['evaluate', {str(data)!r}, '--metrics', "
        "'short_answer,faithfulness', '--judge', 'demojudge:tiny']))",
        plugins,
    )
    assert out.returncode == 0, out.stderr
    assert any(line.split()[:2] == ["short_answer", "0.7143"] for line in out.stdout.splitlines()), out.stdout
    assert "demojudge:tiny" in out.stdout


def test_a_broken_plugin_is_reported_by_name_and_ragmeter_goes_on(plugins):
    write_distribution(plugins, "ragmeter_broken_plugin", BROKEN)
    out = run(EVALUATE, plugins)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["short"] == [pytest.approx(5 / 7), "warn"] and got["judge"][0] == "demojudge:tiny"  # the good one works
    assert got["problems"] == [
        "ragmeter.judges:notcallable",
        "ragmeter.judges:offline",
        "ragmeter.metrics:explodes",
        "ragmeter.metrics:faithfulness",
        "ragmeter.metrics:missing_module",
        "ragmeter.metrics:not_a_metric",
    ]
    for name, why in [
        ("missing_module", "cannot be imported: ModuleNotFoundError"),
        ("not_a_metric", "expected a subclass of ragmeter.metrics.Metric"),
        ("faithfulness", "its class's name is 'short_answer'"),
        ("explodes", "failed to load: RuntimeError: a bug at import"),
        ("offline", "ragmeter already has a judge spec 'offline'"),
        ("notcallable", "expected a builder"),
    ]:
        line = next((ln for ln in out.stderr.splitlines() if f"plugin {name!r}" in ln), "")
        assert why in line and "ragmeter_broken_plugin 0.1" in line, (name, out.stderr)
    # the built-in metric keeps its class, and the command runs with a plugin command that cannot register
    faithful = run("from ragmeter.metrics import metric_class; print(metric_class('faithfulness').__module__)", plugins)
    assert faithful.stdout.strip() == "ragmeter.metrics.faithfulness"
    helped = run("from ragmeter.cli import main; main(['--help'])", plugins)
    assert "evaluate" in helped.stdout and "plugin 'broken-cmd'" in helped.stderr and "cannot register" in helped.stderr


def test_without_plugins_nothing_is_read_at_import():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, ragmeter, ragmeter.metrics, ragmeter.judges.spec; print('importlib.metadata' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.strip() == "False", out.stderr
