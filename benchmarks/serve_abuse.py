"""``ragmeter serve`` under abuse (issue 33): what each attack costs the server process.

Each probe starts a fresh ``ragmeter serve --host 127.0.0.1 -m hallucinated_specifics`` (no judge)
as a subprocess with its default settings and reads its peak RSS (``VmHWM``), CPU time and thread
count from ``/proc``:

* ``bomb``: one gzip body of ``--bomb-mib`` MiB of zeros (1 GiB: about 1 MB on the wire);
* ``negative_length``: ``Content-Length: -1``, then up to 256 MiB sent until the server answers;
* ``half_open``: 1,000 connections that send nothing; server threads, connections answered 503 at
  once, and the time a normal request then takes;
* ``slow_body``: a body sent at 1 byte/s; seconds until the server cuts it (or not, in 45 s);
* ``sigterm_slow``: SIGTERM while that slow body is coming: seconds until the process exits;
* ``burst``: ``--senders`` (64) senders x 100 requests, each on a new connection: connections
  reset or refused, 503 answers, and the requests that took a second or more (a SYN dropped by a
  full listen backlog is sent again after 1 s; the old backlog was 5).

``--before REV`` runs every probe against the source of a git revision as well (``git archive``
into a temporary folder, imported in place of the installed package) and prints both::

    python benchmarks/serve_abuse.py                       # this tree
    python benchmarks/serve_abuse.py --before ea26972      # and the server before issue 33
    python benchmarks/serve_abuse.py --before ea26972 --probes burst --senders 16

Prints one JSON line per probe and version, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent

# Imports ragmeter from RAGMETER_SRC (core/, tracing/, integrations/ of a source tree) instead of
# the installed package, then runs the command line.
_BOOT = """
import importlib.util, os, sys
src = os.environ.get("RAGMETER_SRC")
if src:
    for name, folder in (("ragmeter", "core"), ("ragmeter.tracing", "tracing"), ("ragmeter.integrations", "integrations")):
        path = os.path.join(src, folder)
        spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"),
                                                      submodule_search_locations=[path])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        if "." in name:
            setattr(sys.modules["ragmeter"], name.rsplit(".", 1)[1], mod)
