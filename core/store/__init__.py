"""Run and sample history: every evaluation run and every inline-scored sample, kept.

>>> from ragmeter.store import Store
>>> store = Store()                                  # $RAGMETER_DB, else ./ragmeter.db  # doctest: +SKIP
>>> run_id = store.record_run(rm.evaluate("examples/rag_samples.jsonl"), dataset="rag_samples")  # doctest: +SKIP
>>> store.metric_trend("faithfulness")               # [(run id, mean, count, errors), ...]  # doctest: +SKIP

A file path is a SQLite database (WAL mode, busy timeout, writes retried while another process
holds the lock, so several processes can share one file); a ``postgresql://`` URL is PostgreSQL
through psycopg 3 (``pip install 'ragmeter[postgres]'``). Both use one SQLAlchemy Core schema:

``runs``
    ``id``, ``created_at`` (UTC), ``kind`` (``"evaluate"`` for :meth:`Store.record_run`,
    ``"inline"`` for :meth:`Store.record_samples`, ``"sweep"`` for a setting of :func:`ragmeter.sweep`:
    ``source`` ``"sweep:<id>"`` groups a sweep's settings, tags ``"<param>=<value>"`` name one), ``dataset``, ``source`` and ``process``
    (inline: the capture and ``host:pid:token``), ``app_version`` and ``git_commit`` (from
    ``RAGMETER_APP_VERSION`` / ``GIT_COMMIT``, ``GITHUB_SHA``, ``CI_COMMIT_SHA``, ...), ``judge``,
    ``settings`` (JSON: metric names and their pass / warn thresholds), ``usage`` (JSON: judge
    calls, tokens, cost), ``duration_s``, ``tags`` (JSON list), ``invalid`` (JSON: the input
    records that could not be loaded).
``samples``
    one row per scored sample: ``run_id``, ``sample_id``, ``created_at`` (the run's time, or an
    inline sample's ``metadata["started_at"]``), ``question``, ``answer``, ``contexts`` (JSON:
    text, id, retriever score, metadata per chunk, in retrieval order), ``reference``,
    ``relevant_ids`` (JSON), ``metadata`` (JSON), ``usage`` (JSON), ``scoring_s`` (time spent
    scoring), ``latency_s`` (the app's response time, when the capture measured it), ``tags``.
``scores``
    one row per (sample, metric): ``sample_row_id``, ``run_id``, ``metric``, ``value`` (NULL when
    it could not be computed or does not apply), ``label``, ``error``, ``explanation``,
    ``details`` (JSON: the evidence), ``judge``, ``judge_fingerprint`` (v4: the judge's id in ``judges``).
``judges`` (v4)
    one row per judge fingerprint (:mod:`ragmeter.judges.fingerprint`): ``id``, ``fingerprint``
    (JSON: backend, model, endpoint, prompt versions, settings, rules, embedder, members).
``labels`` (v3; v4: any scale, the answer's hash)
    human labels: ``sample_id``, ``annotator``, ``criterion`` (or metric), ``value``,
    ``answer_hash`` (the answer it was given on), ``cluster``, ``scale``, ``source``.
``trust_cards`` (v4)
    trust cards (:mod:`ragmeter.trust.card`) stored with their run: ``run_id``, ``card`` (JSON).
``anchor_results`` (v4)
    a judge's results on an anchor set (:mod:`ragmeter.trust.anchors`): ``anchor_set``,
    ``anchor_hash``, ``fingerprint``, ``judge``, ``metric``, ``n``, ``mean``, ``result`` (JSON).
``schema_version``
    the versions the database went through; see :mod:`ragmeter.store.schema` for migrations.

Inline captures record through a :class:`~ragmeter.store.writer.StoreWriter` (``store=`` on the
LangChain handler, the LlamaIndex instrumentation, the span processor and
:class:`~ragmeter.inline.BackgroundScorer`): a bounded queue and one background thread, so a
store that waits for other writers never holds up a request.

JSON columns are text (portable, written with ``allow_nan=False``). Inline samples go into one run
per (source, process), so a deployment's app version and commit are stored once with its samples;
:meth:`Store.metric_trend` ``by="day"`` is the time series over all of them.
"""

from ragmeter._lazy import lazy_getattr

_LAZY = {
    "SCHEMA_VERSION": "ragmeter.store.schema",
    "StoreVersionError": "ragmeter.store.schema",
    "RunInfo": "ragmeter.store.store",
    "Store": "ragmeter.store.store",
    "StoredSample": "ragmeter.store.store",
    "TrendPoint": "ragmeter.store.store",
    "load_run": "ragmeter.store.store",
    "StoreWriter": "ragmeter.store.writer",
}

__all__ = [
    "Store",
    "StoreWriter",
    "RunInfo",
    "StoredSample",
    "TrendPoint",
    "StoreVersionError",
    "SCHEMA_VERSION",
    "load_run",
]

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted(set(globals()) | set(__all__))
