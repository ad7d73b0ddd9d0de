"""Local fake LLM servers for tests: the real SDKs talk HTTP to 127.0.0.1, nothing is patched.

One :class:`FakeLLMServer` speaks both wire protocols:

* OpenAI: ``POST /v1/chat/completions`` (``response_format`` json_schema / json_object, or forced
  ``tools``; ``usage``, ``finish_reason``) and ``POST /v1/embeddings``;
* Anthropic: ``POST /v1/messages`` (``tool_use`` content blocks, ``usage``, ``stop_reason``).

Point an SDK at it: ``OpenAIJudge(base_url=server.openai_url, api_key="test")``,
``AnthropicJudge(base_url=server.url, api_key="test")``.

Replies are scripted, protocol-neutral: queue them with :meth:`FakeLLMServer.push`
(:func:`answer`, :func:`text`, :func:`truncated`, :func:`error`, :func:`hang`, :func:`trickle`,
:func:`html`, :func:`echo_key`), or give a
``responder(request) -> reply`` that reads the task and its inputs from the request
(:attr:`Recorded.task`, :attr:`Recorded.inputs`). When the queue is empty the responder answers;
the default responder, :func:`oracle`, gives a valid answer to every ragmeter task.
Every request is recorded (:attr:`FakeLLMServer.requests`), with the most requests in flight at
once (:attr:`FakeLLMServer.max_concurrent`).

Usage::

    with FakeLLMServer() as server:
        server.push(text("not json"), answer({"score": 1, "reason": "ok"}))
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False)
        ...
        assert len(server.chat_requests) == 2
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

__all__ = [
    "FakeLLMServer",
    "Answer",
    "Fail",
    "Raw",
    "Recorded",
    "answer",
    "text",
    "truncated",
    "error",
    "hang",
    "trickle",
    "html",
    "echo_key",
    "oracle",
    "fake_embedding",
]


# --------------------------------------------------------------------------- scripted replies


@dataclass
class Answer:
    """A model answer. ``output``: the structured answer (OpenAI: JSON message content or tool
    call arguments; Anthropic: ``tool_use`` input); ``text``: raw text instead (OpenAI content,
    Anthropic text block); ``finish``: ``"stop"`` or ``"length"`` (Anthropic ``max_tokens``);
    ``delay``: seconds the server waits before answering; ``trickle``: seconds between the bytes
    of the body (a slow gateway: each byte resets a read timeout, only a deadline stops it)."""

    output: Any = None
    text: str | None = None
    finish: str = "stop"
    prompt_tokens: int = 100
    completion_tokens: int = 20
    delay: float = 0.0
    trickle: float = 0.0


@dataclass
class Fail:
    """An HTTP error reply (``status``, ``message``, extra ``headers``), after ``delay`` seconds.
    ``echo``: the message ends with the credential the request sent (a gateway that echoes it)."""

    status: int = 500
    message: str = "internal error"
    headers: dict = field(default_factory=dict)
    delay: float = 0.0
    echo: bool = False


@dataclass
class Raw:
    """A reply sent as given, not in either protocol: ``status``, ``body``, ``content_type``
    (e.g. a proxy's HTML page)."""

    body: str
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    delay: float = 0.0


def answer(output: Any, **kw: Any) -> Answer:
    """A structured answer."""
    return Answer(output=output, **kw)


def text(raw: str, **kw: Any) -> Answer:
    """An answer given as raw text (e.g. malformed JSON)."""
    return Answer(text=raw, **kw)


def truncated(partial: str = '{"claims": [{"unit": 0, "te', **kw: Any) -> Answer:
    """An answer cut off at max_tokens (finish_reason ``length`` / stop_reason ``max_tokens``)."""
    return Answer(text=partial, finish="length", **kw)


def error(status: int = 500, *, retry_after: float | None = None, message: str | None = None) -> Fail:
    """An HTTP error; ``retry_after`` sets the ``Retry-After`` header (seconds)."""
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Fail(status, message or {429: "rate limited", 529: "overloaded"}.get(status, "server error"), headers)


def trickle(every: float, then: Any = None) -> Answer:
    """Send the answer (``then``, default ``{}``) one byte every ``every`` seconds."""
    a = then if isinstance(then, Answer) else Answer(output=then if then is not None else {})
    a.trickle = every
    return a


def html(
    body: str = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>",
    status: int = 200,
) -> Raw:
    """A non-JSON page (by default a proxy's HTML error page) with ``status`` (default 200)."""
    return Raw(body, status)


def echo_key(status: int = 401, message: str = "invalid credentials") -> Fail:
    """An HTTP error whose body repeats the API key the request sent (Authorization / x-api-key)."""
    return Fail(status, message, echo=True)


def hang(seconds: float, then: Any = None) -> Answer:
    """Answer only after ``seconds`` (to trip a client timeout); ``then`` is the late answer."""
    if isinstance(then, Answer):
        then.delay = seconds
        return then
    return Answer(output=then if then is not None else {}, delay=seconds)


# --------------------------------------------------------------------------- recorded requests

_TASK_IN_PROMPT = re.compile(r"the '([A-Za-z0-9_-]+)' answer")


@dataclass
class Recorded:
    """One request the server received."""

    path: str
    body: dict
    headers: dict
    started: float
    finished: float = 0.0
    sent_bytes: int = 0  #: bytes of the reply's body the client took (a trickled reply cut short: fewer)

    @property
    def protocol(self) -> str:
        """``"openai"``, ``"anthropic"`` or ``"embeddings"``."""
        if self.path.endswith("/embeddings"):
            return "embeddings"
        return "anthropic" if self.path.endswith("/messages") else "openai"

    @property
    def messages(self) -> list[dict]:
        """The request's messages (as sent)."""
        return list(self.body.get("messages") or [])

    @property
    def system(self) -> str:
        """The system prompt (Anthropic ``system``, or OpenAI's system message)."""
        if self.protocol == "anthropic":
            s = self.body.get("system") or ""
            return s if isinstance(s, str) else " ".join(b.get("text", "") for b in s)
        return "\n".join(
            _content_text(m.get("content")) for m in self.messages if m.get("role") in ("system", "developer")
        )

    @property
    def task(self) -> str | None:
        """The ragmeter task asked for (json_schema name, forced tool name, or named in the prompt)."""
        b = self.body
        rf = b.get("response_format") or {}
        if rf.get("type") == "json_schema":
            return (rf.get("json_schema") or {}).get("name")
        choice = b.get("tool_choice")
        if isinstance(choice, dict):
            if choice.get("name"):
                return choice["name"]
            fn = choice.get("function") or {}
            if fn.get("name"):
                return fn["name"]
        tools = b.get("tools") or []
        if len(tools) == 1:
            t = tools[0]
            return t.get("name") or (t.get("function") or {}).get("name")
        m = _TASK_IN_PROMPT.search(self.system + " " + " ".join(_content_text(x.get("content")) for x in self.messages))
        return m.group(1) if m else None

    @property
    def user_text(self) -> str:
        """The text of the first user message (the rendered task input)."""
        for m in self.messages:
            if m.get("role") == "user":
                return _content_text(m.get("content"))
        return ""

    @property
    def inputs(self) -> dict:
        """The first user message parsed as JSON (the task's rendered inputs), or {}."""
        s = self.user_text
        first, last = s.find("{"), s.rfind("}")
        try:
            return json.loads(s[first : last + 1]) if 0 <= first < last else {}
        except json.JSONDecodeError:
            return {}

    @property
    def max_tokens(self) -> int | None:
        """``max_tokens`` / ``max_completion_tokens`` of the request."""
        return self.body.get("max_completion_tokens") or self.body.get("max_tokens")

    @property
    def last_user_text(self) -> str:
        """Text of the last user turn (where a retry shows the error), tool results included."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return _content_text(m.get("content"))
        return ""


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, dict):
            if "text" in block:
                parts.append(str(block["text"]))
            elif block.get("type") == "tool_result":
                parts.append(_content_text(block.get("content")))
    return "\n".join(parts)


# --------------------------------------------------------------------------- the oracle


def oracle(req: Recorded) -> Answer:
    """A valid answer to any ragmeter task, computed from the task's rendered inputs."""
    task, data = req.task, req.inputs
    if task == "extract_claims":
        return answer({"claims": [{"unit": u["index"], "text": u["text"]} for u in data.get("answer_units", [])]})
    if task == "verify_claims":
        chunks = data.get("chunks", [])
        return answer(
            {
                "verdicts": [
                    {
                        "claim": c["index"],
                        "verdict": "supported" if chunks else "not_found",
                        "evidence": [{"chunk": 0, "quote": chunks[0]["text"][:30]}] if chunks else [],
                        "reason": "stated in chunk 0",
                    }
                    for c in data.get("claims", [])
                ]
            }
        )
    if task in ("rate_chunks", "attribute_statements", "review_context"):  # review_context: both in one answer
        out: dict = {}
        if task != "attribute_statements":
            out.update(
                chunks=[
                    {"chunk": c["index"], "relevant": [0] if c["statements"] else [], "useful": True}
                    for c in data.get("chunks", [])
                ],
                answerable=5,
            )
        if task != "rate_chunks":
            has = bool(data.get("chunks"))
            out.update(
                statements=[
                    {"statement": s["index"], "attributed": has, "chunks": [0] if has else []}
                    for s in data.get("reference_statements", [])
                ],
                entities=[],
            )
        return answer(out)
    if task == "generate_questions":
        q = data.get("question", "q")
        return answer(
            {"questions": [q] * int(data.get("n", 1)), "noncommittal": False, "parts": [{"text": q, "covered": True}]}
        )
    if task == "compare_claims":
        return answer(
            {
                "claims": [{"claim": c["index"], "in_reference": True} for c in data.get("answer_claims", [])],
                "statements": [
                    {"statement": s["index"], "in_answer": True} for s in data.get("reference_statements", [])
                ],
            }
        )
    if task == "rate_answer":
        return answer({"score": 1.0, "reason": "directly answers the question"})
    if task == "judge_criteria":  # every criterion met well: 4 of 5
        return answer(
            {
                "results": [
                    {
                        "criterion": c["index"],
                        "applicable": True,
                        "score": 4,
                        "reason": f"the sample meets '{c['name']}' well",
                    }
                    for c in data.get("criteria", [])
                ]
            }
        )
    if task == "write_questions":  # n distinct questions, each on one chunk (none or two where the kind says so)
        chunks, kind = data.get("chunks", []), data.get("kind", "simple")
        avoid = {q.lower() for q in data.get("already_asked", [])}
        items, j = [], 0
        while len(items) < int(data.get("n", 1)) and chunks:
            chunk = chunks[j % len(chunks)]
            j += 1
            question = f"What does source {j} say about {' '.join(chunk['text'].split()[:6])}?"
            if question.lower() in avoid:
                continue
            cited = (
                []
                if kind in ("unanswerable", "out_of_scope")
                else [c["index"] for c in chunks[:2]]
                if kind in ("multi_context", "multi_hop")
                else [chunk["index"]]
            )
            items.append({"question": question, "answer": chunk["text"], "chunks": cited})
        return answer({"items": items})
    return Fail(400, f"fake server: unknown task {task!r}")


def fake_embedding(text: str, dim: int = 64) -> list[float]:
    """A deterministic bag-of-words vector (texts sharing words are similar), unit length."""
    v = np.zeros(dim)
    for word in re.findall(r"\w+", text.lower()):
        h = int(hashlib.md5(word.encode()).hexdigest(), 16)
        v[h % dim] += 1.0 if (h >> 64) % 2 else -1.0
    n = np.linalg.norm(v)
    return (v / n if n else v).tolist()


# --------------------------------------------------------------------------- wire formats


def _openai_reply(req: Recorded, a: Answer) -> dict:
    body = req.body
    content = a.text if a.text is not None else json.dumps(a.output)
    message: dict = {"role": "assistant", "content": content, "refusal": None}
    finish = "length" if a.finish == "length" else "stop"
    forced = body.get("tools") and body.get("tool_choice") not in (None, "none", "auto") and a.text is None
    if forced:
        name = req.task or "answer"
        message = {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_" + uuid.uuid4().hex[:12],
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(a.output)},
                }
            ],
        }
        finish = "length" if a.finish == "length" else "tool_calls"
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": a.prompt_tokens,
            "completion_tokens": a.completion_tokens,
            "total_tokens": a.prompt_tokens + a.completion_tokens,
        },
    }


