"""A server process a test started itself in a directory of its own (PostgreSQL, Prometheus):
its log's tail for failure messages, and a stop that signals, waits, kills, and cleans up."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

S = TypeVar("S", bound="ServerProcess")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """Base of the test servers: ``root`` (their directory, holding ``LOG``), ``proc`` (the
    process), ``STOP_SIGNAL`` (what asks it to shut down)."""

    LOG = "server.log"
    STOP_SIGNAL = signal.SIGTERM

    root: Path
    proc: subprocess.Popen

    def _wait_ready(self, timeout: float) -> bool:
        """Whether the server answers within ``timeout`` seconds (False as soon as it exits)."""
        raise NotImplementedError

    @staticmethod
    def first_ready(launch: Callable[[int], S], timeout: float, busy: str, name: str) -> S:
        """``launch(port)`` on a free port until the server is ready; a port taken between the
        probe and the bind (the log says ``busy``) is retried, up to 5 times. RuntimeError with
        the log's tail when it does not come up."""
        for _ in range(5):
            server = launch(free_port())
            if server._wait_ready(timeout):
                return server
            server.stop(cleanup=False)
            if busy not in server.log_tail():
                break
        raise RuntimeError(f"{name} did not start:\n{server.log_tail()}")

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
