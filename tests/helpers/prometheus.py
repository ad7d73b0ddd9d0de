"""A throwaway Prometheus server for tests: the system package's ``prometheus`` binary on
127.0.0.1 at a free port, with a temp config that scrapes the given targets, stopped and deleted
at the end.

    server = PrometheusServer.start(["127.0.0.1:9464"], scrape_interval="250ms")
    server.query('ragmeter_monitor_alerts_total')     # the /api/v1/query result list
    server.stop()

Binary: ``$RAGMETER_PROMETHEUS_BIN`` (only that, when set), else ``prometheus`` on PATH, else
``/usr/bin/prometheus`` (Debian/Ubuntu ``prometheus`` package). :func:`require` turns "no
binary" into a skip, or into a failure when ``RAGMETER_REQUIRE_PROMETHEUS=1`` (CI sets it, so the
test cannot silently vanish). Only the process started here is ever signalled.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from helpers.process import ServerProcess

__all__ = ["PrometheusServer", "PrometheusUnavailable", "find_binary", "require", "REQUIRE"]

#: CI sets ``RAGMETER_REQUIRE_PROMETHEUS=1``: a missing or broken server fails the test instead of skipping it.
REQUIRE = os.environ.get("RAGMETER_REQUIRE_PROMETHEUS") == "1"


class PrometheusUnavailable(RuntimeError):
    """No Prometheus server binary on this machine."""


def find_binary() -> Path | None:
    """The ``prometheus`` server binary (see the module docstring), or None."""
    if os.environ.get("RAGMETER_PROMETHEUS_BIN"):
        candidates = [os.environ["RAGMETER_PROMETHEUS_BIN"]]
    else:
        candidates = [c for c in (shutil.which("prometheus"), "/usr/bin/prometheus") if c]
    return next((Path(c) for c in candidates if os.access(c, os.X_OK)), None)


class PrometheusServer(ServerProcess):
    """A running Prometheus on 127.0.0.1 (``port``) scraping ``targets`` (job ``ragmeter``)."""

    LOG, STOP_SIGNAL = "prometheus.log", signal.SIGTERM

    def __init__(self, root: Path, port: int, proc: subprocess.Popen):
        self.root, self.port, self.proc = root, port, proc

    @classmethod
    def start(cls, targets: list[str], *, scrape_interval: str = "250ms", timeout: float = 60.0) -> PrometheusServer:
        """Write the config, start the server and wait until it is ready; raises
        :class:`PrometheusUnavailable` without a binary, RuntimeError when it does not come up."""
        binary = find_binary()
        if binary is None:
            raise PrometheusUnavailable(
                "no prometheus binary: install the `prometheus` system package or set RAGMETER_PROMETHEUS_BIN"
            )
        root = Path(tempfile.mkdtemp(prefix="ragmeter-prometheus-"))
        try:
            (root / "prometheus.yml").write_text(
                json.dumps(
                    {  # JSON is YAML
                        "global": {
                            "scrape_interval": scrape_interval,
                            "scrape_timeout": scrape_interval,
                            "evaluation_interval": "1s",
                        },
                        "scrape_configs": [{"job_name": "ragmeter", "static_configs": [{"targets": targets}]}],
                    }
                )
            )

            def launch(port: int) -> PrometheusServer:
                with open(root / "prometheus.log", "ab") as log:
                    proc = subprocess.Popen(
                        [
                            str(binary),
                            f"--config.file={root / 'prometheus.yml'}",
                            f"--storage.tsdb.path={root / 'data'}",
                            f"--web.listen-address=127.0.0.1:{port}",
                            "--log.level=warn",
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        cwd=root,
                        start_new_session=True,
                    )
                return cls(root, port, proc)

            return cls.first_ready(launch, timeout, "address already in use", "Prometheus")
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    def _wait_ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        return False

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def query(self, promql: str) -> list[dict]:
        """An instant query through the HTTP API (``/api/v1/query``): the ``result`` list."""
        with urllib.request.urlopen(
            f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}), timeout=5
        ) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus query {promql!r} failed: {body}")
        return body["data"]["result"]

    def value(self, promql: str) -> float | None:
        """The value of a query that selects one series; None when it selects none."""
        result = self.query(promql)
        if not result:
            return None
        if len(result) > 1:
            raise AssertionError(f"{promql!r} selected {len(result)} series: {result}")
        return float(result[0]["value"][1])


def require(exc: Exception) -> None:
    """Skip the test for a missing binary or exporter, or fail when ``RAGMETER_REQUIRE_PROMETHEUS=1``;
    a server that is installed but does not start always fails."""
    msg = f"Prometheus: {exc}"
    if isinstance(exc, (PrometheusUnavailable, ImportError)) and not REQUIRE:
        pytest.skip(msg)
    pytest.fail(msg + (" (RAGMETER_REQUIRE_PROMETHEUS=1)" if REQUIRE else ""))
