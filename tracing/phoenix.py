"""Internal: ``PhoenixAnnotationSink``: send evaluation results to Arize Phoenix as annotations.

Phoenix shows ragmeter's evaluation spans in the trace, but its annotation views and filters
(``annotations['faithfulness'].score < 0.5``) only see annotations created through its REST API.
This sink creates them, through the Phoenix client (``pip install "ragmeter[phoenix]"``, i.e.
``arize-phoenix-client``; imported on first use):

* one **span annotation** per metric on the judged span (name = metric, ``result`` = score /
  label / explanation, ``annotator_kind`` LLM or CODE, ``identifier`` stable per metric, judge,
  ragmeter version and span, so re-scoring updates instead of duplicating);
* one **document annotation** per retrieved chunk for metrics that judge chunks one by one
  (``context_relevance``, ``context_precision``: ``details["chunks"]``), on the retriever span
  the chunk came from, at its ``document_position``. Samples built from traces carry that
  mapping in ``sample.metadata["otel"]["documents"]``. (Phoenix accepts no identifier on
  document annotations; a re-score overwrites by name, span and position.)

Explanations are redacted of credentials. For a result whose sample was captured without content
(``capture_content=False``, ``metadata["content_captured"]`` False) a span annotation's
explanation is only the score's error (redacted), never its explanation; document annotations
carry scores, labels and chunk ids only.

Annotations are sent with ``sync=False`` by default: Phoenix accepts them without looking for the
judged span and holds them only briefly while the span is on its way (the exporter may still hold
it when the score is ready); an annotation whose span does not arrive is dropped, unseen (checked
against Phoenix 20.26: annotations sent 3 s before their spans never showed). ``sync=True`` fails
with 404 for spans Phoenix has not stored yet. :meth:`spans_found` asks Phoenix which judged spans
it has; ``evaluate_traces`` reports it, since an offline export is often not in that Phoenix.

Use it as a sink of :class:`~ragmeter.tracing.RagmeterSpanProcessor` (``sinks=[...]``) or of
:func:`~ragmeter.tracing.evaluate_traces` (``phoenix=URL``, ``ragmeter evaluate-traces --phoenix URL``), or call :meth:`write` yourself. It never raises:
failures are logged and counted in :attr:`stats`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.guard import never_raise
from ragmeter.privacy import content_captured, for_output
from ragmeter.redact import redact
from ragmeter.tracing.sinks import CountingSink
from ragmeter.tracing.writer import SpanTarget, annotator_kind, identifier_for

__all__ = ["PhoenixAnnotationSink", "span_annotations", "document_annotations"]

_MAX_EXPLANATION = 2000
log = logging.getLogger("ragmeter")


def _result(score: Any, with_content: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if score.value is not None:
        out["score"] = float(score.value)
    if score.label is not None:
        out["label"] = score.label
    text = score.error or (score.explanation if with_content else None)
    if text:
        out["explanation"] = redact(str(text))[:_MAX_EXPLANATION]
    if not out:
        out["explanation"] = "not applicable"
    return out


def span_annotations(result: Any, target: SpanTarget) -> list[dict[str, Any]]:
    """Phoenix ``SpanAnnotationData`` dicts: one per metric of ``result``, on ``target``."""
    out = []
    with_content = content_captured(result.sample)
    for name, s in result.scores.items():
        meta: dict[str, Any] = {"source": "ragmeter", "judge": s.judge, "status": s.status}
        sid = getattr(result.sample, "id", None)
        if sid:
            meta["sample_id"] = sid
        out.append(
            {
                "name": name,
                "span_id": target.span_id_hex,
                "annotator_kind": annotator_kind(s),
                "result": _result(s, with_content),
                "metadata": meta,
                "identifier": identifier_for(name, s, target),
            }
        )
    return out


def _chunk_result(chunk: Mapping) -> dict[str, Any] | None:
    score = chunk.get("score")
    if "useful" in chunk and isinstance(chunk["useful"], bool):
        return {"score": 1.0 if chunk["useful"] else 0.0, "label": "useful" if chunk["useful"] else "not_useful"}
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        rel = chunk.get("relevant")
        label = None
        if isinstance(rel, bool):
            label = "relevant" if rel else "irrelevant"
        elif isinstance(rel, (int, float)):
            label = "relevant" if rel > 0 else "irrelevant"
        out: dict[str, Any] = {"score": float(score)}
        if label:
            out["label"] = label
        return out
    if isinstance(chunk.get("relevant"), bool):
        return {"score": 1.0 if chunk["relevant"] else 0.0, "label": "relevant" if chunk["relevant"] else "irrelevant"}
    return None


def document_annotations(result: Any) -> list[dict[str, Any]]:
    """Phoenix ``SpanDocumentAnnotationData`` dicts for the per-chunk verdicts in ``result`` (only
    for samples whose chunks map to retriever span documents, i.e. built from traces)."""
    otel = (getattr(result.sample, "metadata", None) or {}).get("otel") or {}
    docs = otel.get("documents") or []
    out = []
    for name, s in result.scores.items():
        chunks = s.details.get("chunks") if isinstance(s.details, Mapping) else None
        if not isinstance(chunks, list):
            continue
        for c in chunks:
            if not isinstance(c, Mapping):
                continue
            i = c.get("chunk")
            if not isinstance(i, int) or not 0 <= i < len(docs):
                continue
            span_hex, position = docs[i][0], docs[i][1]
            res = _chunk_result(c)
            if not span_hex or position is None or res is None:
                continue
            # no identifier: Phoenix rejects non-empty ones on document annotations; (name, span,
            # position) is already unique there, so a re-score overwrites
            out.append(
                {
                    "name": name,
                    "span_id": span_hex,
                    "document_position": int(position),
                    "annotator_kind": annotator_kind(s),
                    "result": res,
                    "metadata": {
                        "source": "ragmeter",
                        "judge": s.judge,
                        "chunk_id": c.get("id"),
                        "identifier": identifier_for(name, s, SpanTarget(0, int(span_hex, 16))),
                    },
                }
            )
    return out


class PhoenixAnnotationSink(CountingSink):
    """Sends each result as Phoenix span annotations (and document annotations) through the
    Phoenix REST client.

    ``client``: a ``phoenix.client.Client`` (or anything with ``spans.log_span_annotations`` and
    ``spans.log_document_annotations``); default: ``Client(base_url=endpoint, api_key=api_key)``,
    which also reads ``PHOENIX_COLLECTOR_ENDPOINT`` / ``PHOENIX_API_KEY``. ``documents=False``
    skips document annotations. ``sync=True`` waits for Phoenix to store them.
    """

    COUNTERS = ("span_annotations", "document_annotations", "requests", "failed")

    def __init__(
        self,
        client: Any = None,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        documents: bool = True,
        sync: bool = False,
    ):
        super().__init__()
        self._client = client
        self._endpoint = endpoint
        self._api_key = api_key
        self.documents = documents
        self.sync = sync

    @property
    def endpoint(self) -> str | None:
        """The Phoenix base URL given, else None (the client's default)."""
        return self._endpoint

    @property
    def client(self) -> Any:
        """The Phoenix client (created on first use)."""
        if self._client is None:
            try:
                from phoenix.client import Client
            except ImportError as err:
                raise ImportError(
                    'PhoenixAnnotationSink needs the Phoenix client: pip install "ragmeter[phoenix]"'
                    " (arize-phoenix-client)"
                ) from err
            kwargs: dict[str, Any] = {}
            if self._endpoint:
                kwargs["base_url"] = self._endpoint
            if self._api_key:
                kwargs["api_key"] = self._api_key
            self._client = Client(**kwargs)
        return self._client

    def write(self, result: Any, target: SpanTarget, parent: SpanTarget | None = None) -> None:
        """Annotate ``target`` (and the retriever documents) with ``result``. Never raises."""
        spans = None
        with never_raise("phoenix: create the Phoenix client", on_error=self._failed):
            spans = self.client.spans
        if spans is None:
            return
        result = for_output(result)  # no secrets; no content when captured without
        annotations = span_annotations(result, target)
        if annotations:
            with never_raise("phoenix: send span annotations", on_error=self._failed):
                spans.log_span_annotations(span_annotations=annotations, sync=self.sync)
                self._count(span_annotations=len(annotations), requests=1)
        if not self.documents:
            return
        docs = document_annotations(result)
        if docs:
            with never_raise("phoenix: send document annotations", on_error=self._failed):
                spans.log_document_annotations(document_annotations=docs, sync=self.sync)
                self._count(document_annotations=len(docs), requests=1)

    def spans_found(self, judged: Mapping[str, Sequence[str]], timeout: float = 10.0) -> int | None:
        """How many of the judged spans Phoenix stores: ``judged`` maps a project name to span
        ids (hex). Asks ``GET /v1/projects/{project}/spans?span_id=...`` (a project Phoenix does
        not know holds none of them). None when Phoenix could not be asked (logged)."""
        import json
        import os
        import urllib.error
        import urllib.parse
        import urllib.request

        base = (self._endpoint or os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or "http://localhost:6006").rstrip("/")
        key = self._api_key or os.environ.get("PHOENIX_API_KEY")
        headers = {"accept": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
        found = 0
        try:
            for project, ids in judged.items():
                wanted = list(dict.fromkeys(ids))
                for i in range(0, len(wanted), 100):
                    chunk = wanted[i : i + 100]
                    query = urllib.parse.urlencode([("limit", len(chunk))] + [("span_id", x) for x in chunk])
                    url = f"{base}/v1/projects/{urllib.parse.quote(project, safe='')}/spans?{query}"
                    try:
                        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as r:
                            data = json.loads(r.read()).get("data") or []
                    except urllib.error.HTTPError as exc:
                        if exc.code != 404:  # 404: no such project, so none of its spans
                            raise
                        data = []
                    got = {(d.get("context") or {}).get("span_id") for d in data if isinstance(d, Mapping)}
                    found += len(got & set(chunk))
        except Exception as exc:  # noqa: BLE001  (any failure: say it could not be checked)
            log.warning(
                "ragmeter: could not ask Phoenix at %s which judged spans it stores: %s", base, redact(str(exc))
            )
            return None
        return found
