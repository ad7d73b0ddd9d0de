"""A local server on 127.0.0.1 that speaks the part of Langfuse's public API its Python client
calls to create scores (no tests here):

* ``POST /api/public/scores``: a JSON list of scores (the client's 3.x+ score batches), answered
  202 ``{"message": "Accepted"}``;
* ``POST /api/public/ingestion``: ``{"batch": [{"id", "type": "score-create", "timestamp",
  "body": {...}}], "metadata": {...}}`` (the 2.x client), answered 207 with ``successes``.

Authentication is HTTP Basic with the project's public and secret keys (401 otherwise). Scores
are upserted by their ``id``, as Langfuse does, into :attr:`LangfuseServer.scores`; every
request is recorded in :attr:`LangfuseServer.requests`. ``fail_first=N`` stores the scores of
the first N score requests but answers them 500, as when an answer is lost: the client sends
them again."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PUBLIC, SECRET = "pk-lf-test", "sk-lf-test"


class LangfuseServer(ThreadingHTTPServer):
    """See the module docstring. ``scores``: id -> the last score body received with that id;
    ``requests``: ``(method, path, json body or None)``; ``received``: score bodies in arrival
    order (retries included)."""

    def __init__(self, public_key: str = PUBLIC, secret_key: str = SECRET, fail_first: int = 0):
        self.scores: dict[str, dict] = {}
        self.received: list[dict] = []
        self.requests: list[tuple[str, str, Any]] = []
        self.fail_first = fail_first
        self._lock = threading.Lock()
        auth = "Basic " + base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: Any) -> None:
                out = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_POST(self):  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with server._lock:
                    server.requests.append(("POST", self.path, body))
                    if self.headers.get("Authorization") != auth:
                        return self._send(401, {"message": "Invalid credentials"})
                    path = self.path.split("?")[0]
                    if path not in ("/api/public/scores", "/api/public/ingestion"):
                        return self._send(404, {"message": "not found"})
                    if path == "/api/public/scores":
                        items = body if isinstance(body, list) else [body]
                    else:
                        items = [
                            ev["body"] for ev in (body or {}).get("batch") or [] if ev.get("type") == "score-create"
                        ]
                    for score in items:
                        server._upsert(score)
                    if server.fail_first > 0:  # stored, but the answer says otherwise: the client retries
                        server.fail_first -= 1
                        return self._send(500, {"message": "try again"})
                    if path == "/api/public/scores":
                        return self._send(202, {"message": "Accepted"})
                    ok = [{"id": ev.get("id"), "status": 201} for ev in (body or {}).get("batch") or []]
                    return self._send(207, {"successes": ok, "errors": []})

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.daemon_threads = True
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def _upsert(self, score: dict) -> None:
        self.received.append(score)
        self.scores[score["id"]] = score

    @property
    def url(self) -> str:
        """The server's base URL (what the client's ``host`` / ``base_url`` takes)."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self.shutdown()
        self.server_close()
