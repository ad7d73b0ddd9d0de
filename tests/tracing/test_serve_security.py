"""``ragmeter serve``'s access rules (issue 33, item 2): loopback by default, a bearer token on
every endpoint but the health checks (HTTP and gRPC), no start on another address without one
unless ``--insecure``, and TLS with a self-signed certificate made by ``openssl`` in the test.
The real OpenTelemetry exporters (HTTP and gRPC) send the spans."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helpers import wait_for
from helpers.process import free_port
from helpers.rawhttp import client_tls, connect, read_response, request, self_signed
from helpers.tracing import AnswerOverlap, ContextCount, OTLPReceiver, oi_rag
from ragmeter.tracing.otlp_json import encode_otlp_json
from ragmeter.tracing.serve import EvaluationService

TOKEN = "s3cret-token-for-the-test"


@pytest.fixture
def receiver():
    r = OTLPReceiver()
    yield r
    r.close()


@pytest.fixture
def make_service(receiver):
    made = []

    def make(**kw):
        kw.setdefault("grace_period", 0.2)
        kw.setdefault("host", "127.0.0.1")
        svc = EvaluationService([ContextCount(), AnswerOverlap()], port=0, forward=receiver.url, **kw).start()
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.shutdown(5)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[str, str]:
    return self_signed(tmp_path_factory.mktemp("tls"))


def _spans() -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "secure-app"}), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    oi_rag(provider)
    return list(memory.get_finished_spans())


def _json_body() -> bytes:
    return json.dumps(encode_otlp_json(_spans())).encode()


def _post(svc, headers: dict[str, str], tls=None) -> tuple[int, dict, bytes]:
    body = _json_body()
    return request(
        svc.port, body, {"Content-Type": "application/json", "Content-Length": str(len(body)), **headers}, tls=tls
    )


def _carriers(receiver) -> list:
    return [sp for _, sp in receiver.resource_spans() if sp.name == "ragmeter.evaluation"]


def test_with_a_token_every_endpoint_but_the_health_checks_needs_it(make_service):
    svc = make_service(token=TOKEN)
    status, headers, text = _post(svc, {})
    assert status == 401 and headers["www-authenticate"] == 'Bearer realm="ragmeter serve"', text
    status, headers, _ = _post(svc, {"Authorization": "Bearer not-the-token"})
    assert status == 401 and 'error="invalid_token"' in headers["www-authenticate"]
    assert _post(svc, {"Authorization": f"Basic {TOKEN}"})[0] == 401  # another scheme
    assert _post(svc, {"Authorization": TOKEN})[0] == 401  # no scheme
    assert svc.stats()["spans_received"] == 0
    assert _post(svc, {"Authorization": f"Bearer {TOKEN}"})[0] == 200
    assert _post(svc, {"Authorization": f"bearer  {TOKEN} "})[0] == 200  # the scheme is case-insensitive
    assert svc.stats()["spans_received"] == 6
    assert request(svc.port, method="GET", path="/metrics")[0] == 401
    assert request(svc.port, method="GET", path="/nothing")[0] == 401  # no path is told apart without the token
    status, _, text = request(
        svc.port, method="GET", path="/metrics?format=json", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200 and json.loads(text)["requests_unauthorized"] == 6
    assert request(svc.port, method="GET", path="/healthz")[:3:2] == (200, b"ok\n")
    assert request(svc.port, method="GET", path="/readyz")[:3:2] == (200, b"ready\n")


def test_an_unauthorized_body_is_not_read(make_service):
    """The 401 comes before the body: a client announcing 30 MB gets it without sending them."""
    svc = make_service(token=TOKEN)
    with connect(svc.port) as sock:
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 30000000\r\n\r\n"
        )
        status, headers, _ = read_response(sock)
    assert status == 401 and headers["connection"] == "close"


def test_the_sdk_exporter_sends_with_the_token_and_fails_without(make_service, receiver):
    svc = make_service(token=TOKEN)
    bare = OTLPSpanExporter(endpoint=svc.url + "/v1/traces", timeout=5)
    assert bare.export(_spans()) == SpanExportResult.FAILURE
    exporter = OTLPSpanExporter(endpoint=svc.url + "/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"})
    assert exporter.export(_spans()) == SpanExportResult.SUCCESS
    assert wait_for(lambda: len(_carriers(receiver)) == 1, timeout=10), svc.stats()


def test_the_token_from_the_sdk_environment_variable(make_service, receiver, monkeypatch):
    """The README's recipe: OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20<token>"."""
    svc = make_service(token=TOKEN)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{TOKEN}")
    exporter = OTLPSpanExporter(endpoint=svc.url + "/v1/traces")
    assert exporter.export(_spans()) == SpanExportResult.SUCCESS
    assert svc.stats()["requests_unauthorized"] == 0


