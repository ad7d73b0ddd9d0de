"""Internal: The store's tables (one SQLAlchemy Core definition for SQLite and PostgreSQL) and their
migrations.

``schema_version`` has one row per version the database went through (``version``,
``applied_at``); the highest is the database's version. Opening a database:

- without tables: every table is created at :data:`SCHEMA_VERSION`;
- at an older version: each later step of :data:`MIGRATIONS` runs, in order, in one transaction;
- at a newer version (written by a newer ragmeter): :class:`StoreVersionError`.

Migrations run under the write lock (SQLite ``BEGIN IMMEDIATE``, a PostgreSQL advisory lock),
so processes opening one database at once create or upgrade it exactly once. A migration step
is a function of a Connection that uses only portable DDL (SQLAlchemy ``Index.create``,
``ALTER TABLE ... ADD COLUMN`` with the type compiled for the dialect) and Python for data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ragmeter.store.engine import StoreError
from ragmeter.verdicts import latency_seconds

__all__ = [
    "metadata",
    "runs",
    "samples",
    "scores",
    "labels",
    "judges",
    "trust_cards",
    "anchor_results",
    "schema_version",
    "SCHEMA_VERSION",
    "MIGRATIONS",
    "StoreVersionError",
    "current_version",
    "migrate",
]

metadata = sa.MetaData()
_JSON = sa.Text  # JSON is stored as text (json.dumps, allow_nan=False): same on every database

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("created_at", sa.DateTime, nullable=False),  # UTC, naive
    sa.Column("kind", sa.String(16), nullable=False),  # "evaluate" | "inline"
    sa.Column("dataset", sa.String(512)),
    sa.Column("source", sa.String(64)),  # inline: langchain / llamaindex / otel
    sa.Column("process", sa.String(256)),  # inline: "host:pid:token"
    sa.Column("app_version", sa.String(128)),
    sa.Column("git_commit", sa.String(64)),
    sa.Column("judge", sa.String(256)),
    sa.Column("settings", _JSON, nullable=False),  # {"metrics": [...], "thresholds": {m: [t, w]}}
    sa.Column("usage", _JSON, nullable=False),  # Usage.to_dict()
    sa.Column("duration_s", sa.Double, nullable=False, default=0.0),
    sa.Column("tags", _JSON, nullable=False),  # ["tag", ...]
    sa.Column("invalid", _JSON, nullable=False),  # [RecordError.to_dict(), ...]
)

samples = sa.Table(
    "samples",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("sample_id", sa.String(256), nullable=False, index=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("answer", sa.Text),
    sa.Column("contexts", _JSON, nullable=False),  # [{"text", "id", "score", "metadata"}, ...]
    sa.Column("reference", sa.Text),
    sa.Column("relevant_ids", _JSON),
    sa.Column("metadata", _JSON, nullable=False),
    sa.Column("usage", _JSON, nullable=False),
    sa.Column("scoring_s", sa.Double, nullable=False, default=0.0),  # SampleResult.duration_s
    sa.Column("tags", _JSON, nullable=False),
    sa.Column("latency_s", sa.Double),  # v2: the app's response time
)

scores = sa.Table(
    "scores",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("sample_row_id", sa.Integer, sa.ForeignKey("samples.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("metric", sa.String(128), nullable=False),
    sa.Column("value", sa.Double),
    sa.Column("label", sa.String(8)),
    sa.Column("error", sa.Text),
    sa.Column("explanation", sa.Text, nullable=False),
    sa.Column("details", _JSON, nullable=False),
    sa.Column("judge", sa.String(256)),
    sa.Column("judge_fingerprint", sa.String(32)),  # v4: the judge's fingerprint id (judges.id)
)

judges = sa.Table(  # v4: judge fingerprints, content-addressed
    "judges",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True, autoincrement=False),
    sa.Column("fingerprint", _JSON, nullable=False),  # JudgeFingerprint.to_dict()
    sa.Column("created_at", sa.DateTime, nullable=False),
)


def _labels_table(meta: sa.MetaData, name: str, v3: bool = False) -> sa.Table:
    """The ``labels`` table: v3's (whole-number values, no answer hash) or v4's."""
    columns: list[sa.schema.SchemaItem] = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("sample_id", sa.String(256), nullable=False, index=True),  # the samples' sample_id (any run)
        sa.Column("annotator", sa.String(256), nullable=False),
        sa.Column("criterion", sa.String(64), nullable=False),  # a criterion or a metric name (v4)
        sa.Column("value", sa.Integer if v3 else sa.Double),  # NULL: the annotator left it out
    ]
    if not v3:
        columns += [
            sa.Column("answer_hash", sa.String(64)),  # the answer the label was given on
            sa.Column("cluster", sa.String(256)),  # document / conversation / query
            sa.Column("scale", sa.String(8)),
        ]  # binary / 1-5 / 0-1 (NULL: inferred)
    columns += [
        sa.Column("source", sa.String(512)),  # the file the label was imported from
        sa.Column("created_at", sa.DateTime, nullable=False),
    ]
    return sa.Table(name, meta, *columns)


labels = _labels_table(metadata, "labels")  # v3: human labels; v4: any scale, answer hash

trust_cards = sa.Table(  # v4: trust cards, stored with their run
    "trust_cards",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("card", _JSON, nullable=False),  # TrustCard.to_dict()
)

anchor_results = sa.Table(  # v4: a judge's results on an anchor set
    "anchor_results",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("anchor_set", sa.String(256), nullable=False),  # its name (the file's stem)
    sa.Column("anchor_hash", sa.String(64), nullable=False, index=True),  # its content (samples and labels)
    sa.Column("fingerprint", sa.String(32), nullable=False, index=True),  # the judge's fingerprint id
    sa.Column("judge", sa.String(256)),
    sa.Column("metric", sa.String(128), nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("mean", sa.Double),
    sa.Column("result", _JSON, nullable=False),  # statistics and per-item values
)

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.DateTime, nullable=False),
)

# v2 query indexes: trends read scores by (metric, run); day trends and "newest" read samples by time.
_V2_INDEXES = (
    sa.Index("ix_scores_metric_run", scores.c.metric, scores.c.run_id),
    sa.Index("ix_samples_created_at", samples.c.created_at),
)


class StoreVersionError(StoreError):
    """The database was written by a newer ragmeter (its schema version is above ours)."""


def _v2_latency_and_indexes(conn: Connection) -> None:
    """v1 -> v2: ``samples.latency_s`` (backfilled from each sample's metadata) and the query indexes."""
    column_type = sa.Double().compile(dialect=conn.dialect)
    conn.exec_driver_sql(f"ALTER TABLE samples ADD COLUMN latency_s {column_type}")
    rows = conn.execute(sa.select(samples.c.id, samples.c.metadata)).all()
    updates = [{"row": row_id, "latency": latency_seconds(json.loads(md))} for row_id, md in rows]
    updates = [u for u in updates if u["latency"] is not None]
    if updates:
        conn.execute(
            samples.update().where(samples.c.id == sa.bindparam("row")).values(latency_s=sa.bindparam("latency")),
            updates,
        )
    for index in _V2_INDEXES:
        index.create(conn)


def _v3_labels(conn: Connection) -> None:
    """v2 -> v3: the ``labels`` table (human ratings imported with ``ragmeter labels import``)."""
    _labels_table(sa.MetaData(), "labels", v3=True).create(conn)


def _v4_trust(conn: Connection) -> None:
    """v3 -> v4 (trust): the ``judges`` table and ``scores.judge_fingerprint``; ``labels`` rebuilt
    with real values (binary, 1-5 or 0-1), the answer's hash, a cluster and a scale (v3 labels
    keep their values; their answer is unknown); the ``trust_cards`` and ``anchor_results``
    tables."""
    column_type = sa.String(32).compile(dialect=conn.dialect)
    conn.exec_driver_sql(f"ALTER TABLE scores ADD COLUMN judge_fingerprint {column_type}")
    judges.create(conn)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"ALTER TABLE labels ALTER COLUMN value TYPE {sa.Double().compile(dialect=conn.dialect)}")
        for column in ("answer_hash", "cluster", "scale"):
            column_type = labels.c[column].type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE labels ADD COLUMN {column} {column_type}")
    else:  # SQLite cannot change a column's type: the table is rebuilt, its rows copied
        old = _labels_table(sa.MetaData(), "labels_v3", v3=True)
        for index in sa.inspect(conn).get_indexes("labels"):
            if index["name"] is not None:  # SQLite's indexes all have names
                conn.exec_driver_sql(f"DROP INDEX {conn.dialect.identifier_preparer.quote(index['name'])}")
        conn.exec_driver_sql("ALTER TABLE labels RENAME TO labels_v3")
        labels.create(conn)
        rows = conn.execute(sa.select(old).order_by(old.c.id)).mappings().all()
        if rows:
            conn.execute(labels.insert(), [dict(r) for r in rows])
        old.drop(conn)
    trust_cards.create(conn)
    anchor_results.create(conn)


