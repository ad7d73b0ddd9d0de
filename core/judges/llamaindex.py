"""Internal: A judge on any LlamaIndex LLM, and an embedder on any LlamaIndex embedding model.

The answer is requested with ``llm.astructured_predict(OutputModel, prompt)``: LlamaIndex picks
function calling for function-calling LLMs and a JSON text program otherwise. ``OutputModel`` is
a pydantic model built from the task's JSON schema (:func:`model_from_schema`). LlamaIndex's
structured predict reports neither token usage nor truncation, so TaskResults from this judge
count requests but no tokens (and no cost). LlamaIndex is imported only here.
"""

from __future__ import annotations

import asyncio
import json
import types
from typing import Any, Literal

import numpy as np

from ragmeter.judges.embedding import CachedEmbedder
from ragmeter.judges.identity import model_id, safe_params, secrets_of
from ragmeter.judges.llm import LLMJudge
from ragmeter.judges.retry import classify_error
from ragmeter.judges.transport import ChatRequest, Reply, Transport, Turn
from ragmeter.loops import HomeLoop

__all__ = ["LlamaIndexJudge", "LlamaIndexEmbedder", "LlamaIndexTransport", "model_from_schema"]

_DEFAULT = object()
#: LlamaIndex LLMs keep async clients bound to the loop that first used them: every call made
#: through ragmeter runs on this one loop, whatever loop or thread the caller is on.
FRAMEWORK_LOOP = HomeLoop("ragmeter-llamaindex")
_SCALARS = {"string": str, "integer": int, "number": float, "boolean": bool}


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.replace("-", "_").split("_") if p)


def model_from_schema(name: str, schema: dict, description: str | None = None) -> type:
    """A pydantic model for a JSON schema made of object / array / string / integer / number /
    boolean / enum (the task schemas). Required properties are required; others default to None."""
    from pydantic import ConfigDict, create_model

    def build(s: dict, path: str) -> Any:
        if "enum" in s:
            return Literal[tuple(s["enum"])]
        kind = s.get("type")
        if kind == "object":
            required = set(s.get("required", []))
            fields: dict[str, Any] = {}
            for key, sub in (s.get("properties") or {}).items():
                typ = build(sub, path + _camel(key))
                fields[key] = (typ, ...) if key in required else (typ | None, None)
            return create_model(
                path, __config__=ConfigDict(extra="forbid"), __doc__=s.get("description") or f"{path}.", **fields
            )
        if kind == "array":
            return types.GenericAlias(list, (build(s.get("items") or {}, path + "Item"),))  # list[item type]
        if kind in _SCALARS:
            return _SCALARS[kind]
        return Any

    model = build({**schema, "description": description or schema.get("description")}, _camel(name))
    return model


