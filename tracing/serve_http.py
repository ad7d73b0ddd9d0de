"""Internal: The HTTP/1.1 server under ``ragmeter serve``, made safe to expose (standard library only).

* **A fixed pool of workers, and a waiting room.** :class:`BoundedHTTPServer` accepts
  connections on one thread and keeps them in a selector until their request's headers are in;
  only then does one of ``workers`` threads take the request (at most ``waiting`` more ready
  requests, holding only their headers, wait for one; beyond them 503 with ``Retry-After``). Connections that send nothing,
  send their headers a byte at a time, or sit idle between requests cost no thread, and at most
  ``max_connections`` are open (a new one closes the longest-idle one, or gets 503 when none is
  idle). The listen backlog is the system's maximum (:func:`listen_backlog`), so a burst of
  connections is queued by the kernel, not reset.
* **Deadlines, not per-read timeouts.** The request line and headers must arrive within
  ``header_timeout`` seconds of the connection (or of the first byte of a later request on it),
  the body within ``body_timeout`` seconds of the headers, and a kept-alive connection is closed
  after ``idle_timeout`` idle seconds; a sender of one byte a second is cut at the deadline. The
  TLS handshake (on a worker) counts against the header deadline.
* **The body limit holds for the decompressed size.** :func:`request_framing` checks
  ``Content-Length`` (digits only, one value, at most the limit: 400 / 413 before a byte of the
  body is read) and ``Transfer-Encoding: chunked``; :func:`read_body` reads either and inflates
  ``gzip`` (several members too) or ``deflate`` (zlib or raw) while reading, answering 413 as
  soon as the wire bytes or the inflated bytes pass the limit, so no more than the limit is ever
  held; another ``Content-Encoding`` is 415 (:func:`content_decoder`).
* **Bearer tokens** are compared in constant time (:func:`bearer_ok`); :func:`tls_context` builds
  the server's TLS context (TLS 1.2 or later).

The OpenTelemetry Collector's ``confighttp`` applies its ``max_request_body_size`` to the inflated
stream as well (since CVE-2024-36129) and checks its ``bearertokenauth`` in constant time; this
module does the same with Python's ``zlib`` and ``hmac``.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import ipaddress
import logging
import queue
import select
import selectors
import socket
import socketserver
import ssl
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

__all__ = [
    "BodyError",
    "BoundedHTTPServer",
    "HardenedHandler",
    "request_framing",
    "content_decoder",
    "read_body",
    "bearer_digest",
    "bearer_ok",
    "tls_context",
    "is_loopback",
    "listen_backlog",
]

log = logging.getLogger("ragmeter")

_CHUNK = 65536
_HEAD = 32768  # the largest request line + headers taken (431 beyond), as nginx's default buffers
_LINGER_BYTES = 1024 * 1024  # unread body discarded after an early answer, so the client can read it


class BodyError(Exception):
    """A request body that cannot be taken: ``status`` (400, 413, 415 or 501) and the reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def listen_backlog() -> int:
    """The system's largest listen backlog: ``/proc/sys/net/core/somaxconn`` where there is one,
    else :data:`socket.SOMAXCONN` (the kernel caps ``listen()`` at it anyway)."""
    try:
        with open("/proc/sys/net/core/somaxconn") as f:
            return max(int(f.read().strip()), socket.SOMAXCONN)
    except (OSError, ValueError):
        return socket.SOMAXCONN


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) only reaches this machine: every address it
    resolves to is a loopback address. ``""``, ``0.0.0.0`` and ``::`` (every interface) are not."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    if not host:
        return False
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def bearer_digest(token: str) -> bytes:
    """The SHA-256 of a token, the form :func:`bearer_ok` compares (equal lengths, so the
    comparison tells nothing about the token's length either)."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def bearer_ok(authorization: str | None, digest: bytes) -> bool:
    """Whether an ``Authorization`` value is ``Bearer <token>`` for the token of ``digest``
    (constant-time comparison; the scheme is case-insensitive)."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    given = given.strip()
    ok = hmac.compare_digest(hashlib.sha256(given.encode("utf-8", "surrogateescape")).digest(), digest)
    return ok and scheme.lower() == "bearer" and bool(given)


