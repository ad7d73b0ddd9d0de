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

from ragmeter._lazy import lazy_getattr

_LAZY = {
    "render_store": "ragmeter.dashboard.history",
    "RunEntry": "ragmeter.dashboard.model",
    "SampleEntry": "ragmeter.dashboard.model",
    "Verdicts": "ragmeter.dashboard.model",
    "render": "ragmeter.dashboard.page",
    "render_result": "ragmeter.dashboard.page",
}

__all__ = ["render", "render_result", "render_store", "RunEntry", "SampleEntry", "Verdicts"]

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__))
