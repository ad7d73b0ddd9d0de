"""Internal: The judge interface: a judge performs named *tasks* (see :mod:`ragmeter.judges.tasks`).

A metric never talks to an LLM directly. It asks its :class:`ScoringContext` for a task result
(``extract_claims``, ``verify_claims``, ...); the context asks the judge once per sample and shares
the result with every metric that needs it. Backends differ only in how they answer a task:
LLM backends render the task's prompt and validate the structured answer
(:class:`ragmeter.judges.llm.LLMJudge`), the offline judge computes it without a model.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ragmeter.judges.fingerprint import JudgeFingerprint

__all__ = ["Usage", "TaskResult", "JudgeError", "Judge", "Embedder", "REPEAT"]

#: The repeat a judge call belongs to (0: the first; see :mod:`ragmeter.trust.repeats`): a judge
#: that caches its answers keeps it in the key, so a repeat is asked again, not read back.
REPEAT: ContextVar[int] = ContextVar("ragmeter_repeat", default=0)


@dataclass
class Usage:
    """What judge work cost: requests sent (``calls``, retries included), ``retries``, results
    served from the cache (``cached``), tokens, ``cost_usd`` (None when the price is unknown), and
    ``saved_calls``: the LLM calls a :class:`~ragmeter.judges.cascade.CascadeJudge` did not make
    because its offline judge was confident."""

    calls: int = 0
    retries: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    embedding_calls: int = 0
    cost_usd: float | None = None
    saved_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        cost = None
        if self.cost_usd is not None or other.cost_usd is not None:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            calls=self.calls + other.calls,
            retries=self.retries + other.retries,
            cached=self.cached + other.cached,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            embedding_calls=self.embedding_calls + other.embedding_calls,
            cost_usd=cost,
            saved_calls=self.saved_calls + other.saved_calls,
        )

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: Mapping) -> Usage:
        """Inverse of :meth:`to_dict` (unknown keys ignored)."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass
class TaskResult:
    """A validated task answer (``output``), what producing it cost, who produced it, and an
    optional ``note`` the metrics pass on (e.g. "lexical signals only: embeddings not installed")."""

    task: str
    output: dict
    usage: Usage = field(default_factory=Usage)
    judge: str = ""
    note: str = ""


class JudgeError(RuntimeError):
    """A task that failed for good (after retries): the Score that needed it carries this message."""

    def __init__(self, message: str, *, task: str | None = None, attempts: int = 0, usage: Usage | None = None):
        super().__init__(message)
        self.task = task
        self.attempts = attempts
        self.usage = usage or Usage()


class Judge(abc.ABC):
    """A backend that performs judge tasks.

    ``name`` identifies it in Scores (``"offline"``, ``"openai:gpt-4o-mini"``); ``kind`` is
    ``"LLM"`` or ``"CODE"`` (OpenInference ``annotator_kind``); ``embedder`` embeds texts for the
    metrics that need vectors (None when the judge has none); ``generates_questions`` is False for
    judges that cannot write text (answer relevancy then compares question and answer directly);
    ``combines_tasks`` is True for judges that answer a combined task
    (:data:`~ragmeter.judges.tasks.COMBINED_TASKS`) in one call, as the LLM judges do.
    """

    name: str = "judge"
    kind: str = "LLM"
    embedder: Embedder | None = None
    generates_questions: bool = True
    combines_tasks: bool = False

    @abc.abstractmethod
    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Perform ``task`` on ``inputs`` and return the validated answer; raise :class:`JudgeError`."""

    @property
    def fingerprint(self) -> JudgeFingerprint:
        """What identifies this judge (:class:`~ragmeter.judges.fingerprint.JudgeFingerprint`):
        made from :meth:`describe` once, on first use, and put on every Score it judges."""
        fp = self.__dict__.get("_fingerprint")
        if fp is None:
            from ragmeter.judges.fingerprint import register

            fp = self.__dict__["_fingerprint"] = register(self.describe())
        return fp

    def describe(self) -> JudgeFingerprint:
        """This judge's fingerprint fields. The default names the backend (the part of ``name``
        before ``:``) and the model (the rest), every task's prompt and schema version and the
        embedder; LLM, offline and composite judges say more (their endpoint and settings, rules,
        members)."""
        from ragmeter.judges.fingerprint import JudgeFingerprint, task_versions

        backend, _, model = (self.name or "judge").partition(":")
        return JudgeFingerprint(
            backend=backend, model=model or None, tasks=task_versions(), embedder=getattr(self.embedder, "name", None)
        )

    def check(self) -> None:  # noqa: B027 (an optional hook: the default finds nothing missing)
        """Raise ValueError naming what is missing when this judge cannot work (e.g. no API key).

        Cheap and offline (no request is made): called when a judge is resolved
        (:func:`ragmeter.judges.spec.resolve_judge`), so an unusable judge fails at creation,
        not on every sample. The default finds nothing missing."""

    async def aclose(self) -> None:  # noqa: B027 (an optional hook)
        """Release clients and connections (optional)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Embedder(abc.ABC):
    """Turns texts into vectors (one row per text). ``name`` identifies the model."""

    name: str = "embedder"

    @abc.abstractmethod
    async def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, Usage]:
        """Return an array of shape (len(texts), dim) and what the call cost."""


def cosine(a: Any, b: Any) -> float:
    """Cosine similarity of two vectors, clipped to [-1, 1]; 0.0 when either vector is zero."""
    import numpy as np  # here: importing the judges' interface loads no numpy

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))
