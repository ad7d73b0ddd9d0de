"""Imports: the graph has no circle, and importing a face loads little.

No circle: among ragmeter's modules (imports anywhere in a module, inside functions included; a
package's ``__init__`` counts only when it is imported by name) module A importing B means B never
reaches back to A, except through the one documented upward edge, :data:`UPWARD`: a result
renders itself as the HTML page (``EvaluationResult.to_html``), and the page reads results.

Little: ``import ragmeter`` and the public faces load their names lazily (:mod:`ragmeter._lazy`);
the number of ragmeter modules a fresh import loads is bounded (a count, not a time; the time is
measured in benchmarks/import_time.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TESTS

#: The one import that runs against the layers, on purpose: the result's ``to_html()`` calls the
#: page that renders results (:func:`ragmeter.dashboard.page.render_result`).
UPWARD = {("ragmeter.result", "ragmeter.dashboard.page")}


def repository_root() -> Path:
    here = TESTS
    while not (here / "pyproject.toml").exists():
        here = here.parent
    return here


#: Where each part of the ``ragmeter`` package lives in the repository (pyproject's package-dir).
LAYERS = {"core": "ragmeter", "integrations": "ragmeter.integrations", "tracing": "ragmeter.tracing"}


def modules(root: Path) -> dict[str, Path]:
    """Module name -> source file, for every module of the package."""
    found = {}
    for folder, package in LAYERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def import_edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the ragmeter modules it imports anywhere (``from pkg import name`` is the module
    ``pkg.name`` when there is one, else ``pkg``; a name of no module resolves to its closest
    enclosing module)."""

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names if a.name.startswith("ragmeter")]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragmeter"):
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else resolve(node.module)
                    for a in node.names
                ]
            edges[module].update(t for t in targets if t and t != module)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(root: str) -> None:  # iterative, so that a deep graph needs no recursion limit
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found, key=len, reverse=True)


def describe(component: list[str], edges: dict[str, set[str]]) -> str:
    inside = set(component)
    return "; ".join(f"{m} -> {', '.join(sorted(edges[m] & inside))}" for m in component)


def test_the_analysis_finds_a_circle_and_the_documented_edge_is_real():
    """The analysis sees a circle where there is one (also one closed inside a function), and the
    documented upward edge exists (a stale exception would hide nothing)."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(edges) == [["a", "b", "c"]]
    graph = import_edges(modules(repository_root()))
    assert all(target in graph[source] for source, target in UPWARD)
    with_upward = circles(graph)
    assert any({"ragmeter.result", "ragmeter.dashboard.page"} <= set(c) for c in with_upward)


def test_no_import_circle_but_the_documented_one():
    graph = import_edges(modules(repository_root()))
    for source, target in UPWARD:
        graph[source].discard(target)
    found = circles(graph)
    assert found == [], "\n".join(f"{len(c)} modules: {describe(c, graph)}" for c in found)


# --------------------------------------------------------------------------- what an import loads

#: The most ragmeter modules a fresh ``import <face>`` may load: the face itself, the lazy-name
#: helper (ragmeter._lazy) and its parent package; the judges' face also its interface
#: (ragmeter.judges.base). Everything else is imported on first use of a name.
FACE_MODULES = {
    "ragmeter": 2,
    "ragmeter.metrics": 3,
    "ragmeter.judges": 4,
    "ragmeter.store": 3,
    "ragmeter.dashboard": 3,
    "ragmeter.labels": 3,
    "ragmeter.monitor": 3,
    "ragmeter.trust": 3,
    "ragmeter.tracing": 3,
}


def fresh(code: str) -> str:
    """What ``code`` prints in a fresh interpreter."""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_import_ragmeter_loads_two_ragmeter_modules():
    loaded = fresh("import sys, ragmeter; print(sorted(m for m in sys.modules if m.split('.')[0] == 'ragmeter'))")
    assert loaded == "['ragmeter', 'ragmeter._lazy']"


def test_each_face_loads_a_bounded_number_of_ragmeter_modules():
    code = (
        "import importlib, json, subprocess, sys\n"
        f"faces = {sorted(FACE_MODULES)!r}\n"
        "out = {}\n"
        "for face in faces:\n"
        "    probe = f'import sys, {face}; print(len([m for m in sys.modules if m.split(\".\")[0] == \"ragmeter\"]))'\n"
        "    out[face] = int(subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True,"
        " check=True).stdout)\n"
        "print(json.dumps(out))\n"
    )
    counts = json.loads(fresh(code))
    assert {face: n for face, n in counts.items() if n > FACE_MODULES[face]} == {}


@pytest.mark.slow
def test_every_lazy_name_resolves_also_after_its_module_is_imported():
    """Each public name of the lazy faces resolves in a fresh interpreter, and a name that is also a
    submodule's (``rm.sweep``) stays the function once the submodule is imported."""
    code = (
        "import importlib, sys\n"
        "import ragmeter.sweep, ragmeter as rm\n"
        "assert callable(rm.sweep) and rm.sweep.__module__ == 'ragmeter.sweep', rm.sweep\n"
        "from ragmeter import sweep\n"
        "assert callable(sweep)\n"
        f"for face in {sorted(FACE_MODULES)!r}:\n"
        "    module = importlib.import_module(face)\n"
        "    for name in module.__all__:\n"
        "        assert getattr(module, name) is not None, (face, name)\n"
        "    assert set(module.__all__) <= set(dir(module)), face\n"
        "print('ok')\n"
    )
    assert fresh(code) == "ok"
