"""Internal: LlamaIndex objects as ragmeter values: nodes as Contexts, queries and responses as text, LLM
responses as token counts, LlamaIndex LLMs and embedding models as judges and embedders."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.base import BaseLLM
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    PydanticResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.schema import NodeWithScore, QueryBundle

from ragmeter.data import Context, RecordError
from ragmeter.fileio import json_safe


def _node_context(nws: Any) -> Context:
    """A ragmeter Context from a LlamaIndex NodeWithScore (or node): text, node id, score, metadata."""
    node = getattr(nws, "node", nws)
    score = getattr(nws, "score", None)
    text = node.get_content() if hasattr(node, "get_content") else str(node)
    node_meta = getattr(node, "metadata", None)
    metadata: dict = json_safe(dict(node_meta)) if isinstance(node_meta, Mapping) else {}
    ref = getattr(node, "ref_doc_id", None)
    if ref and "ref_doc_id" not in metadata:
        metadata["ref_doc_id"] = str(ref)  # the source document of this chunk
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        score = None  # absent, or not a finite number
    node_id = getattr(node, "node_id", None) or getattr(node, "id_", None)
    return Context(text=text, id=str(node_id) if node_id is not None else None, score=score, metadata=metadata)


def _contexts_from(values: Any) -> list:
    """Contexts from strings, dicts, ragmeter Contexts, LlamaIndex NodeWithScore or nodes."""
    out = []
    for i, v in enumerate(values or []):
        if isinstance(v, (str, Context, Mapping)):
            out.append(Context.from_value(v, i))
        elif isinstance(v, NodeWithScore) or hasattr(v, "get_content"):
            out.append(_node_context(v))
        else:
            raise RecordError(None, f"contexts[{i}]", f"expected a string, a node or a dict, got {type(v).__name__}")
    return out


def _dedup_nodes(nodes: Sequence[Any]) -> list:
    """``nodes`` without repeats of the same node id, in order."""
    seen: set = set()
    out = []
    for n in nodes:
        nid = getattr(getattr(n, "node", n), "node_id", None) or id(n)
        if nid in seen:
            continue
        seen.add(nid)
        out.append(n)
    return out


def _query_text(query: Any) -> str | None:
    """The question of a query string or QueryBundle."""
    if query is None:
        return None
    if isinstance(query, QueryBundle):
        return query.query_str
    return str(query)


def _response_text(response: Any) -> str | None:
    """The answer text of a finished (non-streaming) LlamaIndex response."""
    if response is None:
        return None
    if isinstance(response, PydanticResponse):
        inner = response.response
        if inner is None:
            return None
        return inner.model_dump_json() if hasattr(inner, "model_dump_json") else str(inner)
    if isinstance(response, Response):
        return None if response.response is None else str(response.response)
    if isinstance(response, (StreamingResponse, AsyncStreamingResponse)):
        return response.response_txt
    if isinstance(response, str):
        return response
    return str(response)


def _usage_of(resp: Any) -> tuple[int, int] | None:
    """(prompt, completion) tokens reported on a ChatResponse / CompletionResponse, or None.

    Looks at ``additional_kwargs`` (llama-index-llms-openai puts ``prompt_tokens`` /
    ``completion_tokens`` there) and at ``raw.usage`` (OpenAI ``prompt_tokens``, Anthropic
    ``input_tokens`` / ``output_tokens``; object or dict)."""
    if resp is None:
        return None
    candidates = [getattr(resp, "additional_kwargs", None)]
    raw = getattr(resp, "raw", None)
    if raw is not None:
        candidates.append(raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None))
        if isinstance(raw, Mapping):
            candidates.append(raw.get("usage_metadata"))
    for c in candidates:
        if c is None:
            continue
        get = c.get if isinstance(c, Mapping) else (lambda k, _c=c: getattr(_c, k, None))
        prompt = get("prompt_tokens") if get("prompt_tokens") is not None else get("input_tokens")
        completion = get("completion_tokens") if get("completion_tokens") is not None else get("output_tokens")
        if isinstance(prompt, int) or isinstance(completion, int):
            return (int(prompt or 0), int(completion or 0))
    return None


def _as_judge(judge: Any) -> Any:
    """A LlamaIndex LLM given as the judge becomes a :class:`~ragmeter.judges.LlamaIndexJudge`."""
    if isinstance(judge, BaseLLM):
        from ragmeter.judges.llamaindex import LlamaIndexJudge

        return LlamaIndexJudge(judge)
    return judge


def _as_embedder(embedder: Any) -> Any:
    """A LlamaIndex embedding model becomes a :class:`~ragmeter.judges.LlamaIndexEmbedder`."""
    if isinstance(embedder, BaseEmbedding):
        from ragmeter.judges.llamaindex import LlamaIndexEmbedder

        return LlamaIndexEmbedder(embedder)
    return embedder
