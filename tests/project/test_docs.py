"""The manual (docs/) and the README tell the truth: the manual builds with ``mkdocs build
--strict`` (no broken link or reference), its generated reference pages cover the registry and the
parser, and every code block of every page and of README.md runs, its shown output compared,
unless it says why it cannot run.

The conventions (docs/contributing.md explains them to writers):

* A ```` ```python ````, ```` ```bash ```` or ```` ```console ```` block runs. The blocks of one page
  run in order, each in a fresh process, in one temporary folder per page that holds a copy of
  ``examples/``; there is no API key and no network, and the judge cache is empty.
* Output: a ```` ```text ```` block right after a python or bash block (only blank lines between)
  is that block's standard output, compared exactly. In a console block each ``$ command`` line
  runs and the lines after it, up to the next ``$`` line, are its standard output.
* ``<!-- not-run: REASON -->`` on the line before a block keeps it from running; the reason is
  required. ``<!-- llm-server -->`` runs the block with ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``
  and ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` set to a local server on 127.0.0.1 that
  speaks both wire protocols and answers every judge task validly (tests/helpers/servers.py).
  ``pycon`` / ``>>>`` blocks are refused: write a python block and its output.
* ``RAGMETER_UPDATE_DOCS=1`` writes what each block printed into its page (the output block of a
  python or bash block that shows one, the output lines of a console block) instead of
  comparing: for a change that alters output on purpose; read the diff before committing it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pytest

from helpers import ROOT
from helpers.browser import console_errors, full_page, screenshot

DOCS = ROOT / "docs"
RUNNABLE = {"python", "bash", "console"}
#: Languages that are code but may not appear: they could neither run nor be compared.
REFUSED = {"pycon", "sh", "shell", "shell-session", "py"}
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<kind>not-run|llm-server)(?::(?P<reason>.*?))?\s*-->\s*$")


@dataclass
class Block:
    """One fenced block of a page: its language, code, line, the output it shows (None: not
    shown), when it must not run the reason, and whether it runs against the local LLM server."""

    page: str
    line: int
    lang: str
    code: str
    expected: str | None = None
    not_run: str | None = None
    llm_server: bool = False

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened with ``fence`` (the same character, at least as many)."""
    text = line.strip()
    return text.startswith(fence) and text == fence[0] * len(text)


def parse_blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a Markdown page, with the output block that follows a runnable one
    folded into it (see the module docstring)."""
    lines = text.split("\n")
    raw: list[tuple[int, str, str, dict, int]] = []  # (line, lang, code, markers, end line)
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"])
        lang = m["info"].strip().split(" ")[0].split("{")[0].lower()
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = "\n".join(line[indent:] if line[:indent].strip() == "" else line for line in lines[i + 1 : end])
        markers: dict[str, str] = {}  # the marker comments right above the block (blank lines between)
        before = i - 1
        while before >= 0:
            if not lines[before].strip():
                before -= 1
                continue
            marker = _MARKER.match(lines[before])
            if not marker:
                break
            markers.setdefault(marker["kind"], (marker["reason"] or "").strip())
            before -= 1
        raw.append((i + 1, lang, body + "\n" if body else "", markers, end))
        i = end + 1
    blocks: list[Block] = []
    skip_next = False
    for n, (line, lang, code, markers, end) in enumerate(raw):
        if skip_next:
            skip_next = False
            continue
        block = Block(page, line, lang, code, not_run=markers.get("not-run"), llm_server="llm-server" in markers)
        if lang in ("python", "bash") and n + 1 < len(raw):
            nxt_line, nxt_lang, nxt_code, _, _ = raw[n + 1]
            between = lines[end + 1 : nxt_line - 1]
            if nxt_lang == "text" and not any(x.strip() for x in between):
                block.expected, skip_next = nxt_code, True
        blocks.append(block)
    return blocks


def _pages() -> list[Path]:
    """Every page whose code runs: the manual's, and the README (the front door)."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


ALL_BLOCKS = [
    b for page in _pages() for b in parse_blocks(page.read_text(encoding="utf-8"), page.relative_to(ROOT).as_posix())
]
RUN_BLOCKS = [b for b in ALL_BLOCKS if b.lang in RUNNABLE and b.not_run is None]


