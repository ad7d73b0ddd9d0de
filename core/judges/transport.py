"""Internal: The one interface between an LLM judge and its model (cf. httpx transports).

A backend is a :class:`Transport`: it turns a :class:`ChatRequest` (system prompt, turns, the
task's JSON schema, ``max_tokens``) into one request to its model and the answer into a
:class:`Reply`. Real backends (OpenAI, Anthropic, LangChain, LlamaIndex) and test or custom ones
(:class:`CallableTransport`) sit behind the same interface; retries, limits, cache and
validation live around it, in :class:`~ragmeter.judges.llm.LLMJudge`. Also here: reading a JSON
answer written as text (:func:`parse_json_answer`), asking for one (:func:`schema_instructions`),
the error for a success status whose body is not JSON (:func:`non_json_reply`) and the API key
as a secret (:func:`key_secrets`). How the OpenAI and Anthropic transports reach their SDKs (a
fast path through the SDKs' internals, by version) is :mod:`ragmeter.judges.sdk_route`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ragmeter.judges.retry import TransientError
from ragmeter.judges.tasks import InvalidOutput
from ragmeter.redact import redact

__all__ = [
    "Turn",
    "ChatRequest",
    "Reply",
    "Transport",
    "CallableTransport",
    "parse_json_answer",
    "schema_instructions",
    "non_json_reply",
    "key_secrets",
]


@dataclass
class Turn:
    """One turn of the conversation with the judge.

    ``role`` is ``"user"`` or ``"assistant"``. An assistant turn that came from a backend keeps
    the structured answer (``data``) and the backend's id for it (``call_id``, e.g. an Anthropic
    ``tool_use`` id) so the transport can replay it natively (tool call + tool result).
    """

    role: str
    text: str
    data: Any = None
    call_id: str | None = None


@dataclass
class ChatRequest:
    """What a transport sends: ``system`` prompt, ``turns`` (user first, alternating), the task's
    answer ``schema`` (named ``task``), ``max_tokens`` (None: the backend's own setting),
    ``temperature`` (None: the backend's default) and a per-request ``timeout`` in seconds."""

    task: str
    system: str
    turns: list[Turn]
    schema: dict
    max_tokens: int | None = None
    temperature: float | None = 0.0
    timeout: float | None = None

    def prompt_chars(self) -> int:
        """Characters of prompt text (for token estimates)."""
        return len(self.system) + sum(len(t.text) for t in self.turns)


_MISSING = object()


@dataclass
class Reply:
    """A transport's answer to one request.

    ``text``: the answer as the model wrote it; ``data``: the parsed answer when the backend
    already parsed it (tool input, structured output), else left unset and ``text`` is parsed as
    JSON; ``error``: a backend-side parse failure, shown to the judge when asking again;
    ``truncated``: the answer was cut off at ``max_tokens`` (whose value, when the backend knows
    it, is ``max_tokens``); ``turn``: how to replay this answer as an assistant turn;
    ``note``: passed on to the TaskResult.
    """

    text: str = ""
    data: Any = _MISSING
    truncated: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    turn: Turn | None = None
    max_tokens: int | None = None
    note: str = ""

    @property
    def has_data(self) -> bool:
        """True when the backend parsed the answer (``data`` is set)."""
        return self.data is not _MISSING

    def assistant_turn(self) -> Turn:
        """The assistant turn that replays this answer."""
        if self.turn is not None:
            return self.turn
        return Turn("assistant", self.text or "(no answer)", data=self.data if self.has_data else None)


class Transport:
    """The one interface a backend implements (cf. httpx transports): ``send`` one request.

    ``backend`` and ``model`` name the judge (``"openai:gpt-4o-mini"``); :meth:`cache_params`
    returns whatever else determines the answer (endpoint, structured-output mode). ``send``
    raises the SDK's exceptions unchanged (or :class:`~ragmeter.judges.retry.TransientError`):
    :func:`~ragmeter.judges.retry.classify_error` decides what is retried. Transports hold no
    retry, cache or rate-limit logic. ``secrets`` (e.g. the API key) are redacted from every
    error text; :meth:`check` says, without a request, whether the transport can send at all.
    """

    backend: str = "transport"
    model: str = "unknown"
    #: the ``max_tokens`` a judge starts with (None: leave the backend's own setting)
    default_max_tokens: int | None = 4096
    #: strings never shown in an error or a log line (the API key)
    secrets: tuple[str, ...] = ()

    def check(self) -> None:
        """Raise ValueError naming what is missing when this transport cannot send (no request is made)."""

    async def send(self, request: ChatRequest) -> Reply:  # pragma: no cover - interface
        """Send ``request`` and return the model's reply."""
        raise NotImplementedError

    def cache_params(self) -> dict:
        """What, besides backend and model, determines the answer (part of the cache key)."""
        return {}

    async def aclose(self) -> None:
        """Release clients (optional)."""


class CallableTransport(Transport):
    """A transport answered by a Python function ``fn(request) -> Reply | dict | str`` (sync or async).

    For tests and custom backends (like ``httpx.MockTransport``): a dict is the structured
    answer, a str the raw text. ``requests`` records every request sent.
    """

    def __init__(self, fn: Callable[[ChatRequest], Any], *, backend: str = "callable", model: str = "fn"):
        self.fn = fn
        self.backend = backend
        self.model = model
        self.requests: list[ChatRequest] = []

    async def send(self, request: ChatRequest) -> Reply:
        """Record the request and answer it with the function."""
        self.requests.append(request)
        out = self.fn(request)
        if asyncio.iscoroutine(out):
            out = await out
        if isinstance(out, Reply):
            return out
        if isinstance(out, str):
            return Reply(text=out)
        return Reply(text=json.dumps(out), data=out)


# --------------------------------------------------------------------------- parsing helpers

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.S)


def parse_json_answer(text: str) -> Any:
    """Parse a JSON answer written as text: plain, in a ```json fence, or surrounded by prose
    (the outermost ``{...}`` is taken). Raises :class:`InvalidOutput` with the parser's message."""
    if text is None or not str(text).strip():
        raise InvalidOutput("the answer was empty; answer with a JSON object")
    s = str(text).strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1).strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError as err:
        first, last = s.find("{"), s.rfind("}")
        if 0 <= first < last:
            try:
                return json.loads(s[first : last + 1])
            except json.JSONDecodeError:
                pass
        raise InvalidOutput(
            f"the answer is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})"
        ) from None


def schema_instructions(name: str, schema: dict) -> str:
    """Text that asks for JSON matching ``schema`` (for backends that cannot enforce a schema)."""
    return (
        f"Answer with a single JSON object (the '{name}' answer), no prose and no code fence, "
        f"matching this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}"
    )


def non_json_reply(body: Any, secrets: Iterable[str] = ()) -> TransientError:
    """The (transient) error for a success status whose body is not the JSON answer, e.g. a
    proxy's HTML error page: it names the problem and shows the body's first 200 characters,
    redacted."""
    head = redact(str(body)[:1000], secrets)[:200]
    return TransientError(f"the server answered HTML/non-JSON with status 200: {head}")


def key_secrets(api_key: str | None) -> tuple[str, ...]:
    """The API key as a secret to redact from errors; none for a placeholder (shorter than 8
    characters, like ``ollama``, or ``not-needed``), which would only blank out ordinary words."""
    return (api_key,) if api_key and len(api_key) >= 8 and api_key != "not-needed" else ()
