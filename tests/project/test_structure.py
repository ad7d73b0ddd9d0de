"""The structure's promises, checked: imports run one way (core never reaches into the
integrations or tracing layers, not even lazily), imports are absolute, and the cost promise
holds for any set of metrics (each judge task a metric needs is asked once per sample)."""

from __future__ import annotations

import ast
import asyncio
import itertools
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.servers import FakeLLMServer
from ragmeter.judges import OpenAIJudge
from ragmeter.metrics import REGISTRY

CORE = ROOT / "core"
LAYERS = ("ragmeter.integrations", "ragmeter.tracing")


def python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def upper_layer_references(path: Path) -> list[str]:
    """Every place ``path`` names an upper layer: imports (also inside functions) and string
    constants that could feed ``importlib.import_module`` (docstrings and comments excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the package the file is in
                names = [f"<relative level {node.level}> {node.module}"]
            else:
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names = [node.value]
        for name in names:
            if name.startswith(LAYERS) or name.startswith(("integrations", "tracing", ".integrations", ".tracing")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    return found


def test_core_never_names_integrations_or_tracing():
    offenders = [ref for path in python_files(CORE) for ref in upper_layer_references(path)]
    assert offenders == []


def test_every_import_is_absolute():
    relative = []
    for folder in ("core", "integrations", "tracing"):
        for path in python_files(ROOT / folder):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level:
                    relative.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert relative == []


@pytest.mark.slow
def test_importing_all_of_core_loads_no_upper_layer():
    """Import every core module (each public name of the lazy packages too) in a fresh
    interpreter: no ``ragmeter.integrations`` or ``ragmeter.tracing`` module gets loaded."""
    code = (
        "import importlib, pkgutil, sys\n"
        "import ragmeter, ragmeter.judges, ragmeter.metrics\n"
        "for m in pkgutil.walk_packages(ragmeter.__path__, 'ragmeter.'):\n"
        "    if not m.name.startswith(('ragmeter.integrations', 'ragmeter.tracing')):\n"
        "        importlib.import_module(m.name)\n"
        "for pkg in (ragmeter, ragmeter.judges, ragmeter.metrics):\n"
        "    for name in getattr(pkg, '__all__', []):\n"
        "        try:\n"
        "            getattr(pkg, name)\n"
        "        except ImportError:\n"
        "            pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('ragmeter.integrations', 'ragmeter.tracing'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# --------------------------------------------------------------------------- the cost promise

#: The judge tasks each metric needs (worked out from ragmeter.metrics.requests' table).
NEEDS = {
    "faithfulness": {"extract_claims", "verify_claims"},
    "answer_relevancy": {"generate_questions"},
    "context_relevance": {"rate_chunks"},
    "context_precision": {"rate_chunks"},
    "context_recall": {"attribute_statements"},
    "answer_correctness": {"extract_claims", "compare_claims"},
    "response_completeness": {"generate_questions"},
    "entity_recall": {"attribute_statements"},
    "hallucinated_specifics": set(),  # deterministic: no judge call
    "citation_accuracy": {"extract_claims", "verify_claims"},
    "citation_precision": {"extract_claims", "verify_claims"},
    "citation_recall": {"extract_claims", "verify_claims"},
}


#: Metrics that embed texts (question similarity; answer-reference similarity).
EMBEDS = {"answer_relevancy", "answer_correctness"}


def expected_requests(subset) -> Counter:
    """One request per task the metrics of ``subset`` need, except that a set needing both
    rate_chunks and attribute_statements asks them in ONE review_context request (the sample has
    a reference with statements and the judge is an LLM judge): 4 calls for the five core
    metrics, 5 for all twelve."""
    tasks = {task for name in subset for task in NEEDS[name]}
    if {"rate_chunks", "attribute_statements"} <= tasks:
        tasks = tasks - {"rate_chunks", "attribute_statements"} | {"review_context"}
    return Counter({task: 1 for task in tasks})


def metric_subsets() -> list[tuple[str, ...]]:
    """Every single metric, every pair, 25 random larger sets (fixed seed) and all of them."""
    names = sorted(REGISTRY)
    rng = random.Random(12)
    larger = [tuple(sorted(rng.sample(names, rng.randint(3, len(names) - 1)))) for _ in range(25)]
    return [(n,) for n in names] + list(itertools.combinations(names, 2)) + larger + [tuple(names)]


@pytest.fixture(scope="module")
def sample() -> rm.Sample:
    return rm.Sample(
        "When was the Eiffel Tower built?",
        ["The Eiffel Tower was built from 1887 to 1889.", "It is in Paris.", "Paris is in France."],
        answer="It was built from 1887 to 1889 [1]. It stands in Paris [2].",
        reference="The Eiffel Tower was built between 1887 and 1889 in Paris.",
        id="eiffel",
    )


def test_needs_table_covers_the_registry():
    assert set(NEEDS) == set(REGISTRY)


def test_any_set_of_metrics_costs_one_call_per_needed_task(sample):
    """Over the wire (the real OpenAI SDK, a local server): a run with any subset of metrics sends
    exactly one request for each task in the union of what its metrics need (rate_chunks and
    attribute_statements together as one review_context request), and nothing else."""

    async def run_all(server: FakeLLMServer) -> None:
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False)
        for subset in metric_subsets():
            server.reset()
            result = await rm.aevaluate([sample], metrics=list(subset), judge=judge, progress=False)
            errors = {k: s.error for k, s in result[0].scores.items() if s.error}
            assert errors == {}, subset
            expected = expected_requests(subset)
            assert Counter(r.task for r in server.chat_requests) == expected, subset
            # one embedding batch for all texts of the sample, when a metric embeds at all
            assert len(server.embedding_requests) == int(bool(EMBEDS & set(subset))), subset

    with FakeLLMServer() as server:
        asyncio.run(run_all(server))


def test_criteria_cost_one_call_per_sample_whatever_their_number(sample):
    """Any number of Criteria (with any inputs) on a sample add exactly one ``judge_criteria``
    request to what the built-in metrics already cost, and change nothing else."""
    from helpers.servers import answer, oracle
    from ragmeter.metrics import Criteria

    def responder(req):
        if req.task != "judge_criteria":
            return oracle(req)
        return answer(
            {
                "results": [
                    {"criterion": c["index"], "applicable": True, "score": 5, "reason": "meets it"}
                    for c in req.inputs["criteria"]
                ]
            }
        )

    criteria = [
        Criteria("polite", criteria="The answer is polite."),
        Criteria("sourced", criteria="Every figure has a source.", inputs=["answer", "contexts"]),
        Criteria("agrees", criteria="The answer agrees with the reference.", inputs=["answer", "reference"]),
    ]

    async def run_all(server: FakeLLMServer) -> None:
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False)
        for n in (1, 2, 3):
            for subset in [(), ("faithfulness",), ("answer_relevancy", "context_recall"), tuple(sorted(REGISTRY))]:
                server.reset()
                result = await rm.aevaluate([sample], metrics=[*subset, *criteria[:n]], judge=judge, progress=False)
                errors = {k: s.error for k, s in result[0].scores.items() if s.error}
                assert errors == {}, (n, subset)
                assert all(result[0].scores[c.name].value == 1.0 for c in criteria[:n])
                expected = expected_requests(subset) + Counter(judge_criteria=1)
                assert Counter(r.task for r in server.chat_requests) == expected, (n, subset)
                assert len(server.embedding_requests) == int(bool(EMBEDS & set(subset))), (n, subset)

    with FakeLLMServer(responder) as server:
        asyncio.run(run_all(server))
