"""The README is the front door and tells the truth: at most 12 KB; the Quick start block is the
two commands ``.ci/run`` runs verbatim, followed by what the first one prints (tests/project/test_docs.py
runs every README block and compares the output it shows); every link leads somewhere; one install
line per extra it names. The manual keeps what moved there from the README checked the same way:
the examples' shown code and output, the command synopsis, the custom metric, the span processor's
settings table."""

from __future__ import annotations

import re
import tomllib

import pytest
from test_docs import RUN_BLOCKS, parse_blocks

from helpers import ROOT
from ragmeter.cli import build_parser

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = ROOT / "docs"


def page(path: str) -> str:
    return (DOCS / path).read_text(encoding="utf-8")


def test_readme_is_a_front_door():
    assert len(README.encode("utf-8")) <= 12 * 1024, f"README.md is {len(README.encode())} bytes; the limit is 12 KB"


def test_quick_start_is_two_commands_then_what_the_first_prints():
    """``.ci/run`` reads the first fenced block of "## Quick start" and needs exactly two commands;
    the console block after it shows the first command's run, and the docs test runs it."""
    section = README.split("## Quick start\n", 1)[1].split("\n## ", 1)[0]
    first = section.split("```", 2)[1]
    commands = [line for line in first.split("\n")[1:] if line.strip()]
    assert len(commands) == 2 and commands[0].endswith("&& ragmeter evaluate examples/rag_samples.jsonl")
    blocks = parse_blocks(section, "README.md")
    assert blocks[0].not_run and blocks[1].lang == "console"
    assert blocks[1].code.startswith("$ ragmeter evaluate examples/rag_samples.jsonl\nragmeter: 20 samples scored")
    shown = [b for b in RUN_BLOCKS if b.page == "README.md" and b.lang == "console"]
    assert any(b.code == blocks[1].code for b in shown), "the Quick start output is not among the blocks that run"


def _slug(heading: str) -> str:
    """The anchor MkDocs (and GitHub) make of a heading."""
    text = re.sub(r"[`*]", "", heading.strip()).lower()
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def test_every_readme_link_resolves():
    """Relative links lead to a file of the repository, and an anchor to a heading of that page."""
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) >= 15
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), f"README links to {link}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"README links to {link}: no such heading"


def test_one_install_line_per_extra_named():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = set(re.findall(r'pip install "ragmeter\[([\w-]+)\]"', README))
    assert named <= extras
    assert {"local", "openai", "anthropic", "langchain", "llamaindex", "otel", "phoenix", "langfuse"} <= named


@pytest.mark.parametrize(
    "doc, command",
    [
        ("deciding/monitoring.md", "python examples/monitor_degradation.py"),
        ("designing/custom-metrics.md", "python examples/custom_metrics.py"),
        ("designing/conversations.md", "python examples/conversations.py"),
    ],
)
def test_manual_shows_example_outputs(doc, command):
    """The examples' output is shown in the manual, in a console block the docs test runs and compares."""
    blocks = [b for b in RUN_BLOCKS if b.page == f"docs/{doc}" and b.lang == "console"]
    assert any(b.code.startswith(f"$ {command}\n") and len(b.code.split("\n")) > 3 for b in blocks)


@pytest.mark.parametrize(
    "doc, example",
    [("designing/custom-metrics.md", "custom_metrics.py"), ("designing/conversations.md", "conversations.py")],
)
def test_shown_code_is_the_example_file(doc, example):
    """The manual's first code block on ``doc`` is examples/``example`` (whose output it shows)."""
    block = page(doc).split("```python\n", 1)[1].split("```", 1)[0]
    code = (ROOT / "examples" / example).read_text(encoding="utf-8")
    assert code.split('"""', 2)[2].lstrip("\n") == block


def test_synopsis_lists_every_command():
    """Every subcommand the parser knows (plugins included) appears in the CLI page's synopsis."""
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    synopsis = page("cli.md").split("```text\n", 1)[1].split("```", 1)[0]
    assert sorted(c for c in commands if f"ragmeter {c} " not in synopsis) == []


def test_adding_a_metric_example_runs(capsys, monkeypatch):
    """The manual's custom metric runs as shown and agrees with the verdicts faithfulness reports."""
    block = page("extending.md").split("## A metric", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    exec(compile(block, "docs/extending.md", "exec"), namespace)
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
    """Every RAGMETER_* setting of the span processor is in the OpenTelemetry page's table, with its default."""
    from ragmeter.tracing.settings import SETTINGS

    rows = dict(re.findall(r"^\| `(RAGMETER_[A-Z_]+)` \| ([0-9.]+) \|", page("tracing/index.md"), re.M))
    assert {s.env: float(s.default) for s in SETTINGS} == {k: float(v) for k, v in rows.items()}
