"""Internal: CascadeJudge: the offline judge scores every sample; the samples it is unsure of go to an LLM judge.

The offline judge scores all of a sample's metrics first. Its calibrated confidence in the
sample's faithfulness verdict, ``max(p, 1 - p)`` where ``p`` is the probability that a human
reader finds the answer fully supported (:meth:`~ragmeter.judges.offline.OfflineJudge.confidence`,
fit on human labels), decides: below the cut, every metric of the sample is scored again by the
LLM judge and the LLM's Scores are kept. The cut is given either as a confidence
(``confidence=0.8``) or as the share of samples to route (``route=0.2``, the default): the
confidence below which that share of the development data's answers falls (the quantiles are
fit with the combinations, ``benchmarks/fit_offline.py``), so on other data the routed share
differs from the one asked for (the bundled RAG samples, less sure than the development mix, route
35% at the default 0.2); every Score says whether its sample was routed.

A sample without a calibrated probability (no answer, no chunks, an answer without claims) stays
with the offline judge, except at ``route=1``, which sends every sample. Every Score names the judge
that decided it (``Score.judge``) and carries ``details["cascade"]``: ``decided_by``, ``routed``,
the offline ``confidence``, the ``cut``, and for a routed sample the offline judge's value. The
usage of a sample the offline judge kept counts the LLM calls it saved (``Usage.saved_calls``: one
per distinct judge task the offline judge answered, the chunk ratings and the reference attribution
counting as one when the LLM judge combines them).

Spec: ``cascade:offline>openai:gpt-4o-mini`` (any judge spec after ``>``), with ``?route=0.3`` or
``?confidence=0.8`` at the end.

Example: 100 samples at ``route=0.2`` with an LLM judge making 4 calls per sample: if 20 are
routed, 20 * 4 = 80 calls instead of 400, 0.8 calls per sample.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ragmeter.judges.base import Embedder, Judge, JudgeError, TaskResult, Usage

__all__ = ["CascadeJudge", "CascadeScorer", "DEFAULT_ROUTE", "cut_for"]

#: The share of samples routed to the LLM judge when neither ``route`` nor ``confidence`` is given:
#: the largest share of 0.1, 0.2, 0.3, 0.5 at which the answers the offline judge keeps rank at least
#: as well as all answers on both labeled development sets (``benchmarks/cascade.py``).
DEFAULT_ROUTE = 0.2
#: The cut of ``route=1``: above every confidence, so every sample goes to the LLM judge.
ROUTE_ALL = 1.0 + 1e-9
#: The tasks an LLM judge answers in one ``review_context`` call (see ``ragmeter.judges.tasks``).
_COMBINED = ("rate_chunks", "attribute_statements")


class CascadeJudge(Judge):
    """The offline judge first, an LLM judge for the samples it is unsure of (see the module).

    ``first``: the offline judge (anything with ``confidence(value)`` and ``routing_cut(share)``:
    an :class:`~ragmeter.judges.offline.OfflineJudge`); ``then``: any judge. ``route``: the share of
    samples to route (0..1, default 0.2), or ``confidence``: the cut itself (0.5..1: samples whose
    confidence is below it are routed); not both.

    See the module for the spec and the details each Score carries.

    >>> from ragmeter.judges.offline import OfflineJudge
    >>> CascadeJudge(OfflineJudge(embeddings=False), OfflineJudge(embeddings=False), confidence=0.9)
    Traceback (most recent call last):
    ...
    ValueError: cascade members need distinct names, got 'offline-lexical' twice
    """

    kind = "LLM"

    def __init__(self, first: Judge, then: Judge, *, route: float | None = None, confidence: float | None = None):
        if route is not None and confidence is not None:
            raise ValueError("give the cascade's cut as route= (a share of samples) or confidence=, not both")
        if first.name == then.name:
            raise ValueError(f"cascade members need distinct names, got {first.name!r} twice")
        if not callable(getattr(first, "confidence", None)) or not callable(getattr(first, "routing_cut", None)):
            raise ValueError(
                f"the cascade's first judge must give a calibrated confidence (the offline judge), got {first.name!r}"
            )
        if confidence is not None:
            if not 0.5 <= float(confidence) <= 1.0:
                raise ValueError(f"confidence must be in [0.5, 1] (max(p, 1 - p) of a probability), got {confidence}")
            self.route, self.cut = None, float(confidence)
        else:
            share = DEFAULT_ROUTE if route is None else float(route)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"route must be a share of samples in [0, 1], got {route}")
            self.route, self.cut = share, cut_for(first, share)
        self.first, self.then = first, then
        self.name = f"cascade:{first.name}>{then.name}"
        self.embedder = first.embedder
        self.generates_questions = first.generates_questions

    def describe(self) -> Any:
        """Backend ``cascade`` with the two members' fingerprints (offline first) and the cut as its
        model: a run's Scores each carry the fingerprint of the member that decided them."""
        from ragmeter.judges.fingerprint import JudgeFingerprint

        how = f"route {self.route:g}" if self.route is not None else f"confidence {self.cut:g}"
        return JudgeFingerprint(
            backend="cascade",
            model=f"{how}, cut {self.cut:.4f}",
            members=(self.first.fingerprint, self.then.fingerprint),
        )

    def __repr__(self) -> str:
        how = f"route={self.route:g}" if self.route is not None else f"confidence={self.cut:g}"
        return f"CascadeJudge({self.first.name!r} > {self.then.name!r}, {how}, cut {self.cut:.4f})"

    def check(self) -> None:
        """Check both judges (ValueError naming the first that cannot work)."""
        self.first.check()
        self.then.check()

    async def aclose(self) -> None:
        """Close both judges."""
        await self.first.aclose()
        await self.then.aclose()

    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Not used: :class:`CascadeScorer` asks the judges sample by sample."""
        raise JudgeError("CascadeJudge routes whole samples: score with ragmeter.evaluate()", task=task)

    def scorer(self, embedder: Embedder | None = None, limits: Any = None) -> CascadeScorer:
        """The scorer that runs the cascade on each sample (what ``ragmeter.metrics.scoring`` uses)."""
        return CascadeScorer(self, embedder, limits)

    def sample_confidence(self, scores: dict) -> float | None:
        """The offline judge's confidence in a sample's verdict: ``max(p, 1 - p)`` of the calibrated
        probability of its faithfulness Score (``details["confidence"]``), None without one."""
        score = scores.get("faithfulness")
        p = score.details.get("confidence") if score is not None and score.value is not None else None
        return None if p is None else max(float(p), 1.0 - float(p))


def cut_for(first: Judge, share: float) -> float:
    """The confidence cut that routes ``share`` of samples: the development answers' quantile
    (``first.routing_cut``); 0 routes none, and 1 every sample (a cut above every confidence)."""
    if share >= 1.0:
        return ROUTE_ALL
    if share <= 0.0:
        return 0.0
    return float(first.routing_cut(share))  # type: ignore[attr-defined]


def _saved_calls(tasks: Sequence[str], combines: bool) -> int:
    """The LLM calls the offline judge's ``tasks`` stand for (the combined tasks count once)."""
    names = set(tasks)
    if combines and all(t in names for t in _COMBINED):
        return len(names) - 1
    return len(names)


