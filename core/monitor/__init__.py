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

from ragmeter.monitor.monitor import DEFAULT_THRESHOLDS, RULES, Monitor
from ragmeter.monitor.rules import Alert, percentile, psi

__all__ = ["Monitor", "Alert", "DEFAULT_THRESHOLDS", "RULES", "percentile", "psi"]
