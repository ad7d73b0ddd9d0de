"""The dashboard: one self-contained HTML page of runs and samples (no CDN, works offline).

>>> import ragmeter as rm
>>> from ragmeter.dashboard import render_result
>>> html = render_result(rm.evaluate("examples/rag_samples.jsonl", judge="offline"))  # doctest: +SKIP

:func:`render` takes many runs (:class:`RunEntry`, oldest first) and samples
(:class:`SampleEntry`, or a store's ``StoredSample``): a per-metric summary with pass / warn /
fail bars, trend lines per metric over runs and per day, distributions, and the worst samples
first with filters, sorting and a drill-down into the evidence. :func:`render_result` is the
page of one :class:`~ragmeter.EvaluationResult`, :func:`render_store` the page of a history
store (``ragmeter dashboard``).
"""

from ragmeter.dashboard.history import render_store
from ragmeter.dashboard.model import RunEntry, SampleEntry, Verdicts
from ragmeter.dashboard.page import render, render_result

__all__ = ["render", "render_result", "render_store", "RunEntry", "SampleEntry", "Verdicts"]
