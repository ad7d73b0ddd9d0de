"""Internal: A persistent cache of judge answers and embeddings (SQLite, stdlib only).

A judge answer is keyed by everything that determines it: backend and model, endpoint, task name
and version (and a hash of its prompt and schema), the inputs (canonical JSON) and the generation
parameters. Only *validated* answers are stored, with the usage they cost the first time; a hit
is served as ``Usage(cached=1)``. Re-running the same dataset with the same judge costs nothing.

Location: ``cache=`` argument of a judge (a path, a :class:`JudgeCache`, or ``False`` for none);
otherwise ``$RAGMETER_CACHE_DIR/judge-cache.sqlite``; otherwise
``~/.cache/ragmeter/judge-cache.sqlite``. One file may be shared by several processes (WAL mode)
and one :class:`JudgeCache` by several threads; a pickled cache is its path, so the worker
processes of a distributed run (:class:`ragmeter.executors.RayExecutor`) share the file of the
driver when they run on its machine.

The cache is an optimisation and never stops judging: when its file cannot be created or opened
(read-only or missing home, not a database) it warns once per file and stays empty; a failed
read is a miss and a failed write (disk full, read-only file) is skipped, each warned once per
file. A stored answer that cannot be decoded, or fails the caller's ``validate``, is deleted and
asked again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["JudgeCache", "default_cache_path", "resolve_cache", "cache_key"]

log = logging.getLogger("ragmeter.judges")
_STORAGE_ERRORS = (sqlite3.Error, OSError)

FILENAME = "judge-cache.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    task TEXT NOT NULL,
    output TEXT NOT NULL,
    usage TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS vectors (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    data BLOB NOT NULL,
    created REAL NOT NULL
);
"""


