"""Internal: Per-sample verdicts: one composite score and letter grade, a diagnosis that says whether
retrieval or generation failed, and the app's response time as a metric.

Pure functions over a sample's Scores (``SampleResult.scores``, a dict metric -> Score); no
judge call, no state. Results are read through their fields (``r.sample``, ``r.scores``), so this
module sits below :mod:`ragmeter.result`, whose reports use it.

>>> from ragmeter.data import Score
>>> scores = {"faithfulness": Score("faithfulness", 0.9, label="pass"),
...           "answer_relevancy": Score("answer_relevancy", 0.6, label="warn"),
...           "context_recall": Score("context_recall", 0.2, label="fail"),
...           "context_relevance": Score("context_relevance", 0.7, label="pass")}
>>> value = composite_score(scores); round(value, 4), grade(value)
(0.6, 'D')
>>> weakest_metric(scores)
('context_recall', 0.2)
>>> diagnose(scores).kind
'retrieval'
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmeter.aggregate import GRADE_THRESHOLDS, grade
from ragmeter.data import Score
from ragmeter.judges.fingerprint import CODE_FINGERPRINT
from ragmeter.metrics import DOMAIN_METRICS, REGISTRY, load_plugins, metric_classes

__all__ = [
    "composite_score",
    "composite_inputs",
    "grade",
    "GRADE_THRESHOLDS",
    "diagnose",
    "Diagnosis",
    "diagnosis_rule",
    "diagnosis_signals",
    "DIAGNOSIS_RULE",
    "RETRIEVAL_SIGNALS",
    "GENERATION_SIGNALS",
    "response_time_score",
    "latency_seconds",
    "RESPONSE_TIME",
    "RESPONSE_TIME_LEVELS",
    "add_response_time",
    "latency_summary",
    "run_latency",
    "COMPOSITE_METHODS",
    "weakest_metric",
]

#: The composite forms of :func:`composite_score`.
COMPOSITE_METHODS = ("harmonic", "weighted", "geometric", "min")
_METHODS = COMPOSITE_METHODS

#: The metrics whose low values mean the retriever failed (:func:`diagnosis_signals`, read when asked).
RETRIEVAL_SIGNALS: tuple[str, ...]
#: The metrics whose low values mean the generator failed (:func:`diagnosis_signals`, read when asked).
GENERATION_SIGNALS: tuple[str, ...]
#: The diagnosis rule, as the reports state it (:func:`diagnosis_rule`, read when asked).
DIAGNOSIS_RULE: str

_NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def diagnosis_signals() -> dict[str, tuple[str, ...]]:
    """The diagnosis' signal metrics per side, from the registered metrics' classes
    (:attr:`~ragmeter.metrics.base.Metric.diagnosis`, ordered by ``diagnosis_rank``, then registry
    order): ``{"retrieval": ("context_recall", "context_relevance"), "generation":
    ("faithfulness", "answer_relevancy")}`` for the built-in metrics. A low retrieval signal means
    the retriever failed (the chunks miss or bury what is needed); a low generation signal that
    the generator failed (the answer strays from the chunks or the question)."""
    classes = list(metric_classes().items())
    out = {}
    for side in ("retrieval", "generation"):
        found = [(cls.diagnosis_rank, i, name) for i, (name, cls) in enumerate(classes) if cls.diagnosis == side]
        out[side] = tuple(name for _, _, name in sorted(found))
    return out


def diagnosis_rule() -> str:
    """The diagnosis rule as the reports state it (:func:`diagnose`), naming the signal metrics of
    :func:`diagnosis_signals`."""
    signals = diagnosis_signals()
    retrieval, generation = signals["retrieval"], signals["generation"]
    n = len(retrieval) + len(generation)
    neither = {1: "the context metric is not", 2: "neither context metric is"}.get(
        len(retrieval), "no context metric is"
    )
    count = _NUMBERS.get(n, str(n))
    return (
        "A metric is low when it is labelled fail (its value is below the metric's warn level). "
        f"Retrieval failure: {' or '.join(retrieval)} is low. "
        f"Generation failure: {' or '.join(generation)} is low while {neither}. "
        "Both: a context metric and an answer metric are low. "
        f"Fine: none of the {count} is low. Unknown: none of the {count} has a value."
    )


def __getattr__(name: str) -> Any:
    """``RETRIEVAL_SIGNALS``, ``GENERATION_SIGNALS`` and ``DIAGNOSIS_RULE``, read from the registered
    metrics when asked (:func:`diagnosis_signals`, :func:`diagnosis_rule`)."""
    if name in ("RETRIEVAL_SIGNALS", "GENERATION_SIGNALS"):
        return diagnosis_signals()[name.split("_")[0].lower()]
    if name == "DIAGNOSIS_RULE":
        return diagnosis_rule()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The metric name of :func:`response_time_score`.
RESPONSE_TIME = "response_time"
#: The default response time levels in seconds: (pass at most, warn at most).
RESPONSE_TIME_LEVELS = (3.0, 5.0)


# --------------------------------------------------------------------------- composite score


def composite_inputs(
    scores: Mapping[str, Score], weights: Mapping[str, float] | None = None
) -> tuple[dict[str, float], dict[str, str]]:
    """What :func:`composite_score` combines: ``(used, excluded)``.

    The metrics are the keys of ``weights``, or without weights every judged metric present in
    ``scores`` (the names in :data:`ragmeter.metrics.REGISTRY`, and the profiles' checks in
    :data:`~ragmeter.metrics.DOMAIN_METRICS`: retrieval metrics such as ``ndcg@10`` and
    ``response_time`` are left out). ``used`` maps each metric with a value to
    it; ``excluded`` maps each other metric to the reason: ``"not scored"``, ``"weight 0"``,
    ``"not applicable"`` or ``"error: <the error>"`` (an error is never turned into a number).

    >>> used, excluded = composite_inputs({"faithfulness": Score("faithfulness", 0.5),
    ...                                    "mrr": Score("mrr", 1.0),
    ...                                    "context_recall": Score("context_recall", None, error="timeout")})
    >>> used, excluded
    ({'faithfulness': 0.5}, {'context_recall': 'error: timeout'})
    """
    if weights is None:
        load_plugins()
        names = [m for m in scores if m in REGISTRY or m in DOMAIN_METRICS]
    else:
        names = list(weights)
        for name, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                raise ValueError(f"weight of {name!r} must be a finite number >= 0, got {w!r}")
    used: dict[str, float] = {}
    excluded: dict[str, str] = {}
    for name in names:
        s = scores.get(name)
        if s is None:
            excluded[name] = "not scored"
        elif weights is not None and weights[name] == 0:
            excluded[name] = "weight 0"
        elif s.value is None:
            excluded[name] = f"error: {s.error}" if s.error else "not applicable"
        else:
            used[name] = s.value
    return used, excluded


def composite_score(
    scores: Mapping[str, Score], weights: Mapping[str, float] | None = None, method: str = "weighted"
) -> float | None:
    """One number in [0, 1] for a sample: a mean of its metrics' values.

    ``method`` (:data:`COMPOSITE_METHODS`), with weights w_i (metric -> weight >= 0, need not sum
    to 1; without them every judged metric present weighs 1, see :func:`composite_inputs`):

    - ``"weighted"`` (default): the weighted arithmetic mean ``sum_i w_i s_i / sum_i w_i``;
    - ``"harmonic"``: the weighted harmonic mean ``sum_i w_i / sum_i (w_i / s_i)``, 0.0 when a
      used value is 0: one weak metric pulls the sample down;
    - ``"geometric"``: ``exp(sum_i w_i ln s_i / sum_i w_i)``, 0.0 when a used value is 0;
    - ``"min"``: the lowest value (the weakest link; weights only choose the metrics).

    The default was chosen by evidence (``benchmarks/composite_dev.py``): on human pairwise
    "overall" preferences between RAG answers the four forms agree equally well (within 0.01
    AUROC, intervals overlapping), while the harmonic, geometric and minimum forms turn a single 0
    (often one reference statement the judge did not find) into F 0.00, hiding every other
    metric; :func:`weakest_metric` names the metric that holds a sample down instead.
    Scores that errored or do not apply are left out, never counted as 0; :func:`composite_inputs`
    lists them with the reason. None when no chosen metric has a value.

    Example: faithfulness 0.9, answer_relevancy 0.6, context_recall 1.0, context_relevance
    errored (left out): weighted (0.9 + 0.6 + 1.0) / 3 = 0.8333 (grade B); harmonic
    3 / (1/0.9 + 1/0.6 + 1/1.0) = 0.7941 (grade C); geometric (0.9 * 0.6 * 1.0)^(1/3) = 0.8143;
    min 0.6; with weights faithfulness 2, answer_relevancy 1: weighted (1.8 + 0.6) / 3 = 0.8,
    harmonic 3 / (2/0.9 + 1/0.6) = 0.7714.

    >>> s = {"faithfulness": Score("faithfulness", 0.9), "answer_relevancy": Score("answer_relevancy", 0.6),
    ...      "context_recall": Score("context_recall", 1.0), "context_relevance": Score("context_relevance", None, error="x")}
    >>> [round(composite_score(s, method=m), 4) for m in COMPOSITE_METHODS]
    [0.7941, 0.8333, 0.8143, 0.6]
    >>> w = {"faithfulness": 2, "answer_relevancy": 1}
    >>> round(composite_score(s, w), 4), round(composite_score(s, w, "harmonic"), 4)
    (0.8, 0.7714)
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    used, _ = composite_inputs(scores, weights)
    if not used:
        return None
    w = {name: (1.0 if weights is None else float(weights[name])) for name in used}
    total = math.fsum(w.values())
    if method == "weighted":
        return math.fsum(w[n] * v for n, v in used.items()) / total
    if method == "min":
        return min(used.values())
    if any(v == 0.0 for v in used.values()):
        return 0.0
    if method == "geometric":
        return math.exp(math.fsum(w[n] * math.log(v) for n, v in used.items()) / total)
    return total / math.fsum(w[n] / v for n, v in used.items())


