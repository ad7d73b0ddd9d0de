"""A throwaway PostgreSQL server for tests: ``initdb`` into a temp directory, ``postgres`` on
127.0.0.1 at a free port, stopped and deleted at the end.

    server = PostgresServer.start()          # raises PostgresUnavailable when there are no binaries
    url = server.create_database()           # a fresh, empty schema per test (its own search_path)
    server.stop()

As fixtures (tests/conftest.py registers this module), every test can ask for ``db_url``
(each test twice: a fresh SQLite file, then a fresh schema on one session-wide server) and
``make_db`` (a factory of more databases on the same backend).

Binaries: ``$RAGMETER_PG_BINDIR`` (only there, when set), else the directory of ``initdb`` on PATH, else the newest
``/usr/lib/postgresql/<N>/bin`` (Debian/Ubuntu ``postgresql`` package) or ``/usr/pgsql-<N>/bin``
(RHEL). :func:`require` turns "no binaries" into a skip, or into a failure when
``RAGMETER_REQUIRE_POSTGRES=1`` (CI sets it, so the PostgreSQL tests cannot silently vanish).

Running as root (CI containers): ``initdb`` and ``postgres`` refuse to run as root, so both are
started as an unprivileged user through :class:`subprocess.Popen`'s ``user=`` / ``group=``
(setuid in the child; no sudo, su or setpriv needed). The user is ``$RAGMETER_PG_USER``, else
``nobody``; the temp directory is created in ``/tmp``-style world-traversable space and handed to
that user. As any other user the server simply runs as that user. The server is fast and
unsafe on purpose (``fsync=off``): it holds test data only. Only the process started here is
ever signalled.
"""

from __future__ import annotations

import glob
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.process import ServerProcess

__all__ = [
    "PostgresServer",
    "PostgresUnavailable",
    "find_bindir",
    "require",
    "REQUIRE",
    "postgres_server",
    "make_db",
    "db_url",
]

#: CI sets ``RAGMETER_REQUIRE_POSTGRES=1``: a missing or broken server fails the tests instead of skipping them.
REQUIRE = os.environ.get("RAGMETER_REQUIRE_POSTGRES") == "1"
SUPERUSER = "ragmeter"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (or no user to run them as)."""


def _version_key(path: str) -> tuple:
    parts = Path(path).parent.name.replace("pgsql-", "")
    return tuple(int(p) if p.isdigit() else 0 for p in parts.split("."))


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres`` (see the module docstring), or None."""
    if os.environ.get("RAGMETER_PG_BINDIR"):  # explicit: only there
        candidates = [os.environ["RAGMETER_PG_BINDIR"]]
    else:
        candidates = _default_bindirs()
    for c in candidates:
        if all(os.access(Path(c) / b, os.X_OK) for b in ("initdb", "postgres")):
            return Path(c)
    return None


def _default_bindirs() -> list[str]:
    candidates = []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).resolve().parent))
    return candidates + sorted(
        glob.glob("/usr/lib/postgresql/*/bin") + glob.glob("/usr/pgsql-*/bin"), key=_version_key, reverse=True
    )


