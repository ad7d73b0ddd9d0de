"""``ragmeter serve`` under abuse (issue 33): decompression bombs, bad lengths, chunked bodies, deep
nesting, half-open connections, slow senders, floods, shutdown with a slow sender in flight, the
listen backlog, and no secret printed. Every limit is checked by size or count (bytes allocated,
threads alive, responses of each status), never by wall-clock time; the timings live in
``benchmarks/serve_abuse.py``."""

from __future__ import annotations

import gzip
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import tracemalloc
import zlib

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helpers import wait_for
from helpers.process import free_port
from helpers.rawhttp import connect, read_response, request
from helpers.tracing import AnswerOverlap, ContextCount, OTLPReceiver, oi_rag
from ragmeter.tracing.otlp_json import encode_otlp_json
from ragmeter.tracing.serve import EvaluationService

MIB = 1024 * 1024


@pytest.fixture
def make_service():
    made = []

    def make(**kw):
        kw.setdefault("grace_period", 0.2)
        kw.setdefault("host", "127.0.0.1")
        svc = EvaluationService([ContextCount(), AnswerOverlap()], port=0, **kw).start()
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.shutdown(5)


def _oi_json(n: int = 1) -> bytes:
    """``n`` OpenInference RAG traces (3 spans each) as an OTLP JSON request body."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "abuse"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for _ in range(n):
        oi_rag(provider)
    return json.dumps(encode_otlp_json(memory.get_finished_spans())).encode()


def _compress(data_chunks, encoding: str) -> bytes:
    """The chunks compressed as one body: ``gzip``, ``deflate`` (zlib format) or ``raw-deflate``."""
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}[encoding]
    comp = zlib.compressobj(9, zlib.DEFLATED, wbits)
    out = [comp.compress(chunk) for chunk in data_chunks]
    return b"".join(out) + comp.flush()


def _bomb(size: int, encoding: str = "gzip") -> bytes:
    """``size`` zero bytes compressed (1 MiB at a time, so the test itself stays small)."""
    zeros = bytes(MIB)
    return _compress((zeros for _ in range(size // MIB)), encoding)


def _connect(svc, timeout: float = 10.0) -> socket.socket:
    return connect(svc.port, timeout)


def _request(svc, body: bytes, headers: dict[str, str], path: str = "/v1/traces") -> tuple[int, dict, bytes]:
    """One POST over a fresh connection with exactly ``headers`` (nothing added but ``Host``)."""
    return request(svc.port, body, headers, path)


# ---------------------------------------------------------------------------------------- item 1


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_a_decompression_bomb_is_cut_at_the_limit_while_decompressing(make_service, encoding):
    """64 MiB of zeros in 64 KiB of gzip/deflate against a 1 MiB limit: 413, and the server never
    allocates much more than the limit (it used to inflate all 64 MiB before looking)."""
    svc = make_service(max_body=1 * MIB)
    bomb = _bomb(64 * MIB, encoding)
    assert len(bomb) < 100_000
    header = "deflate" if encoding == "raw-deflate" else encoding
    tracemalloc.start()
    try:
        status, _, text = _request(
            svc,
            bomb,
            {"Content-Type": "application/x-protobuf", "Content-Encoding": header, "Content-Length": str(len(bomb))},
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert status == 413, text
    assert b"1048576" in text
    assert peak < 4 * MIB, f"peak {peak / MIB:.1f} MiB"
    assert svc.stats()["requests_invalid"] == 1


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
def test_compressed_bodies_are_read(make_service, encoding):
    svc = make_service()
    raw = _oi_json()
    body = _compress([raw], encoding)
    header = "deflate" if encoding == "raw-deflate" else encoding
    status, _, text = _request(
        svc, body, {"Content-Type": "application/json", "Content-Encoding": header, "Content-Length": str(len(body))}
    )
    assert status == 200, text
    assert svc.stats()["spans_received"] == 3


def test_a_gzip_body_of_several_members_is_read_whole(make_service):
    """``gzip -c a b`` writes one member per file; the decompressed body is their concatenation."""
    svc = make_service()
    raw = _oi_json()
    body = gzip.compress(raw[:40]) + gzip.compress(raw[40:])
    status, _, text = _request(
        svc, body, {"Content-Type": "application/json", "Content-Encoding": "gzip", "Content-Length": str(len(body))}
    )
    assert status == 200, text
    assert svc.stats()["spans_received"] == 3


def test_an_unknown_content_encoding_is_415(make_service):
    """A body in an encoding the service cannot read is refused, not parsed as if plain."""
    svc = make_service()
    raw = _oi_json()
    status, _, text = _request(
        svc, raw, {"Content-Type": "application/json", "Content-Encoding": "br", "Content-Length": str(len(raw))}
    )
    assert status == 415, text
    assert b"br" in text
    assert svc.stats()["spans_received"] == 0


def test_a_corrupt_gzip_body_is_400(make_service):
    svc = make_service()
    body = gzip.compress(_oi_json())[:-12] + b"\x00" * 12
    status, _, _ = _request(
        svc, body, {"Content-Type": "application/json", "Content-Encoding": "gzip", "Content-Length": str(len(body))}
    )
    assert status == 400


# ---------------------------------------------------------------------------------------- item 3


@pytest.mark.parametrize("length", ["-1", "abc", "1e3", "+12", "12, 13"])
def test_a_bad_content_length_is_400_at_once(make_service, length):
    """The headers alone are sent and the connection stays open: the answer comes without the
    service waiting for (or reading) a body (``-1`` used to read until the client hung up)."""
    svc = make_service()
    with _connect(svc) as sock:
        sock.sendall(
            f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n".encode()
        )
        status, headers, _ = read_response(sock)
    assert status == 400
    assert headers["connection"] == "close"
    assert svc.stats()["requests_invalid"] == 1


def test_a_content_length_over_the_limit_is_413_at_once(make_service):
    svc = make_service(max_body=1000)
    with _connect(svc) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1001\r\n\r\n"
        )
        status, headers, _ = read_response(sock)
    assert status == 413 and headers["connection"] == "close"


def test_two_different_content_lengths_are_400(make_service):
    svc = make_service()
    raw = _oi_json()
    with _connect(svc) as sock:
        sock.sendall(
            f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\nContent-Length: 5\r\n\r\n".encode()
            + raw
        )
        assert read_response(sock)[0] == 400
    assert svc.stats()["spans_received"] == 0


def test_a_transfer_coding_other_than_chunked_is_501(make_service):
    svc = make_service()
    status, headers, _ = _request(svc, b"", {"Content-Type": "application/json", "Transfer-Encoding": "gzip, chunked"})
    assert status == 501 and headers["connection"] == "close"


def test_a_request_head_over_32_kib_is_431(make_service):
    svc = make_service()
    with _connect(svc) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 40_000 + b"\r\n")
        status, headers, _ = read_response(sock)
    assert status == 431 and headers["connection"] == "close"
    assert svc.stats()["requests_invalid"] == 1


def test_deeply_nested_json_is_400_not_500(make_service):
    svc = make_service()
    body = b"[" * 200_000 + b"]" * 200_000
    status, _, text = _request(svc, body, {"Content-Type": "application/json", "Content-Length": str(len(body))})
    assert status == 400, text
    depth = 200  # an attribute value nested 800 JSON levels deep: parsed, then decoded or refused
    value = '{"kvlistValue":{"values":[{"key":"k","value":' * depth + '{"stringValue":"leaf"}' + "}]}}" * depth
    span = '{{"traceId":"{}","spanId":"{}","name":"x","attributes":[{{"key":"deep","value":{}}}]}}'.format(
        "0" * 31 + "1", "0" * 15 + "1", value
    )
    body = (f'{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{span}]}}]}}]}}').encode()
    status, _, text = _request(svc, body, {"Content-Type": "application/json", "Content-Length": str(len(body))})
    assert status in (200, 400), text  # read (depth cut) or refused, never a server error
    assert not any(k.startswith("serve: an export") for k in _failures())


def _failures() -> dict:
    from ragmeter.guard import failures

    return failures()


def _chunked(body: bytes, size: int = 100) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def test_a_chunked_body_is_read(make_service):
    """Transfer-Encoding: chunked (no Content-Length) used to be read as an empty body."""
    svc = make_service()
    raw = _oi_json()
    status, _, text = _request(svc, _chunked(raw), {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    assert status == 200, text
    assert svc.stats()["spans_received"] == 3


def test_a_chunked_gzip_body_is_read(make_service):
    svc = make_service()
    body = gzip.compress(_oi_json())
    status, _, text = _request(
        svc,
        _chunked(body, 37),
        {"Content-Type": "application/json", "Content-Encoding": "gzip", "Transfer-Encoding": "chunked"},
    )
    assert status == 200, text
    assert svc.stats()["spans_received"] == 3


def test_a_chunked_body_over_the_limit_is_413(make_service):
    svc = make_service(max_body=10_000)
    raw = _oi_json(10)
    assert len(raw) > 10_000
    status, _, text = _request(
        svc, _chunked(raw, 4096), {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    )
    assert status == 413, text
    bomb = _bomb(16 * MIB)
    status, _, text = _request(
        svc,
        _chunked(bomb, 4096),
        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip", "Transfer-Encoding": "chunked"},
    )
    assert status == 413, text


@pytest.mark.parametrize("chunks", [b"zz\r\nabc\r\n0\r\n\r\n", b"-5\r\nabc\r\n0\r\n\r\n", b"3\r\nabcXY0\r\n\r\n"])
def test_a_malformed_chunked_body_is_400(make_service, chunks):
    svc = make_service()
    status, _, _ = _request(svc, chunks, {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    assert status == 400


def test_expect_100_continue_is_answered_before_the_body(make_service):
    """curl's ``Expect: 100-continue``: the service says go on (or refuses) before the body."""
    svc = make_service(max_body=10_000)
    raw = _oi_json()
    with _connect(svc) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(raw)
        )
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(raw)
        assert read_response(sock)[0] == 200
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Expect: 100-continue\r\nContent-Length: 20000\r\n\r\n"
        )
        assert read_response(sock)[0] == 413  # no 100 Continue: the body is not wanted
    assert svc.stats()["requests"] == 2 and svc.stats()["spans_received"] == 3