def weakest_metric(scores: Mapping[str, Score], weights: Mapping[str, float] | None = None) -> tuple[str, float] | None:
    """The metric that holds a sample's composite down: the lowest value among the metrics
    :func:`composite_score` uses (the first in order on a tie), as ``(metric, value)``; None when
    no chosen metric has a value.

    >>> weakest_metric({"faithfulness": Score("faithfulness", 0.9), "context_recall": Score("context_recall", 0.0),
    ...                 "mrr": Score("mrr", 0.0)})
    ('context_recall', 0.0)
    """
    used, _ = composite_inputs(scores, weights)
    if not used:
        return None
    name = min(used, key=lambda m: used[m])
    return name, used[name]


# --------------------------------------------------------------------------- diagnosis


@dataclass(frozen=True)
class Diagnosis:
    """What to fix for one sample: ``kind`` is ``"retrieval"``, ``"generation"``, ``"both"``,
    ``"fine"`` or ``"unknown"``; ``rule`` the rule that decided it (:func:`diagnosis_rule`);
    ``reasons`` one line per signal metric (its value and label, or why it has none)."""

    kind: str
    rule: str = ""
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return {"kind": self.kind, "rule": self.rule, "reasons": list(self.reasons)}


def _signal(name: str, s: Score | None, low_labels: tuple[str, ...]) -> tuple[bool | None, str]:
    """(is low, reason) of one signal metric; None when it gives no verdict."""
    if s is None:
        return None, f"{name}: not scored"
    if s.value is None:
        return None, f"{name}: {'error: ' + s.error if s.error else 'not applicable'}"
    if s.label is None:
        return None, f"{name}: {s.value:.2f} without a pass / warn / fail label"
    levels = s.details.get("warn"), s.details.get("threshold")
    low = s.label in low_labels
    if low and isinstance(levels[0], (int, float)) and s.label == "fail":
        where = f"below its warn level {levels[0]:g}"
    elif s.label == "pass" and isinstance(levels[1], (int, float)):
        where = f"at or above its pass level {levels[1]:g}"
    else:
        where = f"labelled {s.label}"
    return low, f"{name} {s.value:.2f} {where} ({'low' if low else 'not low'})"