def canonical_json(data: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace) used in cache keys."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def cache_key(*parts: Any) -> str:
    """SHA-256 of the canonical JSON of ``parts``."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


def default_cache_path() -> Path:
    """``$RAGMETER_CACHE_DIR/judge-cache.sqlite`` or ``~/.cache/ragmeter/judge-cache.sqlite``
    (RuntimeError when there is no home directory)."""
    root = os.environ.get("RAGMETER_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "ragmeter"
    return base / FILENAME


def _file(path: Path) -> Path:
    """``path``, or ``judge-cache.sqlite`` inside it when it is a directory."""
    try:
        return path / FILENAME if path.is_dir() else path
    except OSError:  # e.g. no permission to look: opening it will say so (once)
        return path


_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def _warn_once(path: Any, kind: str, message: str, *args: Any) -> None:
    """Log ``message`` as a warning the first time ``kind`` happens to the file at ``path`` in
    this process, at debug level after that."""
    with _warned_lock:
        first = (str(path), kind) not in _warned
        _warned.add((str(path), kind))
    log.log(logging.WARNING if first else logging.DEBUG, message, *args)


class JudgeCache:
    """SQLite store of validated judge answers (and embedding vectors), safe across threads.

    ``JudgeCache(path)``: ``path`` is a file, or a directory that gets ``judge-cache.sqlite``;
    None means :func:`default_cache_path`. The file is opened on first use. ``get`` / ``put`` /
    ``get_vectors`` / ``put_vectors`` never raise on a storage failure (see the module doc);
    ``len``, ``clear`` and ``stats`` do.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = _file(Path(path).expanduser() if path is not None else default_cache_path())
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._unusable = False
        self.hits = 0
        self.misses = 0

    # ------------------------------------------------------------------ connection
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
            try:
                try:
                    conn.execute("PRAGMA journal_mode=WAL")
                except sqlite3.DatabaseError:  # e.g. a file system without shared memory: keep the default journal
                    pass
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _open(self) -> sqlite3.Connection | None:
        """The connection, or None when the file cannot be opened (warned once; not retried
        until :meth:`close`)."""
        if self._unusable:
            return None
        try:
            return self._db()
        except _STORAGE_ERRORS as err:
            self._unusable = True
            _warn_once(
                self.path,
                "open",
                "ragmeter: the judge cache %s cannot be opened (%s); judging without it",
                self.path,
                err,
            )
            return None

    def close(self) -> None:
        """Close the database connection (it reopens on next use, also after a failed open)."""
        with self._lock:
            self._unusable = False
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _failed(self, kind: str, err: BaseException) -> None:
        what = "read" if kind == "read" else "write"
        _warn_once(
            self.path,
            kind,
            "ragmeter: could not %s the judge cache %s (%s); judging on without it",
            what,
            self.path,
            err,
        )

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ answers
    def get(self, key: str, validate: Callable[[dict], dict] | None = None) -> dict | None:
        """The stored entry ``{"output", "usage", "note", "judge", "task"}`` for ``key``, or None.

        ``validate(entry)`` returns the output to serve or raises: a row that cannot be decoded
        or fails it is deleted (the caller asks again) and counts as a miss. None too when the
        cache cannot be read.
        """
        with self._lock:
            db = self._open()
            try:
                row = (
                    None
                    if db is None
                    else db.execute(
                        "SELECT output, usage, note, judge, task FROM answers WHERE key = ?", (key,)
                    ).fetchone()
                )
            except _STORAGE_ERRORS as err:
                self._failed("read", err)
                row = None
            entry = None if row is None else self._decode(key, row, validate)
            if entry is None:
                self.misses += 1
            else:
                self.hits += 1
        return entry

    def _decode(self, key: str, row: tuple, validate: Callable[[dict], dict] | None) -> dict | None:
        try:
            entry = {
                "output": json.loads(row[0]),
                "usage": json.loads(row[1]),
                "note": str(row[2] or ""),
                "judge": row[3],
                "task": row[4],
            }
            if validate is not None:
                entry["output"] = validate(entry)
        except Exception as err:  # noqa: BLE001 - a stored row is data: whatever is wrong with it, ask again
            _warn_once(
                self.path,
                "invalid",
                "ragmeter: dropped an invalid answer from the judge cache %s (%s: %s); asking again",
                self.path,
                type(err).__name__,
                err,
            )
            self._delete(key)
            return None
        return entry

    def _delete(self, key: str) -> None:
        if self._conn is None:  # closed meanwhile: nothing to delete from
            return
        try:
            self._conn.execute("DELETE FROM answers WHERE key = ?", (key,))
        except _STORAGE_ERRORS as err:
            self._failed("write", err)

    def put(self, key: str, *, judge: str, task: str, output: dict, usage: dict, note: str = "") -> None:
        """Store a validated answer (replacing any previous one under ``key``); skipped when the
        cache cannot be written."""
        with self._lock:
            db = self._open()
            if db is None:
                return
            try:
                db.execute(
                    "INSERT OR REPLACE INTO answers (key, judge, task, output, usage, note, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        judge,
                        task,
                        json.dumps(output, ensure_ascii=False),
                        json.dumps(usage),
                        note or "",
                        time.time(),
                    ),
                )
            except _STORAGE_ERRORS as err:
                self._failed("write", err)

    # ------------------------------------------------------------------ vectors
    def get_vectors(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors for those of ``keys`` that are present (none when the cache cannot be read)."""
        out: dict[str, np.ndarray] = {}
        if not keys:
            return out
        with self._lock:
            db = self._open()
            try:
                for i in range(0, len(keys), 500):
                    if db is None:
                        break
                    chunk = list(keys[i : i + 500])
                    marks = ",".join("?" * len(chunk))
                    for key, data in db.execute(f"SELECT key, data FROM vectors WHERE key IN ({marks})", chunk):
                        out[key] = np.frombuffer(data, dtype=np.float64).copy()
            except _STORAGE_ERRORS as err:
                self._failed("read", err)
                out = {}
            self.hits += len(out)
            self.misses += len(set(keys)) - len(out)
        return out

    def put_vectors(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store ``(key, vector)`` pairs for embedding ``model`` (skipped when the cache cannot be written)."""
        now = time.time()
        rows = [(k, model, int(np.asarray(v).size), np.asarray(v, dtype=np.float64).tobytes(), now) for k, v in items]
        if not rows:
            return
        with self._lock:
            db = self._open()
            if db is None:
                return
            try:
                db.execute("BEGIN")
                try:
                    db.executemany(
                        "INSERT OR REPLACE INTO vectors (key, model, dim, data, created) VALUES (?, ?, ?, ?, ?)", rows
                    )
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
            except _STORAGE_ERRORS as err:
                self._failed("write", err)

    # ------------------------------------------------------------------ maintenance
    def __len__(self) -> int:
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def clear(self, judge: str | None = None) -> int:
        """Delete stored answers (only ``judge``'s when given) and, without ``judge``, all vectors.
        Returns the number of answers deleted."""
        with self._lock:
            db = self._db()
            if judge is None:
                n = db.execute("DELETE FROM answers").rowcount
                db.execute("DELETE FROM vectors")
            else:
                n = db.execute("DELETE FROM answers WHERE judge = ?", (judge,)).rowcount
            return int(n)

    def stats(self) -> dict:
        """Counts of stored answers per judge and of vectors, plus this instance's hits / misses."""
        with self._lock:
            db = self._db()
            per_judge = dict(db.execute("SELECT judge, COUNT(*) FROM answers GROUP BY judge").fetchall())
            vectors = int(db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
        return {
            "path": str(self.path),
            "answers": per_judge,
            "vectors": vectors,
            "hits": self.hits,
            "misses": self.misses,
        }

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.path)!r})"

    def __reduce__(self) -> tuple:
        """Pickled as its path: a copy (in a worker process) opens the same file, the instance
        shared by that process for the path (:func:`resolve_cache`)."""
        return resolve_cache, (str(self.path),)


_shared: dict[Path, JudgeCache] = {}
_shared_lock = threading.Lock()


def resolve_cache(cache: JudgeCache | str | os.PathLike | bool | None) -> JudgeCache | None:
    """Turn a judge's ``cache=`` argument into a :class:`JudgeCache` (or None when disabled).

    None / True: the default location (one shared instance per path); False: no cache; a path:
    that file (or ``judge-cache.sqlite`` in that directory); a JudgeCache: itself.
    """
    if cache is False:
        return None
    if isinstance(cache, JudgeCache):
        return cache
    if cache is None or cache is True:
        try:
            path = _file(default_cache_path())
        except RuntimeError as err:  # no home directory: the cache is an optimisation
            _warn_once("~", "open", "ragmeter: no judge cache (%s); judging without it", err)
            return None
    elif isinstance(cache, (str, os.PathLike)):
        path = _file(Path(cache).expanduser())
    else:
        raise TypeError(f"cache must be a path, a JudgeCache, True/None (default location) or False, got {cache!r}")
    with _shared_lock:
        inst = _shared.get(path)
        if inst is None:
            inst = _shared[path] = JudgeCache(path)
        return inst
