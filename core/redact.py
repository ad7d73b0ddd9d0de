"""Internal: Secrets out of everything ragmeter writes: errors, reports, exports, carrier spans.

Upstream error bodies are copied into ``Score.error`` and from there into reports and traces; a
gateway that echoes the request (``Authorization: Bearer sk-...``) would leak the key.
:func:`redact` replaces what looks like a credential with ``[REDACTED]``:

* API keys by their well-known shapes (``sk-...``, ``sk-ant-...``, ``sk-proj-...``, ``AKIA...``,
  ``ghp_...``, ``xox?-...``, ``AIza...``, Hugging Face ``hf_...``);
* ``Bearer <token>`` / ``Basic <token>`` (capitalised, as in HTTP headers) and the value of ``Authorization``, ``api-key``,
  ``x-api-key``, ``password``, ``secret``, ``token`` fields (``key: value``, ``key=value``,
  ``"key": "value"``);
* the password of a URL (``https://user:pass@host`` -> ``https://user:[REDACTED]@host``);
* ``extra``: exact strings to remove as well (the judge's own key, whatever its shape).

>>> redact('401 {"error": "bad key sk-proj-abcdefghijklmnop1234", "auth": "Bearer abc.def-123"}')
'401 {"error": "bad key [REDACTED]", "auth": "Bearer [REDACTED]"}'
>>> redact("postgresql://app:hunter2@db:5432/x")
'postgresql://app:[REDACTED]@db:5432/x'
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["redact", "redact_value", "MASK"]

MASK = "[REDACTED]"

_PATTERNS = [
    # well-known key shapes
    re.compile(r"\b(?:sk|rk|pk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),
]
# "Bearer xyz", "Basic xyz": keep the scheme, drop the credential
_SCHEME = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{4,}")
# key: value / key=value / "key": "value" for secret-named fields
_FIELD = re.compile(
    r"""(?P<key>(?<![\w-])["']?(?:authorization|proxy-authorization|x-api-key|api[-_]?key|apikey|access[-_]?token|"""
    r"""refresh[-_]?token|token|secret|client[-_]?secret|password|passwd|pwd)["']?\s*[:=]\s*)"""
    r"""(?P<quote>["']?)(?P<value>(?:Bearer\s+|Basic\s+)?[^\s"',;&}]{3,})""",
    re.I,
)
# scheme://user:password@host
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)(?P<pw>[^\s@/]+)(?P<at>@)", re.I)


# Every pattern above (and every secret-named key below) needs one of these in the lowered text;
# text without any is returned at once (most Scores, most chunks and claims).
_NEEDLES = (
    "authorization",
    "api-key",
    "api_key",
    "apikey",
    "secret",
    "password",
    "passwd",
    "pwd",
    "cookie",
    "bearer",
    "basic",
    "://",
    "sk-",
    "rk-",
    "pk-",
    "akia",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "xox",
    "aiza",
    "hf_",
)


def redact(text: Any, extra: Iterable[str] = ()) -> Any:
    """``text`` with credentials replaced by ``[REDACTED]`` (non-strings are returned as they are)."""
    if not isinstance(text, str) or not text:
        return text
    out = text
    for secret in extra:
        if secret and len(secret) >= 4:
            out = out.replace(secret, MASK)
    if not _has_needle(out.lower()):
        return out
    out = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK + m.group("at"), out)
    out = _SCHEME.sub(lambda m: f"{m.group(1)} {MASK}", out)
    out = _FIELD.sub(
        lambda m: m.group("key") + m.group("quote") + (MASK if MASK not in m.group("value") else m.group("value")), out
    )
    for pattern in _PATTERNS:
        out = pattern.sub(MASK, out)
    return out


def redact_value(value: Any, extra: Iterable[str] = (), _depth: int = 0) -> Any:
    """:func:`redact` applied to every string inside ``value`` (dicts, lists, tuples), keys kept;
    the value of a secret-named key (``api_key``, ``authorization``, ``password`` ...) is masked whole.
    What holds nothing to redact is returned as it is (the same object), the rest is copied."""
    extra = extra if isinstance(extra, tuple) else tuple(extra)
    if isinstance(value, (dict, list, tuple)) and _clean(value, extra):
        return value
    return _walk(value, extra, _depth)


def _clean(value: Any, extra: tuple[str, ...]) -> bool:
    """True when no string or key inside ``value`` can hold a secret: none of the needles (nor an
    ``extra`` string) occurs in its JSON text, which the C encoder writes at once. JSON escapes only
    quotes, backslashes and control characters, none of which is in a needle (after "token" the
    needle takes a backslash too)."""
    if any('"' in e or "\\" in e or not e.isprintable() for e in extra):
        return False
    try:
        blob = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return False
    return not _has_needle(blob.lower()) and not any(e and len(e) >= 4 and e in blob for e in extra)


_LEAVES = (int, float, bool, type(None))


def _walk(value: Any, extra: tuple[str, ...], depth: int) -> Any:
    if isinstance(value, str):
        return redact(value, extra)
    if isinstance(value, _LEAVES) or depth > 20:
        return value
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for k, v in value.items():
            if isinstance(v, _LEAVES) and (v is None or not isinstance(k, str) or not _secret_key(k)):
                out[k] = v
                continue
            if isinstance(k, str) and _secret_key(k) and not (isinstance(v, str) and v in ("", MASK)):
                new = MASK
            else:
                new = redact(v, extra) if type(v) is str else _walk(v, extra, depth + 1)
            changed = changed or new is not v
            out[k] = new
        return out if changed else value
    if isinstance(value, (list, tuple)):
        items = [redact(v, extra) if type(v) is str else _walk(v, extra, depth + 1) for v in value]
        return type(value)(items) if any(a is not b for a, b in zip(items, value)) else value
    return value


# "token" as a field or key name: followed by a quote (escaped in JSON text: a backslash), a space,
# ":" or "=" ("prompt_tokens" is not)
_TOKEN = re.compile(r"token[\\\"'\s:=]")


def _has_needle(lowered: str) -> bool:
    for needle in _NEEDLES:  # a plain loop: twice as fast as any() over a generator
        if needle in lowered:
            return True
    return "token" in lowered and _TOKEN.search(lowered) is not None


@functools.lru_cache(maxsize=4096)
def _secret_key(key: str) -> bool:
    return _SECRET_KEY.fullmatch(key) is not None


_SECRET_KEY = re.compile(
    r"(?:authorization|proxy[-_]authorization|x[-_]api[-_]key|api[-_]?key|apikey|access[-_]?token|"
    r"refresh[-_]?token|token|secret|client[-_]?secret|password|passwd|pwd|cookie|set[-_]cookie)",
    re.I,
)
