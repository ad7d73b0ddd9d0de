"""What identifies a framework model object (LangChain, LlamaIndex): the model name it declares
and its non-secret parameters. Both go into cache keys; without a declared name, the framework
judges leave their cache off by default."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["model_id", "safe_params"]

_SECRET = re.compile(r"(api_?key|secret|password|passwd|auth|credential|headers)", re.I)


def model_id(obj: Any) -> str | None:
    """The model name a LangChain / LlamaIndex object declares, or None."""
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value and value != "unknown":
            return value
    meta = getattr(obj, "metadata", None)  # LlamaIndex LLMMetadata
    value = getattr(meta, "model_name", None)
    if isinstance(value, str) and value and value != "unknown":
        return value
    return None


def safe_params(params: Any) -> dict:
    """JSON-able, non-secret identifying parameters (part of cache keys)."""
    out: dict = {}
    try:
        items = dict(params or {}).items()
    except (TypeError, ValueError):
        return out
    for k, v in items:
        if _SECRET.search(str(k)):
            continue
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[str(k)] = v
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float, bool)) for x in v):
            out[str(k)] = list(v)
    return out
