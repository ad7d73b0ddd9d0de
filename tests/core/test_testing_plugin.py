"""ragmeter.testing.assert_rag and the pytest plugin (run with pytester, ``-p ragmeter.pytest_plugin``):
failure messages carry the evidence, the marker and fixture work, the summary table is printed,
and results reach the history store tagged with the test run; offline and LLM judges."""

import re

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.scripted import ScriptedJudge
from helpers.servers import FakeLLMServer
from ragmeter.testing import RagAssertion, assert_rag

EXAMPLE = ROOT / "examples" / "rag_samples.jsonl"
# The plugin loads through its pytest11 entry point, as in a user's project (no -p needed).
PLUGIN = ["-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:phoenix", "--strict-markers"]

PARIS = rm.Sample(
    "What is the capital of France?",
    ["Paris is the capital of France.", "France is in Europe."],
    answer="The capital of France is Paris [1]. It has 90 million people [2].",
    id="paris",
    relevant_ids=None,
)


def judge(verdicts):
    """Claims = the answer's sentences; ``verdicts`` per claim (supported claims cite chunk 0)."""

    def verify(inputs):
        out = []
        for i in range(len(inputs["claims"])):
            v = verdicts[i]
            ev = [{"chunk": 0, "quote": "Paris is the capital of France."}] if v == "supported" else []
            out.append({"claim": i, "verdict": v, "evidence": ev, "reason": f"scripted {v}"})
        return {"verdicts": out}

    return ScriptedJudge(
        {
            "extract_claims": lambda i: {"claims": [{"unit": k, "text": u} for k, u in enumerate(i["units"])]},
            "verify_claims": verify,
        }
    )


def test_assert_rag_passes_and_returns_the_scores():
    result = assert_rag(PARIS, faithfulness=1.0, judge=judge(["supported", "supported"]))
    assert result.scores["faithfulness"].value == 1.0 and result.sample.id == "paris"


def test_assert_rag_failure_lists_metrics_values_reasons_and_evidence():
    with pytest.raises(AssertionError) as info:
        assert_rag(PARIS, faithfulness=0.8, citation_accuracy=0.9, judge=judge(["supported", "not_found"]))
    msg = str(info.value)
    assert msg.startswith("RAG assertion failed for sample 'paris' ('What is the capital of France?'): 2 of 2 metrics")
    assert "faithfulness = 0.5000 < 0.8: 1 of 2 claims supported" in msg
    assert "- unsupported: 'It has 90 million people.' (scripted not_found)" in msg
    assert (
        "citation_accuracy = 0.5000 < 0.9" in msg
        and "- citation [2] does_not_support: 'It has 90 million people.'" in msg
    )
    assert isinstance(info.value, RagAssertion) and info.value.failures == ["faithfulness", "citation_accuracy"]


def test_assert_rag_without_a_value_fails_with_the_reason_and_takes_records_and_results():
    chunks = [{"text": "a", "id": "a"}, {"text": "b", "id": "b"}]
    record = {"user_input": "q?", "retrieved_contexts": chunks, "response": "x", "reference_context_ids": ["b"]}
    assert assert_rag(record, thresholds={"mrr": 0.5}).scores["mrr"].value == 0.5  # relevant chunk at rank 2
    with pytest.raises(AssertionError, match=r"mrr = 0.5000 < 0.6"):
        assert_rag(record, thresholds={"mrr": 0.6, "ndcg@10": 0.5})
    record["retrieved_contexts"] = ["a", "b"]
    with pytest.raises(
        AssertionError, match=r"mrr = error \(floor 0.5\): ValueError: retrieval metrics need context ids"
    ):
        assert_rag(record, thresholds={"mrr": 0.5})
    broken = ScriptedJudge({})  # no answer to any task: the score is an error, never a number
    with pytest.raises(AssertionError, match=r"faithfulness = error \(floor 0.5\): .*no answer for task"):
        assert_rag(PARIS, faithfulness=0.5, judge=broken)
    scored = rm.evaluate([PARIS], metrics=["faithfulness"], judge=judge(["supported", "supported"]), progress=False)[0]
    again = judge(["not_found", "not_found"])
    assert assert_rag(scored, faithfulness=0.9, judge=again) is scored or True
    assert sum(again.calls.values()) == 0  # an already scored metric is not scored again
    with pytest.raises(ValueError, match="at least one metric"):
        assert_rag(PARIS)