#: ``MIGRATIONS[i]`` upgrades a database from version ``i + 1`` to ``i + 2``.
MIGRATIONS: list[Callable[[Connection], None]] = [_v2_latency_and_indexes, _v3_labels, _v4_trust]
SCHEMA_VERSION = len(MIGRATIONS) + 1


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _version(conn: Connection) -> int | None:
    if not sa.inspect(conn).has_table("schema_version"):
        return None
    return conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar()


def _check_not_newer(version: int | None, where: str) -> None:
    if version is not None and version > SCHEMA_VERSION:
        raise StoreVersionError(
            where,
            f"schema version {version}, newer than this ragmeter reads "
            f"({SCHEMA_VERSION}): upgrade ragmeter (pip install -U ragmeter)",
        )


def current_version(conn: Connection, where: str) -> int | None:
    """The database's schema version (None when it has no ragmeter tables yet); raises
    :class:`StoreVersionError` when it is newer than this ragmeter."""
    version = _version(conn)
    _check_not_newer(version, where)
    return version


def migrate(conn: Connection, where: str) -> int:
    """Create or upgrade the schema in ``conn``'s (write) transaction; returns the version now.
    ``where`` names the database in error messages."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(7140214)"))  # serialises concurrent openers
    version = current_version(conn, where)
    if version is None:
        if sa.inspect(conn).has_table("runs"):
            raise StoreError(where, "a 'runs' table but no ragmeter schema_version: not a ragmeter store")
        metadata.create_all(conn)
        conn.execute(schema_version.insert().values(version=SCHEMA_VERSION, applied_at=_utcnow()))
        return SCHEMA_VERSION
    for target in range(version + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[target - 2](conn)
        conn.execute(schema_version.insert().values(version=target, applied_at=_utcnow()))
    return SCHEMA_VERSION