class CascadeScorer:
    """Scores a sample with the cascade: the offline judge's Scores, or the LLM judge's when the
    offline confidence is below the cut (see :class:`CascadeJudge`)."""

    def __init__(self, cascade: CascadeJudge, embedder: Embedder | None = None, limits: Any = None):
        self.cascade = cascade
        self.embedder = embedder
        self.limits = limits

    async def _score(self, judge: Judge, sample: Any, metrics: Sequence[Any]) -> tuple[dict, Usage, list[str]]:
        from ragmeter.metrics.requests import RequestSettings, ScoringContext

        settings = RequestSettings.for_metrics(metrics, self.limits)
        ctx = ScoringContext(sample, judge, self.embedder, metrics, settings)
        results = await asyncio.gather(*(m.ascore(sample, ctx) for m in metrics))
        tasks = [key.split(":", 1)[0] for key in ctx._memo if not key.startswith("__")]
        return {m.name: s for m, s in zip(metrics, results)}, ctx.usage, tasks

    async def score(self, sample: Any, metrics: Sequence[Any]) -> tuple[dict, Usage]:
        """The Scores of ``metrics`` on ``sample`` and what they cost; never raises."""
        c = self.cascade
        first, usage, tasks = await self._score(c.first, sample, metrics)
        conf = c.sample_confidence(first)
        routed = (conf is not None and conf < c.cut) or c.cut >= ROUTE_ALL
        info = {
            "first": c.first.name,
            "then": c.then.name,
            "routed": routed,
            "confidence": None if conf is None else round(conf, 4),
            "cut": round(c.cut, 4),
        }
        if not routed:
            saved = _saved_calls(tasks, bool(getattr(c.then, "combines_tasks", False)))
            for s in first.values():
                s.details["cascade"] = {**info, "decided_by": s.judge}
            return first, usage + Usage(saved_calls=saved)
        second, cost, _ = await self._score(c.then, sample, metrics)
        for name, s in second.items():
            offline = first.get(name)
            s.details["cascade"] = {
                **info,
                "decided_by": s.judge,
                "offline_value": offline.value if offline is not None else None,
            }
        return second, usage + cost