def tls_context(cert: str, key: str | None = None) -> ssl.SSLContext:
    """A server TLS context (TLS 1.2 or later) from a PEM certificate chain and its key (``key``
    None: the key is in ``cert``). OSError / ssl.SSLError when they cannot be read."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


def request_framing(headers: Any, limit: int) -> int | None:
    """The body length a request announces: ``Content-Length`` (0 when there is none), or None for
    ``Transfer-Encoding: chunked``. BodyError 400 for a length that is not one number of digits
    (``-1``, ``abc``, two different values) or for both headers at once, 413 over ``limit``, 501
    for another transfer coding. Nothing is read."""
    te = headers.get_all("Transfer-Encoding") or []
    cl = headers.get_all("Content-Length") or []
    if te:
        codings = [c.strip().lower() for v in te for c in v.split(",") if c.strip()]
        if codings != ["chunked"]:
            raise BodyError(501, f"unsupported Transfer-Encoding {', '.join(codings)!r} (chunked only)")
        if cl:
            raise BodyError(400, "both Content-Length and Transfer-Encoding")
        return None
    values = {v.strip() for v in ",".join(cl).split(",")} if cl else set()
    if not values:
        return 0
    if len(values) != 1:
        raise BodyError(400, f"conflicting Content-Length values {sorted(values)}")
    value = values.pop()
    if not (value.isascii() and value.isdigit()):
        raise BodyError(400, f"Content-Length {value[:40]!r} is not a number of bytes")
    if len(value) > 18 or int(value) > limit:
        raise BodyError(413, f"body over {limit} bytes")
    return int(value)


class _Inflater:
    """Inflates a ``gzip`` (one or more members) or ``deflate`` (zlib or raw; told apart by the
    zlib header) stream fed in pieces, keeping at most ``limit`` output bytes: BodyError 413 as
    soon as the output would pass it, 400 for a corrupt or truncated stream."""

    def __init__(self, coding: str, limit: int):
        self.coding = coding
        self.limit = limit
        self.out = bytearray()
        self._d: Any = None
        self._head = b""  # deflate: the first bytes, until there are two to tell zlib from raw

    def _start(self, data: bytes) -> bytes:
        if self.coding == "gzip":
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return data
        data = self._head + data
        if len(data) < 2:
            self._head = data
            return b""
        cmf, flg = data[0], data[1]
        zlib_header = cmf & 0x0F == 8 and cmf >> 4 <= 7 and (cmf * 256 + flg) % 31 == 0
        self._d = zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)
        return data

    def feed(self, data: bytes) -> None:
        """Inflate the next piece of the stream."""
        while data:
            if self._d is not None and self._d.eof:
                if self.coding != "gzip":
                    raise BodyError(400, "data after the end of the deflate stream")
                data = data.lstrip(b"\0")  # padding after a gzip member
                if not data:
                    return
                self._d = None
            if self._d is None:
                data = self._start(data)
                if self._d is None:
                    return
            try:  # a piece at a time: no more than the limit plus one piece is ever held
                out = self._d.decompress(data, min(self.limit - len(self.out) + 1, 4 * _CHUNK))
            except zlib.error as exc:
                raise BodyError(400, f"corrupt {self.coding} body: {exc}") from None
            self._grow(out)
            data = self._d.unconsumed_tail or (self._d.unused_data if self._d.eof else b"")

    def _grow(self, out: bytes) -> None:
        if len(self.out) + len(out) > self.limit:
            raise BodyError(413, f"body over {self.limit} bytes once decompressed")
        self.out += out

    def finish(self) -> bytearray:
        """The whole inflated body (BodyError 400 when the stream stopped short)."""
        if self._d is None:
            if self._head:
                raise BodyError(400, f"truncated {self.coding} body")
            return self.out
        if not self._d.eof:
            try:
                self._grow(self._d.flush())  # what zlib holds back (at most its 32 KiB window)
            except zlib.error as exc:
                raise BodyError(400, f"corrupt {self.coding} body: {exc}") from None
            if not self._d.eof:
                raise BodyError(400, f"truncated {self.coding} body")
        return self.out


class _Plain:
    """The identity coding: the bytes as they come, at most ``limit``."""

    def __init__(self, limit: int):
        self.limit = limit
        self.out = bytearray()

    def feed(self, data: bytes) -> None:
        if len(self.out) + len(data) > self.limit:
            raise BodyError(413, f"body over {self.limit} bytes")
        self.out += data

    def finish(self) -> bytearray:
        return self.out


def content_decoder(content_encoding: str | None, limit: int) -> Any:
    """A decoder for the request's ``Content-Encoding`` (none or ``identity``, ``gzip`` /
    ``x-gzip``, ``deflate``) that keeps at most ``limit`` decoded bytes; BodyError 415 for any
    other coding or a chain of codings."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    codings = [c for c in codings if c != "identity"]
    if not codings:
        return _Plain(limit)
    if len(codings) > 1:
        raise BodyError(415, f"unsupported Content-Encoding {content_encoding!r} (one of gzip, deflate at most)")
    coding = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}.get(codings[0])
    if coding is None:
        raise BodyError(415, f"unsupported Content-Encoding {codings[0][:40]!r} (gzip, deflate or none)")
    return _Inflater(coding, limit)