from ragmeter.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``ragmeter serve`` in a subprocess (from ``source``, or the installed package)."""

    def __init__(self, source: str | None, *extra: str):
        self.port = _free_port()
        env = dict(os.environ)
        env.pop("RAGMETER_SRC", None)
        if source:
            env["RAGMETER_SRC"] = source
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _BOOT,
                "serve",
                "--host",
                "127.0.0.1",
                "--otlp-port",
                str(self.port),
                "-m",
                "hallucinated_specifics",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ragmeter serve exited: {self.proc.stdout.read()}")
            try:
                if _get(self.port, "/readyz", timeout=2)[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("ragmeter serve did not start")
        self.baseline_rss = self.status("VmRSS")

    def status(self, key: str) -> int:
        """A field of /proc/PID/status (kB for the memory ones)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        raise KeyError(key)

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_mb(self) -> float:
        return round(self.status("VmHWM") / 1024, 1)

    def stop(self) -> float:
        """SIGTERM; seconds until the process exited (killed after 120 s)."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        return round(time.monotonic() - start, 1)


def _get(port: int, path: str, timeout: float = 10) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            piece = s.recv(65536)
            if not piece:
                break
            data += piece
    return int(data.split(b" ", 2)[1]), data


def _readable(socks: list[socket.socket], timeout: float) -> list[socket.socket]:
    """The sockets with something to read (or closed) within ``timeout`` seconds (epoll: no
    limit on descriptor numbers, unlike select)."""
    with selectors.DefaultSelector() as sel:
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        return [key.fileobj for key, _ in sel.select(timeout)]  # type: ignore[misc]


def _status_of(data: bytes) -> int | str:
    try:
        return int(data.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return "closed" if not data else "garbage"


def _read_answer(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def probe_bomb(source: str | None, mib: int) -> dict:
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MIB)
    body = b"".join(comp.compress(zeros) for _ in range(mib)) + comp.flush()
    srv = Server(source)
    cpu0, start = srv.cpu_s(), time.monotonic()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=600) as s:
        s.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body) + body
        )
        answer = _read_answer(s, 600)
    out = {
        "probe": "bomb",
        "wire_mb": round(len(body) / 1e6, 2),
        "inflated_mib": mib,
        "status": _status_of(answer),
        "seconds": round(time.monotonic() - start, 2),
        "cpu_s": round(srv.cpu_s() - cpu0, 2),
        "rss_before_mb": round(srv.baseline_rss / 1024, 1),
        "peak_rss_mb": srv.peak_mb(),
    }
    srv.stop()
    return out


def probe_negative_length(source: str | None, mib: int = 256) -> dict:
    srv = Server(source)
    sent = 0
    with socket.create_connection(("127.0.0.1", srv.port), timeout=60) as s:
        s.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: -1\r\n\r\n"
        )
        chunk = bytes(MIB)
        try:
            while sent < mib * MIB and not _readable([s], 0):
                s.sendall(chunk)
                sent += len(chunk)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        answer = _read_answer(s, 60)
    out = {
        "probe": "negative_length",
        "status": _status_of(answer),
        "sent_mib_before_answer": sent // MIB,
        "rss_before_mb": round(srv.baseline_rss / 1024, 1),
        "peak_rss_mb": srv.peak_mb(),
    }
    srv.stop()
    return out


def probe_half_open(source: str | None, n: int = 1000) -> dict:
    srv = Server(source)
    threads_before = srv.status("Threads")
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
        except OSError:
            break
    time.sleep(1.0)
    threads = srv.status("Threads")
    refused = sum(1 for s in _readable(socks, 0.5) if _status_of(_read_answer(s, 1)) == 503)
    start = time.monotonic()
    try:
        status: int | str = _get(srv.port, "/healthz", timeout=30)[0]
    except OSError as exc:
        status = type(exc).__name__
    request_s = round(time.monotonic() - start, 2)
    for s in socks:
        s.close()
    out = {
        "probe": "half_open",
        "connections": len(socks),
        "threads_before": threads_before,
        "threads_with_connections": threads,
        "answered_503": refused,
        "healthz_meanwhile": status,
        "healthz_seconds": request_s,
        "peak_rss_mb": srv.peak_mb(),
    }
    srv.stop()
    return out


def _slow_sender(port: int, rate: float, limit: float) -> tuple[socket.socket, threading.Thread, dict]:
    """A connection sending a 1,000-byte body at ``rate`` bytes/s (for at most ``limit`` s)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=limit + 10)
    s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    result: dict = {"cut_after_s": None, "bytes_sent": 0}
    start = time.monotonic()

    def run():
        while time.monotonic() - start < limit and result["bytes_sent"] < 1000:
            if _readable([s], 1.0 / rate):
                result["cut_after_s"] = round(time.monotonic() - start, 1)
                result["answer"] = _status_of(_read_answer(s, 5))
                return
            try:
                s.send(b" ")
            except OSError:
                result["cut_after_s"] = round(time.monotonic() - start, 1)
                return
            result["bytes_sent"] += 1

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return s, t, result


def probe_slow_body(source: str | None, limit: float = 45.0) -> dict:
    srv = Server(source)
    s, t, result = _slow_sender(srv.port, 1.0, limit)
    t.join(limit + 15)
    s.close()
    srv.stop()
    return {"probe": "slow_body", "rate_bytes_per_s": 1, "watched_s": limit, **result}


def probe_sigterm_slow(source: str | None) -> dict:
    srv = Server(source)
    s, t, result = _slow_sender(srv.port, 1.0, 120)
    time.sleep(2)
    exit_s = srv.stop()
    s.close()
    return {"probe": "sigterm_slow", "exit_seconds_after_sigterm": exit_s, "slow_answer": result.get("answer")}


