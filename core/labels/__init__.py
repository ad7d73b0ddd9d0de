"""Human evaluation: labeling tasks out, labels in, and agreement (between annotators, and
between the judge and the annotators).

>>> from ragmeter.labels import cohen_kappa, krippendorff_alpha
>>> cohen_kappa([1, 2, 3], [1, 3, 3], weights="quadratic")
0.8
>>> round(krippendorff_alpha([[1, 2, 3, None], [1, 2, 4, 2]], level="interval"), 3)
0.878

- :func:`export_tasks` writes tasks (.jsonl, .csv, or an offline .html labeling page) in review
  queue order (:func:`review_queue`), the judge's verdicts hidden unless asked;
- :func:`import_labels` reads completed labels (1-5 ratings of the page's criteria, or binary,
  1-5 or 0-1 labels of any metric, each with the hash of the answer it was given on);
  :meth:`ragmeter.store.Store.record_labels` keeps them; :func:`match_labels` says which count for
  a run (a label given on another answer does not);
- :func:`agreement_report` gives Krippendorff's alpha and Cohen's kappa with bootstrap intervals
  per criterion, and judge vs humans per metric (:func:`judge_vs_humans`); :func:`judge_leniency`
  tracks the judge's pass rate against the humans' run by run (drift towards leniency).
"""

from ragmeter._lazy import lazy_getattr

_MODULES = {
    "ragmeter.labels.agreement": (
        "alpha_with_ci",
        "balanced_accuracy",
        "bootstrap_ci",
        "cohen_kappa",
        "confusion",
        "judge_vs_humans",
        "kappa_with_ci",
        "krippendorff_alpha",
        "suggest_threshold",
    ),
    "ragmeter.labels.criteria": ("CRITERIA", "CRITERION_METRICS"),  # read from the registered metrics when asked
    "ragmeter.labels.io": ("Label", "LabelSet", "answer_hash", "import_labels"),
    "ragmeter.labels.matching": ("LabeledItem", "MatchedLabels", "match_labels"),
    "ragmeter.labels.report": ("agreement_report", "format_report", "judge_leniency"),
    "ragmeter.labels.tasks": ("export_tasks", "review_queue", "task_records"),
}
_LAZY = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "cohen_kappa",
    "krippendorff_alpha",
    "alpha_with_ci",
    "kappa_with_ci",
    "bootstrap_ci",
    "confusion",
    "balanced_accuracy",
    "suggest_threshold",
    "judge_vs_humans",
    "Label",
    "LabelSet",
    "answer_hash",
    "import_labels",
    "match_labels",
    "MatchedLabels",
    "LabeledItem",
    "agreement_report",
    "format_report",
    "judge_leniency",
    "CRITERIA",
    "CRITERION_METRICS",
    "export_tasks",
    "review_queue",
    "task_records",
]

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__))
