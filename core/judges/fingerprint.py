"""Internal: The judge named on every score: :class:`JudgeFingerprint`.

A fingerprint says which judge produced a score, field by field: the ``backend`` (``openai``,
``anthropic``, ``langchain``, ``llamaindex``, ``offline``, ``ensemble``, ``code`` for metrics
that need no judge), the ``model``, the ``endpoint`` (its kind and host, never a path, a query or
credentials: ``api.openai.com``, ``openai-compatible http://localhost:8000``), a version hash of
each task's prompt and schema (``tasks``: task name -> ``"<TaskSpec.version>.<8 hex>"``), the
``temperature`` and ``seed``, the offline judge's ``rules`` version (a hash of its code, word
lists and settings) and the ``embedder`` model, the ragmeter version that judged, and for a
composite judge (an ensemble, a cascade) its ``members``' fingerprints, in order.

It is made once per judge (:attr:`ragmeter.judges.base.Judge.fingerprint`, from the judge's
:meth:`~ragmeter.judges.base.Judge.describe`) and travels on every
:class:`~ragmeter.Score` as its ``fingerprint`` id, into results files (their header's ``judges``
table), the store (its ``judges`` table), reports and traces.

``id`` is a hash of the fields that decide a score: everything but the ragmeter version. A new
ragmeter release that leaves the prompts, the rules and the settings as they were keeps the id,
so runs stay comparable across upgrades; one that changes a prompt or a rule changes it, and
:meth:`JudgeFingerprint.diff` says which field changed.

Fingerprints are content-addressed, so the ones made or read in this process are kept in one
table (:func:`lookup`): a Score carries only the id.

A composite judge (one that combines other judges' answers or Scores) describes itself as
``JudgeFingerprint(backend="cascade", members=(a.fingerprint, b.fingerprint))`` and may put on a
Score the fingerprint id of the member that decided it; both are in the table.

>>> fp = JudgeFingerprint(backend="openai", model="gpt-4o-mini", endpoint="api.openai.com", temperature=0.0)
>>> other = JudgeFingerprint(backend="openai", model="gpt-4o", endpoint="api.openai.com", temperature=0.0)
>>> other.diff(fp)
['model: gpt-4o-mini -> gpt-4o']
>>> len(fp.id), lookup(register(fp).id) == fp
(12, True)
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "JudgeFingerprint",
    "lookup",
    "register",
    "fingerprints_of",
    "task_versions",
    "endpoint_kind",
    "offline_rules_version",
    "CODE_FINGERPRINT",
    "DECISIVE_FIELDS",
]

#: The fields that decide a score (and make the id); ``ragmeter`` (the version) is recorded beside them.
DECISIVE_FIELDS = ("backend", "model", "endpoint", "tasks", "temperature", "seed", "rules", "embedder", "members")

_KNOWN: dict[str, JudgeFingerprint] = {}
_LOCK = threading.Lock()


def _version() -> str:
    from ragmeter import __version__

    return __version__


def _hash(obj: Any, size: int = 12) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:size]


@dataclass(frozen=True)
class JudgeFingerprint:
    """Which judge produced a score (see the module doc). ``id`` is computed from the decisive
    fields when not given; ``tasks`` is a tuple of ``(task, version hash)`` pairs (a mapping is
    accepted); ``members`` the member judges' fingerprints of a composite judge."""

    backend: str
    model: str | None = None
    endpoint: str | None = None
    tasks: Any = ()
    temperature: float | None = None
    seed: int | None = None
    rules: str | None = None
    embedder: str | None = None
    members: tuple[JudgeFingerprint, ...] = ()
    ragmeter: str = field(default_factory=_version)
    id: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not self.backend:
            raise ValueError("a judge fingerprint needs a backend")
        tasks = self.tasks.items() if isinstance(self.tasks, Mapping) else self.tasks
        object.__setattr__(self, "tasks", tuple(sorted((str(k), str(v)) for k, v in tasks)))
        object.__setattr__(self, "members", tuple(self.members))
        if self.temperature is not None:
            object.__setattr__(self, "temperature", float(self.temperature))
        if not self.id:
            object.__setattr__(self, "id", _hash(self._decisive()))

    def _decisive(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in DECISIVE_FIELDS if k not in ("tasks", "members")}
        out["tasks"] = dict(self.tasks)
        out["members"] = [m.id for m in self.members]
        return out

    @property
    def name(self) -> str:
        """``backend:model`` (the backend alone without a model)."""
        return f"{self.backend}:{self.model}" if self.model else self.backend

    @property
    def prompts(self) -> str | None:
        """One hash of every task's version hash (None without tasks): a short prompt version."""
        return _hash(dict(self.tasks), 8) if self.tasks else None

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-serialisable); :meth:`from_dict` reads it back."""
        out: dict[str, Any] = {
            "id": self.id,
            "backend": self.backend,
            "model": self.model,
            "endpoint": self.endpoint,
            "tasks": dict(self.tasks),
            "temperature": self.temperature,
            "seed": self.seed,
            "rules": self.rules,
            "embedder": self.embedder,
            "ragmeter": self.ragmeter,
        }
        if self.members:
            out["members"] = [m.to_dict() for m in self.members]
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> JudgeFingerprint:
        """Inverse of :meth:`to_dict`, registered (see :func:`lookup`); ValueError naming the
        field when ``d`` is malformed."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a judge fingerprint must be an object, got {type(d).__name__}")
        tasks = d.get("tasks") or {}
        if not isinstance(tasks, Mapping):
            raise ValueError("judge fingerprint field 'tasks' must be an object of task -> version")
        members = d.get("members") or []
        if not isinstance(members, list):
            raise ValueError("judge fingerprint field 'members' must be a list")
        for key in ("model", "endpoint", "rules", "embedder", "id", "ragmeter"):
            if d.get(key) is not None and not isinstance(d.get(key), str):
                raise ValueError(f"judge fingerprint field {key!r} must be a string, got {d.get(key)!r:.40}")
        temperature, seed = d.get("temperature"), d.get("seed")
        if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))):
            raise ValueError(f"judge fingerprint field 'temperature' must be a number, got {temperature!r:.40}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"judge fingerprint field 'seed' must be an integer, got {seed!r:.40}")
        fp = cls(
            backend=str(d.get("backend") or ""),
            model=d.get("model"),
            endpoint=d.get("endpoint"),
            tasks=tasks,
            temperature=temperature,
            seed=seed,
            rules=d.get("rules"),
            embedder=d.get("embedder"),
            members=tuple(cls.from_dict(m) for m in members),
            ragmeter=str(d.get("ragmeter") or "unknown"),
            id=str(d.get("id") or ""),
        )
        return register(fp)

    def diff(self, before: JudgeFingerprint) -> list[str]:
        """What changed from ``before`` to this fingerprint, one line per decisive field
        (``"model: gpt-4o-mini -> gpt-4o"``, ``"task verify_claims: 2.1a2b3c4d -> 3.9f8e7d6c"``,
        ``"members[1] model: ..."``); empty when the judges are the same. A ragmeter version
        change alone is not listed (see the module doc); :meth:`version_note` says it."""
        out: list[str] = []
        for key in DECISIVE_FIELDS:
            if key == "tasks":
                a, b = dict(before.tasks), dict(self.tasks)
                for task in sorted(set(a) | set(b)):
                    if a.get(task) != b.get(task):
                        out.append(f"task {task}: {a.get(task) or 'none'} -> {b.get(task) or 'none'}")
            elif key == "members":
                if len(before.members) != len(self.members):
                    out.append(
                        f"members: {', '.join(m.name for m in before.members) or 'none'} -> "
                        f"{', '.join(m.name for m in self.members) or 'none'}"
                    )
                else:
                    for i, (x, y) in enumerate(zip(before.members, self.members)):
                        out += [f"members[{i}] {line}" for line in y.diff(x)]
            elif getattr(before, key) != getattr(self, key):
                out.append(f"{key}: {_show(getattr(before, key))} -> {_show(getattr(self, key))}")
        return out

    def version_note(self, before: JudgeFingerprint) -> str | None:
        """``"ragmeter 0.1.0 -> 0.2.0"`` when only the recorded ragmeter version differs, else None."""
        return f"ragmeter {before.ragmeter} -> {self.ragmeter}" if before.ragmeter != self.ragmeter else None

    def attributes(self, prefix: str = "ragmeter.judge") -> dict[str, Any]:
        """Flat span attributes: ``<prefix>.fingerprint``, ``.backend``, ``.model``, ``.endpoint``,
        ``.prompts`` (see :attr:`prompts`), ``.temperature``, ``.seed``, ``.rules``, ``.embedder``,
        ``.ragmeter_version`` and ``.members`` (the members' ids), the unset ones left out."""
        values = {
            "fingerprint": self.id,
            "backend": self.backend,
            "model": self.model,
            "endpoint": self.endpoint,
            "prompts": self.prompts,
            "temperature": self.temperature,
            "seed": self.seed,
            "rules": self.rules,
            "embedder": self.embedder,
            "ragmeter_version": self.ragmeter,
            "members": [m.id for m in self.members] or None,
        }
        return {f"{prefix}.{k}": v for k, v in values.items() if v is not None}


def _show(value: Any) -> str:
    return "none" if value is None else str(value)


def register(fp: JudgeFingerprint) -> JudgeFingerprint:
    """Keep ``fp`` (and its members) in this process's table; returns the fingerprint already
    kept under its id when there is one (equal content, same id)."""
    for m in fp.members:
        register(m)
    with _LOCK:
        return _KNOWN.setdefault(fp.id, fp)


def lookup(fingerprint_id: str | None) -> JudgeFingerprint | None:
    """The fingerprint with this id made or read in this process (None when unknown)."""
    return _KNOWN.get(fingerprint_id) if fingerprint_id else None


def fingerprints_of(ids: Iterable[str | None]) -> dict[str, dict[str, Any]]:
    """``{id: fingerprint dict}`` for the known ids among ``ids`` and their members (the
    ``judges`` table of a results file)."""
    out: dict[str, dict[str, Any]] = {}

    def add(fp: JudgeFingerprint) -> None:
        if fp.id not in out:
            out[fp.id] = fp.to_dict()
            for m in fp.members:
                add(m)

    for i in dict.fromkeys(ids):
        fp = lookup(i)
        if fp is not None:
            add(fp)
    return out


#: The fingerprint of the metrics that need no judge (retrieval metrics, string metrics).
CODE_FINGERPRINT = register(JudgeFingerprint(backend="code"))

_TASK_VERSIONS: dict[int, tuple[Any, str]] = {}


def task_versions(names: Iterable[str] | None = None) -> dict[str, str]:
    """Task name -> ``"<version>.<hash of its system prompt, the shared rules and its schema>"``
    for every task of :data:`ragmeter.judges.tasks.TASKS` and ``COMBINED_TASKS`` (or the ``names``
    given), each hashed
    once per process."""
    from ragmeter.judges import tasks as task_module

    out = {}
    for name in names if names is not None else [*task_module.TASKS, *task_module.COMBINED_TASKS]:
        spec = task_module.get_task(name)
        hit = _TASK_VERSIONS.get(id(spec))
        if hit is None or hit[0] is not spec:
            digest = _hash([spec.system, task_module._SHARED_RULES, spec.schema], 8)
            hit = _TASK_VERSIONS[id(spec)] = (spec, f"{spec.version}.{digest}")
        out[name] = hit[1]
    return out


def endpoint_kind(base_url: str | None, official: str) -> str:
    """Where a judge's requests go, without credentials: ``official`` (e.g. ``api.openai.com``)
    for no base URL or the official host, else ``"compatible scheme://host:port"`` (no user,
    password, path or query).

    >>> endpoint_kind("https://user:secret@proxy.example:8443/v1?key=abc", "api.openai.com")
    'compatible https://proxy.example:8443'
    >>> endpoint_kind(None, "api.openai.com")
    'api.openai.com'
    """
    if not base_url:
        return official
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "compatible (unparsable URL)"
    if host == official:
        return official
    return f"compatible {parts.scheme}://{host}" + (f":{port}" if port else "")


@lru_cache(maxsize=8)
def _code_hash(folder: str, extra: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".py", ".txt"))
    files += [Path(p) for p in extra]
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        h.update(path.name.encode("utf-8") + b"\x00" + data + b"\x00")
    return h.hexdigest()[:12]


def offline_rules_version(settings: Any) -> str:
    """The offline judge's rules version: a hash of its code and word lists (the
    ``ragmeter.judges.offline`` package and the specifics extraction it uses) and of its
    ``settings``; any change to a rule, a list or a threshold changes it."""
    here = Path(__file__).resolve().parent  # ragmeter/judges: the files are hashed, not imported
    code = _code_hash(
        str(here / "offline"), (str(here.parent / "specifics.py"), str(here.parent / "specifics_extraction.py"))
    )
    return f"{code}.{_hash(repr(settings), 8)}"
