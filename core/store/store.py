"""Internal: The :class:`Store`: record evaluation runs and inline-scored samples, read them back."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from ragmeter.data import RecordError
from ragmeter.judges.base import Usage
from ragmeter.judges.fingerprint import JudgeFingerprint, fingerprints_of, lookup
from ragmeter.labels.io import Label
from ragmeter.metrics.scoring import SampleResult
from ragmeter.privacy import for_output
from ragmeter.result import EvaluationResult
from ragmeter.store import codec
from ragmeter.store.engine import StoreError, create_engine, database_url, environment_info, read, store_name, write
from ragmeter.store.schema import SCHEMA_VERSION, current_version, migrate, runs, samples, scores
from ragmeter.store.schema import anchor_results as anchor_rows
from ragmeter.store.schema import judges as judge_rows
from ragmeter.store.schema import labels as label_rows
from ragmeter.store.schema import trust_cards as card_rows

__all__ = ["Store", "RunInfo", "StoredSample", "TrendPoint", "load_run"]

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
    ``duration_s``, ``tags`` and the number of ``samples``. ``complete`` is False for a run still
    being written (``evaluate --db`` records its samples as they are scored) or one whose process
    was killed: ``evaluate --resume`` finishes it."""

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
    complete: bool = True


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


def _new_id(inserted: sa.CursorResult) -> int:
    """The primary key of the one row an INSERT added (SQLAlchemy types it as maybe None: it is
    None only for statements that are not a single-row INSERT)."""
    key = inserted.inserted_primary_key
    if key is None:
        raise RuntimeError("the INSERT returned no primary key")
    return key[0]


class TrendPoint(NamedTuple):
    """A metric over one run (``key`` = run id) or one UTC day (``key`` = ``"YYYY-MM-DD"``):
    the ``mean`` of its values (None when none), how many values (``count``), how many ``errors``."""

    key: int | str
    mean: float | None
    count: int  # type: ignore[assignment]  # a public field, named before it was seen to shadow tuple.count
    errors: int


