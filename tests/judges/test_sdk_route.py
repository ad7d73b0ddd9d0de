"""The judges' request path (:class:`ragmeter.judges.sdk_route.SdkRoute`).

The first request of a route goes through the SDK's own ``client.post``; later ones reuse the
URL, headers and timeout it sent, on the same client's httpx transport. These tests warm a route
first, so what they check goes through the reused path: the same request on the wire, the SDK's
own exceptions (classified, retried, redacted as before), timeouts, redirects, cookies, and the
connection pool sized to the judge's cap. Real SDKs against the local fake llm_server.
"""

from __future__ import annotations

import asyncio

import pytest

from helpers import FakeClock
from helpers.servers import Fail, FakeLLMServer, echo_key, error, hang
from ragmeter.judges import JudgeError
from ragmeter.judges.retry import classify_error
from ragmeter.judges.transport import ChatRequest, Turn

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from ragmeter.judges.anthropic import AnthropicJudge  # noqa: E402
from ragmeter.judges.openai import OpenAIJudge  # noqa: E402

BACKENDS = ["openai", "anthropic"]
SDK = {"openai": openai, "anthropic": anthropic}
KEY = "tok-Zq8pW3xYk2LmN7vB0cD"  # no generic pattern knows it: only the judge's own redaction hides it
RATE_IN = {"question": "Where is Paris?", "answer": "In France."}


def make_judge(backend: str, llm_server: FakeLLMServer, clock: FakeClock | None = None, **kw):
    clock = clock or FakeClock()
    kw.setdefault("cache", False)
    kw.setdefault("clock", clock)
    kw.setdefault("sleep", clock.sleep)
    kw.setdefault("timeout", 5.0)
    key = kw.pop("api_key", KEY)
    if backend == "openai":
        return OpenAIJudge("gpt-4o-mini", base_url=llm_server.openai_url, api_key=key, embedder=None, **kw)
    return AnthropicJudge("claude-haiku-4-5", base_url=llm_server.url, api_key=key, **kw)


async def warm_route(judge, timeout: float = 5.0):
    """The running loop's first route, after one request through the SDK; ``(route, body)``."""
    request = ChatRequest(
        task="rate_answer",
        system="Rate it.",
        turns=[Turn("user", "Where is Paris?")],
        schema={"type": "object"},
        max_tokens=50,
        timeout=timeout,
    )
    route = judge.transport.clients.get().next()
    body = judge.transport.body(request)
    await route.post(body, timeout)
    assert timeout in route._sent  # later requests take the reused path
    return route, body


@pytest.mark.parametrize("backend", BACKENDS)
def test_reused_requests_are_what_the_sdk_sends(backend, llm_server):
    judge = make_judge(backend, llm_server)

    async def go():
        for _ in range(3):
            await judge.run("rate_answer", RATE_IN)
        return judge.transport.clients.get().routes[0]._sent

    assert 5.0 in asyncio.run(go())
    first, *later = llm_server.chat_requests
    assert len(later) == 2
    for req in later:
        assert req.path == first.path and req.body == first.body
        assert {k: v for k, v in req.headers.items() if k != "content-length"} == {
            k: v for k, v in first.headers.items() if k != "content-length"
        }
    sent_key = first.headers.get("x-api-key") or first.headers["authorization"].removeprefix("Bearer ")
    assert sent_key == KEY  # the SDK's auth header (Anthropic: x-api-key, or Bearer in recent SDKs)
    assert first.headers["x-stainless-retry-count"] == "0" and first.headers["x-stainless-lang"] == "python"


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_statuses_are_the_sdk_exceptions(backend, llm_server):
    sdk = SDK[backend]
    judge = make_judge(backend, llm_server)

    async def go():
        route, body = await warm_route(judge)
        cases = [
            (error(429, retry_after=0.3), sdk.RateLimitError, (True, 0.3)),
            (error(400, message="bad schema"), sdk.BadRequestError, (False, None)),
            (error(401), sdk.AuthenticationError, (False, None)),
            (error(503), sdk.InternalServerError, (True, None)),
        ]
        for reply, exc_type, classified in cases:
            llm_server.push(reply)
            with pytest.raises(exc_type) as info:
                await route.post(body, 5.0)
            assert isinstance(info.value, sdk.APIStatusError) and info.value.status_code == reply.status
            assert classify_error(info.value) == classified
            assert reply.message in str(info.value)

    asyncio.run(go())
    assert len(llm_server.chat_requests) == 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_429_retry_after_is_honoured_on_the_reused_path(backend, llm_server):
    clock = FakeClock()
    judge = make_judge(backend, llm_server, clock, backoff_base=0.001)

    async def go():
        await warm_route(judge)
        llm_server.push(error(429, retry_after=0.3))
        return await judge.run("rate_answer", RATE_IN)

    res = asyncio.run(go())
    assert res.usage.calls == 2 and res.usage.retries == 1
    assert clock.sleeps == [0.3]  # Retry-After, not the 1 ms backoff
    assert len(llm_server.chat_requests) == 3  # warm-up, 429, success


