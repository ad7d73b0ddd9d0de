"""Production monitoring: rolling quality windows, alert rules with hysteresis, OpenTelemetry metrics.

>>> import ragmeter as rm
>>> monitor = rm.Monitor(window=500, min_samples=50, thresholds={"faithfulness": 0.7},
...                      on_alert=print, latency_p95_limit=5.0)                  # doctest: +SKIP
>>> handler = RagmeterCallbackHandler(on_result=monitor.observe)                  # doctest: +SKIP

Every capture (LangChain handler, LlamaIndex instrumentation, span processor, BackgroundScorer)
takes ``on_result=``; hand it :meth:`Monitor.observe`. The rules, their defaults and the metric
names are documented on :class:`Monitor` and in :mod:`ragmeter.monitor.otel`; drift in
:mod:`ragmeter.monitor.drift`.
"""

from ragmeter._lazy import lazy_getattr

_LAZY = {
    "Monitor": "ragmeter.monitor.monitor",
    "DEFAULT_THRESHOLDS": "ragmeter.monitor.monitor",  # read from the registered metrics when asked
    "RULES": "ragmeter.monitor.monitor",
    "Alert": "ragmeter.monitor.rules",
    "percentile": "ragmeter.monitor.rules",
    "psi": "ragmeter.monitor.rules",
}

__all__ = ["Monitor", "Alert", "DEFAULT_THRESHOLDS", "RULES", "percentile", "psi"]

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__))