class Store:
    """Run and sample history in SQLite (a path, default ``$RAGMETER_DB`` or ``./ragmeter.db``)
    or PostgreSQL (a ``postgresql://`` URL). Opening creates or upgrades the schema.

    Thread-safe and safe for several processes on one SQLite file. Inline samples go into one
    run of kind ``"inline"`` per (``source``, process): a deployment's process is one run, its
    app version and commit recorded once; :meth:`metric_trend` with ``by="day"`` gives the time
    series across processes.

    ``read_only=True`` never writes (SQLite: ``mode=ro``, ``immutable=1`` in a folder that
    cannot be written, see :mod:`ragmeter.store.engine`): a database that is missing or needs an
    upgrade is an error instead. ``where`` names the store in messages (password redacted).
    Database errors are :class:`~ragmeter.store.engine.StoreError` (one line: the store and the cause).
    """

    def __init__(self, url_or_path: str | os.PathLike | None = None, *, read_only: bool = False):
        self.url = database_url(url_or_path)
        self.where = store_name(self.url)
        self.read_only = read_only
        self.engine = create_engine(self.url, read_only=read_only)
        self._dialect = self.engine.dialect.name
        self._text = codec.TextCleaner(self._dialect)
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._inline: dict[str, tuple[str, int]] = {}  # source -> (process token, run id)
        try:
            version = read(self.engine, lambda conn: current_version(conn, self.where))
            if version != SCHEMA_VERSION and read_only:
                raise StoreError(
                    self.where,
                    "no ragmeter tables"
                    if version is None
                    else f"schema version {version}, older than this ragmeter reads ({SCHEMA_VERSION}); "
                    "opened read-only, so it cannot be upgraded here",
                )
            if version != SCHEMA_VERSION:
                write(self.engine, lambda conn: migrate(conn, self.where))
        except BaseException:
            self.engine.dispose()
            raise

    def __repr__(self) -> str:
        return f"Store({self.where!r})"

    def __enter__(self) -> Store:
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

    def record_run(
        self,
        result: EvaluationResult,
        dataset: str | None = None,
        tags: Iterable[str] | None = None,
        *,
        source: str | None = None,
        app_version: str | None = None,
        git_commit: str | None = None,
        kind: str = "evaluate",
    ) -> int:
        """Store an evaluation run with every sample and Score; returns the run id. The app
        version and git commit default to the environment's (see
        :func:`ragmeter.store.engine.environment_info`); ``tags`` label the run and each sample.
        ``kind``: ``"evaluate"``, or ``"sweep"`` for one setting of :func:`ragmeter.sweep` (its
        ``source`` names the sweep, its tags the setting)."""
        env, now, text = environment_info(), codec.naive_utc(), self._text
        tags = codec.tags_of(tags)

        def tx(conn: Connection) -> int:
            run_id = _new_id(
                conn.execute(
                    runs.insert(),
                    {
                        "created_at": now,
                        "kind": kind,
                        "dataset": text(dataset),
                        "source": text(source),
                        "process": None,
                        "app_version": text(app_version or env["app_version"]),
                        "git_commit": text(git_commit or env["git_commit"]),
                        "judge": text(result.judge),
                        "duration_s": float(result.duration_s),
                        "tags": codec.dumps(tags),
                        "settings": codec.dumps(
                            {
                                "metrics": result.metrics,
                                "thresholds": result.thresholds,
                                **({"profile": result.profile} if result.profile else {}),
                            }
                        ),
                        "usage": codec.dumps(result.usage.to_dict()),
                        "invalid": codec.dumps([e.to_dict() for e in result.invalid]),
                    },
                )
            )
            self._insert(conn, run_id, result.results, tags, now)
            self._insert_judges(conn, result.results, now)
            return run_id

        return write(self._engine(), tx)

    def record_samples(
        self,
        results: Iterable[SampleResult],
        source: str,
        *,
        tags: Iterable[str] | None = None,
        judge: str | None = None,
        thresholds: dict[str, tuple[float, float]] | None = None,
    ) -> int | None:
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

    def _record_inline(
        self,
        conn: Connection,
        batch: list[SampleResult],
        source: str,
        tags: list[str],
        judge: str | None,
        thresholds: dict | None,
    ) -> int:
        token, now = process_token(), codec.naive_utc()
        cols = (runs.c.id, runs.c.created_at, runs.c.settings, runs.c.usage, runs.c.judge)
        where = [runs.c.kind == "inline", runs.c.source == source, runs.c.process == token]
        cached = self._inline.get(source)
        if cached and cached[0] == token:
            where.append(runs.c.id == cached[1])
        run = conn.execute(sa.select(*cols).where(*where).order_by(runs.c.id).limit(1).with_for_update()).first()
        if run is None:
            env = environment_info()
            run_id = _new_id(
                conn.execute(
                    runs.insert(),
                    {
                        "created_at": now,
                        "kind": "inline",
                        "dataset": None,
                        "source": source,
                        "process": token,
                        "app_version": self._text(env["app_version"]),
                        "git_commit": self._text(env["git_commit"]),
                        "judge": None,
                        "duration_s": 0.0,
                        "tags": codec.dumps(tags),
                        "settings": codec.dumps({"metrics": [], "thresholds": {}}),
                        "usage": "{}",
                        "invalid": "[]",
                    },
                )
            )
            run = conn.execute(sa.select(*cols).where(runs.c.id == run_id)).one()
        self._inline[source] = (token, run.id)
        settings = codec.loads(run.settings, {})
        names = list(settings.get("metrics") or [])
        names += [m for m in dict.fromkeys(m for r in batch for m in r.scores) if m not in names]
        settings = {"metrics": names, "thresholds": {**(settings.get("thresholds") or {}), **(thresholds or {})}}
        usage = Usage.from_dict(codec.loads(run.usage, {}))
        for r in batch:
            usage = usage + r.usage
        conn.execute(
            runs.update()
            .where(runs.c.id == run.id)
            .values(
                settings=codec.dumps(settings),
                usage=codec.dumps(usage.to_dict()),
                judge=run.judge or self._text(judge or codec.judge_of(batch)),
                duration_s=max(0.0, (now - run.created_at).total_seconds()),
            )
        )
        self._insert(conn, run.id, batch, tags, None)
        self._insert_judges(conn, batch, now)
        return run.id

    def _insert_judges(self, conn: Connection, results: Iterable[SampleResult], now: datetime) -> None:
        """Store the fingerprints of the judges that scored ``results`` (those not stored yet;
        concurrent writers of one fingerprint store it once)."""
        self._insert_fingerprints(conn, (s.fingerprint for r in results for s in r.scores.values()), now)

    def _insert_fingerprints(self, conn: Connection, ids: Iterable[str | None], now: datetime) -> None:
        """Store the fingerprints with these ids that this process knows (see :meth:`_insert_judges`)."""
        table = fingerprints_of(ids)
        if not table:
            return
        have = {i for (i,) in conn.execute(sa.select(judge_rows.c.id).where(judge_rows.c.id.in_(list(table))))}
        rows = [
            {"id": i, "fingerprint": codec.dumps(fp), "created_at": now} for i, fp in table.items() if i not in have
        ]
        if rows:
            insert = (pg_insert if self._dialect == "postgresql" else sqlite_insert)(judge_rows)
            conn.execute(insert.on_conflict_do_nothing(index_elements=["id"]), rows)

    def _insert(
        self,
        conn: Connection,
        run_id: int,
        results: Iterable[SampleResult],
        tags: list[str],
        created_at: datetime | None,
    ) -> None:
        rows: list[dict] = []
        now = codec.naive_utc()
        for r in map(for_output, results):  # no secrets; no content when captured without
            at = created_at or codec.started_at(r.sample) or now
            row = codec.sample_row(r, run_id, at, codec.tags_of(tags, r.sample), self._text)
            row_id = _new_id(conn.execute(samples.insert(), row))
            rows += codec.score_rows(r, row_id, run_id, self._text)
            if len(rows) >= _SCORE_BATCH:  # memory bounded by the batch, not by the run
                conn.execute(scores.insert(), rows)
                rows = []
        if rows:
            conn.execute(scores.insert(), rows)

    # ------------------------------------------------------------------ runs recorded as they go

    def begin_run(
        self,
        dataset: str | None,
        *,
        judge: str | None,
        metrics: list[str],
        thresholds: dict[str, tuple[float, float]],
        profile: str | None = None,
        key: str | None = None,
        tags: Iterable[str] | None = None,
        kind: str = "evaluate",
    ) -> int:
        """Start a run whose samples are added as they are scored (:meth:`add_results`); it is
        incomplete (:attr:`RunInfo.complete` False) until :meth:`finish_run`. ``key`` (e.g. the
        one a results file's header carries) finds it again with :meth:`find_run`. Returns its id."""
        env, now, text = environment_info(), codec.naive_utc(), self._text
        settings = {
            "metrics": list(metrics),
            "thresholds": thresholds,
            **({"profile": profile} if profile else {}),
            "incomplete": True,
            **({"key": key} if key else {}),
        }
        row = {
            "created_at": now,
            "kind": kind,
            "dataset": text(dataset),
            "source": None,
            "process": None,
            "app_version": text(env["app_version"]),
            "git_commit": text(env["git_commit"]),
            "judge": text(judge),
            "duration_s": 0.0,
            "tags": codec.dumps(codec.tags_of(tags)),
            "settings": codec.dumps(settings),
            "usage": codec.dumps(Usage().to_dict()),
            "invalid": "[]",
        }
        return write(self._engine(), lambda conn: _new_id(conn.execute(runs.insert(), row)))

    def add_results(self, run_id: int, results: Iterable[SampleResult]) -> None:
        """Add scored samples to run ``run_id`` (begun with :meth:`begin_run`) in one transaction,
        with the run's time and tags; the run's usage grows by theirs."""
        batch = list(results)
        if not batch:
            return

        def tx(conn: Connection) -> None:
            run = self._run_row(conn, run_id)
            usage = Usage.from_dict(codec.loads(run.usage, {}))
            for r in batch:
                usage = usage + r.usage
            conn.execute(runs.update().where(runs.c.id == run_id).values(usage=codec.dumps(usage.to_dict())))
            self._insert(conn, run_id, batch, codec.loads(run.tags, []), run.created_at)
            self._insert_judges(conn, batch, codec.naive_utc())

        write(self._engine(), tx)

    def finish_run(self, run_id: int, result: EvaluationResult) -> int:
        """Make run ``run_id`` hold ``result`` and mark it complete, in one transaction: the samples
        (by id) and scores not stored yet are added (what a killed process or a failed write left
        out; nothing is stored twice), and the metrics, thresholds, judge, usage, duration and
        invalid records are ``result``'s. Returns how many samples were added."""

        def tx(conn: Connection) -> int:
            run = self._run_row(conn, run_id)
            rows: dict[str, int] = dict(
                conn.execute(sa.select(samples.c.sample_id, samples.c.id).where(samples.c.run_id == run_id)).all()
            )
            have = set(
                conn.execute(sa.select(scores.c.sample_row_id, scores.c.metric).where(scores.c.run_id == run_id)).all()
            )
            tags, added, missing, extra = codec.loads(run.tags, []), 0, [], []
            for r in result.results:
                row_id = rows.get(self._text(str(r.sample.id)))
                if row_id is None:
                    missing.append(r)
                else:
                    extra += [
                        s for s in codec.score_rows(r, row_id, run_id, self._text) if (row_id, s["metric"]) not in have
                    ]
                if len(missing) >= _SCORE_BATCH:
                    self._insert(conn, run_id, missing, tags, run.created_at)
                    added, missing = added + len(missing), []
            self._insert(conn, run_id, missing, tags, run.created_at)
            if extra:
                conn.execute(scores.insert(), extra)
            self._insert_judges(conn, result.results, codec.naive_utc())
            settings = {
                **codec.loads(run.settings, {}),
                "metrics": result.metrics,
                "thresholds": result.thresholds,
                **({"profile": result.profile} if result.profile else {}),
            }
            settings.pop("incomplete", None)
            conn.execute(
                runs.update()
                .where(runs.c.id == run_id)
                .values(
                    judge=self._text(result.judge),
                    settings=codec.dumps(settings),
                    duration_s=float(result.duration_s),
                    usage=codec.dumps(result.usage.to_dict()),
                    invalid=codec.dumps([e.to_dict() for e in result.invalid]),
                )
            )
            return added + len(missing)

        return write(self._engine(), tx)

    def find_run(self, *, key: str | None = None, dataset: str | None = None, kind: str = "evaluate") -> RunInfo | None:
        """The newest run of ``kind`` begun with ``key`` (see :meth:`begin_run`), or else, without a
        key, the newest of ``dataset``; None when there is none."""
        count = sa.select(sa.func.count()).where(samples.c.run_id == runs.c.id).scalar_subquery()
        q = sa.select(runs, count.label("n_samples")).where(runs.c.kind == kind).order_by(runs.c.id.desc())
        if key is not None:
            find = sa.func.strpos if self._dialect == "postgresql" else sa.func.instr
            q = q.where(find(runs.c.settings, codec.dumps({"key": key})[1:-1]) > 0)
        elif dataset is not None:
            q = q.where(runs.c.dataset == dataset)
        for row in read(self._engine(), lambda conn: conn.execute(q.limit(20)).all()):
            if key is None or codec.loads(row.settings, {}).get("key") == key:
                return _run_info(row)
        return None

    def sample_ids(self, run_id: int) -> set[str]:
        """The ids of the samples stored in run ``run_id``."""
        q = sa.select(samples.c.sample_id).where(samples.c.run_id == run_id)
        return set(read(self._engine(), lambda conn: conn.execute(q).scalars().all()))

    def _run_row(self, conn: Connection, run_id: int) -> Any:
        run = conn.execute(sa.select(runs).where(runs.c.id == run_id).with_for_update()).first()
        if run is None:
            raise StoreError(self.where, f"no run {run_id}")
        return run

    # ------------------------------------------------------------------ reading

    def runs(
        self, limit: int | None = 50, *, kind: str | None = None, dataset: str | None = None, tag: str | None = None
    ) -> list[RunInfo]:
        """Stored runs, newest first (at most ``limit``; None for all), optionally of one
        ``kind`` ("evaluate" / "inline" / "sweep"), ``dataset`` or run ``tag``."""
        count = sa.select(sa.func.count()).where(samples.c.run_id == runs.c.id).scalar_subquery()
        q = sa.select(runs, count.label("n_samples")).order_by(runs.c.id.desc()).limit(limit)
        if kind is not None:
            q = q.where(runs.c.kind == kind)
        if dataset is not None:
            q = q.where(runs.c.dataset == dataset)
        if tag is not None:
            find = sa.func.strpos if self._dialect == "postgresql" else sa.func.instr
            q = q.where(find(runs.c.tags, codec.dumps(tag)) > 0)
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
            score_rows = conn.execute(
                sa.select(scores).where(scores.c.run_id == run_id).order_by(scores.c.sample_row_id, scores.c.id)
            ).all()
            return run, rows, score_rows

        found = read(self._engine(), tx)
        if found is None:
            raise KeyError(f"no run {run_id} in {self.where}")
        run, rows, score_rows = found
        self.judges({s.judge_fingerprint for s in score_rows if s.judge_fingerprint})
        by_row: dict[int, list] = defaultdict(list)
        for s in score_rows:
            by_row[s.sample_row_id].append(s)
        settings = codec.loads(run.settings, {})
        invalid = [
            RecordError(e.get("location"), e.get("field"), e.get("message", "")) for e in codec.loads(run.invalid, [])
        ]
        return EvaluationResult(
            [codec.sample_result(row, by_row[row.id]) for row in rows],
            settings.get("metrics") or [],
            judge=run.judge or "code",
            invalid=invalid,
            duration_s=run.duration_s,
            thresholds={k: tuple(v) for k, v in (settings.get("thresholds") or {}).items()},
            profile=settings.get("profile"),
        )

    def metric_trend(
        self,
        metric: str,
        by: str = "run",
        *,
        kind: str | None = None,
        dataset: str | None = None,
        source: str | None = None,
        limit: int | None = None,
    ) -> list[TrendPoint]:
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
        return [
            TrendPoint(k if by == "run" else str(k), None if mean is None else float(mean), int(n), int(e or 0))
            for k, mean, n, e in reversed(rows)
        ]

    def samples(
        self,
        run_id: int | None = None,
        metric: str | None = None,
        label: str | None = None,
        worst_first: bool = True,
        limit: int | None = 100,
        *,
        tag: str | None = None,
    ) -> list[StoredSample]:
        """Stored samples. ``worst_first``: errors first, then the lowest value of ``metric``
        (or of the sample's worst metric), samples without a value last; otherwise newest first.
        Filters: ``run_id``, ``metric`` (samples scored on it), ``label`` (pass / warn / fail, on
        ``metric`` or on any metric), ``tag``."""
        if label is not None and label not in _LABELS:
            raise ValueError(f"label must be one of {_LABELS}")
        q = sa.select(samples)
        worst: tuple[Any, Any]  # (the case, the value) to order by
        if metric is not None:
            s = scores.alias("s")
            q = q.join(s, (s.c.sample_row_id == samples.c.id) & (s.c.metric == metric))
            if label is not None:
                q = q.where(s.c.label == label)
            worst = (sa.case((s.c.error.is_not(None), 0), (s.c.value.is_(None), 2), else_=1), s.c.value)
        else:
            agg = sa.select(
                scores.c.sample_row_id.label("row"),
                sa.func.min(scores.c.value).label("worst"),
                sa.func.sum(sa.case((scores.c.error.is_not(None), 1), else_=0)).label("errors"),
            )
            if run_id is not None:
                agg = agg.where(scores.c.run_id == run_id)
            per_row = agg.group_by(scores.c.sample_row_id).subquery()
            q = q.outerjoin(per_row, per_row.c.row == samples.c.id)
            if label is not None:
                q = q.where(sa.exists().where((scores.c.sample_row_id == samples.c.id) & (scores.c.label == label)))
            worst = (sa.case((per_row.c.errors > 0, 0), (per_row.c.worst.is_(None), 2), else_=1), per_row.c.worst)
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
                found += conn.execute(
                    sa.select(scores).where(scores.c.sample_row_id.in_(ids[i : i + 500])).order_by(scores.c.id)
                ).all()
            return rows, found

        rows, score_rows = read(self._engine(), tx)
        by_row: dict[int, list] = defaultdict(list)
        for s in score_rows:
            by_row[s.sample_row_id].append(s)
        return [
            StoredSample(
                row.id,
                row.run_id,
                codec.utc(row.created_at),
                codec.loads(row.tags, []),
                row.latency_s,
                codec.sample_result(row, by_row[row.id]),
            )
            for row in rows
        ]

    def judges(self, ids: Iterable[str] | None = None) -> dict[str, JudgeFingerprint]:
        """The stored judge fingerprints (``ids``: only these), registered in this process so the
        Scores' ``fingerprint`` ids resolve (:func:`ragmeter.judges.fingerprint.lookup`)."""
        q = sa.select(judge_rows)
        if ids is not None:
            ids = [i for i in ids if lookup(i) is None]  # the ones this process knows need no query
            if not ids:
                return {}
            q = q.where(judge_rows.c.id.in_(ids))
        rows = read(self._engine(), lambda conn: conn.execute(q).all())
        out = {}
        for row in rows:
            try:
                out[row.id] = JudgeFingerprint.from_dict({**codec.loads(row.fingerprint, {}), "id": row.id})
            except ValueError:
                continue  # written by a newer ragmeter with fields this one does not read
        return out

    def run_fingerprints(self, run_id: int) -> dict[str, list[str]]:
        """Metric -> the fingerprint ids of the judges that scored it in run ``run_id``, most
        scores first (one query; no sample is read)."""
        q = (
            sa.select(scores.c.metric, scores.c.judge_fingerprint, sa.func.count())
            .where(scores.c.run_id == run_id, scores.c.judge_fingerprint.is_not(None))
            .group_by(scores.c.metric, scores.c.judge_fingerprint)
        )
        rows = read(self._engine(), lambda conn: conn.execute(q).all())
        out: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for metric, fid, n in rows:
            out[metric].append((-int(n), fid))
        return {m: [fid for _, fid in sorted(v)] for m, v in out.items()}

    # ------------------------------------------------------------------ trust

    def record_trust_card(self, run_id: int, card: dict) -> int:
        """Store a trust card (:meth:`ragmeter.trust.TrustCard.to_dict`) with run ``run_id``;
        returns its id. KeyError when there is no such run."""
        self.run_info(run_id)
        now = codec.naive_utc()
        return write(
            self._engine(),
            lambda conn: _new_id(
                conn.execute(card_rows.insert(), {"run_id": run_id, "created_at": now, "card": codec.dumps(card)})
            ),
        )

    def trust_card(self, run_id: int) -> dict | None:
        """The newest trust card stored with run ``run_id`` (its dict), None when it has none."""
        q = sa.select(card_rows.c.card).where(card_rows.c.run_id == run_id).order_by(card_rows.c.id.desc()).limit(1)
        text = read(self._engine(), lambda conn: conn.execute(q).scalar())
        return codec.loads(text) if text is not None else None

    def record_anchor_results(
        self, anchor_set: str, anchor_hash: str, fingerprint: str, judge: str | None, results: dict[str, dict]
    ) -> None:
        """Store one judge's results on an anchor set (:func:`ragmeter.trust.check_anchors`): one
        row per metric (``n``, ``mean`` and the rest of the metric's ``results`` as JSON), all
        with the same time, and the judge's fingerprint (so a later check in another process can
        say which of its fields changed)."""
        now, text = codec.naive_utc(), self._text
        rows = [
            {
                "created_at": now,
                "anchor_set": text(anchor_set),
                "anchor_hash": anchor_hash,
                "fingerprint": fingerprint,
                "judge": text(judge),
                "metric": text(metric),
                "n": int(r["n"]),
                "mean": r["mean"],
                "result": codec.dumps({k: v for k, v in r.items() if k not in ("n", "mean")}),
            }
            for metric, r in results.items()
        ]

        def tx(conn: Connection) -> None:
            conn.execute(anchor_rows.insert(), rows)
            self._insert_fingerprints(conn, [fingerprint], now)

        if rows:
            write(self._engine(), tx)

    def anchor_results(self, anchor_hash: str | None = None) -> list[dict]:
        """Stored anchor results, newest first (optionally of one anchor set): dicts of
        ``anchor_set``, ``anchor_hash``, ``fingerprint``, ``judge``, ``metric``, ``n``, ``mean``,
        ``created_at`` (UTC, ISO text; one check's rows share it) and the stored statistics and
        ``values`` (sample id -> the judge's value). The fingerprints are registered."""
        q = sa.select(anchor_rows).order_by(anchor_rows.c.id.desc())
        if anchor_hash is not None:
            q = q.where(anchor_rows.c.anchor_hash == anchor_hash)
        rows = read(self._engine(), lambda conn: conn.execute(q).all())
        self.judges({r.fingerprint for r in rows})
        return [
            {
                **codec.loads(r.result, {}),
                "anchor_set": r.anchor_set,
                "anchor_hash": r.anchor_hash,
                "fingerprint": r.fingerprint,
                "judge": r.judge,
                "metric": r.metric,
                "n": r.n,
                "mean": r.mean,
                "created_at": codec.utc(r.created_at).isoformat(timespec="microseconds"),
            }
            for r in rows
        ]

    # ------------------------------------------------------------------ human labels

    def record_labels(self, labels: Iterable[Label], source: str | None = None) -> int:
        """Store human labels (:class:`ragmeter.labels.Label`: value, answer hash, cluster,
        scale); a label for a (sample, answer, annotator, criterion) already stored replaces it.
        Returns the number stored."""
        text = self._text  # PostgreSQL text cannot hold NUL
        rows = {(text(lb.sample_id), lb.answer_hash, text(lb.annotator), text(lb.criterion)): lb for lb in labels}
        now = codec.naive_utc()

        def tx(conn: Connection) -> int:
            for sample_id, hashed, annotator, criterion in rows:
                conn.execute(
                    label_rows.delete().where(
                        label_rows.c.sample_id == sample_id,
                        label_rows.c.annotator == annotator,
                        label_rows.c.criterion == criterion,
                        label_rows.c.answer_hash.is_(None) if hashed is None else label_rows.c.answer_hash == hashed,
                    )
                )
            if rows:
                conn.execute(
                    label_rows.insert(),
                    [
                        {
                            "sample_id": k[0],
                            "answer_hash": k[1],
                            "annotator": k[2],
                            "criterion": k[3],
                            "value": None if lb.value is None else float(lb.value),
                            "cluster": text(lb.cluster),
                            "scale": lb.scale,
                            "source": text(source),
                            "created_at": now,
                        }
                        for k, lb in rows.items()
                    ],
                )
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
        return [
            Label(
                r.sample_id,
                r.annotator,
                r.criterion,
                _number(r.value),
                r.answer_hash,
                r.cluster,
                r.scale,
                where=f"stored label {r.id}" + (f" ({r.source})" if r.source else ""),
            )
            for r in rows
        ]


