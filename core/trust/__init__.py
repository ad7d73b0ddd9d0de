"""How far a score can be trusted (see DESIGN "Trust").

- :func:`trust_card` (CLI: ``ragmeter trust RESULTS --labels LABELS``): the judge against human
  labels per metric, with (cluster) bootstrap intervals, the mean corrected by the labels and
  a fitness verdict per use (:mod:`ragmeter.trust.card`);
- :func:`ppi_mean` / :func:`ppi_mean_diff`: prediction-powered estimates (PPI++) of a mean, and
  of the difference of two runs, in human units (:mod:`ragmeter.trust.ppi`);
  :func:`human_estimates`: one per labeled metric of a run;
- :func:`judge_changes`: whether two runs were judged by the same judge (its fingerprint,
  :mod:`ragmeter.judges.fingerprint`), field by field;
- :func:`check_anchors` (CLI: ``ragmeter trust check --anchors ANCHORS --judge SPEC``): a judge
  on a frozen labeled anchor set, and its drift between versions (:mod:`ragmeter.trust.anchors`).
"""

from ragmeter._lazy import lazy_getattr

_LAZY = {
    "AnchorCheck": "ragmeter.trust.anchors",
    "check_anchors": "ragmeter.trust.anchors",
    "judge_drift": "ragmeter.trust.anchors",
    "load_anchors": "ragmeter.trust.anchors",
    "USES": "ragmeter.trust.card",
    "TrustCard": "ragmeter.trust.card",
    "trust_card": "ragmeter.trust.card",
    "human_estimates": "ragmeter.trust.estimates",
    "describe_changes": "ragmeter.trust.judges",
    "judge_changes": "ragmeter.trust.judges",
    "PPIEstimate": "ragmeter.trust.ppi",
    "ppi_mean": "ragmeter.trust.ppi",
    "ppi_mean_diff": "ragmeter.trust.ppi",
}

__all__ = [
    "trust_card",
    "TrustCard",
    "USES",
    "ppi_mean",
    "ppi_mean_diff",
    "PPIEstimate",
    "human_estimates",
    "judge_changes",
    "describe_changes",
    "check_anchors",
    "load_anchors",
    "judge_drift",
    "AnchorCheck",
]

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__))
