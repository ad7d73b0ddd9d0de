"""LLM judge backends against local fake servers: the real openai / anthropic / langchain /
llama_index packages talk to 127.0.0.1; nothing is monkeypatched."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading

import numpy as np
import pytest

from helpers import FakeClock
from helpers.servers import Answer, FakeLLMServer, answer, error, hang, oracle, text, truncated
from ragmeter.judges import JudgeError, Usage
from ragmeter.judges.cache import JudgeCache
from ragmeter.judges.llm import LLMJudge
from ragmeter.judges.pricing import cost_of, price_for
from ragmeter.judges.ratelimit import ConcurrencyLimit, RateLimiter, TokenBucket
from ragmeter.judges.retry import RetryPolicy, classify_error
from ragmeter.judges.tasks import get_task
from ragmeter.judges.transport import CallableTransport, ChatRequest, Reply, parse_json_answer
from ragmeter.loops import PerLoop

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from ragmeter.judges.anthropic import AnthropicJudge  # noqa: E402
from ragmeter.judges.openai import OpenAIEmbedder, OpenAIJudge  # noqa: E402

BACKENDS = ["openai", "anthropic"]

CLAIMS_IN = {"question": "Where is Paris?", "units": ["Paris is in France.", "It has 2 million people."]}
VERIFY_IN = {
    "claims": ["Paris is in France.", "Paris has 2 million people.", "Paris is old."],
    "chunks": ["Paris is the capital of France.", "About 2.1 million people live in Paris."],
}
VERIFY_OK = {
    "verdicts": [
        {"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "capital of France"}], "reason": "r"},
        {"claim": 1, "verdict": "supported", "evidence": [{"chunk": 1, "quote": "2.1 million"}], "reason": "r"},
        {"claim": 2, "verdict": "not_found", "evidence": [], "reason": "r"},
    ]
}


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path, monkeypatch):
    """Judges whose cache is on by default write under the test's tmp dir, never ~/.cache."""
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "default-cache"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def make_judge(backend: str, llm_server: FakeLLMServer, clock: FakeClock | None = None, **kw) -> LLMJudge:
    """A judge on ``llm_server`` with no cache (unless given) whose backoff waits on a fake clock
    (``clock``, else a fresh one): retries never wait real time."""
    clock = clock or FakeClock()
    kw.setdefault("clock", clock)
    kw.setdefault("sleep", clock.sleep)
    kw.setdefault("cache", False)
    kw.setdefault("backoff_base", 0.01)
    kw.setdefault("max_retries", 3)
    kw.setdefault("timeout", 5.0)
    if backend == "openai":
        kw.setdefault("embedder", None)
        return OpenAIJudge(kw.pop("model", "gpt-4o-mini"), base_url=llm_server.openai_url, api_key="test-key", **kw)
    return AnthropicJudge(kw.pop("model", "claude-haiku-4-5"), base_url=llm_server.url, api_key="test-key", **kw)


def run(coro):
    return asyncio.run(coro)


# --------------------------------------------------------------------------- valid answers


@pytest.mark.parametrize("backend", BACKENDS)
def test_valid_answer_every_task(backend, llm_server):
    judge = make_judge(backend, llm_server)
    inputs = {
        "extract_claims": CLAIMS_IN,
        "verify_claims": VERIFY_IN,
        "rate_chunks": {"question": "q", "reference": "r", "chunks": [["a", "b"], ["c"]]},
        "attribute_statements": {"question": "q", "statements": ["s1", "s2"], "chunks": ["c1"]},
        "generate_questions": {"question": "Where is Paris?", "answer": "In France.", "n": 3},
        "compare_claims": {"question": "q", "claims": ["a"], "statements": ["b", "c"]},
        "rate_answer": {"question": "q", "answer": "a"},
    }

    async def go():
        return {t: await judge.run(t, i) for t, i in inputs.items()}

    results = run(go())
    assert len(llm_server.chat_requests) == 7
    assert results["verify_claims"].output["verdicts"][2]["claim"] == 2
    assert len(results["generate_questions"].output["questions"]) == 3
    for res in results.values():
        assert res.judge == f"{backend}:{judge.model}"
        assert res.usage.calls == 1 and res.usage.retries == 0 and res.usage.cached == 0
        assert res.usage.prompt_tokens == 100 and res.usage.completion_tokens == 20
        assert res.usage.cost_usd == pytest.approx(cost_of(price_for(judge.model), 100, 20))
    assert judge.kind == "LLM" and judge.name == f"{backend}:{judge.model}"


def test_openai_request_shape(llm_server):
    judge = make_judge("openai", llm_server, temperature=0.0, max_tokens=1234)
    run(judge.run("verify_claims", VERIFY_IN))
    body = llm_server.chat_requests[0].body
    assert body["model"] == "gpt-4o-mini"
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "verify_claims"
    assert fmt["json_schema"]["schema"] == get_task("verify_claims").schema
    assert body["messages"][0]["role"] == "system" and body["messages"][1]["role"] == "user"
    assert json.loads(body["messages"][1]["content"])["claims"][0] == {"index": 0, "text": "Paris is in France."}
    assert body["max_tokens"] == 1234 and body["temperature"] == 0.0  # compatible server: max_tokens