def probe_burst(source: str | None, senders: int = 16, per_sender: int = 100) -> dict:
    srv = Server(source)
    counts: dict = {}
    lock = threading.Lock()
    gate = threading.Barrier(senders)

    times: list[float] = []

    def send():
        gate.wait()
        for _ in range(per_sender):
            start = time.monotonic()
            try:
                with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    key: int | str = _status_of(_read_answer(s, 30))
            except OSError as exc:
                key = type(exc).__name__
            with lock:
                counts[key] = counts.get(key, 0) + 1
                times.append(time.monotonic() - start)

    threads = [threading.Thread(target=send) for _ in range(senders)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times.sort()
    out = {
        "probe": "burst",
        "senders": senders,
        "requests": senders * per_sender,
        "seconds": round(time.monotonic() - start, 1),
        "answers": {str(k): v for k, v in sorted(counts.items(), key=str)},
        "over_1s": sum(t >= 1.0 for t in times),
        "slowest_s": round(times[-1], 2),
    }
    srv.stop()
    return out


PROBES = ("bomb", "negative_length", "half_open", "slow_body", "sigterm_slow", "burst")


def run(source: str | None, bomb_mib: int, probes: tuple[str, ...] = PROBES, senders: int = 64) -> list[dict]:
    """The probes against one source tree (None: the installed package)."""
    calls = {
        "bomb": lambda: probe_bomb(source, bomb_mib),
        "negative_length": lambda: probe_negative_length(source),
        "half_open": lambda: probe_half_open(source),
        "slow_body": lambda: probe_slow_body(source),
        "sigterm_slow": lambda: probe_sigterm_slow(source),
        "burst": lambda: probe_burst(source, senders),
    }
    return [calls[p]() for p in probes]


def _summary(r: dict) -> str:
    p = r["probe"]
    if p == "bomb":
        return (
            f"{r['wire_mb']} MB gzip of {r['inflated_mib']} MiB: {r['status']}, peak RSS {r['peak_rss_mb']} MB "
            f"(from {r['rss_before_mb']}), {r['cpu_s']} s CPU"
        )
    if p == "negative_length":
        return (
            f"{r['status']} after {r['sent_mib_before_answer']} MiB sent, peak RSS {r['peak_rss_mb']} MB "
            f"(from {r['rss_before_mb']})"
        )
    if p == "half_open":
        return (
            f"{r['threads_with_connections']} threads (from {r['threads_before']}), {r['answered_503']} answered 503, "
            f"/healthz meanwhile {r['healthz_meanwhile']} in {r['healthz_seconds']} s"
        )
    if p == "slow_body":
        return (
            f"cut after {r['cut_after_s']} s ({r['bytes_sent']} bytes)"
            if r["cut_after_s"] is not None
            else f"not cut in {r['watched_s']:.0f} s ({r['bytes_sent']} bytes)"
        )
    if p == "sigterm_slow":
        return f"exit {r['exit_seconds_after_sigterm']} s after SIGTERM"
    return (
        f"{r['requests']} requests from {r['senders']} senders: "
        + ", ".join(f"{k} x{v}" for k, v in r["answers"].items())
        + f"; {r['over_1s']} took 1 s or more (slowest {r['slowest_s']} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", metavar="REV", help="also run against this git revision's source")
    parser.add_argument("--bomb-mib", type=int, default=1024, help="MiB of zeros in the gzip bomb (default 1024)")
    parser.add_argument("--probes", default=",".join(PROBES), help=f"comma-separated subset of {', '.join(PROBES)}")
    parser.add_argument("--senders", type=int, default=64, help="senders of the burst probe (default 64)")
    args = parser.parse_args()
    probes = tuple(p.strip() for p in args.probes.split(",") if p.strip())
    unknown = set(probes) - set(PROBES)
    if unknown:
        parser.error(f"unknown probes: {', '.join(sorted(unknown))}")
    versions: list[tuple[str, str | None]] = []
    tmp = None
    if args.before:
        tmp = tempfile.TemporaryDirectory(prefix="ragmeter-before-")
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.before, "core", "tracing", "integrations"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp.name], input=archive, check=True)
        versions.append((f"before ({args.before})", tmp.name))
    versions.append(("this tree", None))
    results: dict[str, list[dict]] = {}
    for label, source in versions:
        results[label] = run(source, args.bomb_mib, probes, args.senders)
        for r in results[label]:
            print(json.dumps({"version": label, **r}), flush=True)
    labels = list(results)
    print("\n| probe | " + " | ".join(labels) + " |\n|---|" + "---|" * len(labels))
    for i, r in enumerate(results[labels[0]]):
        print(f"| {r['probe']} | " + " | ".join(_summary(results[lb][i]) for lb in labels) + " |")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
