"""Domain profiles: ``get_profile("legal" | "medical" | "default")`` sets thresholds and extra checks in one word.

:func:`get_profile` gives the :class:`Profile` of a name. A profile holds pass / warn levels per
metric and the deterministic checks the domain adds, both read from the metrics' classes
(:attr:`~ragmeter.metrics.base.Metric.profile_levels`, ``profile_checks``); :meth:`Profile.metrics`
turns metric names into metrics with the profile's levels, plus its checks, ready for
``ragmeter.evaluate(samples, metrics=get_profile("legal").metrics())``.

=========  ===================================================  ==================================
profile    levels (pass / warn)                                 extra checks
=========  ===================================================  ==================================
default    each metric's own                                    none
legal      faithfulness 0.9 / 0.8, citation_accuracy 0.9 /      ``legal_citations``: the case and
           0.8, citation_precision and citation_recall          statute citations of the answer
           0.8 / 0.6, answer_correctness 0.8 / 0.6              found in the chunks
medical    faithfulness 0.95 / 0.9, citation_accuracy 0.9 /     ``medical_advice``: dosage or
           0.8, answer_correctness 0.8 / 0.6                    treatment advice needs a source
                                                                chunk and a safety caveat
=========  ===================================================  ==================================

Relevance bands (:func:`relevance_band`): excellent >= 0.8, good >= 0.5, else poor; legal and
medical: excellent >= 0.9, good >= 0.7. ``ragmeter.evaluate(..., profile="legal")`` applies a
profile in one word and names it on the result.

Domain citations (:func:`parse_citations`): the legal profile's are the case and statute citations
of :func:`ragmeter.citations.legal_citations`; chunk citation markers ("[1]") are
:func:`ragmeter.citations.parse_citations`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragmeter.citations import LegalCitation, legal_citations
from ragmeter.metrics import DEFAULT_METRICS, get_metric, metric_classes
from ragmeter.metrics.base import Metric

__all__ = ["parse_citations", "Profile", "get_profile", "PROFILES", "relevance_band", "relevance_metrics"]


@dataclass(frozen=True)
class Profile:
    """A domain profile: ``levels`` (metric name -> (pass, warn)), ``checks`` (factories of
    the deterministic metrics the domain adds) and ``bands`` (the lowest "excellent" and "good"
    relevance values, see :func:`relevance_band`).

    ``levels`` and ``checks`` left None are read from the metrics: a metric's levels under this
    profile are its class's :attr:`~ragmeter.metrics.base.Metric.profile_levels` for the profile's
    name, and the checks are the registered metrics whose class names the profile in
    :attr:`~ragmeter.metrics.base.Metric.profile_checks` (the built-in profiles hold no table of
    their own)."""

    name: str
    levels: Mapping[str, tuple[float, float]] | None = None
    checks: tuple[Callable[[], Metric], ...] | None = None
    description: str = ""
    bands: tuple[float, float] = (0.8, 0.5)

    def apply(self, metric: Metric) -> Metric:
        """``metric`` with this profile's levels for its name (itself when the profile sets none)."""
        if self.levels is not None:
            levels = self.levels.get(metric.name)
        else:
            levels = metric.profile_levels.get(self.name)
        return metric.with_levels(*levels) if levels else metric

    def check_factories(self) -> tuple[Callable[[], Metric], ...]:
        """The checks this profile adds: ``checks``, else the registered metrics that name it."""
        if self.checks is not None:
            return self.checks
        return tuple(cls for cls in metric_classes().values() if self.name in cls.profile_checks)

    def metrics(self, metrics: Sequence[Any] | None = None) -> list[Metric]:
        """``metrics`` (names or Metric objects; None: the default metrics; the names of the
        profile's checks, such as ``"legal_citations"``, work too) with this profile's levels,
        followed by the profile's checks that are not already among them."""
        checks = {c.name: c for c in (self.apply(make()) for make in self.check_factories())}
        out = [
            checks[m] if isinstance(m, str) and m in checks else self.apply(get_metric(m))
            for m in (DEFAULT_METRICS if metrics is None else metrics)
        ]
        names = {m.name for m in out}
        return out + [c for name, c in checks.items() if name not in names]


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("default", {}, (), "each metric's own levels, no extra checks"),
        Profile(
            "legal",
            description="stricter support and citation levels; case and statute citations checked against the chunks",
            bands=(0.9, 0.7),
        ),
        Profile(
            "medical",
            description="faithfulness above 0.9; dosage / treatment advice needs a source and a safety caveat",
            bands=(0.9, 0.7),
        ),
    )
}


def get_profile(name: str | Profile) -> Profile:
    """The profile called ``name`` (a :class:`Profile` passes through); ValueError naming the known ones."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}") from None


def relevance_metrics() -> tuple[str, ...]:
    """The metrics whose values :func:`relevance_band` labels in reports: the registered metrics
    whose class sets :attr:`~ragmeter.metrics.base.Metric.banded` (``answer_relevancy``,
    ``context_relevance``)."""
    return tuple(name for name, cls in metric_classes().items() if cls.banded)


def relevance_band(value: float | None, profile: str | Profile = "default") -> str | None:
    """The relevance band of ``value`` under ``profile``: ``"excellent"`` when value >= the
    profile's first band level, ``"good"`` when >= the second, else ``"poor"``; None for None.

    Levels (``Profile.bands``): default excellent >= 0.8, good >= 0.5; legal and medical
    excellent >= 0.9, good >= 0.7. Meant for :func:`relevance_metrics` (a sample's value or a
    run's mean); the pass / warn / fail label of a Score stays the metric's own.

    >>> relevance_band(0.8), relevance_band(0.79), relevance_band(0.5), relevance_band(0.49)
    ('excellent', 'good', 'good', 'poor')
    >>> relevance_band(0.85, profile="legal")
    'good'
    """
    if value is None:
        return None
    excellent, good = get_profile(profile).bands
    return "excellent" if value >= excellent else "good" if value >= good else "poor"


def parse_citations(text: str, profile: str = "legal") -> list[LegalCitation]:
    """The domain citations in ``text`` for ``profile``: with ``"legal"``, cases, short forms,
    statutes and Id. (:func:`ragmeter.citations.legal_citations`), in order; other profiles have
    none (chunk citation markers such as "[1]" are :func:`ragmeter.citations.parse_citations`).

    >>> [c.key for c in parse_citations("Brown v. Board of Education, 347 U.S. 483, 495 (1954). Id. at 494.")]
    ['347 U.S. 483', '347 U.S. 483']
    """
    get_profile(profile)
    return legal_citations(text or "") if profile == "legal" else []