def read_body(rfile: Any, length: int | None, decoder: Any) -> bytearray:
    """Read a body framed by ``length`` (None: chunked) from ``rfile`` through ``decoder``
    (:func:`content_decoder`), whose limit also bounds the bytes on the wire. BodyError 400 for a
    body cut short or malformed chunks, 413 past the limit."""
    limit = decoder.limit
    if length is not None:
        left = length
        while left:
            piece = rfile.read1(min(left, _CHUNK))
            if not piece:
                raise BodyError(400, f"body ended after {length - left} of {length} bytes")
            left -= len(piece)
            decoder.feed(piece)
        return decoder.finish()
    wire = 0
    while True:
        line = rfile.readline(1026)
        if not line.endswith(b"\n"):
            raise BodyError(400, "chunk size line too long or body cut short")
        size_text = line.split(b";", 1)[0].strip()
        if not size_text or len(size_text) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
            raise BodyError(400, f"bad chunk size {size_text[:20]!r}")
        size = int(size_text, 16)
        if size == 0:
            break
        wire += size
        if wire > limit:
            raise BodyError(413, f"body over {limit} bytes")
        while size:
            piece = rfile.read1(min(size, _CHUNK))
            if not piece:
                raise BodyError(400, "chunked body cut short")
            size -= len(piece)
            decoder.feed(piece)
        if rfile.readline(3) not in (b"\r\n", b"\n"):
            raise BodyError(400, "chunk not followed by CRLF")
    for _ in range(64):  # trailer fields, ignored
        line = rfile.readline(8194)
        if line in (b"\r\n", b"\n"):
            return decoder.finish()
        if not line.endswith(b"\n"):
            raise BodyError(400, "chunked body trailer too long or cut short")
    raise BodyError(400, "too many trailer fields")


class _Conn:
    """One client connection: its socket, when the current request's headers are due, what the
    waiting room read of them already, and what it is doing (``new``: no byte yet; ``keepalive``:
    between requests; ``headers``: part of the headers in; ``queued``: waiting for a worker;
    ``reading``: a worker reads it; ``working``: a worker answers it)."""

    __slots__ = ("sock", "address", "due", "data", "state", "tls_done")

    def __init__(self, sock: socket.socket, address: Any, due: float):
        self.sock = sock
        self.address = address
        self.due = due
        self.data = bytearray()
        self.state = "new"
        self.tls_done = False


class _DeadlineReader(io.RawIOBase):
    """The connection as a raw stream: first what the waiting room read already (``prefix``),
    then the socket, whose reads fail with TimeoutError once ``deadline`` (a
    :func:`time.monotonic` value; None: none) has passed, however the bytes trickle in. In
    ``probe`` mode a read that would have to wait returns None instead (nothing buffered)."""

    def __init__(self, sock: socket.socket, prefix: bytes = b""):
        self.sock = sock
        self.prefix = prefix
        self.deadline: float | None = None
        self.timed_out = False
        self.probe = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        if self.prefix:
            n = min(len(buffer), len(self.prefix))
            buffer[:n] = self.prefix[:n]
            self.prefix = self.prefix[n:]
            return n
        if self.probe:
            pending = self.sock.pending() if isinstance(self.sock, ssl.SSLSocket) else 0
            if not pending:
                return None
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.timed_out = True
                raise TimeoutError("read deadline passed")
            self.sock.settimeout(left)
        else:
            self.sock.settimeout(None)
        try:
            return self.sock.recv_into(buffer)
        except TimeoutError:
            self.timed_out = True
            raise


