"""Connections for :mod:`ragmeter.store`: where the database is, how to open it, and how a
write transaction survives other writers.

A path (or ``sqlite:///path``) opens a SQLite file in WAL mode with a busy timeout: readers never
wait for writers, and writers queue. Every write transaction starts with ``BEGIN IMMEDIATE``
(the write lock is taken up front, so two writers can never deadlock upgrading a read lock) and
is retried, from the start, when SQLite still answers "database is locked". A
``postgresql://`` URL opens PostgreSQL through psycopg 3; there, transient serialization
failures and deadlocks are retried the same way.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

__all__ = ["DEFAULT_PATH", "database_url", "create_engine", "write", "read", "environment_info"]

T = TypeVar("T")

#: The database used when neither an argument nor ``RAGMETER_DB`` names one (in the current directory).
DEFAULT_PATH = "ragmeter.db"
#: How long a SQLite writer waits for the lock before "database is locked" (then it retries).
BUSY_TIMEOUT_S = 30.0
_RETRY_SQLSTATES = ("40001", "40P01")  # serialization failure, deadlock detected

#: Where the app version and the git commit are read from, first hit wins.
APP_VERSION_VARS = ("RAGMETER_APP_VERSION",)
GIT_COMMIT_VARS = ("RAGMETER_GIT_COMMIT", "GIT_COMMIT", "GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT",
                   "CIRCLE_SHA1", "BITBUCKET_COMMIT", "TRAVIS_COMMIT", "DRONE_COMMIT_SHA",
                   "VERCEL_GIT_COMMIT_SHA", "SOURCE_VERSION", "COMMIT_SHA")


def database_url(url_or_path: str | os.PathLike | None = None) -> sa.URL:
    """The SQLAlchemy URL for ``url_or_path``: None -> ``$RAGMETER_DB`` or ``ragmeter.db`` in the
    current directory; a path -> that SQLite file; ``sqlite:///...`` as given;
    ``postgresql://`` / ``postgres://`` -> PostgreSQL through psycopg 3. Other databases are
    refused (only these two are tested)."""
    if url_or_path is None:
        url_or_path = os.environ.get("RAGMETER_DB") or DEFAULT_PATH
    text = os.fspath(url_or_path)
    if "://" not in text:
        return sa.URL.create("sqlite", database=str(Path(text).expanduser().resolve()))
    url = sa.make_url(text)
    backend = url.get_backend_name()
    if backend == "sqlite":
        return url
    if backend in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    raise ValueError(f"unsupported database URL {url.render_as_string(hide_password=True)!r}: "
                     "use a file path, sqlite:///path or postgresql://user@host/db")


def create_engine(url: sa.URL) -> Engine:
    """An Engine for ``url`` (see the module docstring for the SQLite settings)."""
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    try:
        return sa.create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        raise ImportError(f"PostgreSQL needs psycopg 3 ({exc}): pip install 'ragmeter[postgres]'") from None


def _sqlite_connect(dbapi_conn: Any, record: Any) -> None:
    # The driver's own transaction handling is turned off: _sqlite_begin says BEGIN itself.
    dbapi_conn.isolation_level = None
    cur = dbapi_conn.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA synchronous = NORMAL")
        _wal(cur)
    finally:
        cur.close()


def _wal(cur: Any) -> None:
    """Put the file in WAL mode (persistent: nothing to do once it is). Switching needs an
    exclusive lock, and SQLite answers "database is locked" at once, without its busy handler,
    when this connection would have to upgrade a read lock while another process writes (as when
    several processes open a new file together), so the switch is retried here for up to
    :data:`BUSY_TIMEOUT_S`."""
    if str(cur.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    attempt = 0
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except Exception as exc:  # sqlite3.OperationalError (the driver's, not SQLAlchemy's)
            if not _locked_message(str(exc)) or time.monotonic() >= deadline:
                raise
            _backoff(attempt)
            attempt += 1


def _sqlite_begin(conn: Connection) -> None:
    mode = "IMMEDIATE" if conn.get_execution_options().get("ragmeter_write") else "DEFERRED"
    conn.exec_driver_sql(f"BEGIN {mode}")


def _locked_message(message: str) -> bool:
    message = message.lower()
    return "database is locked" in message or "database is busy" in message or "database table is locked" in message


def _retryable(exc: OperationalError) -> bool:
    return _locked_message(str(exc.orig)) or getattr(exc.orig, "sqlstate", None) in _RETRY_SQLSTATES


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.02 * 2 ** attempt) * (0.5 + random.random()))


def write(engine: Engine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(conn)`` in one write transaction, committed on return; retried from the start
    when the database is locked by another writer or PostgreSQL reports a transient conflict,
    for up to :data:`BUSY_TIMEOUT_S` in all."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    attempt = 0
    while True:
        try:
            with engine.connect().execution_options(ragmeter_write=True) as conn, conn.begin():
                return fn(conn)
        except OperationalError as exc:
            if not _retryable(exc) or time.monotonic() >= deadline:
                raise
            _backoff(attempt)
            attempt += 1


def read(engine: Engine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(conn)`` in one read transaction (a consistent snapshot on SQLite)."""
    with engine.connect() as conn, conn.begin():
        return fn(conn)


def _first_env(names: tuple[str, ...]) -> str | None:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None


def environment_info() -> dict[str, str | None]:
    """``app_version`` (``RAGMETER_APP_VERSION``, else ``service.version`` in
    ``OTEL_RESOURCE_ATTRIBUTES``) and ``git_commit`` (``RAGMETER_GIT_COMMIT``, ``GIT_COMMIT``,
    ``GITHUB_SHA``, ``CI_COMMIT_SHA`` and the other CI systems' variables in
    :data:`GIT_COMMIT_VARS`), None when absent."""
    version = _first_env(APP_VERSION_VARS)
    if version is None:
        for item in os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
            key, _, value = item.partition("=")
            if key.strip() == "service.version" and value.strip():
                version = value.strip()
    return {"app_version": version, "git_commit": _first_env(GIT_COMMIT_VARS)}
