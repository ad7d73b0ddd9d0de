"""Internal: A judge on any LangChain chat model, and an embedder on any LangChain ``Embeddings``.

The answer is requested with ``chat_model.with_structured_output(schema, include_raw=True)``
(JSON schema / tool calling, whatever the model's integration does best). A model without
structured-output support is asked for JSON in plain text instead; its TaskResults say so in
``note``. LangChain is imported only here, never by ``import ragmeter``.

ragmeter retries transient failures itself (and counts them): give the model ``max_retries=0``
(e.g. ``ChatOpenAI(..., max_retries=0)``) so retries are not made twice.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np

from ragmeter.judges.embedding import CachedEmbedder
from ragmeter.judges.identity import model_id, safe_params, secrets_of
from ragmeter.judges.llm import LLMJudge
from ragmeter.judges.transport import ChatRequest, Reply, Transport, Turn, schema_instructions
from ragmeter.loops import HomeLoop

__all__ = ["LangChainJudge", "LangChainEmbedder", "LangChainTransport"]

_DEFAULT = object()
#: LangChain models keep async clients bound to the loop that first used them: every call made
#: through ragmeter runs on this one loop, whatever loop or thread the caller is on.
FRAMEWORK_LOOP = HomeLoop("ragmeter-langchain")


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") in (None, "text"):
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _truncated(message: Any) -> bool:
    meta = getattr(message, "response_metadata", None) or {}
    return (
        meta.get("finish_reason") == "length"
        or meta.get("stop_reason") == "max_tokens"
        or meta.get("done_reason") == "length"
    )


def _tokens(message: Any) -> tuple[int, int]:
    um = getattr(message, "usage_metadata", None) or {}
    return int(um.get("input_tokens") or 0), int(um.get("output_tokens") or 0)


class LangChainTransport(Transport):
    """Sends a task to a LangChain chat model via ``with_structured_output`` (or plain JSON text).

    ``structured_kwargs`` go to ``with_structured_output`` (e.g. ``{"method": "function_calling"}``).
    On truncation ``max_tokens`` is raised on a copy of the model when it has that field.
    """

    backend = "langchain"
    default_max_tokens = None  # keep the model's own setting until an answer is cut off

    def __init__(self, chat_model: Any, *, structured_kwargs: dict | None = None, structured: bool = True):
        self.chat_model = chat_model
        self.secrets = secrets_of(chat_model)
        self.identified = model_id(chat_model) is not None
        self.model = model_id(chat_model) or type(chat_model).__name__
        self.structured_kwargs = dict(structured_kwargs or {})
        self.structured = structured
        self._unsupported: str | None = None if structured else "structured output disabled"
        self._models: dict[int | None, Any] = {None: chat_model}
        self._runnables: dict[tuple, Any] = {}

    def cache_params(self) -> dict:
        """Model class and its non-secret identifying parameters: part of the cache key."""
        try:
            params = safe_params(getattr(self.chat_model, "_identifying_params", {}))
        except Exception:  # noqa: BLE001 - a model's property may fail
            params = {}
        return {
            "class": f"{type(self.chat_model).__module__}.{type(self.chat_model).__qualname__}",
            "params": params,
            "structured": self.structured,
            "structured_kwargs": safe_params(self.structured_kwargs),
        }

    def _model(self, max_tokens: int | None) -> Any:
        if max_tokens is None or max_tokens in self._models:
            return self._models.get(max_tokens, self.chat_model)
        fields = getattr(type(self.chat_model), "model_fields", {}) or {}
        model = self.chat_model
        if "max_tokens" in fields:
            model = self.chat_model.model_copy(update={"max_tokens": max_tokens})
        self._models[max_tokens] = model
        return model

    def _runnable(self, model: Any, request: ChatRequest) -> Any:
        key = (id(model), request.task)
        if key not in self._runnables:
            schema = {"title": request.task, "description": f"The {request.task} answer.", **request.schema}
            try:
                self._runnables[key] = model.with_structured_output(schema, include_raw=True, **self.structured_kwargs)
            except NotImplementedError:
                self._unsupported = f"{type(model).__name__} does not support structured output"
                self._runnables[key] = None
        return self._runnables[key]

    def _messages(self, request: ChatRequest, plain: bool) -> list:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        system = request.system
        if plain:
            system = system + "\n\n" + schema_instructions(request.task, request.schema)
        messages: list = [SystemMessage(content=system)]
        for t in request.turns:
            messages.append(AIMessage(content=t.text) if t.role == "assistant" else HumanMessage(content=t.text))
        return messages

    async def send(self, request: ChatRequest) -> Reply:
        """Send one request on the framework loop (see ``FRAMEWORK_LOOP``)."""
        return await FRAMEWORK_LOOP.run(lambda: self._send(request))

    async def _send(self, request: ChatRequest) -> Reply:
        model = self._model(request.max_tokens)
        runnable = self._runnable(model, request) if self._unsupported is None else None
        limit = getattr(model, "max_tokens", None)
        limit = limit if isinstance(limit, int) else None
        try:
            if runnable is not None:
                # JSON mode constrains the syntax only: the schema has to be in the prompt
                schema_in_prompt = self.structured_kwargs.get("method") == "json_mode"
                out = await asyncio.wait_for(
                    runnable.ainvoke(self._messages(request, plain=schema_in_prompt)), request.timeout
                )
            else:
                out = await asyncio.wait_for(model.ainvoke(self._messages(request, plain=True)), request.timeout)
        except Exception as exc:  # noqa: BLE001
            if type(exc).__name__ == "LengthFinishReasonError":  # openai's parse() on a cut-off answer
                return Reply(truncated=True, max_tokens=limit)
            raise
        if runnable is None:
            raw_text = _text_of(getattr(out, "content", out))
            prompt, completion = _tokens(out)
            return Reply(
                text=raw_text,
                truncated=_truncated(out),
                prompt_tokens=prompt,
                completion_tokens=completion,
                max_tokens=limit,
                note=f"{self._unsupported}: JSON parsed from plain text",
            )
        raw, parsed, perr = out.get("raw"), out.get("parsed"), out.get("parsing_error")
        prompt, completion = _tokens(raw)
        raw_text = _text_of(getattr(raw, "content", ""))
        calls = getattr(raw, "tool_calls", None) or []
        if not raw_text and calls:
            raw_text = json.dumps(calls[0].get("args", {}), ensure_ascii=False)
        reply = Reply(
            text=raw_text,
            truncated=_truncated(raw),
            prompt_tokens=prompt,
            completion_tokens=completion,
            max_tokens=limit,
        )
        if parsed is not None:
            if hasattr(parsed, "model_dump"):
                parsed = parsed.model_dump()
            reply.data = parsed
            reply.text = json.dumps(parsed, ensure_ascii=False, default=str)
        elif perr is not None and not raw_text:
            reply.error = f"the answer could not be parsed ({type(perr).__name__}: {str(perr)[:500]})"
        reply.turn = Turn("assistant", reply.text or "(no answer)")
        return reply


class LangChainJudge(LLMJudge):
    """A judge on any LangChain chat model: ``LangChainJudge(ChatOpenAI(model="gpt-4o-mini", max_retries=0))``.

    ``embeddings``: a LangChain ``Embeddings`` for the metrics that need vectors (wrapped in a
    :class:`LangChainEmbedder`). The cache is on by default only when the model declares its
    name (``model_name`` / ``model``), so that answers of different models never mix; pass
    ``cache=`` to choose. ``structured_kwargs`` go to ``with_structured_output``. Other keyword
    arguments: see :class:`~ragmeter.judges.llm.LLMJudge`.
    """

    def __init__(
        self,
        chat_model: Any,
        embeddings: Any = None,
        *,
        structured_kwargs: dict | None = None,
        structured: bool = True,
        cache: Any = _DEFAULT,
        **kwargs: Any,
    ):
        transport = LangChainTransport(chat_model, structured_kwargs=structured_kwargs, structured=structured)
        if cache is _DEFAULT:
            cache = None if transport.identified else False
        embedder = kwargs.pop("embedder", None)
        if embedder is None and embeddings is not None:
            embedder = LangChainEmbedder(embeddings)
        super().__init__(transport, embedder=embedder, cache=cache, **kwargs)
        self.chat_model = chat_model


class LangChainEmbedder(CachedEmbedder):
    """Vectors from a LangChain ``Embeddings`` (``aembed_documents``, one call per batch).

    Cached per text by default only when the embeddings object declares its model name.
    """

    backend = "langchain"

    def __init__(self, embeddings: Any, *, cache: Any = _DEFAULT, batch_size: int = 256, **kwargs: Any):
        self.embeddings = embeddings
        self.secrets = secrets_of(embeddings)
        self.model = model_id(embeddings) or type(embeddings).__name__
        if cache is _DEFAULT:
            cache = None if model_id(embeddings) is not None else False
        super().__init__(cache=cache, batch_size=batch_size, **kwargs)

    def cache_params(self) -> dict:
        """Model class and its non-secret identifying parameters: part of the cache key."""
        params = {k: v for k, v in safe_params(getattr(self.embeddings, "__dict__", {})).items()}
        return {"class": f"{type(self.embeddings).__module__}.{type(self.embeddings).__qualname__}", "params": params}

    async def _embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int]:
        vectors = await FRAMEWORK_LOOP.run(lambda: self.embeddings.aembed_documents(list(texts)))
        return np.asarray(vectors, dtype=np.float64), 0
