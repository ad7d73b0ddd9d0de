"""Internal: Connections for :mod:`ragmeter.store`: where the database is, how to open it, and how a
write transaction survives other writers.

A path (or ``sqlite:///path``) opens a SQLite file in WAL mode with a busy timeout: readers never
wait for writers, and writers queue. Every write transaction starts with ``BEGIN IMMEDIATE``
(the write lock is taken up front, so two writers can never deadlock upgrading a read lock) and
is retried, from the start, when SQLite still answers "database is locked". A
``postgresql://`` URL opens PostgreSQL through psycopg 3; there, transient serialization
failures and deadlocks are retried the same way.

Errors leave :func:`read` and :func:`write` as :class:`StoreError`: one line naming the store
(its URL, password redacted by :func:`ragmeter.redact.redact`) and the cause (the driver's first
line), never the statement's parameters (engines are created with ``hide_parameters``), and
whether the failure is :func:`transient` (worth retrying: a connection refused or cut, a server
restarting or failing over, SQLite's "database is locked") or permanent (schema, constraint).
``read_only=True`` opens a SQLite file with ``mode=ro`` (and ``immutable=1`` when its folder
cannot be written, as on a read-only mount, where SQLite could not create its ``-shm`` file):
nothing is ever written, not even the WAL switch.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from ragmeter.redact import redact

__all__ = [
    "DEFAULT_PATH",
    "database_url",
    "create_engine",
    "write",
    "read",
    "environment_info",
    "StoreError",
    "transient",
    "describe",
    "store_name",
    "writable",
]

T = TypeVar("T")

#: The database used when neither an argument nor ``RAGMETER_DB`` names one (in the current directory).
DEFAULT_PATH = "ragmeter.db"
#: How long a SQLite writer waits for the lock before "database is locked" (then it retries).
BUSY_TIMEOUT_S = 30.0
#: Seconds a PostgreSQL connection attempt may take (unless the URL sets ``connect_timeout``).
CONNECT_TIMEOUT_S = 10
_RETRY_SQLSTATES = ("40001", "40P01")  # serialization failure, deadlock detected
# Worth retrying for longer: the above; the server shutting down or starting up (admin / crash
# shutdown, cannot connect now), a read-only transaction (a failover's old primary), a lock
# timeout; and the classes connection exception (08) and insufficient resources (53).
_TRANSIENT_SQLSTATES = (*_RETRY_SQLSTATES, "57P01", "57P02", "57P03", "25006", "55P03")
_TRANSIENT_CLASSES = ("08", "53")

#: Where the app version and the git commit are read from, first hit wins.
APP_VERSION_VARS = ("RAGMETER_APP_VERSION",)
GIT_COMMIT_VARS = (
    "RAGMETER_GIT_COMMIT",
    "GIT_COMMIT",
    "GITHUB_SHA",
    "CI_COMMIT_SHA",
    "BUILDKITE_COMMIT",
    "CIRCLE_SHA1",
    "BITBUCKET_COMMIT",
    "TRAVIS_COMMIT",
    "DRONE_COMMIT_SHA",
    "VERCEL_GIT_COMMIT_SHA",
    "SOURCE_VERSION",
    "COMMIT_SHA",
)


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
    try:
        url = sa.make_url(text)
    except (ValueError, sa.exc.ArgumentError) as exc:
        raise ValueError(f"cannot read the database URL {redact(text)!r}: {exc}") from None
    backend = url.get_backend_name()
    if backend == "sqlite":
        return url
    if backend in ("postgresql", "postgres"):
        return url.set(drivername="postgresql+psycopg")
    raise ValueError(
        f"unsupported database URL {store_name(url)!r}: use a file path, sqlite:///path or postgresql://user@host/db"
    )


def store_name(url: sa.URL) -> str:
    """How messages name the store at ``url``: the URL with its password redacted."""
    return redact(url.render_as_string(hide_password=False))


def writable(path: str | os.PathLike) -> bool:
    """Whether ``path`` (a file or folder) can be written: the system says so and some write
    permission bit is set (root passes every access check, even on a ``chmod a-w`` folder)."""
    try:
        return os.access(path, os.W_OK) and bool(os.stat(path).st_mode & 0o222)
    except OSError:
        return False


def create_engine(url: sa.URL, read_only: bool = False) -> Engine:
    """An Engine for ``url`` (see the module docstring for the SQLite settings and ``read_only``)."""
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:" and not read_only:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        options: dict[str, Any] = {"connect_args": {"timeout": BUSY_TIMEOUT_S}}
        if read_only and url.database and url.database != ":memory:":
            options["creator"] = _read_only_creator(url.database)
        engine = sa.create_engine(url, hide_parameters=True, **options)
        event.listen(engine, "connect", _sqlite_read_only_connect if read_only else _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    connect_args = {} if "connect_timeout" in url.query else {"connect_timeout": CONNECT_TIMEOUT_S}
    try:
        return sa.create_engine(url, pool_pre_ping=True, hide_parameters=True, connect_args=connect_args)
    except ModuleNotFoundError as exc:
        raise ImportError(f"PostgreSQL needs psycopg 3 ({exc}): pip install 'ragmeter[postgres]'") from None


def _read_only_creator(path: str) -> Callable[[], Any]:
    """Connections to the SQLite file ``path`` that cannot write: ``mode=ro``, plus
    ``immutable=1`` when the folder is not writable (no ``-shm`` / ``-wal`` file can be made,
    so no writer can be at work there either). A missing file is an error, not a new database."""
    import sqlite3
    from urllib.parse import quote

    if not Path(path).is_file():
        raise FileNotFoundError(f"no such file: {path}")
    uri = f"file:{quote(path)}?mode=ro" + ("" if writable(Path(path).parent) else "&immutable=1")
    return lambda: sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False)


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


def _sqlite_read_only_connect(dbapi_conn: Any, record: Any) -> None:
    dbapi_conn.isolation_level = None
    dbapi_conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


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
    time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))


def transient(exc: BaseException) -> bool:
    """Whether the database error ``exc`` is worth retrying later: SQLite's "database is locked"
    / "busy"; on PostgreSQL a connection refused, cut or timed out (no SQLSTATE: the client's own
    error), a server shutting down, starting up or failing over, a serialization failure or
    deadlock, too many connections (see ``_TRANSIENT_SQLSTATES``). A :class:`StoreError` says
    what it was made from. Anything else (a missing table, a constraint, bad data) is permanent."""
    if isinstance(exc, StoreError):
        return exc.transient
    if isinstance(exc, (sa.exc.TimeoutError, sa.exc.DisconnectionError)):  # pool exhausted; pre-ping gave up
        return True
    if not isinstance(exc, sa.exc.DBAPIError):
        return False
    if exc.connection_invalidated or _locked_message(str(exc.orig)):
        return True
    state: Any = getattr(exc.orig, "sqlstate", False)
    if state is False:  # not psycopg: SQLite's errors other than locked / busy
        return False
    if state is None:  # raised by the client: the connection failed, closed or timed out
        return isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError))
    return state in _TRANSIENT_SQLSTATES or state[:2] in _TRANSIENT_CLASSES


def describe(exc: BaseException, limit: int = 300) -> str:
    """The cause of ``exc`` in one line: the driver's own message (not SQLAlchemy's wrapping,
    which names the statement), its first line only (PostgreSQL's DETAIL lines can quote
    values), redacted and cut to ``limit`` characters."""
    orig = getattr(exc, "orig", None) if isinstance(exc, sa.exc.DBAPIError) else None
    text = str(orig if orig is not None else exc).strip()
    line = text.splitlines()[0].strip() if text else type(exc).__name__
    line = redact(line)
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


class StoreError(RuntimeError):
    """A store that could not be read or written: ``where`` (the store, password redacted),
    ``cause`` (one line, no statement parameters) and whether it is ``transient``. The message is
    ``store <where>: <cause>``; ``__cause__`` holds the original exception."""

    def __init__(self, where: str, cause: str, transient: bool = False):
        super().__init__(f"store {where}: {cause}")
        self.where, self.cause, self.transient = where, cause, transient

    @classmethod
    def of(cls, engine: Engine, exc: BaseException) -> StoreError:
        """The StoreError for ``exc`` raised by ``engine``'s database."""
        return cls(store_name(engine.url), describe(exc), transient(exc))


def write(engine: Engine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(conn)`` in one write transaction, committed on return; retried from the start
    when the database is locked by another writer or PostgreSQL reports a transient conflict,
    for up to :data:`BUSY_TIMEOUT_S` in all. A database error leaves as :class:`StoreError`."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    attempt = 0
    while True:
        try:
            with engine.connect().execution_options(ragmeter_write=True) as conn, conn.begin():
                return fn(conn)
        except OperationalError as exc:
            if not _retryable(exc) or time.monotonic() >= deadline:
                raise StoreError.of(engine, exc) from exc
            _backoff(attempt)
            attempt += 1
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError.of(engine, exc) from exc


def read(engine: Engine, fn: Callable[[Connection], T]) -> T:
    """Run ``fn(conn)`` in one read transaction (a consistent snapshot on SQLite); a database
    error leaves as :class:`StoreError`."""
    try:
        with engine.connect() as conn, conn.begin():
            return fn(conn)
    except sa.exc.SQLAlchemyError as exc:
        raise StoreError.of(engine, exc) from exc


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
