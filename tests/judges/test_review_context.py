"""``review_context``: rate_chunks and attribute_statements asked in ONE judge call when a
sample's metrics need both, with the same verdicts and scores as the two tasks asked apart.

The five core metrics (faithfulness, answer relevancy, context precision / recall / relevance)
cost 4 calls per sample with a reference (extract_claims, verify_claims, generate_questions,
review_context) instead of 5; all twelve judge metrics 5 instead of 6."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.scripted import ScriptedJudge
from helpers.servers import FakeLLMServer, answer, oracle
from ragmeter.data import Sample
from ragmeter.judges import AnthropicJudge, OpenAIEmbedder, OpenAIJudge
from ragmeter.judges.base import Usage
from ragmeter.judges.offline import OfflineJudge
from ragmeter.judges.tasks import COMBINED_TASKS, REVIEW_PARTS, InvalidOutput, get_task
from ragmeter.metrics import REGISTRY, get_metric
from ragmeter.metrics.requests import Limits, RequestSettings, ScoringContext
from ragmeter.metrics.scoring import score_sample
from ragmeter.text import split_sentences

CORE = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevance"]
REVIEW = get_task("review_context")

# --------------------------------------------------------------------------- a scripted judge whose verdicts depend on the inputs

_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 3}


def rate_chunks(inputs: dict) -> dict:
    """A statement is relevant when it shares a word with the question; a chunk is useful when
    it shares a word with the reference (the question without one); answerable = 1 + useful chunks."""
    q, target = words(inputs["question"]), words(inputs["reference"] or inputs["question"])
    chunks = [
        {
            "chunk": i,
            "relevant": [j for j, s in enumerate(sts) if words(s) & q],
            "useful": bool(words(" ".join(sts)) & target),
        }
        for i, sts in enumerate(inputs["chunks"])
    ]
    return {"chunks": chunks, "answerable": min(5, 1 + sum(c["useful"] for c in chunks))}


def attribute_statements(inputs: dict) -> dict:
    """A reference statement is attributed to the chunks holding at least half of its words;
    entities: its capitalised words and numbers, found when a chunk has them."""
    statements, entities = [], []
    for i, st in enumerate(inputs["statements"]):
        w = words(st)
        chunks = [k for k, c in enumerate(inputs["chunks"]) if len(w & words(c)) * 2 >= len(w) > 0]
        statements.append({"statement": i, "attributed": bool(chunks), "chunks": chunks})
        for e in re.findall(r"\b(?:[A-Z][a-z]+|\d{3,4})\b", st)[1:]:
            entities.append({"text": e, "found": any(e in c for c in inputs["chunks"])})
    return {"statements": statements, "entities": entities}


SCRIPT = {
    "extract_claims": lambda i: {"claims": [{"unit": k, "text": u} for k, u in enumerate(i["units"])]},
    "verify_claims": lambda i: {
        "verdicts": [
            {"claim": k, "verdict": "supported", "evidence": [{"chunk": 0, "quote": ""}], "reason": ""}
            if i["chunks"] and words(c) & words(i["chunks"][0])
            else {"claim": k, "verdict": "not_found", "evidence": [], "reason": ""}
            for k, c in enumerate(i["claims"])
        ]
    },
    "generate_questions": lambda i: {
        "questions": [i["question"]] * i["n"],
        "noncommittal": False,
        "parts": [{"text": i["question"], "covered": True}],
    },
    "compare_claims": lambda i: {
        "claims": [{"claim": k, "in_reference": True} for k in range(len(i["claims"]))],
        "statements": [{"statement": k, "in_answer": True} for k in range(len(i["statements"]))],
    },
    "rate_chunks": rate_chunks,
    "attribute_statements": attribute_statements,
}

Q = "When was Einstein born and where did he die?"
CHUNKS = [
    "Albert Einstein was born in Ulm in 1879. He was a physicist.",
    "Einstein died in Princeton in 1955.",
    "The Eiffel Tower is in Paris. Paris is in France.",
    "He was born in Germany and moved often.",
]
ANSWER = "Einstein was born in 1879. He died in Princeton. He liked sailing."
SAMPLES = {
    "reference": Sample(
        Q,
        CHUNKS,
        answer=ANSWER,
        id="ref",
        reference="Einstein was born in Ulm in 1879. He died in Princeton in 1955. He married Mileva.",
    ),
    "reference, chunks reordered": Sample(
        Q, CHUNKS[::-1], answer=ANSWER, reference="Einstein died in Princeton.", id="ref2"
    ),
    "no reference": Sample(Q, CHUNKS, answer=ANSWER, id="noref"),
    "zero-statement reference": Sample(Q, CHUNKS, answer=ANSWER, reference="...", id="zero"),
    "no chunks": Sample(Q, [], answer=ANSWER, reference="Einstein died in Princeton.", id="empty"),
    "an empty chunk": Sample(
        Q, ["", CHUNKS[1]], answer=ANSWER, reference="Einstein died in Princeton in 1955.", id="blank"
    ),
}
#: The calls the five core metrics make on each sample with a combining judge.
CALLS = {
    "reference": {"extract_claims": 1, "verify_claims": 1, "generate_questions": 1, "review_context": 1},
    "reference, chunks reordered": {
        "extract_claims": 1,
        "verify_claims": 1,
        "generate_questions": 1,
        "review_context": 1,
    },
    "no reference": {"extract_claims": 1, "verify_claims": 1, "generate_questions": 1, "rate_chunks": 1},
    "zero-statement reference": {"extract_claims": 1, "verify_claims": 1, "generate_questions": 1, "rate_chunks": 1},
    "no chunks": {"generate_questions": 1},  # faithfulness and the context metrics need chunks: n/a
    "an empty chunk": {"extract_claims": 1, "verify_claims": 1, "generate_questions": 1, "review_context": 1},
}


def score(sample: Sample, names: list[str], judge) -> tuple[dict, Usage]:
    """The Scores of metrics ``names`` on ``sample`` (one ScoringContext) and what they cost."""
    result = asyncio.run(score_sample(sample, [get_metric(n) for n in names], judge))
    return result.scores, result.usage


def verdict(s) -> tuple:
    """What a Score says, without the judge accounting (which names the task used)."""
    details = {k: v for k, v in s.details.items() if k != "judge_usage"}
    return s.value, s.label, s.error, s.explanation, json.dumps(details, sort_keys=True, default=str)


# --------------------------------------------------------------------------- the task


def test_review_context_spec_is_the_union_of_its_parts():
    assert set(COMBINED_TASKS) == {"review_context"} and set(REVIEW_PARTS) == {"rate_chunks", "attribute_statements"}
    props = REVIEW.schema["properties"]
    assert props == {
        **get_task("rate_chunks").schema["properties"],
        **get_task("attribute_statements").schema["properties"],
    }
    assert sorted(REVIEW.schema["required"]) == ["answerable", "chunks", "entities", "statements"]
    inputs = ScoringContext(
        SAMPLES["reference"], ScriptedJudge(SCRIPT), settings=RequestSettings(review_context=True)
    ).review_inputs()
    system, user = REVIEW.messages(inputs)
    for chunk in CHUNKS:  # every chunk statement and reference statement shown exactly once
        for sentence in split_sentences(chunk):
            assert user.count(json.dumps(sentence)) == 1, sentence
    assert user.count("Einstein was born in Ulm in 1879.") == 2  # in chunk 0 and as reference statement 0
    assert json.loads(user)["reference_statements"][2] == {"index": 2, "text": "He married Mileva."}
    assert "'relevant'" in system and "'attributed'" in system and "'entities'" in system


def test_review_context_validates_each_part_exactly_as_alone():
    inputs = {
        "rate_chunks": {"question": "q", "reference": "A. B.", "chunks": [["x.", "y."], []]},
        "attribute_statements": {"question": "q", "statements": ["A.", "B."], "chunks": ["x. y.", ""]},
    }
    rate = {
        "chunks": [{"chunk": 1, "relevant": [], "useful": False}, {"chunk": 0, "relevant": [1, 0, 1], "useful": True}],
        "answerable": 4,
    }
    attr = {
        "statements": [
            {"statement": 0, "attributed": True, "chunks": [0]},
            {"statement": 1, "attributed": False, "chunks": [1]},
        ],
        "entities": [{"text": "X", "found": True}, {"text": "x", "found": False}],
    }
    out = REVIEW.validate(inputs, {**rate, **attr})
    assert out == {
        **get_task("rate_chunks").validate(inputs["rate_chunks"], rate),
        **get_task("attribute_statements").validate(inputs["attribute_statements"], attr),
    }
    assert REVIEW.validate(inputs, out) == out  # a cached answer revalidates to itself
    for part, bad in (
        ("rate_chunks", {**rate, "answerable": 9}),
        ("attribute_statements", {**attr, "statements": attr["statements"][:1]}),
    ):
        with pytest.raises(InvalidOutput) as alone:
            get_task(part).validate(inputs[part], bad)
        other = attr if part == "rate_chunks" else rate
        with pytest.raises(InvalidOutput, match=re.escape(str(alone.value))):
            REVIEW.validate(inputs, {**other, **bad})
    with pytest.raises(InvalidOutput, match="missing the key"):
        REVIEW.validate(inputs, rate)


# --------------------------------------------------------------------------- scripted judge: same verdicts, fewer calls


@pytest.mark.parametrize("case", list(SAMPLES))
def test_core_metrics_same_verdicts_merged_apart_and_alone(case):
    sample = SAMPLES[case]
    judge = ScriptedJudge(SCRIPT)
    merged, usage = score(sample, CORE, judge)
    assert dict(judge.calls) == CALLS[case]
    assert usage.calls == sum(CALLS[case].values())  # the shared call counted once
    apart_judge = ScriptedJudge(SCRIPT, combines_tasks=False)
    apart, _ = score(sample, CORE, apart_judge)
    assert "review_context" not in apart_judge.calls
    for name in CORE:
        alone = score(sample, [name], ScriptedJudge(SCRIPT))[0][name]
        assert verdict(merged[name]) == verdict(alone) == verdict(apart[name]), (case, name)
    if CALLS[case].get("review_context"):
        used = {
            n: set(merged[n].details["judge_usage"])
            for n in ("context_relevance", "context_precision", "context_recall")
        }
        assert used == {n: {"review_context"} for n in used}  # each Score names the task it used
    values = {n: s.value for n, s in merged.items()}
    if case == "reference":  # worked by hand: statements relevant / useful chunks / attributed statements
        # relevance: statements sharing a word (> 3 letters) with the question: "Albert Einstein was born
        # in Ulm in 1879." (einstein, born), "Einstein died in Princeton in 1955." (einstein, died), "He was
        # born in Germany and moved often." (born) -> 3 of 6 statements
        assert values["context_relevance"] == pytest.approx(3 / 6)
        # precision: chunks sharing a word with the reference, [yes, yes, no, yes ("born")]
        # -> (1/1 + 2/2 + 3/4) / 3 = 0.9167
        assert values["context_precision"] == pytest.approx(2.75 / 3)
        # recall: 2 of the 3 reference statements in the chunks (not "He married Mileva.")
        assert values["context_recall"] == pytest.approx(2 / 3)
    if case == "no reference":  # estimate: chunks 0, 1, 3 share a question word -> answerable 4 -> (4 - 1) / 4
        assert values["context_recall"] == pytest.approx(0.75) and merged["context_recall"].details["estimate"]


def test_metrics_alone_send_only_their_own_task():
    sample = SAMPLES["reference"]
    for names, calls in (
        (["context_recall"], {"attribute_statements": 1}),
        (["context_precision"], {"rate_chunks": 1}),
        (["context_relevance", "context_precision"], {"rate_chunks": 1}),
        (["context_recall", "entity_recall"], {"attribute_statements": 1}),
        (["context_precision", "entity_recall"], {"review_context": 1}),
    ):
        judge = ScriptedJudge(SCRIPT)
        score(sample, names, judge)
        assert dict(judge.calls) == calls, names


def test_a_custom_metric_declares_the_requests_it_reads():
    """The combined call follows what metrics read (``reads_requests``), not their names: a
    custom metric under another name that reads chunk ratings, next to context recall, gets it."""
    from ragmeter.metrics import ContextRelevance, Metric

    class NoisyChunks(ContextRelevance):
        """The share of irrelevant statements: 1 - context relevance."""

        name = "noisy_chunks"

        async def compute(self, sample, ctx):
            s = await super().compute(sample, ctx)
            return rm.Score(self.name, None if s.value is None else 1 - s.value)

    class Plain(Metric):
        """A metric that reads none of the shared context requests."""

        name = "answer_length"

        async def compute(self, sample, ctx):
            return rm.Score(self.name, min(1.0, len(sample.answer) / 100))

    sample = SAMPLES["reference"]
    assert RequestSettings.for_metrics([NoisyChunks(), get_metric("context_recall")]).review_context
    assert not RequestSettings.for_metrics([Plain(), get_metric("context_recall")]).review_context
    judge = ScriptedJudge(SCRIPT)
    result = asyncio.run(score_sample(sample, [NoisyChunks(), get_metric("context_recall")], judge))
    assert dict(judge.calls) == {"review_context": 1}
    relevance = score(sample, ["context_relevance"], ScriptedJudge(SCRIPT))[0]["context_relevance"].value
    assert result.scores["noisy_chunks"].value == pytest.approx(1 - relevance)


def test_all_twelve_metrics_cost_five_calls_with_a_scripted_judge():
    judge = ScriptedJudge(SCRIPT)
    merged, usage = score(SAMPLES["reference"], list(REGISTRY), judge)
    assert sum(judge.calls.values()) == 5 == usage.calls and judge.calls["review_context"] == 1
    apart = score(SAMPLES["reference"], list(REGISTRY), ScriptedJudge(SCRIPT, combines_tasks=False))[0]
    assert {n: verdict(s) for n, s in merged.items()} == {n: verdict(s) for n, s in apart.items()}


def test_an_invalid_combined_answer_errors_both_parts_never_a_number():
    judge = ScriptedJudge(
        {
            **SCRIPT,
            "review_context": lambda i: {
                **rate_chunks(i["rate_chunks"]),
                "answerable": 0,
                **attribute_statements(i["attribute_statements"]),
            },
        }
    )
    scores, _ = score(SAMPLES["reference"], CORE + ["entity_recall"], judge)
    for name in ("context_relevance", "context_precision", "context_recall", "entity_recall"):
        assert scores[name].value is None and scores[name].status == "error", name
        assert "review_context" in scores[name].error and "answerable" in scores[name].error
    assert scores["faithfulness"].value is not None and judge.calls["review_context"] == 1


def test_offline_judge_is_never_asked_the_combined_task():
    class Recording(OfflineJudge):
        """The offline judge, recording the tasks it is asked."""

        def __init__(self):
            super().__init__(embeddings=False)
            self.asked = Counter()

        async def run(self, task, inputs):
            self.asked[task] += 1
            return await super().run(task, inputs)

    judge = Recording()
    scores, _ = score(SAMPLES["reference"], CORE, judge)
    assert judge.asked["review_context"] == 0 and judge.asked["rate_chunks"] == judge.asked["attribute_statements"] == 1
    for name in CORE:
        assert verdict(scores[name]) == verdict(score(SAMPLES["reference"], [name], Recording())[0][name]), name


def test_a_shared_judge_combines_as_its_inner_judge_does():
    """``share_judge`` (the LlamaIndex evaluators' wrapper) keeps the inner judge's
    ``combines_tasks``: 4 calls through the wrapper, as without it; the offline judge never combines."""
    from ragmeter.sharing import share_judge

    inner = ScriptedJudge(SCRIPT)
    shared = share_judge(inner)
    assert shared.combines_tasks is True and share_judge(OfflineJudge(embeddings=False)).combines_tasks is False
    score(SAMPLES["reference"], CORE, shared)
    assert sum(inner.calls.values()) == 4 and inner.calls["review_context"] == 1


def test_a_reference_past_max_claims_is_not_merged():
    settings = RequestSettings(review_context=True, limits=Limits(max_claims=2))
    ctx = ScoringContext(SAMPLES["reference"], ScriptedJudge(SCRIPT), settings=settings)
    assert ctx.review_inputs() is None  # 3 reference statements > 2: rate_chunks alone, recall reports the limit
    judge = ScriptedJudge(SCRIPT)
    scores = asyncio.run(
        score_sample(SAMPLES["reference"], [get_metric(n) for n in CORE], judge, limits=Limits(max_claims=2))
    ).scores
    assert judge.calls["rate_chunks"] == 1 and "review_context" not in judge.calls
    assert "max_claims" in scores["context_recall"].error and scores["context_precision"].value is not None


# --------------------------------------------------------------------------- over the wire


def rag_samples(n: int = 4) -> list[Sample]:
    """The first ``n`` bundled RAG samples (5 chunks and a reference each)."""
    return rm.load_samples(ROOT / "examples" / "rag_samples.jsonl")[:n]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_over_the_wire_four_requests_for_five_metrics_five_for_twelve(provider):
    data = rag_samples(2)
    assert all(s.reference for s in data)

    async def go(server: FakeLLMServer) -> None:
        if provider == "openai":
            judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False)
        else:
            judge = AnthropicJudge(
                "claude-haiku-4-5",
                base_url=server.url,
                api_key="test",
                cache=False,
                embedder=OpenAIEmbedder(base_url=server.openai_url, api_key="test", cache=False),
            )
        for names, per_sample in ((CORE, 4), (list(REGISTRY), 5)):
            server.reset()
            result = await rm.aevaluate(data, metrics=names, judge=judge, progress=False)
            assert all(s.status != "error" for r in result for s in r.scores.values())
            assert len(server.chat_requests) == per_sample * len(data), (names, per_sample)
            tasks = Counter(r.task for r in server.chat_requests)
            assert tasks["review_context"] == len(data) and "rate_chunks" not in tasks
            assert all(r.usage.calls == per_sample for r in result)
        review = next(r for r in server.chat_requests if r.task == "review_context")
        if provider == "openai":
            schema = review.body["response_format"]["json_schema"]["schema"]
        else:
            schema = next(t for t in review.body["tools"] if t["name"] == "review_context")["input_schema"]
        assert set(schema["properties"]) == {"chunks", "answerable", "statements", "entities"}
        assert set(review.inputs) == {"question", "reference_statements", "chunks"}
        if provider == "anthropic":  # the comparison below is the same on both wires
            return await judge.aclose()
        # scores as when each metric runs alone (its own task)
        merged = await rm.aevaluate(data, metrics=CORE, judge=judge, progress=False)
        for name in CORE:
            server.reset()
            alone = await rm.aevaluate(data, metrics=[name], judge=judge, progress=False)
            assert "review_context" not in {r.task for r in server.chat_requests}
            assert [verdict(r.scores[name]) for r in alone] == [verdict(r.scores[name]) for r in merged], name
        await judge.aclose()

    with FakeLLMServer() as server:
        asyncio.run(go(server))


def test_over_the_wire_a_malformed_combined_answer_is_retried_then_errors_both_metrics():
    def responder(req):
        if req.task == "review_context":  # rate_chunks part fine, attribute_statements part missing a statement
            out = oracle(req).output
            return answer({**out, "statements": out["statements"][:-1]})
        return oracle(req)

    sample = rag_samples(1)[0]
    with FakeLLMServer(responder) as server:
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False, max_attempts=3)
        result = rm.evaluate([sample], metrics=CORE, judge=judge, progress=False)
        reviews = [r for r in server.chat_requests if r.task == "review_context"]
        assert len(reviews) == 3 and "Your answer was invalid" in reviews[-1].last_user_text
        assert "missing statement indices" in reviews[-1].last_user_text
        scores = result[0].scores
        for name in ("context_precision", "context_recall", "context_relevance"):
            assert scores[name].value is None and scores[name].status == "error", name
            assert "review_context" in scores[name].error
            assert scores[name].details["judge_usage"]["review_context"]["calls"] == 3
        assert scores["faithfulness"].value == 1.0 and result[0].usage.calls == 3 + 3  # 3 other tasks, 3 attempts


def test_langchain_judge_answers_the_combined_task_over_the_wire():
    """A LangChain chat model (ChatOpenAI on the local server) gets review_context like any LLM judge."""
    lc_openai = pytest.importorskip("langchain_openai")
    from ragmeter.judges.langchain import LangChainJudge

    with FakeLLMServer() as server:
        model = lc_openai.ChatOpenAI(model="gpt-4o-mini", base_url=server.openai_url, api_key="k", max_retries=0)
        judge = LangChainJudge(model, cache=False)
        result = rm.evaluate(
            rag_samples(1), metrics=["context_precision", "context_recall"], judge=judge, progress=False
        )
        assert [r.task for r in server.chat_requests] == ["review_context"]
        assert all(s.value == 1.0 for s in result[0].scores.values())  # the oracle: every chunk useful, all attributed


def test_llamaindex_structured_model_covers_the_union_schema():
    pytest.importorskip("llama_index.core")
    from ragmeter.judges.llamaindex import model_from_schema

    model = model_from_schema(REVIEW.name, REVIEW.schema)
    assert set(model.model_json_schema()["properties"]) == {"chunks", "answerable", "statements", "entities"}
