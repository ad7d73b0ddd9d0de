"""What leaves ragmeter: no secrets ever, and no content when content capture is off.

Every writer passes what it writes through this module, so that both rules live in one place:
results files (``.jsonl`` / ``.json`` / ``.csv``), the Markdown report, the HTML page, the history
store, evaluation spans and Phoenix annotations call :func:`for_output` on each result; log lines
that may quote a judge's answer or an error go through :func:`for_log`.

**Secrets** (always): every string of a result, whatever field it is in (question, answer, chunk
texts and metadata, sample metadata, score explanations, errors and details), passes through
:func:`ragmeter.redact.redact` (API-key shapes, ``Bearer`` tokens, URL passwords, ``password=``
fields), and in metadata the value of a secret-named key (``api_key``, ``password``, ``token`` ...)
is masked whole (:func:`ragmeter.redact.redact_value`). Sample ids are kept as they are.

**Content** (``capture_content=False``, or ``RAGMETER_CAPTURE_CONTENT=false``): a sample captured
without content (:func:`without_content`; ``metadata["content_captured"]`` is False) has every
question, chunk, answer, reference and chat-history text replaced by ``[not captured: N chars]``,
and so do its scores: the explanation, and every string in ``details`` (claims, quotes, statements,
reasons, entities) except the labels listed in :data:`LABEL_KEYS` (verdicts, methods, kinds) and
ids (keys ``id`` / ``*_id`` / ``*_ids``). Numbers (values, counts, chunk indices, supports) are
kept. Error texts keep their wording, but quoted text in them (``'...'``, ``"..."``: a judge's
answer, an echoed request) and any verbatim piece of the sample's content are replaced.

>>> from ragmeter.data import Sample, Score
>>> from ragmeter.metrics.scoring import SampleResult
>>> s = Sample("Who wrote Dune?", ["Dune is by Frank Herbert."], answer="Frank Herbert.", id="q1",
...            metadata={"api_key": "abc123", "db": "postgresql://app:hunter2@db/x"})
>>> r = SampleResult(s, {"faithfulness": Score("faithfulness", 1.0, explanation="1 of 1 claims supported",
...                  details={"claims": [{"claim": "Frank Herbert wrote Dune.", "verdict": "supported"}]})})
>>> out = for_output(r)
>>> out.sample.metadata
{'api_key': '[REDACTED]', 'db': 'postgresql://app:[REDACTED]@db/x'}
>>> bare = without_content(r)
>>> bare.sample.question, bare.scores["faithfulness"].details["claims"]
('[not captured: 15 chars]', [{'claim': '[not captured: 25 chars]', 'verdict': 'supported'}])
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ragmeter.data import Sample, Score
from ragmeter.redact import redact, redact_value

__all__ = ["redact", "redact_value", "without_content", "content_captured", "CAPTURE_CONTENT_ENV"]

log = logging.getLogger("ragmeter")

#: The environment variable that sets ``capture_content`` when it is not given (``true`` / ``false``).
CAPTURE_CONTENT_ENV = "RAGMETER_CAPTURE_CONTENT"
#: Sample metadata keys that hold content (replaced like the fields by :func:`without_content`);
#: ``retrievers[i]["query"]`` too.
CONTENT_METADATA_KEYS = ("partial_answer",)

#: Keys of a score's ``details`` whose string values are labels, not content: kept without content.
LABEL_KEYS = frozenset(
    {
        "verdict",
        "label",
        "status",
        "mode",
        "method",
        "aggregate",
        "against",
        "kind",
        "task",
        "judge",
        "model",
        "marker",
        "metric",
    }
)

_PLACEHOLDER = re.compile(r"\[not captured: \d+ chars\]")
_ID_KEY = re.compile(r"(?:.*_)?ids?")
# a quoted literal: '...' or "..." (backslash escapes allowed), or an unterminated one running to the end
_QUOTED = re.compile(r"""'(?:[^'\\]|\\.)*(?:'|$)|"(?:[^"\\]|\\.)*(?:"|$)""")
_SENTENCE = re.compile(r"(?<=[.!?;:\n])\s+")
_SCOPE: contextvars.ContextVar[tuple[str, ...] | None] = contextvars.ContextVar("ragmeter_content_off", default=None)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def capture_content_setting(value: bool | None = None) -> bool:
    """Whether captures and :func:`ragmeter.evaluate` keep content (questions, chunk texts, answers,
    references, and the scores' claims, quotes and explanations): ``value`` when given, else
    ``RAGMETER_CAPTURE_CONTENT`` (true / false, 1 / 0, yes / no, on / off), else True. An
    unreadable environment value is logged as a warning and True is used."""
    if value is not None:
        if not isinstance(value, bool):
            raise ValueError(f"capture_content must be True, False or None, got {value!r}")
        return value
    raw = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    if not raw or raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    log.warning("ragmeter: %s=%r is not true or false; content is captured", CAPTURE_CONTENT_ENV, raw)
    return True


def placeholder(text: str) -> str:
    """``"[not captured: N chars]"`` for ``text`` (N: its length); a placeholder stays as it is."""
    return text if _PLACEHOLDER.fullmatch(text) else f"[not captured: {len(text)} chars]"


def content_captured(sample: Any) -> bool:
    """False for a sample made by :func:`without_content` (writers then write no content)."""
    meta = getattr(sample, "metadata", None)
    return not (isinstance(meta, dict) and meta.get("content_captured") is False)


def without_content(item: Any) -> Any:
    """A copy of a :class:`~ragmeter.Sample` or a :class:`~ragmeter.SampleResult` that carries no
    content (the originals are left as they are).

    A sample: the question, the answer, the reference, every chunk text and chat-history message
    become ``"[not captured: N chars]"``, as do ``metadata["partial_answer"]`` and each
    ``metadata["retrievers"][i]["query"]``; ids, scores, ``relevant_ids`` and the rest of the
    metadata (latency, tokens, models, trace ids) are kept, and ``metadata["content_captured"]``
    is False. A result: its sample so, and each score's explanation and ``details`` strings as
    the module docstring says; error texts lose quoted text and the sample's own content."""
    if not hasattr(item, "scores"):
        return _sample_without_content(item)
    sample = item.sample
    needles = _content_needles(sample) if content_captured(sample) else _SCOPE.get() or ()
    bare = sample if not content_captured(sample) else _sample_without_content(sample)
    scores = {name: _score_without_content(s, needles) for name, s in item.scores.items()}
    return dataclasses.replace(item, sample=bare, scores=scores)


def for_output(result: Any) -> Any:
    """What a writer writes for ``result`` (a :class:`~ragmeter.SampleResult`): a copy without
    secrets, and without content when its sample was captured without (see the module docstring).
    The result itself is left as it is."""
    if not content_captured(result.sample):
        result = without_content(result)
    return dataclasses.replace(
        result,
        sample=_redacted_sample(result.sample),
        scores={name: _redacted_score(s) for name, s in result.scores.items()},
    )


def for_log(text: Any) -> str:
    """``text`` fit for a log line: redacted, and inside :func:`content_scope` (a sample scored
    without content capture) without quoted text or the sample's content."""
    out = redact(str(text))
    needles = _SCOPE.get()
    return out if needles is None else _scrub(out, needles) or ""


class _ScopedLogFilter(logging.Filter):
    """On a judge SDK's own logger: inside :func:`content_scope`, a record keeps only its lead-in
    (``"Request options"``), never the request it dumps (the SDKs log each request's body at
    DEBUG, escaped in ways no scrubbing can follow), before any handler sees it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _SCOPE.get() is not None:
            lead = str(record.msg).split(":", 1)[0][:80]
            record.msg, record.args = f"{lead}: [not logged: content capture is off]", None
        return True


#: The loggers where the OpenAI and Anthropic SDKs write request bodies (a filter on a logger
#: applies to the records made on that logger only, so each is named).
SDK_LOGGERS = ("openai._base_client", "anthropic._base_client")
_SDK_FILTER = _ScopedLogFilter()


def _guard_sdk_logs() -> None:
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if _SDK_FILTER not in logger.filters:
            logger.addFilter(_SDK_FILTER)


@contextlib.contextmanager
def content_scope(sample: Sample) -> Iterator[None]:
    """While scoring ``sample`` without content capture: :func:`for_log` (and the errors of
    :func:`without_content`) leave out its content, and so do the judge SDKs' own debug log
    records (:data:`SDK_LOGGERS`). Follows the asyncio tasks started inside."""
    _guard_sdk_logs()
    token = _SCOPE.set(_content_needles(sample))
    try:
        yield
    finally:
        _SCOPE.reset(token)


# --------------------------------------------------------------------------- content


def _sample_without_content(sample: Sample) -> Sample:
    meta = dict(sample.metadata)
    for key in CONTENT_METADATA_KEYS:
        if isinstance(meta.get(key), str):
            meta[key] = placeholder(meta[key])
    if isinstance(meta.get("retrievers"), list):
        meta["retrievers"] = [
            dict(r, query=placeholder(r["query"])) if isinstance(r, dict) and isinstance(r.get("query"), str) else r
            for r in meta["retrievers"]
        ]
    meta["content_captured"] = False
    contexts = [dataclasses.replace(c, text=placeholder(c.text), metadata=dict(c.metadata)) for c in sample.contexts]
    # dataclasses.replace: fields this function does not name are kept as they are
    return dataclasses.replace(
        sample,
        question=placeholder(sample.question),
        contexts=contexts,
        answer=None if sample.answer is None else placeholder(sample.answer),
        reference=None if sample.reference is None else placeholder(sample.reference),
        metadata=meta,
        history=[
            dict(m, content=placeholder(m["content"])) if isinstance(m.get("content"), str) else m
            for m in sample.history
        ],
        standalone_question=None if sample.standalone_question is None else placeholder(sample.standalone_question),
    )


def _content_needles(sample: Sample) -> tuple[str, ...]:
    """The sample's content texts and their sentences, longest first (what errors must not repeat)."""
    texts = [
        sample.question,
        sample.answer,
        sample.reference,
        sample.standalone_question,
        *(c.text for c in sample.contexts),
        *(m.get("content") for m in sample.history if isinstance(m, Mapping)),
    ]
    out: set[str] = set()
    for t in texts:
        if isinstance(t, str) and not _PLACEHOLDER.fullmatch(t):
            out.update(p.strip() for p in [t, *_SENTENCE.split(t)] if len(p.strip()) >= 8)
    return tuple(sorted(out, key=len, reverse=True))


def _scrub(text: str | None, needles: Iterable[str]) -> str | None:
    """``text`` without the ``needles`` and without quoted literals."""
    if not text:
        return text
    for n in needles:
        if n in text:
            text = text.replace(n, placeholder(n))
    return _QUOTED.sub(
        lambda m: (
            m.group(0)
            if _PLACEHOLDER.search(m.group(0)) or len(m.group(0)) <= 2
            else m.group(0)[0] + placeholder(m.group(0)[1:-1]) + m.group(0)[0]
        ),
        text,
    )


def _details_without_content(value: Any, key: str | None = None, depth: int = 0) -> Any:
    if isinstance(value, str):
        keep = key is not None and (key in LABEL_KEYS or _ID_KEY.fullmatch(key))
        return value if keep else placeholder(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth > 30:
        return None
    if isinstance(value, Mapping):
        out = {}
        for i, (k, v) in enumerate(value.items()):
            name = k if isinstance(k, str) and re.fullmatch(r"[\w.:@/-]{1,64}", k) else f"{placeholder(str(k))} #{i}"
            out[name] = _details_without_content(v, name, depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_details_without_content(v, key, depth + 1) for v in value]
    if callable(getattr(value, "tolist", None)):  # NumPy arrays and scalars: numbers, as JSON writes them
        return _details_without_content(value.tolist(), key, depth + 1)
    return placeholder(str(value))


def _score_without_content(score: Score, needles: Iterable[str]) -> Score:
    return dataclasses.replace(
        score,
        explanation=placeholder(score.explanation) if score.explanation else "",
        details=_details_without_content(score.details),
        error=_scrub(score.error, needles),
    )


# --------------------------------------------------------------------------- secrets


def _redacted_sample(sample: Sample) -> Sample:
    """``sample`` redacted; the same object when there is nothing to redact."""
    texts = [redact(t) for t in (sample.question, sample.answer, sample.reference, sample.standalone_question)]
    contexts = [(redact(c.text), redact_value(c.metadata)) for c in sample.contexts]
    metadata, history = redact_value(sample.metadata), redact_value(sample.history)
    same = all(
        a is b for a, b in zip(texts, (sample.question, sample.answer, sample.reference, sample.standalone_question))
    )
    same = (
        same
        and metadata is sample.metadata
        and history is sample.history
        and all(t is c.text and m is c.metadata for (t, m), c in zip(contexts, sample.contexts))
    )
    if same:
        return sample
    question, answer, reference, standalone = texts
    return dataclasses.replace(
        sample,
        question=question,
        answer=answer,
        reference=reference,
        metadata=metadata,
        history=history,
        standalone_question=standalone,
        contexts=[dataclasses.replace(c, text=t, metadata=m) for (t, m), c in zip(contexts, sample.contexts)],
    )


def _redacted_score(score: Score) -> Score:
    """``score`` with its details redacted (error and explanation were, when the Score was made);
    the same object when there is nothing to redact."""
    details = redact_value(score.details)
    if details is score.details:
        return score
    return dataclasses.replace(score, details=details)