def test_another_address_than_loopback_needs_a_token_or_insecure():
    for host in ("0.0.0.0", "", "::"):
        with pytest.raises(ValueError, match="--insecure"):
            EvaluationService([ContextCount()], host=host, port=0)
    svc = EvaluationService([ContextCount()], host="0.0.0.0", port=0, token=TOKEN)
    svc.shutdown(1)
    svc = EvaluationService([ContextCount()], host="0.0.0.0", port=0, insecure=True)
    svc.shutdown(1)
    svc = EvaluationService([ContextCount()], host="localhost", port=0)  # a name for loopback is fine
    svc.shutdown(1)
    with pytest.raises(ValueError, match="empty"):
        EvaluationService([ContextCount()], port=0, token=" ")


def test_https_with_a_self_signed_certificate(make_service, receiver, certificate, monkeypatch):
    cert, key = certificate
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests would prefer them to certificate_file
        monkeypatch.delenv(name, raising=False)
    svc = make_service(token=TOKEN, tls_cert=cert, tls_key=key)
    assert svc.url.startswith("https://127.0.0.1:")
    exporter = OTLPSpanExporter(
        endpoint=svc.url + "/v1/traces", certificate_file=cert, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert exporter.export(_spans()) == SpanExportResult.SUCCESS
    assert wait_for(lambda: len(_carriers(receiver)) == 1, timeout=10), svc.stats()
    tls = client_tls(cert)
    assert _post(svc, {"Authorization": f"Bearer {TOKEN}"}, tls=tls)[0] == 200
    assert request(svc.port, method="GET", path="/healthz", tls=tls)[0] == 200
    untrusted = ssl.create_default_context()  # the system's authorities do not vouch for it
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(svc.port, tls=untrusted)
    with connect(svc.port) as plain:  # plain HTTP on the TLS port: no answer, closed
        plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            answer = plain.recv(100)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"HTTP/")


def test_a_silent_tls_client_is_cut_at_the_header_deadline(make_service, certificate):
    cert, key = certificate
    svc = make_service(tls_cert=cert, tls_key=key, header_timeout=0.3)
    with connect(svc.port) as sock:  # connects and never starts the handshake
        assert sock.recv(100) == b""
    assert wait_for(lambda: svc.stats()["requests_timed_out"] == 1, timeout=5)


# ---------------------------------------------------------------------------------------- gRPC


