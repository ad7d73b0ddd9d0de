"""Internal: Optional dependencies: an import that fails because an extra is not installed says
which extra to install, as the judges do::

    with needs_extra("ragmeter.tracing", "otel", "opentelemetry"):
        from opentelemetry.sdk.trace import SpanProcessor

raises, without the SDK, ``ModuleNotFoundError: ragmeter.tracing needs opentelemetry, which is not
installed: pip install "ragmeter[otel]"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["install_command", "missing_extra", "needs_extra"]


def install_command(extra: str) -> str:
    """The command that installs ``extra``: ``pip install "ragmeter[EXTRA]"``."""
    return f'pip install "ragmeter[{extra}]"'


def missing_extra(what: str, extra: str, module: str) -> ModuleNotFoundError:
    """The error for ``what`` needing ``module``, which the ``extra`` installs."""
    return ModuleNotFoundError(f"{what} needs {module}, which is not installed: {install_command(extra)}", name=module)


@contextmanager
def needs_extra(what: str, extra: str, *packages: str) -> Iterator[None]:
    """Imports in this block that fail because one of ``packages`` (top-level names, e.g.
    ``"langchain_core"``) or a module of it is missing raise a ModuleNotFoundError naming that
    package and the install command of ``extra``; any other import error passes unchanged."""
    try:
        yield
    except ModuleNotFoundError as err:
        top = (err.name or "").split(".")[0]
        if top not in packages:
            raise
        error = missing_extra(what, extra, top)
        error.name = err.name  # the module that was missing
        raise error from err