class HardenedHandler(BaseHTTPRequestHandler):
    """A request handler for :class:`BoundedHTTPServer`: HTTP/1.1 with keep-alive, the header
    and body deadlines applied to every read, and an early answer (before the body is read)
    followed by a bounded lingering close. Between requests the connection goes back to the
    server's waiting room instead of holding the worker. Subclasses implement ``do_GET`` /
    ``do_POST`` and call :meth:`begin_body`, :meth:`begin_work` and :meth:`send`."""

    protocol_version = "HTTP/1.1"
    server: BoundedHTTPServer
    _linger = False
    #: The request passed :meth:`refusal` already (when it asked ``Expect: 100-continue``).
    checked = False
    #: The connection goes back to the waiting room when the handler returns.
    keep = False

    def setup(self) -> None:
        self.connection = self.request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.conn: _Conn = self.server.conn_of(self.connection)
        self.reader = _DeadlineReader(self.connection, bytes(self.conn.data))
        self.conn.data = bytearray()
        self.rfile: io.BufferedReader = io.BufferedReader(self.reader, _CHUNK)
        self.wfile = socketserver._SocketWriter(self.connection)  # type: ignore[attr-defined]  # stdlib-private, not in typeshed

    def handle(self) -> None:
        srv = self.server
        self.reader.deadline = self.conn.due
        while True:
            self.reader.timed_out = False
            self.checked = False
            self.close_connection = True
            srv.set_state(self.conn, "reading")
            self.handle_one_request()
            if self.reader.timed_out:
                srv.note("requests_timed_out")
            if self.close_connection or srv.draining:
                return
            self.reader.deadline = None
            self.reader.probe = True
            try:
                pipelined = self.rfile.peek(1)  # what the client sent after this request (no wait)
            except OSError:
                return
            finally:
                self.reader.probe = False
            if not pipelined:
                self.keep = True
                return
            self.reader.deadline = time.monotonic() + srv.header_timeout

    def handle_expect_100(self) -> bool:
        """Answer ``Expect: 100-continue`` only when the request will be taken (a refusal is
        sent instead, before the client sends its body)."""
        refusal = self.refusal()
        if refusal is not None:
            self.send(*refusal, early=True)
            return False
        self.checked = True
        return super().handle_expect_100()

    def refusal(self) -> tuple[int, bytes, dict[str, str]] | None:
        """Why the request just parsed would be refused before its body is read:
        ``(status, text, headers)``, or None. Subclasses decide (auth, path, size, load)."""
        return None

    def begin_body(self) -> None:
        """The headers are in: the body must arrive within ``body_timeout`` seconds."""
        self.reader.deadline = time.monotonic() + self.server.body_timeout

    def begin_work(self) -> None:
        """The request is read: no read deadline while it is handled (shutdown waits for it)."""
        self.reader.deadline = None
        self.server.set_state(self.conn, "working")

    def send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "text/plain; charset=utf-8",
        early: bool = False,
    ) -> None:
        """Answer. ``early``: the body was not (all) read, so the connection closes after the
        answer, lingering to discard up to 1 MiB of it (the client then reads the answer instead
        of a connection reset)."""
        self.connection.settimeout(self.server.header_timeout)  # a client that does not read is cut
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if early or self.server.draining:
            self.send_header("Connection", "close")
            self.close_connection = True
            self._linger = early
        self.end_headers()
        self.wfile.write(body)

    def finish(self) -> None:
        super().finish()
        if self._linger:
            self._linger = False
            try:
                self.connection.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + min(2.0, self.server.header_timeout)
                left = _LINGER_BYTES
                while left > 0 and time.monotonic() < deadline:
                    self.connection.settimeout(max(0.01, deadline - time.monotonic()))
                    piece = self.connection.recv(min(left, _CHUNK))
                    if not piece:
                        break
                    left -= len(piece)
            except OSError:
                pass

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("ragmeter serve: " + format, *args)


