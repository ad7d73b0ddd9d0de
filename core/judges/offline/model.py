"""Internal: The fitted combinations: the offline judge's signals turned into one score per judged item.

Three quantities are judged, each by its own combination (:class:`Combination`), fit on the human
labels of ``../shared/data`` by ``benchmarks/fit_offline.py`` and shipped as package data
(``data/combinations.json``):

- ``claim_support``: how well the chunks support a claim (faithfulness, citations);
- ``reference_coverage``: how well a text states a statement of another (a reference statement in
  the answer: answer correctness, response completeness, context recall; an answer's claim in the
  reference: answer correctness's precision);
- ``relevance``: how relevant a chunk's statement is to the question (context relevance and
  precision).

A combination is a logistic model over signals in [0, 1], ``p = 1 / (1 + exp(-(b + sum_k w_k
x_k)))``, each weight held to the sign the signal should have (more word overlap never lowers
support). The score an item gets is ``p`` rescaled to the model's own range and clipped to [0, 1],
``(p - p_0) / (p_max - p_0)``, where ``p_max`` is ``p`` with every signal at its favourable end (all
words stated, the rules' support, no check failed) and ``p_0`` with every signal at 0 (nothing of
the item found, no check failed): an item every signal supports scores 1.0, one nothing supports
0.0, and a failed check pulls an item towards 0. So the metrics' pass / warn thresholds keep reading
as shares of supported claims, covered statements or relevant text (a faithfulness of 0.9: about
nine in ten claims supported). The ranking is the model's (the rescaling is monotone; items at or
below ``p_0`` tie at 0). ``claim_support`` also carries a Platt map
(:meth:`Combination.confidence`): the probability that a human reader finds an answer of
faithfulness ``f`` (the mean claim score) fully supported, fit on the same labels.

Signals (:data:`SIGNALS`; what ``features`` on a verdict holds):
``overlap`` the share of the item's words (lower-case ``[a-z0-9]+``, 68 stop words left out) found
anywhere in the evidence: the trivial baseline itself, so a combination can fall back to it;
``coverage`` the share of the item's words, all but a few function words, stemmed, that the best
chunk states (respelled figures count); ``graded`` the graded support of the rules
(:func:`~ragmeter.judges.offline.verify.graded`); ``passage`` the word support of the best chunk
and passage (content stems, lifted by embedding similarity on the embedding path); ``window`` the
share of content stems in the best passage; ``supported`` / ``together`` / ``contradicted`` /
``unverified`` the rules' verdict (supported by one chunk, by the chunks together, contradicted,
left not found by a failed check); ``specifics`` / ``antonym`` / ``negation`` / ``alignment`` the
check that failed; for relevance ``question`` the share of the question's content stems in the
statement, ``chunk`` in its chunk, ``relevant`` the rules' relevance and ``partial`` their graded
relevance; with a grounding model (:mod:`ragmeter.judges.offline.grounding`), ``entailment`` and
``contradiction``, its probabilities for the best passage and the claim.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.resources import files

__all__ = ["Combination", "Combinations", "SIGNALS", "QUANTITIES", "load_combinations", "DEFAULT_FILE"]

#: The signals a combination may read, with the sign its weight is held to (+1: more of it never
#: lowers the score; -1: never raises it).
SIGNALS: dict[str, int] = {
    "overlap": 1,
    "coverage": 1,
    "graded": 1,
    "passage": 1,
    "window": 1,
    "supported": 1,
    "together": 1,
    "contradicted": -1,
    "unverified": -1,
    "specifics": -1,
    "antonym": -1,
    "negation": -1,
    "alignment": -1,
    "question": 1,
    "chunk": 1,
    "relevant": 1,
    "partial": 1,
    "similarity": 1,
    "entailment": 1,
    "contradiction": -1,
}
#: The judged quantities, each with its own combination.
QUANTITIES = ("claim_support", "reference_coverage", "relevance")
#: The shipped coefficients (package data), written by ``benchmarks/fit_offline.py``.
DEFAULT_FILE = "combinations.json"


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _logit(p: float) -> float:
    p = min(1 - 1e-9, max(1e-9, p))
    return math.log(p / (1 - p))


@dataclass(frozen=True)
class Combination:
    """One fitted combination: ``weights`` (signal -> weight, each of its :data:`SIGNALS` sign),
    ``intercept``, and for claim support ``calibration`` = (a, c) of the Platt map
    ``confidence = 1 / (1 + exp(-(a * logit(p) + c)))`` of an answer's mean probability ``p``.

    >>> m = Combination("claim_support", {"overlap": 4.0, "contradicted": -2.0}, -2.0)
    >>> round(m.probability({"overlap": 1.0}), 4), m.score({"overlap": 1.0}), m.score({"overlap": 0.0})
    (0.8808, 1.0, 0.0)
    >>> m.score({"overlap": 0.5}), m.score({"overlap": 1.0, "contradicted": 1.0})
    (0.5, 0.5)
    """

    quantity: str
    weights: Mapping[str, float]
    intercept: float
    calibration: tuple[float, float] | None = None
    #: Claim support: the confidence ``max(p, 1 - p)`` of the development answers at the shares
    #: 0, 0.05, ..., 1 (its quantiles): where a cascade's cut falls for a share to route.
    routing: tuple[float, ...] | None = None
    #: Where the coefficients came from (the fit's command and data), shown in notes.
    source: str = ""
    #: The weights' total at each end of the signals' range (computed once).
    _span: tuple[float, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(SIGNALS))
        if unknown:
            raise ValueError(f"{self.quantity}: unknown signals {unknown}; known: {sorted(SIGNALS)}")
        for name, w in self.weights.items():
            if w * SIGNALS[name] < 0:
                raise ValueError(f"{self.quantity}: the weight of {name!r} must have sign {SIGNALS[name]:+d}, got {w}")
        high = sum(max(0.0, w) for w in self.weights.values())
        object.__setattr__(self, "_span", (_sigmoid(self.intercept), _sigmoid(self.intercept + high)))

    @property
    def signals(self) -> tuple[str, ...]:
        """The signals this combination reads."""
        return tuple(self.weights)

    def linear(self, x: Mapping[str, float]) -> float:
        """``b + sum_k w_k x_k`` (a missing signal counts 0)."""
        return self.intercept + sum(w * float(x.get(k, 0.0)) for k, w in self.weights.items())

    def probability(self, x: Mapping[str, float]) -> float:
        """The model's probability for signals ``x``."""
        return _sigmoid(self.linear(x))

    def rescale(self, p: float) -> float:
        """A probability of this model as a score in [0, 1]: ``(p - p_0) / (p_max - p_0)``, clipped."""
        low, high = self._span
        if high - low <= 1e-12:
            return 1.0 if p >= high else 0.0
        return min(1.0, max(0.0, (p - low) / (high - low)))

    def score(self, x: Mapping[str, float]) -> float:
        """The item's score in [0, 1] (:meth:`rescale` of :meth:`probability`), rounded to 4 places."""
        return round(self.rescale(self.probability(x)), 4)

    def confidence(self, value: float) -> float:
        """The calibrated probability that a human reader finds an answer whose mean item score is
        ``value`` fully supported (claim support only): the score mapped back to the model's
        probability, then the Platt map fit on the human labels."""
        if self.calibration is None:
            raise ValueError(f"the {self.quantity} combination has no calibration")
        low, high = self._span
        p = low + min(1.0, max(0.0, value)) * (high - low)
        a, c = self.calibration
        return round(_sigmoid(a * _logit(p) + c), 4)

    def routing_cut(self, share: float) -> float:
        """The confidence below which ``share`` of the development answers fall (claim support
        only; linear between the stored quantiles): a cascade's cut for routing that share.

        >>> m = Combination("claim_support", {"overlap": 1.0}, 0.0, (1.0, 0.0), routing=(0.5, 0.7, 1.0))
        >>> m.routing_cut(0.25)
        0.6
        """
        if self.routing is None:
            raise ValueError(f"the {self.quantity} combination has no routing quantiles")
        share = min(1.0, max(0.0, float(share)))
        grid = [k / (len(self.routing) - 1) for k in range(len(self.routing))]
        for k in range(1, len(grid)):
            if share <= grid[k]:
                t = (share - grid[k - 1]) / (grid[k] - grid[k - 1])
                return round(self.routing[k - 1] + t * (self.routing[k] - self.routing[k - 1]), 4)
        return float(self.routing[-1])

    def to_dict(self) -> dict:
        """The JSON form (what :func:`load_combinations` reads)."""
        out = {"weights": dict(self.weights), "intercept": self.intercept}
        if self.calibration is not None:
            out["calibration"] = list(self.calibration)
        if self.routing is not None:
            out["routing"] = list(self.routing)
        return out