def diagnose(scores: Mapping[str, Score], *, low_labels: tuple[str, ...] = ("fail",)) -> Diagnosis:
    """Tell a retrieval failure from a generation failure, from the metric triad.

    A signal metric is *low* when its label is in ``low_labels`` (default: ``fail``, i.e. the
    value is below the metric's warn level; pass ``("warn", "fail")`` to call anything short of
    pass low). The signals are the metrics whose class names a side (:func:`diagnosis_signals`):
    retrieval, context recall and context relevance; generation, faithfulness and answer
    relevancy. Then, as :func:`diagnosis_rule` states: a low retrieval signal and a low generation signal ->
    ``"both"``; only retrieval -> ``"retrieval"``; only generation -> ``"generation"`` (good
    context, bad answer); none low -> ``"fine"``; no signal with a label -> ``"unknown"``. A signal
    that errored or was not scored gives no verdict and is named in the reasons.

    Example: context_recall 0.2 (fail: below warn 0.6), context_relevance 0.7 (pass),
    faithfulness 0.9 (pass), answer_relevancy 0.6 (warn) -> ``"retrieval"``: the chunks lack
    what the reference needs, while the answer is faithful to what they say.

    >>> fail = {"warn": 0.6, "threshold": 0.8}
    >>> d = diagnose({"context_recall": Score("context_recall", 0.2, details=fail, label="fail"),
    ...               "faithfulness": Score("faithfulness", 0.95, label="pass")})
    >>> d.kind, d.reasons[0]
    ('retrieval', 'context_recall 0.20 below its warn level 0.6 (low)')
    """
    reasons: list[str] = []
    verdicts: dict[str, list[bool]] = {"retrieval": [], "generation": []}
    for side, names in diagnosis_signals().items():
        for name in names:
            low, reason = _signal(name, scores.get(name), tuple(low_labels))
            reasons.append(reason)
            if low is not None:
                verdicts[side].append(low)
    retrieval, generation = any(verdicts["retrieval"]), any(verdicts["generation"])
    if retrieval and generation:
        kind = "both"
    elif retrieval:
        kind = "retrieval"
    elif generation:
        kind = "generation"
    elif verdicts["retrieval"] or verdicts["generation"]:
        kind = "fine"
    else:
        kind = "unknown"
    return Diagnosis(kind, diagnosis_rule(), reasons)


