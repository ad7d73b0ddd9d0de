"""Internal: The data model: :class:`Context`, :class:`Sample`, :class:`Score`, and records made samples
(:func:`samples_from_records`; multi-turn records give one sample per retrieval turn). Files are
read and written by :mod:`ragmeter.readers` (:func:`~ragmeter.readers.load_samples`,
:func:`~ragmeter.readers.save_samples`).

Records are validated when they are built. A malformed record raises :class:`RecordError`, which
names the record (``line 3`` of a JSONL file, ``row 2`` of a CSV file, ``record 5`` of a list) and
the field. :func:`~ragmeter.readers.load_samples` collects those errors on the returned :class:`Dataset` instead of
stopping, so the good records are still evaluated and the bad ones are reported.

One bad record never loses the file: a byte that is not UTF-8, a lone surrogate (``"\\ud800"``),
an integer over Python's digit limit, a non-finite context score, nesting deeper than
:data:`MAX_NESTING` or past the JSON parser's recursion limit each reject only their record. Text
that is not valid Unicode is rejected, not repaired, so a report never holds text the input did
not. A UTF-8 byte-order mark (Excel's "CSV UTF-8") is accepted.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from ragmeter.fileio import LongInt, json_text, text_problem
from ragmeter.redact import redact

__all__ = [
    "Context",
    "Sample",
    "Score",
    "label_for",
    "RecordError",
    "Dataset",
    "samples_from_records",
    "collect_samples",
    "samples_of",
    "turn_records",
    "is_multi_turn",
    "check_turn",
    "history_messages",
    "FIELD_ALIASES",
    "CONVERSATION_FIELDS",
    "MAX_HISTORY",
    "ROLES",
    "MAX_NESTING",
]

#: Field names accepted on input, first name is ours. RAGAS and DeepEval datasets load unchanged.
FIELD_ALIASES: dict[str, tuple[str, ...]] = {
    "question": ("question", "user_input", "input", "query"),
    "contexts": ("contexts", "retrieved_contexts", "retrieval_context"),
    "answer": ("answer", "response", "actual_output", "output"),
    "reference": ("reference", "ground_truth", "expected_output", "ground_truths"),
    "relevant_ids": ("relevant_ids", "reference_context_ids", "expected_ids"),
    "id": ("id", "sample_id"),
    "metadata": ("metadata",),
    "conversation_id": ("conversation_id",),
    "turn": ("turn",),
    "history": ("history", "chat_history"),
    "standalone_question": ("standalone_question", "condensed_question"),
}

_CONTEXT_TEXT_KEYS = ("text", "page_content", "content")

#: The fields of a chat turn (see :mod:`ragmeter.conversations`); written only when set.
CONVERSATION_FIELDS = ("conversation_id", "turn", "history", "standalone_question")

#: Messages of history kept by the loaders and by capture (the most recent ones).
MAX_HISTORY = 10

#: Message roles accepted (OpenAI names, RAGAS / LangChain ``type`` names) -> the role stored.
ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
}

#: RAGAS's ids of the retrieved contexts, in order: become the contexts' ids.
CONTEXT_IDS = "retrieved_context_ids"

#: Deepest nesting of lists / objects accepted in ``metadata`` (deeper records are rejected).
MAX_NESTING = 64


class RecordError(ValueError):
    """A malformed input record: says which record (``location``) and which ``field`` is wrong.

    ``str(err)`` reads ``"line 3: field 'contexts': expected a list, got str"``.
    """

    def __init__(self, location: str | None, field: str | None, message: str):
        self.location = location
        self.field = field
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [p for p in (self.location, f"field '{self.field}'" if self.field else None) if p]
        return ": ".join(parts + [self.message])

    def at(self, location: str) -> RecordError:
        """Return a copy of this error located at ``location`` (e.g. ``"line 4"``)."""
        return RecordError(location, self.field, self.message)

    def to_dict(self) -> dict:
        """Plain-dict form for reports."""
        return {"location": self.location, "field": self.field, "message": self.message}


def _type_name(value: Any) -> str:
    if isinstance(value, LongInt):
        return f"an integer of {value.digits} digits (over Python's {sys.get_int_max_str_digits()}-digit limit)"
    return type(value).__name__


def _check_text(value: str, field: str) -> None:
    problem = text_problem(value)
    if problem:
        raise RecordError(None, field, problem)


def _check_nested(value: Any, field: str, depth: int = 0) -> None:
    """Validate free-form data (metadata): valid text in keys and strings, integers within
    Python's limit, at most :data:`MAX_NESTING` levels. Non-finite floats are kept (pandas fills
    missing cells with NaN); reports write them as null."""
    if isinstance(value, str):
        _check_text(value, field)
    elif value is None or isinstance(value, (int, float)):
        return
    elif isinstance(value, LongInt):
        raise RecordError(None, field, f"got {_type_name(value)}")
    elif isinstance(value, (dict, list, tuple)) or isinstance(value, Mapping):
        if depth >= MAX_NESTING:
            raise RecordError(None, field, f"nested deeper than {MAX_NESTING} levels")
        if not isinstance(value, (list, tuple)):
            for k, v in value.items():
                if isinstance(k, str):
                    _check_text(k, field)
                _check_nested(v, f"{field}.{k}" if depth < 2 else field, depth + 1)
        else:
            for v in value:
                _check_nested(v, field, depth + 1)


# --------------------------------------------------------------------------- chat turns


def history_messages(messages: Any, limit: int | None = None, field_name: str = "history") -> list[dict]:
    """``messages`` validated as ``[{"role", "content"}]``: dicts with ``role`` or ``type`` (see
    :data:`ROLES`) and string ``content``, or objects with those attributes (LangChain messages);
    the last ``limit`` of them when ``limit`` is set. Raises :class:`RecordError` naming the field.

    >>> history_messages([{"type": "human", "content": "Hi"}, {"role": "ai", "content": "Hello"}], limit=1)
    [{'role': 'assistant', 'content': 'Hello'}]
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, (list, tuple)):
        raise RecordError(None, field_name, f"expected a list of messages, got {type(messages).__name__}")
    out = []
    for i, m in enumerate(messages):
        get = m.get if isinstance(m, Mapping) else (lambda k, _m=m: getattr(_m, k, None))
        role = ROLES.get(str(get("role") or get("type") or "").lower())
        content = get("content")
        if role is None:
            raise RecordError(
                None,
                field_name,
                f"message {i}: role must be one of {sorted(set(ROLES))}, got {get('role') or get('type')!r}",
            )
        if not isinstance(content, str):
            raise RecordError(None, field_name, f"message {i}: content must be a string, got {type(content).__name__}")
        out.append({"role": role, "content": content})
    return out[-limit:] if limit else out