def _dataset(pytester, n=4):
    lines = EXAMPLE.read_text().splitlines()[:n]
    pytester.makefile(".jsonl", data="\n".join(lines))


TEST_FILE = """
import pytest
from ragmeter.testing import assert_rag

@pytest.mark.ragmeter(dataset="data.jsonl", judge="offline")
def test_grounded(ragmeter_dataset):
    assert len(ragmeter_dataset) == 4
    for sample in ragmeter_dataset:
        assert_rag(sample, faithfulness=0.0, context_recall=0.0)

@pytest.mark.ragmeter(judge="offline")
def test_too_strict():
    import ragmeter as rm
    assert_rag(rm.Sample("What is the capital of France?", ["Paris is the capital of France."],
                         answer="Paris has 90 million people.", id="paris"), faithfulness=0.9)

def test_no_dataset(ragmeter_dataset):
    pass
"""


@pytest.mark.slow
def test_plugin_marker_fixture_summary_and_store(pytester):
    from ragmeter.store import Store

    _dataset(pytester)
    pytester.makepyfile(test_rag=TEST_FILE)
    db = pytester.path / "history.db"
    result = pytester.runpytest(*PLUGIN, "--ragmeter-db", str(db))
    result.assert_outcomes(passed=1, failed=1, errors=1)
    out = result.stdout.str()
    # "Paris" is the one word of the claim the chunk states: a score near 0 (the fitted combination's)
    assert re.search(r"faithfulness = 0\.0\d{3} < 0\.9", out)
    assert "unsupported: 'Paris has 90 million people.'" in out
    assert "ragmeter_dataset needs @pytest.mark.ragmeter(dataset=" in out
    result.stdout.re_match_lines(
        [
            r"=+ ragmeter =+",
            r"5 samples asserted, 1 failed",
            r"metric\s+asserted\s+mean\s+min\s+below floor\s+no value",
            r"faithfulness\s+5\s+0\.\d{4}\s+0\.0\d{3}\s+1\s+0",
            r"context_recall\s+4\s+",
            r"recorded run 1 in sqlite:///.*history.db \(tag pytest:\S+\)",
        ]
    )
    with Store(db) as store:
        [info] = store.runs()
        assert info.dataset == "pytest" and info.samples == 5 and "pytest" in info.tags
        session_tag = next(t for t in info.tags if t.startswith("pytest:"))
        assert session_tag in out
        run = store.run(info.id)
        assert {"faithfulness", "context_recall"} <= set(run.metrics) and run.judge.startswith("offline")
        strict = store.samples(info.id, tag="test:test_rag.py::test_too_strict")
        assert [s.result.sample.id for s in strict] == ["paris"]
        assert len(store.samples(info.id, tag="test:test_rag.py::test_grounded")) == 4


