"""Internal: The monitor's OpenTelemetry metrics: observable instruments read from its snapshot.

Nothing is recorded on the observe path: every instrument is asynchronous (observable gauges and
counters), and the SDK's reader (periodic OTLP export, a Prometheus scrape, an in-memory reader)
calls back into :meth:`Monitor.snapshot <ragmeter.monitor.Monitor.snapshot>` at collection time.
OpenTelemetry is imported here only, when a monitor with metrics is created.

Names follow the OpenTelemetry naming rules: lowercase, dot-separated namespaces, the unit in
``unit`` (UCUM) and never in the name, no ``_total`` suffix on counters (the Prometheus exporter
adds it), and one instrument per quantity with attributes telling the series apart:

==================================  =============  ======  =========================================
instrument                          kind           unit    attributes
==================================  =============  ======  =========================================
``ragmeter.monitor.score.mean``     gauge          ``1``   ``ragmeter.metric``, ``ragmeter.window``
                                                           (``recent``: the rules' last N;
                                                           ``full``: the whole window)
``ragmeter.monitor.no_retrieval``   gauge          ``1``   share of recent samples with no relevant chunk
``ragmeter.monitor.latency.p95``    gauge          ``s``
``ragmeter.monitor.judge.errors``   gauge          ``1``   errored scores / computed scores, recent
``ragmeter.monitor.judge.cost``     gauge          ``{USD}/h``  judge spend over the last hour
``ragmeter.monitor.drift``          gauge          ``1``   ``ragmeter.drift`` (``psi`` or ``centroid_distance``)
``ragmeter.monitor.alert.firing``   gauge          ``1``   ``ragmeter.rule``, ``ragmeter.metric``: 1 while firing
``ragmeter.monitor.samples``        counter        ``{sample}``  ``ragmeter.outcome``: ``observed``,
                                                           ``sampled_out``, ``dropped``
``ragmeter.monitor.alerts``         counter        ``{alert}``   ``ragmeter.rule``, ``ragmeter.metric``,
                                                           ``ragmeter.state`` (``firing`` / ``resolved``)
==================================  =============  ======  =========================================

A gauge without a value yet (fewer samples than needed) reports nothing rather than a made-up 0.
Rules over whole samples have no ``ragmeter.metric`` attribute.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["register_instruments", "METER_NAME"]

METER_NAME = "ragmeter.monitor"

_lock = threading.Lock()
# provider -> the monitors reporting through it (weakly: a discarded monitor stops reporting)
_monitors: weakref.WeakKeyDictionary[Any, list[tuple[weakref.ref, dict[str, str]]]] = weakref.WeakKeyDictionary()


def register_instruments(monitor: Any, meter_provider: Any = None, attributes: dict[str, str] | None = None) -> None:
    """Report ``monitor`` (anything with a ``snapshot()`` method) through ``meter_provider`` (the
    global one when None). ``attributes`` go on every series of this monitor: several monitors on
    one provider share the instruments (created once per provider) and are told apart by them."""
    from opentelemetry import metrics

    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    with _lock:
        known = provider in _monitors
        _monitors.setdefault(provider, []).append((weakref.ref(monitor), dict(attributes or {})))
    if not known:
        _create(provider)


def _snapshots(provider: Any) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    with _lock:
        entries = [(ref(), attrs) for ref, attrs in _monitors.get(provider, [])]
        _monitors[provider] = [(ref, attrs) for ref, attrs in _monitors.get(provider, []) if ref() is not None]
    for monitor, attrs in entries:
        if monitor is not None:
            yield monitor.snapshot(), attrs


def _create(provider: Any) -> None:
    from opentelemetry.metrics import Observation

    from ragmeter import __version__

    meter = provider.get_meter(METER_NAME, __version__)

    def obs(base: dict[str, str], value: float | None, **attrs: Any) -> list:
        if value is None:
            return []
        return [Observation(value, {**base, **{f"ragmeter.{k}": v for k, v in attrs.items() if v is not None}})]

    def each(fn: Callable[[dict[str, Any], dict[str, str]], list]) -> Callable[[Any], list]:
        return lambda options: [o for snap, base in _snapshots(provider) for o in fn(snap, base)]

    def gauge(key: str) -> Callable[[Any], list]:
        return each(lambda snap, base: obs(base, snap[key]))

    def means(snap: dict[str, Any], base: dict[str, str]) -> list:
        return [
            o
            for metric, row in sorted(snap["means"].items())
            for o in obs(base, row["recent"], metric=metric, window="recent")
            + obs(base, row["full"], metric=metric, window="full")
        ]

    def drift(snap: dict[str, Any], base: dict[str, str]) -> list:
        d = snap["drift"]
        return obs(base, d["psi"], drift="psi") + obs(base, d["centroid_distance"], drift="centroid_distance")

    def firing(snap: dict[str, Any], base: dict[str, str]) -> list:
        return [
            o
            for (rule, metric), on in sorted(snap["firing"].items(), key=str)
            for o in obs(base, int(on), rule=rule, metric=metric)
        ]

    def samples(snap: dict[str, Any], base: dict[str, str]) -> list:
        return [
            o
            for outcome in ("observed", "sampled_out", "dropped")
            for o in obs(base, snap["counts"][outcome], outcome=outcome)
        ]

    def alerts(snap: dict[str, Any], base: dict[str, str]) -> list:
        return [
            o
            for (rule, metric, state), n in sorted(snap["alerts"].items(), key=str)
            for o in obs(base, n, rule=rule, metric=metric, state=state)
        ]

    meter.create_observable_gauge(
        "ragmeter.monitor.score.mean",
        [each(means)],
        unit="1",
        description="Rolling mean of a metric's scores (recent: the rules' last N samples)",
    )
    meter.create_observable_gauge(
        "ragmeter.monitor.no_retrieval",
        [gauge("no_retrieval")],
        unit="1",
        description="Share of recent samples with no chunk above the relevance floor",
    )
    meter.create_observable_gauge(
        "ragmeter.monitor.latency.p95",
        [gauge("latency_p95")],
        unit="s",
        description="95th percentile of the app's response time over recent samples",
    )
    meter.create_observable_gauge(
        "ragmeter.monitor.judge.errors",
        [gauge("error_rate")],
        unit="1",
        description="Errored scores / computed scores over recent samples",
    )
    meter.create_observable_gauge(
        "ragmeter.monitor.judge.cost",
        [gauge("cost_per_hour")],
        unit="{USD}/h",
        description="Judge spend over the last hour",
    )
    meter.create_observable_gauge(
        "ragmeter.monitor.drift",
        [each(drift)],
        unit="1",
        description="Drift of recent traffic against the reference window",
    )
    meter.create_observable_gauge(
        "ragmeter.monitor.alert.firing",
        [each(firing)],
        unit="1",
        description="1 while a rule is firing, 0 once resolved",
    )
    meter.create_observable_counter(
        "ragmeter.monitor.samples",
        [each(samples)],
        unit="{sample}",
        description="Samples handed to the monitor, by outcome",
    )
    meter.create_observable_counter(
        "ragmeter.monitor.alerts", [each(alerts)], unit="{alert}", description="Alert state changes, by rule and state"
    )
