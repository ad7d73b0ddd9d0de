"""The SDK fast path (:mod:`ragmeter.judges.sdk_route`) is used only with the SDK releases it is known
to work with, one range per SDK (:data:`~ragmeter.judges.sdk_route.FAST_PATH_VERSIONS`): the oldest
supported release (``.ci/oldest.txt``) up to the next major release after the newest tested.

Checked both ways: the installed SDK is in its range and its routes reuse (CI runs this file on
the newest releases and again on the oldest pins, so both ends of each range are exercised), and
the gate decides by version alone: a version string just outside the range keeps a real client's
every request on ``client.post``. Real SDKs against the local fake server."""

from __future__ import annotations

import asyncio
import re
import types

import pytest

from helpers import TESTS
from helpers.servers import FakeLLMServer
from ragmeter.judges.sdk_route import FAST_PATH_VERSIONS, SdkRoute, fast_path_supported, release

SDKS = ("openai", "anthropic")
PATHS = {"openai": "/chat/completions", "anthropic": "/v1/messages"}
KEY = "sk-test-0123456789"


def oldest_pins() -> dict[str, str]:
    here = TESTS
    while not (here / ".ci").is_dir():
        here = here.parent
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (here / ".ci" / "oldest.txt").read_text(), re.M))
    return {sdk: pins[sdk] for sdk in SDKS}


def test_each_range_starts_at_the_oldest_supported_release():
    assert {sdk: low for sdk, (low, _) in FAST_PATH_VERSIONS.items()} == oldest_pins()


@pytest.mark.parametrize(
    "sdk, version, supported",
    [
        ("openai", "1.58.1", True),  # the oldest supported release
        ("openai", "1.58.0", False),  # one below it
        ("openai", "1.99.9", True),
        ("openai", "3.57.0", True),  # the newest tested
        ("openai", "3.99.0rc1", True),
        ("openai", "4.0.0", False),  # the next major release: not known to work
        ("openai", "4.0.0rc1", False),
        ("anthropic", "0.40.0", True),
        ("anthropic", "0.39.9", False),
        ("anthropic", "1.0.0", True),
        ("anthropic", "2.14.0", True),
        ("anthropic", "3.0.0", False),
        ("openai", "", False),  # no version, or one without a release number
        ("openai", "dev", False),
        ("mistralai", "1.0.0", False),  # an SDK the fast path does not know
    ],
)
def test_the_gate_by_version_string(sdk, version, supported):
    assert fast_path_supported(sdk, version) is supported


def test_release_numbers():
    assert [release(v) for v in ("1.58.1", "2.0.0rc1", "0.40", "v3", "x1")] == [
        (1, 58, 1),
        (2, 0, 0),
        (0, 40),
        (3,),
        None,
    ]


def _module_with_version(sdk: types.ModuleType, version: str) -> types.ModuleType:
    """The SDK module as the route sees it, but claiming ``version``."""
    fake = types.ModuleType(sdk.__name__)
    fake.__dict__.update({k: v for k, v in vars(sdk).items() if not k.startswith("__")})
    fake.__version__ = version
    return fake


def _route_after_three_posts(sdk_name: str, sdk: types.ModuleType, server: FakeLLMServer) -> SdkRoute:
    from ragmeter.judges.anthropic import AnthropicJudge
    from ragmeter.judges.openai import OpenAIJudge
    from ragmeter.judges.transport import ChatRequest, Turn

    real = __import__(sdk_name)
    if sdk_name == "openai":
        client_class, url = real.AsyncOpenAI, server.openai_url
        judge = OpenAIJudge("gpt-4o-mini", base_url=url, api_key=KEY, embedder=None, cache=False)
    else:
        client_class, url = real.AsyncAnthropic, server.url
        judge = AnthropicJudge("claude-haiku-4-5", base_url=url, api_key=KEY, cache=False)
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

    async def go() -> SdkRoute:
        client = client_class(api_key=KEY, base_url=url, max_retries=0)
        route = SdkRoute(client, PATHS[sdk_name], sdk)
        for _ in range(3):
            reply = await route.post(body, 5.0)
            assert reply.startswith(b"{")
        await client.close()
        return route

    return asyncio.run(go())


@pytest.mark.parametrize("sdk_name", SDKS)
def test_the_installed_sdk_is_in_its_range_and_reuses(sdk_name):
    """The installed release (the newest, or the oldest pin in CI's second run) is within its
    range, and a route on it reuses what the first request sent."""
    sdk = pytest.importorskip(sdk_name)
    low, high = FAST_PATH_VERSIONS[sdk_name]
    assert fast_path_supported(sdk_name, sdk.__version__), (
        f"{sdk_name} {sdk.__version__} is outside the fast path's range [{low}, {high}): check the route's "
        "tests on it (tests/judges/test_sdk_route.py), then widen FAST_PATH_VERSIONS"
    )
    with FakeLLMServer() as server:
        route = _route_after_three_posts(sdk_name, sdk, server)
    assert route.reuse is True and 5.0 in route._sent
    assert len(server.chat_requests) == 3


@pytest.mark.parametrize("sdk_name", SDKS)
def test_a_release_outside_the_range_keeps_every_request_on_client_post(sdk_name):
    """The same real client, its module claiming the next major release (or one below the
    oldest): no reuse, every request through the SDK's own ``client.post``, all answered."""
    sdk = pytest.importorskip(sdk_name)
    low, high = FAST_PATH_VERSIONS[sdk_name]
    below = ".".join(str(x) for x in release(low)[:-1] + (release(low)[-1] - 1,)) if release(low)[-1] else "0.0.1"
    for version in (f"{high}.0.0", below):
        with FakeLLMServer() as server:
            route = _route_after_three_posts(sdk_name, _module_with_version(sdk, version), server)
        assert route.reuse is False and route._sent == {}, version
        assert len(server.chat_requests) == 3, version
