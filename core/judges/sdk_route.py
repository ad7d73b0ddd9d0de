"""Internal: The OpenAI and Anthropic transports' request path: a fast path through the SDKs' private
internals, used only with the SDK releases it is known to work with.

:class:`SdkClients` makes each event loop's SDK clients (pools sized to the judge's cap,
:data:`SHARD` connections each); :class:`SdkRoute` sends a request body on one of them. The
first request per timeout goes through the SDK's public ``client.post``; later ones reuse what
it sent on the client's httpx transport, which needs private SDK internals
(``client._client``, ``_make_status_error_from_response``, httpx's ``_transport_for_url``).
Those are used only when the SDK's version is within :data:`FAST_PATH_VERSIONS` (the oldest
supported release, ``.ci/oldest.txt``, up to the next major release after the newest tested:
``tests/judges/test_sdk_versions.py`` checks both ends on each CI run) and the internals are there; any
other release keeps every request on ``client.post``: slower, never broken.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SdkRoute",
    "Routes",
    "SdkClients",
    "close_routes",
    "SHARD",
    "FAST_PATH_VERSIONS",
    "fast_path_supported",
    "release",
]

#: The SDK releases the fast path is known to work with: SDK -> (lowest, first release not known to
#: work). The lowest is the oldest release ragmeter supports (.ci/oldest.txt); the upper bound is the
#: next major release after the newest one tested.
FAST_PATH_VERSIONS: dict[str, tuple[str, str]] = {"openai": ("1.58.1", "4"), "anthropic": ("0.40.0", "3")}


def release(version: str) -> tuple[int, ...] | None:
    """The numeric release of a version string, None when it has none.

    >>> release("1.58.1"), release("2.0.0rc1"), release("v3"), release("dev")
    ((1, 58, 1), (2, 0, 0), (3,), None)
    """
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", version or "")
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def fast_path_supported(sdk: str, version: str) -> bool:
    """Whether the fast path may be used with ``sdk`` (``"openai"``, ``"anthropic"``) at ``version``:
    within :data:`FAST_PATH_VERSIONS` (lowest included, upper bound excluded; a pre-release counts
    as its release).

    >>> fast_path_supported("openai", "1.58.1"), fast_path_supported("openai", "1.58.0")
    (True, False)
    >>> fast_path_supported("anthropic", "3.0.0"), fast_path_supported("mistral", "1.0")
    (False, False)
    """
    bounds, found = FAST_PATH_VERSIONS.get(sdk), release(version)
    if bounds is None or found is None:
        return False
    low, high = release(bounds[0]), release(bounds[1])
    return bool(low and high and low <= found < high)


@functools.cache
def _post_takes_content(client_type: Any) -> bool:  # an SDK client class
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
    which sets the base URL, auth and default headers and the timeout. With an SDK release of
    :data:`FAST_PATH_VERSIONS` (``reuse``; any other release: every request on ``client.post``)
    later requests reuse the
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
        # the SDK's private httpx client (typed Any: an SDK internal, see the module's docstring)
        self.http: Any = getattr(client, "_client", None)
        # Reuse needs the SDK internals it builds on: only in the releases it is known to work
        # with, and only when they are there (else every request goes through ``client.post``).
        self.reuse = (
            fast_path_supported(sdk.__name__.partition(".")[0], getattr(sdk, "__version__", ""))
            and self.http is not None
            and hasattr(self.http, "_transport_for_url")
            and callable(getattr(client, "_make_status_error_from_response", None))
            and getattr(client, "custom_auth", None) is None
            and not getattr(client, "_idempotency_header", None)
            and isinstance(getattr(client, "api_key", None), str)
        )
        self.httpx: Any = _httpx_of(type(self.http)) if self.reuse else None
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
        if _post_takes_content(self.client.__class__):
            response = await self.client.post(self.path, content=body, cast_to=cast_to, options=options)
        else:  # openai 1.58 / anthropic 0.40 take a JSON-able body only
            response = await self.client.post(self.path, body=json.loads(body), cast_to=cast_to, options=options)
        if not self.reuse:
            return response
        request, http = response.request, self.http
        headers = self.httpx.Headers([(k, v) for k, v in request.headers.raw if k.lower() not in _PER_REQUEST])
        own = any(http.event_hooks.values()) or http.auth is not None
        self._sent[timeout] = _Sent(
            request.url, headers, dict(request.extensions), None if own else http._transport_for_url(request.url)
        )
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


@functools.cache
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

    def __init__(
        self,
        sdk: Callable[[], Any],
        client_class: str,
        path: str,
        *,
        api_key: str,
        base_url: str | None,
        timeout: float | None,
        client_kwargs: dict,
        pool_size: int | None = None,
    ):
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
            limits = type(sdk.DEFAULT_CONNECTION_LIMITS)(
                max_connections=connections, max_keepalive_connections=connections
            )
            kwargs["http_client"] = sdk.DefaultAsyncHttpxClient(limits=limits, timeout=self.timeout, verify=verify)
        return getattr(sdk, self.client_class)(
            api_key=self.api_key, base_url=self.base_url, max_retries=0, timeout=self.timeout, **kwargs
        )

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
