"""Judge backends. Each is imported only when used, so ``import ragmeter.judges`` loads no SDK.

``OpenAIJudge`` (any OpenAI-compatible endpoint), ``AnthropicJudge``, ``LangChainJudge`` (any
LangChain chat model), ``LlamaIndexJudge`` (any LlamaIndex LLM), ``OfflineJudge`` (no model, no
network; ``GroundingModel`` plugs a local sentence-pair classifier into it), ``EnsembleJudge``
(median of several judges) and ``CascadeJudge`` (the offline judge first, an LLM judge for the
samples it is unsure of). Embedders turn texts into vectors for
answer relevancy and answer correctness.
"""

from __future__ import annotations

from ragmeter._lazy import lazy_getattr
from ragmeter.judges.base import Embedder, Judge, JudgeError, TaskResult, Usage

_LAZY = {
    "InvalidOutput": "ragmeter.judges.tasks",
    "LLMJudge": "ragmeter.judges.llm",
    "OpenAIJudge": "ragmeter.judges.openai",
    "OpenAIEmbedder": "ragmeter.judges.openai",
    "AnthropicJudge": "ragmeter.judges.anthropic",
    "LangChainJudge": "ragmeter.judges.langchain",
    "LangChainEmbedder": "ragmeter.judges.langchain",
    "LlamaIndexJudge": "ragmeter.judges.llamaindex",
    "LlamaIndexEmbedder": "ragmeter.judges.llamaindex",
    "OfflineJudge": "ragmeter.judges.offline",
    "LexicalEmbedder": "ragmeter.judges.offline",
    "LocalEmbedder": "ragmeter.judges.local",
    "EnsembleJudge": "ragmeter.judges.ensemble",
    "CascadeJudge": "ragmeter.judges.cascade",
    "GroundingModel": "ragmeter.judges.offline.grounding",
    "JudgeCache": "ragmeter.judges.cache",
    "CallableTransport": "ragmeter.judges.transport",
    "ChatRequest": "ragmeter.judges.transport",
    "judge_from_spec": "ragmeter.judges.spec",
    "default_judge": "ragmeter.judges.spec",
}

__all__ = ["Judge", "Embedder", "JudgeError", "TaskResult", "Usage", *_LAZY]

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(__all__)
