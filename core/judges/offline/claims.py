"""Internal: Claims and questions: which sentences of an answer state something, and what a question asks.

An answer's units become claims (:func:`extract_claims`) once citation markers, questions,
pleasantries and evasions ("I don't know") are left out, split into clauses by
:func:`ragmeter.text.split_claims`. A question is split into the parts it asks about
(:func:`question_parts`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragmeter.citations import strip_citations
from ragmeter.judges.offline.text import content_words
from ragmeter.text import split_claims, split_sentences

# Evasions speak about the answerer ("I don't know", "I'm not sure", "I can't answer that") or
# about the sources ("The context does not mention the price", "It is not specified in the
# documents", "cannot be determined", "there is not enough information"). A negative statement
# about the world is a claim like any other: "The plan does not include dental coverage",
# "Refunds are not available after 30 days", "There is no evidence that X" and "The court could
# not determine the cause" are checked against the sources, not skipped.
_UNSURE = (
    r"\bi\s+(?:do\s+not|don't|dont)\s+know\b|\b(?:i\s+am|i'm|im|i)\s+(?:not\s+sure|unsure|uncertain)\b|"
    r"\b(?:i|we)\s+(?:cannot|can\s*not|can't|cant|am\s+unable\s+to|are\s+unable\s+to|could\s+not|couldn't|won't)\s+"
    r"(?:determine|answer|find|say|tell|know|provide|help|confirm|verify|access|assist)\b|"
    r"\bi\s+have\s+no\s+(?:idea|information|knowledge|data)\b|\bno\s+idea\b|\bas\s+an\s+ai\b|"
    r"\b(?:i'm|i\s+am)\s+sorry\b|\bsorry,?\s+(?:but\s+)?i\b|\bbeyond\s+(?:my|the)\s+(?:knowledge|scope)\b"
)
_SOURCE = (
    r"(?:context|passage|text|documents?|articles?|sources?|excerpts?|snippets?|materials?|search\s+results|"
    r"(?:provided|given|retrieved|available)\s+(?:information|content|data))"
)
_NO_SOURCE = (
    r"\b(?:cannot|can\s*not|can't|could\s+not|couldn't)\s+be\s+(?:determined|answered|confirmed|verified|known|said|"
    r"told|found\s+in)\b|"
    r"\b(?:not\s+(?:enough|sufficient)|insufficient)\s+(?:relevant\s+)?(?:information|data|details|context)\b|"
    r"\bno\s+(?:relevant\s+)?(?:information|details|mention)\b|"
    rf"\b{_SOURCE}\s+(?:provided\s+|given\s+|above\s+)?(?:does|do|did)\s*(?:n't|\s+not)\s+"
    r"(?:mention|provide|contain|say|specify|include|state|cover|discuss|address|give)\b|"
    r"\b(?:is|are|was|were)\s*(?:n't|\s+not)\s+(?:mentioned|specified|stated|discussed|given|provided\s+in)\b|"
    r"\b(?:not|never)\s+(?:mentioned|specified|stated|provided)\s+in\b|"
    r"\bunclear\s+(?:from|in|based)\b|\bit\s+(?:is\s+)?(?:unknown|unclear|not\s+clear)\b|"
    r"\bthere\s+is\s+no\s+way\s+to\s+know\b|^\W*it\s+depends\b"
)
_RE_UNSURE = re.compile(_UNSURE, re.I)
_RE_NONCOMMITTAL = re.compile(f"{_UNSURE}|{_NO_SOURCE}", re.I)
# What an answer states after saying what its sources lack: "The documents don't mention it, but
# X" and "It depends on the plan: X" state X. After the answerer's own uncertainty ("I'm not sure,
# but X", "I have no idea, but X") the unit stays out: on grounded dialogue, readers do not count
# such a turn as attributable even when X is in the source (BEGIN dev 0.958 -> 0.955 when X was
# checked; benchmarks/JUDGE_RESULTS.md, round 9).
_RE_HEDGE_REST = re.compile(r"(?:,?\s*\bbut\b|[:;])\s*", re.I)
_RE_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def after_hedge(text: str) -> str | None:
    """``text`` without a statement of what its sources lack, keeping what it states after it
    ("but X", ": X") and any sentence before it; None when it states nothing after it, or when the
    answerer declares their own uncertainty ("I'm not sure, but X").

    >>> after_hedge("The documents don't mention the price, but the museum opens at 9 am.")
    'the museum opens at 9 am.'
    >>> after_hedge("It depends on the plan: the premium plan costs $20.")
    'the premium plan costs $20.'
    >>> after_hedge("I'm not sure, but the museum opens at 9 am.") is None
    True
    >>> after_hedge("I don't know.") is None, after_hedge("The context does not say, sorry.") is None
    (True, True)
    """
    last = None
    for last in _RE_NONCOMMITTAL.finditer(text):  # noqa: B007 (keeps the last match)
        pass
    if last is None:
        return None
    m = _RE_HEDGE_REST.search(text, last.end())
    if not m:
        return None
    rest = text[m.end() :].strip()
    if len(content_words(rest)) < 2 or _RE_NONCOMMITTAL.search(rest):
        return None
    before = _RE_SENTENCE_END.split(text[: last.start()])
    if _RE_UNSURE.search(before[-1] + text[last.start() : m.start()]):
        return None
    return " ".join([*before[:-1], rest]) if len(before) > 1 else rest


_RE_PLEASANTRY = re.compile(
    r"^\W*(?:thanks?(?: you)?|thank you(?: for [\w\s]+)?|you're welcome|hi|hello|hey|good (?:morning|afternoon|evening)|"
    r"hope (?:this|that|it) helps|let me know[\w\s]*|feel free to ask[\w\s]*|sure|of course|certainly|great question|"
    r"ok(?:ay)?|glad to help|happy to help)\b[\w\s,']*[.!]*\W*$",
    re.I,
)


# Meta sentences about the answer itself ("Here is a concise summary of the passage:", "Below
# are the key points.") state nothing about the world: they are not claims.
_RE_META = re.compile(
    r"^\W*(?:sure[!,.]?\s*|certainly[!,.]?\s*|of course[!,.]?\s*)?(?:here(?:\s+(?:is|are)|\s*['’]s)|below\s+(?:is|are)|"
    r"the\s+following\s+(?:is|are)|this\s+is|i\s+(?:will|'ll|can)\s+(?:summari[sz]e|explain|answer|list|describe)|"
    r"let\s+me\s+(?:summari[sz]e|explain|answer|list|describe))\b[^.!?]{0,80}?"
    r"\b(?:summary|summari[sz]e|overview|answer|response|points?|facts?|list|explanation|passage|text|"
    r"article|document|context|information|details|breakdown)\b[^.!?]{0,40}[:.!]?\s*$|"
    r"^\W*i\s+hope\s+(?:this|that|it)\s+helps\b.*$",
    re.I,
)
# A Markdown heading ("### Benefits") names what follows; it states nothing. (A lead-in to a list,
# "The methods include:", stays a claim: dropping it lowered every RAGChecker dev statistic, its
# words restate what the reference covers.)
_RE_HEADING = re.compile(r"^\s*#{1,6}\s")
# Openers that frame a claim without adding to it: "Based on the context, X", "According to the
# passage, X", "In summary, X", and a reply particle opening a dialogue turn ("Yes, X", "No but X",
# "Sure! X", "Not really, X").
_RE_OPENER = re.compile(
    r"^\W*(?:(?:based\s+on|according\s+to|from|given|in\s+light\s+of)\s+(?:the|this|these|my|your)\s+"
    r"(?:provided\s+|given\s+|retrieved\s+|above\s+)?(?:context|content|passage|text|document|documents|article|"
    r"information|sources?|excerpts?|data|search\s+results|conversation)(?:\s+(?:provided|given|above))?\s*,\s*|"
    r"(?:in\s+summary|to\s+summari[sz]e|in\s+short|in\s+conclusion|overall|in\s+brief)\s*,\s*|"
    r"(?:yes|yeah|yep|yup|no|nope|not\s+really|sure|absolutely|definitely|of\s+course|certainly|indeed|well|oh|"
    r"ok|okay|right|true|exactly|actually|wow|haha|lol|hmm+|great|cool|nice|interesting)"
    r"(?:\s*[,!.:;]+\s*|\s+(?=but\b)))+",
    re.I,
)


# A question that presupposes its clause asserts it: "Did you know that the tower is 330 metres
# tall?" states that the tower is 330 metres tall (dialogue turns often share a fact this way).
_RE_FACTIVE_QUESTION = re.compile(
    r"^\W*(?:(?:and|but|so|also|oh|hey|well)\s*,?\s+)?(?:did\s+you\s+(?:know|realize|realise|hear\s+that|notice\s+that)|"
    r"have\s+you\s+heard\s+that|(?:were|are)\s+you\s+aware\s+that|(?:can|could|would)\s+you\s+believe)"
    r"(?:\s+that)?\s*,?\s+(?=\S)",
    re.I,
)


def presupposed(text: str) -> str | None:
    """The clause a factive question asserts ("Did you know that X?" -> "X"), or None when
    ``text`` is no such question.

    >>> presupposed("Did you know that the Eiffel Tower is 330 metres tall?")
    'the Eiffel Tower is 330 metres tall'
    >>> presupposed("Did you know it?") is None, presupposed("Do you like football?") is None
    (True, True)
    """
    m = _RE_FACTIVE_QUESTION.match(text)
    if not m or not text.rstrip().endswith("?"):
        return None
    clause = text[m.end() :].rstrip().rstrip("?!. ").strip()
    return clause if len(content_words(clause)) >= 2 else None


def strip_opener(text: str) -> str:
    """``text`` without an opener that frames it ("Based on the context, ", "Yes, ", "No but ..."
    keeps "but ..."); the text itself when nothing would be left.

    >>> strip_opener("Based on the provided context, the tower is 330 metres tall.")
    'the tower is 330 metres tall.'
    >>> strip_opener("Yes, he is.")
    'he is.'
    """
    m = _RE_OPENER.match(text)
    if not m or m.end() >= len(text.rstrip()):
        return text
    return text[m.end() :]


def is_meta(text: str) -> bool:
    """Whether a sentence speaks about the answer instead of stating something ("Here is a
    summary of the passage:", "Here's a summary:", "I hope this helps.", a Markdown heading).

    >>> is_meta("Here is a concise summary of the passage:"), is_meta("Here is the museum.")
    (True, False)
    >>> is_meta("Here's a summary:"), is_meta("### Benefits"), is_meta("The main causes are:")
    (True, True, False)
    """
    text = text.strip()
    return bool(_RE_META.match(text) or _RE_HEADING.match(text))


def is_noncommittal(text: str) -> bool:
    """Whether ``text`` declines to answer or evades ("I don't know", "cannot be determined from
    the context", "the documents do not mention it", "it depends").

    An answer that also makes a substantive statement (a sentence with two content words or more
    that is neither evasive nor a pleasantry, or that states something after saying what the
    sources lack: "The documents don't say Y, but X") is not noncommittal. A negative statement
    about the world ("The plan does not include dental coverage") is no evasion.

    >>> is_noncommittal("I don't know."), is_noncommittal("The context does not mention the price.")
    (True, True)
    >>> is_noncommittal("Paris is the capital of France.")
    False
    """
    if not text or not text.strip():
        return True
    sentences = split_sentences(text)
    if not sentences:
        return True
    flagged = [bool(_RE_NONCOMMITTAL.search(s)) for s in sentences]
    if not any(flagged):
        return False
    substantive = [
        s
        for s, f in zip(sentences, flagged)
        if (not f and not _RE_PLEASANTRY.match(s) and len(content_words(s)) >= 2) or (f and after_hedge(s))
    ]
    return not substantive


def extract_claims(units: Sequence[str | None]) -> list[dict]:
    """The claims of an answer's units: ``{"unit": index, "text": clause}`` for every clause with
    content words, citation markers removed, questions (but the clause a factive question asserts:
    "Did you know that X?" -> "X"), pleasantries, meta sentences ("Here is a summary:") and evasive
    units left out (but what follows a statement of what the sources lack: "The documents don't say
    Y, but X" -> "X"), openers ("Based on the context, ", "Yes, ") cut off."""
    claims = []
    for u, unit in enumerate(units):
        text = strip_citations(unit or "")
        text = presupposed(strip_opener(text)) or text
        if text and _RE_NONCOMMITTAL.search(text):
            rest = after_hedge(text)
            if rest is not None:
                text = rest
            elif is_noncommittal(text):
                continue
        if not text or text.endswith("?") or _RE_PLEASANTRY.match(text) or is_meta(text):
            continue
        text = strip_opener(text)
        for piece in split_claims(text):
            piece = piece.strip()
            if piece and content_words(piece):
                claims.append({"unit": u, "text": piece})
    return claims


_RE_PART_SPLIT = re.compile(
    r"\?\s*|;\s*|,?\s+and\s+(?=(?:what|which|who|whom|whose|when|where|why|how|is|are|does|do|did|can)\b)", re.I
)


def question_parts(question: str) -> list[str]:
    """The distinct parts a question asks about ("What is X and how does it work?" -> 2 parts)."""
    parts = [p.strip(" ,.") for p in _RE_PART_SPLIT.split(question or "")]
    return [p for p in parts if p and content_words(p)] or ([question.strip()] if question and question.strip() else [])
