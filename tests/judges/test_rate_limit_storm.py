"""A 429 storm ridden out (issue 33, item 11): when the provider says wait, every request of the
judge waits (one shared pause, then one probe request), and the retry budget is time, not a count.

Through the real OpenAI and Anthropic SDKs against a local server (tests/helpers/servers.py) that
answers every request with 429 for a few seconds after the first one. Before: each of the 8
requests in flight retried on its own (5 attempts x Retry-After: 1 = 4 s) and all 8 samples
errored in a 4.5 s storm. Checked by counts: errored samples, and requests the server saw during
the storm (about one per pause after the first wave). The budget and the rate-limit headers are
checked on a fake clock.
"""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

import pytest

import ragmeter as rm
from helpers import FakeClock
from helpers.servers import Fail, FakeLLMServer, error, oracle
from ragmeter.judges import AnthropicJudge, JudgeError, OpenAIJudge
from ragmeter.judges.ratelimit import Pause
from ragmeter.judges.retry import RetryPolicy, rate_limit_reset

BACKENDS = ["openai", "anthropic"]
IN_FLIGHT = 8


def judge_on(backend: str, server: FakeLLMServer, **kw):
    kw.setdefault("cache", False)
    if backend == "openai":
        return OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test-key", embedder=None, **kw)
    return AnthropicJudge("claude-haiku-4-5", base_url=server.url, api_key="test-key", **kw)


def samples(n: int = IN_FLIGHT) -> list[rm.Sample]:
    return [
        rm.Sample(
            f"What is the capital of country {i}?",
            [f"The capital of country {i} is city {i}."],
            answer=f"City {i}.",
            id=f"s{i}",
        )
        for i in range(n)
    ]


class Storm:
    """A responder: 429 (``headers``) to every request for ``seconds`` after the first, then valid answers."""

    def __init__(self, seconds: float, headers):
        self.seconds, self.headers, self.start = seconds, headers, None

    def __call__(self, req):
        if self.start is None:
            self.start = req.started
        if req.started - self.start < self.seconds:
            return Fail(429, "rate limited", dict(self.headers() if callable(self.headers) else self.headers))
        return oracle(req)

    def during(self, server: FakeLLMServer) -> int:
        return sum(1 for r in server.chat_requests if r.started - self.start < self.seconds)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_429_storm_with_retry_after_errors_no_sample_and_costs_one_request_per_pause(backend):
    storm = Storm(4.5, {"retry-after": "1"})
    with FakeLLMServer(storm) as server:
        result = rm.evaluate(
            samples(), ["context_relevance"], judge_on(backend, server), concurrency=IN_FLIGHT, progress=False
        )
        errored = [r.sample.id for r in result if any(s.error for s in r.scores.values())]
        assert errored == []  # all 8 errored before (5 attempts x 1 s < 4.5 s)
        assert all(r.scores["context_relevance"].value is not None for r in result)
        # the first wave (8 in flight), then one probe per pause of 1 s (about 4), not 8 per second
        assert storm.during(server) <= IN_FLIGHT + math.ceil(storm.seconds / 1) + 1
        assert len(server.chat_requests) - storm.during(server) == IN_FLIGHT  # then each sample once


