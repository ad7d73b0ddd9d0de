"""Internal: OpenAI judge and embedder (the ``openai`` SDK; any OpenAI-compatible endpoint via ``base_url``:
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
from ragmeter.judges.sdk_route import SdkClients, close_routes
from ragmeter.judges.transport import (
    ChatRequest,
    Reply,
    Transport,
    Turn,
    key_secrets,
    non_json_reply,
    schema_instructions,
)
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
            raise ValueError(
                f"{who}: OPENAI_API_KEY is not set; pass api_key=... or set it "
                "(or base_url=... for an OpenAI-compatible server that needs none)"
            )
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


class OpenAITransport(Transport):
    """Chat Completions with structured output, on ``AsyncOpenAI`` clients (per event loop).

    ``max_tokens_param``: ``"max_completion_tokens"`` on api.openai.com (required by reasoning
    models), ``"max_tokens"`` elsewhere (what most compatible servers understand); override when
    needed. Reasoning models (o-series, gpt-5 and later, except ``*-chat-*``) get no ``temperature``.
    ``pool_size``: connections kept in all (the judge's cap on requests in flight), in pools of
    at most :data:`~ragmeter.judges.sdk_route.SHARD`.

    Requests go through the SDK client (:class:`~ragmeter.judges.sdk_route.SdkRoute`: its base
    URL, auth and headers, timeouts, connection pool and its exceptions for error statuses) with
    a body built here, and only the fields the judge reads are taken from the answer. The part of
    the body that depends only on the task (``response_format`` with its JSON schema, or the
    schema instructions) is built once per task, not per call; the SDK's typed-parameter
    transform and response models, which walk the schema and the answer on every call, are
    skipped.
    """

    backend = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        structured: str = "json_schema",
        max_tokens_param: str | None = None,
        seed: int | None = None,
        timeout: float | None = 120.0,
        client_kwargs: dict | None = None,
        extra_body: dict | None = None,
        pool_size: int | None = None,
    ):
        if structured not in _STRUCTURED:
            raise ValueError(f"structured must be one of {_STRUCTURED}, got {structured!r}")
        self.model = model
        self.base_url = base_url
        self.structured = structured
        self.max_tokens_param = max_tokens_param or (
            "max_completion_tokens" if _is_official(base_url) else "max_tokens"
        )
        self.seed = seed
        self.extra_body = extra_body
        self.reasoning = bool(_REASONING.match(model))
        self.secrets = key_secrets(api_key)
        self._has_key = bool(api_key)
        self._factory = SdkClients(
            _sdk,
            "AsyncOpenAI",
            "/chat/completions",
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            client_kwargs=dict(client_kwargs or {}),
            pool_size=pool_size,
        )
        self.clients = PerLoop(self._factory, close_routes)
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
        fmt = (
            {"type": "json_schema", "json_schema": {"name": task, "schema": schema, "strict": True}}
            if self.structured == "json_schema"
            else {"type": "json_object"}
            if self.structured == "json_object"
            else None
        )
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
        raw = await self.clients.get().next().post(self.body(request), request.timeout)
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

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        timeout: float | None = 60.0,
        client_kwargs: dict | None = None,
        **kwargs: Any,
    ):
        self.model = model
        api_key, base_url = _resolve(api_key, base_url, "OpenAIEmbedder")
        self.secrets = key_secrets(api_key)
        self.base_url = base_url
        self.dimensions = dimensions
        self.timeout = timeout
        self._factory = SdkClients(
            _sdk,
            "AsyncOpenAI",
            "/embeddings",
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            client_kwargs=dict(client_kwargs or {}),
            pool_size=kwargs.get("max_concurrency", 4),
        )
        self.clients = PerLoop(self._factory, close_routes)
        super().__init__(**kwargs)

    def cache_params(self) -> dict:
        """Endpoint and model settings: part of the vector cache key."""
        return {"base_url": self.base_url, "dimensions": self.dimensions}

    async def _embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        raw = await within(self.clients.get().next().post(_dumps(body).encode(), self.timeout), self.timeout)
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

    def __init__(
        self,
        model: str = "gpt-4o-mini",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        structured: str = "json_schema",
        embedder: Embedder | None | Any = _DEFAULT,
        embedding_model: str = "text-embedding-3-small",
        seed: int | None = None,
        max_tokens_param: str | None = None,
        timeout: float | None = 120.0,
        client_kwargs: dict | None = None,
        extra_body: dict | None = None,
        embedding_concurrency: int = 4,
        **kwargs: Any,
    ):
        api_key, base_url = _resolve(api_key, base_url, "OpenAIJudge")
        transport = OpenAITransport(
            model,
            api_key=api_key,
            base_url=base_url,
            structured=structured,
            max_tokens_param=max_tokens_param,
            seed=seed,
            timeout=timeout,
            client_kwargs=client_kwargs,
            extra_body=extra_body,
            pool_size=kwargs.get("max_concurrency", 64),
        )
        default_embedder: OpenAIEmbedder | None = None
        if embedder is _DEFAULT:
            embedder = default_embedder = OpenAIEmbedder(
                embedding_model,
                api_key=api_key,
                base_url=base_url,
                client_kwargs=client_kwargs,
                cache=kwargs.get("cache"),
                max_retries=kwargs.get("max_retries", 4),
                backoff_base=kwargs.get("backoff_base", 0.5),
                max_concurrency=embedding_concurrency,
            )
        super().__init__(transport, embedder=embedder, timeout=timeout, **kwargs)
        if default_embedder is not None:
            default_embedder.share_limits(self.dispatcher)
        self.base_url = base_url