# ---------------------------------------------------------------------------------------- item 4


def _served(svc) -> bool:
    raw = _oi_json()
    try:
        return _request(svc, raw, {"Content-Type": "application/json", "Content-Length": str(len(raw))})[0] == 200
    except OSError:
        return False


def test_half_open_connections_take_no_thread_and_do_not_lock_others_out(make_service):
    """200 connections that never send a byte used to keep 200 threads alive. Now they wait in
    the service's waiting room (a selector) without a thread, and requests are served meanwhile."""
    svc = make_service()
    before = threading.active_count()
    socks = [_connect(svc) for _ in range(200)]
    try:
        assert wait_for(lambda: svc.stats()["connections_open"] == 200, timeout=10), svc.stats()
        assert threading.active_count() - before <= 0
        assert _served(svc)
        assert not select.select(socks, [], [], 0.2)[0]  # none of them answered or closed
        assert svc.stats()["connections_refused"] == 0
    finally:
        for sock in socks:
            sock.close()
    assert wait_for(lambda: svc.stats()["connections_open"] == 0, timeout=10), svc.stats()


def test_beyond_the_connection_limit_idle_ones_make_room_else_503(make_service):
    """50 connections at most: 200 silent ones leave the last 50 open (the oldest idle ones were
    closed for them) and a request still gets in; 50 connections each holding a partial request
    (none idle) make the next one get 503 with Retry-After at once."""
    svc = make_service(max_connections=50)
    socks = [_connect(svc) for _ in range(200)]
    try:
        assert wait_for(lambda: svc.stats()["connections_evicted"] == 150, timeout=10), svc.stats()
        closed = [s for s in select.select(socks, [], [], 0.5)[0] if s.recv(10) == b""]
        assert len(closed) == 150 and not set(closed) & set(socks[150:])  # the oldest went
        assert _served(svc) and svc.stats()["connections_refused"] == 0
    finally:
        for sock in socks:
            sock.close()
    assert wait_for(lambda: svc.stats()["connections_open"] == 0, timeout=10)
    partial = [_connect(svc) for _ in range(50)]
    try:
        for sock in partial:
            sock.sendall(b"POST /v1/traces HTTP/1.1\r\n")
        assert wait_for(lambda: svc._server.states().get("headers") == 50, timeout=10), svc._server.states()
        status, headers, text = _request(svc, b"", {"Content-Length": "0"})
        assert status == 503 and headers["retry-after"] == "1" and text == b"server busy, retry later\n"
        assert svc.stats()["connections_refused"] == 1
    finally:
        for sock in partial:
            sock.close()


