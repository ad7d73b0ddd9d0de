"""Plugins: packages that add to ragmeter without editing it, through entry-point groups.

=====================  =====================================  ===========================================
group                  entry-point name                       object
=====================  =====================================  ===========================================
``ragmeter.metrics``   the metric's name (``groundedness``)   its :class:`~ragmeter.metrics.base.Metric`
                                                              subclass (``name`` equal to the entry's)
``ragmeter.judges``    a judge spec's prefix (``myjudge``,    a builder ``fn(spec, model, url, kwargs) ->
                       so ``--judge myjudge:MODEL@URL``)      Judge``, as :data:`ragmeter.judges.spec.SPECS`
``ragmeter.cli``       a command (``evaluate-traces``)        ``register(subparsers)``
=====================  =====================================  ===========================================

A package declares them in its ``pyproject.toml``::

    [project.entry-points."ragmeter.metrics"]
    groundedness = "my_package.metrics:Groundedness"

    [project.entry-points."ragmeter.judges"]
    myjudge = "my_package.judges:build"

Metric and judge plugins are read once, when ragmeter first looks a metric or a judge spec up
(:func:`ragmeter.metrics.load_plugins`, :func:`ragmeter.judges.spec.load_plugins`), so ``import
ragmeter`` reads no package metadata. A plugin that cannot be loaded (it fails to import, raises,
is not the kind of object its group takes, or takes a name ragmeter already has) is left out and
reported once, with its name: a warning on the ``ragmeter`` logger and an entry in
:func:`problems`. ragmeter itself goes on working. (:func:`load_group` is how ragmeter reads a
group; it is not part of the API.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["problems"]

log = logging.getLogger("ragmeter")

_LOCK = threading.Lock()
_PROBLEMS: dict[str, str] = {}


def _origin(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    where = f" of {dist.name} {dist.version}" if dist is not None and getattr(dist, "name", None) else ""
    return f"{ep.name} = {ep.value}{where}"


def report(group: str, ep: Any, reason: str) -> None:
    """Record and log (once) that the plugin ``ep`` of ``group`` is left out, and why."""
    key = f"{group}:{ep.name}"
    with _LOCK:
        if key in _PROBLEMS:
            return
        _PROBLEMS[key] = f"{_origin(ep)}: {reason}"
    log.warning("ragmeter: plugin %r (entry point %s in group %s) left out: %s", ep.name, _origin(ep), group, reason)


def load_group(
    group: str, accept: Callable[[str, Any], str | None] = lambda name, obj: None, *, skip_missing: bool = False
) -> dict[str, Any]:
    """Load the entry points of ``group`` (in name order) and hand each object to ``accept(name,
    obj)``, which checks it and puts it to use (registers it), returning None, or returns why it
    is not acceptable. A plugin that raises while loading or being accepted, or that is not
    acceptable, is left out and reported (:func:`report`); with ``skip_missing`` one that fails
    with ImportError is left out silently (a layer of ragmeter whose extra is not installed).
    Returns the accepted objects by entry-point name."""
    from importlib.metadata import entry_points

    out: dict[str, Any] = {}
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            obj = ep.load()
        except ImportError as exc:
            if not skip_missing:
                report(group, ep, f"cannot be imported: {type(exc).__name__}: {exc}")
            continue
        except Exception as exc:  # a plugin's bug must not break ragmeter
            report(group, ep, f"failed to load: {type(exc).__name__}: {exc}")
            continue
        try:
            reason = accept(ep.name, obj)
        except Exception as exc:  # noqa: BLE001 - accepting runs the plugin's code
            reason = f"{type(exc).__name__}: {exc}"
        if reason is not None:
            report(group, ep, reason)
            continue
        out[ep.name] = obj
    return out


def problems() -> dict[str, str]:
    """The plugins left out so far: ``"<group>:<name>"`` -> what is wrong (entry point, package)."""
    with _LOCK:
        return dict(_PROBLEMS)
