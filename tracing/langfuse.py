"""Internal: ``LangfuseScoreSink``: send evaluation results to Langfuse as scores.

Langfuse takes traces over OTLP, but scores only through its API. This sink creates them through
Langfuse's own Python client (``pip install "ragmeter[langfuse]"``; imported on first use; the
client's ``create_score``, or ``score`` in its 2.x releases), one score per metric, keyed by the
OpenTelemetry ids Langfuse gives the spans it ingests over OTLP:

* ``trace_id`` = the judged span's trace id (32 hex digits), ``observation_id`` = its span id
  (16 hex digits);
* data type by the metric: ``BOOLEAN`` (1.0 / 0.0) for the metrics whose value is 0 or 1 by
  definition (:data:`BOOLEAN_METRICS`: ``exact_match``, ``hit_rate``, ``hit_rate@k``),
  ``NUMERIC`` for every other score with a value, ``CATEGORICAL`` (``"error"`` or ``"n/a"``)
  for a score without one (so averages leave it out and it still shows);
* ``comment`` = the explanation (the error when there is one), redacted of credentials; for a
  result whose sample was captured without content (``capture_content=False``) only the error;
* ``metadata`` = ``{"source": "ragmeter", "judge", "status", "label" (pass / warn / fail),
  "sample_id"}``;
* ``score_id`` = a UUID made from the metric, judge, ragmeter version, trace and span
  (:func:`score_id`): Langfuse upserts a score by its id, so a retry or a re-run with the same
  judge updates the score instead of adding a second one.

Use it as a sink of :class:`~ragmeter.tracing.RagmeterSpanProcessor` (``sinks=[...]``), of
:func:`~ragmeter.tracing.evaluate_traces` (``langfuse=URL``, ``ragmeter evaluate-traces
--langfuse URL``) or of ``ragmeter serve --langfuse URL``. The keys come from ``public_key`` /
``secret_key`` or ``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY`` (ValueError without them).
The client sends scores in batches from its own thread and retries; :meth:`flush` waits for it.
The sink never raises: :attr:`stats` counts the scores handed to the client, the HTTP requests
it made, and the scores that did not get through (their last request got an HTTP error or no
answer, or the batch answer rejected them). The client the sink makes gets a
tracer provider of its own, so creating it never hooks Langfuse's span exporter into your
tracing.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

from ragmeter.capture import content_captured
from ragmeter.guard import never_raise
from ragmeter.redact import redact
from ragmeter.tracing.sinks import CountingSink
from ragmeter.tracing.writer import SpanTarget, identifier_for

__all__ = ["LangfuseScoreSink", "langfuse_scores", "score_id", "BOOLEAN_METRICS"]

#: Metrics whose value is 0 or 1 by definition: sent as ``BOOLEAN`` scores (``hit_rate@k`` too).
BOOLEAN_METRICS = ("exact_match", "hit_rate")
_NAMESPACE = uuid.UUID("6f1c1d55-6b8f-4c1e-9a43-7b2f0e2a9d10")  # ragmeter's score ids (any fixed UUID)
_MAX_COMMENT = 2000


def score_id(metric: str, score: Any, target: SpanTarget) -> str:
    """The idempotency id of ``score`` on ``target``: a UUID (version 5) of
    :func:`~ragmeter.tracing.writer.identifier_for` and the trace id."""
    return str(uuid.uuid5(_NAMESPACE, f"{identifier_for(metric, score, target)}/{target.trace_id_hex}"))


def _data_type(metric: str, score: Any) -> str:
    if score.value is None:
        return "CATEGORICAL"
    return "BOOLEAN" if metric.split("@", 1)[0] in BOOLEAN_METRICS else "NUMERIC"


def langfuse_scores(result: Any, target: SpanTarget) -> list[dict[str, Any]]:
    """The keyword arguments of one Langfuse ``create_score`` call per metric of ``result``,
    on ``target`` (see the module docstring)."""
    with_content = content_captured(result.sample)
    sample_id = getattr(result.sample, "id", None)
    out = []
    for name, s in result.scores.items():
        kind = _data_type(name, s)
        value: Any = ("error" if s.error else "n/a") if kind == "CATEGORICAL" else float(s.value)
        if kind == "BOOLEAN":
            value = 1.0 if s.value >= 0.5 else 0.0
        meta: dict[str, Any] = {"source": "ragmeter", "judge": s.judge, "status": s.status}
        if s.label is not None:
            meta["label"] = s.label
        if sample_id:
            meta["sample_id"] = str(sample_id)
        kw: dict[str, Any] = {
            "name": name,
            "value": value,
            "data_type": kind,
            "trace_id": target.trace_id_hex,
            "observation_id": target.span_id_hex,
            "score_id": score_id(name, s, target),
            "metadata": meta,
        }
        text = s.error or (s.explanation if with_content else None)
        if text:
            kw["comment"] = redact(str(text))[:_MAX_COMMENT]
        out.append(kw)
    return out


class LangfuseScoreSink(CountingSink):
    """Sends each result as Langfuse scores through the Langfuse client (see the module docstring).

    ``client``: a ``langfuse.Langfuse`` (or anything with ``create_score(**kw)`` and ``flush()``);
    default: one made on first use for ``endpoint`` (else ``LANGFUSE_HOST`` / ``LANGFUSE_BASE_URL``,
    else Langfuse Cloud) with ``public_key`` / ``secret_key`` (else their environment variables).
    Langfuse's client keeps one state per public key in a process: a second sink with the same key
    shares the first one's connection (and its counters). :attr:`stats`: ``scores`` handed to the
    client, ``requests`` it sent, ``failed`` scores (see :attr:`stats`).
    """

    COUNTERS = ("scores", "requests", "failed")

    def __init__(
        self,
        client: Any = None,
        *,
        endpoint: str | None = None,
        public_key: str | None = None,
        secret_key: str | None = None,
    ):
        super().__init__()
        self._unsent: set[str] = set()
        self._rejected = 0
        self._client = client
        self._endpoint = endpoint
        self._public_key = public_key
        self._secret_key = secret_key

    @property
    def endpoint(self) -> str | None:
        """The Langfuse base URL given, else None (the client's default)."""
        return self._endpoint

    @property
    def stats(self) -> dict[str, int]:
        """Counters: ``scores`` handed to the client, ``requests`` it sent, ``failed``: scores
        whose last request was answered with an error or not at all (a retry that got through
        clears them), scores a batch answer rejected, and errors of the sink itself."""
        out = super().stats
        with self._lock:
            out["failed"] += len(self._unsent) + self._rejected
        return out

    @staticmethod
    def _score_ids(request: Any) -> set[str]:
        """The ids of the scores a request carries (3.x+: a list of scores; 2.x: an ingestion
        batch of ``score-create`` events)."""
        import json

        try:
            body = json.loads(request.content or b"null")
        except ValueError:
            return set()
        if isinstance(body, Mapping):
            items = [ev.get("body") for ev in body.get("batch") or [] if isinstance(ev, Mapping)]
        else:
            items = body if isinstance(body, list) else []
        return {str(x["id"]) for x in items if isinstance(x, Mapping) and x.get("id") is not None}

    def _sent(self, request: Any, response: Any) -> None:
        ids = self._score_ids(request)
        ok = response is not None and response.status_code < 400
        rejected = 0
        if ok and response.status_code == 207:  # some items of the batch were rejected (not retried)
            response.read()
            with never_raise("langfuse: read a batch answer"):
                body = response.json()
                if isinstance(body, Mapping):
                    rejected = int(body.get("rejected") or len(body.get("errors") or ()))
        with self._lock:
            self._stats["requests"] += 1
            self._rejected += rejected
            if ok:
                self._unsent -= ids
            else:
                self._unsent |= ids

    @property
    def client(self) -> Any:
        """The Langfuse client (created on first use; ImportError without ``langfuse``,
        ValueError without keys)."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        import inspect

        try:
            from langfuse import Langfuse
        except ImportError as err:
            raise ImportError('LangfuseScoreSink needs the Langfuse client: pip install "ragmeter[langfuse]"') from err
        public = self._public_key or os.environ.get("LANGFUSE_PUBLIC_KEY")
        secret = self._secret_key or os.environ.get("LANGFUSE_SECRET_KEY")
        if not public or not secret:
            raise ValueError(
                "Langfuse needs its project keys: public_key= and secret_key=, or "
                "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"
            )
        import httpx

        sink = self

        class _Counting(httpx.HTTPTransport):
            def handle_request(self, request: Any) -> Any:
                try:
                    response = super().handle_request(request)
                except Exception:
                    sink._sent(request, None)
                    raise
                sink._sent(request, response)
                return response

        kwargs: dict[str, Any] = {
            "public_key": public,
            "secret_key": secret,
            "httpx_client": httpx.Client(transport=_Counting(), timeout=20),
        }
        params = inspect.signature(Langfuse.__init__).parameters
        if self._endpoint:  # base_url (3.x+; it wins over $LANGFUSE_BASE_URL), host before
            kwargs["base_url" if "base_url" in params else "host"] = self._endpoint
        if "tracer_provider" in params:
            from opentelemetry.sdk.trace import TracerProvider

            kwargs["tracer_provider"] = TracerProvider()  # its own: Langfuse's span exporter stays out of yours
        return Langfuse(**kwargs)

    def write(self, result: Any, target: SpanTarget, parent: SpanTarget | None = None) -> None:
        """Hand one score per metric of ``result`` to the client. Never raises."""
        client = None
        with never_raise("langfuse: create the Langfuse client", on_error=self._failed):
            client = self.client
        if client is None:
            return
        create = getattr(client, "create_score", None)
        for kw in langfuse_scores(result, target):
            with never_raise("langfuse: create a score", on_error=self._failed):
                if callable(create):
                    create(**kw)
                else:  # the 2.x client: score(id=...)
                    kw["id"] = kw.pop("score_id")
                    client.score(**kw)
                self._count(scores=1)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the client has sent what it holds (the client takes no timeout; it gives
        up on a batch after its retries). True unless flushing raised."""
        if self._client is None:
            return True
        ok = False
        with never_raise("langfuse: flush", on_error=self._failed):
            self._client.flush()
            ok = True
        return ok