# --------------------------------------------------------------------------- response time


def latency_seconds(metadata: Mapping[str, Any]) -> float | None:
    """The app's response time in seconds recorded in a sample's metadata by the captures:
    ``metadata["latency"]["total_s"]`` (LangChain handler, LlamaIndex instrumentation), or a
    plain number in ``metadata["latency"]`` / ``metadata["latency_s"]``; None when absent or not
    a finite number >= 0.

    >>> latency_seconds({"latency": {"retrieval_s": 0.4, "generation_s": 1.9, "total_s": 2.4}})
    2.4
    """
    value = metadata.get("latency")
    if isinstance(value, Mapping):
        value = value.get("total_s")
    if value is None:
        value = metadata.get("latency_s")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def latency_summary(latencies: Iterable[float | None]) -> dict[str, Any] | None:
    """The response times in seconds as Langfuse and Phoenix show them: ``count``, ``p50_s``,
    ``p95_s`` and ``max_s`` of the values that are not None; None when there is none.

    Percentiles interpolate linearly between the closest ranks (numpy's default, Hyndman-Fan
    type 7): with the n values sorted, the q-th percentile sits at position h = (n - 1) q / 100,
    x[floor h] + (h - floor h) (x[floor h + 1] - x[floor h]). Example: 1, 2, 3, 4 s -> p50 at
    h = 1.5: 2.5 s; p95 at h = 2.85: 3 + 0.85 = 3.85 s.

    >>> latency_summary([1.0, 2.0, 3.0, 4.0, None])
    {'count': 4, 'p50_s': 2.5, 'p95_s': 3.85, 'max_s': 4.0}
    """
    values = sorted(float(v) for v in latencies if v is not None)
    if not values:
        return None

    def percentile(q: float) -> float:
        h = (len(values) - 1) * q / 100
        lo = math.floor(h)
        hi = min(lo + 1, len(values) - 1)
        return round(values[lo] + (h - lo) * (values[hi] - values[lo]), 9)

    return {"count": len(values), "p50_s": percentile(50), "p95_s": percentile(95), "max_s": values[-1]}


