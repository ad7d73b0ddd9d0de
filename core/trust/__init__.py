"""How far a score can be trusted: the judge named on every score and compared between runs
(:func:`judge_changes`)."""

from ragmeter.trust.judges import describe_changes, judge_changes

__all__ = ["judge_changes", "describe_changes"]
