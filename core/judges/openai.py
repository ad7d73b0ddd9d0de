"""OpenAI judge and embedder (the ``openai`` SDK; any OpenAI-compatible endpoint via ``base_url``:
vLLM, Ollama, LM Studio, llama.cpp server, Azure-compatible proxies ...).

The answer is requested as structured output (``response_format`` ``json_schema`` with
``strict: true``); servers without json_schema support can use ``structured="json_object"``
(JSON mode; the schema goes into the prompt) or ``structured="text"`` (prompt only).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from ragmeter.judges.base import Embedder
from ragmeter.judges.embedding import CachedEmbedder
from ragmeter.judges.llm import LLMJudge
from ragmeter.judges.retry import within
from ragmeter.judges.transport import (ChatRequest, Reply, Transport, Turn, key_secrets, non_json_reply, schema_instructions,
                                       sdk_post)
from ragmeter.loops import PerLoop

__all__ = ["OpenAIJudge", "OpenAIEmbedder", "OpenAITransport"]

_STRUCTURED = ("json_schema", "json_object", "text")
_REASONING = re.compile(r"^(o\d|gpt-[5-9])(?!.*chat)", re.I)
_DEFAULT = object()


def _resolve(api_key: str | None, base_url: str | None, who: str) -> tuple[str, str | None]:
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        if base_url is None:
            raise ValueError(f"{who}: OPENAI_API_KEY is not set; pass api_key=... or set it "
                             "(or base_url=... for an OpenAI-compatible server that needs none)")
        api_key = "not-needed"  # local OpenAI-compatible servers ignore it; the SDK insists on one
    return api_key, base_url


def _is_official(base_url: str | None) -> bool:
    return base_url is None or "api.openai.com" in base_url


def _sdk() -> Any:
    try:
        import openai
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the OpenAI judge needs the openai package: pip install 'ragmeter[openai]'") from err
    return openai


#: Connections per client: httpx scans every connection of its pool for each request, so a cap
#: of 64 requests in flight is served by 4 clients of 16 connections, taken in turn.
_SHARD = 16


class _Clients:
    """The ``AsyncOpenAI`` clients of one event loop, handed out in turn (:meth:`next`)."""

    def __init__(self, clients: list):
        self.clients, self._turn = clients, 0

    def next(self) -> Any:
        """The next client."""
        self._turn = (self._turn + 1) % len(self.clients)
        return self.clients[self._turn]


class _ClientFactory:
    """Makes the clients of one loop (:class:`_Clients`). With ``pool_size`` (and no
    ``http_client`` of the caller's) they keep at most ``pool_size`` connections in all (the
    requests in flight), at most ``_SHARD`` per client.

    A class, not a closure, so a judge pickles (to a worker process, which makes its own
    clients): the key travels inside the pickle only, never in a repr or a log line."""

    def __init__(self, api_key: str, base_url: str | None, timeout: float | None, client_kwargs: dict,
                 pool_size: int | None = None):
        _sdk()  # imported now, not on first use inside a running event loop
        self.api_key, self.base_url, self.timeout = api_key, base_url, timeout
        self.client_kwargs, self.pool_size = client_kwargs, pool_size

    def __repr__(self) -> str:
        return f"_ClientFactory(base_url={self.base_url!r})"

    def __setstate__(self, state: dict) -> None:
        _sdk()  # a copy in a worker process imports the SDK now too, not inside its first request
        self.__dict__.update(state)

    def one(self, connections: int | None) -> Any:
        """One ``AsyncOpenAI`` client keeping at most ``connections`` connections (None: the SDK's pool)."""
        openai = _sdk()
        kwargs = dict(self.client_kwargs)
        if connections:
            limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=connections,
                                                            max_keepalive_connections=connections)
            kwargs["http_client"] = openai.DefaultAsyncHttpxClient(limits=limits, timeout=self.timeout)
        return openai.AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout,
                                  **kwargs)

    def __call__(self) -> _Clients:
        if not self.pool_size or "http_client" in self.client_kwargs:
            return _Clients([self.one(None)])
        shards = -(-self.pool_size // _SHARD)
        return _Clients([self.one(-(-self.pool_size // shards)) for _ in range(shards)])


_JSON_HEADERS = {"Content-Type": "application/json"}


def _dumps(obj: Any) -> str:
    """Compact JSON text (the C encoder; non-ASCII text as is)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _json_body(raw: bytes, secrets: tuple[str, ...]) -> dict:
    """A response body parsed as JSON; a body that is not a JSON object is a transient error."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise non_json_reply(raw.decode("utf-8", "replace"), secrets) from None
    if not isinstance(data, dict):
        raise non_json_reply(raw.decode("utf-8", "replace"), secrets)
    return data


async def _close(clients: _Clients) -> None:
    for client in clients.clients:
        await client.close()


class OpenAITransport(Transport):
    """Chat Completions with structured output, one ``AsyncOpenAI`` client per event loop.

    ``max_tokens_param``: ``"max_completion_tokens"`` on api.openai.com (required by reasoning
    models), ``"max_tokens"`` elsewhere (what most compatible servers understand); override when
    needed. Reasoning models (o-series, gpt-5 and later, except ``*-chat-*``) get no ``temperature``.
    ``pool_size``: connections kept per client (the judge's cap on requests in flight).

    Each request goes through the SDK's own request path (``client.post``: base URL, auth and
    headers, timeouts, its exceptions for error statuses) with a body built here, and only the
    fields the judge reads are taken from the answer. The part of the body that depends only on
    the task (``response_format`` with its JSON schema, or the schema instructions) is built once
    per task, not per call; the SDK's typed-parameter transform and response models, which walk
    the schema and the answer on every call, are skipped.
    """

    backend = "openai"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, structured: str = "json_schema",
                 max_tokens_param: str | None = None, seed: int | None = None, timeout: float | None = 120.0,
                 client_kwargs: dict | None = None, extra_body: dict | None = None, pool_size: int | None = None):
        if structured not in _STRUCTURED:
            raise ValueError(f"structured must be one of {_STRUCTURED}, got {structured!r}")
        self.model = model
        self.base_url = base_url
        self.structured = structured
        self.max_tokens_param = max_tokens_param or ("max_completion_tokens" if _is_official(base_url) else "max_tokens")
        self.seed = seed
        self.extra_body = extra_body
        self.reasoning = bool(_REASONING.match(model))
        self.secrets = key_secrets(api_key)
        self._has_key = bool(api_key)
        self._factory = _ClientFactory(api_key, base_url, timeout, dict(client_kwargs or {}), pool_size)
        self.clients = PerLoop(self._factory, _close)
        self._per_task: dict[str, tuple[dict, str, str]] = {}

    def check(self) -> None:
        """ValueError when there is no API key (nothing is sent)."""
        if not self._has_key:
            raise ValueError(f"{self.backend}:{self.model}: no API key; pass api_key=... (or set OPENAI_API_KEY)")

    def cache_params(self) -> dict:
        """Endpoint and mode: part of the cache key."""
        return {"base_url": self.base_url, "structured": self.structured, "seed": self.seed}

    def task_parts(self, task: str, schema: dict) -> tuple[str, str]:
        """What the body holds for ``task`` whatever the inputs, built once per task: the text
        appended to the system prompt ("" with ``json_schema``) and the ``response_format`` member
        as JSON text (``,"response_format":{...}``, with the schema; "" with ``text``). A task
        asked with another schema object gets its own parts."""
        cached = self._per_task.get(task)
        if cached is not None and cached[0] is schema:
            return cached[1], cached[2]
        suffix = "" if self.structured == "json_schema" else "\n\n" + schema_instructions(task, schema)
        fmt = ({"type": "json_schema", "json_schema": {"name": task, "schema": schema, "strict": True}}
               if self.structured == "json_schema" else {"type": "json_object"} if self.structured == "json_object"
               else None)
        member = "" if fmt is None else ',"response_format":' + _dumps(fmt)
        self._per_task[task] = (schema, suffix, member)
        return suffix, member

    def body(self, request: ChatRequest) -> bytes:
        """The JSON body of ``request``: the per-call part serialised now, the per-task part
        (:meth:`task_parts`) spliced in as built once. ``extra_body`` keys override others."""
        suffix, member = self.task_parts(request.task, request.schema)
        messages = [{"role": "system", "content": request.system + suffix}]
        messages += [{"role": t.role, "content": t.text} for t in request.turns]
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.temperature is not None and not self.reasoning:
            body["temperature"] = request.temperature
        if request.max_tokens:
            body[self.max_tokens_param] = request.max_tokens
        if self.seed is not None:
            body["seed"] = self.seed
        if self.extra_body:
            body.update(self.extra_body)
            if "response_format" in self.extra_body:
                member = ""
        text = _dumps(body)
        return (text[:-1] + member + "}").encode() if member else text.encode()

    async def send(self, request: ChatRequest) -> Reply:
        """Send one request; SDK exceptions propagate (the judge classifies and retries them)."""
        client = self.clients.get().next()
        options: dict[str, Any] = {"headers": _JSON_HEADERS}
        if request.timeout is not None:
            options["timeout"] = request.timeout
        raw = await sdk_post(client, "/chat/completions", self.body(request), options)
        resp = _json_body(raw, self.secrets)
        usage = resp.get("usage") or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        choices = resp.get("choices")
        if not choices:
            return Reply(error="the response had no choices", prompt_tokens=prompt, completion_tokens=completion)
        choice = choices[0] or {}
        message = choice.get("message") or {}
        text = message.get("content") or ""
        refusal = message.get("refusal")
        return Reply(
            text=text,
            truncated=choice.get("finish_reason") == "length",
            prompt_tokens=prompt,
            completion_tokens=completion,
            error=f"the model refused to answer ({refusal})" if refusal and not text else None,
            turn=Turn("assistant", text or "(no answer)"),
            max_tokens=request.max_tokens,
        )

    async def aclose(self) -> None:
        """Close the running loop's client."""
        await self.clients.aclose()


class OpenAIEmbedder(CachedEmbedder):
    """OpenAI embeddings (``POST /embeddings`` through the SDK's request path, texts batched
    ``batch_size`` per request, across concurrent calls too), vectors cached per text. Returns ``(array, Usage(embedding_calls=..., prompt_tokens=...))``."""

    backend = "openai"

    def __init__(self, model: str = "text-embedding-3-small", *, api_key: str | None = None, base_url: str | None = None,
                 dimensions: int | None = None, timeout: float | None = 60.0, client_kwargs: dict | None = None,
                 **kwargs: Any):
        self.model = model
        api_key, base_url = _resolve(api_key, base_url, "OpenAIEmbedder")
        self.secrets = key_secrets(api_key)
        self.base_url = base_url
        self.dimensions = dimensions
        self.timeout = timeout
        self._factory = _ClientFactory(api_key, base_url, timeout, dict(client_kwargs or {}),
                                       kwargs.get("max_concurrency", 4))
        self.clients = PerLoop(self._factory, _close)
        super().__init__(**kwargs)

    def cache_params(self) -> dict:
        """Endpoint and model settings: part of the vector cache key."""
        return {"base_url": self.base_url, "dimensions": self.dimensions}

    async def _embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int]:
        client = self.clients.get().next()
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        options = {"timeout": self.timeout} if self.timeout is not None else {}
        raw = await within(client.post("/embeddings", body=body, cast_to=bytes, options=options), self.timeout)
        resp = _json_body(raw, self.secrets)
        rows = sorted(resp.get("data") or [], key=lambda d: d.get("index", 0))
        usage = resp.get("usage") or {}
        return np.asarray([r["embedding"] for r in rows], dtype=np.float64), int(usage.get("prompt_tokens") or 0)

    async def aclose(self) -> None:
        """Close the running loop's client."""
        await self.clients.aclose()


class OpenAIJudge(LLMJudge):
    """A judge on OpenAI's Chat Completions API or any OpenAI-compatible server.

    ``OpenAIJudge("gpt-4o-mini")``; ``OpenAIJudge("llama3.1", base_url="http://localhost:11434/v1")``.
    Key and endpoint default to ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``. ``structured``:
    ``"json_schema"`` (strict structured output, default), ``"json_object"`` or ``"text"``.
    The default ``embedder`` is an :class:`OpenAIEmbedder` (``embedding_model``) on the same key
    and endpoint, at most ``embedding_concurrency`` (4) requests in flight, each also counted
    against the judge's ``max_concurrency``; pass ``embedder=None`` for none. Other keyword
    arguments: see :class:`LLMJudge`.
    """

    def __init__(self, model: str = "gpt-4o-mini", *, api_key: str | None = None, base_url: str | None = None,
                 structured: str = "json_schema", embedder: Embedder | None | Any = _DEFAULT,
                 embedding_model: str = "text-embedding-3-small", seed: int | None = None,
                 max_tokens_param: str | None = None, timeout: float | None = 120.0,
                 client_kwargs: dict | None = None, extra_body: dict | None = None, embedding_concurrency: int = 4,
                 **kwargs: Any):
        api_key, base_url = _resolve(api_key, base_url, "OpenAIJudge")
        transport = OpenAITransport(model, api_key=api_key, base_url=base_url, structured=structured,
                                    max_tokens_param=max_tokens_param, seed=seed, timeout=timeout,
                                    client_kwargs=client_kwargs, extra_body=extra_body,
                                    pool_size=kwargs.get("max_concurrency", 64))
        default_embedder = embedder is _DEFAULT
        if default_embedder:
            embedder = OpenAIEmbedder(embedding_model, api_key=api_key, base_url=base_url,
                                      client_kwargs=client_kwargs, cache=kwargs.get("cache"),
                                      max_retries=kwargs.get("max_retries", 4),
                                      backoff_base=kwargs.get("backoff_base", 0.5),
                                      max_concurrency=embedding_concurrency)
        super().__init__(transport, embedder=embedder, timeout=timeout, **kwargs)
        if default_embedder:
            embedder.share_limits(self.dispatcher)
        self.base_url = base_url