def _run_as() -> tuple[int, int] | None:
    """(uid, gid) to run the server as: None when we are not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("RAGMETER_PG_USER", "nobody")
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise PostgresUnavailable(
            f"running as root and there is no user {name!r} to run PostgreSQL as "
            "(set RAGMETER_PG_USER to an unprivileged user)"
        ) from None
    return entry.pw_uid, entry.pw_gid


class PostgresServer(ServerProcess):
    """A running PostgreSQL server on 127.0.0.1 (``port``), superuser ``ragmeter`` with trust auth."""

    LOG, STOP_SIGNAL = "postgres.log", signal.SIGINT  # PostgreSQL's fast shutdown

    def __init__(self, bindir: Path, root: Path, port: int, proc: subprocess.Popen, run_as):
        self.bindir, self.root, self.port, self.proc, self._run_as = bindir, root, port, proc, run_as
        self._databases = 0

    @classmethod
    def start(cls, timeout: float = 60.0) -> PostgresServer:
        """initdb + start; raises :class:`PostgresUnavailable` without binaries, RuntimeError when
        the server does not come up (with the end of its log)."""
        bindir = find_bindir()
        if bindir is None:
            raise PostgresUnavailable(
                "no PostgreSQL server binaries (initdb, postgres): install the "
                "`postgresql` system package or set RAGMETER_PG_BINDIR"
            )
        if importlib.util.find_spec("psycopg") is None:
            raise PostgresUnavailable("psycopg is not installed (pip install 'ragmeter[postgres]')")
        run_as = _run_as()
        root = Path(tempfile.mkdtemp(prefix="ragmeter-pg-", dir="/tmp" if run_as else None))
        try:
            if run_as:
                os.chown(root, *run_as)
            cls._initdb(bindir, root, run_as)
            return cls.first_ready(
                lambda port: cls(bindir, root, port, cls._spawn(bindir, root, port, run_as), run_as),
                timeout,
                "could not bind",
                "PostgreSQL",
            )
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    @staticmethod
    def _popen_kwargs(root: Path, run_as) -> dict:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        kwargs: dict = {"cwd": root, "env": env, "stdin": subprocess.DEVNULL}
        if run_as:
            kwargs.update(user=run_as[0], group=run_as[1], extra_groups=[])
        return kwargs

    @classmethod
    def _initdb(cls, bindir: Path, root: Path, run_as) -> None:
        out = subprocess.run(
            [
                str(bindir / "initdb"),
                "-D",
                str(root / "data"),
                "-U",
                SUPERUSER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            **cls._popen_kwargs(root, run_as),
        )
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")

    @classmethod
    def _spawn(cls, bindir: Path, root: Path, port: int, run_as) -> subprocess.Popen:
        log = open(root / "postgres.log", "ab")
        try:
            return subprocess.Popen(
                [
                    str(bindir / "postgres"),
                    "-D",
                    str(root / "data"),
                    "-p",
                    str(port),
                    "-k",
                    str(root),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "max_connections=300",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **cls._popen_kwargs(root, run_as),
            )
        finally:
            log.close()

    def _wait_ready(self, timeout: float) -> bool:
        import psycopg

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                time.sleep(0.05)
        return False

    def restart(self, down: float = 0.0, timeout: float = 60.0) -> None:
        """Stop the server (fast shutdown: open sessions are cut), leave it down ``down`` seconds,
        start it again on the same port and data directory; returns once it accepts connections."""
        self.stop(cleanup=False)
        time.sleep(down)
        self.proc = self._spawn(self.bindir, self.root, self.port, self._run_as)
        if not self._wait_ready(timeout):
            raise RuntimeError(f"PostgreSQL did not come back:\n{self.log_tail()}")

    def url(self, database: str = "postgres") -> str:
        """``postgresql://ragmeter@127.0.0.1:<port>/<database>``."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A fresh, empty namespace; returns its URL: a new schema in the server's ``ragmeter``
        database, made the connection's ``search_path`` (as isolated as a new database for
        ragmeter, and milliseconds instead of most of a second)."""
        import psycopg

        if self._databases == 0:
            with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
                conn.execute('CREATE DATABASE "ragmeter"')
        self._databases += 1
        name = f"test_{self._databases}"
        with psycopg.connect(self.url("ragmeter"), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return self.url("ragmeter") + f"?options=-csearch_path%3D{name}"


def require(exc: Exception) -> None:
    """Skip the test for a missing server, or fail when ``RAGMETER_REQUIRE_POSTGRES=1``; a server
    that is installed but does not start always fails."""
    msg = f"PostgreSQL: {exc}"
    if isinstance(exc, PostgresUnavailable) and not REQUIRE:
        pytest.skip(msg)
    pytest.fail(msg + (" (RAGMETER_REQUIRE_POSTGRES=1)" if REQUIRE else ""))


@pytest.fixture(scope="session")
def postgres_server():
    """One server for the whole test session (import this fixture into a test module)."""
    try:
        server = PostgresServer.start()
    except (PostgresUnavailable, RuntimeError) as exc:
        require(exc)
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def make_db(request, tmp_path) -> Callable[[], str]:
    """Each test twice, with a factory of fresh databases: SQLite files in ``tmp_path``, then
    new schemas on :func:`postgres_server` (see :meth:`PostgresServer.create_database`)."""
    if request.param == "sqlite":
        numbers = itertools.count(1)
        return lambda: str(tmp_path / f"ragmeter-{next(numbers)}.db")
    return request.getfixturevalue("postgres_server").create_database


@pytest.fixture
def db_url(make_db) -> str:
    """One fresh database per test, on each backend (see :func:`make_db`)."""
    return make_db()
