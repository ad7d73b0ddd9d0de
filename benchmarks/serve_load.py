"""Load on ``ragmeter serve``: throughput (spans/s received, samples/s scored) and memory (RSS).

Starts ``ragmeter serve`` as a subprocess on 127.0.0.1 (metric ``hallucinated_specifics``: no
judge, so the numbers are the service's own cost), a local OTLP receiver for the carriers, and
``--senders`` threads that POST protobuf ``ExportTraceServiceRequest`` bodies (each
``--traces-per-request`` OpenInference RAG traces of 3 spans) for ``--duration`` seconds; 429
answers are counted and retried after 50 ms. Prints one JSON line::

    python benchmarks/serve_load.py --duration 10 --senders 2
    python benchmarks/serve_load.py --duration 10 --senders 2 --sample-rate 0   # receiving alone
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _bodies(n_requests: int, traces_per_request: int) -> list[bytes]:
    """Protobuf request bodies of hand-built OpenInference RAG traces (chain -> retriever + LLM)."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "load"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("openinference.instrumentation.manual")
    out = []
    for r in range(n_requests):
        for t in range(traces_per_request):
            q = f"What is the capital of France? ({r}.{t})"
            chain = tracer.start_span("rag", attributes={"openinference.span.kind": "CHAIN", "input.value": q})
            ctx = trace.set_span_in_context(chain)
            ret = tracer.start_span(
                "retrieve",
                context=ctx,
                attributes={
                    "openinference.span.kind": "RETRIEVER",
                    "input.value": q,
                    "retrieval.documents.0.document.id": "d1",
                    "retrieval.documents.0.document.content": "Paris is the capital of France since 508.",
                    "retrieval.documents.1.document.id": "d2",
                    "retrieval.documents.1.document.content": "Berlin is the capital of Germany.",
                },
            )
            ret.end()
            llm = tracer.start_span(
                "llm",
                context=ctx,
                attributes={
                    "openinference.span.kind": "LLM",
                    "llm.output_messages.0.message.role": "assistant",
                    "llm.output_messages.0.message.content": "Paris has been the capital of France since 508 [1].",
                },
            )
            llm.end()
            chain.set_attribute("output.value", "Paris has been the capital of France since 508 [1].")
            chain.end()
        out.append(encode_spans(memory.get_finished_spans()).SerializeToString())
        memory.clear()
    return out


class _Sink:
    """A local OTLP receiver that answers 200 and counts requests."""

    def __init__(self) -> None:
        self.requests = 0
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    vals = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                k, v = line.split(":", 1)
                vals[k] = int(v.split()[0]) / 1024
    return vals.get("VmRSS", 0.0), vals.get("VmHWM", 0.0)


def _metrics(url: str) -> dict:
    with urllib.request.urlopen(url + "/metrics?format=json", timeout=10) as r:
        return json.loads(r.read())


def run(duration: float = 10.0, senders: int = 2, traces_per_request: int = 20, sample_rate: float = 1.0) -> dict:
    """Run the load for ``duration`` seconds; returns the measured numbers. ``sample_rate=0``
    measures receiving and grouping alone (no trace is scored)."""
    sink = _Sink()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragmeter.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--otlp-port",
            str(port),
            "--forward",
            sink.url,
            "-m",
            "hallucinated_specifics",
            "--grace-period",
            "0.2",
            "--sample-rate",
            str(sample_rate),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        bodies = _bodies(200, traces_per_request)
        end = time.monotonic() + 60
        while True:
            try:
                _metrics(url)
                break
            except OSError:
                if time.monotonic() > end or proc.poll() is not None:
                    raise RuntimeError("ragmeter serve did not start") from None
                time.sleep(0.1)
        idle_rss, _ = _rss_mb(proc.pid)
        counts = {"accepted": 0, "rejected": 0}
        lock = threading.Lock()
        stop_at = time.monotonic() + duration

        def send(offset: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            i = offset
            while time.monotonic() < stop_at:
                conn.request("POST", "/v1/traces", bodies[i % len(bodies)], {"Content-Type": "application/x-protobuf"})
                resp = conn.getresponse()
                resp.read()
                with lock:
                    counts["accepted" if resp.status == 200 else "rejected"] += 1
                if resp.status != 200:
                    time.sleep(0.05)
                i += 1
            conn.close()

        started = time.monotonic()
        threads = [threading.Thread(target=send, args=(k * 97,)) for k in range(senders)]
        for t in threads:
            t.start()
        peak = 0.0
        while any(t.is_alive() for t in threads):
            peak = max(peak, _rss_mb(proc.pid)[0])
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        at_end = _metrics(url)
        drain_end = time.monotonic() + 60
        while time.monotonic() < drain_end:  # let the queue and the inbox empty
            m = _metrics(url)
            if (
                m["queue_depth"] == 0
                and m["inbox_spans"] == 0
                and m["held_spans"] == 0
                and m["carriers_exported"] >= m["carriers_written"]
            ):
                break
            time.sleep(0.2)
        drained = time.monotonic() - started
        final = m
        rss, hwm = _rss_mb(proc.pid)
        return {
            "duration_s": round(elapsed, 2),
            "senders": senders,
            "traces_per_request": traces_per_request,
            "sample_rate": sample_rate,
            "requests_accepted": counts["accepted"],
            "requests_429": counts["rejected"],
            "spans_received": at_end["spans_received"],
            "spans_per_s": round(at_end["spans_received"] / elapsed),
            "samples_scored": final["samples_scored"],
            "samples_per_s": round(final["samples_scored"] / drained, 1),
            "samples_dropped": final["samples_dropped"],
            "spans_dropped": final["spans_dropped"],
            "carriers_exported": final["carriers_exported"],
            "rss_idle_mb": round(idle_rss, 1),
            "rss_mb": round(max(peak, rss), 1),
            "rss_hwm_mb": round(hwm, 1),
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sink.server.shutdown()


def main() -> None:
    """Command line: print the numbers as one JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--senders", type=int, default=2)
    ap.add_argument("--traces-per-request", type=int, default=20)
    ap.add_argument("--sample-rate", type=float, default=1.0, help="0: receive and group only, score nothing")
    a = ap.parse_args()
    print(json.dumps(run(a.duration, a.senders, a.traces_per_request, a.sample_rate)))


if __name__ == "__main__":
    main()