@pytest.mark.parametrize("backend", BACKENDS)
def test_rate_limit_reset_headers_without_retry_after_pause_the_judge(backend):
    """OpenAI's x-ratelimit-reset-* and Anthropic's anthropic-ratelimit-*-reset on a 429 with no
    Retry-After say how long to wait, like Retry-After."""

    def headers():
        if backend == "openai":
            return {
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "500ms",
                "x-ratelimit-remaining-tokens": "9000",
                "x-ratelimit-reset-tokens": "6m0s",
            }
        reset = (datetime.now(UTC) + timedelta(milliseconds=500)).isoformat()
        return {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": reset}

    storm = Storm(1.8, headers)
    with FakeLLMServer(storm) as server:
        judge = judge_on(backend, server)
        result = rm.evaluate(samples(), ["context_relevance"], judge, concurrency=IN_FLIGHT, progress=False)
        assert not [s.error for r in result for s in r.scores.values() if s.error]
        assert storm.during(server) <= IN_FLIGHT + math.ceil(storm.seconds / 0.5) + 1
        assert judge.dispatcher.pause.holds >= 2


def test_rate_limit_reset_reads_both_providers_headers():
    assert rate_limit_reset({"x-ratelimit-reset-requests": "1s", "x-ratelimit-remaining-requests": "0"}) == 1.0
    assert rate_limit_reset({"x-ratelimit-reset-requests": "20ms", "x-ratelimit-reset-tokens": "1m30.5s"}) == 0.02
    assert (
        rate_limit_reset(
            {
                "x-ratelimit-reset-tokens": "6m0s",
                "x-ratelimit-remaining-tokens": "0",
                "x-ratelimit-reset-requests": "1s",
                "x-ratelimit-remaining-requests": "0",
            }
        )
        == 360.0
    )
    soon = (datetime.now(UTC) + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    assert (
        28
        < rate_limit_reset({"anthropic-ratelimit-tokens-reset": soon, "anthropic-ratelimit-tokens-remaining": "0"})
        <= 30
    )
    assert rate_limit_reset({"x-ratelimit-reset-requests": "soon"}) is None
    assert rate_limit_reset({}) is None


# ---------------------------------------------------------------------------- the budget, on a fake clock


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_retry_budget_is_time_not_a_count(backend):
    """A storm that never ends: the request is retried while its own waits fit in max_wait (10 s
    of Retry-After: 2 = 5 waits, 6 requests, however many max_retries says), then fails naming the
    budget. A Retry-After beyond the whole budget fails at once, after 1 request."""
    clock = FakeClock()
    with FakeLLMServer(lambda req: error(429, retry_after=2)) as server:
        judge = judge_on(backend, server, clock=clock, sleep=clock.sleep, max_retries=1, max_wait=10)
        with pytest.raises(JudgeError, match=r"beyond the retry budget left: 0\.0 of max_wait=10 s") as err:
            asyncio.run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
        assert len(server.chat_requests) == 6 and clock.sleeps == [2.0] * 5
        assert err.value.attempts == 6
        server.reset()
        server.responder = lambda req: error(429, retry_after=3600)
        with pytest.raises(JudgeError, match="asks to wait 3600.0 s"):
            asyncio.run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
        assert len(server.chat_requests) == 1


def test_other_transient_failures_keep_their_count():
    """A 500 is not the provider saying wait: max_retries (a count) still applies, no pause."""
    clock = FakeClock()
    with FakeLLMServer(lambda req: error(500)) as server:
        judge = judge_on("openai", server, clock=clock, sleep=clock.sleep, max_retries=2, backoff_base=0.01)
        with pytest.raises(JudgeError, match="after 3 attempts"):
            asyncio.run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
        assert len(server.chat_requests) == 3 and judge.dispatcher.pause.holds == 0


def test_pause_lets_one_probe_go_first_then_everyone():
    """The pause's states on a fake clock: paused -> one probe -> its answer lets the rest go."""
    clock = FakeClock()
    pause = Pause(clock=clock, sleep=clock.sleep)

    async def go():
        pause.hold(1.5)
        first = await pause.wait()
        assert first[0] == 1.5 and first[1] != 0  # waited the pause, then is the probe
        assert pause.blocked()
        second = asyncio.ensure_future(pause.wait())
        await asyncio.sleep(0.01)
        assert not second.done()  # waits for the probe's answer
        pause.done(first[1], ok=True)
        waited, probe, _ = await asyncio.wait_for(second, 1)
        assert probe == 0 and not pause.blocked()
        pause.hold(100)
        with pytest.raises(Exception, match="100.0 s"):
            await pause.wait(budget=60)

    asyncio.run(go())


def test_pause_for_uses_retry_after_else_backoff_that_never_nears_zero():
    policy = RetryPolicy(backoff_base=0.5, backoff_max=4, max_retry_after=30)
    assert policy.pause_for(0, 2.5) == 2.5 and policy.pause_for(3, 90) == 30
    for streak, top in ((0, 0.5), (1, 1.0), (3, 4.0), (9, 4.0)):
        assert all(top / 2 <= policy.pause_for(streak, None) <= top for _ in range(50))
