"""End to end over the wire: every judge metric through the real OpenAI / Anthropic SDKs against
a local server on 127.0.0.1. Calls per sample are fixed (5 LLM + 1 embedding), independent of
the number of chunks; a second run is served from the cache; the CLI drives the same path."""

import json
import subprocess
import sys

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.servers import FakeLLMServer
from ragmeter.judges import AnthropicJudge, OpenAIEmbedder, OpenAIJudge
from ragmeter.metrics import REGISTRY

EXAMPLE = ROOT / "examples" / "rag_samples.jsonl"
ALL = list(REGISTRY)


def samples(n_contexts: int, n: int = 3) -> list[rm.Sample]:
    out = []
    for s in rm.load_samples(EXAMPLE)[:n]:
        texts = [c.text for c in s.contexts]
        contexts = (texts * 3)[:n_contexts]
        answer = s.answer + " [1]"  # one citation, so citation metrics run too
        out.append(rm.Sample(s.question, contexts, answer=answer, reference=s.reference, id=s.id))
    return out


@pytest.mark.parametrize("n_contexts", [3, 10])
def test_openai_all_metrics_cost_five_calls_per_sample_and_shared_embedding_requests(llm_server, tmp_path, n_contexts):
    judge = OpenAIJudge("gpt-4o-mini", base_url=llm_server.openai_url, api_key="test", cache=tmp_path / "c.sqlite")
    data = samples(n_contexts)
    result = rm.evaluate(data, metrics=ALL, judge=judge, progress=False)
    # 5: rate_chunks and attribute_statements are asked in one review_context request (6 before)
    assert len(llm_server.chat_requests) == 5 * len(data)
    # the embedding texts of the samples in flight share requests: at most one per sample, and
    # every request is counted once, on the sample it served first
    assert 1 <= len(llm_server.embedding_requests) <= len(data)
    assert sum(r.usage.embedding_calls for r in result) == len(llm_server.embedding_requests)
    for r in result:
        assert all(s.status != "error" for s in r.scores.values()), {k: s.error for k, s in r.scores.items()}
        assert r.scores["faithfulness"].value == 1.0  # the server's oracle supports every claim
        assert r.usage.calls == 5
        assert r.scores["faithfulness"].judge == "openai:gpt-4o-mini"
    from collections import Counter

    assert Counter(req.task for req in llm_server.chat_requests) == {
        t: len(data)
        for t in ("extract_claims", "verify_claims", "review_context", "generate_questions", "compare_claims")
    }
    assert result.usage.cost_usd > 0  # gpt-4o-mini has a known price

    # the same dataset again costs nothing: every task and embedding comes from the cache
    llm_server.reset()
    again = rm.evaluate(
        data,
        metrics=ALL,
        judge=OpenAIJudge("gpt-4o-mini", base_url=llm_server.openai_url, api_key="test", cache=tmp_path / "c.sqlite"),
        progress=False,
    )
    assert llm_server.chat_requests == [] and llm_server.embedding_requests == []
    assert again.usage.calls == 0 and again.usage.cached == (5 + 1) * len(data)  # 5 tasks + 1 embedding batch
    assert [r.scores["faithfulness"].value for r in again] == [r.scores["faithfulness"].value for r in result]


def test_anthropic_judge_with_openai_embeddings(llm_server):
    judge = AnthropicJudge(
        "claude-haiku-4-5",
        base_url=llm_server.url,
        api_key="test",
        cache=False,
        embedder=OpenAIEmbedder(base_url=llm_server.openai_url, api_key="test", cache=False),
    )
    data = samples(5, n=2)
    result = rm.evaluate(data, metrics=ALL, judge=judge, progress=False)
    messages = [r for r in llm_server.requests if r.protocol == "anthropic"]
    assert len(messages) == 5 * len(data) and 1 <= len(llm_server.embedding_requests) <= len(
        data
    )  # 6 before review_context
    assert all(s.status != "error" for r in result for s in r.scores.values())
    assert all(r.scores["faithfulness"].judge == "anthropic:claude-haiku-4-5" for r in result)


def test_unparsable_judge_answer_is_an_error_never_a_number(tmp_path):
    with FakeLLMServer(responder=lambda req: {"nonsense": True}) as srv:
        judge = OpenAIJudge("gpt-4o-mini", base_url=srv.openai_url, api_key="test", cache=False, max_attempts=2)
        result = rm.evaluate(
            samples(3, n=1), metrics=["faithfulness", "context_precision"], judge=judge, progress=False
        )
        for s in result[0].scores.values():
            assert s.value is None and s.status == "error" and s.label is None
            assert "missing the key" in s.error
        # each task was asked twice (first answer + one retry showing the error), then given up
        assert len(srv.chat_requests) == 2 * 2
        retries = [r for r in srv.chat_requests if len(r.messages) > 2]
        assert len(retries) == 2 and all("invalid" in r.last_user_text.lower() for r in retries)


@pytest.mark.slow
def test_cli_with_openai_compatible_endpoint(llm_server, tmp_path):
    out = tmp_path / "r.json"
    env = {"OPENAI_API_KEY": "test", "RAGMETER_CACHE_DIR": str(tmp_path / "cache"), "PATH": ""}
    import os

    env = {**os.environ, **env}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragmeter.cli",
            "evaluate",
            str(EXAMPLE),
            "--no-progress",
            "--judge",
            f"openai:gpt-4o-mini@{llm_server.openai_url}",
            "-m",
            "faithfulness,context_recall",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "judge: openai:gpt-4o-mini" in proc.stdout
    report = json.loads(out.read_text())
    assert report["summary"]["faithfulness"]["count"] == 20
    # faithfulness (2 tasks) + context recall (1 task) per sample
    assert report["usage"]["calls"] == 3 * 20 == len(llm_server.chat_requests)
