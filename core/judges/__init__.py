"""Judge backends. Each is imported only when used, so ``import ragmeter.judges`` loads no SDK.

``OpenAIJudge`` (any OpenAI-compatible endpoint), ``AnthropicJudge``, ``LangChainJudge`` (any
LangChain chat model), ``LlamaIndexJudge`` (any LlamaIndex LLM), ``OfflineJudge`` (no model, no
network) and ``EnsembleJudge`` (median of several judges). Embedders turn texts into vectors for
answer relevancy and answer correctness.
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Embedder, InvalidOutput, Judge, JudgeError, TaskResult, Usage

_LAZY = {
    "LLMJudge": ".llm",
    "OpenAIJudge": ".openai",
    "OpenAIEmbedder": ".openai",
    "AnthropicJudge": ".anthropic",
    "LangChainJudge": ".langchain",
    "LangChainEmbedder": ".langchain",
    "LlamaIndexJudge": ".llamaindex",
    "LlamaIndexEmbedder": ".llamaindex",
    "OfflineJudge": ".offline",
    "LexicalEmbedder": ".offline",
    "LocalEmbedder": ".local",
    "EnsembleJudge": ".ensemble",
    "JudgeCache": ".cache",
    "judge_from_spec": ".spec",
    "default_judge": ".spec",
}

__all__ = ["Judge", "Embedder", "JudgeError", "InvalidOutput", "TaskResult", "Usage", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name], __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
