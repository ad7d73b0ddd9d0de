"""Internal: Conversations: what the judge reads of a follow-up question, and per-conversation results.

A :class:`~ragmeter.data.Sample` of a chat turn carries ``conversation_id``, ``turn`` (1-based),
``history`` (the messages before the turn, ``[{"role", "content"}]``, at most
:data:`ragmeter.data.MAX_HISTORY` when built by ragmeter; validated and split from multi-turn
datasets by :mod:`ragmeter.data`) and ``standalone_question`` (the condensed question the app
retrieved with, when it made one). Judged metrics read :func:`judged_question`: the standalone
question, else the recent history and the question, so "and in 2020?" is judged as what the user
meant. A sample without history is judged on its question alone, exactly as before.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "NO_RETRIEVAL_KEY",
    "MESSAGE_CHARS",
    "judged_question",
    "no_retrieval_turn",
    "ConversationResult",
    "conversation_results",
    "slope",
]

#: Characters of one history message the judge reads (longer ones end with "…").
MESSAGE_CHARS = 1000

#: ``metadata`` key set to True on a captured chat turn that ran no retriever (its sample has no
#: contexts): it counts in :class:`ragmeter.Monitor`'s no-retrieval rate, and metrics that need
#: contexts say "not applicable" on it.
NO_RETRIEVAL_KEY = "no_retrieval"


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
        lines.append(f"{m['role']}: {text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + '…'}")
    return "\n".join(lines + [f"Current question: {sample.question}"])


def no_retrieval_turn(sample: Any) -> bool:
    """Whether ``sample`` is a chat turn recorded without retrieval: no contexts and
    ``metadata[NO_RETRIEVAL_KEY]`` True.

    >>> from ragmeter.data import Sample
    >>> no_retrieval_turn(Sample("thanks!", answer="You're welcome.", metadata={NO_RETRIEVAL_KEY: True}))
    True
    """
    return not sample.contexts and sample.metadata.get(NO_RETRIEVAL_KEY) is True


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
        return {
            "conversation_id": self.conversation_id,
            "metric": self.metric,
            "turns": [list(t) for t in self.turns],
            "worst": list(self.worst) if self.worst else None,
            "slope": self.slope,
            "falling": self.falling,
        }


def conversation_results(
    results: Iterable[Any], metric: str, tolerance: float = 0.05, *, value: Callable[[Any], float | None] | None = None
) -> list[ConversationResult]:
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
        out.append(
            ConversationResult(
                conv,
                metric,
                rows,
                min(scored, key=lambda row: row[2]) if scored else None,
                s,
                s is not None and s < -tolerance,
            )
        )
    return out
