"""LlamaIndex evaluators on real llama-index-core pieces (VectorStoreIndex, query engines,
BatchEvalRunner): one evaluator per registered metric, judge work shared between evaluators,
never raising (see helpers.llamaindex_app for the application; no network, no key)."""

from __future__ import annotations

import asyncio
import gc
import inspect
import subprocess
import sys
import weakref
from collections import OrderedDict

import pytest

pytest.importorskip("llama_index.core")

pytestmark = pytest.mark.filterwarnings("ignore:asyncio_module\\(\\) is deprecated:DeprecationWarning")

from llama_index.core.evaluation import BatchEvalRunner  # noqa: E402

import ragmeter as rm  # noqa: E402
import ragmeter.integrations.llamaindex as li  # noqa: E402
import ragmeter.integrations.llamaindex.evaluators as li_evaluators  # noqa: E402
from helpers.llamaindex_app import (  # noqa: E402
    ANIMALS,
    EchoLLM,
    code_of,
    engine,
    question,
    scripted_judge,
)
from helpers.scripted import ScriptedJudge  # noqa: E402
from ragmeter import sharing  # noqa: E402
from ragmeter.integrations.llamaindex import (  # noqa: E402
    RagmeterEvaluationResult,
    RagmeterEvaluator,
    RagmeterFaithfulnessEvaluator,
    RagmeterInstrumentation,
    make_evaluators,
)
from ragmeter.metrics import REGISTRY, metric_class  # noqa: E402


def test_evaluate_response_keeps_node_ids_and_scores(index, judge):
    response = engine(index).query(question("otter"))
    ev = RagmeterFaithfulnessEvaluator(judge)
    res = ev.evaluate_response(query=question("otter"), response=response)
    assert isinstance(res, RagmeterEvaluationResult)
    assert res.invalid_result is False and res.invalid_reason is None
    assert res.score == 1.0 and res.passing is True and res.label == "pass"
    assert res.response == f"The secret code of the otter is {code_of('otter')}."
    assert res.contexts[0] == res.response and len(res.contexts) == 2
    assert res.feedback and res.metric == "faithfulness" and res.judge == "scripted"
    claim = res.details["claims"][0]
    assert claim["verdict"] == "supported" and claim["chunk_id"] == "doc-otter"
    assert res.ragmeter_score.value == 1.0 and res.ragmeter_score.label == "pass"
    assert res.usage["calls"] == 2
    assert '"chunk_id":"doc-otter"' in res.model_dump_json()  # serialisable, details included


def test_aevaluate_strings_and_invalid_inputs_never_raise(judge):
    ev = RagmeterFaithfulnessEvaluator(judge)

    async def main():
        ok = await ev.aevaluate(
            query="Who wrote Dune?",
            response="Frank Herbert wrote Dune.",
            contexts=["Dune is a novel. Frank Herbert wrote Dune in 1965."],
        )
        unsupported = await ev.aevaluate(
            query="Who wrote Dune?", response="Isaac Asimov wrote Dune.", contexts=["Frank Herbert wrote Dune."]
        )
        no_contexts = await ev.aevaluate(query="Who wrote Dune?", response="Frank Herbert.", contexts=[])
        needs_query = RagmeterEvaluator("context_relevance", judge)
        no_query = await needs_query.aevaluate(query=None, response="x", contexts=["y"])
        bad_context = await ev.aevaluate(query="q", response="a", contexts=[object()])
        return ok, unsupported, no_contexts, no_query, bad_context

    ok, unsupported, no_contexts, no_query, bad_context = asyncio.run(main())
    assert ok.score == 1.0 and ok.passing is True
    assert unsupported.score == 0.0 and unsupported.passing is False and unsupported.label == "fail"
    for r in (no_contexts, no_query, bad_context):
        assert r.invalid_result is True and r.score is None and r.passing is None and r.invalid_reason
    assert "not applicable" in no_contexts.invalid_reason
    assert "question" in no_query.invalid_reason


