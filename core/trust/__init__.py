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

from ragmeter.trust.anchors import AnchorCheck, check_anchors, judge_drift, load_anchors
from ragmeter.trust.card import USES, TrustCard, trust_card
from ragmeter.trust.estimates import human_estimates
from ragmeter.trust.judges import describe_changes, judge_changes
from ragmeter.trust.ppi import PPIEstimate, ppi_mean, ppi_mean_diff

__all__ = ["trust_card", "TrustCard", "USES", "ppi_mean", "ppi_mean_diff", "PPIEstimate", "human_estimates",
           "judge_changes", "describe_changes", "check_anchors", "load_anchors", "judge_drift", "AnchorCheck"]
