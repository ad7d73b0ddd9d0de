"""Internal: The :class:`Monitor`: rolling windows over scored samples, alert rules, OpenTelemetry metrics."""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ragmeter.guard import never_raise
from ragmeter.inline import sampled
from ragmeter.judges.base import Embedder
from ragmeter.metrics import metric_classes
from ragmeter.metrics.scoring import SampleResult
from ragmeter.monitor.drift import RETRIEVAL_SCORE, DriftValues, QuestionDrift
from ragmeter.monitor.rules import Alert, Trigger, percentile
from ragmeter.verdicts import latency_seconds

__all__ = ["Monitor", "DEFAULT_THRESHOLDS", "RULES", "default_thresholds", "degradation_rules"]

log = logging.getLogger("ragmeter.monitor")

#: The default score floors, metric -> floor (:func:`default_thresholds`, read when asked).
DEFAULT_THRESHOLDS: dict[str, float]
#: The rules, in the order they are checked.
RULES = (
    "score_floor",
    "faithfulness_degradation",
    "retrieval_degradation",
    "no_retrieval_rate",
    "latency_p95",
    "judge_error_rate",
    "judge_cost_per_hour",
    "drift_psi",
    "drift_centroid",
)


def default_thresholds() -> dict[str, float]:
    """The default score floors: the diagnosis' signal metrics (the registered metrics whose class
    names a :attr:`~ragmeter.metrics.base.Metric.diagnosis` side), each at its own warn level (below
    it a score is labelled fail): ``{"faithfulness": 0.7, "answer_relevancy": 0.6,
    "context_relevance": 0.3, "context_recall": 0.6}`` for the built-in metrics."""
    return {name: cls.warn for name, cls in metric_classes().items() if cls.diagnosis is not None}


def degradation_rules() -> dict[str, str]:
    """Metric -> the rule a drop of its recent mean fires (its class's
    :attr:`~ragmeter.metrics.base.Metric.degradation_rule`)."""
    return {name: cls.degradation_rule for name, cls in metric_classes().items() if cls.degradation_rule}


def __getattr__(name: str) -> Any:
    """``DEFAULT_THRESHOLDS``: :func:`default_thresholds`, read from the registered metrics when asked."""
    if name == "DEFAULT_THRESHOLDS":
        return default_thresholds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_MAX_METRICS = 64  # metric names tracked at most (state stays bounded whatever the scores are called)


class _Series:
    """One metric's values: the whole window and its last ``recent``, with running sums."""

    __slots__ = ("window", "full", "recent", "full_sum", "pushes")

    def __init__(self, window: int, recent: int):
        self.window = window
        self.full: collections.deque[float] = collections.deque(maxlen=window)
        self.recent: collections.deque[float] = collections.deque(maxlen=recent)
        self.full_sum, self.pushes = 0.0, 0

    def add(self, v: float) -> None:
        if len(self.full) == self.window:
            self.full_sum -= self.full[0]
        self.full.append(v)
        self.recent.append(v)
        self.pushes += 1
        self.full_sum = math.fsum(self.full) if self.pushes % self.window == 0 else self.full_sum + v

    def recent_mean(self) -> float:
        return math.fsum(self.recent) / len(self.recent)

    def baseline(self) -> tuple[float, int]:
        """Mean and count of the window's values before the recent ones."""
        n = len(self.full) - len(self.recent)
        return ((self.full_sum - math.fsum(self.recent)) / n if n > 0 else math.nan), n