_BUSY = b"server busy, retry later\n"
_REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
    + str(len(_BUSY)).encode()
    + b"\r\nRetry-After: %d\r\nConnection: close\r\n\r\n"
    + _BUSY
)


def _max_open_files() -> int:
    try:
        import resource

        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 1024


class BoundedHTTPServer(HTTPServer):
    """An HTTP server with ``workers`` threads (see the module docstring).

    One thread accepts connections and keeps them in a *waiting room* (a selector) until their
    request's headers are in (plain HTTP; with TLS, until the first bytes of the handshake):
    connections that send nothing, or their headers a byte at a time, or wait between requests
    cost no thread. At most ``max_connections`` connections are open (capped at half the open
    files the process may have): a new one beyond them closes the longest-waiting idle one (no
    byte of a request yet), or, when none is idle, is answered 503 with ``Retry-After`` (TLS:
    closed) at once. A request ready while every worker is busy waits for one, at most
    ``waiting`` of them; beyond them it is answered 503 too; a request head over 32 KiB is answered 431. ``tls``: an
    :class:`ssl.SSLContext` (the handshake runs on a worker, within the header deadline).
    ``note(key)`` is called for ``connections_refused``, ``connections_evicted``,
    ``requests_timed_out`` and ``requests_invalid`` (431). :meth:`start` starts the threads, :meth:`stop` stops accepting and
    cuts the connections that are not being answered, :meth:`close` ends the workers."""

    request_queue_size = listen_backlog()

    def __init__(
        self,
        address: tuple[str, int],
        handler: type,
        *,
        workers: int,
        waiting: int,
        header_timeout: float,
        body_timeout: float,
        idle_timeout: float,
        max_connections: int = 1000,
        retry_after: int = 1,
        tls: ssl.SSLContext | None = None,
        note: Callable[[str], None] = lambda key: None,
    ):
        if workers < 1 or waiting < 0 or max_connections < 1:
            raise ValueError(
                f"workers and max_connections must be at least 1, waiting at least 0 "
                f"(got {workers}, {max_connections}, {waiting})"
            )
        for name, value in (
            ("header_timeout", header_timeout),
            ("body_timeout", body_timeout),
            ("idle_timeout", idle_timeout),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.workers, self.waiting = workers, waiting
        self.max_connections = max(1, min(max_connections, _max_open_files() // 2))
        self.header_timeout, self.body_timeout, self.idle_timeout = header_timeout, body_timeout, idle_timeout
        self.retry_after = retry_after
        self.tls = tls
        self.note = note
        self.draining = False
        self._conns: dict[socket.socket, _Conn] = {}  # every open connection
        self._room: dict[socket.socket, _Conn] = {}  # those in the waiting room (the selector thread's own)
        self._ready: queue.SimpleQueue = queue.SimpleQueue()  # connections for the workers
        self._dispatched = 0  # connections given to the workers (being served or waiting for one)
        self._back: queue.SimpleQueue = queue.SimpleQueue()  # connections the workers give back
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._loop_thread: threading.Thread | None = None
        self._stopping = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        super().__init__(address, handler)

    # -------------------------------------------------------------- state

    def conn_of(self, sock: socket.socket) -> _Conn:
        """The connection record of a socket."""
        with self._lock:
            return self._conns[sock]

    def set_state(self, conn: _Conn, state: str) -> None:
        """Record what the connection is doing."""
        conn.state = state

    def states(self) -> dict[str, int]:
        """How many open connections are in each state (see :class:`_Conn`)."""
        out: dict[str, int] = {}
        with self._lock:
            for conn in self._conns.values():
                out[conn.state] = out.get(conn.state, 0) + 1
        return out

    def busy(self) -> int:
        """Connections whose request is being answered."""
        return self.states().get("working", 0)

    # -------------------------------------------------------------- the waiting room

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # the pipe is full: the loop wakes anyway
            pass

    def _loop(self) -> None:
        from ragmeter.guard import never_raise

        sel = selectors.DefaultSelector()
        self.socket.setblocking(False)
        sel.register(self.socket, selectors.EVENT_READ, "listen")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        next_expiry = 0.0
        try:
            while not self._stopping:
                with never_raise("serve: the connections' waiting room"):
                    now = time.monotonic()
                    soonest = min((c.due for c in self._room.values()), default=now + 0.25)
                    for key, _ in sel.select(max(0.0, min(0.25, soonest - now))):
                        if key.data == "listen":
                            self._accept(sel)
                        elif key.data == "wake":
                            self._welcome_back(sel)
                        else:
                            self._readable(sel, key.data)
                    now = time.monotonic()
                    if now >= next_expiry:  # a sweep at most every 50 ms
                        self._expire(sel, now)
                        next_expiry = now + 0.05
        finally:
            for conn in list(self._room.values()):
                self._drop(sel, conn)
            sel.close()

    def _accept(self, sel: selectors.BaseSelector) -> None:
        for _ in range(256):  # then let the others have a turn
            try:
                sock, address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. out of file descriptors: the backlog keeps the rest
                log.debug("ragmeter serve: accept failed", exc_info=True)
                return
            with self._lock:
                full = len(self._conns) >= self.max_connections
            if full:
                idle = next((c for c in self._room.values() if c.state in ("new", "keepalive")), None)
                if idle is None:
                    self.note("connections_refused")
                    self._refuse(sock)
                    continue
                self.note("connections_evicted")  # the longest-waiting idle one makes room
                self._drop(sel, idle)
            with self._lock:
                conn = self._conns[sock] = _Conn(sock, address, time.monotonic() + self.header_timeout)
            sock.setblocking(False)
            self._room[sock] = conn
            sel.register(sock, selectors.EVENT_READ, conn)

    def _readable(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        if self.tls is not None and not conn.tls_done:
            self._dispatch(sel, conn)  # the handshake is the worker's
            return
        try:
            piece = conn.sock.recv(_HEAD + 1 - len(conn.data))
            while piece and isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
                piece += conn.sock.recv(conn.sock.pending())  # decrypted bytes the selector cannot see
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
            return
        except OSError:
            self._drop(sel, conn)
            return
        if not piece:  # the client closed
            self._drop(sel, conn)
            return
        if not conn.data and conn.state == "keepalive":
            conn.due = time.monotonic() + self.header_timeout  # a request begins
        conn.data += piece
        conn.state = "headers"
        tail = bytes(conn.data[-len(piece) - 3 :])
        if b"\r\n\r\n" in tail or b"\n\n" in tail:
            self._dispatch(sel, conn)
        elif len(conn.data) > _HEAD:
            self.note("requests_invalid")
            try:
                conn.sock.send(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
            except OSError:
                pass
            self._drop(sel, conn)

    def _dispatch(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        sel.unregister(conn.sock)
        del self._room[conn.sock]
        with self._lock:
            full = self._dispatched >= self.workers + self.waiting
            if not full:
                self._dispatched += 1
        if full:
            self.note("connections_refused")
            self._forget(conn)
            self._refuse(conn.sock)
            return
        conn.state = "queued"
        self._ready.put(conn)

    def _welcome_back(self, sel: selectors.BaseSelector) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        while True:
            try:
                conn = self._back.get_nowait()
            except queue.Empty:
                return
            if self.draining:
                self._forget(conn)
                self.shutdown_request(conn.sock)
                continue
            conn.state, conn.data, conn.due = "keepalive", bytearray(), time.monotonic() + self.idle_timeout
            conn.sock.setblocking(False)
            self._room[conn.sock] = conn
            sel.register(conn.sock, selectors.EVENT_READ, conn)

    def _expire(self, sel: selectors.BaseSelector, now: float) -> None:
        for conn in [c for c in self._room.values() if c.due <= now]:
            if conn.state != "keepalive":  # an idle kept-alive connection just ends; the others were late
                self.note("requests_timed_out")
            self._drop(sel, conn)

    def _drop(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        try:
            sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        self._room.pop(conn.sock, None)
        self._forget(conn)
        self.shutdown_request(conn.sock)

    def _forget(self, conn: _Conn) -> None:
        with self._lock:
            self._conns.pop(conn.sock, None)

    def _refuse(self, sock: socket.socket) -> None:
        try:
            if self.tls is None:
                sock.setblocking(False)
                try:  # drop the request already sent (a close with unread data would reset the answer)
                    sock.recv(_CHUNK)
                except OSError:
                    pass
                sock.send(_REFUSED % self.retry_after)
        except OSError:
            pass
        self.shutdown_request(sock)

    # -------------------------------------------------------------- the workers

    def _work(self) -> None:
        while True:
            conn = self._ready.get()
            if conn is None:
                return
            keep = False
            try:
                conn.sock.setblocking(True)
                if self.draining:
                    self._refuse(conn.sock)
                    continue
                if self.tls is not None and not conn.tls_done and not self._handshake(conn):
                    continue
                handler = self.RequestHandlerClass(conn.sock, conn.address, self)  # type: ignore[arg-type]
                keep = getattr(handler, "keep", False) and not self.draining
            except Exception:
                log.debug("ragmeter serve: connection from %s failed", conn.address, exc_info=True)
            finally:
                with self._lock:
                    self._dispatched -= 1
                if keep:
                    self._back.put(conn)
                    self._wake()
                else:
                    self._forget(conn)
                    self.shutdown_request(conn.sock)

    def _handshake(self, conn: _Conn) -> bool:
        conn.state = "handshake"
        try:
            tls = self.tls.wrap_socket(conn.sock, server_side=True, do_handshake_on_connect=False)  # type: ignore[union-attr]
        except (OSError, ValueError):
            return False
        with self._lock:  # the TLS socket stands for the connection from now on
            self._conns.pop(conn.sock, None)
            self._conns[tls] = conn
        conn.sock = tls
        tls.setblocking(False)
        try:
            while True:
                left = conn.due - time.monotonic()
                if left <= 0:
                    self.note("requests_timed_out")
                    raise TimeoutError("TLS handshake deadline passed")
                try:
                    tls.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    _wait(tls, select.POLLIN, left)
                except ssl.SSLWantWriteError:
                    _wait(tls, select.POLLOUT, left)
        except (OSError, ValueError) as exc:
            log.debug("ragmeter serve: TLS handshake failed: %s", exc)
            return False
        tls.setblocking(True)
        conn.tls_done = True
        return True

    # -------------------------------------------------------------- lifecycle

    def start(self, poll_interval: float = 0.05) -> threading.Thread:
        """Start the workers and the accepting thread (returned)."""
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"ragmeter-serve-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        self._loop_thread = threading.Thread(target=self._loop, name="ragmeter-serve", daemon=True)
        self._loop_thread.start()
        return self._loop_thread

    def stop(self) -> None:
        """Stop accepting (the listening socket is closed: new connections are refused by the
        system), close the waiting room's connections, and cut those still sending their body
        (their handler answers 503)."""
        self.draining = True
        self._stopping = True
        self._wake()
        if self._loop_thread is not None:
            self._loop_thread.join(5)
        self.socket.close()
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            if conn.state == "reading":  # stop its reads only, so the handler can still answer 503
                _cut(conn.sock, socket.SHUT_RD)

    def close(self, timeout: float) -> None:
        """Cut what is left and stop the workers (waiting at most ``timeout`` seconds for them)."""
        with self._lock:
            conns = list(self._conns.values())
        for conn in conns:
            _cut(conn.sock, socket.SHUT_RDWR)
        for _ in self._threads:
            self._ready.put(None)
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._wake_r.close()
        self._wake_w.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("ragmeter serve: request from %s failed", client_address, exc_info=True)


def _wait(sock: socket.socket, event: int, timeout: float) -> None:
    """Wait until ``sock`` is ready for ``event`` (poll: any descriptor number) or ``timeout``."""
    poller = select.poll()
    poller.register(sock, event)
    poller.poll(max(1, int(timeout * 1000)))


def _cut(sock: socket.socket, how: int) -> None:
    """Shut a connection down from another thread: its blocked reads return at once. The plain
    socket call, also for a TLS socket (whose own ``shutdown`` drops its TLS state under the
    reading thread)."""
    try:
        socket.socket.shutdown(sock, how)
    except OSError:
        pass