def test_an_empty_dataset_fails_the_test_naming_the_file(pytester):
    """0 samples asserted is no pass: an empty (or blank-lines-only) dataset file fails the test."""
    pytester.makefile(".jsonl", empty="", blank="\n\n")
    pytester.makepyfile(
        test_empty="""
        import pytest

        @pytest.mark.ragmeter(dataset="empty.jsonl", judge="offline")
        def test_empty(ragmeter_dataset):
            for sample in ragmeter_dataset:
                assert sample

        @pytest.mark.ragmeter(dataset="blank.jsonl", judge="offline")
        def test_blank(ragmeter_dataset):
            pass
    """
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(errors=2)
    out = result.stdout.str()
    assert "empty.jsonl: the dataset has no samples" in out and "blank.jsonl: the dataset has no samples" in out


@pytest.mark.slow
def test_every_failing_sample_of_a_dataset_is_its_own_failure_without_ragmeter_frames(pytester):
    """``ragmeter_sample`` runs the test once per sample (issue 38: a loop stopped at the first
    failure): every sample below the floor fails on its own, with its evidence, and the traceback
    shows the test's line, not ragmeter's source; a record that cannot be loaded is one failure."""
    lines = EXAMPLE.read_text().splitlines()[:6]
    pytester.makefile(".jsonl", data="\n".join(lines[:5] + ['{"question": "", "contexts": ["x"]}']))
    pytester.makepyfile(
        test_each="""
        import pytest
        from ragmeter.testing import assert_rag

        @pytest.mark.ragmeter(dataset="data.jsonl", judge="offline")
        def test_grounded(ragmeter_sample):
            assert_rag(ragmeter_sample, faithfulness=0.8)

        def test_no_dataset(ragmeter_sample):
            pass
    """
    )
    scored = rm.evaluate(
        rm.load_samples(pytester.path / "data.jsonl"), metrics=["faithfulness"], judge="offline", progress=False
    )
    failing = [r.sample.id for r in scored if r.scores["faithfulness"].value < 0.8]
    assert 2 <= len(failing) < 5  # the floor splits the five samples
    result = pytester.runpytest(*PLUGIN, "-rfE")
    result.assert_outcomes(passed=5 - len(failing), failed=len(failing), errors=2)
    out = result.stdout.str()
    for sid in failing:  # each failing sample reported, by its id, with its value
        value = next(r for r in scored if r.sample.id == sid).scores["faithfulness"].value
        assert f"FAILED test_each.py::test_grounded[{sid}]" in out
        assert f"RAG assertion failed for sample '{sid}'" in out and f"faithfulness = {value:.4f} < 0.8" in out
    assert "ERROR test_each.py::test_grounded[invalid-line-6]" in out and "line 6: field 'question'" in out
    assert "ragmeter_sample needs @pytest.mark.ragmeter(dataset=" in out
    assert ">       assert_rag(ragmeter_sample, faithfulness=0.8)" in out  # the test's own line
    assert "floors = {" not in out and "def assert_rag" not in out and "testing.py:" not in out  # not ragmeter's


@pytest.mark.slow
def test_plugin_is_silent_without_assertions_and_registers_its_marker(pytester):
    pytester.makepyfile(
        test_plain="""
        import pytest

        @pytest.mark.ragmeter(judge="offline")
        def test_nothing():
            pass
    """
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    assert "ragmeter" not in result.stdout.str().split("test_plain.py")[-1]
    result = pytester.runpytest(*PLUGIN, "--markers")
    assert "@pytest.mark.ragmeter(dataset=None, judge=None)" in result.stdout.str()


@pytest.mark.slow
def test_plugin_with_an_llm_judge_over_the_openai_sdk(pytester, monkeypatch, caplog):
    with FakeLLMServer() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        pytester.makepyfile(
            test_llm=f"""
            import pytest
            import ragmeter as rm
            from ragmeter.testing import assert_rag

            @pytest.mark.ragmeter(judge="openai:gpt-4o-mini@{server.openai_url}")
            def test_supported():
                r = assert_rag(rm.Sample("What is the capital of France?", ["Paris is the capital of France."],
                                         answer="The capital of France is Paris.", id="p"), faithfulness=1.0)
                assert r.scores["faithfulness"].judge == "openai:gpt-4o-mini"
        """
        )
        result = pytester.runpytest(*PLUGIN, "--ragmeter-db", str(pytester.path))  # a folder: not a database
        result.assert_outcomes(passed=1)  # a store that cannot be written is reported, the tests still pass
        result.stdout.fnmatch_lines(
            ["could not record the run in the history store: store sqlite:///*: unable to open database file"]
        )
        assert not [r for r in caplog.records if r.exc_info]  # the store's one line, no traceback
        assert {r.task for r in server.chat_requests} == {"extract_claims", "verify_claims"}
        result.stdout.re_match_lines([r"1 samples asserted, 0 failed", r"faithfulness\s+1\s+1\.0000"])
