"""Internal: The span processor's settings: the constructor argument, else a ``RAGMETER_*`` environment
variable, else the default, the way the OpenTelemetry SDK's BatchSpanProcessor reads
``OTEL_BSP_*``.

Each setting's variable is its argument's name in capitals after ``RAGMETER_``, in the argument's
unit (seconds for durations). An argument out of range raises ValueError; an environment value
that is not a number or is out of range is logged as a warning and the default is used.

>>> resolve_settings(sample_rate=0.5)["sample_rate"]
0.5
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Setting", "SETTINGS", "resolve_settings", "flag_setting"]

log = logging.getLogger("ragmeter")


@dataclass(frozen=True)
class Setting:
    """One numeric setting: its argument name, type, default and valid range (``rule`` says it
    in words, ``valid`` checks it; values must be finite, integers for ``int`` settings)."""

    name: str
    kind: type
    default: float
    rule: str
    valid: Callable[[float], bool]

    @property
    def env(self) -> str:
        """The environment variable: ``RAGMETER_`` + the argument name in capitals."""
        return "RAGMETER_" + self.name.upper()


def _positive(v: float) -> bool:
    return v > 0


def _at_least_one(v: float) -> bool:
    return v >= 1


SETTINGS: tuple[Setting, ...] = (
    Setting("sample_rate", float, 1.0, "between 0 and 1", lambda v: 0.0 <= v <= 1.0),
    Setting("max_queue", int, 1000, "at least 1", _at_least_one),
    Setting("concurrency", int, 4, "at least 1", _at_least_one),
    Setting("grace_period", float, 2.0, "at least 0", lambda v: v >= 0),
    Setting("ttl", float, 300.0, "above 0", _positive),
    Setting("max_buffered_spans", int, 100_000, "at least 1", _at_least_one),
    Setting("max_traces", int, 10_000, "at least 1", _at_least_one),
    Setting("schedule_delay", float, 5.0, "above 0", _positive),
    Setting("shutdown_timeout", float, 30.0, "at least 0", lambda v: v >= 0),
)


def _ok(setting: Setting, value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    if setting.kind is int and value != int(value):
        return False
    return setting.valid(value)


def _from_env(setting: Setting) -> Any:
    raw = os.environ.get(setting.env)
    if raw is None or not raw.strip():
        return setting.default
    try:
        value = setting.kind(raw.strip())
    except ValueError:
        value = None
    if value is None or not _ok(setting, value):
        log.warning(
            "ragmeter: %s=%r is not valid (%s %s expected); using the default %s",
            setting.env,
            raw,
            "an integer" if setting.kind is int else "a number",
            setting.rule,
            setting.default,
        )
        return setting.default
    return value


def resolve_settings(**given: Any) -> dict[str, Any]:
    """Every setting of :data:`SETTINGS`: the value in ``given`` when it is not None (ValueError
    when out of range), else the environment variable's, else the default."""
    unknown = set(given) - {s.name for s in SETTINGS}
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    for s in SETTINGS:
        value = given.get(s.name)
        if value is None:
            out[s.name] = _from_env(s)
            continue
        if not _ok(s, value):
            raise ValueError(f"{s.name} must be {s.rule} (got {value!r})")
        out[s.name] = s.kind(value)
    return out


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def flag_setting(name: str, value: bool | None = None, default: bool = False) -> bool:
    """A yes / no setting: ``value`` when given (ValueError unless a bool), else the environment
    variable ``RAGMETER_`` + ``name`` in capitals (true / false, 1 / 0, yes / no, on / off), else
    ``default``. An unreadable environment value is logged as a warning and the default used.

    >>> flag_setting("evaluation_logs", True)
    True
    """
    env = "RAGMETER_" + name.upper()
    if value is not None:
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True, False or None, got {value!r}")
        return value
    raw = os.environ.get(env, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE or raw in _FALSE:
        return raw in _TRUE
    log.warning("ragmeter: %s=%r is not true or false; using the default %s", env, raw, default)
    return default
