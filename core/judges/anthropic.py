"""Internal: Anthropic judge (the ``anthropic`` SDK, Messages API).

Structured output by tool use: one tool per task whose ``input_schema`` is the task's answer
schema, forced with ``tool_choice``. When an answer is invalid, the judge gets it back natively:
its ``tool_use`` block followed by a ``tool_result`` with ``is_error: true`` and the error.
Anthropic has no embedding model: pass ``embedder=`` (e.g. an OpenAIEmbedder or LocalEmbedder).
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

from ragmeter.judges.base import Embedder
from ragmeter.judges.llm import LLMJudge
from ragmeter.judges.sdk_route import SdkClients, close_routes
from ragmeter.judges.transport import ChatRequest, Reply, Transport, Turn, key_secrets, non_json_reply
from ragmeter.loops import PerLoop

__all__ = ["AnthropicJudge", "AnthropicTransport", "DEFAULT_MODEL"]

DEFAULT_MODEL = "claude-haiku-4-5"


_TEMPERATURE: dict[type, bool] = {}


def _accepts_temperature(client: Any) -> bool:
    """Whether this SDK's ``messages.create`` takes ``temperature`` (recent SDKs dropped it)."""
    cls = type(client.messages)
    if cls not in _TEMPERATURE:
        try:
            _TEMPERATURE[cls] = "temperature" in inspect.signature(client.messages.create).parameters
        except (TypeError, ValueError):
            _TEMPERATURE[cls] = False
    return _TEMPERATURE[cls]


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the Anthropic judge needs the anthropic package: pip install 'ragmeter[anthropic]'") from err
    return anthropic


