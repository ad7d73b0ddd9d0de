"""The public surface is written down (docs/api.md) and held to: the page lists each package face
with exactly the names of its ``__all__``; every other module says "Internal:" first in its
docstring; the code in the manual, the README and ``examples/`` imports only from the faces."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from helpers import ROOT

LAYERS = {"core": "ragmeter", "integrations": "ragmeter.integrations", "tracing": "ragmeter.tracing"}
#: Names a face makes per registered metric (one LlamaIndex evaluator class each): not listed one by one.
GENERATED = re.compile(r"^Ragmeter\w+Evaluator$")


def documented_faces() -> dict[str, set[str]]:
    """docs/api.md: face -> the names listed under its ``## `face``` heading (the paragraph after
    the one-line description)."""
    faces: dict[str, set[str]] = {}
    sections = re.split(r"^## `([\w.]+)`\s*$", (ROOT / "docs" / "api.md").read_text(encoding="utf-8"), flags=re.M)
    for face, body in zip(sections[1::2], sections[2::2]):
        paragraphs = [p for p in re.split(r"\n\s*\n", body.strip()) if p.strip()]
        faces[face] = set(re.findall(r"`([^`]+)`", paragraphs[1])) if len(paragraphs) > 1 else set()
    return faces


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in LAYERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def test_the_page_lists_every_face_with_exactly_its_names():
    faces = documented_faces()
    assert "ragmeter" in faces and len(faces) >= 15
    for face, listed in faces.items():
        if face.startswith("ragmeter.integrations.llamaindex"):
            pytest.importorskip("llama_index.core")
        if face.startswith("ragmeter.integrations.langchain"):
            pytest.importorskip("langchain_core")
        module = importlib.import_module(face)
        exported = {n for n in getattr(module, "__all__", []) if not GENERATED.match(n)}
        assert listed == exported, (
            f"{face}: on the page, not exported: {sorted(listed - exported)}; "
            f"exported, not on the page: {sorted(exported - listed)}"
        )
        for name in exported:
            assert getattr(module, name) is not None, (face, name)


def test_every_other_module_is_marked_internal():
    faces = documented_faces()
    unmarked, marked_public = [], []
    for name, path in modules().items():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        internal = doc.startswith("Internal:")
        if name in faces and internal:
            marked_public.append(name)
        elif name not in faces and not internal:
            unmarked.append(name)
    assert unmarked == [] and marked_public == []


def python_blocks(markdown: str) -> list[str]:
    """The Python code blocks of a Markdown text (``python`` / ``py`` / ``pycon`` fences), with
    ``>>>`` / ``...`` prompts taken off."""
    blocks, lang, lines = [], None, []
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            if lang is None:
                lang, lines = line.strip()[3:].strip(), []
            else:
                if lang in ("python", "py", "pycon"):
                    blocks.append(
                        "\n".join(ln.lstrip()[4:] if ln.lstrip().startswith((">>> ", "... ")) else ln for ln in lines)
                    )
                lang = None
        elif lang is not None:
            lines.append(line)
    return blocks


def ragmeter_imports(code: str) -> list[tuple[str, str | None]]:
    """``(module, name)`` of each ragmeter import in ``code`` (name None for ``import module``)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "ragmeter"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ragmeter":
            found += [(node.module, a.name) for a in node.names]
    return found


def sources() -> list[tuple[str, str]]:
    """(where, code) of every code block of README.md and docs/ and every script of examples/."""
    out = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(python_blocks(md.read_text(encoding="utf-8")), start=1):
            out.append((f"{md.relative_to(ROOT)} block {i}", block))
    for script in sorted((ROOT / "examples").rglob("*.py")):
        out.append((str(script.relative_to(ROOT)), script.read_text(encoding="utf-8")))
    return out


def test_docs_readme_and_examples_import_only_the_public_faces():
    faces = documented_faces()
    code = sources()
    assert len(code) > 20 and any("ragmeter" in c for _, c in code)
    offenders = []
    for where, text in code:
        try:
            imports = ragmeter_imports(text)
        except SyntaxError:  # a fragment with placeholders ("...") is no program: nothing to check
            continue
        for module, name in imports:
            if module not in faces:
                offenders.append(f"{where}: {module} is not a public face")
            elif (
                name is not None
                and name not in faces[module]
                and f"{module}.{name}" not in faces
                and not GENERATED.match(name)
            ):
                offenders.append(f"{where}: {name} is not a public name of {module}")
    assert offenders == []


def test_the_import_check_finds_an_internal_import():
    faces = documented_faces()
    code = "import ragmeter as rm\nfrom ragmeter.data import Score\nfrom ragmeter import Sample, _private\n"
    bad = [(m, n) for m, n in ragmeter_imports(code) if m not in faces or (n is not None and n not in faces[m])]
    assert bad == [("ragmeter.data", "Score"), ("ragmeter", "_private")]
    assert python_blocks("text\n```python\n>>> import ragmeter.data\n```\n```bash\nimport x\n```\n") == [
        "import ragmeter.data"
    ]