def test_faithfulness_needs_no_query(index, judge):
    """As LlamaIndex's own FaithfulnessEvaluator: the answer against the contexts, no query."""
    ev = RagmeterFaithfulnessEvaluator(judge)
    supported = ev.evaluate(response="Frank Herbert wrote Dune.", contexts=["Frank Herbert wrote Dune in 1965."])
    assert supported.score == 1.0 and supported.passing is True and supported.invalid_result is False
    assert supported.query is None and supported.response == "Frank Herbert wrote Dune."
    unsupported = asyncio.run(
        ev.aevaluate(query="  ", response="Isaac Asimov wrote Dune.", contexts=["Frank Herbert wrote Dune."])
    )
    assert unsupported.score == 0.0 and unsupported.label == "fail" and unsupported.query is None
    assert [i["question"] for i in judge.inputs["extract_claims"]] == ["", ""]  # the judge sees no stand-in
    response = engine(index).query(question("otter"))  # a query engine's Response, scored without its query
    from_response = ev.evaluate_response(response=response)
    assert from_response.score == 1.0 and from_response.details["claims"][0]["chunk_id"] == "doc-otter"
    specifics = RagmeterEvaluator("hallucinated_specifics", judge).evaluate(
        response="Dune appeared in 1965.", contexts=["Frank Herbert wrote Dune in 1965."]
    )
    assert specifics.score == 1.0 and specifics.invalid_result is False
    for name in ("answer_relevancy", "context_relevance"):  # these read the question: still required
        res = RagmeterEvaluator(name, judge).evaluate(response="Frank Herbert.", contexts=["Frank Herbert wrote Dune."])
        assert res.invalid_result is True and "question" in res.invalid_reason


def test_retrieval_metric_evaluator_uses_node_ids(index):
    response = engine(index).query(question("heron"))
    ev = RagmeterEvaluator("mrr")
    res = ev.evaluate_response(query=question("heron"), response=response, relevant_ids=["doc-heron"])
    assert res.score == 1.0 and res.judge == "code"
    res = ev.evaluate_response(query=question("heron"), response=response, relevant_ids=["doc-zebra"])
    assert res.score == 0.0


class _BrokenJudge(ScriptedJudge):
    async def run(self, task, inputs):
        self.calls[task] += 1
        raise RuntimeError("judge backend down")


def test_batch_eval_runner_shares_judge_work_and_failures_return_fast(index, judge):
    qe = engine(index)
    animals = ANIMALS[:4]
    evaluators = make_evaluators(["faithfulness", "citation_accuracy", "hallucinated_specifics"], judge)
    broken = _BrokenJudge({})
    evaluators["broken"] = RagmeterFaithfulnessEvaluator(broken)
    runner = BatchEvalRunner(evaluators, workers=4)
    results = runner.evaluate_queries(qe, queries=[question(a) for a in animals])
    assert sum(broken.calls.values()) == len(animals)  # one call per query: BatchEvalRunner retried nothing
    assert [r.score for r in results["faithfulness"]] == [1.0] * 4
    assert all(r.passing for r in results["faithfulness"])
    assert [r.score for r in results["hallucinated_specifics"]] == [1.0] * 4
    assert all(isinstance(r, RagmeterEvaluationResult) for rs in results.values() for r in rs)
    for r in results["broken"]:
        assert r.invalid_result is True and r.score is None and "judge backend down" in r.invalid_reason
    # claims were extracted once per answer and shared by faithfulness and citation accuracy
    assert judge.calls["extract_claims"] == 4
    assert sorted(r.query for r in results["citation_accuracy"]) == sorted(question(a) for a in animals)


def test_judge_specs_resolve_once_and_offline_judge_works(monkeypatch):
    from ragmeter.judges import OfflineJudge

    resolved = []

    def resolve(spec, metrics):
        resolved.append(spec)
        return OfflineJudge(embeddings=False)  # "offline" without loading the local embedding model

    monkeypatch.setattr(li_evaluators, "resolve_judge", resolve)  # where the evaluators look it up
    monkeypatch.setattr(li_evaluators, "_SPEC_JUDGES", OrderedDict())
    evs = make_evaluators(["faithfulness", "answer_relevancy", "precision@2"], "offline")
    assert set(evs) == {"faithfulness", "answer_relevancy", "precision@2"}
    assert evs["faithfulness"].judge is evs["answer_relevancy"].judge
    assert evs["precision@2"].judge is None
    assert RagmeterFaithfulnessEvaluator("offline").judge is evs["faithfulness"].judge
    assert resolved == ["offline"]
    res = evs["faithfulness"].evaluate(
        query="Who wrote Dune?",
        response="Dune was written by Frank Herbert.",
        contexts=["Dune was written by Frank Herbert."],
    )
    assert res.judge == "offline-lexical" and res.score == 1.0 and not res.invalid_result
    res = evs["answer_relevancy"].evaluate(
        query="Who wrote Dune?", response="Frank Herbert wrote Dune.", contexts=["Dune was written by Frank Herbert."]
    )
    assert res.score is not None and res.details.get("judge_usage") is not None


def test_llamaindex_llm_as_judge_is_wrapped():
    from ragmeter.judges import LlamaIndexJudge

    meter = RagmeterInstrumentation(["faithfulness"], judge=EchoLLM(), mode="offline")
    assert isinstance(meter.judge, LlamaIndexJudge)
    ev = RagmeterFaithfulnessEvaluator(EchoLLM(), share=False)
    assert isinstance(ev.judge, LlamaIndexJudge)