def _trickle(sock: socket.socket, data: bytes, every: float = 0.05) -> int:
    """Send ``data`` one byte every ``every`` seconds until the server answers or hangs up: how
    many bytes went out."""
    sent = 0
    for i in range(len(data)):
        if select.select([sock], [], [], every)[0]:
            return sent
        try:
            sock.send(data[i : i + 1])
        except OSError:
            return sent
        sent += 1
    return sent


def test_a_slow_header_sender_is_cut_at_the_header_deadline(make_service):
    svc = make_service(header_timeout=0.3)
    with _connect(svc) as sock:
        head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + b"X-Pad: a\r\n" * 40
        sent = _trickle(sock, head)
        assert sent < len(head)
        assert sock.recv(100) == b""  # closed without an answer: no request was read
    assert wait_for(lambda: svc.stats()["requests_timed_out"] == 1, timeout=5)
    assert svc.stats()["requests"] == 0


def test_a_slow_body_sender_is_cut_at_the_body_deadline(make_service):
    """1 byte every 50 ms of a 400-byte body against a 0.3 s body deadline: cut with 408
    long before the body is complete (it used to be read for as long as it took)."""
    svc = make_service(body_timeout=0.3)
    with _connect(svc) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
        )
        sent = _trickle(sock, b" " * 400)
        assert sent < 400
        status, headers, _ = read_response(sock)
    assert status == 408 and headers["connection"] == "close"
    assert svc.stats()["requests_timed_out"] == 1 and svc.stats()["spans_received"] == 0


