"""Errors that name the fix: without an extra, importing what needs it says which extra to install
(``pip install "ragmeter[EXTRA]"``), and ``compare`` works without scipy, its p-values marked as not
computed with the reason.

Each check runs in a fresh interpreter in which the optional package cannot be imported: a
``sys.modules[name] = None`` entry makes ``import name`` (and every ``name.sub``) raise
ModuleNotFoundError, exactly as when the package is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import ROOT

EXAMPLES = ROOT / "examples" / "rag_samples.jsonl"


def run_without(package: str, code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter where ``package`` cannot be imported."""
    script = f"import sys\nsys.modules[{package!r}] = None\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=300)


def error_of(package: str, statement: str) -> tuple[str, str, str | None]:
    """(exception type, message, ``.name``) raised by ``statement`` without ``package``."""
    out = run_without(
        package,
        f"""
        import json
        try:
            {statement}
        except ImportError as err:
            print(json.dumps([type(err).__name__, str(err), err.name]))
        else:
            print(json.dumps(None))
    """,
    )
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found is not None, f"{statement!r} did not fail without {package}"
    return tuple(found)


@pytest.mark.parametrize(
    "package, statement, what, extra, missing",
    [
        (
            "langchain_core",
            "from ragmeter.integrations.langchain import RagmeterCallbackHandler",
            "ragmeter.integrations.langchain",
            "langchain",
            "langchain_core",
        ),
        (
            "langchain_core",
            "import ragmeter.integrations.langchain.handler",
            "ragmeter.integrations.langchain",
            "langchain",
            "langchain_core",
        ),
        (
            "llama_index",
            "from ragmeter.integrations.llamaindex import make_evaluators",
            "ragmeter.integrations.llamaindex",
            "llamaindex",
            "llama_index",
        ),
        (
            "opentelemetry",
            "from ragmeter.tracing import RagmeterSpanProcessor",
            "ragmeter.tracing",
            "otel",
            "opentelemetry",
        ),
        ("opentelemetry", "from ragmeter.tracing import evaluate_traces", "ragmeter.tracing", "otel", "opentelemetry"),
        ("opentelemetry", "from ragmeter.tracing import EvaluationWriter", "ragmeter.tracing", "otel", "opentelemetry"),
        ("opentelemetry", "import ragmeter.tracing.serve", "ragmeter.tracing", "otel", "opentelemetry"),
        ("opentelemetry", "import ragmeter.tracing.otlp_json", "ragmeter.tracing", "otel", "opentelemetry"),
    ],
)
def test_importing_a_layer_without_its_extra_names_the_extra(package, statement, what, extra, missing):
    kind, message, name = error_of(package, statement)
    assert kind == "ModuleNotFoundError" and name.split(".")[0] == missing
    assert message == f'{what} needs {missing}, which is not installed: pip install "ragmeter[{extra}]"'


def test_an_sdk_that_lacks_a_submodule_names_it():
    """opentelemetry-api alone (the SDK missing): the same extra, and the missing module on the error."""
    kind, message, name = error_of("opentelemetry.sdk", "from ragmeter.tracing import RagmeterSpanProcessor")
    assert kind == "ModuleNotFoundError" and name.startswith("opentelemetry.sdk")
    assert message == 'ragmeter.tracing needs opentelemetry, which is not installed: pip install "ragmeter[otel]"'


def test_other_import_errors_pass_unchanged():
    """Only the missing optional package is translated: a missing module of another name is not."""
    from ragmeter._extras import needs_extra

    with pytest.raises(ModuleNotFoundError) as info, needs_extra("x", "otel", "opentelemetry"):
        import ragmeter_no_such_module  # noqa: F401
    assert info.value.name == "ragmeter_no_such_module" and "pip install" not in str(info.value)


def test_the_cli_names_the_extra_for_a_tracing_command(tmp_path):
    trace = tmp_path / "traces.jsonl"
    trace.write_text("{}\n")
    out = run_without(
        "opentelemetry",
        f"""
        from ragmeter.cli import main
        sys.exit(main(["evaluate-traces", {str(trace)!r}, "--no-progress"]))
    """,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        'ragmeter: error: ragmeter.tracing needs opentelemetry, which is not installed: pip install "ragmeter[otel]"'
    )


def test_pandas_without_the_extra():
    out = run_without(
        "pandas",
        f"""
        import ragmeter as rm
        from ragmeter.data import samples_to_pandas
        result = rm.evaluate({str(EXAMPLES)!r}, metrics=["mrr"], progress=False)
        for call in (result.to_pandas, lambda: samples_to_pandas([r.sample for r in result])):
            try:
                call()
            except ModuleNotFoundError as err:
                print(err)
    """,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        'to_pandas() needs pandas, which is not installed: pip install "ragmeter[pandas]"',
        'samples_to_pandas() needs pandas, which is not installed: pip install "ragmeter[pandas]"',
    ]


def test_judge_vs_humans_without_scipy_names_the_extra():
    kind, message, _ = error_of(
        "scipy", "from ragmeter.labels import judge_vs_humans; judge_vs_humans([0.9, 0.2], [5, 1], threshold=0.5)"
    )
    assert kind == "ModuleNotFoundError"
    assert message == 'judge_vs_humans() needs scipy, which is not installed: pip install "ragmeter[stats]"'


COMPARE = """
import json, ragmeter as rm
from ragmeter.data import samples_from_records
records = [json.loads(line) for line in open({examples!r})]
base = rm.evaluate(records, metrics=["faithfulness", "mrr"], judge="offline", progress=False)
worse = [dict(r, answer=records[i - 1]["answer"]) if i % 2 else r for i, r in enumerate(records)]  # wrong answers
current = rm.evaluate(worse, metrics=["faithfulness", "mrr"], judge="offline", progress=False)
cmp = rm.compare(base, current)
print(json.dumps({{"cmp": cmp.to_dict(), "text": cmp.to_text(), "md": cmp.to_markdown()}}))
"""


@pytest.mark.slow
def test_compare_without_scipy_gives_everything_but_the_p_values():
    """Means, intervals, effect sizes, sample sizes and verdicts need numpy only: without scipy they
    are the same, and every p-value is None with the reason, in the report too."""
    code = COMPARE.format(examples=str(EXAMPLES))
    with_scipy = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    without = run_without("scipy", code)
    assert with_scipy.returncode == 0 and without.returncode == 0, with_scipy.stderr + without.stderr
    a, b = json.loads(with_scipy.stdout), json.loads(without.stdout)
    note = 'not computed: scipy is not installed (pip install "ragmeter[stats]")'
    assert a["cmp"]["metrics"]["faithfulness"]["verdict"] == "regressed"  # the degraded answers are seen
    assert a["cmp"]["metrics"]["faithfulness"]["p_values"]["t"] < 0.05 and a["cmp"]["metrics"]["mrr"]["p_note"] is None
    for metric, stats in b["cmp"]["metrics"].items():
        assert stats["p_values"] == {"t": None, "wilcoxon": None} and stats["p_note"] == note
        expected = {k: v for k, v in a["cmp"]["metrics"][metric].items() if k not in ("p_values", "p_note")}
        assert {k: v for k, v in stats.items() if k not in ("p_values", "p_note")} == expected
    assert b["cmp"]["passed"] is False and b["cmp"]["regressions"] == a["cmp"]["regressions"]
    assert f"p-values: {note}" in b["text"].splitlines() and f"p-values: {note}" in b["md"].splitlines()
    assert "p-values:" not in a["text"] + a["md"]