def test_the_parser_reads_the_conventions():
    """The conventions as a writer uses them: outputs folded, markers read, other blocks kept."""
    page = "\n".join(
        [
            "# Page",
            "",
            "```python",
            "print(1 + 1)",
            "```",
            "",
            "```text",
            "2",
            "```",
            "",
            "<!-- not-run: needs an OpenAI key -->",
            "```bash",
            "ragmeter evaluate x --judge openai",
            "```",
            "",
            "```console",
            "$ echo hi",
            "hi",
            "```",
            "",
            "```bash",
            "true",
            "```",
            "Some text.",
            "```text",
            "x",
            "```",
            "",
            "```yaml",
            "a: 1",
            "```",
        ]
    )
    blocks = parse_blocks(page, "page.md")
    assert [(b.lang, b.line, b.expected, b.not_run) for b in blocks] == [
        ("python", 3, "2\n", None),
        ("bash", 12, None, "needs an OpenAI key"),
        ("console", 16, None, None),
        ("bash", 21, None, None),
        ("text", 25, None, None),
        ("yaml", 29, None, None),
    ]
    assert blocks[2].code == "$ echo hi\nhi\n"
    marked = parse_blocks(
        "<!-- llm-server -->\n\n<!-- not-run: installs packages -->\n```bash\nx\n```\n"
        "<!-- llm-server -->\n```python\nprint(1)\n```\n",
        "p.md",
    )
    assert [(b.not_run, b.llm_server) for b in marked] == [("installs packages", True), (None, True)]
    assert {b.page for b in ALL_BLOCKS} >= {"README.md", "docs/install.md"}


def test_every_code_block_runs_or_says_why():
    """Code in the manual runs in the tests; a block that cannot run names the reason."""
    assert len(RUN_BLOCKS) >= 5, "the manual's runnable blocks were not found"
    refused = [b.id for b in ALL_BLOCKS if b.lang in REFUSED]
    assert refused == [], f"write these as python / bash / console blocks: {refused}"
    no_reason = [b.id for b in ALL_BLOCKS if b.not_run is not None and not b.not_run]
    assert no_reason == [], f"<!-- not-run: --> needs a reason: {no_reason}"
    marked_display = [b.id for b in ALL_BLOCKS if (b.not_run is not None or b.llm_server) and b.lang not in RUNNABLE]
    assert marked_display == [], f"markers on blocks that never run: {marked_display}"


@pytest.fixture(scope="module")
def page_dirs(tmp_path_factory):
    """One working folder per page (blocks of a page share it, in order), with examples/ copied."""
    made: dict[str, Path] = {}

    def get(page: str) -> Path:
        if page not in made:
            folder = tmp_path_factory.mktemp("doc-" + re.sub(r"\W+", "-", page))
            shutil.copytree(ROOT / "examples", folder / "examples")
            made[page] = folder
        return made[page]

    return get


@pytest.fixture(scope="module")
def llm_server():
    """The local server ``<!-- llm-server -->`` blocks talk to: OpenAI and Anthropic wire protocols on
    127.0.0.1, a valid answer to every judge task (the oracle of tests/helpers/servers.py)."""
    from helpers.servers import FakeLLMServer

    with FakeLLMServer() as server:
        yield server


