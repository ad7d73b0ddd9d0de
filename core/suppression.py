"""Internal: OpenTelemetry's suppress-instrumentation flag, in one place.

While ragmeter scores (inline, in the background) the judge's own LLM calls must never become
spans of the user's traces, nor be scored as RAG calls themselves. Instrumentations skip their
work when the context carries the flag; two keys are in use: the API's own key and the plain
string key older instrumentations read. The core imports OpenTelemetry only inside these
functions; :func:`instrumentation_suppressed` is a no-op when the application has not loaded it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["suppressed_context", "is_suppressed", "instrumentation_suppressed"]

_PLAIN_KEY = "suppress_instrumentation"


_KEYS: tuple[Any, str] | None = None


def _keys() -> tuple[Any, str]:
    """The API's key and the plain string key (looked up once: span processors ask per span)."""
    global _KEYS
    if _KEYS is None:
        from opentelemetry import context

        key = getattr(context, "_SUPPRESS_INSTRUMENTATION_KEY", None)
        if key is None:  # pragma: no cover - very old API
            key = context.create_key(_PLAIN_KEY)
        _KEYS = (key, _PLAIN_KEY)
    return _KEYS


def suppressed_context(parent: Any = None, base: Any = None) -> Any:
    """An OpenTelemetry Context with instrumentation suppressed (both keys). ``base``: the context
    to extend (default: a fresh, empty one, never the caller's); ``parent``: a Span to hold as
    the current span."""
    from opentelemetry import context, trace

    ctx = base if base is not None else context.Context()
    if parent is not None:
        ctx = trace.set_span_in_context(parent, ctx)
    key, plain = _keys()
    ctx = context.set_value(key, True, ctx)
    return context.set_value(plain, True, ctx)


def is_suppressed(ctx: Any = None) -> bool:
    """Whether instrumentation is suppressed in ``ctx`` (default: the current context)."""
    key, plain = _keys()
    get_value = sys.modules["opentelemetry.context"].get_value  # loaded by _keys()
    return bool(get_value(key, ctx) or get_value(plain, ctx))


@contextlib.contextmanager
def instrumentation_suppressed() -> Iterator[None]:
    """Run the block with instrumentation suppressed on top of the current context; a no-op when
    OpenTelemetry has not been loaded by the application."""
    if "opentelemetry.context" not in sys.modules:
        yield
        return
    from opentelemetry import context

    token = context.attach(suppressed_context(base=context.get_current()))
    try:
        yield
    finally:
        context.detach(token)