def _text(value: Any, field_name: str) -> None:
    if value is not None and not isinstance(value, str):
        raise RecordError(None, field_name, f"expected a string, got {type(value).__name__}")
    problem = text_problem(value or "")
    if problem:
        raise RecordError(None, field_name, problem)


def check_turn(sample: Any) -> None:
    """Validate a Sample's conversation fields in place (an integer conversation id becomes text,
    history messages ``{"role", "content"}``, an empty standalone question None); raises
    :class:`RecordError` naming the field."""
    if isinstance(sample.conversation_id, int) and not isinstance(sample.conversation_id, bool):
        sample.conversation_id = str(sample.conversation_id)
    _text(sample.conversation_id, "conversation_id")
    turn = sample.turn
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
        raise RecordError(None, "turn", f"expected a positive integer, got {turn!r:.40}")
    sample.history = history_messages(sample.history)
    for m in sample.history:
        _text(m["content"], "history")
    _text(sample.standalone_question, "standalone_question")
    sample.standalone_question = sample.standalone_question or None


# --------------------------------------------------------------------------- samples


@dataclass
class Context:
    """One retrieved chunk, in retrieval order.

    ``rank`` is the 1-based position in the retrieved list (filled in by :class:`Sample`);
    ``score`` is the retriever's own score when it reports one; ``id`` identifies the chunk for
    retrieval metrics and id-style citations (``[doc-7]``).
    """

    text: str
    id: str | None = None
    score: float | None = None
    rank: int | None = None
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise RecordError(None, "contexts", f"context text must be a string, got {_type_name(self.text)}")
        _check_text(self.text, "contexts")
        if self.id is not None and not isinstance(self.id, str):
            if isinstance(self.id, (int,)) and not isinstance(self.id, bool):
                self.id = str(self.id)
            else:
                raise RecordError(None, "contexts", f"context id must be a string, got {_type_name(self.id)}")
        _check_text(self.id or "", "contexts")
        if self.score is not None:
            if isinstance(self.score, bool) or not isinstance(self.score, (int, float)):
                raise RecordError(None, "contexts", f"context score must be a number, got {_type_name(self.score)}")
            if not _is_finite(self.score):
                raise RecordError(None, "contexts", f"context score must be a finite number, got {self.score!r:.40}")
            self.score = float(self.score)
        if not isinstance(self.metadata, dict):
            raise RecordError(None, "contexts", f"context metadata must be a dict, got {_type_name(self.metadata)}")
        _check_nested(self.metadata, "contexts")

    @classmethod
    def from_value(cls, value: Any, position: int = 0) -> Context:
        """Build a Context from a string, a dict (``text``/``page_content``/``content``, ``id``,
        ``score``, ``metadata``) or a Context."""
        if isinstance(value, Context):
            return value
        field = f"contexts[{position}]"
        if isinstance(value, str):
            try:
                return cls(text=value)
            except RecordError as err:
                raise RecordError(None, field, err.message) from None
        if isinstance(value, Mapping):
            text = next((value[k] for k in _CONTEXT_TEXT_KEYS if k in value), None)
            if text is None:
                raise RecordError(None, field, "a context object needs a 'text' key")
            try:
                meta = dict(value.get("metadata") or {})
            except (TypeError, ValueError):
                raise RecordError(
                    None, field, f"context metadata must be an object, got {_type_name(value['metadata'])}"
                ) from None
            try:
                return cls(text=text, id=value.get("id"), score=value.get("score"), metadata=meta)
            except RecordError as err:
                raise RecordError(None, field, err.message) from None
        raise RecordError(None, field, f"expected a string or an object, got {_type_name(value)}")

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable when metadata is)."""
        out: dict[str, Any] = {"text": self.text}
        if self.id is not None:
            out["id"] = self.id
        if self.score is not None:
            out["score"] = self.score
        if self.metadata:
            out["metadata"] = self.metadata
        return out


@dataclass
class Sample:
    """One RAG interaction: the question, the retrieved contexts in order, and what is known.

    ``answer`` is the generated answer; ``reference`` the ground-truth answer; ``relevant_ids``
    the ground-truth chunk ids, a collection (binary relevance) or a dict id -> grade (graded).
    ``id`` defaults to a stable hash of question, contexts and answer (and conversation id and
    turn when set). A chat turn carries ``conversation_id``, ``turn`` (1-based), ``history`` (the
    messages before it, ``[{"role", "content"}]``) and ``standalone_question`` (the condensed
    question the app retrieved with): see :mod:`ragmeter.conversations`.
    """

    question: str
    contexts: list = field(default_factory=list)
    answer: str | None = None
    reference: str | None = None
    relevant_ids: Any = None
    id: str | None = None
    metadata: dict = field(default_factory=dict)
    conversation_id: str | None = None
    turn: int | None = None
    history: list = field(default_factory=list)
    standalone_question: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise RecordError(None, "question", f"expected a string, got {_type_name(self.question)}")
        if not self.question.strip():
            raise RecordError(None, "question", "must not be empty")
        _check_text(self.question, "question")
        if isinstance(self.contexts, (str, bytes)) or not isinstance(self.contexts, (list, tuple)):
            raise RecordError(None, "contexts", f"expected a list, got {_type_name(self.contexts)}")
        contexts = [Context.from_value(c, i) for i, c in enumerate(self.contexts)]
        for i, c in enumerate(contexts):
            c.rank = i + 1
        self.contexts = contexts
        for name in ("answer", "reference"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise RecordError(None, name, f"expected a string, got {_type_name(value)}")
            _check_text(value or "", name)
        self.relevant_ids = _validate_relevant(self.relevant_ids)
        if self.id is not None and not isinstance(self.id, str):
            if isinstance(self.id, int) and not isinstance(self.id, bool):
                self.id = str(self.id)
            else:
                raise RecordError(None, "id", f"expected a string, got {_type_name(self.id)}")
        _check_text(self.id or "", "id")
        if not isinstance(self.metadata, dict):
            raise RecordError(None, "metadata", f"expected an object, got {_type_name(self.metadata)}")
        _check_nested(self.metadata, "metadata")
        check_turn(self)
        if self.id is None:
            self.id = self._stable_id()

    def _stable_id(self) -> str:
        h = hashlib.sha1()
        parts = [self.question, self.answer or ""] + [c.text for c in self.contexts]
        if self.conversation_id is not None:  # ids of samples outside conversations stay as they were
            parts += ["\x01conversation", self.conversation_id, str(self.turn)]
        for part in parts:
            h.update(part.encode("utf-8"))
            h.update(b"\x00")
        return h.hexdigest()[:12]

    @property
    def context_texts(self) -> list[str]:
        """The contexts' texts, in retrieval order."""
        return [c.text for c in self.contexts]

    @property
    def retrieved_ids(self) -> list[str | None]:
        """The contexts' ids, in retrieval order (None where a context has no id)."""
        return [c.id for c in self.contexts]

    @classmethod
    def from_dict(cls, record: Any, location: str | None = None) -> Sample:
        """Build a Sample from a dict using our field names or RAGAS / DeepEval ones.

        Raises :class:`RecordError` naming ``location`` and the field when the record is malformed.
        """
        if not isinstance(record, Mapping):
            raise RecordError(location, None, f"expected an object, got {_type_name(record)}")
        values: dict[str, Any] = {}
        for ours, names in FIELD_ALIASES.items():
            present = [n for n in names if n in record and not _is_missing(record[n])]
            if present:
                values[ours] = record[present[0]]
        if "question" not in values:
            raise RecordError(
                location, "question", "missing (accepted names: " + ", ".join(FIELD_ALIASES["question"]) + ")"
            )
        if not _is_missing(record.get(CONTEXT_IDS)):
            try:
                values["contexts"] = _with_ids(values.get("contexts"), record[CONTEXT_IDS])
            except RecordError as err:
                raise err.at(location) if location else err from None
        # A reference given as a list of strings (RAGAS ground_truths) is joined into one text.
        ref = values.get("reference")
        if isinstance(ref, list) and all(isinstance(r, str) for r in ref):
            values["reference"] = " ".join(ref)
        extra = {
            k: v
            for k, v in record.items()
            if k != CONTEXT_IDS and not any(k in names for names in FIELD_ALIASES.values())
        }
        metadata = values.get("metadata") or {}
        if extra and isinstance(metadata, dict):
            metadata = {**extra, **metadata}
        values["metadata"] = metadata
        try:
            return cls(**values)
        except RecordError as err:
            raise err.at(location) if location else err from None

    def to_dict(self) -> dict:
        """Plain-dict form with our field names; round-trips through :meth:`from_dict`."""
        out: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "contexts": [c.to_dict() if (c.id or c.score is not None or c.metadata) else c.text for c in self.contexts],
        }
        for name in ("answer", "reference", "relevant_ids"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.metadata:
            out["metadata"] = self.metadata
        for name in CONVERSATION_FIELDS:
            value = getattr(self, name)
            if value:
                out[name] = value
        return out


def _with_ids(contexts: Any, ids: Any) -> Any:
    """RAGAS's ``retrieved_context_ids`` set on the contexts, in order (contexts of empty text when
    only the ids were given, as for RAGAS's id-based metrics)."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise RecordError(None, CONTEXT_IDS, f"expected a list of ids, got {_type_name(ids)}")
    if contexts is None:
        contexts = [""] * len(ids)
    if not isinstance(contexts, (list, tuple)):
        return contexts  # Sample names the contexts field
    if len(contexts) != len(ids):
        raise RecordError(None, CONTEXT_IDS, f"{len(ids)} ids for {len(contexts)} retrieved contexts")
    out = []
    for i, (context, cid) in enumerate(zip(contexts, ids)):
        if isinstance(context, Mapping):
            own = context.get("id")
            if own is not None and str(own) != str(cid):
                raise RecordError(None, CONTEXT_IDS, f"id {cid!r} differs from contexts[{i}]'s id {own!r}")
            context = {**context, "id": cid}
        elif isinstance(context, str):
            context = {"text": context, "id": cid}
        out.append(context)
    return out


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):  # pandas fills absent cells with NaN
        return True
    return False


def _is_finite(number: float) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an int too large for a float
        return False


def _validate_relevant(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        out = {}
        for k, g in value.items():
            if isinstance(g, bool) or not isinstance(g, (int, float)) or not _is_finite(g):
                raise RecordError(None, "relevant_ids", f"grade of {k!r} must be a finite number, got {g!r}")
            _check_text(str(k), "relevant_ids")
            out[str(k)] = g
        return out
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise RecordError(
            None, "relevant_ids", f"expected a list of ids or an object id -> grade, got {_type_name(value)}"
        )
    out_list = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise RecordError(None, "relevant_ids", f"ids must be strings, got {_type_name(v)}")
        _check_text(str(v), "relevant_ids")
        out_list.append(str(v))
    return out_list


_LABELS = ("pass", "warn", "fail")


@overload
def label_for(value: float, threshold: float, warn: float) -> str: ...
@overload
def label_for(value: float | None, threshold: float, warn: float) -> str | None: ...
def label_for(value: float | None, threshold: float, warn: float) -> str | None:
    """``"pass"`` when value >= threshold, ``"warn"`` when value >= warn, else ``"fail"``; None for None.

    >>> label_for(0.75, 0.85, 0.7), label_for(None, 0.85, 0.7)
    ('warn', None)
    """
    if value is None:
        return None
    if value >= threshold:
        return "pass"
    if value >= warn:
        return "warn"
    return "fail"


@dataclass
class Score:
    """The result of one metric on one sample.

    ``value`` is a float in [0, 1], or None. A None value always comes with a reason: ``error``
    when the score could not be computed (bad judge output after retries, exception, missing
    embeddings), or, with no error, ``explanation`` says why the metric does not apply (an answer
    that makes no claims, a sample with no reference). Never NaN, never a silent default.
    ``details`` holds the evidence (per-claim verdicts, per-chunk scores, judge calls and tokens),
    ``judge`` says who judged (``"offline"``, ``"openai:gpt-4o-mini"``, ``"code"``), ``label`` is
    pass / warn / fail against the metric's thresholds (None without a value), ``fingerprint``
    the id of the judge's :class:`~ragmeter.judges.fingerprint.JudgeFingerprint` (backend, model,
    endpoint, prompt versions, settings: ``ragmeter.judges.fingerprint.lookup(id)``). ``error`` and
    ``explanation`` pass through :func:`ragmeter.redact.redact` when the Score is made, so a
    credential echoed by an upstream error reaches no report, export or span.
    """

    metric: str
    value: float | None
    explanation: str = ""
    details: dict = field(default_factory=dict)
    error: str | None = None
    judge: str | None = None
    label: str | None = None
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        self.error = redact(self.error)
        self.explanation = redact(self.explanation)
        if self.value is not None:
            if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
                raise TypeError(f"Score value must be a float or None, got {_type_name(self.value)}")
            v = float(self.value)
            if not math.isfinite(v):
                raise ValueError(f"Score value for {self.metric} must be finite, got {v}")
            if v < -1e-9 or v > 1 + 1e-9:
                raise ValueError(f"Score value for {self.metric} must be in [0, 1], got {v}")
            self.value = min(1.0, max(0.0, v))
        if self.value is None and self.label is not None:
            raise ValueError("a Score without a value has no label")
        if self.label is not None and self.label not in _LABELS:
            raise ValueError(f"label must be one of {_LABELS}, got {self.label!r}")
        if self.value is None and not (self.error or self.explanation):
            raise ValueError(f"Score for {self.metric} has no value and no reason (set error or explanation)")

    @property
    def status(self) -> str:
        """``"ok"`` (has a value), ``"error"`` (could not be computed) or ``"n/a"`` (does not apply)."""
        if self.value is not None:
            return "ok"
        return "error" if self.error else "n/a"

    @property
    def passed(self) -> bool | None:
        """True when labelled pass, False for warn / fail, None without a value."""
        return None if self.label is None else self.label == "pass"

    def to_dict(self) -> dict:
        """Plain-dict form (JSON-serialisable)."""
        return {
            "metric": self.metric,
            "value": self.value,
            "label": self.label,
            "judge": self.judge,
            "fingerprint": self.fingerprint,
            "explanation": self.explanation,
            "error": self.error,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> Score:
        """Inverse of :meth:`to_dict`."""
        return cls(
            metric=d["metric"],
            value=d.get("value"),
            explanation=d.get("explanation") or "",
            details=dict(d.get("details") or {}),
            error=d.get("error"),
            judge=d.get("judge"),
            label=d.get("label"),
            fingerprint=_fingerprint_id(d.get("fingerprint")),
        )


def _fingerprint_id(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"'fingerprint' must be a judge fingerprint id (a string), got {_type_name(value)}")
    return value or None


class Dataset(list):
    """A list of :class:`Sample` plus ``errors``: the records that could not be loaded.

    :func:`ragmeter.evaluate` carries ``errors`` into its result, so bad records are reported
    next to the scores of the good ones.
    """

    def __init__(self, samples: Iterable[Sample] = (), errors: Iterable[RecordError] = (), source: str | None = None):
        super().__init__(samples)
        self.errors: list[RecordError] = list(errors)
        self.source = source


def is_multi_turn(record: Mapping) -> bool:
    """Whether ``record`` is a whole conversation: RAGAS ``MultiTurnSample`` (``user_input`` a list
    of messages) or DeepEval ``ConversationalTestCase`` (``turns``)."""
    return isinstance(record.get("user_input"), list) or isinstance(record.get("turns"), list)


_CONSUMED = ("user_input", "turns", "conversation_id", "id", "name")


def samples_of(record: Any, where: str) -> list[Sample]:
    """The samples of one input record at ``where``: a Sample itself, one per retrieval turn of a
    conversation (:func:`turn_records`), else the record as one sample."""
    if isinstance(record, Sample):
        return [record]
    if isinstance(record, Mapping) and is_multi_turn(record):
        return [Sample.from_dict(rec, at) for at, rec in turn_records(record, where)]
    return [Sample.from_dict(record, where)]


def turn_records(record: Mapping, location: str, max_history: int = MAX_HISTORY) -> list[tuple[str, dict]]:
    """One sample record per retrieval turn of a multi-turn ``record``, each with its location
    (``"line 3, turn 2"``).

    A turn starts at a user message. Its contexts are the ``retrieval_context`` of its assistant
    message (DeepEval) or the contents of its tool messages (RAGAS); its answer is its last
    assistant message with text. Turns without retrieval give no sample but stay in the history of
    later turns (user and assistant messages, the last ``max_history``). The conversation id is
    the record's ``conversation_id`` / ``id`` / ``name``, else a hash of its messages; a sample's
    id is ``"<conversation id>:<turn>"``. The record's other fields (RAGAS ``reference``,
    DeepEval ``expected_outcome``, ``scenario`` ...) go to every sample's metadata: they describe
    the conversation, not one turn.
    """
    key = "user_input" if isinstance(record.get("user_input"), list) else "turns"
    raw = record[key]
    if not all(isinstance(m, Mapping) for m in raw):
        raise RecordError(location, key, "expected a list of message objects")
    roles = history_messages(raw, field_name=key)
    conv = next((record[k] for k in ("conversation_id", "id", "name") if isinstance(record.get(k), (str, int))), None)
    conv = str(conv) if conv is not None else "conv-" + hashlib.sha1(json_text(roles).encode()).hexdigest()[:12]
    metadata = {k: v for k, v in record.items() if k not in _CONSUMED and v is not None}
    out: list[tuple[str, dict]] = []
    history: list[dict] = []
    turn = 0
    i = 0
    while i < len(raw):
        if roles[i]["role"] != "user":
            if roles[i]["role"] == "assistant":
                history.append(roles[i])
            i += 1
            continue
        turn += 1
        question, start = roles[i], i
        i += 1
        contexts: list = []
        answer = None
        retrieved = False
        while i < len(raw) and roles[i]["role"] != "user":
            if roles[i]["role"] == "tool":
                retrieved = True
                contexts.append(roles[i]["content"])
            elif roles[i]["role"] == "assistant":
                if isinstance(raw[i].get("retrieval_context"), list):
                    retrieved = True
                    contexts.extend(raw[i]["retrieval_context"])
                answer = roles[i]["content"] or answer
            i += 1
        if retrieved:
            out.append(
                (
                    f"{location}, turn {turn}",
                    {
                        "id": f"{conv}:{turn}",
                        "question": question["content"],
                        "contexts": contexts,
                        "answer": answer,
                        "conversation_id": conv,
                        "turn": turn,
                        "history": history[-max_history:] if max_history else [],
                        "metadata": metadata,
                    },
                )
            )
        history.append(question)
        history.extend(m for m in roles[start + 1 : i] if m["role"] == "assistant" and m["content"])
    return out


def samples_from_records(records: Iterable[Any], *, on_error: str = "collect") -> Dataset:
    """Validate records (dicts or Samples) into a :class:`Dataset`; errors name ``record N`` (1-based).

    ``on_error="collect"`` (default) keeps going and stores each :class:`RecordError` on
    ``Dataset.errors``; ``"raise"`` raises the first one.
    """
    return collect_samples(list(enumerate(records, start=1)), "record", on_error, None)


def collect_samples(numbered: list, location: str, on_error: str = "collect", source: str | None = None) -> Dataset:
    """A :class:`Dataset` of numbered records ``[(n, record or RecordError)]``: each record's
    samples (:func:`samples_of`), and each error located at ``"<location> <n>"`` (``on_error``:
    ``"collect"`` keeps going, ``"raise"`` raises the first). Sample ids must be unique."""
    if on_error not in ("collect", "raise"):
        raise ValueError("on_error must be 'collect' or 'raise'")
    out = Dataset(source=source)
    seen: dict[str | None, Any] = {}  # Sample.id: typed optional, set by Sample itself
    for n, record in numbered:
        where = f"{location} {n}"
        try:
            if isinstance(record, RecordError):
                raise record
            for sample in samples_of(record, where):  # a conversation gives one per retrieval turn
                if sample.id in seen:
                    raise RecordError(
                        where, "id", f"duplicate id {sample.id!r} (first at {location} {seen[sample.id]})"
                    )
                seen[sample.id] = n
                out.append(sample)
        except RecordError as err:
            err = err if err.location else err.at(where)
            if on_error == "raise":
                raise err from None
            out.errors.append(err)
    return out


def samples_to_pandas(samples: Iterable[Sample]):
    """A pandas DataFrame with one row per sample (needs pandas: ``pip install "ragmeter[pandas]"``)."""
    from ragmeter._extras import needs_extra

    with needs_extra("samples_to_pandas()", "pandas", "pandas"):
        import pandas as pd

    return pd.DataFrame([s.to_dict() for s in samples])
