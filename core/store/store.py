"""The :class:`Store`: record evaluation runs and inline-scored samples, read them back."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, NamedTuple

import sqlalchemy as sa
from ragmeter.data import RecordError
from ragmeter.judges.base import Usage
from ragmeter.privacy import for_output
from ragmeter.result import EvaluationResult, SampleResult
from ragmeter.store import codec
from ragmeter.store.engine import create_engine, database_url, environment_info, read, write
from ragmeter.store.schema import SCHEMA_VERSION, current_version, migrate, runs, samples, scores
from ragmeter.store.schema import labels as label_rows
from ragmeter.labels.io import Label
from sqlalchemy.engine import Connection

__all__ = ["Store", "RunInfo", "StoredSample", "TrendPoint"]

_LABELS = ("pass", "warn", "fail")
#: Score rows sent to the database in one executemany while a run is written.
_SCORE_BATCH = 1000
_process: tuple[int, str] | None = None


def process_token() -> str:
    """``host:pid:random`` naming this process (a new one after fork): the key of inline runs."""
    global _process
    pid = os.getpid()
    if _process is None or _process[0] != pid:
        _process = (pid, f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}")
    return _process[1]


@dataclass(frozen=True)
class RunInfo:
    """One stored run without its samples: when, what (``kind`` "evaluate" or "inline", the
    ``dataset``, the inline ``source`` and ``process``), which code (``app_version``,
    ``git_commit``), the ``judge``, ``metrics`` and ``thresholds``, the judge ``usage``, the
    ``duration_s``, ``tags`` and the number of ``samples``."""

    id: int
    created_at: datetime
    kind: str
    dataset: str | None
    source: str | None
    process: str | None
    app_version: str | None
    git_commit: str | None
    judge: str | None
    metrics: list[str]
    thresholds: dict[str, tuple[float, float]]
    usage: Usage
    duration_s: float
    tags: list[str]
    samples: int


@dataclass(frozen=True)
class StoredSample:
    """One stored sample: its row id, run, time (UTC), tags, the app's response time when the
    capture measured it (``latency_s``), and the :class:`~ragmeter.SampleResult` itself."""

    row_id: int
    run_id: int
    created_at: datetime
    tags: list[str]
    latency_s: float | None
    result: SampleResult


class TrendPoint(NamedTuple):
    """A metric over one run (``key`` = run id) or one UTC day (``key`` = ``"YYYY-MM-DD"``):
    the ``mean`` of its values (None when none), how many values (``count``), how many ``errors``."""

    key: int | str
    mean: float | None
    count: int
    errors: int


class Store:
    """Run and sample history in SQLite (a path, default ``$RAGMETER_DB`` or ``./ragmeter.db``)
    or PostgreSQL (a ``postgresql://`` URL). Opening creates or upgrades the schema.

    Thread-safe and safe for several processes on one SQLite file. Inline samples go into one
    run of kind ``"inline"`` per (``source``, process): a deployment's process is one run, its
    app version and commit recorded once; :meth:`metric_trend` with ``by="day"`` gives the time
    series across processes.
    """

    def __init__(self, url_or_path: str | os.PathLike | None = None):
        self.url = database_url(url_or_path)
        self.where = self.url.render_as_string(hide_password=True)
        self.engine = create_engine(self.url)
        self._dialect = self.engine.dialect.name
        self._text = codec.TextCleaner(self._dialect)
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._inline: dict[str, tuple[str, int]] = {}  # source -> (process token, run id)
        try:
            if read(self.engine, lambda conn: current_version(conn, self.where)) != SCHEMA_VERSION:
                write(self.engine, lambda conn: migrate(conn, self.where))
        except BaseException:
            self.engine.dispose()
            raise

    def __repr__(self) -> str:
        return f"Store({self.where!r})"

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections (the Store reconnects if used again)."""
        self.engine.dispose()

    def _engine(self) -> sa.Engine:
        if os.getpid() != self._pid:  # forked: never share the parent's connections
            self.engine.dispose(close=False)
            self._pid = os.getpid()
        return self.engine

    # ------------------------------------------------------------------ writing

    def record_run(self, result: EvaluationResult, dataset: str | None = None, tags: Iterable[str] | None = None, *,
                   source: str | None = None, app_version: str | None = None, git_commit: str | None = None,
                   kind: str = "evaluate") -> int:
        """Store an evaluation run with every sample and Score; returns the run id. The app
        version and git commit default to the environment's (see
        :func:`ragmeter.store.engine.environment_info`); ``tags`` label the run and each sample.
        ``kind``: ``"evaluate"``, or ``"sweep"`` for one setting of :func:`ragmeter.sweep` (its
        ``source`` names the sweep, its tags the setting)."""
        env, now, text = environment_info(), codec.naive_utc(), self._text
        tags = codec.tags_of(tags)

        def tx(conn: Connection) -> int:
            run_id = conn.execute(runs.insert(), {
                "created_at": now, "kind": kind, "dataset": text(dataset), "source": text(source), "process": None,
                "app_version": text(app_version or env["app_version"]), "git_commit": text(git_commit or env["git_commit"]),
                "judge": text(result.judge), "duration_s": float(result.duration_s), "tags": codec.dumps(tags),
                "settings": codec.dumps({"metrics": result.metrics, "thresholds": result.thresholds,
                                         **({"profile": result.profile} if result.profile else {})}),
                "usage": codec.dumps(result.usage.to_dict()),
                "invalid": codec.dumps([e.to_dict() for e in result.invalid])}).inserted_primary_key[0]
            self._insert(conn, run_id, result.results, tags, now)
            return run_id

        return write(self._engine(), tx)

    def record_samples(self, results: Iterable[SampleResult], source: str, *, tags: Iterable[str] | None = None,
                       judge: str | None = None, thresholds: dict[str, tuple[float, float]] | None = None) -> int | None:
        """Store inline-scored samples in one transaction, in this process's ``source`` run
        (created on first use); returns its id, None for an empty batch. Each sample's time is
        its ``metadata["started_at"]`` when the capture set one. Thread-safe; meant for the
        background scorer, never for a request path (a write may wait for other writers)."""
        batch = list(results)
        if not batch:
            return None
        tags, source = codec.tags_of(tags), self._text(source)
        with self._lock:
            return write(self._engine(), lambda conn: self._record_inline(conn, batch, source, tags, judge, thresholds))

    def _record_inline(self, conn: Connection, batch: list[SampleResult], source: str, tags: list[str],
                       judge: str | None, thresholds: dict | None) -> int:
        token, now = process_token(), codec.naive_utc()
        cols = (runs.c.id, runs.c.created_at, runs.c.settings, runs.c.usage, runs.c.judge)
        where = [runs.c.kind == "inline", runs.c.source == source, runs.c.process == token]
        cached = self._inline.get(source)
        if cached and cached[0] == token:
            where.append(runs.c.id == cached[1])
        run = conn.execute(sa.select(*cols).where(*where).order_by(runs.c.id).limit(1).with_for_update()).first()
        if run is None:
            env = environment_info()
            run_id = conn.execute(runs.insert(), {
                "created_at": now, "kind": "inline", "dataset": None, "source": source, "process": token,
                "app_version": self._text(env["app_version"]), "git_commit": self._text(env["git_commit"]), "judge": None,
                "duration_s": 0.0, "tags": codec.dumps(tags), "settings": codec.dumps({"metrics": [], "thresholds": {}}),
                "usage": "{}", "invalid": "[]"}).inserted_primary_key[0]
            run = conn.execute(sa.select(*cols).where(runs.c.id == run_id)).one()
        self._inline[source] = (token, run.id)
        settings = codec.loads(run.settings, {})
        names = list(settings.get("metrics") or [])
        names += [m for m in dict.fromkeys(m for r in batch for m in r.scores) if m not in names]
        settings = {"metrics": names, "thresholds": {**(settings.get("thresholds") or {}), **(thresholds or {})}}
        usage = Usage.from_dict(codec.loads(run.usage, {}))
        for r in batch:
            usage = usage + r.usage
        conn.execute(runs.update().where(runs.c.id == run.id).values(
            settings=codec.dumps(settings), usage=codec.dumps(usage.to_dict()),
            judge=run.judge or self._text(judge or codec.judge_of(batch)),
            duration_s=max(0.0, (now - run.created_at).total_seconds())))
        self._insert(conn, run.id, batch, tags, None)
        return run.id

    def _insert(self, conn: Connection, run_id: int, results: Iterable[SampleResult], tags: list[str],
                created_at: datetime | None) -> None:
        rows: list[dict] = []
        now = codec.naive_utc()
        for r in map(for_output, results):  # no secrets; no content when captured without
            at = created_at or codec.started_at(r.sample) or now
            row = codec.sample_row(r, run_id, at, codec.tags_of(tags, r.sample), self._text)
            row_id = conn.execute(samples.insert(), row).inserted_primary_key[0]
            rows += codec.score_rows(r, row_id, run_id, self._text)
            if len(rows) >= _SCORE_BATCH:  # memory bounded by the batch, not by the run
                conn.execute(scores.insert(), rows)
                rows = []
        if rows:
            conn.execute(scores.insert(), rows)

    # ------------------------------------------------------------------ reading

    def runs(self, limit: int | None = 50, *, kind: str | None = None, dataset: str | None = None) -> list[RunInfo]:
        """Stored runs, newest first (at most ``limit``; None for all), optionally of one
        ``kind`` ("evaluate" / "inline") or ``dataset``."""
        count = sa.select(sa.func.count()).where(samples.c.run_id == runs.c.id).scalar_subquery()
        q = sa.select(runs, count.label("n_samples")).order_by(runs.c.id.desc()).limit(limit)
        if kind is not None:
            q = q.where(runs.c.kind == kind)
        if dataset is not None:
            q = q.where(runs.c.dataset == dataset)
        return [_run_info(row) for row in read(self._engine(), lambda conn: conn.execute(q).all())]

    def run_info(self, run_id: int) -> RunInfo:
        """One run's :class:`RunInfo`; KeyError when there is no such run."""
        count = sa.select(sa.func.count()).where(samples.c.run_id == runs.c.id).scalar_subquery()
        q = sa.select(runs, count.label("n_samples")).where(runs.c.id == run_id)
        row = read(self._engine(), lambda conn: conn.execute(q).first())
        if row is None:
            raise KeyError(f"no run {run_id} in {self.where}")
        return _run_info(row)

    def run(self, run_id: int) -> EvaluationResult:
        """A stored run as the :class:`~ragmeter.EvaluationResult` that was recorded (every
        sample, Score with its details, usage and duration); KeyError when there is no such run."""
        def tx(conn: Connection):
            run = conn.execute(sa.select(runs).where(runs.c.id == run_id)).first()
            if run is None:
                return None
            rows = conn.execute(sa.select(samples).where(samples.c.run_id == run_id).order_by(samples.c.id)).all()
            score_rows = conn.execute(sa.select(scores).where(scores.c.run_id == run_id)
                                      .order_by(scores.c.sample_row_id, scores.c.id)).all()
            return run, rows, score_rows

        found = read(self._engine(), tx)
        if found is None:
            raise KeyError(f"no run {run_id} in {self.where}")
        run, rows, score_rows = found
        by_row: dict[int, list] = defaultdict(list)
        for s in score_rows:
            by_row[s.sample_row_id].append(s)
        settings = codec.loads(run.settings, {})
        invalid = [RecordError(e.get("location"), e.get("field"), e.get("message", "")) for e in codec.loads(run.invalid, [])]
        return EvaluationResult([codec.sample_result(row, by_row[row.id]) for row in rows],
                                settings.get("metrics") or [], judge=run.judge or "code", invalid=invalid,
                                duration_s=run.duration_s,
                                thresholds={k: tuple(v) for k, v in (settings.get("thresholds") or {}).items()},
                                profile=settings.get("profile"))

    def metric_trend(self, metric: str, by: str = "run", *, kind: str | None = None, dataset: str | None = None,
                     source: str | None = None, limit: int | None = None) -> list[TrendPoint]:
        """``metric`` per run (``by="run"``, oldest run first) or per UTC day of the samples'
        time (``by="day"``, e.g. inline samples): mean value, value count and error count.
        Filters: run ``kind``, ``dataset``, inline ``source``; ``limit`` keeps the latest points."""
        if by not in ("run", "day"):
            raise ValueError("by must be 'run' or 'day'")
        key = scores.c.run_id if by == "run" else sa.func.date(samples.c.created_at)
        errors = sa.func.sum(sa.case((scores.c.error.is_not(None), 1), else_=0))
        q = sa.select(key.label("key"), sa.func.avg(scores.c.value), sa.func.count(scores.c.value), errors)
        if by == "day":
            q = q.select_from(scores.join(samples, samples.c.id == scores.c.sample_row_id))
        filters = [(runs.c.kind, kind), (runs.c.dataset, dataset), (runs.c.source, source)]
        if any(value is not None for _, value in filters):
            q = q.join(runs, runs.c.id == scores.c.run_id)
            q = q.where(*[col == value for col, value in filters if value is not None])
        q = q.where(scores.c.metric == metric).group_by(key).order_by(key.desc()).limit(limit)
        rows = read(self._engine(), lambda conn: conn.execute(q).all())
        return [TrendPoint(k if by == "run" else str(k), None if mean is None else float(mean), int(n), int(e or 0))
                for k, mean, n, e in reversed(rows)]

    def samples(self, run_id: int | None = None, metric: str | None = None, label: str | None = None,
                worst_first: bool = True, limit: int | None = 100, *, tag: str | None = None) -> list[StoredSample]:
        """Stored samples. ``worst_first``: errors first, then the lowest value of ``metric``
        (or of the sample's worst metric), samples without a value last; otherwise newest first.
        Filters: ``run_id``, ``metric`` (samples scored on it), ``label`` (pass / warn / fail, on
        ``metric`` or on any metric), ``tag``."""
        if label is not None and label not in _LABELS:
            raise ValueError(f"label must be one of {_LABELS}")
        q = sa.select(samples)
        if metric is not None:
            s = scores.alias("s")
            q = q.join(s, (s.c.sample_row_id == samples.c.id) & (s.c.metric == metric))
            if label is not None:
                q = q.where(s.c.label == label)
            worst = (sa.case((s.c.error.is_not(None), 0), (s.c.value.is_(None), 2), else_=1), s.c.value)
        else:
            agg = sa.select(scores.c.sample_row_id.label("row"), sa.func.min(scores.c.value).label("worst"),
                            sa.func.sum(sa.case((scores.c.error.is_not(None), 1), else_=0)).label("errors"))
            if run_id is not None:
                agg = agg.where(scores.c.run_id == run_id)
            agg = agg.group_by(scores.c.sample_row_id).subquery()
            q = q.outerjoin(agg, agg.c.row == samples.c.id)
            if label is not None:
                q = q.where(sa.exists().where((scores.c.sample_row_id == samples.c.id) & (scores.c.label == label)))
            worst = (sa.case((agg.c.errors > 0, 0), (agg.c.worst.is_(None), 2), else_=1), agg.c.worst)
        if run_id is not None:
            q = q.where(samples.c.run_id == run_id)
        if tag is not None:
            find = sa.func.strpos if self._dialect == "postgresql" else sa.func.instr
            q = q.where(find(samples.c.tags, codec.dumps(tag)) > 0)
        q = q.order_by(*(worst if worst_first else ()), samples.c.id.desc()).limit(limit)

        def tx(conn: Connection):
            rows = conn.execute(q).all()
            ids = [row.id for row in rows]
            found: list = []
            for i in range(0, len(ids), 500):
                found += conn.execute(sa.select(scores).where(scores.c.sample_row_id.in_(ids[i:i + 500]))
                                      .order_by(scores.c.id)).all()
            return rows, found

        rows, score_rows = read(self._engine(), tx)
        by_row: dict[int, list] = defaultdict(list)
        for s in score_rows:
            by_row[s.sample_row_id].append(s)
        return [StoredSample(row.id, row.run_id, codec.utc(row.created_at), codec.loads(row.tags, []), row.latency_s,
                             codec.sample_result(row, by_row[row.id])) for row in rows]

    # ------------------------------------------------------------------ human labels

    def record_labels(self, labels: Iterable[Label], source: str | None = None) -> int:
        """Store human labels (:class:`ragmeter.labels.Label`); a label for a (sample, annotator,
        criterion) already stored replaces it. Returns the number stored."""
        text = self._text  # PostgreSQL text cannot hold NUL
        rows = {(text(lb.sample_id), text(lb.annotator), lb.criterion): lb.value for lb in labels}
        now = codec.naive_utc()

        def tx(conn: Connection) -> int:
            for sample_id, annotator, criterion in rows:
                conn.execute(label_rows.delete().where(label_rows.c.sample_id == sample_id,
                                                       label_rows.c.annotator == annotator,
                                                       label_rows.c.criterion == criterion))
            if rows:
                conn.execute(label_rows.insert(), [{"sample_id": k[0], "annotator": k[1], "criterion": k[2], "value": v,
                                                     "source": text(source), "created_at": now} for k, v in rows.items()])
            return len(rows)

        return write(self._engine(), tx)

    def labels(self, sample_id: str | None = None, criterion: str | None = None) -> list[Label]:
        """The stored human labels (optionally of one sample or one criterion), in import order."""
        q = sa.select(label_rows).order_by(label_rows.c.id)
        if sample_id is not None:
            q = q.where(label_rows.c.sample_id == sample_id)
        if criterion is not None:
            q = q.where(label_rows.c.criterion == criterion)
        rows = read(self._engine(), lambda conn: conn.execute(q).all())
        return [Label(r.sample_id, r.annotator, r.criterion, r.value) for r in rows]


def _run_info(row: Any) -> RunInfo:
    settings = codec.loads(row.settings, {})
    return RunInfo(id=row.id, created_at=codec.utc(row.created_at), kind=row.kind, dataset=row.dataset,
                   source=row.source, process=row.process, app_version=row.app_version, git_commit=row.git_commit,
                   judge=row.judge, metrics=list(settings.get("metrics") or []),
                   thresholds={k: tuple(v) for k, v in (settings.get("thresholds") or {}).items()},
                   usage=Usage.from_dict(codec.loads(row.usage, {})), duration_s=row.duration_s,
                   tags=codec.loads(row.tags, []), samples=row.n_samples)
