"""The monitor's metrics scraped by a real Prometheus server (the system package, started by the
test on 127.0.0.1) from the OpenTelemetry Prometheus exporter's endpoint; the test reads them back
through Prometheus' HTTP API. Skipped without the binary or exporter, failed instead when
RAGMETER_REQUIRE_PROMETHEUS=1 (see tests/helpers/prometheus.py)."""

from __future__ import annotations

import pytest
from test_monitor import result

import ragmeter as rm
from helpers import wait_for
from helpers.prometheus import PrometheusServer, PrometheusUnavailable, require

pytestmark = pytest.mark.slow

MEAN = 'ragmeter_monitor_score_mean{job="ragmeter",ragmeter_metric="faithfulness",ragmeter_window="recent"}'
FULL = 'ragmeter_monitor_score_mean{job="ragmeter",ragmeter_metric="faithfulness",ragmeter_window="full"}'
ALERTS = 'ragmeter_monitor_alerts_total{job="ragmeter",ragmeter_rule="score_floor",ragmeter_state="%s"}'
P95 = 'ragmeter_monitor_latency_p95_seconds{job="ragmeter"}'
SAMPLES = 'ragmeter_monitor_samples_total{job="ragmeter",ragmeter_outcome="observed"}'


@pytest.fixture
def exporter():
    """A MeterProvider whose Prometheus reader is served on 127.0.0.1 (own registry); yields
    (provider, port)."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
    except ImportError as exc:
        require(exc)
    registry = CollectorRegistry()
    try:
        reader = PrometheusMetricReader(registry=registry)
    except TypeError:  # older exporters (0.46b0, the oldest supported) always use the global registry
        reader, registry = PrometheusMetricReader(), REGISTRY
    provider = MeterProvider(metric_readers=[reader])
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    yield provider, httpd.server_port
    httpd.shutdown()
    thread.join(5)
    provider.shutdown()


def test_prometheus_scrapes_the_rolling_mean_and_the_alert_counter(exporter):
    provider, port = exporter
    try:
        server = PrometheusServer.start([f"127.0.0.1:{port}"])
    except (PrometheusUnavailable, RuntimeError) as exc:
        require(exc)
    try:
        mon = rm.Monitor(
            window=100,
            recent=10,
            min_samples=10,
            thresholds={"faithfulness": 0.7},
            meter_provider=provider,
            max_drop=None,
        )
        # 20 good (0.9), 20 bad (0.5): recent mean 0.5, whole window (18 + 10) / 40 = 0.7; one alert
        for i in range(40):
            mon.observe(result(i, faithfulness=0.9 if i < 20 else 0.5, latency=float(i % 10 + 1)))
        assert wait_for(lambda: server.value(SAMPLES) == 40.0, timeout=30, interval=0.2), server.log_tail()
        assert server.value(MEAN) == pytest.approx(0.5)
        assert server.value(FULL) == pytest.approx(0.7)
        assert server.value(ALERTS % "firing") == 1.0
        assert server.value(ALERTS % "resolved") is None  # no series until a resolution happened
        # latencies of the last 10: 1..10 s -> position 8.55 -> 9 + 0.55 = 9.55
        assert server.value(P95) == pytest.approx(9.55)
        assert server.value('up{job="ragmeter"}') == 1.0
        # recovery: back to 0.9, the alert resolves once; the counters keep counting
        for i in range(40, 60):
            mon.observe(result(i, faithfulness=0.9))
        assert wait_for(lambda: server.value(ALERTS % "resolved") == 1.0, timeout=30, interval=0.2)
        assert server.value(MEAN) == pytest.approx(0.9)
        assert server.value(ALERTS % "firing") == 1.0 and server.value(SAMPLES) == 60.0
    finally:
        server.stop()
