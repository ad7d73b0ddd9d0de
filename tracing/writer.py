"""Internal: Write evaluation results into traces: one *evaluation carrier* span per judged target.

Ended spans cannot be changed, so scores go into a new span in the same trace::

    name        ragmeter.evaluation
    parent      the entry span of the judged RAG call (``parent``, default: the target)
    links       exactly one Link, to the judged span (``target``)
    start / end when scoring started / ended

Attributes (written least important first: when the provider's span limits evict attributes,
the oldest go first, so the flat tags and the marker survive; eviction is counted and reported
in a ``ragmeter.carrier.truncated`` event):

* ``evaluations.{i}.evaluation.{metadata,explanation,identifier,annotator_kind,label,score,name}``
  (OpenInference; ``annotator_kind`` LLM or CODE; ``identifier`` stable per metric, judge,
  ragmeter version and target, so a re-score overwrites instead of duplicating)
* ``ragmeter.<metric>.score`` (double), ``ragmeter.<metric>.label`` (pass / warn / fail),
  ``ragmeter.<metric>.error`` (when it could not be computed): flat, exact-match searchable tags
* ``ragmeter.citation.{accuracy,precision,recall}`` (double), ``ragmeter.citation.{count,
  supported_count,partially_count,unsupported_count,invalid_count,uncited_claims}`` (int), when
  a citation metric ran
* ``ragmeter.judge.{fingerprint,backend,model,endpoint,prompts,temperature,seed,rules,embedder,
  ragmeter_version,members}``: the judge's fingerprint (:mod:`ragmeter.judges.fingerprint`; the
  unset fields left out)
* ``ragmeter.sample.id``, ``ragmeter.judge``, ``ragmeter.judge.calls``, ``ragmeter.cost_usd``,
  ``ragmeter.target.trace_id``, ``ragmeter.target.span_id``, ``ragmeter.target.name``,
  ``output.value`` (a one-line summary Phoenix shows), ``openinference.span.kind = EVALUATOR``
* ``ragmeter.carrier = true``: the marker; ragmeter's processor ignores marked spans.

Events: one ``gen_ai.evaluation.result`` per metric (``gen_ai.evaluation.name``,
``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label``,
``gen_ai.evaluation.explanation``, ``error.type`` when the score has an error, and the judge's
identity under the draft evaluator names of :mod:`ragmeter.tracing.semconv`) and, when a
citation metric ran, one ``ragmeter.citation.verdicts`` event whose attributes are parallel
arrays, one entry per citation: ``ragmeter.citation.marker``, ``.statement``, ``.chunk``
(1-based position, 0 when invalid), ``.chunk_id``, ``.verdict`` (supports / partially /
does_not_support / invalid / no_claim), ``.quote``.

Error texts and explanations are redacted of credentials (:func:`ragmeter.redact.redact`). When
the result's sample was captured without content (``capture_content=False``: its
``metadata["content_captured"]`` is False), the carrier holds no text derived from the question,
chunks or answer: no ``evaluation.explanation`` / ``gen_ai.evaluation.explanation`` (an error
message, redacted, is still written), and the citation verdicts event has no ``.statement`` and
``.quote`` arrays (markers, chunk positions and ids, verdicts are kept).

The carrier is started in a context that carries OpenTelemetry's suppress-instrumentation flag,
which is also how :class:`~ragmeter.tracing.RagmeterSpanProcessor` recognises it on start.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragmeter._extras import needs_extra

with needs_extra("ragmeter.tracing", "otel", "opentelemetry"):
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from ragmeter.guard import never_raise
from ragmeter.judges.fingerprint import CODE_FINGERPRINT, lookup
from ragmeter.metrics import metric_classes
from ragmeter.privacy import content_captured, for_output
from ragmeter.redact import redact
from ragmeter.suppression import suppressed_context
from ragmeter.tracing.semconv import EvaluationNames, evaluation_names

if TYPE_CHECKING:  # pragma: no cover
    from ragmeter.metrics.scoring import SampleResult

__all__ = [
    "SpanTarget",
    "current_target",
    "EvaluationWriter",
    "writer_for_current_provider",
    "carrier_attributes",
    "carrier_events",
    "CARRIER_NAME",
    "CARRIER_MARKER",
    "annotator_kind",
    "identifier_for",
    "evaluation_result_attributes",
    "judge_attributes",
    "evaluator_attributes",
]

log = logging.getLogger("ragmeter")

CARRIER_NAME = "ragmeter.evaluation"
CARRIER_MARKER = "ragmeter.carrier"
_SCOPE = "ragmeter"
_MAX_EXPLANATION = 1000
_MAX_CITATIONS = 100


@dataclass(frozen=True)
class SpanTarget:
    """The span an evaluation is about (and, by default, the carrier's parent)."""

    trace_id: int
    span_id: int
    name: str | None = None

    @property
    def trace_id_hex(self) -> str:
        """The trace id as 32 hex digits."""
        return format(self.trace_id, "032x")

    @property
    def span_id_hex(self) -> str:
        """The span id as 16 hex digits."""
        return format(self.span_id, "016x")

    @classmethod
    def of(cls, span: Any) -> SpanTarget:
        """The target for an SDK span (live or ended)."""
        ctx = span.get_span_context() if hasattr(span, "get_span_context") else span.context
        return cls(ctx.trace_id, ctx.span_id, getattr(span, "name", None))


def current_target() -> SpanTarget | None:
    """The currently active, valid span context as a :class:`SpanTarget` (None without one)."""
    span = otel_trace.get_current_span()
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return SpanTarget(ctx.trace_id, ctx.span_id, getattr(span, "name", None))


def annotator_kind(score: Any) -> str:
    """OpenInference / Phoenix annotator kind of a Score: ``CODE`` for deterministic metrics and
    the offline judge, ``LLM`` otherwise."""
    judge = (getattr(score, "judge", None) or "code").lower()
    return "CODE" if judge in ("code", "offline") or judge.startswith("offline") else "LLM"


def identifier_for(metric: str, score: Any, target: SpanTarget) -> str:
    """A stable annotation identifier: metric, judge, ragmeter version and target."""
    from ragmeter import __version__

    return f"ragmeter/{__version__}/{getattr(score, 'judge', None) or 'code'}/{metric}/{target.span_id_hex}"


def _short(text: Any, limit: int = _MAX_EXPLANATION) -> str:
    s = redact(str(text or ""))
    return s if len(s) <= limit else s[: limit - 1] + "\u2026"


def _explanation(score: Any, with_content: bool) -> str | None:
    """What a carrier says about a score: its error, else (content allowed) its explanation."""
    text = score.error or (score.explanation if with_content else None)
    return _short(text) if text else None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _citation_details(result: SampleResult) -> dict | None:
    for name in (n for n, cls in metric_classes().items() if "citations" in cls.evidence):
        s = result.scores.get(name)
        if s is not None and isinstance(s.details, Mapping) and ("citations" in s.details or "counts" in s.details):
            return dict(s.details)
    for s in result.scores.values():  # a custom citation metric with the same details
        if isinstance(s.details, Mapping) and isinstance(s.details.get("citations"), list) and "counts" in s.details:
            return dict(s.details)
    return None


def _metadata_json(score: Any, sample_id: str | None) -> str:
    d = score.details if isinstance(score.details, Mapping) else {}
    meta: dict[str, Any] = {"judge": score.judge, "status": score.status}
    if getattr(score, "fingerprint", None):
        meta["judge_fingerprint"] = score.fingerprint
    for k in ("threshold", "warn"):
        if _num(d.get(k)) is not None:
            meta[k] = d[k]
    if score.error:
        meta["error"] = _short(score.error, 300)
    if sample_id:
        meta["sample_id"] = sample_id
    return json.dumps(meta, ensure_ascii=False, default=str)


def carrier_attributes(result: SampleResult, target: SpanTarget) -> dict[str, Any]:
    """The carrier's attributes for ``result`` about ``target`` (ordered least important first)."""
    from ragmeter import __version__

    scores = list(result.scores.items())
    sample_id = getattr(result.sample, "id", None)
    with_content = content_captured(result.sample)
    oi: dict[str, Any] = {}
    # OpenInference evaluations, lowest-value keys first (eviction takes the oldest).
    for field in ("metadata", "explanation", "identifier", "annotator_kind", "label", "score", "name"):
        for i, (name, s) in enumerate(scores):
            key = f"evaluations.{i}.evaluation.{field}"
            if field == "metadata":
                oi[key] = _metadata_json(s, sample_id)
            elif field == "explanation":
                text = _explanation(s, with_content)
                if text:
                    oi[key] = text
            elif field == "identifier":
                oi[key] = identifier_for(name, s, target)
            elif field == "annotator_kind":
                oi[key] = annotator_kind(s)
            elif field == "label" and s.label is not None:
                oi[key] = s.label
            elif field == "score" and s.value is not None:
                oi[key] = float(s.value)
            elif field == "name":
                oi[key] = name
    attrs: dict[str, Any] = dict(oi)
    usage = getattr(result, "usage", None)
    summary = ", ".join(
        f"{n}={s.value:.2f}" + (f" ({s.label})" if s.label else "")
        if s.value is not None
        else f"{n}={'error' if s.error else 'n/a'}"
        for n, s in scores
    )
    attrs["output.value"] = summary
    attrs["ragmeter.version"] = __version__
    if sample_id:
        attrs["ragmeter.sample.id"] = str(sample_id)
    judges = sorted({s.judge for _, s in scores if s.judge})
    if judges:
        attrs["ragmeter.judge"] = judges[0] if len(judges) == 1 else ",".join(judges)
    attrs.update(judge_attributes(s for _, s in scores))
    if usage is not None:
        attrs["ragmeter.judge.calls"] = int(getattr(usage, "calls", 0) or 0)
        cost = _num(getattr(usage, "cost_usd", None))
        if cost is not None:
            attrs["ragmeter.cost_usd"] = cost
    cit = _citation_details(result)
    if cit is not None:
        for k in ("accuracy", "precision", "recall"):
            v = _num(cit.get(k))
            if v is not None:
                attrs[f"ragmeter.citation.{k}"] = v
        counts: Mapping = cit["counts"] if isinstance(cit.get("counts"), Mapping) else {}
        for src, dst in (
            ("citations", "count"),
            ("supports", "supported_count"),
            ("partially", "partially_count"),
            ("does_not_support", "unsupported_count"),
            ("invalid", "invalid_count"),
            ("uncited_claims", "uncited_claims"),
        ):
            v = counts.get(src)
            if isinstance(v, int) and not isinstance(v, bool):
                attrs[f"ragmeter.citation.{dst}"] = v
    for name, s in scores:  # the flat, searchable tags
        if s.value is not None:
            attrs[f"ragmeter.{name}.score"] = float(s.value)
        if s.label is not None:
            attrs[f"ragmeter.{name}.label"] = s.label
        if s.error:
            attrs[f"ragmeter.{name}.error"] = _short(s.error, 300)
    attrs["ragmeter.target.trace_id"] = target.trace_id_hex
    if target.name:
        attrs["ragmeter.target.name"] = str(target.name)
    attrs["ragmeter.target.span_id"] = target.span_id_hex
    attrs["openinference.span.kind"] = "EVALUATOR"
    attrs[CARRIER_MARKER] = True
    return attrs


def judge_attributes(scores: Any) -> dict[str, Any]:
    """``ragmeter.judge.*`` attributes of the judge that scored ``scores`` (its
    :class:`~ragmeter.judges.fingerprint.JudgeFingerprint`: fingerprint id, backend, model,
    endpoint, prompt version, temperature, seed, rules, embedder, ragmeter version); the metrics
    that need no judge are left out. Several judges: ``ragmeter.judge.fingerprint`` lists their ids."""
    ids = list(dict.fromkeys(s.fingerprint for s in scores if s.fingerprint and s.fingerprint != CODE_FINGERPRINT.id))
    if len(ids) > 1:
        return {"ragmeter.judge.fingerprint": ids}
    fp = lookup(ids[0]) if ids else None
    if fp is None:
        return {"ragmeter.judge.fingerprint": ids[0]} if ids else {}
    return fp.attributes("ragmeter.judge")


def evaluator_attributes(score: Any, names: EvaluationNames | None = None) -> dict[str, Any]:
    """The evaluator identity of a ``gen_ai.evaluation.result`` event, under the draft evaluator
    names of :mod:`ragmeter.tracing.semconv`: the judge's fingerprint id, its name and its version
    (the offline judge's rules version, an LLM judge's prompt version, else the ragmeter version)."""
    fp = lookup(getattr(score, "fingerprint", None))
    if fp is None:
        return {}
    names = names or evaluation_names()
    values = {
        names.evaluator_id: fp.id,
        names.evaluator_name: fp.name,
        names.evaluator_version: fp.rules or fp.prompts or fp.ragmeter,
    }
    return {k: v for k, v in values.items() if v}


def _citation_event(cit: Mapping, contexts: list, with_content: bool = True) -> dict[str, Any] | None:
    records = cit.get("citations")
    if not isinstance(records, list) or not records:
        return None
    records = [r for r in records if isinstance(r, Mapping)][:_MAX_CITATIONS]
    markers, statements, chunks, ids, verdicts, quotes = [], [], [], [], [], []
    for r in records:
        chunk = r.get("chunk")
        index = chunk if isinstance(chunk, int) and not isinstance(chunk, bool) else None
        markers.append(str(r.get("marker") or r.get("target") or ""))
        statements.append(_short(r.get("statement") or "", 500))
        chunks.append(index + 1 if index is not None else 0)
        cid = contexts[index].id if index is not None and 0 <= index < len(contexts) else None
        ids.append(str(cid or ""))
        verdicts.append(str(r.get("verdict") or ""))
        quotes.append(_short(r.get("quote") or "", 500))
    attrs: dict[str, Any] = {
        "ragmeter.citation.marker": markers,
        "ragmeter.citation.statement": statements,
        "ragmeter.citation.chunk": chunks,
        "ragmeter.citation.chunk_id": ids,
        "ragmeter.citation.verdict": verdicts,
        "ragmeter.citation.quote": quotes,
    }
    if not with_content:  # the answer's sentences and the chunks' words
        del attrs["ragmeter.citation.statement"], attrs["ragmeter.citation.quote"]
    total = len(cit["citations"])
    if total > len(records):
        attrs["ragmeter.citation.omitted"] = total - len(records)
    return attrs


def evaluation_result_attributes(
    metric: str, score: Any, with_content: bool = True, names: EvaluationNames | None = None
) -> dict[str, Any]:
    """The attributes of one ``gen_ai.evaluation.result`` event (span event or log record) for
    ``score``: name, score value and label, explanation (the error when there is one, else the
    explanation unless ``with_content`` is False; redacted), ``error.type`` on failure, the
    judge's identity (:func:`evaluator_attributes`). Names
    from :mod:`ragmeter.tracing.semconv`."""
    names = names or evaluation_names()
    attrs: dict[str, Any] = {names.name: metric}
    if score.value is not None:
        attrs[names.score_value] = float(score.value)
    if score.label is not None:
        attrs[names.score_label] = score.label
    text = _explanation(score, with_content)
    if text:
        attrs[names.explanation] = text
    if score.error:
        attrs[names.error_type] = redact(score.error.split(":", 1)[0].strip()[:100]) or "error"
    attrs.update(evaluator_attributes(score, names))
    return attrs


def carrier_events(result: SampleResult) -> list[tuple[str, dict[str, Any]]]:
    """The carrier's events: one ``gen_ai.evaluation.result`` per metric, then the citation
    verdicts event when a citation metric ran."""
    events: list[tuple[str, dict[str, Any]]] = []
    with_content = content_captured(result.sample)
    names = evaluation_names()
    for name, s in result.scores.items():
        events.append((names.event, evaluation_result_attributes(name, s, with_content, names)))
    cit = _citation_details(result)
    if cit is not None:
        ev = _citation_event(cit, list(getattr(result.sample, "contexts", []) or []), with_content)
        if ev is not None:
            events.append(("ragmeter.citation.verdicts", ev))
    return events


def _is_sdk_provider(provider: Any) -> bool:
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:  # pragma: no cover - API without SDK
        return False
    return isinstance(provider, TracerProvider)


class EvaluationWriter:
    """Writes one evaluation carrier span per :meth:`write` through an SDK TracerProvider, so
    every exporter registered on it (Jaeger, Phoenix, any OTLP backend) receives it.

    ``tracer_provider=None`` uses the global provider (resolved at each write until it is an SDK
    provider; other providers write nothing). :meth:`write` never raises; :attr:`stats` counts
    written, skipped (no SDK provider), failed and truncated carriers.
    """

    def __init__(self, tracer_provider: Any = None):
        self._provider = tracer_provider
        self._tracer: Any = None
        self._lock = threading.Lock()
        self._stats = {"written": 0, "no_sdk_provider": 0, "failed": 0, "truncated": 0}
        self._warned_truncation = False

    @property
    def stats(self) -> dict[str, int]:
        """Counters: written, no_sdk_provider, failed, truncated."""
        with self._lock:
            return dict(self._stats)

    @property
    def tracer_provider(self) -> Any:
        """The provider carriers go to (None until resolved)."""
        return self._provider if self._provider is not None else otel_trace.get_tracer_provider()

    def _get_tracer(self) -> Any:
        if self._tracer is not None:
            return self._tracer
        provider = self._provider if self._provider is not None else otel_trace.get_tracer_provider()
        if not _is_sdk_provider(provider):
            return None
        from ragmeter import __version__

        self._tracer = provider.get_tracer(_SCOPE, __version__)
        return self._tracer

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._stats[key] += n

    def write(self, result: SampleResult, target: SpanTarget, parent: SpanTarget | None = None) -> bool | None:
        """Emit the carrier for ``result`` about ``target``, child of ``parent`` (default: the
        target). Never raises: returns True when written, False when it failed (logged), None
        when there is no SDK provider to write to (as counted in :attr:`stats`)."""
        written: bool | None = False
        with never_raise("tracing: write an evaluation span", on_error=lambda exc: self._count("failed")):
            written = self._write(result, target, parent)
        return written

    def _write(self, result: SampleResult, target: SpanTarget, parent: SpanTarget | None) -> bool | None:
        tracer = self._get_tracer()
        if tracer is None:
            self._count("no_sdk_provider")
            return None
        parent = parent or target
        result = for_output(result)  # no secrets; no content when captured without
        flags = TraceFlags(TraceFlags.SAMPLED)
        parent_ctx = SpanContext(parent.trace_id, parent.span_id, is_remote=False, trace_flags=flags)
        target_ctx = SpanContext(target.trace_id, target.span_id, is_remote=False, trace_flags=flags)
        ctx = suppressed_context(parent=NonRecordingSpan(parent_ctx))
        end_ns = time.time_ns()
        duration_ns = int(max(0.0, float(getattr(result, "duration_s", 0.0) or 0.0)) * 1e9)
        attrs = carrier_attributes(result, target)
        span = tracer.start_span(
            CARRIER_NAME,
            context=ctx,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            links=[Link(target_ctx)],
            start_time=end_ns - duration_ns,
        )
        try:
            for name, ev_attrs in carrier_events(result):
                span.add_event(name, ev_attrs, timestamp=end_ns)
            dropped = int(getattr(span, "dropped_attributes", 0) or 0)
            if dropped:
                span.add_event("ragmeter.carrier.truncated", {"ragmeter.dropped_attributes": dropped}, timestamp=end_ns)
                self._count("truncated")
                if not self._warned_truncation:
                    self._warned_truncation = True
                    log.warning(
                        "ragmeter: the evaluation span lost %d attributes to the span limits "
                        "(OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT); the flat ragmeter.* tags were kept",
                        dropped,
                    )
        finally:
            span.end(end_time=end_ns)
        self._count("written")
        return True


def writer_for_current_provider() -> EvaluationWriter | None:
    """An :class:`EvaluationWriter` for the global provider, or None when it is not an SDK
    TracerProvider (no OpenTelemetry SDK configured)."""
    provider = otel_trace.get_tracer_provider()
    if not _is_sdk_provider(provider):
        return None
    return EvaluationWriter(provider)