def _env(folder: Path, server=None) -> dict[str, str]:
    # CI / BUILD_NUMBER make pytest print its short summary untruncated: a page shows a terminal's output.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "ANTHROPIC_", "RAGMETER_", "PYTEST_")) and k not in ("CI", "BUILD_NUMBER")
    }
    env.update(
        {
            "RAGMETER_CACHE_DIR": str(folder / ".cache"),
            "COLUMNS": "120",
            "NO_COLOR": "1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    if server is not None:
        env.update(
            {
                "OPENAI_BASE_URL": server.openai_url,
                "OPENAI_API_KEY": "sk-local-docs",
                "ANTHROPIC_BASE_URL": server.url,
                "ANTHROPIC_API_KEY": "sk-ant-local-docs",
            }
        )
    return env


def _run(argv: list[str], folder: Path, what: str, server=None) -> str:
    out = subprocess.run(argv, cwd=folder, env=_env(folder, server), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{what} exited {out.returncode}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
    return out.stdout


UPDATE = os.environ.get("RAGMETER_UPDATE_DOCS") == "1"
#: RAGMETER_DOCS_OUTPUTS=run-only: every block must still run, but what it prints is not compared
#: (.ci/run's leg on the oldest supported versions, where scipy's older p-values and the like print
#: other digits than the page, which shows today's versions).
COMPARE = os.environ.get("RAGMETER_DOCS_OUTPUTS") != "run-only"


def _write_output(block: Block, new: str) -> None:
    """RAGMETER_UPDATE_DOCS=1: put ``new`` into ``block``'s page as what it shows (a python or bash
    block's output block; a console block's whole text, commands and outputs). The page is read
    again, since an earlier rewrite may have moved the block's lines."""
    path = ROOT / block.page
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    found = [b for b in parse_blocks(text, block.page) if b.lang == block.lang and b.code == block.code]
    assert len(found) == 1, f"{block.id}: cannot find the block again to write its output"
    start = found[0].line  # the line after the opening fence (0-based index of the body)
    if block.lang == "console":
        end = start
        while not _closes(lines[end], "```"):
            end += 1
        lines[start:end] = new.removesuffix("\n").split("\n")
    else:
        end = start
        while not _closes(lines[end], "```"):
            end += 1
        out_start = end + 1
        while not lines[out_start].strip():
            out_start += 1
        assert lines[out_start].strip() == "```text", f"{block.id}: no output block to write"
        out_end = out_start + 1
        while not _closes(lines[out_end], "```"):
            out_end += 1
        lines[out_start + 1 : out_end] = new.removesuffix("\n").split("\n") if new else []
    path.write_text("\n".join(lines), encoding="utf-8")


def _console(code: str) -> list[tuple[str, str | None]]:
    """A console block's ``(command, shown output or None)`` pairs."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"a console block starts with '$ command', not {line!r}")
    return [(cmd, "\n".join(out) + "\n" if out else None) for cmd, out in steps]


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[b.id for b in RUN_BLOCKS])
def test_doc_block_runs_and_prints_what_the_page_shows(block, page_dirs, request):
    folder = page_dirs(block.page)
    server = request.getfixturevalue("llm_server") if block.llm_server else None
    if block.lang in ("python", "bash"):
        if block.lang == "python":
            script = folder / f"block_{block.line}.py"
            script.write_text(block.code, encoding="utf-8")
            stdout = _run([sys.executable, script.name], folder, block.id, server)
        else:
            stdout = _run(["bash", "-euo", "pipefail", "-c", block.code], folder, block.id, server)
        if block.expected is not None and stdout != block.expected and UPDATE:
            _write_output(block, stdout)
        elif block.expected is not None and COMPARE:
            assert stdout == block.expected, f"{block.id} printed other output than the page shows"
    else:
        shown_now, differs = [], False
        for command, shown in _console(block.code):
            stdout = _run(["bash", "-euo", "pipefail", "-c", command], folder, f"{block.id}: $ {command}", server)
            shown_now += [f"$ {command}", *([stdout.rstrip("\n")] if shown is not None and stdout.strip() else [])]
            if shown is not None and stdout != shown and COMPARE:
                differs = True
                assert UPDATE, f"{block.id}: '$ {command}' printed other output than the page shows"
        if differs:
            _write_output(block, "\n".join(shown_now) + "\n")


# --------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The manual built with ``mkdocs build --strict`` (a warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return out


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.mark.slow
def test_manual_builds_with_generated_references(site):
    from ragmeter.cli import build_parser
    from ragmeter.judges.spec import SPECS
    from ragmeter.judges.tasks import TASKS
    from ragmeter.metrics import METRIC_NAMES, REGISTRY, get_metric

    metrics = (site / "reference" / "metrics" / "index.html").read_text(encoding="utf-8")
    for name in METRIC_NAMES:
        assert f"<code>{name}</code>" in metrics, f"the metrics reference lacks {name}"
    for name in REGISTRY:  # each registered metric's own levels, from the class
        metric = get_metric(name)
        assert f"pass at {metric.threshold:g}, warn at {metric.warn:g}" in _text(metrics)
    row = re.search(r"<code>faithfulness</code></a></td>(.*?)</tr>", metrics, re.S)[1]
    assert "<code>extract_claims</code>, <code>verify_claims</code>" in row and "0.85 / 0.7" in row

    judges = (site / "reference" / "judges" / "index.html").read_text(encoding="utf-8")
    # A spec form may hold '>' (cascade:offline>JUDGE), escaped in the page.
    assert all(f"<code>{escape(form, quote=False)}</code>" in judges for form, _ in SPECS.values())
    assert all(f"<code>{task}</code>" in judges for task in TASKS)

    cli = _text((site / "reference" / "cli" / "index.html").read_text(encoding="utf-8"))
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert {"evaluate", "compare", "evaluate-traces", "serve", "labels"} <= set(commands)  # plugins included
    for name in commands:
        assert f"ragmeter {name}" in cli and f"usage: ragmeter {name}" in cli

    api = (site / "api" / "ragmeter.judges" / "index.html").read_text(encoding="utf-8")
    assert 'id="ragmeter.judges.openai.OpenAIJudge"' in api and "any OpenAI-compatible server" in _text(api)
    langchain = (site / "api" / "ragmeter.integrations.langchain" / "index.html").read_text(encoding="utf-8")
    assert 'id="ragmeter.integrations.langchain.handler.RagmeterCallbackHandler"' in langchain
    assert ":class:" not in _text(api) + _text(langchain)  # reStructuredText roles converted


# --------------------------------------------------------------------------- in Chromium

PICTURE = DOCS / "assets" / "report.png"
#: The README's picture: the top of the report, at this window size.
PICTURE_WINDOW = (1280, 820)


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on 127.0.0.1 (the search index loads in a web worker, which file://
    does not allow)."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)


def _wait(driver, condition: str, timeout: float = 20.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(condition))


@pytest.mark.slow
def test_home_and_metrics_pages_in_chromium(browser, served, tmp_path):
    from ragmeter.metrics import METRIC_NAMES

    browser.set_window_size(1400, 1000)
    browser.get(served + "/")
    _wait(browser, "return document.readyState === 'complete'")
    assert browser.title == "ragmeter"
    heading = browser.execute_script("return document.querySelector('article h1').firstChild.textContent.trim()")
    assert heading == "ragmeter"
    picture = browser.execute_script(
        "const i = document.querySelector('article img'); return i && i.complete ? [i.naturalWidth, i.src] : null"
    )
    assert picture and picture[0] == PICTURE_WINDOW[0] and picture[1].endswith("assets/report.png")
    nav = browser.execute_script(
        "return [...document.querySelectorAll('.md-nav__link')].map(a => a.textContent.trim())"
    )
    assert {
        "Install",
        "Concepts",
        "Metrics",
        "Judges",
        "The offline judge",
        "Command line",
        "LangChain",
        "LlamaIndex",
        "OpenTelemetry",
        "Evaluation service",
        "Compare and gate",
        "Trust",
        "Measured",
        "Extending",
        "Architecture",
        "ragmeter.metrics",
        "Contributing",
    } <= set(nav)
    full_page(browser, max_height=4000)
    screenshot(browser, "docs-home.png", tmp_path)
    assert console_errors(browser) == []

    browser.set_window_size(1400, 1000)
    browser.get(served + "/reference/metrics/")
    _wait(browser, "return document.readyState === 'complete'")
    first_cells = browser.execute_script(
        "return [...document.querySelector('article table').rows].slice(1).map(r => r.cells[0].textContent.trim())"
    )
    assert set(first_cells) == set(METRIC_NAMES)
    link = browser.execute_script(
        "const a = document.querySelector('article h2#faithfulness + p a');return a ? a.getAttribute('href') : null"
    )
    assert link and link.startswith("../../api/ragmeter.metrics/#ragmeter.metrics.faithfulness.Faithfulness")
    # the search (a web worker over the built index) finds a metric
    browser.find_element("css selector", "label.md-search__icon, .md-search__input").click()
    box = browser.find_element("css selector", "input.md-search__input")
    box.send_keys("faithfulness")
    results = _wait(
        browser,
        "const r = [...document.querySelectorAll('.md-search-result__item')];"
        "return r.length ? r.map(x => x.textContent) : null",
    )
    assert any("faithfulness" in r.lower() for r in results)
    browser.find_element("css selector", "input.md-search__input").clear()
    browser.get(served + "/reference/metrics/")
    full_page(browser, max_height=6000)
    screenshot(browser, "docs-metrics.png", tmp_path)
    assert console_errors(browser) == []


_DIFF = """
const [a, b, done] = arguments;
const load = src => new Promise(ok => { const i = new Image(); i.onload = () => ok(i); i.src = src; });
Promise.all([load(a), load(b)]).then(([x, y]) => {
  if (x.width !== y.width || x.height !== y.height) { done([x.width, x.height, y.width, y.height, 1]); return; }
  const pixels = img => { const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
    const g = c.getContext('2d'); g.drawImage(img, 0, 0); return g.getImageData(0, 0, c.width, c.height).data; };
  const p = pixels(x), q = pixels(y);
  let differ = 0;
  for (let i = 0; i < p.length; i += 4)
    if (Math.max(Math.abs(p[i] - q[i]), Math.abs(p[i + 1] - q[i + 1]), Math.abs(p[i + 2] - q[i + 2])) > 24) differ++;
  done([x.width, x.height, y.width, y.height, differ / (p.length / 4)]);
});
"""


@pytest.mark.slow
def test_readme_picture_is_the_report_today(browser, tmp_path):
    """docs/assets/report.png is the top of today's HTML report of the bundled samples (at most 2% of
    its pixels differ: the run's time and date do); RAGMETER_UPDATE_SCREENSHOTS=1 rewrites it."""
    import base64

    report = tmp_path / "report.html"
    env = {**_env(tmp_path), "RAGMETER_CACHE_DIR": str(tmp_path / "cache")}
    samples = str(ROOT / "examples" / "rag_samples.jsonl")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragmeter.cli",
            "evaluate",
            samples,
            "--judge",
            "offline",
            "--no-progress",
            "--out",
            str(report),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    browser.set_window_size(*PICTURE_WINDOW)
    browser.get(report.as_uri())
    _wait(browser, "return document.readyState === 'complete'")
    assert console_errors(browser) == []
    browser.execute_script("document.documentElement.style.overflow = 'hidden'")  # no scroll bar in the picture
    width, height = browser.execute_script("return [window.innerWidth, window.innerHeight]")
    png = browser.get_screenshot_as_png()
    (tmp_path / "report.png").write_bytes(png)
    if os.environ.get("RAGMETER_UPDATE_SCREENSHOTS") == "1":
        PICTURE.write_bytes(png)
    old, new = (base64.b64encode(p).decode() for p in (PICTURE.read_bytes(), png))
    browser.get("about:blank")
    result = browser.execute_async_script(_DIFF, "data:image/png;base64," + old, "data:image/png;base64," + new)
    assert result[:2] == [width, height] == result[2:4], f"picture {result[:2]}, screenshot {result[2:4]}"
    assert result[4] < 0.02, (
        f"{result[4]:.1%} of the pixels of docs/assets/report.png differ from today's report "
        f"({tmp_path / 'report.png'}); RAGMETER_UPDATE_SCREENSHOTS=1 rewrites it"
    )


def test_install_page_has_one_line_per_extra():
    """docs/install.md lists every extra of pyproject.toml with its install line, and no other."""
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    page = (DOCS / "install.md").read_text(encoding="utf-8")
    rows = dict(
        re.findall(r'^\| `([\w-]+)` \| `pip install (?:"torch==[\d.]+" )?"ragmeter\[([\w-]+)\]"` \|', page, re.M)
    )
    assert set(rows) == extras and all(name == extra for name, extra in rows.items())
