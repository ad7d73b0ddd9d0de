"""The cascade judge (issue 35, item 3): the offline judge scores every sample, the samples it is
unsure of go to an LLM judge (the real OpenAI SDK against a local llm_server), each Score names the
judge that decided it, and usage counts the LLM calls saved."""

import pytest

from ragmeter import Sample, evaluate
from ragmeter.judges import CascadeJudge, Judge, OfflineJudge
from ragmeter.judges.cascade import DEFAULT_ROUTE, _saved_calls
from ragmeter.judges.spec import judge_from_spec

METRICS = ["faithfulness", "context_relevance", "context_precision", "context_recall", "answer_relevancy"]
# The offline judge is sure an answer with an invented price is not fully supported; it cannot be
# sure a fully supported-looking answer is (on the development data such answers hide subtle edits
# about half the time), so that one is the sample it routes.
SURE = Sample(
    id="sure",
    question="When does the museum open?",
    contexts=["The museum opens at 9 am every day. Tickets are sold at the door."],
    answer="The museum opens at 9 am on weekdays. Tickets cost 15 euros online and 30 euros at the zoo.",
    reference="The museum opens at 9 am.",
)
UNSURE = Sample(
    id="unsure",
    question="When does the museum open?",
    contexts=["The museum opens at 9 am every day."],
    answer="The museum opens at 9 am every day.",
    reference="The museum opens at 9 am.",
)


def llm(llm_server):
    from ragmeter.judges import OpenAIJudge

    return OpenAIJudge("gpt-4o-mini", base_url=llm_server.openai_url, api_key="test", cache=False)


def offline_confidences():
    judge = OfflineJudge(embeddings=False)
    res = evaluate([SURE, UNSURE], metrics=["faithfulness"], judge=judge, progress=False)
    return [max(p, 1 - p) for p in (r.scores["faithfulness"].details["confidence"] for r in res)]


def test_the_unsure_sample_goes_to_the_llm_and_each_score_names_who_decided(llm_server):
    sure, unsure = offline_confidences()
    assert unsure < sure
    cut = (sure + unsure) / 2
    cascade = CascadeJudge(OfflineJudge(embeddings=False), llm(llm_server), confidence=cut)
    assert cascade.name == "cascade:offline-lexical>openai:gpt-4o-mini"
    res = evaluate([SURE, UNSURE], metrics=METRICS, judge=cascade, progress=False)
    by_id = {r.sample.id: r for r in res}
    for score in by_id["sure"].scores.values():
        assert score.judge == "offline-lexical"
        info = score.details["cascade"]
        assert info["routed"] is False and info["decided_by"] == "offline-lexical"
        assert info["confidence"] == pytest.approx(sure, abs=1e-4) and info["cut"] == round(cut, 4)
    for name, score in by_id["unsure"].scores.items():
        assert score.judge == "openai:gpt-4o-mini", name
        info = score.details["cascade"]
        assert info["routed"] is True and info["decided_by"] == "openai:gpt-4o-mini"
        assert "offline_value" in info
    # Only the unsure sample cost LLM calls; the sure one saved as many as the LLM would have made.
    routed_calls = by_id["unsure"].usage.calls
    assert routed_calls == len(llm_server.chat_requests) > 0
    assert by_id["sure"].usage.calls == 0
    assert by_id["sure"].usage.saved_calls == routed_calls  # the same metrics: the same calls
    assert res.usage.saved_calls == routed_calls and by_id["unsure"].usage.saved_calls == 0
    # Every Score carries the fingerprint of the member that decided it; the cascade's own names both.
    assert {s.fingerprint for s in by_id["sure"].scores.values()} == {cascade.first.fingerprint.id}
    assert {s.fingerprint for s in by_id["unsure"].scores.values()} == {cascade.then.fingerprint.id}
    fp = cascade.fingerprint
    assert fp.backend == "cascade" and [m.id for m in fp.members] == [
        cascade.first.fingerprint.id,
        cascade.then.fingerprint.id,
    ]