def _anthropic_reply(req: Recorded, a: Answer) -> dict:
    if a.text is not None:
        content = [{"type": "text", "text": a.text}]
        stop = "max_tokens" if a.finish == "length" else "end_turn"
    else:
        content = [
            {
                "type": "tool_use",
                "id": "toolu_" + uuid.uuid4().hex[:12],
                "name": req.task or "answer",
                "input": a.output,
            }
        ]
        stop = "max_tokens" if a.finish == "length" else "tool_use"
    return {
        "id": "msg_" + uuid.uuid4().hex[:12],
        "type": "message",
        "role": "assistant",
        "model": req.body.get("model", "fake"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": a.prompt_tokens, "output_tokens": a.completion_tokens},
    }


def _error_body(protocol: str, f: Fail, headers: dict | None = None) -> dict:
    message = f.message
    if f.echo and headers:
        sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        message += f"; you sent {sent}"
    if protocol == "anthropic":
        kind = {429: "rate_limit_error", 529: "overloaded_error", 400: "invalid_request_error"}.get(
            f.status, "api_error"
        )
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {
        "error": {
            "message": message,
            "type": "server_error" if f.status >= 500 else "invalid_request_error",
            "code": None,
            "param": None,
        }
    }


# --------------------------------------------------------------------------- the server


class FakeLLMServer:
    """A threaded HTTP server on 127.0.0.1 speaking the OpenAI and Anthropic protocols (see module doc).

    ``responder(request) -> Answer | Fail | dict`` answers when the queue is empty (a dict is a
    structured answer); ``embed_dim`` sets the fake embedding size; ``latency`` adds seconds to
    every reply (embeddings included), like a remote provider.
    """

    def __init__(
        self, responder: Callable[[Recorded], Any] | None = None, *, embed_dim: int = 64, latency: float = 0.0
    ):
        self.responder = responder or oracle
        self.embed_dim = embed_dim
        self.latency = latency  # seconds every request waits before its reply (a remote provider)
        self.requests: list[Recorded] = []
        self.max_concurrent = 0
        self._in_flight = 0
        self._queue: collections.deque = collections.deque()
        self._embed_queue: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------- control
    def start(self) -> FakeLLMServer:
        """Start serving on a free port."""
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (requests still sleeping are abandoned)."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (Anthropic SDK base_url)."""
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (OpenAI SDK base_url)."""
        return self.url + "/v1"

    def push(self, *replies: Any) -> FakeLLMServer:
        """Queue replies for the next chat / messages requests, in order."""
        with self._lock:
            self._queue.extend(replies)
        return self

    def push_embedding(self, *replies: Any) -> FakeLLMServer:
        """Queue replies (usually :class:`Fail`) for the next embedding requests."""
        with self._lock:
            self._embed_queue.extend(replies)
        return self

    def reset(self) -> None:
        """Forget recorded requests, queued replies and the concurrency peak."""
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self._embed_queue.clear()
            self.max_concurrent = 0

    @property
    def chat_requests(self) -> list[Recorded]:
        """Recorded chat-completions and messages requests."""
        return [r for r in self.requests if r.protocol != "embeddings"]

    @property
    def embedding_requests(self) -> list[Recorded]:
        """Recorded embeddings requests."""
        return [r for r in self.requests if r.protocol == "embeddings"]

    # -------------------------------------------------------------- handling
    def _next(self, req: Recorded) -> Any:
        with self._lock:
            queue = self._embed_queue if req.protocol == "embeddings" else self._queue
            if queue:
                return queue.popleft()
        if req.protocol == "embeddings":
            return None
        return self.responder(req)

    def _handle(self, req: Recorded) -> tuple[int, Any, dict, float]:
        """``(status, payload, headers, trickle)`` for ``req``: payload is a JSON-able dict or a :class:`Raw`."""
        body, headers = req.body, req.headers
        with self._lock:
            self.requests.append(req)
            self._in_flight += 1
            self.max_concurrent = max(self.max_concurrent, self._in_flight)
        try:
            reply = self._next(req)
            if isinstance(reply, dict):
                reply = Answer(output=reply)
            delay = (getattr(reply, "delay", 0.0) or 0.0) + self.latency
            if delay:
                time.sleep(delay)
            if isinstance(reply, Fail):
                return reply.status, _error_body(req.protocol, reply, headers), reply.headers, 0.0
            if isinstance(reply, Raw):
                return reply.status, reply, {}, 0.0
            if req.protocol == "embeddings":
                inputs = body.get("input")
                inputs = [inputs] if isinstance(inputs, str) else list(inputs or [])
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_embedding(str(t), self.embed_dim)}
                    for i, t in enumerate(inputs)
                ]
                tokens = sum(len(str(t).split()) for t in inputs)
                return (
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body.get("model", "fake"),
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    },
                    {},
                    0.0,
                )
            if not isinstance(reply, Answer):
                return 500, _error_body(req.protocol, Fail(500, f"fake server: bad scripted reply {reply!r}")), {}, 0.0
            make = _anthropic_reply if req.protocol == "anthropic" else _openai_reply
            return 200, make(req, reply), {}, reply.trickle
        finally:
            with self._lock:
                self._in_flight -= 1
                req.finished = time.monotonic()


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many clients connecting at once (the throughput benchmark) are not refused

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (e.g. at its deadline, mid-trickle) is normal here: stay quiet."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave together: no delayed-ACK stalls
    wbufsize = -1
    server_owner: FakeLLMServer

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = self.path.split("?", 1)[0]
        if not (path.endswith("/chat/completions") or path.endswith("/messages") or path.endswith("/embeddings")):
            self._send(404, {"error": {"message": f"no route {path}"}}, {})
            return
        req = Recorded(path, body, {k.lower(): v for k, v in self.headers.items()}, time.monotonic())
        status, payload, headers, every = self.server_owner._handle(req)
        self._send(status, payload, headers, every, req)

    def _send(self, status: int, payload: Any, headers: dict, every: float = 0.0, req: Recorded | None = None) -> None:
        if isinstance(payload, Raw):
            data, kind = payload.body.encode(), payload.content_type
        else:
            data, kind = json.dumps(payload).encode(), "application/json"
        try:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if every:
                self.wfile.flush()
                for i in range(len(data)):  # one byte at a time until done or the client hangs up
                    time.sleep(every)
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    if req is not None:
                        req.sent_bytes = i + 1
            else:
                self.wfile.write(data)
                if req is not None:
                    req.sent_bytes = len(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True


@pytest.fixture
def llm_server():
    """The tests' one LLM server fixture: a started :class:`FakeLLMServer` for one test (the
    :func:`oracle` answers every task unless replies are pushed), stopped after it."""
    with FakeLLMServer() as server:
        yield server