class AnthropicTransport(Transport):
    """Messages API with a forced tool per task, on ``AsyncAnthropic`` clients (per event loop).

    Requests go through the SDK client (:class:`~ragmeter.judges.sdk_route.SdkRoute`: its base
    URL, auth, headers, connection pool and exceptions) with a body built here: the tool of each
    task (its JSON schema) is serialised once per task, and the SDK's typed-parameter transform
    and response models are skipped. ``pool_size``: connections kept (the judge's cap on
    requests in flight).
    """

    backend = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout: float | None = 120.0,
        client_kwargs: dict | None = None,
        pool_size: int | None = None,
    ):
        self.model = model
        self.base_url = base_url
        self.secrets = key_secrets(api_key)
        self._has_key = bool(api_key)
        self._factory = SdkClients(
            _sdk,
            "AsyncAnthropic",
            "/v1/messages",
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            client_kwargs=dict(client_kwargs or {}),
            pool_size=pool_size,
        )
        self.clients = PerLoop(self._factory, close_routes)
        self._per_task: dict[str, tuple[dict, str]] = {}

    def check(self) -> None:
        """ValueError when there is no API key (nothing is sent)."""
        if not self._has_key:
            raise ValueError(f"{self.backend}:{self.model}: no API key; pass api_key=... (or set ANTHROPIC_API_KEY)")

    def cache_params(self) -> dict:
        """Endpoint and mode: part of the cache key."""
        return {"base_url": self.base_url, "structured": "tool"}

    @staticmethod
    def _messages(turns: list[Turn]) -> list[dict]:
        messages: list[dict] = []
        pending_call: str | None = None
        for t in turns:
            if t.role == "assistant":
                if t.call_id:
                    content: Any = [{"type": "tool_use", "id": t.call_id, "name": "", "input": t.data or {}}]
                    pending_call = t.call_id
                else:
                    content = t.text
                    pending_call = None
                messages.append({"role": "assistant", "content": content})
            else:
                if pending_call:
                    content = [
                        {"type": "tool_result", "tool_use_id": pending_call, "is_error": True, "content": t.text}
                    ]
                else:
                    content = t.text
                pending_call = None
                messages.append({"role": "user", "content": content})
        return messages

    def task_tools(self, task: str, schema: dict) -> str:
        """The ``tools`` and ``tool_choice`` members of ``task``'s body as JSON text, built once
        per task (with its schema); a task asked with another schema object gets its own."""
        cached = self._per_task.get(task)
        if cached is not None and cached[0] is schema:
            return cached[1]
        tools = [{"name": task, "description": f"Record the {task} answer.", "input_schema": schema}]
        member = (
            ',"tools":'
            + json.dumps(tools, ensure_ascii=False, separators=(",", ":"))
            + ',"tool_choice":'
            + json.dumps({"type": "tool", "name": task}, separators=(",", ":"))
        )
        self._per_task[task] = (schema, member)
        return member

    def body(self, request: ChatRequest, temperature: bool = True) -> bytes:
        """The JSON body of ``request`` (the per-task tool spliced in as built once)."""
        messages = self._messages(request.turns)
        for m in messages:  # the tool name of replayed calls
            if isinstance(m["content"], list):
                for block in m["content"]:
                    if block.get("type") == "tool_use":
                        block["name"] = request.task
        body: dict[str, Any] = {
            "model": self.model,
            "system": request.system,
            "messages": messages,
            "max_tokens": request.max_tokens or 4096,
        }
        if request.temperature is not None and temperature:
            body["temperature"] = request.temperature
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        return (text[:-1] + self.task_tools(request.task, request.schema) + "}").encode()

    async def send(self, request: ChatRequest) -> Reply:
        """Send one request through the SDK's request path (its auth, headers and exceptions);
        only the fields the judge reads are taken from the answer."""
        route = self.clients.get().next()
        max_tokens = request.max_tokens or 4096
        raw = await route.post(self.body(request, _accepts_temperature(route.client)), request.timeout)
        try:
            resp = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise non_json_reply(raw.decode("utf-8", "replace"), self.secrets) from None
        if not isinstance(resp, dict):
            raise non_json_reply(raw.decode("utf-8", "replace"), self.secrets)
        usage = resp.get("usage") or {}
        prompt = int(usage.get("input_tokens") or 0)
        completion = int(usage.get("output_tokens") or 0)
        truncated = resp.get("stop_reason") == "max_tokens"
        texts = []
        for block in resp.get("content") or []:
            if block.get("type") == "tool_use" and block.get("name") == request.task:
                data = block.get("input")
                return Reply(
                    text=json.dumps(data, ensure_ascii=False),
                    data=data,
                    truncated=truncated,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                    turn=Turn("assistant", json.dumps(data, ensure_ascii=False), data=data, call_id=block.get("id")),
                    max_tokens=max_tokens,
                )
            if block.get("type") == "text":
                texts.append(block.get("text") or "")
        text = "".join(texts)
        # No tool call: parse JSON from the text when there is any, else show the judge why.
        return Reply(
            text=text,
            truncated=truncated,
            prompt_tokens=prompt,
            completion_tokens=completion,
            error=None if text.strip() else f"no {request.task} tool call in the answer; call the tool",
            turn=Turn("assistant", text or "(no answer)"),
            max_tokens=max_tokens,
        )

    async def aclose(self) -> None:
        """Close the running loop's client."""
        await self.clients.aclose()


class AnthropicJudge(LLMJudge):
    """A judge on Anthropic's Messages API: ``AnthropicJudge("claude-haiku-4-5")``.

    Key and endpoint default to ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``. No default
    embedder (Anthropic has none): pass ``embedder=``. Other keyword arguments: see
    :class:`~ragmeter.judges.llm.LLMJudge`.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        embedder: Embedder | None = None,
        timeout: float | None = 120.0,
        client_kwargs: dict | None = None,
        **kwargs: Any,
    ):
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        if not api_key:
            if base_url is None:
                raise ValueError(
                    "AnthropicJudge: ANTHROPIC_API_KEY is not set; pass api_key=... or set it "
                    "(or base_url=... for a compatible server that needs none)"
                )
            api_key = "not-needed"
        transport = AnthropicTransport(
            model,
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            client_kwargs=client_kwargs,
            pool_size=kwargs.get("max_concurrency", 64),
        )
        super().__init__(transport, embedder=embedder, timeout=timeout, **kwargs)
        self.base_url = base_url