class LlamaIndexTransport(Transport):
    """Sends a task through ``llm.astructured_predict`` with a chat prompt of the conversation."""

    backend = "llamaindex"
    default_max_tokens = None

    def __init__(self, llm: Any):
        self.llm = llm
        self.secrets = secrets_of(llm)
        self.identified = model_id(llm) is not None
        self.model = model_id(llm) or type(llm).__name__
        self._models: dict[str, type] = {}

    def cache_params(self) -> dict:
        """Model class and its non-secret identifying parameters: part of the cache key."""
        try:
            meta: Any = getattr(self.llm, "metadata", None)
            params = safe_params(meta.model_dump() if hasattr(meta, "model_dump") else {})
        except Exception:  # noqa: BLE001
            params = {}
        for attr in ("temperature", "api_base", "base_url"):
            value = getattr(self.llm, attr, None)
            if isinstance(value, (str, int, float)):
                params[attr] = value
        return {"class": f"{type(self.llm).__module__}.{type(self.llm).__qualname__}", "params": params}

    def output_model(self, task: str, schema: dict) -> type:
        """The pydantic model of ``task``'s answer (built once)."""
        if task not in self._models:
            self._models[task] = model_from_schema(task, schema, f"The {task} answer.")
        return self._models[task]

    async def send(self, request: ChatRequest) -> Reply:
        """Send one request on the framework loop (see ``FRAMEWORK_LOOP``)."""
        return await FRAMEWORK_LOOP.run(lambda: self._send(request))

    async def _send(self, request: ChatRequest) -> Reply:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole
        from llama_index.core.prompts import ChatPromptTemplate

        # Texts go in as template variables, so braces in them are never read as placeholders.
        templates = [ChatMessage(role=MessageRole.SYSTEM, content="{system}")]
        args = {"system": request.system}
        for i, t in enumerate(request.turns):
            role = MessageRole.ASSISTANT if t.role == "assistant" else MessageRole.USER
            templates.append(ChatMessage(role=role, content=f"{{turn_{i}}}"))
            args[f"turn_{i}"] = t.text
        prompt = ChatPromptTemplate(message_templates=templates)
        output_cls = self.output_model(request.task, request.schema)
        try:
            result = await asyncio.wait_for(self.llm.astructured_predict(output_cls, prompt, **args), request.timeout)
        except Exception as exc:  # noqa: BLE001 - parse failures are invalid answers, the rest propagates
            transient, _ = classify_error(exc)
            if transient or not isinstance(exc, (ValueError, TypeError, KeyError, AttributeError)):
                raise
            message = f"{type(exc).__name__}: {str(exc)[:800]}"
            return Reply(
                error=f"the answer could not be parsed ({message})", turn=Turn("assistant", "(invalid answer)")
            )
        data = result.model_dump() if hasattr(result, "model_dump") else result
        text = json.dumps(data, ensure_ascii=False, default=str)
        return Reply(text=text, data=data, turn=Turn("assistant", text))


class LlamaIndexJudge(LLMJudge):
    """A judge on any LlamaIndex LLM: ``LlamaIndexJudge(OpenAI(model="gpt-4o-mini"))``.

    ``embed_model``: a LlamaIndex embedding model for the metrics that need vectors (wrapped in a
    :class:`LlamaIndexEmbedder`). The cache is on by default only when the LLM declares its model
    name. Other keyword arguments: see :class:`~ragmeter.judges.llm.LLMJudge`.
    """

    def __init__(self, llm: Any, embed_model: Any = None, *, cache: Any = _DEFAULT, **kwargs: Any):
        transport = LlamaIndexTransport(llm)
        if cache is _DEFAULT:
            cache = None if transport.identified else False
        embedder = kwargs.pop("embedder", None)
        if embedder is None and embed_model is not None:
            embedder = LlamaIndexEmbedder(embed_model)
        super().__init__(transport, embedder=embedder, cache=cache, **kwargs)
        self.llm = llm


class LlamaIndexEmbedder(CachedEmbedder):
    """Vectors from a LlamaIndex embedding model (``aget_text_embedding_batch``).

    Cached per text by default only when the model declares its name.
    """

    backend = "llamaindex"

    def __init__(self, embed_model: Any, *, cache: Any = _DEFAULT, batch_size: int = 256, **kwargs: Any):
        self.embed_model = embed_model
        self.secrets = secrets_of(embed_model)
        self.model = model_id(embed_model) or type(embed_model).__name__
        if cache is _DEFAULT:
            cache = None if model_id(embed_model) is not None else False
        super().__init__(cache=cache, batch_size=batch_size, **kwargs)

    def cache_params(self) -> dict:
        """Model class and its non-secret identifying parameters: part of the cache key."""
        params = {}
        for attr in ("embed_batch_size", "dimensions", "api_base", "base_url"):
            value = getattr(self.embed_model, attr, None)
            if isinstance(value, (str, int, float)):
                params[attr] = value
        return {"class": f"{type(self.embed_model).__module__}.{type(self.embed_model).__qualname__}", "params": params}

    async def _embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int]:
        vectors = await FRAMEWORK_LOOP.run(lambda: self.embed_model.aget_text_embedding_batch(list(texts)))
        return np.asarray(vectors, dtype=np.float64), 0
