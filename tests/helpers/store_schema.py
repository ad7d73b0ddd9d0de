"""The store's frozen version-1 schema and a reader of any database's schema, for the tests that
upgrade old databases (store/test_store_schema.py, trust/test_fingerprint.py)."""

from __future__ import annotations

import json
from datetime import datetime

import sqlalchemy as sa

from ragmeter.store.engine import create_engine, database_url

# ---------------------------------------------------------------- the v1 schema, frozen

V1 = sa.MetaData()
sa.Table(
    "runs",
    V1,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("dataset", sa.String(512)),
    sa.Column("source", sa.String(64)),
    sa.Column("process", sa.String(256)),
    sa.Column("app_version", sa.String(128)),
    sa.Column("git_commit", sa.String(64)),
    sa.Column("judge", sa.String(256)),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("usage", sa.Text, nullable=False),
    sa.Column("duration_s", sa.Double, nullable=False),
    sa.Column("tags", sa.Text, nullable=False),
    sa.Column("invalid", sa.Text, nullable=False),
)
sa.Table(
    "samples",
    V1,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("sample_id", sa.String(256), nullable=False, index=True),
    sa.Column("created_at", sa.DateTime, nullable=False),
    sa.Column("question", sa.Text, nullable=False),
    sa.Column("answer", sa.Text),
    sa.Column("contexts", sa.Text, nullable=False),
    sa.Column("reference", sa.Text),
    sa.Column("relevant_ids", sa.Text),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("usage", sa.Text, nullable=False),
    sa.Column("scoring_s", sa.Double, nullable=False),
    sa.Column("tags", sa.Text, nullable=False),
)
sa.Table(
    "scores",
    V1,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("sample_row_id", sa.Integer, sa.ForeignKey("samples.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("metric", sa.String(128), nullable=False),
    sa.Column("value", sa.Double),
    sa.Column("label", sa.String(8)),
    sa.Column("error", sa.Text),
    sa.Column("explanation", sa.Text, nullable=False),
    sa.Column("details", sa.Text, nullable=False),
    sa.Column("judge", sa.String(256)),
)
sa.Table(
    "schema_version",
    V1,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.DateTime, nullable=False),
)


def make_v1(url: str) -> None:
    """A version-1 database holding one run of two samples (one with a measured latency)."""
    engine = create_engine(database_url(url))
    V1.create_all(engine)
    t = V1.tables
    at = datetime(2026, 1, 5, 12, 0)
    with engine.begin() as conn:
        run_id = conn.execute(
            t["runs"].insert(),
            {
                "created_at": at,
                "kind": "evaluate",
                "dataset": "legacy",
                "judge": "offline",
                "duration_s": 3.5,
                "settings": json.dumps({"metrics": ["faithfulness"], "thresholds": {"faithfulness": [0.85, 0.7]}}),
                "usage": json.dumps({"calls": 2}),
                "tags": '["v1"]',
                "invalid": "[]",
            },
        ).inserted_primary_key[0]
        for n, (md, value) in enumerate([({"latency": {"total_s": 1.5}}, 0.75), ({}, None)], start=1):
            row_id = conn.execute(
                t["samples"].insert(),
                {
                    "run_id": run_id,
                    "sample_id": f"s{n}",
                    "created_at": at,
                    "question": f"question {n}?",
                    "answer": "an answer",
                    "contexts": json.dumps([{"text": "a chunk", "id": "c1", "score": None, "metadata": {}}]),
                    "metadata": json.dumps(md),
                    "usage": json.dumps({"calls": 1}),
                    "scoring_s": 0.5,
                    "tags": '["v1"]',
                },
            ).inserted_primary_key[0]
            conn.execute(
                t["scores"].insert(),
                {
                    "sample_row_id": row_id,
                    "run_id": run_id,
                    "metric": "faithfulness",
                    "value": value,
                    "label": None if value is None else "warn",
                    "error": None if value is not None else "judge unreachable",
                    "explanation": "",
                    "details": json.dumps({"claims": [n]}),
                    "judge": "offline",
                },
            )
        conn.execute(t["schema_version"].insert(), {"version": 1, "applied_at": at})
    engine.dispose()


def schema_of(url: str) -> dict:
    """Tables, columns (name, type, nullable), indexes and foreign keys, as the database reports them."""
    engine = create_engine(database_url(url))
    insp = sa.inspect(engine)
    out = {}
    for table in sorted(insp.get_table_names()):
        out[table] = {
            "columns": sorted((c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(table)),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in insp.get_indexes(table)
            ),
            "foreign_keys": sorted(
                (tuple(f["constrained_columns"]), f["referred_table"]) for f in insp.get_foreign_keys(table)
            ),
        }
    engine.dispose()
    return out