def test_route_zero_sends_nothing_and_route_one_sends_every_sample(llm_server):
    none = CascadeJudge(OfflineJudge(embeddings=False), llm(llm_server), route=0.0)
    res = evaluate([SURE, UNSURE], metrics=["faithfulness"], judge=none, progress=False)
    assert len(llm_server.chat_requests) == 0 and all(r.scores["faithfulness"].judge == "offline-lexical" for r in res)
    every = CascadeJudge(OfflineJudge(embeddings=False), llm(llm_server), route=1.0)
    res = evaluate([SURE, UNSURE], metrics=["faithfulness"], judge=every, progress=False)
    assert all(r.scores["faithfulness"].judge == "openai:gpt-4o-mini" for r in res)
    assert len(llm_server.chat_requests) == 4  # extract_claims + verify_claims per sample
    # route=1 sends a sample the offline judge has no confidence for (no claims) too
    refusal = Sample(id="refusal", question="When?", contexts=["The museum opens at 9 am."], answer="I don't know.")
    res = evaluate([refusal], metrics=["faithfulness"], judge=every, progress=False)
    assert res[0].scores["faithfulness"].judge == "openai:gpt-4o-mini"
    res = evaluate(
        [refusal],
        metrics=["faithfulness"],
        judge=CascadeJudge(OfflineJudge(embeddings=False), llm(llm_server)),
        progress=False,
    )
    assert res[0].scores["faithfulness"].details["cascade"]["routed"] is False


class _Named(Judge):  # a bare judge: the cascade's second judge can be anything
    name = "other"

    async def run(self, task, inputs):  # pragma: no cover - never asked here
        raise AssertionError


def test_a_share_is_turned_into_a_cut_by_the_development_datas_quantiles():
    offline = OfflineJudge(embeddings=False)
    c = CascadeJudge(offline, _Named(), route=0.3)
    assert c.cut == offline.routing_cut(0.3) == offline.combinations.claim_support.routing_cut(0.3)
    assert CascadeJudge(offline, _Named()).route == DEFAULT_ROUTE
    with pytest.raises(ValueError, match="not both"):
        CascadeJudge(offline, _Named(), route=0.3, confidence=0.8)
    with pytest.raises(ValueError, match=r"confidence must be in \[0.5, 1\]"):
        CascadeJudge(offline, _Named(), confidence=0.3)
    with pytest.raises(ValueError, match="calibrated confidence"):
        CascadeJudge(_Named(), offline)


def test_the_spec_builds_the_cascade(llm_server):
    c = judge_from_spec(f"cascade:offline>openai:gpt-4o-mini@{llm_server.openai_url}?route=0.5", api_key="test")
    assert isinstance(c, CascadeJudge) and c.route == 0.5 and c.then.name == "openai:gpt-4o-mini"
    assert c.cut == c.first.routing_cut(0.5)
    c = judge_from_spec(f"cascade:offline>openai:gpt-4o-mini@{llm_server.openai_url}?confidence=0.9", api_key="test")
    assert c.route is None and c.cut == 0.9
    for bad, match in [
        ("cascade:openai>offline", "starts with the offline judge"),
        ("cascade:offline", "expected cascade:offline>JUDGE"),
        ("cascade:offline>offline", "must be an LLM judge"),
        ("cascade:offline>openai?share=0.2", "unknown cascade option 'share'"),
        ("cascade:offline>openai?route=lots", "route= needs a number"),
    ]:
        with pytest.raises(ValueError, match=match):
            judge_from_spec(bad, api_key="test")


def test_saved_calls_count_the_combined_chunk_review_once():
    tasks = ["extract_claims", "verify_claims", "rate_chunks", "attribute_statements", "generate_questions"]
    assert _saved_calls(tasks, combines=True) == 4
    assert _saved_calls(tasks, combines=False) == 5
    assert _saved_calls(["rate_chunks"], combines=True) == 1


def test_the_run_summary_says_how_many_llm_calls_the_cascade_saved(llm_server):
    from ragmeter.report import _usage_line

    cascade = CascadeJudge(OfflineJudge(embeddings=False), llm(llm_server), route=0.0)
    res = evaluate([SURE, UNSURE], metrics=["faithfulness"], judge=cascade, progress=False)
    assert res.usage.saved_calls == 4  # extract_claims + verify_claims for each sample
    assert _usage_line(res).endswith(", cost: $0 (no paid calls), LLM calls saved by the cascade: 4")
    plain = evaluate([SURE], metrics=["faithfulness"], judge=OfflineJudge(embeddings=False), progress=False)
    assert "saved" not in _usage_line(plain)
