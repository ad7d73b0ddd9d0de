"""Internal: What identifies a framework model object (LangChain, LlamaIndex): the model name it declares
and its non-secret parameters. Both go into cache keys; without a declared name, the framework
judges leave their cache off by default. Its secrets (API keys) are what error text must never show."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["model_id", "safe_params", "secrets_of"]

_SECRET = re.compile(r"(api_?key|secret|password|passwd|auth|credential|headers)", re.I)
_KEY_FIELD = re.compile(r"(api_?key|secret|password|token)", re.I)


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


def secrets_of(obj: Any) -> tuple[str, ...]:
    """The values of ``obj``'s secret-named fields (``openai_api_key``, ``api_key`` ...; pydantic
    ``SecretStr`` unwrapped) that are long enough to be keys: redacted from its error text."""
    names = list(getattr(type(obj), "model_fields", None) or {}) or list(getattr(obj, "__dict__", {}))
    out = []
    for name in names:
        if not _KEY_FIELD.search(name):
            continue
        try:
            value: Any = getattr(obj, name, None)
            if hasattr(value, "get_secret_value"):
                value = value.get_secret_value()
        except Exception:  # noqa: BLE001 - a model's property may fail
            continue
        if isinstance(value, str) and len(value) >= 8 and value not in out:
            out.append(value)
    return tuple(out)