def test_grpc_needs_the_token_in_the_authorization_metadata(make_service, receiver):
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    svc = make_service(token=TOKEN, grpc_port=0)
    bare = GrpcExporter(endpoint=f"127.0.0.1:{svc.grpc_port}", insecure=True, timeout=2)
    assert bare.export(_spans()) == SpanExportResult.FAILURE
    bare.shutdown()
    with grpc.insecure_channel(f"127.0.0.1:{svc.grpc_port}") as channel:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

        with pytest.raises(grpc.RpcError) as err:
            TraceServiceStub(channel).Export(encode_spans(_spans()), metadata=[("authorization", "Bearer wrong")])
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    exporter = GrpcExporter(
        endpoint=f"127.0.0.1:{svc.grpc_port}", insecure=True, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert exporter.export(_spans()) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert wait_for(lambda: len(_carriers(receiver)) == 1, timeout=10), svc.stats()
    assert svc.stats()["requests_unauthorized"] >= 2 and svc.stats()["spans_received"] == 3


def test_grpc_over_tls(make_service, receiver, certificate):
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    cert, key = certificate
    svc = make_service(token=TOKEN, grpc_port=0, tls_cert=cert, tls_key=key)
    credentials = grpc.ssl_channel_credentials(root_certificates=Path(cert).read_bytes())
    exporter = GrpcExporter(
        endpoint=f"127.0.0.1:{svc.grpc_port}", credentials=credentials, headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert exporter.export(_spans()) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert wait_for(lambda: len(_carriers(receiver)) == 1, timeout=10), svc.stats()


def test_grpc_refuses_a_message_over_the_limit_once_decompressed(make_service):
    """4 MiB of one repeated letter, gzip-compressed by the gRPC client to a few KB, against a
    1 MiB limit: RESOURCE_EXHAUSTED, and nothing reaches the service."""
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    svc = make_service(grpc_port=0, max_body=1024 * 1024)
    big = ExportTraceServiceRequest()
    span = big.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "big"
    attr = span.attributes.add()
    attr.key, attr.value.string_value = "blob", "a" * (4 * 1024 * 1024)
    with grpc.insecure_channel(f"127.0.0.1:{svc.grpc_port}") as channel:
        with pytest.raises(grpc.RpcError) as err:
            TraceServiceStub(channel).Export(big, compression=grpc.Compression.Gzip, timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert svc.stats()["spans_received"] == 0 and svc.stats()["requests"] == 0


# ---------------------------------------------------------------------------------------- CLI


def _serve(*args: str, env_token: str | None = None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RAGMETER_SERVE_TOKEN"}
    if env_token is not None:
        env["RAGMETER_SERVE_TOKEN"] = env_token
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
        env=env,
    )
    return proc, port


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _up(port: int, tls=None) -> bool:
    try:
        return request(port, method="GET", path="/readyz", tls=tls)[0] == 200
    except OSError:
        return False


def test_cli_refuses_a_public_address_without_a_token():
    proc, _ = _serve("--host", "0.0.0.0")
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2, out
    assert "refusing to listen on '0.0.0.0' without a token" in out and "--insecure" in out
    # the whole reason reaches the user (its wording once looked like 'token: <secret>' to the redaction)
    assert "anyone who can reach it could send traces" in out and "[REDACTED]" not in out, out
    proc, _ = _serve("--token", "a", "--token-file", "/nonexistent")
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 2 and "not both" in out, out


@pytest.mark.slow
def test_cli_token_from_the_environment_on_a_public_address():
    proc, port = _serve("--host", "0.0.0.0", env_token=TOKEN)
    try:
        assert wait_for(lambda: proc.poll() is not None or _up(port), timeout=60) and proc.poll() is None
        body = _json_body()
        assert request(port, body, {"Content-Type": "application/json", "Content-Length": str(len(body))})[0] == 401
        assert (
            request(
                port,
                body,
                {
                    "Content-Type": "application/json",
                    "Content-Length": str(len(body)),
                    "Authorization": f"Bearer {TOKEN}",
                },
            )[0]
            == 200
        )
    finally:
        out = _stop(proc)
    assert proc.returncode == 0, out
    assert "(bearer token required)" in out and "warning: listening beyond this machine without TLS" in out
    assert TOKEN not in out


@pytest.mark.slow
def test_cli_token_file_and_tls(tmp_path, certificate):
    cert, key = certificate
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    proc, port = _serve("--token-file", str(token_file), "--tls-cert", cert, "--tls-key", key)
    tls = client_tls(cert)
    try:
        assert wait_for(lambda: proc.poll() is not None or _up(port, tls), timeout=60) and proc.poll() is None
        body = _json_body()
        assert (
            request(
                port,
                body,
                {
                    "Content-Type": "application/json",
                    "Content-Length": str(len(body)),
                    "Authorization": f"Bearer {TOKEN}",
                },
                tls=tls,
            )[0]
            == 200
        )
        status, _, text = request(
            port, method="GET", path="/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, tls=tls
        )
        assert status == 200 and b"ragmeter_serve_spans_received_total 3" in text
    finally:
        out = _stop(proc)
    assert proc.returncode == 0, out
    assert f"https://127.0.0.1:{port}/v1/traces (bearer token required, TLS)" in out
    assert TOKEN not in out and "warning" not in out


def test_the_default_listen_address_is_loopback():
    from ragmeter.cli import build_parser

    assert build_parser().parse_args(["serve"]).host == "127.0.0.1"