def test_an_idle_kept_alive_connection_is_closed_after_the_idle_timeout(make_service):
    svc = make_service(idle_timeout=0.3)
    raw = _oi_json()
    with _connect(svc) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(raw), raw)
        )
        status, headers, _ = read_response(sock)
        assert status == 200 and "connection" not in headers  # kept alive
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # a second request on it is served
        assert read_response(sock, "GET")[0] == 200
        assert sock.recv(100) == b""  # then, idle, it is closed
    assert svc.stats()["requests_timed_out"] == 0  # an idle close is no timed-out request


def test_an_idle_kept_alive_connection_holds_no_worker(make_service):
    """One worker: a client keeping its connection open after a request does not lock the next
    client out; both are served, on their own connections, in turn."""
    svc = make_service(workers=1, idle_timeout=300)
    with _connect(svc) as first:
        first.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(first, "GET")[0] == 200
        assert wait_for(lambda: svc._server.states().get("keepalive") == 1, timeout=5)
        assert request(svc.port, method="GET", path="/healthz")[0] == 200
        first.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(first, "GET")[:3:2] == (200, b"ready\n")


def test_pipelined_requests_are_all_answered(make_service):
    svc = make_service()
    with _connect(svc) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while not data.endswith(b"ready\n"):
            piece = sock.recv(4096)
            assert piece, data
            data += piece
    assert data.count(b"HTTP/1.1 200 OK\r\n") == 2 and data.index(b"ok\n") < data.index(b"ready\n")


def test_a_flood_is_served_or_refused_with_bounded_threads_and_memory(make_service):
    """32 senders at once, each posting a 900 KB body (not a valid request, so it is read and
    answered 400) to a service with 2 workers: every answer is 400 or 503 with Retry-After, the
    service never runs more than its 2 workers, and what it allocates stays within a few bodies
    (one thread and one body per connection would have held all 32)."""
    svc = make_service(workers=2, max_body=1 * MIB)
    body = bytes(900_000)
    answers: list = []
    gate = threading.Barrier(33)

    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: %d\r\n\r\n"

    def send():
        gate.wait()
        try:
            with _connect(svc) as sock:  # head and body sent apart: the client copies nothing
                sock.sendall(head % len(body))
                sock.sendall(body)
                answers.append(read_response(sock)[:2])
        except OSError as exc:  # refused while the request was still being sent
            answers.append((type(exc).__name__, {}))

    def service_threads() -> int:
        return sum(t.name.startswith("ragmeter-serve-worker") for t in threading.enumerate())

    senders = [threading.Thread(target=send) for _ in range(32)]
    for t in senders:
        t.start()
    tracemalloc.start()
    try:
        gate.wait()
        most = 0
        while any(t.is_alive() for t in senders):
            most = max(most, service_threads())
            for t in senders:
                t.join(0.001)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert most == 2
    statuses = [status for status, _ in answers]
    assert len(statuses) == 32 and set(statuses) <= {400, 503, "ConnectionResetError", "BrokenPipeError"}, statuses
    assert statuses.count(400) >= 4  # the workers and the waiting places
    assert all(headers.get("retry-after") == "1" for status, headers in answers if status == 503)
    assert svc.stats()["connections_refused"] == 32 - statuses.count(400)
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB"