@pytest.mark.parametrize("backend", BACKENDS)
def test_400_is_not_retried_on_the_reused_path(backend, llm_server):
    judge = make_judge(backend, llm_server)

    async def go():
        await warm_route(judge)
        llm_server.push(error(400, message="bad request body"))
        await judge.run("rate_answer", RATE_IN)

    with pytest.raises(JudgeError) as info:
        asyncio.run(go())
    assert info.value.usage.calls == 1 and len(llm_server.chat_requests) == 2
    assert "BadRequestError" in str(info.value) and "bad request body" in str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_401_echoing_the_key_is_redacted_on_the_reused_path(backend, llm_server):
    judge = make_judge(backend, llm_server)

    async def go():
        await warm_route(judge)
        llm_server.push(echo_key(401))
        await judge.run("rate_answer", RATE_IN)

    with pytest.raises(JudgeError) as info:
        asyncio.run(go())
    err = info.value
    assert "AuthenticationError" in str(err) and "[REDACTED]" in str(err) and KEY not in str(err)
    assert err.__cause__ is None and err.__suppress_context__
    assert err.usage.calls == 1 and len(llm_server.chat_requests) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_http_timeout_is_the_sdk_timeout_error(backend, llm_server):
    sdk = SDK[backend]
    judge = make_judge(backend, llm_server)

    async def go():
        route, body = await warm_route(judge, timeout=0.25)
        llm_server.push(hang(2.0))
        with pytest.raises(sdk.APITimeoutError) as info:  # the read timeout, not the answer 2 s later
            await route.post(body, 0.25)
        return info.value

    exc = asyncio.run(go())
    assert classify_error(exc) == (True, None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_refused_connection_is_the_sdk_connection_error(backend):
    sdk = SDK[backend]
    llm_server = FakeLLMServer().start()
    judge = make_judge(backend, llm_server)

    async def go():
        route, body = await warm_route(judge)
        llm_server.stop()  # the kept-alive connection still answers; a second one is refused
        return await asyncio.gather(route.post(body, 5.0), route.post(body, 5.0), return_exceptions=True)

    try:
        results = asyncio.run(go())
    finally:
        llm_server.stop()
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 1 and type(refused[0]) is sdk.APIConnectionError
    assert classify_error(refused[0]) == (True, None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_redirect_is_followed_on_the_reused_path(backend, llm_server):
    judge = make_judge(backend, llm_server)
    path = "/v1/chat/completions" if backend == "openai" else "/v1/messages"

    async def go():
        await warm_route(judge)
        llm_server.push(Fail(307, "moved", headers={"location": llm_server.url + path}))
        return await judge.run("rate_answer", RATE_IN)

    res = asyncio.run(go())
    assert res.usage.calls == 1 and res.output["score"] == 1.0
    moved, again = llm_server.chat_requests[1:]
    assert again.path == moved.path and again.body == moved.body


@pytest.mark.parametrize("backend", BACKENDS)
def test_cookie_set_by_the_server_is_sent_back(backend, llm_server):
    judge = make_judge(backend, llm_server)

    async def go():
        await warm_route(judge)
        llm_server.push(Fail(503, "busy", headers={"set-cookie": "lb=node-2; Path=/"}))
        return await judge.run("rate_answer", RATE_IN)

    res = asyncio.run(go())
    assert res.usage.calls == 2  # 503 retried
    busy, retried = llm_server.chat_requests[1:]
    assert "cookie" not in busy.headers and retried.headers["cookie"] == "lb=node-2"


@pytest.mark.parametrize("backend", BACKENDS)
def test_connection_pools_are_sized_to_the_cap(backend):
    judge_kw = {"max_concurrency": 10, "adaptive_concurrency": False}
    with FakeLLMServer(latency=0.5) as llm_server:
        judge = make_judge(backend, llm_server, **judge_kw)

        async def go():
            await judge.run("rate_answer", RATE_IN)
            await judge.run("rate_answer", RATE_IN)
            routes = judge.transport.clients.get().routes
            sequential = [bool(r._sent) for r in routes]
            await asyncio.gather(*(judge.run("rate_answer", {**RATE_IN, "answer": str(i)}) for i in range(10)))
            return [r.capacity for r in routes], sequential

        capacities, sequential = asyncio.run(go())
        assert capacities == [4, 3, 3]  # 10 connections in all, at most 4 per pool
        assert sequential == [True, False, False]  # one request at a time: the first pool only
        assert llm_server.max_concurrent == 10  # no request waited for a connection


@pytest.mark.parametrize("backend", BACKENDS)
def test_event_hooks_of_the_callers_http_client_see_every_request(backend, llm_server):
    seen: list[tuple[str, int]] = []

    async def on_request(request):
        seen.append(("request", len(request.content)))

    async def on_response(response):
        seen.append(("response", response.status_code))

    http_client = SDK[backend].DefaultAsyncHttpxClient(event_hooks={"request": [on_request], "response": [on_response]})
    judge = make_judge(backend, llm_server, client_kwargs={"http_client": http_client})

    async def go():
        for _ in range(3):
            await judge.run("rate_answer", RATE_IN)
        (route,) = judge.transport.clients.get().routes  # the caller's client: one route, its own pool
        return route

    route = asyncio.run(go())
    assert route.capacity is None and route._sent[5.0].transport is None  # reused through AsyncClient.send
    sizes = [int(r.headers["content-length"]) for r in llm_server.chat_requests]
    assert seen == [x for size in sizes for x in (("request", size), ("response", 200))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_client_without_the_internals_reuse_needs_keeps_the_sdk_path(backend, llm_server):
    """An SDK release that renamed what the reused path builds on (here a client subclass without
    ``_make_status_error_from_response``) still works: every request goes through ``client.post``."""
    from ragmeter.judges.sdk_route import SdkRoute

    sdk = SDK[backend]
    base = sdk.AsyncOpenAI if backend == "openai" else sdk.AsyncAnthropic

    class Renamed(base):
        _make_status_error_from_response = None

    url = llm_server.openai_url if backend == "openai" else llm_server.url
    client = Renamed(api_key=KEY, base_url=url, max_retries=0)
    path = "/chat/completions" if backend == "openai" else "/v1/messages"
    judge = make_judge(backend, llm_server)
    body = judge.transport.body(
        ChatRequest(
            task="rate_answer",
            system="Rate it.",
            turns=[Turn("user", "Where is Paris?")],
            schema={"type": "object"},
            max_tokens=50,
            timeout=5.0,
        )
    )

    async def go():
        route = SdkRoute(client, path, sdk)
        replies = [await route.post(body, 5.0) for _ in range(3)]
        await client.close()
        return route, replies

    route, replies = asyncio.run(go())
    assert route.reuse is False and route._sent == {}
    assert len(llm_server.chat_requests) == 3 and all(isinstance(r, bytes) and r.startswith(b"{") for r in replies)
