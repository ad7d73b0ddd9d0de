"""HTTP/1.1 by hand over a socket, for the tests that send what a client library will not (bad
lengths, partial requests, slow senders) or must see exactly what a server answers; and a
self-signed certificate made with the ``openssl`` command for TLS tests."""

from __future__ import annotations

import http.client
import socket
import ssl
import subprocess
from pathlib import Path

__all__ = ["connect", "read_response", "request", "self_signed", "client_tls"]


def connect(port: int, timeout: float = 10.0, tls: ssl.SSLContext | None = None) -> socket.socket:
    """A connection to 127.0.0.1:``port`` (through TLS with ``tls``)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return tls.wrap_socket(sock, server_hostname="127.0.0.1") if tls is not None else sock


def read_response(sock: socket.socket, method: str = "POST") -> tuple[int, dict[str, str], bytes]:
    """One HTTP response read from ``sock``: ``(status, headers with lower-case names, body)``."""
    resp = http.client.HTTPResponse(sock, method=method)
    resp.begin()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()


def request(
    port: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    path: str = "/v1/traces",
    method: str = "POST",
    tls: ssl.SSLContext | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request over a fresh connection with exactly ``headers`` (only ``Host`` added)."""
    with connect(port, tls=tls) as sock:
        head = f"{method} {path} HTTP/1.1\r\nHost: x\r\n" + "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        sock.sendall(head.encode() + b"\r\n" + body)
        return read_response(sock, method)


def self_signed(folder: Path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and localhost (EC P-256, one day) and its key,
    written by the ``openssl`` command into ``folder``: ``(cert path, key path)``."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def client_tls(cert: str) -> ssl.SSLContext:
    """A client TLS context that trusts ``cert`` only (and checks the host name)."""
    return ssl.create_default_context(cafile=cert)