def test_the_listen_backlog_is_the_system_maximum(make_service):
    """``ss`` shows a listening socket's backlog in Send-Q; the stdlib default was 5, which reset
    2 of 1,600 connections under 16 senders."""
    svc = make_service()
    with open("/proc/sys/net/core/somaxconn") as f:
        somaxconn = int(f.read())
    out = subprocess.run(["ss", "-ltnH", f"sport = :{svc.port}"], capture_output=True, text=True, check=True).stdout
    [line] = out.strip().splitlines()
    assert int(line.split()[2]) == somaxconn  # the kernel caps listen()'s backlog at somaxconn


def _serve_cli(*args: str, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ragmeter.cli",
            "serve",
            "--otlp-port",
            str(port),
            *args,
            "-m",
            "hallucinated_specifics",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env if env is not None else dict(os.environ),
    )
    return proc, port


def _wait_up(proc: subprocess.Popen, port: int) -> None:
    def up():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
                return read_response(s)[0] == 200
        except OSError:
            return False

    assert wait_for(lambda: proc.poll() is not None or up(), timeout=60) and proc.poll() is None


@pytest.mark.slow
def test_sigterm_cuts_a_slow_sender_instead_of_waiting_for_it():
    """A body trickling in used to hold shutdown for the whole ``--shutdown-timeout`` (30 s by
    default; 300 s here, so a wait would run into the 60 s limit of ``communicate``)."""
    proc, port = _serve_cli("--host", "127.0.0.1", "--shutdown-timeout", "300")
    try:
        _wait_up(proc, port)
        slow = socket.create_connection(("127.0.0.1", port), timeout=30)
        slow.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{\"resourceSpans\""
        )
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # the service has the slow body
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_response(s)[0] == 200
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        try:
            data = slow.recv(1000)
        except ConnectionResetError:
            data = b""
        slow.close()
        assert data == b"" or data.startswith(b"HTTP/1.1 503"), data
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------------------- item 2 / 9


def test_the_service_listens_on_loopback_by_default():
    svc = EvaluationService([ContextCount()], port=0)
    try:
        assert svc._server.server_address[0] == "127.0.0.1"
    finally:
        svc.shutdown(1)


@pytest.mark.slow
def test_serve_never_prints_the_forward_password():
    receiver = OTLPReceiver()
    secret = "hunter2-not-for-logs"
    forward = receiver.url.replace("http://", f"http://otel:{secret}@")
    proc, port = _serve_cli("--host", "127.0.0.1", "--forward", forward)
    try:
        _wait_up(proc, port)
        raw = _oi_json()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(raw)}\r\n\r\n".encode()
                + raw
            )
            assert read_response(s)[0] == 200
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        receiver.close()
    assert proc.returncode == 0, out
    assert "1 evaluation spans exported" in out, out  # the credentials still reach the receiver
    assert secret not in out, out
    assert "otel:[REDACTED]@127.0.0.1" in out


@pytest.mark.slow
def test_a_failing_forward_logs_no_password(make_service, caplog):
    """The forward endpoint down: what the exporters log (at debug level too) names the host,
    never the URL's password."""
    import logging

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    secret = "hunter2-not-for-logs"
    caplog.set_level(logging.DEBUG)
    svc = make_service(forward=f"http://otel:{secret}@127.0.0.1:{closed}")
    raw = _oi_json()
    assert _request(svc, raw, {"Content-Type": "application/json", "Content-Length": str(len(raw))})[0] == 200
    assert wait_for(lambda: f"127.0.0.1', port={closed}" in caplog.text, timeout=30), caplog.text[-2000:]
    svc.shutdown(1)
    assert secret not in caplog.text
