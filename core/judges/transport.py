"""The one interface between an LLM judge and its model (cf. httpx transports).

A backend is a :class:`Transport`: it turns a :class:`ChatRequest` (system prompt, turns, the
task's JSON schema, ``max_tokens``) into one request to its model and the answer into a
:class:`Reply`. Real backends (OpenAI, Anthropic, LangChain, LlamaIndex) and test or custom ones
(:class:`CallableTransport`) sit behind the same interface; retries, limits, cache and
validation live around it, in :class:`~ragmeter.judges.llm.LLMJudge`. Also here: reading a JSON
answer written as text (:func:`parse_json_answer`), asking for one (:func:`schema_instructions`),
the error for a success status whose body is not JSON (:func:`non_json_reply`), and the request
path of the OpenAI / Anthropic backends (:class:`SdkRoute` on the SDK clients that
:class:`SdkClients` makes for each event loop).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ragmeter.judges.retry import TransientError
from ragmeter.judges.tasks import InvalidOutput
from ragmeter.redact import redact

__all__ = ["Turn", "ChatRequest", "Reply", "Transport", "CallableTransport", "parse_json_answer",
           "schema_instructions", "non_json_reply", "key_secrets", "SdkRoute", "Routes", "SdkClients"]


@dataclass
class Turn:
    """One turn of the conversation with the judge.

    ``role`` is ``"user"`` or ``"assistant"``. An assistant turn that came from a backend keeps
    the structured answer (``data``) and the backend's id for it (``call_id``, e.g. an Anthropic
    ``tool_use`` id) so the transport can replay it natively (tool call + tool result).
    """

    role: str
    text: str
    data: Any = None
    call_id: str | None = None


@dataclass
class ChatRequest:
    """What a transport sends: ``system`` prompt, ``turns`` (user first, alternating), the task's
    answer ``schema`` (named ``task``), ``max_tokens`` (None: the backend's own setting),
    ``temperature`` (None: the backend's default) and a per-request ``timeout`` in seconds."""

    task: str
    system: str
    turns: list[Turn]
    schema: dict
    max_tokens: int | None = None
    temperature: float | None = 0.0
    timeout: float | None = None

    def prompt_chars(self) -> int:
        """Characters of prompt text (for token estimates)."""
        return len(self.system) + sum(len(t.text) for t in self.turns)


_MISSING = object()


@dataclass
class Reply:
    """A transport's answer to one request.

    ``text``: the answer as the model wrote it; ``data``: the parsed answer when the backend
    already parsed it (tool input, structured output), else left unset and ``text`` is parsed as
    JSON; ``error``: a backend-side parse failure, shown to the judge when asking again;
    ``truncated``: the answer was cut off at ``max_tokens`` (whose value, when the backend knows
    it, is ``max_tokens``); ``turn``: how to replay this answer as an assistant turn;
    ``note``: passed on to the TaskResult.
    """

    text: str = ""
    data: Any = _MISSING
    truncated: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    turn: Turn | None = None
    max_tokens: int | None = None
    note: str = ""

    @property
    def has_data(self) -> bool:
        """True when the backend parsed the answer (``data`` is set)."""
        return self.data is not _MISSING

    def assistant_turn(self) -> Turn:
        """The assistant turn that replays this answer."""
        if self.turn is not None:
            return self.turn
        return Turn("assistant", self.text or "(no answer)", data=self.data if self.has_data else None)


class Transport:
    """The one interface a backend implements (cf. httpx transports): ``send`` one request.

    ``backend`` and ``model`` name the judge (``"openai:gpt-4o-mini"``); :meth:`cache_params`
    returns whatever else determines the answer (endpoint, structured-output mode). ``send``
    raises the SDK's exceptions unchanged (or :class:`~ragmeter.judges.retry.TransientError`):
    :func:`~ragmeter.judges.retry.classify_error` decides what is retried. Transports hold no
    retry, cache or rate-limit logic. ``secrets`` (e.g. the API key) are redacted from every
    error text; :meth:`check` says, without a request, whether the transport can send at all.
    """

    backend: str = "transport"
    model: str = "unknown"
    #: the ``max_tokens`` a judge starts with (None: leave the backend's own setting)
    default_max_tokens: int | None = 4096
    #: strings never shown in an error or a log line (the API key)
    secrets: tuple[str, ...] = ()

    def check(self) -> None:
        """Raise ValueError naming what is missing when this transport cannot send (no request is made)."""

    async def send(self, request: ChatRequest) -> Reply:  # pragma: no cover - interface
        """Send ``request`` and return the model's reply."""
        raise NotImplementedError

    def cache_params(self) -> dict:
        """What, besides backend and model, determines the answer (part of the cache key)."""
        return {}

    async def aclose(self) -> None:
        """Release clients (optional)."""


class CallableTransport(Transport):
    """A transport answered by a Python function ``fn(request) -> Reply | dict | str`` (sync or async).

    For tests and custom backends (like ``httpx.MockTransport``): a dict is the structured
    answer, a str the raw text. ``requests`` records every request sent.
    """

    def __init__(self, fn: Callable[[ChatRequest], Any], *, backend: str = "callable", model: str = "fn"):
        self.fn = fn
        self.backend = backend
        self.model = model
        self.requests: list[ChatRequest] = []

    async def send(self, request: ChatRequest) -> Reply:
        """Record the request and answer it with the function."""
        self.requests.append(request)
        out = self.fn(request)
        if asyncio.iscoroutine(out):
            out = await out
        if isinstance(out, Reply):
            return out
        if isinstance(out, str):
            return Reply(text=out)
        return Reply(text=json.dumps(out), data=out)


# --------------------------------------------------------------------------- parsing helpers

_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(.*?)\n?\s*```\s*$", re.S)


def parse_json_answer(text: str) -> Any:
    """Parse a JSON answer written as text: plain, in a ```json fence, or surrounded by prose
    (the outermost ``{...}`` is taken). Raises :class:`InvalidOutput` with the parser's message."""
    if text is None or not str(text).strip():
        raise InvalidOutput("the answer was empty; answer with a JSON object")
    s = str(text).strip()
    m = _FENCE.match(s)
    if m:
        s = m.group(1).strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError as err:
        first, last = s.find("{"), s.rfind("}")
        if 0 <= first < last:
            try:
                return json.loads(s[first:last + 1])
            except json.JSONDecodeError:
                pass
        raise InvalidOutput(f"the answer is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None


def schema_instructions(name: str, schema: dict) -> str:
    """Text that asks for JSON matching ``schema`` (for backends that cannot enforce a schema)."""
    return (f"Answer with a single JSON object (the '{name}' answer), no prose and no code fence, "
            f"matching this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}")



def non_json_reply(body: Any, secrets: Iterable[str] = ()) -> TransientError:
    """The (transient) error for a success status whose body is not the JSON answer, e.g. a
    proxy's HTML error page: it names the problem and shows the body's first 200 characters,
    redacted."""
    head = redact(str(body)[:1000], secrets)[:200]
    return TransientError(f"the server answered HTML/non-JSON with status 200: {head}")


def key_secrets(api_key: str | None) -> tuple[str, ...]:
    """The API key as a secret to redact from errors; none for a placeholder (shorter than 8
    characters, like ``ollama``, or ``not-needed``), which would only blank out ordinary words."""
    return (api_key,) if api_key and len(api_key) >= 8 and api_key != "not-needed" else ()


@functools.lru_cache(maxsize=None)
def _post_takes_content(client_type: type) -> bool:
    return "content" in inspect.signature(client_type.post).parameters


def _httpx_of(client_type: type) -> Any:
    """The httpx module (``httpx``, or ``httpx2`` for recent SDKs) of an httpx client class."""
    for cls in client_type.__mro__:
        if cls.__name__ == "AsyncClient":
            return sys.modules[cls.__module__.partition(".")[0]]
    raise TypeError(f"not an httpx AsyncClient: {client_type.__name__}")


#: request headers the template does not keep: set per request by httpx (length, cookies)
_PER_REQUEST = (b"content-length", b"cookie")


@dataclass
class _Sent:
    """What the SDK sent for one timeout: URL, headers, httpx extensions (the timeout), and the
    httpx transport for the URL (None: the client has hooks or auth of its own, so requests go
    through ``AsyncClient.send``)."""

    url: Any
    headers: Any
    extensions: dict
    transport: Any


class SdkRoute:
    """POSTs of request bodies already serialised as JSON to one endpoint (``path``) of an
    OpenAI / Anthropic SDK client (``sdk``: its module), returning the raw reply.

    The first request per timeout goes through the SDK's own request path (``client.post``),
    which sets the base URL, auth and default headers and the timeout. Later requests reuse the
    URL, headers and timeout of the request it sent, on the same client's httpx client: its
    transport for the URL (connection pool, proxy, TLS settings), with its redirects and
    cookies (through ``AsyncClient.send`` when the client has event hooks or auth of its own).
    This skips the SDK's per-request work (request-option models, header merging, URL
    building, retry bookkeeping) and httpx's client layers, about 40% of the client CPU of a
    judge call. Errors stay the SDK's own: an error status becomes the exception the SDK raises
    for it (the client's ``_make_status_error_from_response``: ``RateLimitError`` holding the
    response and its Retry-After, ``AuthenticationError`` ...), a timeout ``APITimeoutError``,
    another transport failure ``APIConnectionError``. A client whose credentials may change
    between requests (``custom_auth``, no API key string: a key function, a workload identity),
    or that sends an idempotency key (a new one per request), goes through ``client.post`` every
    time.

    ``capacity``: the connections of the client's pool (None: no cap); ``active``: requests in
    flight on this route (:class:`Routes` fills the first route with room).
    """

    def __init__(self, client: Any, path: str, sdk: Any, capacity: int | None = None):
        self.client, self.path, self.sdk, self.capacity = client, path, sdk, capacity
        self.active = 0
        self.http = getattr(client, "_client", None)
        # Reuse needs the SDK internals it builds on; an SDK version without them (renamed in a
        # future release) keeps every request on ``client.post``: slower, never broken.
        self.reuse = (self.http is not None and hasattr(self.http, "_transport_for_url")
                      and callable(getattr(client, "_make_status_error_from_response", None))
                      and getattr(client, "custom_auth", None) is None
                      and not getattr(client, "_idempotency_header", None)
                      and isinstance(getattr(client, "api_key", None), str))
        self.httpx = _httpx_of(type(self.http)) if self.reuse else None
        self._sent: dict[float | None, _Sent] = {}

    async def post(self, body: bytes, timeout: float | None) -> bytes:
        """POST ``body`` (JSON) with ``timeout`` seconds for each HTTP step (None: none); the reply's bytes."""
        self.active += 1
        try:
            sent = self._sent.get(timeout)
            if sent is None:
                return await self._through_sdk(body, timeout)
            return await self._send(sent, body)
        finally:
            self.active -= 1

    async def _through_sdk(self, body: bytes, timeout: float | None) -> bytes:
        options: dict[str, Any] = {"headers": {"Content-Type": "application/json"}}
        if timeout is not None:
            options["timeout"] = timeout
        # the raw response, with the request the SDK sent (its bytes when nothing is reused)
        cast_to = self.httpx.Response if self.reuse else bytes
        if _post_takes_content(type(self.client)):
            response = await self.client.post(self.path, content=body, cast_to=cast_to, options=options)
        else:  # openai 1.58 / anthropic 0.40 take a JSON-able body only
            response = await self.client.post(self.path, body=json.loads(body), cast_to=cast_to, options=options)
        if not self.reuse:
            return response
        request, http = response.request, self.http
        headers = self.httpx.Headers([(k, v) for k, v in request.headers.raw if k.lower() not in _PER_REQUEST])
        own = any(http.event_hooks.values()) or http.auth is not None
        self._sent[timeout] = _Sent(request.url, headers, dict(request.extensions),
                                    None if own else http._transport_for_url(request.url))
        return response.content

    async def _send(self, sent: _Sent, body: bytes) -> bytes:
        httpx, client, http = self.httpx, self.client, self.http
        request = httpx.Request("POST", sent.url, headers=sent.headers, content=body, extensions=sent.extensions)
        if http.cookies:
            httpx.Cookies(http.cookies).set_cookie_header(request)
        try:
            if sent.transport is None:
                response = await http.send(request)
            else:
                response = await sent.transport.handle_async_request(request)
                response.request = request
                if response.has_redirect_location and http.follow_redirects:
                    await response.aclose()
                    response = await http.send(request)
                else:
                    if "set-cookie" in response.headers:
                        http.cookies.extract_cookies(response)
                    try:
                        await response.aread()
                    except BaseException:
                        await response.aclose()
                        raise
        except httpx.TimeoutException as err:
            raise self.sdk.APITimeoutError(request=request) from err
        except Exception as err:  # noqa: BLE001 - what the SDK wraps too
            raise self.sdk.APIConnectionError(request=request) from err
        if not response.is_success:
            raise client._make_status_error_from_response(response) from None
        return response.content


class Routes:
    """The :class:`SdkRoute` s of one event loop. :meth:`next` takes the first route with a free
    connection, so the load packs onto as few routes (and pools) as the requests in flight need,
    and each connection pool, which scans its idle connections at every request, stays small."""

    def __init__(self, routes: list[SdkRoute]):
        self.routes = routes

    def next(self) -> SdkRoute:
        """The first route with room (else the least busy)."""
        for route in self.routes:
            if route.capacity is None or route.active < route.capacity:
                return route
        return min(self.routes, key=lambda r: r.active)

    async def aclose(self) -> None:
        """Close every route's SDK client."""
        for route in self.routes:
            await route.client.close()


#: Connections per SDK client: httpx probes every idle connection of a pool (a system call each)
#: whenever a request starts or ends, so a cap of 64 requests in flight is served by 16 pools of 4.
SHARD = 4


@functools.lru_cache(maxsize=None)
def _ssl_context(httpx: Any) -> Any:
    """The SSL context each httpx client would load for itself (CA bundle, ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR``), loaded once per process and shared by the SDK clients of every judge and
    event loop."""
    return httpx.create_ssl_context()


class SdkClients:
    """Makes one event loop's :class:`Routes` to ``path`` from the clients of an SDK (``sdk()``
    imports ``openai`` or ``anthropic``), each an instance of its ``client_class``
    (``"AsyncOpenAI"``, ``"AsyncAnthropic"``) with the SDK retries off. With
    ``pool_size`` (and no ``http_client`` of the caller's) they keep at most ``pool_size``
    connections in all (the judge's cap on requests in flight), at most :data:`SHARD` per client,
    sharing one SSL context (:func:`_ssl_context`).

    A class, not a closure, so a judge pickles (to a worker process, which makes its own
    clients): the key travels inside the pickle only, never in a repr or a log line."""

    def __init__(self, sdk: Callable[[], Any], client_class: str, path: str, *, api_key: str,
                 base_url: str | None, timeout: float | None, client_kwargs: dict, pool_size: int | None = None):
        sdk()  # imported now, not on first use inside a running event loop
        self.sdk, self.client_class, self.path = sdk, client_class, path
        self.api_key, self.base_url, self.timeout = api_key, base_url, timeout
        self.client_kwargs, self.pool_size = client_kwargs, pool_size

    def __repr__(self) -> str:
        return f"SdkClients({self.path!r}, base_url={self.base_url!r})"

    def __setstate__(self, state: dict) -> None:
        state["sdk"]()  # a copy in a worker process imports the SDK now too, not inside its first request
        self.__dict__.update(state)

    def one(self, connections: int | None = None, verify: Any = True) -> Any:
        """One SDK client keeping at most ``connections`` connections (None: the SDK's own pool),
        verifying TLS with ``verify`` (True: the client loads its own; or an SSL context)."""
        sdk = self.sdk()
        kwargs = dict(self.client_kwargs)
        if connections:
            limits = type(sdk.DEFAULT_CONNECTION_LIMITS)(max_connections=connections,
                                                         max_keepalive_connections=connections)
            kwargs["http_client"] = sdk.DefaultAsyncHttpxClient(limits=limits, timeout=self.timeout, verify=verify)
        return getattr(sdk, self.client_class)(api_key=self.api_key, base_url=self.base_url, max_retries=0,
                                               timeout=self.timeout, **kwargs)

    def __call__(self) -> Routes:
        sdk = self.sdk()
        if not self.pool_size or "http_client" in self.client_kwargs:
            return Routes([SdkRoute(self.one(), self.path, sdk)])
        shards = -(-self.pool_size // SHARD)
        sizes = [self.pool_size // shards + (i < self.pool_size % shards) for i in range(shards)]
        ssl = _ssl_context(_httpx_of(sdk.DefaultAsyncHttpxClient))
        return Routes([SdkRoute(self.one(size, ssl), self.path, sdk, size) for size in sizes])


async def close_routes(routes: Routes) -> None:
    """Close one loop's routes (the :class:`~ragmeter.loops.PerLoop` closer)."""
    await routes.aclose()
