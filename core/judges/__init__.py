"""Judge backends. Each is imported only when used, so ``import ragmeter.judges`` loads no SDK.

``OpenAIJudge`` (any OpenAI-compatible endpoint), ``AnthropicJudge``, ``LangChainJudge`` (any
LangChain chat model), ``LlamaIndexJudge`` (any LlamaIndex LLM), ``OfflineJudge`` (no model, no
network) and ``EnsembleJudge`` (median of several judges). Embedders turn texts into vectors for
answer relevancy and answer correctness.
"""

from __future__ import annotations

from .._lazy import lazy_getattr
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

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
