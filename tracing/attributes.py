"""Internal: Reading span attributes: the attribute mapping of a span, usable text, JSON values.

Shared by the convention readers (:mod:`ragmeter.tracing.roles`, :mod:`ragmeter.tracing.readers`),
the grouping and the sample builder; everything here runs off the request path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "span_attributes", "usable_text", "parse_json"]

REDACTED = "__REDACTED__"  # OpenInference's TraceConfig mask
_PLACEHOLDER = re.compile(r"^<(generator|async_generator|coroutine) object")


def span_attributes(span: Any) -> Mapping[str, Any]:
    """The span's attributes for reading. For SDK spans, the plain dict inside the span's
    BoundedAttributes (read only, several times faster to query than the public read-only
    proxy; this runs for every span on the collector thread), else ``span.attributes``."""
    raw = getattr(span, "_attributes", None)
    d = getattr(raw, "_dict", None)
    if isinstance(d, dict):
        return d
    a = getattr(span, "attributes", None)
    return a if a is not None else {}


def usable_text(value: Any) -> str | None:
    """A usable text value: a non-empty string that is no redaction mask or generator placeholder."""
    if not isinstance(value, str):
        return None
    s = value.strip()
    if not s or s == REDACTED or _PLACEHOLDER.match(s):
        return None
    return value


def parse_json(value: Any) -> Any:
    """A JSON value parsed from a string that looks like one (None when it does not parse);
    anything else is returned as it is."""
    if not isinstance(value, str):
        return value
    s = value.strip()
    if not s or s[0] not in "[{\"":
        return None
    try:
        return json.loads(s)
    except ValueError:
        return None
