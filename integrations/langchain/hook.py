"""Internal: Capture every LangChain run without touching the chains: :func:`instrument` /
:func:`uninstrument`.

Each time LangChain sets up the callbacks of a run (``langchain_core.callbacks.manager._configure``)
it asks every registered configure hook for a handler, read with ``.get()`` (LangSmith's tracing
context and ``get_usage_metadata_callback`` register ContextVars). This module registers one,
:data:`~ragmeter.integrations.langchain.handler.INSTALLED`, once, when it is imported; it is
process-wide rather than a ContextVar, so that runs in threads the application starts itself
(a web server's request threads) are captured too. :func:`instrument` puts a
:class:`~ragmeter.integrations.langchain.RagmeterCallbackHandler` in it, so every run gets the
handler, and LangChain passes it on to the run's children. A run that already has the same handler (``callbacks=[handler]``) does not get
it twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.tracers.context import register_configure_hook

from ragmeter.integrations.langchain.handler import INSTALLED, RagmeterCallbackHandler

__all__ = ["instrument", "uninstrument"]

# inheritable: child runs get the handler from their parent's callback manager; no handler class
# or env var: LangChain adds exactly the object in the variable, unless the run already has it.
# (LangChain types the variable as a ContextVar; it only calls .get() on it)
register_configure_hook(INSTALLED, inheritable=True)  # type: ignore[arg-type]


def instrument(metrics: Iterable[Any] | None = None, judge: Any = None, **options: Any) -> RagmeterCallbackHandler:
    """Capture (and score) every LangChain run from now on, without ``callbacks=[...]``.

    Creates ``RagmeterCallbackHandler(metrics, judge, **options)`` (every option of its
    constructor: ``mode``, ``sample_rate``, ``should_score``, ``on_result``, ``store``, ...) and returns it:
    read ``handler.results`` / ``handler.stats``, call ``handler.flush()``. Calling it again
    replaces the handler (runs are captured once, by the newest; the previous one keeps what it
    captured). Passing the returned handler in ``callbacks=[...]`` as well does not capture twice.

    Process-wide: runs in every thread and task are captured, also in threads started before or
    after this call. ragmeter's own scoring is never captured, so a LangChain judge's calls are
    not mistaken for RAG runs.
    """
    handler = RagmeterCallbackHandler(metrics, judge, **options)
    INSTALLED.set(handler)
    return handler


def uninstrument() -> RagmeterCallbackHandler | None:
    """Stop capturing runs started from now on; returns the handler that was
    installed, or None. Runs already under way finish their capture; the handler's results,
    samples and pending scoring stay available."""
    handler = INSTALLED.get()
    if handler is not None:
        INSTALLED.set(None)
    return handler
