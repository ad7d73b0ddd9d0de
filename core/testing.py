"""RAG quality as test assertions: :func:`assert_rag`, with evidence in the failure message.

>>> from ragmeter.testing import assert_rag
>>> assert_rag({"question": q, "contexts": chunks, "answer": answer},        # doctest: +SKIP
...            faithfulness=0.8, context_recall=0.7, judge="offline")

It scores the sample on the named metrics (each keyword is a metric name and its floor; names
that are not identifiers, such as ``ndcg@10``, go in ``thresholds={...}``) and raises
AssertionError listing every metric below its floor, with its value, the floor, the metric's
explanation and its evidence: the unsupported or contradicted claims (faithfulness, answer
correctness ...) and the citations that do not support their statement (citation metrics). A
metric without a value (an error, or n/a) fails too, with its reason. On success it returns the
scored :class:`~ragmeter.SampleResult`.

Inside a test marked ``@pytest.mark.ragmeter(judge=...)``, the marker's judge is the default
(see :mod:`ragmeter.pytest_plugin`, which also collects every call for its summary and the store).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import Any

from ragmeter.data import Sample
from ragmeter.metrics.scoring import SampleResult

__all__ = ["assert_rag", "RagAssertion"]

#: The running test, set by the pytest plugin: {"judge": default judge, "test": node id, "observe":
#: called with (SampleResult, thresholds, failed metric names, node id) after every assert_rag}.
_context: contextvars.ContextVar[dict | None] = contextvars.ContextVar("ragmeter_test", default=None)

_MAX_EVIDENCE = 5


class RagAssertion(AssertionError):
    """The AssertionError :func:`assert_rag` raises; ``result`` is the scored SampleResult and
    ``failures`` the metric names that failed."""

    def __init__(self, message: str, result: SampleResult, failures: list[str]):
        super().__init__(message)
        self.result = result
        self.failures = failures


def _sample(value: Any) -> tuple[Sample, SampleResult | None]:
    if isinstance(value, SampleResult):
        return value.sample, value
    if isinstance(value, Sample):
        return value, None
    if isinstance(value, Mapping):
        return Sample.from_dict(value), None
    raise TypeError(f"assert_rag takes a Sample, a record dict or a SampleResult, got {type(value).__name__}")


def _evidence(details: dict) -> list[str]:
    """The claims and citations that explain a low score, as short lines."""
    lines = []
    claims = {c.get("claim"): c for c in details.get("claims") or [] if isinstance(c, dict)}
    for kind in ("contradicted", "unsupported"):
        for text in (details.get(kind) or [])[:_MAX_EVIDENCE]:
            reason = claims.get(text, {}).get("reason")
            lines.append(f"{kind}: {text!r}" + (f" ({reason})" if reason else ""))
    for c in details.get("citations") or []:
        if isinstance(c, dict) and c.get("verdict") not in ("supports", None):
            if len(lines) >= 2 * _MAX_EVIDENCE:
                break
            lines.append(
                f"citation {c.get('marker')} {c.get('verdict')}: {c.get('statement')!r}"
                + (f" ({c['reason']})" if c.get("reason") else "")
            )
    return lines


def assert_rag(
    sample_or_output: Any,
    thresholds: Mapping[str, float] | None = None,
    *,
    judge: Any = None,
    **metric_thresholds: float,
) -> SampleResult:
    """Score ``sample_or_output`` (a Sample, a record dict with ragmeter / RAGAS / DeepEval field
    names, or an already scored SampleResult: only missing metrics are scored) on every metric
    named in ``thresholds`` / the keywords, and raise :class:`RagAssertion` (an AssertionError)
    when any is below its floor or has no value. ``judge``: a Judge or a spec; default the
    ragmeter marker's judge, else the default judge (offline without an API key)."""
    __tracebackhide__ = True  # pytest shows the test's line and the message, not this function's source
    from ragmeter.runner import evaluate

    floors = {**(thresholds or {}), **metric_thresholds}
    if not floors:
        raise ValueError("assert_rag needs at least one metric threshold, e.g. faithfulness=0.8")
    ctx = _context.get() or {}
    if judge is None:
        judge = ctx.get("judge")
    sample, scored = _sample(sample_or_output)
    missing = [m for m in floors if scored is None or m not in scored.scores]
    result = scored or SampleResult(sample, {})
    if missing:
        fresh = evaluate([sample], metrics=missing, judge=judge, progress=False)[0]
        result = SampleResult(
            sample, {**result.scores, **fresh.scores}, result.usage + fresh.usage, result.duration_s + fresh.duration_s
        )
    failures, lines = [], []
    for name, floor in floors.items():
        s = result.scores[name]
        if s.value is not None and s.value >= floor:
            continue
        failures.append(name)
        shown = f"{s.value:.4f} < {floor}" if s.value is not None else f"{s.status} (floor {floor})"
        why = s.error or s.explanation
        lines.append(f"  {name} = {shown}" + (f": {why}" if why else ""))
        lines += [f"    - {e}" for e in _evidence(s.details)]
    observe: Callable | None = ctx.get("observe")
    if observe is not None:
        observe(result, floors, failures, ctx.get("test"))
    if failures:
        question = sample.question if len(sample.question) <= 80 else sample.question[:77] + "..."
        head = (
            f"RAG assertion failed for sample {sample.id!r} ({question!r}): "
            f"{len(failures)} of {len(floors)} metrics below threshold"
        )
        raise RagAssertion("\n".join([head, *lines]), result, failures)
    return result