class Monitor:
    """Watches scored samples in production and alerts when quality degrades.

    Feed it every :class:`~ragmeter.SampleResult` with :meth:`observe`, typically as the
    ``on_result=monitor.observe`` callback of a capture (LangChain handler, LlamaIndex
    instrumentation, span processor, :class:`~ragmeter.inline.BackgroundScorer`). ``observe`` is
    cheap (appends to fixed-size windows under one lock, a few rule checks), thread-safe, and never
    raises. State is bounded: ``window`` values per metric (at most 64 metrics), ``recent`` per
    sample-level series, 61 per-minute cost buckets, the drift windows.

    Selection: ``sample_rate`` (0..1, deterministic by sample id, else question) and
    ``should_score(sample) -> True`` (always kept) decide with :func:`ragmeter.inline.sampled`,
    as the captures do.

    Rules (each fires once when crossing its limit and resolves once when back past it by
    ``resolve_margin`` x the limit; none fires before ``min_samples`` values of what it watches;
    a limit of None turns a rule off):

    * ``score_floor``: mean of a metric's last ``recent`` values below ``thresholds[metric]``
      (default :func:`default_thresholds`: the diagnosis' signal metrics, each at its warn level).
    * ``faithfulness_degradation`` / ``retrieval_degradation`` (the metrics whose class names the
      rule, :func:`degradation_rules`: faithfulness; context recall, context relevance):
      the recent mean fell more than ``max_drop`` below the mean of the window's earlier values
      (which must hold at least ``recent`` values); while the alert fires, that earlier mean stays
      the one from before the drop, so the alert resolves when quality recovers, not when the
      window has got used to the degraded values.
    * ``no_retrieval_rate``: share of the last ``recent`` samples with no chunks, or with no chunk
      whose context-relevance score (``details["chunks"][i]["score"]`` of a metric whose evidence
      is ``"chunk_relevance"``) is above
      ``relevance_floor`` — or, without a context-relevance score, no retriever score above
      ``retrieval_score_floor`` when given — above ``no_retrieval_limit``. Samples with chunks but
      neither signal are not counted.
    * ``latency_p95``: 95th percentile (:func:`~ragmeter.monitor.rules.percentile`) of the
      app's response time (:func:`ragmeter.verdicts.latency_seconds`) over the last ``recent``
      samples that have one, above ``latency_p95_limit`` seconds.
    * ``judge_error_rate``: errored scores / computed scores (value or error; not-applicable ones
      left out) over the last ``recent`` samples, above ``error_rate_limit``.
    * ``judge_cost_per_hour``: judge spend (``usage.cost_usd``; unknown prices count 0) of the
      samples observed in the last 60 minutes of ``clock``, above ``cost_per_hour_limit`` USD.
    * ``drift_psi``: PSI of ``drift_on`` (a metric, or ``"retrieval_score"``) in the last
      ``recent`` samples against the reference window, above ``psi_limit``.
    * ``drift_centroid``: with an ``embedder``, the cosine distance between the reference and
      recent question centroids above ``centroid_limit`` (questions embedded off the caller's thread).

    Alerts (:class:`~ragmeter.monitor.Alert`) are logged to the ``ragmeter.monitor`` logger
    (firing: warning, resolved: info), passed to ``on_alert(alert)`` (guarded), counted, and kept
    in :attr:`alerts` (the last 100). OpenTelemetry metrics (see :mod:`ragmeter.monitor.otel`) go
    to ``meter_provider``, or to the global provider when None; ``meter_provider=False`` turns
    them off (and OpenTelemetry is never imported). Several monitors may share a provider: give
    each its own ``attributes`` (e.g. ``{"app": "support-bot"}``), which go on every series it
    reports. ``store`` (a Store, path, URL or StoreWriter) records every observed sample as source
    ``"monitor"`` through a :class:`~ragmeter.store.writer.StoreWriter` (batched on its own
    thread, never on the observe path). ``clock`` (seconds since the epoch) times alerts and the
    cost hour; inject one in tests and simulations.
    """

    def __init__(
        self,
        window: int = 500,
        min_samples: int = 50,
        thresholds: Mapping[str, float] | None = None,
        *,
        recent: int = 50,
        on_alert: Callable[[Alert], Any] | None = None,
        meter_provider: Any = None,
        sample_rate: float = 1.0,
        should_score: Callable[[Any], bool | None] | None = None,
        max_drop: float | None = 0.1,
        no_retrieval_limit: float | None = 0.2,
        relevance_floor: float = 0.0,
        retrieval_score_floor: float | None = None,
        latency_p95_limit: float | None = None,
        error_rate_limit: float | None = 0.1,
        cost_per_hour_limit: float | None = None,
        drift_on: str = "context_relevance",
        reference_size: int | None = None,
        psi_limit: float | None = 0.25,
        psi_bins: int = 10,
        embedder: Embedder | None = None,
        centroid_limit: float | None = 0.15,
        resolve_margin: float = 0.05,
        store: Any = None,
        store_tags: Iterable[str] | None = None,
        attributes: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        if window < 1 or recent < 1 or min_samples < 1:
            raise ValueError("window, recent and min_samples must be >= 1")
        if recent > window:
            raise ValueError(f"recent ({recent}) must not exceed window ({window})")
        if not 0.0 <= sample_rate <= 1.0:
            raise ValueError("sample_rate must be between 0 and 1")
        self.window, self.recent, self.min_samples = window, recent, min_samples
        self.thresholds = dict(default_thresholds() if thresholds is None else thresholds)
        self._degradation = degradation_rules()
        self._relevance = [m for m, cls in metric_classes().items() if "chunk_relevance" in cls.evidence]
        self.on_alert, self.sample_rate, self.should_score = on_alert, sample_rate, should_score
        self.max_drop, self.no_retrieval_limit, self.relevance_floor = max_drop, no_retrieval_limit, relevance_floor
        self.retrieval_score_floor, self.latency_p95_limit = retrieval_score_floor, latency_p95_limit
        self.error_rate_limit, self.cost_per_hour_limit = error_rate_limit, cost_per_hour_limit
        self.psi_limit, self.centroid_limit, self.resolve_margin = psi_limit, centroid_limit, resolve_margin
        self.clock = clock
        self._lock = threading.Lock()
        self._series: dict[str, _Series] = {}
        self._latency: collections.deque[float] = collections.deque(maxlen=recent)
        self._no_retrieval: collections.deque[bool] = collections.deque(maxlen=recent)
        self._judged: collections.deque[tuple[int, int]] = collections.deque(maxlen=recent)  # (errors, computed)
        self._judged_totals = [0, 0]
        self._cost: collections.deque[list] = collections.deque(maxlen=61)  # [minute, usd]
        self._triggers: dict[tuple[str, str | None], Trigger] = {}
        self._baselines: dict[tuple[str, str], tuple[float, int]] = {}  # degradation baselines, frozen while firing
        self._counts = dict.fromkeys(("observed", "sampled_out", "dropped"), 0)
        self._alert_counts: collections.Counter = collections.Counter()
        self.alerts: collections.deque[Alert] = collections.deque(maxlen=100)
        size = window if reference_size is None else reference_size
        self._drift = DriftValues(drift_on, reference_size=size, recent=recent, bins=psi_bins)
        self._questions = (
            QuestionDrift(embedder, reference_size=size, recent=recent, on_update=self._check_centroid)
            if embedder is not None
            else None
        )
        self._writer = None
        if store is not None:
            from ragmeter.store.writer import StoreWriter

            self._writer = store if isinstance(store, StoreWriter) else StoreWriter(store, "monitor", tags=store_tags)
        if meter_provider is not False:
            from ragmeter.monitor.otel import register_instruments  # OpenTelemetry is imported inside

            try:
                register_instruments(self, meter_provider, dict(attributes or {}))
            except ImportError:
                if meter_provider is not None:
                    raise ImportError(
                        "ragmeter: Monitor(meter_provider=...) needs opentelemetry (pip install 'ragmeter[otel]')"
                    ) from None
                log.debug("ragmeter monitor: opentelemetry is not installed; no OTel metrics")

    # ------------------------------------------------------------------ feeding

    def observe(self, result: SampleResult) -> bool:
        """Take one scored sample into the windows and check the rules; True when it was kept
        (not sampled out). Never raises: a failure is counted in ``dropped`` and logged once."""
        kept = False
        with never_raise("monitor: observe a sample", on_error=lambda exc: self._count("dropped")):
            kept = self._observe(result)
        return kept

    def set_reference(self, results: Iterable[SampleResult]) -> None:
        """Use these results (e.g. an offline evaluation run) as the drift reference: their
        ``drift_on`` values, and their questions when an embedder is given."""
        results = list(results)
        with self._lock:
            self._drift.set_reference(v for v in map(self._drift.value_of, results) if v is not None)
        if self._questions is not None:
            self._questions.set_reference(r.sample.question for r in results)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the background work (question embeddings, store writes); False on timeout."""
        done = True
        if self._questions is not None:
            done = self._questions.flush(timeout) and done
        if self._writer is not None:
            done = self._writer.flush(timeout) and done
        return done

    def close(self, timeout: float | None = None) -> bool:
        """Flush, then close the store writer (the monitor still observes, without a store)."""
        done = self.flush(timeout)
        if self._writer is not None:
            done = self._writer.close(timeout) and done
        return done

    # ------------------------------------------------------------------ reading

    @property
    def stats(self) -> dict[str, int]:
        """Counters: ``observed``, ``sampled_out``, ``dropped`` samples, ``alerts_fired`` and
        ``alerts_resolved``; ``store_*`` from the store writer; ``drift_embed_dropped`` /
        ``drift_embed_errors`` (questions not embedded) with an embedder."""
        with self._lock:
            out = dict(self._counts)
            out["alerts_fired"] = sum(n for (_, _, s), n in self._alert_counts.items() if s == "firing")
            out["alerts_resolved"] = sum(n for (_, _, s), n in self._alert_counts.items() if s == "resolved")
        if self._writer is not None:
            out.update(self._writer.stats)
        if self._questions is not None:
            out.update(drift_embed_dropped=self._questions.dropped, drift_embed_errors=self._questions.errors)
        return out

    def snapshot(self) -> dict[str, Any]:
        """The current values: ``means`` (metric -> {"recent", "full", "count"}), ``no_retrieval``,
        ``latency_p95``, ``error_rate``, ``cost_per_hour``, ``drift`` ({"psi", "centroid_distance"}),
        ``firing`` ((rule, metric) -> bool), ``counts``, ``alerts`` ((rule, metric, state) -> n).
        A value is None until there is something to compute it from."""
        with self._lock:
            means = {
                m: {"recent": s.recent_mean(), "full": math.fsum(s.full) / len(s.full), "count": len(s.full)}
                for m, s in self._series.items()
                if s.full
            }
            out: dict[str, Any] = {
                "means": means,
                "no_retrieval": _rate(self._no_retrieval),
                "latency_p95": percentile(self._latency, 95) if self._latency else None,
                "error_rate": self._error_rate(),
                "cost_per_hour": self._cost_last_hour(self.clock()),
                "drift": {"psi": self._drift.psi(self.min_samples), "centroid_distance": None},
                "firing": {k: t.firing for k, t in self._triggers.items()},
                "counts": dict(self._counts),
                "alerts": dict(self._alert_counts),
            }
        if self._questions is not None:
            out["drift"]["centroid_distance"] = self._questions.distance(self.min_samples)
        return out

    def buffer_sizes(self) -> dict[str, int]:
        """How many entries each window holds now (to check that state stays bounded)."""
        with self._lock:
            out = {f"series.{m}.{k}": len(getattr(s, k)) for m, s in self._series.items() for k in ("full", "recent")}
            out.update(
                latency=len(self._latency),
                no_retrieval=len(self._no_retrieval),
                judged=len(self._judged),
                cost_buckets=len(self._cost),
                drift_reference=len(self._drift.reference),
                drift_recent=len(self._drift.recent),
                alerts=len(self.alerts),
            )
        if self._questions is not None:
            out["drift_question_vectors"] = len(self._questions.recent)
        return out

    # ------------------------------------------------------------------ internals

    def _count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

    def _observe(self, result: SampleResult) -> bool:
        sample = result.sample
        forced = False
        if self.should_score is not None:
            with never_raise("monitor: should_score predicate"):
                forced = self.should_score(sample) is True
        if not forced and not sampled(sample.id or sample.question, self.sample_rate):
            self._count("sampled_out")
            return False
        values = {m: s.value for m, s in result.scores.items() if s.value is not None}
        errors = sum(1 for s in result.scores.values() if s.status == "error")
        latency = latency_seconds(sample.metadata)
        no_retrieval = self._no_retrieval_of(result)
        cost = result.usage.cost_usd or 0.0
        drift_value = self._drift.value_of(result)
        now = self.clock()
        with self._lock:
            self._counts["observed"] += 1
            for m, v in values.items():
                series = self._series.get(m)
                if series is None and len(self._series) < _MAX_METRICS:
                    series = self._series[m] = _Series(self.window, self.recent)
                if series is not None:
                    series.add(v)
            if latency is not None:
                self._latency.append(latency)
            if no_retrieval is not None:
                self._no_retrieval.append(no_retrieval)
            if len(self._judged) == self._judged.maxlen:
                gone = self._judged[0]
                self._judged_totals[0] -= gone[0]
                self._judged_totals[1] -= gone[1]
            self._judged.append((errors, errors + len(values)))
            self._judged_totals[0] += errors
            self._judged_totals[1] += errors + len(values)
            minute = int(now // 60)
            if self._cost and self._cost[-1][0] == minute:
                self._cost[-1][1] += cost
            else:
                self._cost.append([minute, cost])
            if drift_value is not None:
                self._drift.add(drift_value)
            alerts = self._check(values, now, drift_value is not None)
        self._emit(alerts)
        if self._writer is not None:
            self._writer.add(result)
        if self._questions is not None:
            self._questions.add(sample.question)
        return True

    def _no_retrieval_of(self, result: SampleResult) -> bool | None:
        if not result.sample.contexts:
            return True
        rel = next((result.scores[m] for m in self._relevance if m in result.scores), None)
        chunks = rel.details.get("chunks") if rel is not None else None
        if chunks:
            return not any(isinstance(c, Mapping) and (c.get("score") or 0.0) > self.relevance_floor for c in chunks)
        if self.retrieval_score_floor is not None:
            scores = [c.score for c in result.sample.contexts if c.score is not None]
            if scores:
                return max(scores) <= self.retrieval_score_floor
        return None

    def _error_rate(self) -> float | None:
        errors, computed = self._judged_totals
        return errors / computed if computed else None

    def _cost_last_hour(self, now: float) -> float | None:
        if not self._cost:
            return None
        minute = int(now // 60)
        return math.fsum(usd for m, usd in self._cost if m > minute - 60)

    def _check(self, values: Mapping[str, float], now: float, drifted: bool) -> list[Alert]:
        """Rule checks after one sample (called with the lock held); the alerts they raise."""
        out: list[Alert] = []
        n = self.min_samples
        for m in values:
            series = self._series.get(m)
            if series is None or len(series.full) < n:
                continue
            mean = series.recent_mean()
            if m in self.thresholds and self.thresholds[m] is not None:
                out += self._update("score_floor", m, mean, self.thresholds[m], False, now)
            if m in self._degradation and self.max_drop is not None:
                key = (self._degradation[m], m)
                base, count = self._baselines.get(key) or series.baseline()
                if count >= self.recent:
                    out += self._update(
                        *key,
                        base - mean,
                        self.max_drop,
                        True,
                        now,
                        detail=f"recent mean {mean:.3f} vs earlier {base:.3f}",
                    )
                    # while firing, the baseline stays the one before the drop (else the degraded
                    # values, moving into it, would "resolve" the alert while quality is still low)
                    if self._triggers[key].firing:
                        self._baselines.setdefault(key, (base, count))
                    else:
                        self._baselines.pop(key, None)
        if (
            self.no_retrieval_limit is not None
            and len(self._no_retrieval) >= min(n, self.recent)
            and (no_retrieval := _rate(self._no_retrieval)) is not None
        ):
            out += self._update("no_retrieval_rate", None, no_retrieval, self.no_retrieval_limit, True, now)
        if self.latency_p95_limit is not None and len(self._latency) >= min(n, self.recent):
            out += self._update("latency_p95", None, percentile(self._latency, 95), self.latency_p95_limit, True, now)
        rate = self._error_rate()
        if self.error_rate_limit is not None and rate is not None and len(self._judged) >= min(n, self.recent):
            out += self._update("judge_error_rate", None, rate, self.error_rate_limit, True, now)
        if self.cost_per_hour_limit is not None and self._counts["observed"] >= n:
            out += self._update(
                "judge_cost_per_hour", None, self._cost_last_hour(now) or 0.0, self.cost_per_hour_limit, True, now
            )
        value = self._drift.psi(min(n, self.recent)) if drifted and self.psi_limit is not None else None
        if value is not None and self.psi_limit is not None:
            out += self._update(
                "drift_psi",
                self._drift.on if self._drift.on != RETRIEVAL_SCORE else None,
                value,
                self.psi_limit,
                True,
                now,
            )
        return out

    def _check_centroid(self) -> None:
        """After a batch of question embeddings (on the drift thread): the centroid rule."""
        if self.centroid_limit is None or self._questions is None:
            return
        value = self._questions.distance(min(self.min_samples, self.recent))
        if value is None:
            return
        with self._lock:
            alerts = self._update("drift_centroid", None, value, self.centroid_limit, True, self.clock())
        self._emit(alerts)

    def _update(
        self, rule: str, metric: str | None, value: float, limit: float, above: bool, now: float, detail: str = ""
    ) -> list[Alert]:
        key = (rule, metric)
        trigger = self._triggers.get(key)
        if trigger is None:
            trigger = self._triggers[key] = Trigger(limit, above=above, margin=abs(limit) * self.resolve_margin)
        state = trigger.update(value)
        if state is None:
            return []
        self._alert_counts[(rule, metric, state)] += 1
        alert = Alert(
            rule,
            metric,
            value,
            limit,
            state,
            now,
            _message(rule, metric, value, limit, state, above, self.recent, detail),
        )
        self.alerts.append(alert)
        return [alert]

    def _emit(self, alerts: list[Alert]) -> None:
        for alert in alerts:
            if alert.state == "firing":
                log.warning("ragmeter monitor: %s", alert.message)
            else:
                log.info("ragmeter monitor: %s", alert.message)
            if self.on_alert is not None:
                with never_raise("monitor: on_alert callback"):
                    self.on_alert(alert)


def _rate(flags: Iterable[bool]) -> float | None:
    flags = list(flags)
    return sum(flags) / len(flags) if flags else None


_WHAT = {
    "score_floor": "{metric} mean of the last {n} samples",
    "faithfulness_degradation": "drop in {metric}",
    "retrieval_degradation": "drop in {metric}",
    "no_retrieval_rate": "no-retrieval rate of the last {n} samples",
    "latency_p95": "p95 latency of the last {n} samples (s)",
    "judge_error_rate": "judge error rate of the last {n} samples",
    "judge_cost_per_hour": "judge cost over the last hour (USD)",
    "drift_psi": "PSI of {metric} (drift)",
    "drift_centroid": "question centroid distance (drift)",
}


def _message(
    rule: str, metric: str | None, value: float, limit: float, state: str, above: bool, n: int, detail: str
) -> str:
    what = _WHAT[rule].format(metric=metric or "retrieval scores", n=n)
    if state == "firing":
        side = "above" if above else "below"
        text = f"FIRING {rule}: {what} {value:.4g} is {side} the limit {limit:g}"
    else:
        text = f"RESOLVED {rule}: {what} {value:.4g} is back within the limit {limit:g}"
    return f"{text} ({detail})" if detail else text
