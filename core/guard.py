"""Internal: One never-raise guard for code that runs inside the user's application, and exit hooks for its
background work (:func:`register_exit_hook`, :func:`weak_hook`).

Capture hooks (LangChain callbacks, LlamaIndex span handlers, OpenTelemetry processors) and the
background scorer must never break, slow or flood the host: a failure in ragmeter's own code is
logged once per place with its traceback, counted, and swallowed. Later failures at the same
place are counted and logged at debug level only, so 200 failing samples give one warning, not
200 tracebacks. What is logged passes through :func:`ragmeter.privacy.for_log` (credentials
redacted; no content of a sample scored without content capture).

>>> with never_raise("example: parse"):
...     int("not a number")
>>> failures()["example: parse"]
1
"""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401  (so our exit hook is registered after its own)
import contextlib
import copy
import functools
import logging
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ragmeter.privacy import for_log

__all__ = ["never_raise", "guarded", "failures", "register_exit_hook", "weak_hook"]

log = logging.getLogger("ragmeter")
F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_counts: dict[str, int] = {}


def _record(where: str, exc: BaseException, on_error: Callable[[BaseException], Any] | None) -> None:
    with _lock:
        n = _counts.get(where, 0) + 1
        _counts[where] = n
    if n == 1:
        _warn_with_traceback(
            "ragmeter: %s failed (the application is not affected; later failures here are "
            "counted, not logged): %s: %s",
            (where, type(exc).__name__, for_log(exc)),
            exc,
        )
    else:
        log.debug("ragmeter: %s failed again (%d times): %s", where, n, for_log(f"{type(exc).__name__}: {exc}"))
    if on_error is not None:
        try:
            on_error(exc)
        except Exception:  # the error handler itself must not raise either
            log.debug("ragmeter: error handler of %s failed", where, exc_info=True)


def _warn_with_traceback(msg: str, args: tuple, exc: BaseException) -> None:
    """A warning with ``exc``'s traceback, as ``log.warning(..., exc_info=exc)`` would write it, but
    its text through :func:`ragmeter.privacy.for_log` (no secrets; no content of a sample scored
    without content capture): the record's ``exc_text`` (what handlers print) is the redacted
    traceback, and ``exc_info`` holds a copy of the exception whose message is redacted too."""
    if not log.isEnabledFor(logging.WARNING):
        return
    try:
        clean = copy.copy(exc)
        clean.args = (for_log(exc),)
        clean.__traceback__ = exc.__traceback__
        exc_info: Any = (type(exc), clean, exc.__traceback__)
    except Exception:  # an exception that cannot be copied: the text alone
        exc_info = None
    record = log.makeRecord(log.name, logging.WARNING, __file__, 0, msg, args, exc_info)
    record.exc_text = for_log("".join(traceback.format_exception(exc)).rstrip())
    log.handle(record)


@contextlib.contextmanager
def never_raise(where: str, on_error: Callable[[BaseException], Any] | None = None) -> Iterator[None]:
    """Run the block; an ``Exception`` inside is logged (once per ``where``), counted, passed to
    ``on_error`` and swallowed. ``BaseException`` (KeyboardInterrupt, SystemExit) passes through."""
    try:
        yield
    except Exception as exc:
        _record(where, exc, on_error)


def guarded(where: str, default: Any = None) -> Callable[[F], F]:
    """Decorator form of :func:`never_raise` for a function or method: returns ``default`` when
    the function raises."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                _record(where, exc, None)
                return default

        return inner  # type: ignore[return-value]

    return wrap


def failures() -> dict[str, int]:
    """How many failures each guarded place has swallowed in this process."""
    with _lock:
        return dict(_counts)


def register_exit_hook(fn: Callable[[], None]) -> None:
    """Run ``fn`` at interpreter exit, before thread pools shut down (so pending scoring that
    uses ``asyncio.to_thread`` can still finish); hooks run last-registered first."""
    # threading's exit hooks run before concurrent.futures shuts its executors down (which
    # asyncio.to_thread and embedding models rely on), and in reverse order of registration.
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        try:
            register(fn)
            return
        except RuntimeError:  # interpreter already shutting down
            return
    atexit.register(fn)


def weak_hook(obj: Any, method: str) -> Callable[[], None]:
    """A callable that runs ``obj.<method>()`` while ``obj`` is alive: an exit or fork hook that
    does not keep a discarded object alive."""
    ref = weakref.ref(obj)

    def hook() -> None:
        target = ref()
        if target is not None:
            getattr(target, method)()

    return hook
