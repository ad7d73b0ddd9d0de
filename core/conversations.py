"""Conversations: chat history on a sample, what the judge reads of a follow-up question, multi-turn
datasets (RAGAS ``MultiTurnSample``, DeepEval ``ConversationalTestCase``) and per-conversation
results.

A :class:`~ragmeter.data.Sample` of a chat turn carries ``conversation_id``, ``turn`` (1-based),
``history`` (the messages before the turn, ``[{"role", "content"}]``, at most
:data:`MAX_HISTORY` when built here) and ``standalone_question`` (the condensed question the app
retrieved with, when it made one). Judged metrics read :func:`judged_question`: the standalone
question, else the recent history and the question, so "and in 2020?" is judged as what the user
meant. A sample without history is judged on its question alone, exactly as before.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ragmeter.data import RecordError, Sample
from ragmeter.fileio import json_text, text_problem

__all__ = ["MAX_HISTORY", "ROLES", "NO_RETRIEVAL_KEY", "history_messages", "check_turn", "judged_question",
           "no_retrieval_turn", "is_multi_turn", "samples_of", "turn_records", "ConversationResult", "conversation_results",
           "slope"]

#: Messages of history kept by the loaders and by capture (the most recent ones).
MAX_HISTORY = 10

#: Message roles accepted (OpenAI names, RAGAS / LangChain ``type`` names) -> the role stored.
ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant",
         "system": "system", "tool": "tool", "function": "tool"}

#: Characters of one history message the judge reads (longer ones end with "…").
MESSAGE_CHARS = 1000

#: ``metadata`` key set to True on a captured chat turn that ran no retriever (its sample has no
#: contexts): it counts in :class:`ragmeter.Monitor`'s no-retrieval rate, and metrics that need
#: contexts say "not applicable" on it.
NO_RETRIEVAL_KEY = "no_retrieval"


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
            raise RecordError(None, field_name, f"message {i}: role must be one of {sorted(set(ROLES))}, "
                                                f"got {get('role') or get('type')!r}")
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


def judged_question(sample: Any) -> str:
    """The question as judged metrics send it: ``standalone_question`` when set; else, when the
    sample has history, the history and the question (below); else ``question`` unchanged.

    >>> from ragmeter.data import Sample
    >>> print(judged_question(Sample("and in 2020?", history=[{"role": "user", "content": "GDP of France in 2019?"},
    ...                                                      {"role": "assistant", "content": "2.7 trillion USD."}])))
    Conversation so far:
    user: GDP of France in 2019?
    assistant: 2.7 trillion USD.
    Current question: and in 2020?
    """
    if sample.standalone_question:
        return sample.standalone_question
    if not sample.history:
        return sample.question
    lines = ["Conversation so far:"]
    for m in sample.history:
        text = " ".join(m["content"].split())
        lines.append(f"{m['role']}: {text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + '…'}")
    return "\n".join(lines + [f"Current question: {sample.question}"])


def no_retrieval_turn(sample: Any) -> bool:
    """Whether ``sample`` is a chat turn recorded without retrieval: no contexts and
    ``metadata[NO_RETRIEVAL_KEY]`` True.

    >>> from ragmeter.data import Sample
    >>> no_retrieval_turn(Sample("thanks!", answer="You're welcome.", metadata={NO_RETRIEVAL_KEY: True}))
    True
    """
    return not sample.contexts and sample.metadata.get(NO_RETRIEVAL_KEY) is True


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
            out.append((f"{location}, turn {turn}", {
                "id": f"{conv}:{turn}", "question": question["content"], "contexts": contexts, "answer": answer,
                "conversation_id": conv, "turn": turn, "history": history[-max_history:] if max_history else [],
                "metadata": metadata}))
        history.append(question)
        history.extend(m for m in roles[start + 1:i] if m["role"] == "assistant" and m["content"])
    return out


def slope(points: Iterable[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(x, y)`` points; None with fewer than two distinct x.

    ``slope = sum((x - mean_x) * (y - mean_y)) / sum((x - mean_x) ** 2)``. For turns 1, 2, 3 scored
    0.9, 0.8, 0.4: mean_x = 2, mean_y = 0.7, numerator = (-1)(0.2) + 0 + (1)(-0.3) = -0.5,
    denominator = 2, slope = -0.25 per turn.

    >>> round(slope([(1, 0.9), (2, 0.8), (3, 0.4)]), 6)
    -0.25
    """
    pts = list(points)
    xs = [x for x, _ in pts]
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x in xs)


@dataclass
class ConversationResult:
    """One conversation's turns and how ``metric`` went over them.

    ``turns``: ``[(turn, sample_id, value)]`` in turn order (value None where the metric has none);
    ``worst``: the ``(turn, sample_id, value)`` of the lowest value; ``slope``: the least-squares
    slope of the value over the turn number (see :func:`slope`), None with fewer than two scored
    turns; ``falling``: slope below ``-tolerance``.
    """

    conversation_id: str
    metric: str
    turns: list = field(default_factory=list)
    worst: tuple | None = None
    slope: float | None = None
    falling: bool = False

    def to_dict(self) -> dict:
        """Plain-dict form."""
        return {"conversation_id": self.conversation_id, "metric": self.metric,
                "turns": [list(t) for t in self.turns], "worst": list(self.worst) if self.worst else None,
                "slope": self.slope, "falling": self.falling}


def conversation_results(results: Iterable[Any], metric: str, tolerance: float = 0.05, *,
                         value: Callable[[Any], float | None] | None = None) -> list[ConversationResult]:
    """Per conversation (samples with a ``conversation_id``, in order of first appearance) the
    turn values of ``metric``, the worst turn and whether quality falls: the least-squares slope of
    value over turn number (:func:`slope`) is below ``-tolerance`` per turn. Samples without a turn
    number are numbered in the order they appear. ``value(result)``, when given, is the turn's
    value instead of the metric's score (e.g. the dashboard's composite score; ``metric`` then
    only names it)."""
    groups: dict[str, list] = {}
    for r in results:
        conv = r.sample.conversation_id
        if conv is None:
            continue
        if value is not None:
            v = value(r)
        else:
            score = r.scores.get(metric)
            v = None if score is None else score.value
        groups.setdefault(conv, []).append((r.sample.turn, r.sample.id, v))
    out = []
    for conv, rows in groups.items():
        rows = [(t if t is not None else n, sid, v) for n, (t, sid, v) in enumerate(rows, start=1)]
        rows.sort(key=lambda row: row[0])
        scored = [row for row in rows if row[2] is not None]
        s = slope((t, v) for t, _, v in scored)
        out.append(ConversationResult(conv, metric, rows, min(scored, key=lambda row: row[2]) if scored else None,
                                      s, s is not None and s < -tolerance))
    return out
