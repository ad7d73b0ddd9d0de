"""Extractive questions without a model, for the offline judge: each question is made from one
sentence of one chunk, whose text is the reference answer (kind ``"extractive"``).

These test retrieval (the source chunk is known) and copying, not reasoning: they are labelled
so, and the set has no reasoning, multi-context or edge-case questions.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter

from ragmeter.data import Context
from ragmeter.testset.documents import tokens
from ragmeter.text import split_sentences

__all__ = ["extractive_items", "STOPWORDS"]

#: Words that never make a question's topic (and that near-duplicate detection ignores).
STOPWORDS = frozenset("""a an the of in on at to for from by with without and or but not no is are was were be been
being it its this that these those as into than then there their they them he she his her we our you your i what which
who whom whose when where why how does do did can could should would may might will shall has have had also such
about over under between after before since until while more most less least so if only other each all any some very""".split())

_DEFINITION = re.compile(r"^(?P<subject>[A-Z][^,;:()]{1,60}?) (?P<verb>is|are|was|were) (?P<rest>[^.]{3,}\.?)$")
_WORDS = re.compile(r"[\w][\w.+#-]*[\w+#]|\w")


def _question(sentence: str, idf: dict[str, float]) -> str | None:
    """A question the sentence answers: ``What is X?`` for a definition ("X is ...") whose
    subject has a word at least half as rare as the rarest (idf), else
    ``What does the corpus say about A, B and C?`` with the sentence's three rarest words."""
    m = _DEFINITION.match(sentence)
    rare = max(idf.values(), default=0.0) * 0.5  # a subject needs a rare word: "the side effects" is not a topic
    if m and len(m["subject"].split()) <= 4 and " that " not in m["subject"] and any(idf.get(t, 0.0) >= rare for t in set(tokens(m["subject"])) - STOPWORDS):
        subject = m["subject"]
        if subject.split()[0] in ("The", "A", "An"):
            subject = subject[0].lower() + subject[1:]
        return f"What {m['verb']} {subject}?"
    words = [w for w in _WORDS.findall(sentence) if w.lower() not in STOPWORDS and not w.isdigit() and len(w) > 2]
    first = words[0] if words else ""

    def weight(w: str) -> float:  # rare words first; names and technical terms before common words
        named = (w[0].isupper() and w != first) or any(not ch.isalpha() for ch in w) or w.isupper()
        return idf.get(w.lower(), 0.0) + (1.0 if named else 0.0)

    ranked = sorted(dict.fromkeys(words), key=lambda w: -weight(w))[:3]
    if len(ranked) < 2:
        return None
    ordered = [w for w in dict.fromkeys(words) if w in ranked]
    return f"What does the corpus say about {', '.join(ordered[:-1])} and {ordered[-1]}?"


def extractive_items(chunks: list[Context], limit: int, seed: int = 0) -> list[dict]:
    """Up to ``limit`` items ``{question, answer, chunks: [chunk index]}``: the chunks are taken
    in turn (in an order shuffled by ``seed``), each giving its most informative unused sentence (6-40 words, the highest summed
    idf of its distinct words), until ``limit`` items or no sentence is left."""
    docs = [set(tokens(c.text)) for c in chunks]
    df = Counter(t for d in docs for t in d)
    n = len(chunks)
    idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
    queues = []
    for c in chunks:
        candidates = [s for s in split_sentences(c.text) if 6 <= len(s.split()) <= 40]
        queues.append(sorted(candidates, key=lambda s: -sum(idf.get(t, 0.0) for t in set(tokens(s)) - STOPWORDS)))
    items: list[dict] = []
    order = list(range(n))
    random.Random(seed).shuffle(order)
    while len(items) < limit and any(queues):
        for i in order:
            q = queues[i]
            while q and len(items) < limit:
                sentence = q.pop(0)
                question = _question(sentence, idf)
                if question:
                    items.append({"question": question, "answer": sentence, "chunks": [i]})
                    break
    return items