def _number(value: float | None) -> float | int | None:
    """A stored label value: whole numbers as int (a 1-5 rating reads back as 4, not 4.0)."""
    return None if value is None else (int(value) if float(value).is_integer() else float(value))


def _run_info(row: Any) -> RunInfo:
    settings = codec.loads(row.settings, {})
    return RunInfo(
        id=row.id,
        created_at=codec.utc(row.created_at),
        kind=row.kind,
        dataset=row.dataset,
        source=row.source,
        process=row.process,
        app_version=row.app_version,
        git_commit=row.git_commit,
        judge=row.judge,
        metrics=list(settings.get("metrics") or []),
        thresholds={k: tuple(v) for k, v in (settings.get("thresholds") or {}).items()},
        usage=Usage.from_dict(codec.loads(row.usage, {})),
        duration_s=row.duration_s,
        tags=codec.loads(row.tags, []),
        samples=row.n_samples,
        complete=not settings.get("incomplete"),
    )


def load_run(ref: Any, db: str | os.PathLike | None = None) -> tuple[EvaluationResult, str]:
    """``(result, name)`` for an :class:`EvaluationResult`, a results file (``.jsonl`` / ``.json``),
    or a run in the store at ``db`` (default ``$RAGMETER_DB``, else ``ragmeter.db``): a run id,
    or a tag (the newest run tagged with it). Raises ValueError / KeyError / OSError naming what
    was not found."""
    if isinstance(ref, EvaluationResult):
        return ref, "run"
    text = str(ref)
    path = Path(text)
    if path.suffix.lower() in (".jsonl", ".json") or path.exists():
        return EvaluationResult.load(path), path.name
    db = db or os.environ.get("RAGMETER_DB")
    if not db and not Path("ragmeter.db").exists():
        raise FileNotFoundError(
            f"{text}: no such results file, and no history store to look it up in (give --db / db=, or set RAGMETER_DB)"
        )
    with Store(db) as store:
        if text.isdigit():
            return store.run(int(text)), f"run {text}"
        tagged = [r for r in store.runs(limit=None) if text in r.tags]
        if not tagged:
            raise KeyError(f"{text!r} is neither a results file nor a run id or tag in {store.where}")
        return store.run(tagged[0].id), f"run {tagged[0].id} ({text})"
