"""Judges from short specs (the CLI's ``--judge``) and the default judge.

=====================================  ============================================================
spec                                   judge
=====================================  ============================================================
``offline``                            ``OfflineJudge()`` (no model, no network)
``openai`` / ``openai:MODEL``          ``OpenAIJudge(MODEL)`` (default gpt-4o-mini); endpoint from
                                       ``OPENAI_BASE_URL`` when set
``openai:MODEL@URL``                   ``OpenAIJudge(MODEL, base_url=URL)``: any OpenAI-compatible
                                       server (vLLM, LM Studio, llama.cpp ...)
``anthropic`` / ``anthropic:MODEL``    ``AnthropicJudge(MODEL)`` (default claude-haiku-4-5);
``anthropic:MODEL@URL``                with ``base_url=URL``
``ollama:MODEL`` / ``ollama:MODEL@URL`` ``OpenAIJudge(MODEL)`` on Ollama's OpenAI-compatible API
                                       (``OLLAMA_HOST`` or http://localhost:11434)
=====================================  ============================================================
"""

from __future__ import annotations

import os
from typing import Any

from .base import Judge

__all__ = ["judge_from_spec", "default_judge", "SPEC_HELP"]

SPEC_HELP = ("offline | openai[:MODEL][@BASE_URL] | anthropic[:MODEL][@BASE_URL] | ollama:MODEL[@BASE_URL] "
             "(e.g. openai:gpt-4o-mini, anthropic:claude-haiku-4-5, openai:qwen2.5@http://localhost:8000/v1)")


def _split(rest: str) -> tuple[str | None, str | None]:
    """``MODEL[@URL]`` -> (model or None, url or None). The model part may itself contain ``:``."""
    model, url = rest, None
    if "@" in rest:
        model, url = rest.split("@", 1)
        url = url.strip() or None
        if url is not None and "://" not in url:
            raise ValueError(f"judge spec: {url!r} is not a URL (expected e.g. http://host:port/v1)")
    model = model.strip() or None
    return model, url


def judge_from_spec(spec: str, **kwargs: Any) -> Judge:
    """Build the judge a spec names (see the module table); ``kwargs`` go to the judge.

    Raises ValueError for an unknown spec (listing the known forms) or a missing API key.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"empty judge spec; expected {SPEC_HELP}")
    text = spec.strip()
    backend, _, rest = text.partition(":")
    backend = backend.strip().lower()
    if "@" in backend:  # "openai@http://..." without a model
        backend, at = backend.split("@", 1)
        rest = "@" + at + (":" + rest if rest else "")
    model, url = _split(rest) if rest else (None, None)

    if backend == "offline":
        if model or url:
            raise ValueError(f"judge spec {spec!r}: 'offline' takes no model or URL")
        from .offline import OfflineJudge

        return OfflineJudge(**kwargs)
    if backend == "openai":
        from .openai import OpenAIJudge

        return OpenAIJudge(model or "gpt-4o-mini", base_url=url, **kwargs)
    if backend == "anthropic":
        from .anthropic import DEFAULT_MODEL, AnthropicJudge

        return AnthropicJudge(model or DEFAULT_MODEL, base_url=url, **kwargs)
    if backend == "ollama":
        if not model:
            raise ValueError(f"judge spec {spec!r}: name the model, e.g. ollama:llama3.1")
        from .openai import OpenAIJudge

        host = url or os.environ.get("OLLAMA_HOST") or "http://localhost:11434"
        if "://" not in host:
            host = "http://" + host
        base = host.rstrip("/")
        if not base.endswith("/v1"):
            base += "/v1"
        kwargs.setdefault("embedder", None)
        return OpenAIJudge(model, base_url=base, api_key=kwargs.pop("api_key", None) or "ollama", **kwargs)
    raise ValueError(f"unknown judge spec {spec!r}; expected {SPEC_HELP}")


def default_judge() -> Judge:
    """The judge to use when none is given: ``$RAGMETER_JUDGE`` when set; else OpenAI when
    ``OPENAI_API_KEY`` is set; else Anthropic when ``ANTHROPIC_API_KEY`` is set; else the
    offline judge."""
    spec = os.environ.get("RAGMETER_JUDGE", "").strip()
    if spec:
        return judge_from_spec(spec)
    if os.environ.get("OPENAI_API_KEY"):
        return judge_from_spec("openai")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return judge_from_spec("anthropic")
    return judge_from_spec("offline")
