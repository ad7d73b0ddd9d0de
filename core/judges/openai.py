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
from ragmeter.judges.transport import ChatRequest, Reply, Transport, Turn, key_secrets, non_json_reply, schema_instructions
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


def _client_factory(api_key: str, base_url: str | None, timeout: float | None, client_kwargs: dict):
    openai = _sdk()  # imported now, not on first use inside a running event loop

    def make():
        return openai.AsyncOpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, **client_kwargs)

    return make


async def _close(client: Any) -> None:
    await client.close()


class OpenAITransport(Transport):
    """Chat Completions with structured output, one ``AsyncOpenAI`` client per event loop.

    ``max_tokens_param``: ``"max_completion_tokens"`` on api.openai.com (required by reasoning
    models), ``"max_tokens"`` elsewhere (what most compatible servers understand); override when
    needed. Reasoning models (o-series, gpt-5 and later, except ``*-chat-*``) get no ``temperature``.
    """

    backend = "openai"

    def __init__(self, model: str, *, api_key: str, base_url: str | None = None, structured: str = "json_schema",
                 max_tokens_param: str | None = None, seed: int | None = None, timeout: float | None = 120.0,
                 client_kwargs: dict | None = None, extra_body: dict | None = None):
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
        self.clients = PerLoop(_client_factory(api_key, base_url, timeout, dict(client_kwargs or {})), _close)

    def check(self) -> None:
        """ValueError when there is no API key (nothing is sent)."""
        if not self._has_key:
            raise ValueError(f"{self.backend}:{self.model}: no API key; pass api_key=... (or set OPENAI_API_KEY)")

    def cache_params(self) -> dict:
        """Endpoint and mode: part of the cache key."""
        return {"base_url": self.base_url, "structured": self.structured, "seed": self.seed}

    def _messages(self, request: ChatRequest) -> list[dict]:
        system = request.system
        if self.structured != "json_schema":
            system = system + "\n\n" + schema_instructions(request.task, request.schema)
        messages = [{"role": "system", "content": system}]
        messages += [{"role": t.role, "content": t.text} for t in request.turns]
        return messages

    def _response_format(self, request: ChatRequest) -> dict | None:
        if self.structured == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": request.task, "schema": request.schema, "strict": True}}
        if self.structured == "json_object":
            return {"type": "json_object"}
        return None

    async def send(self, request: ChatRequest) -> Reply:
        """Send one request; SDK exceptions propagate (the judge classifies and retries them)."""
        client = self.clients.get()
        kwargs: dict[str, Any] = {"model": self.model, "messages": self._messages(request)}
        fmt = self._response_format(request)
        if fmt is not None:
            kwargs["response_format"] = fmt
        if request.temperature is not None and not self.reasoning:
            kwargs["temperature"] = request.temperature
        if request.max_tokens:
            kwargs[self.max_tokens_param] = request.max_tokens
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        if request.timeout is not None:
            kwargs["timeout"] = request.timeout
        try:
            resp = await client.chat.completions.create(**kwargs)
        except json.JSONDecodeError as err:  # a JSON content type on a non-JSON body
            raise non_json_reply(err.doc, self.secrets) from None
        if isinstance(resp, str):  # any other content type: the SDK hands back the text
            raise non_json_reply(resp, self.secrets)
        usage = getattr(resp, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        if not resp.choices:
            return Reply(error="the response had no choices", prompt_tokens=prompt, completion_tokens=completion)
        choice = resp.choices[0]
        text = choice.message.content or ""
        refusal = getattr(choice.message, "refusal", None)
        return Reply(
            text=text,
            truncated=choice.finish_reason == "length",
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
    """OpenAI embeddings (``embeddings.create``, texts batched ``batch_size`` per request),
    vectors cached per text. Returns ``(array, Usage(embedding_calls=..., prompt_tokens=...))``."""

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
        self.clients = PerLoop(_client_factory(api_key, base_url, timeout, dict(client_kwargs or {})), _close)
        super().__init__(**kwargs)

    def cache_params(self) -> dict:
        """Endpoint and model settings: part of the vector cache key."""
        return {"base_url": self.base_url, "dimensions": self.dimensions}

    async def _embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int]:
        client = self.clients.get()
        kwargs: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            kwargs["dimensions"] = self.dimensions
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        try:
            resp = await within(client.embeddings.create(**kwargs), self.timeout)
        except json.JSONDecodeError as err:
            raise non_json_reply(err.doc, self.secrets) from None
        if isinstance(resp, str):
            raise non_json_reply(resp, self.secrets)
        rows = sorted(resp.data, key=lambda d: d.index)
        usage = getattr(resp, "usage", None)
        return np.asarray([r.embedding for r in rows], dtype=np.float64), int(getattr(usage, "prompt_tokens", 0) or 0)

    async def aclose(self) -> None:
        """Close the running loop's client."""
        await self.clients.aclose()


class OpenAIJudge(LLMJudge):
    """A judge on OpenAI's Chat Completions API or any OpenAI-compatible server.

    ``OpenAIJudge("gpt-4o-mini")``; ``OpenAIJudge("llama3.1", base_url="http://localhost:11434/v1")``.
    Key and endpoint default to ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``. ``structured``:
    ``"json_schema"`` (strict structured output, default), ``"json_object"`` or ``"text"``.
    The default ``embedder`` is an :class:`OpenAIEmbedder` (``embedding_model``) on the same key
    and endpoint; pass ``embedder=None`` for none. Other keyword arguments: see :class:`LLMJudge`.
    """

    def __init__(self, model: str = "gpt-4o-mini", *, api_key: str | None = None, base_url: str | None = None,
                 structured: str = "json_schema", embedder: Embedder | None | Any = _DEFAULT,
                 embedding_model: str = "text-embedding-3-small", seed: int | None = None,
                 max_tokens_param: str | None = None, timeout: float | None = 120.0,
                 client_kwargs: dict | None = None, extra_body: dict | None = None, **kwargs: Any):
        api_key, base_url = _resolve(api_key, base_url, "OpenAIJudge")
        transport = OpenAITransport(model, api_key=api_key, base_url=base_url, structured=structured,
                                    max_tokens_param=max_tokens_param, seed=seed, timeout=timeout,
                                    client_kwargs=client_kwargs, extra_body=extra_body)
        if embedder is _DEFAULT:
            embedder = OpenAIEmbedder(embedding_model, api_key=api_key, base_url=base_url,
                                      client_kwargs=client_kwargs, cache=kwargs.get("cache"),
                                      max_retries=kwargs.get("max_retries", 4),
                                      backoff_base=kwargs.get("backoff_base", 0.5))
        super().__init__(transport, embedder=embedder, timeout=timeout, **kwargs)
        self.base_url = base_url