def test_openai_json_object_mode_puts_schema_in_prompt(llm_server):
    judge = make_judge("openai", llm_server, structured="json_object")
    res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert res.output["score"] == 1.0
    body = llm_server.chat_requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert '"score"' in body["messages"][0]["content"] and "JSON" in body["messages"][0]["content"]


def test_openai_reasoning_models_get_no_temperature(llm_server):
    judge = make_judge("openai", llm_server, model="o4-mini")
    run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert "temperature" not in llm_server.chat_requests[0].body
    official = OpenAIJudge("gpt-4o-mini", api_key="k", cache=False, embedder=None)
    assert official.transport.max_tokens_param == "max_completion_tokens"


def test_anthropic_request_shape(llm_server):
    judge = make_judge("anthropic", llm_server)
    run(judge.run("extract_claims", CLAIMS_IN))
    body = llm_server.chat_requests[0].body
    assert llm_server.chat_requests[0].path == "/v1/messages"
    assert body["tools"] == [
        {
            "name": "extract_claims",
            "description": "Record the extract_claims answer.",
            "input_schema": get_task("extract_claims").schema,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "extract_claims"}
    assert body["system"].startswith("You split an answer") and body["max_tokens"] == 4096
    assert "test-key" in json.dumps(llm_server.chat_requests[0].headers)


# --------------------------------------------------------------------------- invalid answers


@pytest.mark.parametrize("backend", BACKENDS)
def test_malformed_json_then_valid(backend, llm_server):
    llm_server.push(text('{"claims": [ {"unit": 0, "text": "Paris is in France."'))
    judge = make_judge(backend, llm_server)
    res = run(judge.run("extract_claims", CLAIMS_IN))
    assert res.output["claims"][0]["text"] == "Paris is in France."
    assert res.usage.calls == 2 and res.usage.retries == 1
    assert res.usage.prompt_tokens == 200
    second = llm_server.chat_requests[1]
    assert "Your answer was invalid" in second.last_user_text and "not valid JSON" in second.last_user_text
    # the bad answer is shown back as the assistant turn
    assert second.messages[-2]["role"] == "assistant"
    assert "Paris is in France." in json.dumps(second.messages[-2]["content"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_fewer_verdicts_than_claims_then_valid(backend, llm_server):
    llm_server.push(answer({"verdicts": VERIFY_OK["verdicts"][:2]}), answer(VERIFY_OK))
    judge = make_judge(backend, llm_server)
    res = run(judge.run("verify_claims", VERIFY_IN))
    assert [v["verdict"] for v in res.output["verdicts"]] == ["supported", "supported", "not_found"]
    assert res.usage.calls == 2
    retry = llm_server.chat_requests[1]
    assert "missing claim indices [2]" in retry.last_user_text
    if backend == "anthropic":  # the invalid tool call is answered natively with an error tool_result
        assistant, user = retry.messages[-2], retry.messages[-1]
        assert assistant["content"][0]["type"] == "tool_use"
        assert assistant["content"][0]["name"] == "verify_claims"
        assert user["content"][0]["type"] == "tool_result" and user["content"][0]["is_error"] is True
        assert user["content"][0]["tool_use_id"] == assistant["content"][0]["id"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_out_of_range_then_valid(backend, llm_server):
    bad = json.loads(json.dumps(VERIFY_OK))
    bad["verdicts"][0]["evidence"][0]["chunk"] = 7
    llm_server.push(answer(bad), answer(VERIFY_OK))
    judge = make_judge(backend, llm_server)
    res = run(judge.run("verify_claims", VERIFY_IN))
    assert res.output["verdicts"][0]["chunks"] == [0]
    assert res.output["verdicts"][0]["evidence"] == [{"chunk": 0, "quote": "capital of France"}]
    assert "out of range" in llm_server.chat_requests[1].last_user_text
    assert "7" in llm_server.chat_requests[1].last_user_text


@pytest.mark.parametrize("backend", BACKENDS)
def test_always_invalid_raises_judge_error_with_usage(backend, llm_server):
    judge = make_judge(backend, llm_server, max_attempts=3)
    llm_server.responder = lambda req: answer({"verdicts": []})
    with pytest.raises(JudgeError) as info:
        run(judge.run("verify_claims", VERIFY_IN))
    err = info.value
    assert err.task == "verify_claims" and err.attempts == 3
    assert err.usage.calls == 3 and err.usage.retries == 2
    assert err.usage.prompt_tokens == 300 and err.usage.completion_tokens == 60
    assert err.usage.cost_usd is not None and err.usage.cost_usd > 0
    assert "expected exactly one entry per claim" in str(err)
    assert len(llm_server.chat_requests) == 3


# --------------------------------------------------------------------------- transient failures


@pytest.mark.parametrize("backend", BACKENDS)
def test_429_with_retry_after_then_success(backend, llm_server, clock):
    llm_server.push(error(429, retry_after=0.3))
    judge = make_judge(backend, llm_server, clock, backoff_base=0.001)
    res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert res.output["score"] == 1.0
    assert res.usage.calls == 2 and res.usage.retries == 1
    assert len(llm_server.chat_requests) == 2
    assert clock.sleeps == [0.3]  # Retry-After honoured, not the 1 ms backoff


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("status", [500, 503])
def test_5xx_then_success(backend, status, llm_server, clock):
    llm_server.push(error(status))
    judge = make_judge(backend, llm_server, clock)
    res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert res.usage.calls == 2 and res.usage.retries == 1 and len(llm_server.chat_requests) == 2
    assert len(clock.sleeps) == 1 and 0.0 <= clock.sleeps[0] <= 0.01  # full jitter in [0, backoff_base]


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout_then_success(backend, llm_server):
    llm_server.push(hang(3.0, then=answer({"score": 0.0, "reason": "late"})))
    judge = make_judge(backend, llm_server, timeout=0.3)
    res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    # the second (oracle) answer, in 2 calls: it did not wait for the hanging one ("late")
    assert res.output["reason"] == "directly answers the question"
    assert res.usage.calls == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_transient_failures_exhaust_retries(backend, llm_server, clock):
    llm_server.responder = lambda req: error(500)
    judge = make_judge(backend, llm_server, clock, max_retries=2)
    with pytest.raises(JudgeError) as info:
        run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert info.value.usage.calls == 3 and info.value.attempts == 3
    assert len(llm_server.chat_requests) == 3 and "after 3 attempts" in str(info.value)
    # exponential backoff with full jitter: retry n waits in [0, backoff_base * 2**n]
    assert len(clock.sleeps) == 2 and clock.sleeps[0] <= 0.01 and clock.sleeps[1] <= 0.02


@pytest.mark.parametrize("backend", BACKENDS)
def test_permanent_error_is_not_retried(backend, llm_server):
    llm_server.push(error(401, message="bad key"))
    judge = make_judge(backend, llm_server)
    with pytest.raises(JudgeError) as info:
        run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert info.value.usage.calls == 1 and len(llm_server.chat_requests) == 1
    assert "bad key" in str(info.value)


# --------------------------------------------------------------------------- truncation


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncated_then_success_with_more_room(backend, llm_server):
    llm_server.push(truncated())
    judge = make_judge(backend, llm_server, max_tokens=1000)
    res = run(judge.run("extract_claims", CLAIMS_IN))
    assert len(res.output["claims"]) == 2
    first, second = llm_server.chat_requests
    assert first.max_tokens == 1000 and second.max_tokens == 2000
    assert len(second.messages) == len(first.messages)  # same conversation, more room
    assert res.usage.calls == 2 and res.usage.retries == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_truncated_at_cap_raises(backend, llm_server):
    llm_server.responder = lambda req: truncated()
    judge = make_judge(backend, llm_server, max_tokens=1000, max_tokens_cap=3000)
    with pytest.raises(JudgeError) as info:
        run(judge.run("extract_claims", CLAIMS_IN))
    assert [r.max_tokens for r in llm_server.chat_requests] == [1000, 2000, 3000]
    assert "cut off" in str(info.value) and info.value.usage.calls == 3


# --------------------------------------------------------------------------- cache


@pytest.mark.parametrize("backend", BACKENDS)
def test_cache_hit_on_second_run(backend, llm_server, tmp_path):
    cache = JudgeCache(tmp_path / "c.sqlite")
    judge = make_judge(backend, llm_server, cache=cache)
    first = run(judge.run("verify_claims", VERIFY_IN))
    again = make_judge(backend, llm_server, cache=tmp_path / "c.sqlite")  # new instance, same file
    second = run(again.run("verify_claims", VERIFY_IN))
    assert len(llm_server.chat_requests) == 1
    assert second.output == first.output
    assert second.usage == Usage(cached=1)
    assert first.usage.calls == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_cache_keyed_by_model_and_inputs(backend, llm_server, tmp_path):
    cache = JudgeCache(tmp_path)
    base = make_judge(backend, llm_server, cache=cache)
    run(base.run("rate_answer", {"question": "q", "answer": "a"}))
    other_model = make_judge(
        backend, llm_server, cache=cache, model="gpt-4o" if backend == "openai" else "claude-opus-4-5"
    )
    run(other_model.run("rate_answer", {"question": "q", "answer": "a"}))
    run(base.run("rate_answer", {"question": "q", "answer": "b"}))
    run(base.run("rate_answer", {"question": "q", "answer": "a"}))  # hit
    warmer = make_judge(backend, llm_server, cache=cache, temperature=0.7)
    run(warmer.run("rate_answer", {"question": "q", "answer": "a"}))  # generation params differ
    assert len(llm_server.chat_requests) == 4


def test_cache_skips_invalid_answers(llm_server, tmp_path):
    llm_server.responder = lambda req: answer({"score": 3, "reason": "x"})
    judge = make_judge("openai", llm_server, cache=tmp_path, max_attempts=1)
    with pytest.raises(JudgeError):
        run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert len(judge.cache) == 0


def test_cache_default_location_and_disable(llm_server, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "envcache"))
    judge = make_judge("openai", llm_server, cache=None)
    assert judge.cache.path == tmp_path / "envcache" / "judge-cache.sqlite"
    run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert (tmp_path / "envcache" / "judge-cache.sqlite").exists()
    off = make_judge("openai", llm_server, cache=False)
    assert off.cache is None
    run(off.run("rate_answer", {"question": "q", "answer": "a"}))
    run(off.run("rate_answer", {"question": "q", "answer": "a"}))
    assert len(llm_server.chat_requests) == 3


# --------------------------------------------------------------------------- limits


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_concurrency_cap(backend, llm_server):
    llm_server.responder = lambda req: Answer(output=oracle(req).output, delay=0.15)
    judge = make_judge(backend, llm_server, max_concurrency=2)

    async def go():
        return await asyncio.gather(*[judge.run("rate_answer", {"question": f"q{i}", "answer": "a"}) for i in range(6)])

    results = run(go())
    assert len(results) == 6 and len(llm_server.chat_requests) == 6
    assert llm_server.max_concurrent == 2


@pytest.mark.slow
def test_concurrency_cap_across_threads(llm_server):
    llm_server.responder = lambda req: Answer(output=oracle(req).output, delay=0.1)
    judge = make_judge("openai", llm_server, max_concurrency=2)
    errors = []

    def worker(k):
        async def go():
            await asyncio.gather(
                *[judge.run("rate_answer", {"question": f"t{k}-{i}", "answer": "a"}) for i in range(3)]
            )

        try:
            asyncio.run(go())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors
    assert len(llm_server.chat_requests) == 9 and llm_server.max_concurrent == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_rate_limiter_spaces_requests(backend, llm_server, clock):
    limiter = RateLimiter(rpm=240, rpm_burst=1, clock=clock, sleep=clock.sleep)  # one request per 0.25 s
    judge = make_judge(backend, llm_server, clock, rate_limiter=limiter)

    async def go():
        await judge.run("rate_answer", {"question": "warm-up", "answer": "a"})  # the burst: no wait
        t0 = clock()
        await asyncio.gather(*[judge.run("rate_answer", {"question": f"q{i}", "answer": "a"}) for i in range(4)])
        return clock() - t0

    elapsed = run(go())
    assert len(llm_server.chat_requests) == 5
    # each of the four concurrent requests is released 0.25 s after the one before it
    assert clock.sleeps == pytest.approx([0.25] * 4) and elapsed == pytest.approx(1.0)


def test_tokens_per_minute_limit(clock):
    # 240k tokens/min = 4000/s, burst 1500. A request reserves prompt/4 + max_tokens (~1260) and
    # settles at its real count (1500): the second request waits for its reservation to refill.
    transport = CallableTransport(
        lambda req: Reply(text='{"score": 1, "reason": "ok"}', prompt_tokens=1000, completion_tokens=500)
    )
    limiter = RateLimiter(tpm=240_000, tpm_burst=1500, clock=clock, sleep=clock.sleep)
    judge = LLMJudge(transport, cache=False, max_tokens=1000, rate_limiter=limiter, sleep=clock.sleep)

    async def go():
        t0 = clock()
        await judge.run("rate_answer", {"question": "q1", "answer": "a"})
        t1 = clock()
        await judge.run("rate_answer", {"question": "q2", "answer": "a"})
        return t1 - t0, clock() - t1

    first, second = run(go())
    estimate = transport.requests[1].prompt_chars() // 4 + 1000
    assert first == 0.0 and second == pytest.approx(estimate / 4000)
    assert 0.2 <= second < 1.0


def test_token_bucket_reservations_are_fifo():
    now = [0.0]
    bucket = TokenBucket(60, burst=1, clock=lambda: now[0])  # 1 token per second
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(1.0)
    assert bucket.reserve() == pytest.approx(2.0)
    now[0] = 10.0
    assert bucket.reserve() == 0.0  # refilled (capped at burst)
    assert bucket.reserve(5) == pytest.approx(5.0)  # larger than burst: goes through after the debt


def test_concurrency_limit_cancellation_frees_slot():
    limit = ConcurrencyLimit(1)

    async def go():
        await limit.acquire()
        waiter = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)  # the waiter queues up
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        limit.release()
        await asyncio.wait_for(limit.acquire(), 1)
        limit.release()
        assert limit.in_use == 0

    run(go())


# --------------------------------------------------------------------------- event loops


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_judge_across_event_loops_and_threads(backend, llm_server, caplog):
    judge = make_judge(backend, llm_server)
    caplog.set_level(logging.ERROR, logger="asyncio")
    a = run(judge.run("rate_answer", {"question": "q1", "answer": "a"}))
    b = run(judge.run("rate_answer", {"question": "q2", "answer": "a"}))  # a second asyncio.run
    assert a.output == b.output
    results, errors = [], []

    def worker(k):
        try:
            results.append(asyncio.run(judge.run("rate_answer", {"question": f"t{k}", "answer": "a"})))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors and len(results) == 2
    assert len(llm_server.chat_requests) == 4
    assert len(judge.transport.clients) == 0  # each loop's client was closed at its shutdown
    assert "Event loop is closed" not in caplog.text


def test_per_loop_close_runs_on_own_loop():
    closed = []

    class Client:
        def __init__(self):
            self.loop = asyncio.get_running_loop()

        async def close(self):
            closed.append(asyncio.get_running_loop() is self.loop)

    per_loop = PerLoop(Client, lambda c: c.close())

    async def use():
        c1, c2 = per_loop.get(), per_loop.get()
        assert c1 is c2
        return c1

    first = run(use())
    second = run(use())
    assert first is not second and closed == [True, True]


def test_a_pickled_per_loop_keeps_its_factory_and_none_of_its_objects():
    import pickle

    per_loop = PerLoop(dict, None)

    async def use(p):
        p.get()["made"] = True
        return p.get()

    async def main():
        made = await use(per_loop)
        copy = pickle.loads(pickle.dumps(per_loop))  # while the original holds this loop's object
        return made, copy.get(), copy

    made, fresh, copy = run(main())
    assert made == {"made": True} and fresh == {} and copy._factory is dict and copy._close is None


# --------------------------------------------------------------------------- embeddings


def test_openai_embeddings_batch_in_one_request(llm_server, tmp_path):
    emb = OpenAIEmbedder(base_url=llm_server.openai_url, api_key="k", cache=tmp_path, backoff_base=0.01)
    texts = ["Paris is in France", "the capital of France", "bananas are yellow", "Paris is in France"]
    vectors, usage = run(emb.embed(texts))
    assert vectors.shape == (4, 64)
    assert np.allclose(vectors[0], vectors[3])
    reqs = llm_server.embedding_requests
    assert len(reqs) == 1 and reqs[0].body["input"] == texts[:3] and reqs[0].body["model"] == "text-embedding-3-small"
    assert usage.embedding_calls == 1 and usage.calls == 0 and usage.prompt_tokens == 11
    assert usage.cost_usd == pytest.approx(11 * 0.02 / 1e6)
    again, usage2 = run(emb.embed(texts))  # cached per text
    assert len(llm_server.embedding_requests) == 1 and usage2 == Usage(cached=1)
    assert np.array_equal(again, vectors)


def test_openai_embeddings_batches_and_retries(llm_server):
    llm_server.push_embedding(error(503))
    clock = FakeClock()
    emb = OpenAIEmbedder(
        base_url=llm_server.openai_url,
        api_key="k",
        cache=False,
        batch_size=2,
        backoff_base=0.01,
        clock=clock,
        sleep=clock.sleep,
    )
    vectors, usage = run(emb.embed([f"text {i}" for i in range(5)]))
    assert vectors.shape == (5, 64)
    assert len(llm_server.embedding_requests) == 4  # 1 failed + 3 batches
    assert usage.embedding_calls == 4 and usage.retries == 1
    assert len(clock.sleeps) == 1 and clock.sleeps[0] <= 0.01


def test_openai_judge_default_embedder(llm_server):
    judge = OpenAIJudge(base_url=llm_server.openai_url, api_key="k", cache=False)
    assert isinstance(judge.embedder, OpenAIEmbedder) and judge.embedder.base_url == llm_server.openai_url
    vectors, _ = run(judge.embedder.embed(["a b"]))
    assert vectors.shape == (1, 64)
    assert AnthropicJudge(api_key="k", cache=False).embedder is None


# --------------------------------------------------------------------------- helpers


def test_prices():
    assert price_for("gpt-4o-mini") == (0.15, 0.60)
    assert price_for("gpt-4o-mini-2024-07-18") == (0.15, 0.60)
    assert price_for("gpt-4o") == (2.50, 10.00)
    assert price_for("gpt-4o-audio-preview") is None
    assert price_for("claude-3-5-haiku-20241022") == (0.80, 4.00)
    assert price_for("claude-haiku-4-5") == (1.00, 5.00)
    assert price_for("anthropic.claude-3-5-sonnet-20240620-v1:0") == (3.00, 15.00)
    assert price_for("openai/gpt-4.1-mini") == (0.40, 1.60)
    assert price_for("llama3.1:8b") is None
    assert cost_of((1.0, 2.0), 1_000_000, 500_000) == pytest.approx(2.0)


def test_unknown_model_costs_none_and_prices_override(llm_server):
    judge = make_judge("openai", llm_server, model="my-local-model")
    assert run(judge.run("rate_answer", {"question": "q", "answer": "a"})).usage.cost_usd is None
    judge = make_judge("openai", llm_server, model="my-local-model", prices=(10.0, 100.0))
    res = run(judge.run("rate_answer", {"question": "q", "answer": "b"}))
    assert res.usage.cost_usd == pytest.approx((100 * 10 + 20 * 100) / 1e6)


def test_parse_json_answer():
    assert parse_json_answer('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json_answer('Here it is: {"a": [1, 2]} hope it helps') == {"a": [1, 2]}
    with pytest.raises(Exception, match="not valid JSON"):
        parse_json_answer('{"a": ')


def test_classify_error():
    assert classify_error(TimeoutError()) == (True, None)
    assert classify_error(ValueError("x")) == (False, None)

    class Resp:
        status_code = 429
        headers = {"retry-after": "2"}

    class Boom(Exception):
        response = Resp()
        status_code = 429

    assert classify_error(Boom()) == (True, 2.0)
    assert RetryPolicy(backoff_base=1, backoff_max=4).delay(10) <= 4
    assert RetryPolicy(max_retry_after=5).delay(0, 60) == 5


def test_callable_transport_and_custom_judge():
    answers = iter([{"score": 2, "reason": "x"}, {"score": 0.5, "reason": "ok"}])
    transport = CallableTransport(lambda req: next(answers), backend="custom", model="m")
    judge = LLMJudge(transport, cache=False)
    res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert res.output == {"score": 0.5, "reason": "ok"} and res.judge == "custom:m"
    assert isinstance(transport.requests[1], ChatRequest)
    assert "between 0 and 1" in transport.requests[1].turns[-1].text


def test_api_key_required_without_base_url(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIJudge(cache=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        AnthropicJudge(cache=False)
    assert OpenAIJudge(base_url="http://127.0.0.1:9/v1", cache=False, embedder=None).name == "openai:gpt-4o-mini"


# --------------------------------------------------------------------------- spec


def test_judge_from_spec(monkeypatch):
    from ragmeter.judges.spec import judge_from_spec

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    j = judge_from_spec("openai:gpt-4.1-mini", cache=False)
    assert isinstance(j, OpenAIJudge) and j.name == "openai:gpt-4.1-mini" and j.base_url is None
    j = judge_from_spec("openai", cache=False)
    assert j.name == "openai:gpt-4o-mini"
    j = judge_from_spec("openai:qwen2.5:7b@http://127.0.0.1:8000/v1", cache=False)
    assert j.name == "openai:qwen2.5:7b" and j.base_url == "http://127.0.0.1:8000/v1"
    j = judge_from_spec("anthropic", cache=False)
    assert isinstance(j, AnthropicJudge) and j.name == "anthropic:claude-haiku-4-5"
    j = judge_from_spec("anthropic:claude-sonnet-4-5", cache=False)
    assert j.name == "anthropic:claude-sonnet-4-5"
    j = judge_from_spec("ollama:llama3.1", cache=False)
    assert j.base_url == "http://localhost:11434/v1" and j.embedder is None
    assert j.name == "ollama:llama3.1"  # was labelled openai:llama3.1 (issue 38)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1234/v1")
    assert judge_from_spec("openai:m", cache=False).base_url == "http://127.0.0.1:1234/v1"
    for bad in ("", "gpt-4o", "azure:gpt-4o", "openai:m@not-a-url", "ollama"):
        with pytest.raises(ValueError):
            judge_from_spec(bad)


def test_default_judge(monkeypatch):
    from ragmeter.judges.spec import default_judge

    for var in ("RAGMETER_JUDGE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("RAGMETER_CACHE_DIR", "/nonexistent-but-unused")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert isinstance(default_judge(), AnthropicJudge)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert isinstance(default_judge(), OpenAIJudge)
    monkeypatch.setenv("RAGMETER_JUDGE", "anthropic:claude-opus-4-1")
    assert default_judge().name == "anthropic:claude-opus-4-1"


def test_offline_specs(monkeypatch):
    pytest.importorskip("ragmeter.judges.offline")
    from ragmeter.judges.spec import default_judge, judge_from_spec

    for var in ("RAGMETER_JUDGE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert type(judge_from_spec("offline")).__name__ == "OfflineJudge"
    assert type(default_judge()).__name__ == "OfflineJudge"


def test_import_loads_no_sdk():
    code = (
        "import sys, ragmeter, ragmeter.judges, ragmeter.judges.llm, ragmeter.judges.spec, ragmeter.judges.cache,"
        " ragmeter.judges.transport, ragmeter.judges.retry, ragmeter.judges.embedding, ragmeter.judges.identity;"
        "from ragmeter.judges import LLMJudge, JudgeCache, judge_from_spec;"
        "bad = sorted({m.split('.')[0] for m in sys.modules} & {'openai', 'anthropic', 'langchain', "
        "'langchain_core', 'langchain_openai', 'llama_index'});"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


# --------------------------------------------------------------------------- LangChain


class TestLangChain:
    @pytest.fixture(autouse=True)
    def _need(self):
        pytest.importorskip("langchain_core")

    def chat_openai(self, llm_server, **kw):
        lc_openai = pytest.importorskip("langchain_openai")
        return lc_openai.ChatOpenAI(
            model="gpt-4o-mini", base_url=llm_server.openai_url, api_key="k", max_retries=0, **kw
        )

    def test_structured_output_via_chat_openai(self, llm_server):
        from ragmeter.judges.langchain import LangChainJudge

        judge = LangChainJudge(self.chat_openai(llm_server), cache=False, backoff_base=0.01)
        res = run(judge.run("verify_claims", VERIFY_IN))
        assert len(res.output["verdicts"]) == 3 and res.judge == "langchain:gpt-4o-mini"
        assert res.usage.calls == 1 and res.usage.prompt_tokens == 100 and res.usage.completion_tokens == 20
        assert res.usage.cost_usd == pytest.approx(cost_of(price_for("gpt-4o-mini"), 100, 20))
        body = llm_server.chat_requests[0].body
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == "verify_claims"

    @pytest.mark.parametrize(
        "kwargs", [{"method": "function_calling"}, {"method": "json_mode"}, {"method": "json_schema", "strict": True}]
    )
    def test_structured_output_methods(self, llm_server, kwargs):
        from ragmeter.judges.langchain import LangChainJudge

        judge = LangChainJudge(self.chat_openai(llm_server), cache=False, structured_kwargs=kwargs)
        res = run(judge.run("verify_claims", VERIFY_IN))
        assert len(res.output["verdicts"]) == 3 and res.usage.calls == 1
        body = llm_server.chat_requests[0].body
        if kwargs["method"] == "function_calling":
            assert body["tool_choice"]["function"]["name"] == "verify_claims"
        elif kwargs["method"] == "json_mode":
            assert body["response_format"] == {"type": "json_object"}
            assert "'verify_claims' answer" in body["messages"][0]["content"]  # schema in the prompt
        else:
            assert body["response_format"]["json_schema"]["strict"] is True

    def test_invalid_then_valid_and_truncation(self, llm_server):
        from ragmeter.judges.langchain import LangChainJudge

        llm_server.push(text("{oops"), answer({"verdicts": VERIFY_OK["verdicts"][:1]}), truncated())
        judge = LangChainJudge(self.chat_openai(llm_server, max_tokens=500), cache=False, backoff_base=0.01)
        res = run(judge.run("verify_claims", VERIFY_IN))
        assert len(res.output["verdicts"]) == 3 and res.usage.calls == 4
        reqs = llm_server.chat_requests
        assert "Your answer was invalid" in reqs[1].last_user_text
        assert "missing claim indices [1, 2]" in reqs[2].last_user_text
        assert [r.max_tokens for r in reqs] == [500, 500, 500, 1000]

    def test_transient_errors_retried_by_ragmeter(self, llm_server):
        from ragmeter.judges.langchain import LangChainJudge

        llm_server.push(error(429, retry_after=0.05), error(500))
        clock = FakeClock()
        judge = LangChainJudge(self.chat_openai(llm_server), cache=False, backoff_base=0.01, sleep=clock.sleep)
        res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
        assert res.usage.calls == 3 and res.usage.retries == 2
        assert clock.sleeps[0] == 0.05 and clock.sleeps[1] <= 0.02  # Retry-After, then backoff

    def test_across_event_loops(self, llm_server):
        from ragmeter.judges.langchain import LangChainJudge

        judge = LangChainJudge(self.chat_openai(llm_server), cache=False)
        run(judge.run("rate_answer", {"question": "q1", "answer": "a"}))
        run(judge.run("rate_answer", {"question": "q2", "answer": "a"}))
        out = []
        t = threading.Thread(
            target=lambda: out.append(asyncio.run(judge.run("rate_answer", {"question": "q3", "answer": "a"})))
        )
        t.start()
        t.join(20)
        assert len(out) == 1 and len(llm_server.chat_requests) == 3

    def test_cache_on_by_default_for_named_models(self, llm_server, tmp_path, monkeypatch):
        from ragmeter.judges.langchain import LangChainJudge

        monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path))
        judge = LangChainJudge(self.chat_openai(llm_server))
        run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
        res = run(LangChainJudge(self.chat_openai(llm_server)).run("rate_answer", {"question": "q", "answer": "a"}))
        assert res.usage == Usage(cached=1) and len(llm_server.chat_requests) == 1
        other = LangChainJudge(self.chat_openai(llm_server, temperature=0.9))
        run(other.run("rate_answer", {"question": "q", "answer": "a"}))
        assert len(llm_server.chat_requests) == 2

    def test_fallback_to_json_text_for_models_without_structured_output(self):
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        from ragmeter.judges.langchain import LangChainJudge

        model = FakeListChatModel(responses=["I think it is good", '```json\n{"score": 0.25, "reason": "partly"}\n```'])
        judge = LangChainJudge(model)
        assert judge.cache is None  # no model name: not cached by default
        res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
        assert res.output == {"score": 0.25, "reason": "partly"}
        assert res.usage.calls == 2
        assert "does not support structured output" in res.note and "plain text" in res.note

    def test_langchain_embedder(self, llm_server):
        from langchain_core.embeddings import DeterministicFakeEmbedding

        from ragmeter.judges.langchain import LangChainEmbedder, LangChainJudge

        emb = LangChainEmbedder(DeterministicFakeEmbedding(size=16))
        vectors, usage = run(emb.embed(["a", "b", "a"]))
        assert vectors.shape == (3, 16) and np.allclose(vectors[0], vectors[2])
        assert usage.embedding_calls == 1
        lc_openai = pytest.importorskip("langchain_openai")
        oe = lc_openai.OpenAIEmbeddings(
            model="text-embedding-3-small",
            base_url=llm_server.openai_url,
            api_key="k",
            check_embedding_ctx_length=False,
            max_retries=0,
        )
        judge = LangChainJudge(self.chat_openai(llm_server), oe, cache=False)
        vectors, usage = run(judge.embedder.embed(["x y", "z"]))
        assert vectors.shape == (2, 64) and len(llm_server.embedding_requests) == 1


# --------------------------------------------------------------------------- LlamaIndex


class TestLlamaIndex:
    @pytest.fixture(autouse=True)
    def _need(self):
        pytest.importorskip("llama_index.core")

    @staticmethod
    def tool_llm(answers, seen):
        from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
        from llama_index.core.llms.mock import MockFunctionCallingLLM

        def respond(messages, **kw):
            seen.append([(m.role.value, m.content) for m in messages])
            tool = kw["tools"][0].metadata.name
            return ChatMessage(
                role="assistant", blocks=[ToolCallBlock(tool_call_id="c", tool_name=tool, tool_kwargs=answers.pop(0))]
            )

        return MockFunctionCallingLLM(response_generator=respond, is_chat_model=True)

    def test_function_calling_llm(self):
        from ragmeter.judges.llamaindex import LlamaIndexJudge

        seen = []
        llm = self.tool_llm([{"verdicts": VERIFY_OK["verdicts"][:2]}, VERIFY_OK], seen)
        judge = LlamaIndexJudge(llm, backoff_base=0.01)
        assert judge.cache is None
        res = run(judge.run("verify_claims", VERIFY_IN))
        assert [v["verdict"] for v in res.output["verdicts"]] == ["supported", "supported", "not_found"]
        assert res.usage.calls == 2 and res.usage.cost_usd is None
        assert seen[0][0][0] == "system" and json.loads(seen[0][1][1])["claims"][0]["text"] == "Paris is in France."
        assert seen[1][-2][0] == "assistant" and "missing claim indices [2]" in seen[1][-1][1]

    def test_no_tool_call_is_invalid_then_retried(self):
        from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
        from llama_index.core.llms.mock import MockFunctionCallingLLM

        from ragmeter.judges.llamaindex import LlamaIndexJudge

        replies = [
            ChatMessage(role="assistant", content="no tools for you"),
            ChatMessage(
                role="assistant",
                blocks=[
                    ToolCallBlock(tool_call_id="c", tool_name="RateAnswer", tool_kwargs={"score": 0.5, "reason": "ok"})
                ],
            ),
        ]
        llm = MockFunctionCallingLLM(response_generator=lambda messages, **kw: replies.pop(0), is_chat_model=True)
        res = run(LlamaIndexJudge(llm).run("rate_answer", {"question": "q", "answer": "a"}))
        assert res.output == {"score": 0.5, "reason": "ok"} and res.usage.calls == 2

    def test_text_completion_llm_over_http(self, llm_server):
        """A LlamaIndex CustomLLM (no function calling) whose completions come from the fake llm_server:
        astructured_predict takes LlamaIndex's JSON text program path."""
        from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata

        from ragmeter.judges.llamaindex import LlamaIndexJudge

        url = llm_server.openai_url

        class HttpLLM(CustomLLM):
            @property
            def metadata(self) -> LLMMetadata:
                return LLMMetadata(model_name="fake-text-model", is_chat_model=False, is_function_calling_model=False)

            def complete(self, prompt: str, formatted: bool = False, **kw) -> CompletionResponse:
                client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
                resp = client.chat.completions.create(
                    model="fake-text-model", messages=[{"role": "user", "content": prompt}]
                )
                return CompletionResponse(text=resp.choices[0].message.content)

            def stream_complete(self, prompt: str, formatted: bool = False, **kw):  # pragma: no cover
                raise NotImplementedError

        llm_server.push(text("not json at all"), answer({"score": 0.75, "reason": "fine"}))
        judge = LlamaIndexJudge(HttpLLM(), cache=False, backoff_base=0.01)
        res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
        assert res.output == {"score": 0.75, "reason": "fine"} and res.judge == "llamaindex:fake-text-model"
        assert res.usage.calls == 2 and len(llm_server.chat_requests) == 2
        assert "Your answer was invalid" in llm_server.chat_requests[1].user_text

    def test_model_from_schema_covers_task_schemas(self):
        from ragmeter.judges.llamaindex import model_from_schema
        from ragmeter.judges.tasks import TASKS

        for spec in TASKS.values():
            model = model_from_schema(spec.name, spec.schema)
            assert set(model.model_json_schema()["properties"]) == set(spec.schema["properties"])
        Verify = model_from_schema("verify_claims", get_task("verify_claims").schema)
        with pytest.raises(ValueError):
            Verify.model_validate({"verdicts": [{"claim": 0, "verdict": "maybe", "evidence": [], "reason": ""}]})
        ok = Verify.model_validate(
            {"verdicts": [{"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "q"}], "reason": ""}]}
        )
        assert ok.model_dump()["verdicts"][0]["evidence"] == [{"chunk": 0, "quote": "q"}]
        with pytest.raises(ValueError):  # the version-1 answer form is no longer accepted
            Verify.model_validate(
                {"verdicts": [{"claim": 0, "verdict": "supported", "chunks": [0], "quote": "q", "reason": ""}]}
            )

    def test_llamaindex_embedder(self):
        from llama_index.core.embeddings import MockEmbedding

        from ragmeter.judges.llamaindex import LlamaIndexEmbedder

        emb = LlamaIndexEmbedder(MockEmbedding(embed_dim=8))
        vectors, usage = run(emb.embed(["a", "b"]))
        assert vectors.shape == (2, 8) and usage.embedding_calls == 1


# --------------------------------------------------------------------------- with the metric contract


def test_scoring_context_shares_task_results_and_counts_failed_usage(llm_server):
    from ragmeter.data import Sample
    from ragmeter.metrics.base import ScoringContext

    judge = make_judge("openai", llm_server)
    sample = Sample(question="Where is Paris?", contexts=["Paris is in France."], answer="In France.")
    ctx = ScoringContext(sample, judge)

    async def go():
        a, b = await asyncio.gather(ctx.task("extract_claims", CLAIMS_IN), ctx.task("extract_claims", CLAIMS_IN))
        return a, b

    a, b = run(go())
    assert a is b and len(llm_server.chat_requests) == 1 and ctx.usage.calls == 1
    llm_server.responder = lambda req: answer({"score": 9, "reason": "x"})
    with pytest.raises(JudgeError):
        run(ctx.task("rate_answer", {"question": "q", "answer": "a"}))
    assert ctx.usage.calls == 1 + 3 and ctx.usage.retries == 2  # failed work is still paid for
