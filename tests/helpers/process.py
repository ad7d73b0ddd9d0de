"""A server process a test started itself in a directory of its own (PostgreSQL, Prometheus):
its log's tail for failure messages, and a stop that signals, waits, kills, and cleans up."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path


class ServerProcess:
    """Base of the test servers: ``root`` (their directory, holding ``LOG``), ``proc`` (the
    process), ``STOP_SIGNAL`` (what asks it to shut down)."""

    LOG = "server.log"
    STOP_SIGNAL = signal.SIGTERM

    root: Path
    proc: subprocess.Popen

    def log_tail(self, n: int = 4000) -> str:
        """The end of the server log."""
        try:
            return (self.root / self.LOG).read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, cleanup: bool = True) -> None:
        """Stop the server (``STOP_SIGNAL``, then SIGKILL after 30 s), then delete its directory."""
        if self.proc.poll() is None:
            self.proc.send_signal(self.STOP_SIGNAL)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if cleanup:
            shutil.rmtree(self.root, ignore_errors=True)