@dataclass(frozen=True)
class Combinations:
    """The three combinations of one path (``lexical`` or ``embedding``) and where they came from."""

    claim_support: Combination
    reference_coverage: Combination
    relevance: Combination
    path: str = "lexical"
    source: str = ""

    def get(self, quantity: str) -> Combination:
        """The combination of ``quantity`` (one of :data:`QUANTITIES`)."""
        return getattr(self, quantity)


def _parse(data: dict, path: str, origin: str) -> Combinations:
    if path not in data:
        has = sorted(k for k in data if k in ("lexical", "embedding"))
        raise ValueError(f"{origin}: no coefficients for the {path!r} path (has: {has})")
    block = data[path]
    models = {}
    for q in QUANTITIES:
        if q not in block:
            raise ValueError(f"{origin}: the {path!r} path has no {q!r} combination")
        entry = block[q]
        cal = entry.get("calibration")
        routing = entry.get("routing")
        models[q] = Combination(
            q,
            {str(k): float(v) for k, v in entry["weights"].items()},
            float(entry["intercept"]),
            tuple(float(v) for v in cal) if cal is not None else None,  # type: ignore[arg-type]
            tuple(float(v) for v in routing) if routing is not None else None,
            source=str(data.get("source", "")),
        )
    if models["claim_support"].calibration is None or models["claim_support"].routing is None:
        raise ValueError(f"{origin}: the claim_support combination needs a 'calibration' and 'routing' quantiles")
    return Combinations(**models, path=path, source=str(data.get("source", "")))


@lru_cache(maxsize=8)
def _shipped(path: str) -> Combinations:
    text = files("ragmeter.judges.offline").joinpath("data", DEFAULT_FILE).read_text(encoding="utf-8")
    return _parse(json.loads(text), path, DEFAULT_FILE)


def load_combinations(path: str = "lexical", file: str | os.PathLike | None = None) -> Combinations:
    """The combinations of ``path`` ("lexical" or "embedding") from ``file`` (a JSON file written by
    ``benchmarks/fit_offline.py --out``), or the shipped ones when None. ValueError naming the file
    and what is wrong when it does not hold a valid set."""
    if file is None:
        return _shipped(path)
    with open(file, encoding="utf-8") as f:
        data = json.load(f)
    return _parse(data, path, str(file))
