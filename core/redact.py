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

import re
from typing import Any, Iterable

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
    re.I)
# scheme://user:password@host
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:)(?P<pw>[^\s@/]+)(?P<at>@)", re.I)


# Every pattern above needs one of these; text without any is returned at once (most Scores).
_NEEDLES = ("key", "token", "secret", "pass", "pwd", "auth", "bearer", "basic", "cookie", "://", "sk-", "rk-", "pk-",
            "akia", "gh", "xox", "aiza", "hf_")


def redact(text: Any, extra: Iterable[str] = ()) -> Any:
    """``text`` with credentials replaced by ``[REDACTED]`` (non-strings are returned as they are)."""
    if not isinstance(text, str) or not text:
        return text
    out = text
    for secret in extra:
        if secret and len(secret) >= 4:
            out = out.replace(secret, MASK)
    lowered = out.lower()
    if not any(needle in lowered for needle in _NEEDLES):
        return out
    out = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK + m.group("at"), out)
    out = _SCHEME.sub(lambda m: f"{m.group(1)} {MASK}", out)
    out = _FIELD.sub(lambda m: m.group("key") + m.group("quote") + (MASK if MASK not in m.group("value") else m.group("value")), out)
    for pattern in _PATTERNS:
        out = pattern.sub(MASK, out)
    return out


def redact_value(value: Any, extra: Iterable[str] = (), _depth: int = 0) -> Any:
    """:func:`redact` applied to every string inside ``value`` (dicts, lists, tuples), keys kept;
    the value of a secret-named key (``api_key``, ``authorization``, ``password`` ...) is masked whole."""
    extra = tuple(extra)
    if isinstance(value, str):
        return redact(value, extra)
    if _depth > 20:
        return value
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and _SECRET_KEY.fullmatch(k) and v not in (None, ""):
                out[k] = MASK
            else:
                out[k] = redact_value(v, extra, _depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(v, extra, _depth + 1) for v in value)
    return value


_SECRET_KEY = re.compile(r"(?:authorization|proxy[-_]authorization|x[-_]api[-_]key|api[-_]?key|apikey|access[-_]?token|"
                         r"refresh[-_]?token|token|secret|client[-_]?secret|password|passwd|pwd|cookie|set[-_]cookie)", re.I)