def test_shared_judge_wrappers_are_reused_and_released():
    judge = scripted_judge()
    a, b = RagmeterFaithfulnessEvaluator(judge), RagmeterEvaluator("citation_accuracy", judge)
    assert a.judge is b.judge and a.judge.inner is judge
    assert RagmeterFaithfulnessEvaluator(judge, share=False).judge is judge
    ref = weakref.ref(a.judge)
    del a, b
    gc.collect()
    assert ref() is None and judge not in sharing._WRAPPERS  # no evaluator left: the wrapper is gone


def test_ensemble_members_share_work():
    from ragmeter.judges import EnsembleJudge

    one, two = scripted_judge(), scripted_judge(name="two")
    evs = make_evaluators(["faithfulness", "citation_accuracy"], EnsembleJudge([one, two]))
    runner = BatchEvalRunner(evs, workers=2)
    out = runner.evaluate_response_strs(
        queries=["Who wrote Dune?"],
        response_strs=["Frank Herbert wrote Dune."],
        contexts_list=[["Frank Herbert wrote Dune in 1965."]],
    )
    assert out["faithfulness"][0].score == 1.0 and out["faithfulness"][0].judge == "ensemble"
    assert out["faithfulness"][0].details["members"]["two"]["value"] == 1.0
    assert one.calls["extract_claims"] == two.calls["extract_claims"] == 1


# --------------------------------------------------------------------------- generated classes

EIFFEL = rm.Sample(
    "When was the Eiffel Tower built?",
    ["The Eiffel Tower was built from 1887 to 1889.", "It is in Paris.", "Paris is in France."],
    answer="It was built from 1887 to 1889 [1]. It stands in Paris [2].",
    reference="The Eiffel Tower was built between 1887 and 1889 in Paris.",
    id="eiffel",
)


def test_every_registered_metric_has_its_generated_evaluator():
    from ragmeter.judges import OfflineJudge

    judge = OfflineJudge(embeddings=False)  # offline without loading the local embedding model
    names = [f"Ragmeter{cls}Evaluator" for _, cls in REGISTRY.values()]
    assert li.__all__ == [
        "RagmeterInstrumentation",
        "RagmeterEvaluator",
        "RagmeterEvaluationResult",
        "make_evaluators",
        *names,
    ]
    for (metric, (_, class_name)), name in zip(REGISTRY.items(), names):
        cls = getattr(li, name)
        assert getattr(li_evaluators, name) is cls and issubclass(cls, RagmeterEvaluator)
        assert cls.__name__ == cls.__qualname__ == name and cls.metric_name == metric
        summary = " ".join(inspect.getdoc(metric_class(metric)).split("\n\n")[0].split())
        assert cls.__doc__.startswith(summary)
        ev = cls(judge)
        assert ev.metric.name == metric and type(ev.metric).__name__ == class_name
        res = ev.evaluate(
            query=EIFFEL.question, response=EIFFEL.answer, contexts=EIFFEL.context_texts, reference=EIFFEL.reference
        )
        assert isinstance(res, RagmeterEvaluationResult) and res.metric == metric
        assert res.invalid_result is False and res.score is not None, (metric, res.invalid_reason)
        # the same verdict as the core gives this sample
        core = rm.evaluate([EIFFEL], metrics=[metric], judge=judge, progress=False)[0].scores[metric]
        assert res.score == core.value and res.label == core.label, metric


METRIC_MODULE = '''
from ragmeter.data import Score
from ragmeter.metrics.base import Metric


class AnswerLength(Metric):
    """Answer length: one when the answer has at most ten words.

    A test metric registered at run time."""

    name = "answer_length"
    requires = ("answer",)
    uses_judge = False

    async def compute(self, sample, ctx):
        return Score(self.name, 1.0 if len(sample.answer.split()) <= 10 else 0.0, explanation="word count")
'''

CHECK = '''
import sys
sys.path.insert(0, sys.argv[1])
from ragmeter.metrics import REGISTRY
REGISTRY["answer_length"] = ("my_metrics", "AnswerLength")
import ragmeter.integrations.llamaindex as li
from ragmeter.integrations.llamaindex import RagmeterAnswerLengthEvaluator as cls
assert "RagmeterAnswerLengthEvaluator" in li.__all__ and cls.metric_name == "answer_length"
assert cls.__doc__.startswith("Answer length: one when the answer has at most ten words.")
res = cls().evaluate(query="How long?", response="Short enough.", contexts=["c"])
print(res.metric, res.score, res.judge)
'''


@pytest.mark.slow
def test_a_metric_added_to_the_registry_gets_its_evaluator(tmp_path):
    (tmp_path / "my_metrics.py").write_text(METRIC_MODULE)
    out = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["answer_length", "1.0", "code"]
