"""Issue 19: adaptive concurrency (AIMD), embeddings batched across samples, the per-task request
body of the OpenAI transport, and the runner's default samples in flight.

Real SDKs against the local fake server (``helpers.servers``); waits between retries go through
an injected ``sleep`` that records them, so no test sleeps for a Retry-After.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

import ragmeter as rm
from helpers.scripted import ScriptedJudge
from helpers.servers import Answer, error, fake_embedding, oracle
from ragmeter.executors import DEFAULT_CONCURRENCY, default_concurrency
from ragmeter.judges import OpenAIEmbedder, OpenAIJudge
from ragmeter.judges.base import JudgeError
from ragmeter.judges.openai import OpenAITransport
from ragmeter.judges.ratelimit import AdaptiveLimit, ConcurrencyLimit
from ragmeter.judges.retry import Dispatcher, TransientError, is_overload
from ragmeter.judges.tasks import get_task
from ragmeter.judges.transport import ChatRequest, Turn


class FakeSleep:
    """Records the waits asked for and returns at once (one turn of the loop)."""

    def __init__(self):
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        await asyncio.sleep(0)


# --------------------------------------------------------------------------- AIMD


def test_adaptive_limit_slow_start_then_additive_increase_and_halving():
    lim = AdaptiveLimit(20, initial=4)
    assert (lim.limit, lim.ceiling) == (4, 20)
    for _ in range(4):  # slow start: +1 per success, one round of 4 doubles it
        lim.succeeded()
    assert lim.limit == 8
    assert lim.overloaded(lim.epoch) is True and lim.limit == 4 and lim.slow_start is False
    assert lim.overloaded(0) is False and lim.limit == 4  # a reply of a request sent before the cut
    for _ in range(3):
        lim.succeeded()
    assert lim.limit == 4  # additive increase: +1 per `limit` successes
    lim.succeeded()
    assert lim.limit == 5
    for _ in range(200):
        lim.succeeded()
    assert lim.limit == 20  # never above the ceiling
    for _ in range(10):
        lim.overloaded(lim.epoch)
    assert lim.limit == 1  # never below the floor


async def turns(n: int = 3) -> None:
    """Let the loop run ``n`` times (a slot handed over with call_soon_threadsafe lands in two)."""
    for _ in range(n):
        await asyncio.sleep(0)


def test_adaptive_limit_holders_above_a_cut_finish_and_no_new_one_starts():
    async def go():
        lim = AdaptiveLimit(8, initial=4)
        for _ in range(4):
            await lim.acquire()
        lim.overloaded(lim.epoch)  # limit 2, 4 held
        waiter = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0)
        lim.release()
        lim.release()  # 2 held: still not under the limit
        await asyncio.sleep(0)
        assert not waiter.done() and lim.in_use == 2
        lim.release()  # 1 held: the waiter gets the slot (handed over thread-safely: two turns)
        await turns()
        assert waiter.done() and lim.in_use == 2
        lim.succeeded()  # growth wakes waiters at once
        late = [asyncio.ensure_future(lim.acquire()) for _ in range(2)]
        await turns()
        assert sum(t.done() for t in late) == 0
        lim.succeeded()
        lim.succeeded()  # additive increase after the cut: +1 per `limit` (2) successes -> 3
        await turns()
        assert sum(t.done() for t in late) == 1 and lim.limit == 3

    asyncio.run(go())


def test_is_overload():
    assert is_overload(TransientError("slow down", retry_after=2.0))
    assert not is_overload(TransientError("timed out"))
    assert not is_overload(ValueError("bad"))


@pytest.mark.slow
def test_judge_backs_off_on_429_with_retry_after_and_grows_again(llm_server):
    """The server answers 429 (Retry-After: 7) to any request above 4 in flight."""
    allowed = 4

    def responder(req):
        if llm_server._in_flight > allowed:
            return error(429, retry_after=7)
        return Answer(output=oracle(req).output, delay=0.02)

    llm_server.responder = responder
    sleep = FakeSleep()
    judge = OpenAIJudge(
        "gpt-4o-mini",
        base_url=llm_server.openai_url,
        api_key="test",
        cache=False,
        embedder=None,
        initial_concurrency=16,
        max_concurrency=32,
        sleep=sleep,
        max_retries=20,
    )
    slots = judge.dispatcher.slots
    assert isinstance(slots, AdaptiveLimit) and slots.limit == 16

    async def go():
        return await asyncio.gather(
            *[judge.run("rate_answer", {"question": f"q{i}", "answer": "a"}) for i in range(48)]
        )

    results = asyncio.run(go())
    assert len(results) == 48 and all(r.output["score"] == 1.0 for r in results)
    rejected = len(llm_server.chat_requests) - 48  # requests answered 429
    assert rejected > 0 and sleep.waits.count(7.0) >= rejected  # each request answered 429 waited the Retry-After
    assert all(0 < w <= 7.0 for w in sleep.waits)  # the others what was left of the judge's pause
    assert slots.epoch >= 1 and not slots.slow_start
    assert sum(r.usage.retries for r in results) == rejected
    assert slots.limit <= allowed * 2  # cut from 16 to the provider's size, then additive increase only


def test_fixed_concurrency_when_adaptive_is_off(llm_server):
    judge = OpenAIJudge(
        "gpt-4o-mini",
        base_url=llm_server.openai_url,
        api_key="test",
        cache=False,
        embedder=None,
        adaptive_concurrency=False,
        max_concurrency=3,
    )
    assert type(judge.dispatcher.slots) is ConcurrencyLimit and judge.dispatcher.slots.limit == 3
    assert type(Dispatcher(max_concurrency=5).slots) is ConcurrencyLimit


def test_default_concurrency_follows_the_judge(llm_server):
    judge = OpenAIJudge("gpt-4o-mini", base_url=llm_server.openai_url, api_key="test", cache=False)
    assert judge.dispatcher.slots.ceiling == 64 and judge.dispatcher.slots.limit == 16
    assert default_concurrency(judge) == 64
    assert default_concurrency(OpenAIJudge(base_url=llm_server.openai_url, api_key="t", max_concurrency=4)) == 8
    assert default_concurrency(ScriptedJudge({})) == DEFAULT_CONCURRENCY == 8
    assert default_concurrency(None) == 8
    # the default embedder shares the judge's budget; its own cap is a setting
    assert judge.embedder.dispatcher.slots is judge.dispatcher.slots and judge.embedder.max_concurrency == 4
    assert (
        OpenAIJudge(base_url=llm_server.openai_url, api_key="t", embedding_concurrency=2).embedder.max_concurrency == 2
    )


# --------------------------------------------------------------------------- embeddings across samples


def test_concurrent_embed_calls_share_one_request(llm_server):
    emb = OpenAIEmbedder(base_url=llm_server.openai_url, api_key="test", cache=False, max_concurrency=1)
    calls = [[f"text {i}", "shared text"] for i in range(10)]

    async def go():
        return await asyncio.gather(*[emb.embed(texts) for texts in calls])

    out = asyncio.run(go())
    reqs = llm_server.embedding_requests
    assert len(reqs) == 1
    assert reqs[0].body["input"] == [f"text {i}" for i in range(1)] + ["shared text"] + [
        f"text {i}" for i in range(1, 10)
    ]
    for texts, (vectors, _usage) in zip(calls, out):
        assert np.allclose(vectors, [fake_embedding(t) for t in texts])
    usages = [u for _, u in out]
    assert sum(u.embedding_calls for u in usages) == 1 and usages[0].embedding_calls == 1
    # the request's tokens (1 per word: 10 * 2 + 2) are shared in proportion to characters
    assert sum(u.prompt_tokens for u in usages) == 22 and all(u.prompt_tokens > 0 for u in usages[1:])


def test_embed_batches_split_at_batch_size_and_failures_reach_every_call(llm_server):
    emb = OpenAIEmbedder(
        base_url=llm_server.openai_url, api_key="test", cache=False, max_concurrency=1, batch_size=4, max_retries=0
    )

    async def go(n):
        return await asyncio.gather(*[emb.embed([f"a{i}", f"b{i}"]) for i in range(n)], return_exceptions=True)

    out = asyncio.run(go(5))  # 10 texts, 4 per request
    assert [len(r.body["input"]) for r in llm_server.embedding_requests] == [4, 4, 2]
    assert all(not isinstance(r, BaseException) for r in out)
    llm_server.reset()
    llm_server.push_embedding(error(400))
    out = asyncio.run(go(2))
    assert len(llm_server.embedding_requests) == 1
    assert all(isinstance(r, JudgeError) for r in out)
    assert [r.usage.embedding_calls for r in out] == [1, 0]  # the failed request is counted once


@pytest.mark.slow
def test_evaluate_batches_embeddings_across_samples_with_the_same_scores(llm_server):
    data = [json.loads(line) for line in open(rm.__file__.replace("core/__init__.py", "examples/rag_samples.jsonl"))][
        :12
    ]
    metrics = ["answer_relevancy", "faithfulness"]

    def run(concurrency):
        llm_server.reset()
        judge = OpenAIJudge("gpt-4o-mini", base_url=llm_server.openai_url, api_key="test", cache=False)
        result = rm.evaluate(data, metrics=metrics, judge=judge, progress=False, concurrency=concurrency)
        return result, len(llm_server.chat_requests), len(llm_server.embedding_requests)

    one_by_one, chats1, embeds1 = run(1)
    together, chats, embeds = run(None)
    assert chats == chats1 == 3 * len(data)  # judge calls per sample unchanged
    assert embeds1 == len(data) and embeds < len(data)  # fewer embedding requests than samples
    assert sum(r.usage.embedding_calls for r in together) == embeds
    assert [[(s.value, s.status) for s in r.scores.values()] for r in together] == [
        [(s.value, s.status) for s in r.scores.values()] for r in one_by_one
    ]


# --------------------------------------------------------------------------- the request body


def _request(task: str, inputs: dict, **kw) -> ChatRequest:
    spec = get_task(task)
    system, user = spec.messages(inputs)
    return ChatRequest(task=task, system=system, turns=[Turn("user", user)], schema=spec.schema, **kw)


def test_request_body_parts_are_built_once_per_task_and_never_shared():
    t = OpenAITransport("gpt-4o-mini", api_key="k", base_url="http://127.0.0.1:9/v1")
    rate = _request("rate_answer", {"question": "q", "answer": "a"}, max_tokens=100)
    rate2 = _request("rate_answer", {"question": "other", "answer": "b"}, max_tokens=100)
    chunks = _request("rate_chunks", {"question": "q", "reference": None, "chunks": [["s."]]})
    b1, b2, b3 = (json.loads(t.body(r)) for r in (rate, rate2, chunks))
    assert b1["response_format"]["json_schema"] == {
        "name": "rate_answer",
        "schema": get_task("rate_answer").schema,
        "strict": True,
    }
    assert b3["response_format"]["json_schema"]["name"] == "rate_chunks"
    assert b3["response_format"]["json_schema"]["schema"] == get_task("rate_chunks").schema
    assert b1["messages"] != b2["messages"] and b1["response_format"] == b2["response_format"]
    assert b1["max_tokens"] == 100 and b1["temperature"] == 0.0 and b1["model"] == "gpt-4o-mini"
    assert t.task_parts("rate_answer", rate.schema)[1] is t.task_parts("rate_answer", rate.schema)[1]  # built once
    other = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": False,
    }
    mine = json.loads(t.body(ChatRequest("rate_answer", "s", [Turn("user", "u")], other)))
    assert mine["response_format"]["json_schema"]["schema"] == other  # same name, another schema: its own body
    again = json.loads(t.body(rate))
    assert again["response_format"]["json_schema"]["schema"] == get_task("rate_answer").schema


def test_request_body_modes_and_extra_body():
    text = OpenAITransport("m", api_key="k", base_url="http://x/v1", structured="text", extra_body={"top_k": 5})
    body = json.loads(text.body(_request("rate_answer", {"question": "q", "answer": "a"})))
    assert "response_format" not in body and body["top_k"] == 5 and "JSON schema" in body["messages"][0]["content"]
    obj = OpenAITransport(
        "m",
        api_key="k",
        base_url="http://x/v1",
        structured="json_object",
        extra_body={"response_format": {"type": "json_object", "x": 1}},
    )
    body = json.loads(obj.body(_request("rate_answer", {"question": "q", "answer": "a"})))
    assert body["response_format"] == {"type": "json_object", "x": 1}


def test_body_on_the_wire_matches_and_verdicts_are_the_same(llm_server):
    judge = OpenAIJudge(
        "gpt-4o-mini", base_url=llm_server.openai_url, api_key="test", cache=False, embedder=None, seed=3
    )
    out = asyncio.run(judge.run("rate_chunks", {"question": "q", "reference": None, "chunks": [["A b.", "C d."]]}))
    sent = llm_server.chat_requests[0].body
    assert sent["seed"] == 3 and sent["response_format"]["json_schema"]["name"] == "rate_chunks"
    assert out.output["answerable"] == 5 and out.usage.prompt_tokens == 100 and out.usage.completion_tokens == 20


def test_scripted_judge_verdicts_do_not_depend_on_samples_in_flight():
    data = [json.loads(line) for line in open(rm.__file__.replace("core/__init__.py", "examples/rag_samples.jsonl"))]

    def script():
        return {
            "extract_claims": lambda i: {"claims": [{"unit": u, "text": t} for u, t in enumerate(i["units"])]},
            "verify_claims": lambda i: {
                "verdicts": [
                    {"claim": k, "verdict": "supported" if len(c) % 2 else "not_found", "evidence": [], "reason": "r"}
                    for k, c in enumerate(i["claims"])
                ]
            },
        }

    results = []
    for concurrency in (1, None, 64):
        judge = ScriptedJudge(script())
        res = rm.evaluate(data, metrics=["faithfulness"], judge=judge, progress=False, concurrency=concurrency)
        results.append([r.scores["faithfulness"].value for r in res])
        assert judge.calls == {"extract_claims": len(data), "verify_claims": len(data)}
    assert results[0] == results[1] == results[2]
