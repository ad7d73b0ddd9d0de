"""Internal: Lazy package attributes (PEP 562): a public name is imported from its submodule on first use,
so importing a package loads no optional SDK or framework, and no feature it does not use (internal).

Module names in the tables are absolute (``"ragmeter.judges.openai"``, never ``".openai"``), like
every import in ragmeter.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Container, Mapping
from typing import Any


def lazy_getattr(package: str, names: Mapping[str, str], modules: Container[str] = ()) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``names`` maps a public name to the absolute
    name of the module that defines it, imported on first access; a name in ``modules`` is the
    module itself.

    >>> __getattr__ = lazy_getattr("ragmeter.metrics", {"retrieval": "ragmeter.metrics.retrieval"}, {"retrieval"})
    >>> __getattr__("retrieval").__name__
    'ragmeter.metrics.retrieval'
    """

    def __getattr__(name: str) -> Any:
        if name in names:
            module = importlib.import_module(names[name])
            return module if name in modules else getattr(module, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def keep_names(package: str, names: Container[str]) -> None:
    """Keep the lazy ``names`` of ``package`` when a submodule of the same name is imported: Python
    binds a submodule to its package's attribute once it is loaded, which would turn
    ``ragmeter.sweep`` (the function) into the module ``ragmeter/sweep.py``. The package module's
    class is given a ``__setattr__`` that ignores a module bound to one of ``names``; the name keeps
    resolving through the package's ``__getattr__``."""
    module = sys.modules[package]

    class LazyPackage(type(module)):  # type: ignore[misc]
        def __setattr__(self, name: str, value: Any) -> None:
            if name in names and isinstance(value, types.ModuleType):
                return
            super().__setattr__(name, value)

    module.__class__ = LazyPackage
