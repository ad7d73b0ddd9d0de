"""A persistent cache of judge answers and embeddings (SQLite, stdlib only).

A judge answer is keyed by everything that determines it: backend and model, endpoint, task name
and version (and a hash of its prompt and schema), the inputs (canonical JSON) and the generation
parameters. Only *validated* answers are stored, with the usage they cost the first time; a hit
is served as ``Usage(cached=1)``. Re-running the same dataset with the same judge costs nothing.

Location: ``cache=`` argument of a judge (a path, a :class:`JudgeCache`, or ``False`` for none);
otherwise ``$RAGMETER_CACHE_DIR/judge-cache.sqlite``; otherwise
``~/.cache/ragmeter/judge-cache.sqlite``. One file may be shared by several processes (WAL mode)
and one :class:`JudgeCache` by several threads.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["JudgeCache", "default_cache_path", "resolve_cache", "cache_key"]

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
    """``$RAGMETER_CACHE_DIR/judge-cache.sqlite`` or ``~/.cache/ragmeter/judge-cache.sqlite``."""
    root = os.environ.get("RAGMETER_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "ragmeter"
    return base / FILENAME


class JudgeCache:
    """SQLite store of validated judge answers (and embedding vectors), safe across threads.

    ``JudgeCache(path)``: ``path`` is a file, or a directory that gets ``judge-cache.sqlite``;
    None means :func:`default_cache_path`. The file is opened on first use.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        p = Path(path).expanduser() if path is not None else default_cache_path()
        if p.is_dir():
            p = p / FILENAME
        self.path = p
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0

    # ------------------------------------------------------------------ connection
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.DatabaseError:  # e.g. a file system without shared memory: keep the default journal
                pass
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Close the database connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "JudgeCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ answers
    def get(self, key: str) -> dict | None:
        """The stored entry ``{"output", "usage", "note", "judge", "task"}`` for ``key``, or None."""
        with self._lock:
            row = self._db().execute(
                "SELECT output, usage, note, judge, task FROM answers WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return {"output": json.loads(row[0]), "usage": json.loads(row[1]), "note": row[2], "judge": row[3], "task": row[4]}

    def put(self, key: str, *, judge: str, task: str, output: dict, usage: dict, note: str = "") -> None:
        """Store a validated answer (replacing any previous one under ``key``)."""
        with self._lock:
            self._db().execute(
                "INSERT OR REPLACE INTO answers (key, judge, task, output, usage, note, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (key, judge, task, json.dumps(output, ensure_ascii=False), json.dumps(usage), note or "", time.time()))

    # ------------------------------------------------------------------ vectors
    def get_vectors(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored vectors for those of ``keys`` that are present."""
        out: dict[str, np.ndarray] = {}
        if not keys:
            return out
        with self._lock:
            db = self._db()
            for i in range(0, len(keys), 500):
                chunk = list(keys[i:i + 500])
                marks = ",".join("?" * len(chunk))
                for key, data in db.execute(f"SELECT key, data FROM vectors WHERE key IN ({marks})", chunk):
                    out[key] = np.frombuffer(data, dtype=np.float64).copy()
            self.hits += len(out)
            self.misses += len(set(keys)) - len(out)
        return out

    def put_vectors(self, model: str, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store ``(key, vector)`` pairs for embedding ``model``."""
        now = time.time()
        rows = [(k, model, int(np.asarray(v).size), np.asarray(v, dtype=np.float64).tobytes(), now) for k, v in items]
        if not rows:
            return
        with self._lock:
            db = self._db()
            db.execute("BEGIN")
            try:
                db.executemany("INSERT OR REPLACE INTO vectors (key, model, dim, data, created) VALUES (?, ?, ?, ?, ?)", rows)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

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
        return {"path": str(self.path), "answers": per_judge, "vectors": vectors, "hits": self.hits, "misses": self.misses}

    def __repr__(self) -> str:
        return f"JudgeCache({str(self.path)!r})"


_shared: dict[Path, JudgeCache] = {}
_shared_lock = threading.Lock()


def resolve_cache(cache: "JudgeCache | str | os.PathLike | bool | None") -> JudgeCache | None:
    """Turn a judge's ``cache=`` argument into a :class:`JudgeCache` (or None when disabled).

    None / True: the default location (one shared instance per path); False: no cache; a path:
    that file (or ``judge-cache.sqlite`` in that directory); a JudgeCache: itself.
    """
    if cache is False:
        return None
    if isinstance(cache, JudgeCache):
        return cache
    if cache is None or cache is True:
        path = default_cache_path()
    elif isinstance(cache, (str, os.PathLike)):
        path = Path(cache).expanduser()
        if path.is_dir():
            path = path / FILENAME
    else:
        raise TypeError(f"cache must be a path, a JudgeCache, True/None (default location) or False, got {cache!r}")
    with _shared_lock:
        inst = _shared.get(path)
        if inst is None:
            inst = _shared[path] = JudgeCache(path)
        return inst
