"""MkDocs hooks of the ragmeter manual (``hooks:`` in mkdocs.yml): the pages generated from the code
at build time, and the docstring conversion the API pages use. Nothing generated is written into
``docs/``: the pages exist only in the build.

Generated pages:

* ``reference/metrics.md``: every metric of :data:`ragmeter.metrics.REGISTRY`,
  :data:`~ragmeter.metrics.STRING_METRICS`, :data:`~ragmeter.metrics.DOMAIN_METRICS` and the
  retrieval metrics, with the fields it needs, the judge tasks it asks (measured: the metric run alone with the offline judge on a sample with
  and without a reference), its pass / warn levels and its docstring (formula and example).
* ``reference/judges.md``: the judge specs of :data:`ragmeter.judges.spec.SPECS`, the judge
  classes and the judge tasks of :data:`ragmeter.judges.tasks.TASKS`.
* ``reference/cli.md``: the ``--help`` of the ``ragmeter`` command and of every subcommand, plugin
  commands included (``ragmeter.cli.build_parser``).
* ``api/<module>.md``: one page per module named in the nav under ``api/`` (add a nav line to add
  a page): the module's docstring and each public name of its ``__all__``, through mkdocstrings.

Docstrings are written in reStructuredText habits (roles such as ``:class:`X```, ``::`` literal
blocks, ``>>>`` examples, simple tables); :func:`rst_to_markdown` turns them into Markdown, here and
in mkdocstrings (:class:`RstDocstrings`, a griffe extension this hook registers).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import os
import re
import shutil
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import griffe
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
#: Where each part of the ``ragmeter`` package lives in this repository (pyproject's package-dir).
LAYERS = {"": ROOT / "core", "integrations": ROOT / "integrations", "tracing": ROOT / "tracing"}

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`<]+?)(?:\(\))?`")
_TABLE_BORDER = re.compile(r"^\s*=+( +=+)+\s*$")


# --------------------------------------------------------------------------- docstrings


def _role(match: re.Match) -> str:
    tilde, target = match.group(1), match.group(2).strip()
    title = target.rsplit(".", 1)[-1] if tilde else target.lstrip(".")
    return f'<autoref identifier="{target.lstrip(".")}" optional><code>{title}</code></autoref>'


def _prose(line: str) -> str:
    """One line of prose: roles converted, ``[`` escaped outside code (docstrings write citation
    markers such as ``[2][3]``, which Markdown would read as reference links)."""
    line = _ROLE.sub(_role, line)
    parts = re.split(r"(<autoref .*?</autoref>|``.+?``|`[^`]+`)", line)
    return "".join(p if i % 2 else p.replace("[", "\\[") for i, p in enumerate(parts))


def rst_to_markdown(text: str) -> str:
    """A docstring's reStructuredText habits in Markdown: roles become (optional) cross-references,
    ``::`` literal blocks and ``>>>`` examples fenced code, simple tables fenced text."""
    lines = textwrap.dedent(text).split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _TABLE_BORDER.match(line):  # a simple table: top border .. bottom border (3 borders)
            end, borders = i, 0
            while end < len(lines) and borders < 3:
                borders += bool(_TABLE_BORDER.match(lines[end]))
                end += 1
            out += ["```text", *textwrap.dedent("\n".join(lines[i:end])).split("\n"), "```"]
            i = end
            continue
        if stripped.startswith(">>> "):  # a doctest block: up to the next blank line
            end = i
            while end < len(lines) and lines[end].strip():
                end += 1
            block = [re.sub(r"\s*# doctest:.*$", "", text) for text in lines[i:end]]
            out += ["```pycon", *textwrap.dedent("\n".join(block)).split("\n"), "```"]
            i = end
            continue
        if stripped.endswith("::") and i + 2 < len(lines) and not lines[i + 1].strip():
            indent = len(line) - len(line.lstrip())
            end = i + 2
            while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
                end += 1
            while end > i + 2 and not lines[end - 1].strip():
                end -= 1
            head = line.rstrip()[:-2].rstrip()
            if head:
                out.append(_prose(head + ":"))
            out += ["", "```python", *textwrap.dedent("\n".join(lines[i + 2 : end])).split("\n"), "```", ""]
            i = end
            continue
        out.append(_prose(line))
        i += 1
    return "\n".join(out)


def _comment_doc(lines: list[str], lineno: int) -> str | None:
    """The ``#:`` comment lines right above line ``lineno`` (1-based), as a docstring."""
    doc: list[str] = []
    j = lineno - 2
    while j >= 0 and lines[j].lstrip().startswith("#:"):
        doc.insert(0, lines[j].lstrip()[2:].strip())
        j -= 1
    return " ".join(doc) or None


class RstDocstrings(griffe.Extension):
    """A griffe extension for mkdocstrings: docstrings converted by :func:`rst_to_markdown`, and an
    attribute's ``#:`` comment taken as its docstring."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        """Convert ``obj``'s docstring (for an attribute without one, its ``#:`` comment)."""
        if obj.docstring is None and isinstance(obj, griffe.Attribute) and obj.lineno:
            with contextlib.suppress(Exception):
                text = _comment_doc(obj.module.lines, obj.lineno)
                if text:
                    obj.docstring = griffe.Docstring(text, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)


# --------------------------------------------------------------------------- generated pages


def _doc(obj: Any) -> str:
    return rst_to_markdown(inspect.getdoc(obj) or "")


def _summary(obj: Any) -> str:
    return _doc(obj).split("\n\n", 1)[0].replace("\n", " ")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


#: The sample every metric is run on to see which judge tasks it asks (with its reference, and
#: again without it).
_SAMPLE = {
    "id": "docs",
    "question": "Where and when was Albert Einstein born?",
    "answer": "Einstein was born in Ulm [1] on 14 March 1879 [2].",
    "reference": "Albert Einstein was born in Ulm, Germany, in 1879.",
    "contexts": [
        {"id": "a", "text": "Albert Einstein was born in Ulm, in the Kingdom of Württemberg."},
        {"id": "b", "text": "He was born on 14 March 1879."},
    ],
    "relevant_ids": ["a", "b"],
}


def _tasks(metric: Any) -> str:
    """The judge tasks ``metric`` asks, run alone with the offline judge (and whether it embeds)."""
    from ragmeter.data import samples_from_records
    from ragmeter.judges.offline import OfflineJudge
    from ragmeter.metrics.requests import ScoringContext

    if not metric.uses_judge:
        return "none (deterministic)"
    seen = {}
    for label, record in (("with a reference", _SAMPLE), ("without", {**_SAMPLE, "reference": None})):
        (sample,) = samples_from_records([record])
        if metric.missing_fields(sample):
            continue
        judge = OfflineJudge(embeddings=False)
        score = metric.score(sample, judge=judge)
        tasks = ", ".join(f"`{t}`" for t in sorted(score.details.get("judge_usage", {}))) or "none"
        ctx = ScoringContext(sample, judge=judge, metrics=[metric])
        if asyncio.run(metric.embedding_inputs(sample, ctx)):
            tasks += " + one embedding call"
        seen.setdefault(tasks, []).append(label)
    if len(seen) == 1:
        return next(iter(seen))
    return "; ".join(f"{' / '.join(labels)}: {tasks}" for tasks, labels in seen.items())


def metrics_page() -> str:
    """``reference/metrics.md``: every metric, from the registry."""
    from ragmeter.metrics import (
        DEFAULT_METRICS,
        DEFAULT_RETRIEVAL_METRICS,
        DOMAIN_METRICS,
        REGISTRY,
        RETRIEVAL_METRICS,
        STRING_METRICS,
        metric_class,
        retrieval,
    )
    from ragmeter.metrics.ir import _FUNCTIONS, RetrievalMetric

    rows, sections = [], []
    for group, names in (("RAG", REGISTRY), ("string", STRING_METRICS), ("domain", DOMAIN_METRICS)):
        for name in names:
            cls = metric_class(name)
            metric = cls()
            path = f"{cls.__module__}.{cls.__qualname__}"
            rows.append(
                f"| [`{name}`](#{name}) | {group} | {', '.join(metric.requires)} | {_tasks(metric)} | "
                f"{metric.threshold:g} / {metric.warn:g} |"
            )
            sections.append(
                f"## {name}\n\n[`{cls.__qualname__}`][{path}] (`{cls.__module__}`): pass at "
                f"{metric.threshold:g}, warn at {metric.warn:g}; needs {', '.join(metric.requires)}."
                f"\n\n{_doc(cls)}\n"
            )
    retrieval_rows = []
    for kind, (fn, takes_k, threshold, warn) in _FUNCTIONS.items():
        name = f"{kind}@k" if takes_k else kind
        rows.append(
            f"| [`{name}`](#retrieval-metrics) | retrieval | relevant_ids, contexts (ids) | "
            f"none (deterministic) | {threshold:g} / {warn:g} |"
        )
        retrieval_rows.append(
            f"| `{name}` | [`{fn.__name__}`][{fn.__module__}.{fn.__name__}] | "
            f"{_cell(_summary(fn))} | {threshold:g} / {warn:g} |"
        )
    assert {r.split("`")[1] for r in retrieval_rows} == set(RETRIEVAL_METRICS)
    return "\n".join(
        [
            "# Metrics",
            "",
            "Generated from the metric registry (`ragmeter.metrics.REGISTRY`, `STRING_METRICS`, "
            "`DOMAIN_METRICS`, `RETRIEVAL_METRICS`) when the manual is built. *Judge tasks* are the tasks the metric asked "
            "when it ran alone with the offline judge on a sample with a reference and again without one; "
            "each task runs once per sample and serves every metric of the run that needs it (an LLM judge "
            "answers `rate_chunks` and `attribute_statements` in one `review_context` call when a run needs "
            "both). *Pass / warn*: "
            "a value at or above the first is `pass`, at or above the second `warn`, else `fail`; every "
            "level is a constructor argument (`Faithfulness(threshold=0.9, warn=0.8)`).",
            "",
            f"Default metrics: {', '.join(f'`{m}`' for m in DEFAULT_METRICS)}, plus "
            f"{', '.join(f'`{m}`' for m in DEFAULT_RETRIEVAL_METRICS)} for samples with `relevant_ids`.",
            "",
            "| metric | kind | needs | judge tasks | pass / warn |",
            "|---|---|---|---|---|",
            *rows,
            "",
            *sections,
            "## Retrieval metrics",
            "",
            f"[`RetrievalMetric`][ragmeter.metrics.ir.RetrievalMetric]: {_doc(RetrievalMetric)}",
            "",
            "| metric | function | definition | pass / warn |",
            "|---|---|---|---|",
            *retrieval_rows,
            "",
            _doc(retrieval),
            "",
        ]
    )


def judges_page() -> str:
    """``reference/judges.md``: the judge specs, judge classes and judge tasks."""
    import ragmeter.judges as judges_module
    from ragmeter.judges import spec as spec_module
    from ragmeter.judges.tasks import COMBINED_TASKS, TASKS

    spec_rows = []
    for backend, (form, _build) in spec_module.SPECS.items():
        # A cascade needs the judge after '>'; its scores carry the name of the member that decided.
        example = {"ollama": "ollama:MODEL", "cascade": "cascade:offline>openai"}.get(backend, backend)
        judge = spec_module.judge_from_spec(example, **({} if backend == "offline" else {"api_key": "sk-docs"}))
        cls = type(judge)
        members = (getattr(judge, "first", None), getattr(judge, "then", None))
        name = (
            f"`{members[0].name}` or `{members[1].name}` (the member that decided)"
            if all(members)
            else f"`{judge.name}`"
        )
        spec_rows.append(f"| `{form}` | [`{cls.__name__}`][{cls.__module__}.{cls.__qualname__}] | {name} |")
    class_rows = []
    for name in judges_module.__all__:
        obj = getattr(judges_module, name)
        if inspect.isclass(obj):
            class_rows.append(f"| [`{name}`][{obj.__module__}.{obj.__qualname__}] | {_cell(_summary(obj))} |")
    task_rows = [
        f"| `{name}` | {task.version} | {_cell(task.system.split('. ')[0])}. |"
        for name, task in {**TASKS, **COMBINED_TASKS}.items()
    ]
    return "\n".join(
        [
            "# Judges",
            "",
            "Generated from the judge-spec registry (`ragmeter.judges.spec.SPECS`), the public names of "
            "`ragmeter.judges` and the judge tasks (`ragmeter.judges.tasks.TASKS`) when the manual is built.",
            "",
            "## Judge specs",
            "",
            "What `--judge` (and `judge=\"...\"` in Python) accepts. The judge column is the class the spec "
            "builds and the name its scores carry, for the spec without a model.",
            "",
            "| spec | class | judge name |",
            "|---|---|---|",
            *spec_rows,
            "",
            _doc(spec_module.default_judge),
            "",
            "## Judges and embedders",
            "",
            "| class | what it is |",
            "|---|---|",
            *class_rows,
            "",
            "## Judge tasks",
            "",
            _doc(importlib.import_module("ragmeter.judges.tasks")),
            "",
            "| task | version | what the judge is asked |",
            "|---|---|---|",
            *task_rows,
            "",
        ]
    )


def cli_page() -> str:
    """``reference/cli.md``: the help of every command, from the argument parser."""
    from ragmeter.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        parts = [
            "# Command line",
            "",
            "Generated from the argument parser (`ragmeter.cli.build_parser`, with the commands other "
            "layers register through the `ragmeter.cli` entry-point group) when the manual is built.",
            "",
            "```text",
            parser.format_help().rstrip(),
            "```",
            "",
        ]

        def walk(p: Any, prefix: str) -> None:
            for action in p._actions:
                if getattr(action, "choices", None) and hasattr(action, "_name_parser_map"):
                    for name, sub in action.choices.items():
                        parts.extend(
                            [
                                f"{'#' * min(4, prefix.count(' ') + 2)} {prefix} {name}",
                                "",
                                "```text",
                                sub.format_help().rstrip(),
                                "```",
                                "",
                            ]
                        )
                        walk(sub, f"{prefix} {name}")

        walk(parser, "ragmeter")
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(parts)


def api_page(module_name: str, faces: Sequence[str] = ()) -> str:
    """``api/<module_name>.md``: the module's docstring and every public name, via mkdocstrings. A
    name defined in another module of ``faces`` (the modules with an API page) is documented on that
    page and linked from this one: one object, one primary place for cross-references."""
    module = importlib.import_module(module_name)
    parts = [
        f"# {module_name}",
        "",
        f"::: {module_name}",
        "    options:",
        "      members: false",
        "      show_root_heading: false",
        "      show_root_toc_entry: false",
        "",
    ]
    for name in getattr(module, "__all__", []):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if inspect.ismodule(obj):
            parts += [f"## {name}", "", f"The module `{obj.__name__}`: {_summary(obj)}", ""]
            continue
        defined = getattr(obj, "__module__", None) if (inspect.isclass(obj) or inspect.isfunction(obj)) else None
        if defined is None:  # data: where it is written (a lazy face names the module in its _LAZY table)
            defined = getattr(module, "_LAZY", {}).get(name)
            path = f"{defined or module_name}.{name}"
            defined = None
        else:
            path = f"{defined}.{obj.__qualname__}"
        if defined and defined != module_name and defined in faces:
            parts += [f"## {name}", "", f"[`{path}`][{path}]: {_summary(obj)}", ""]
            continue
        if defined and not _static(path):  # built at run time (e.g. one class per metric): no source
            parts += [f"## {name}", "", _doc(obj), ""]
            continue
        parts += [f"::: {path}", "    options:", "      heading_level: 2", f"      toc_label: {name}", ""]
    return "\n".join(parts)


_GRIFFE: dict[str, Any] = {}


def _static(path: str) -> bool:
    """Whether griffe finds ``path`` in the source (objects made at run time are not there)."""
    if "package" not in _GRIFFE:
        _GRIFFE["package"] = griffe.load("ragmeter", search_paths=[_GRIFFE["src"]], resolve_aliases=False)
    try:
        _GRIFFE["package"][path.split(".", 1)[1]]
    except (KeyError, griffe.AliasResolutionError):
        return False
    return True


# --------------------------------------------------------------------------- mkdocs events


def _source_tree(folder: Path) -> Path:
    """The ``ragmeter`` package as one folder of links (core/ with integrations/ and tracing/ inside)
    for griffe, which reads the source rather than importing it."""
    package = folder / "ragmeter"
    package.mkdir(parents=True)
    for sub, source in LAYERS.items():
        if sub:
            (package / sub).symlink_to(source, target_is_directory=True)
        else:
            for child in source.iterdir():
                if child.name != "__pycache__":
                    (package / child.name).symlink_to(child)
    return folder


@event_priority(100)  # before mkdocstrings reads its handler settings
def on_config(config: Any) -> Any:
    """Point mkdocstrings at the linked source tree and register the docstring conversion."""
    if "tmp" not in _GRIFFE:  # once per process (mkdocs serve calls this on every rebuild)
        _GRIFFE["tmp"] = tmp = tempfile.mkdtemp(prefix="ragmeter-docs-")
        _GRIFFE["src"] = str(_source_tree(Path(tmp)))
    _GRIFFE.pop("package", None)
    python = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    python["paths"] = [_GRIFFE["src"]]
    python.setdefault("options", {})["extensions"] = [f"{Path(__file__).resolve()}:RstDocstrings"]
    return config


def _api_modules(nav: Any) -> list[str]:
    found: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str):
            if item.startswith("api/") and item.endswith(".md"):
                found.append(item[4:-3])
        elif isinstance(item, dict):
            for value in item.values():
                walk(value)
        elif isinstance(item, list):
            for value in item:
                walk(value)

    walk(nav or [])
    return found


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages."""
    pages = {"reference/metrics.md": metrics_page, "reference/judges.md": judges_page, "reference/cli.md": cli_page}
    for uri, build in pages.items():
        files.append(File.generated(config, uri, content=build()))
    faces = list(dict.fromkeys(_api_modules(config.nav)))
    for module in faces:
        files.append(File.generated(config, f"api/{module}.md", content=api_page(module, faces)))
    return files


def on_shutdown() -> None:
    """Remove the linked source tree."""
    if "tmp" in _GRIFFE:
        shutil.rmtree(_GRIFFE.pop("tmp"), ignore_errors=True)