def run_latency(results: Iterable[Any]) -> dict[str, Any] | None:
    """:func:`latency_summary` of the captured response times (:func:`latency_seconds`) of
    ``results``' samples; None when no sample carries one."""
    return latency_summary(latency_seconds(r.sample.metadata) for r in results)


def response_time_score(
    latency_s: float, pass_under: float = RESPONSE_TIME_LEVELS[0], warn_under: float = RESPONSE_TIME_LEVELS[1]
) -> Score:
    """The app's response time as a Score (metric ``"response_time"``), next to the judged metrics.

    Label: pass when ``latency_s <= pass_under``, warn when ``<= warn_under``, else fail.
    Value, piecewise linear in the latency t (p = pass_under, w = warn_under): 1.0 for t <= p;
    from 1.0 down to 0.5 between p and w (``1 - 0.5 (t - p) / (w - p)``); from 0.5 down to 0.0
    between w and 2w (``0.5 (2w - t) / w``); 0.0 from 2w on. So the value's own levels are
    pass 1.0 / warn 0.5 (stored in the details as ``threshold`` / ``warn``), consistent with
    the label, and a mean over samples still tells 6 s from 60 s.

    Example (defaults 3 s / 5 s): 2.4 s -> 1.0 pass; 4.0 s -> 1 - 0.5 * 1/2 = 0.75 warn;
    7.5 s -> 0.5 * 2.5/5 = 0.25 fail; 12 s -> 0.0 fail.

    >>> [(s.value, s.label) for s in map(response_time_score, (2.4, 4.0, 7.5, 12.0))]
    [(1.0, 'pass'), (0.75, 'warn'), (0.25, 'fail'), (0.0, 'fail')]
    """
    for name, v in (("latency_s", latency_s), ("pass_under", pass_under), ("warn_under", warn_under)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if not 0 < pass_under <= warn_under:
        raise ValueError(f"need 0 < pass_under ({pass_under}) <= warn_under ({warn_under})")
    t, p, w = float(latency_s), float(pass_under), float(warn_under)
    if t <= p:
        value, label = 1.0, "pass"
    elif t <= w:
        value, label = 1.0 - 0.5 * (t - p) / (w - p), "warn"
    else:
        value, label = max(0.0, 0.5 * (2 * w - t) / w), "fail"
    level = {
        "pass": f"at most {p:g} s (pass)",
        "warn": f"over {p:g} s, at most {w:g} s (warn)",
        "fail": f"over {w:g} s (fail)",
    }[label]
    return Score(
        RESPONSE_TIME,
        value,
        explanation=f"response time {t:.2f} s: {level}",
        details={"latency_s": t, "pass_under": p, "warn_under": w, "threshold": 1.0, "warn": 0.5},
        judge="code",
        label=label,
        fingerprint=CODE_FINGERPRINT.id,
    )


def add_response_time(
    results: Iterable[Any], pass_under: float = RESPONSE_TIME_LEVELS[0], warn_under: float = RESPONSE_TIME_LEVELS[1]
) -> bool:
    """Add a ``response_time`` Score (:func:`response_time_score`) to each result whose sample
    carries a captured latency (:func:`latency_seconds`), and a not-applicable one (value None,
    the reason in the explanation) to the others; nothing at all when no sample has a latency.
    Returns whether any was added. No judge call.

    >>> from ragmeter.data import Sample
    >>> from ragmeter.metrics.scoring import SampleResult
    >>> rs = [SampleResult(Sample("q", ["c"], metadata={"latency": {"total_s": 4.0}}), {}),
    ...       SampleResult(Sample("q", ["c"]), {})]
    >>> add_response_time(rs), [(r.scores["response_time"].value, r.scores["response_time"].label) for r in rs]
    (True, [(0.75, 'warn'), (None, None)])
    """
    results = list(results)
    latencies = [latency_seconds(r.sample.metadata) for r in results]
    if all(t is None for t in latencies):
        return False
    for r, t in zip(results, latencies):
        r.scores[RESPONSE_TIME] = (
            response_time_score(t, pass_under, warn_under)
            if t is not None
            else Score(
                RESPONSE_TIME,
                None,
                "no response time was captured for this sample",
                judge="code",
                fingerprint=CODE_FINGERPRINT.id,
            )
        )
    return True
