"""Internal: Questions without a model, for the offline judge: each made by rules from the sentences of the
chunks, the sentence the reference answer.

Kinds (``metadata["kind"]``):

- ``extractive``: one sentence of one chunk as a question, by the first rule that fits it
  (:data:`RULES`): a definition ("Hawking radiation is thermal radiation ..." -> "What is Hawking
  radiation?"), a passive verb and the word after it ("APY can be computed from ..." -> "How can
  APY be computed?", "... is displayed on ..." -> "Where is ... displayed?", "Metformin is
  contraindicated when ..." -> "When is metformin contraindicated?"), a present-tense, past-tense
  or modal verb and its object ("A startup probe protects ..." -> "What does a startup probe
  protect?", "France gained ..." -> "What did France gain?", "The controller must erase ..." ->
  "What must the controller erase?"), a value asked in place (below), else "What does the corpus
  say about A, B and C?" with its three rarest words. A sentence that opens with a condition or a
  setting is asked on its main clause, the opening kept ("In decoder-only language models, what
  does a causal mask set?"). A sentence's capital is dropped where the corpus writes the word in
  lower case elsewhere.
- edge cases (:data:`OFFLINE_EDGE_KINDS`):

  - ``numeric``: a number, amount, percentage or date of a sentence asked in place, the sentence
    cut at the next comma ("The Thirty Years' War began in 1618 with ..." -> "The Thirty Years'
    War began in what year with the Defenestration of Prague?"); not a value of a name, a
    version, a range or a formula;
  - ``negation``: a negated clause as a yes / no question whose answer is no ("Because metformin
    does not stimulate insulin secretion, ..." -> "Does metformin stimulate insulin secretion?");
    the reference starts with "No."; not a clause with a condition or an exception;
  - ``unanswerable``: a thing the corpus defines, asked when it was first described, where no
    chunk that names it states a date (a lexical check: a chunk could say it in words); the
    reference says the documents do not say, and ``relevant_ids`` is None;
  - ``multi_chunk``: two questions on two chunks that share their rarest words (of two documents
    when there are), joined in one ("What does the enzyme RuBisCO fix, and how are the electrons
    transferred?"); both chunks are relevant.

Not made without a model: ambiguous, out-of-scope and multi-hop questions (a fact of one chunk
needed to find the other's), questions that need reasoning over what a chunk says, and
paraphrase: the questions reuse the sentence's own words, so a lexical retriever (BM25) finds
them more easily than a user's question. The rules are English.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable

from ragmeter.data import Context
from ragmeter.specifics import extract_specifics
from ragmeter.testset.documents import tokens
from ragmeter.text import split_sentences

__all__ = ["extractive_items", "offline_items", "question_for", "STOPWORDS", "OFFLINE_EDGE_KINDS"]

#: Words that never make a question's topic (and that near-duplicate detection ignores).
STOPWORDS = frozenset(
    """a an the of in on at to for from by with without and or but not no is are was were be been
being it its this that these those as into than then there their they them he she his her we our you your i what which
who whom whose when where why how does do did can could should would may might will shall has have had also such
about over under between after before since until while more most less least so if only other each all any some very""".split()
)

#: The edge-case kinds the offline generator makes (see the module doc).
OFFLINE_EDGE_KINDS = ("numeric", "negation", "unanswerable", "multi_chunk")

_NP = r"(?P<subject>[A-Z][\w'’-]*(?: [\w'’-]+){0,4}?)"
_DEFINITION = re.compile(r"^(?P<subject>[A-Z][^,;:()]{1,60}?) (?P<verb>is|are|was|were) (?P<rest>[^.]{3,}\.?)$")
_PARTICIPLE = r"[a-z]+(?:ed|en|wn|lt|nt|ght)"
_PASSIVE = re.compile(
    _NP + r" (?P<aux>is|are|was|were|can be|could be|must be|should be|may be|will be)"
    r"(?: (?:[a-z]+ly|then|also|first|now|only))? (?P<part>" + _PARTICIPLE + r")"
    r"(?P<adverb> [a-z]+ly)? (?P<prep>from|by|with|using|through|as|via|in|on|at|inside|within|into|"
    r"onto|when)\b"
)
_PRESENT = re.compile(
    _NP + r" (?P<adverb>(?:[a-z]+ly|also|then|often|usually|always|still) )?"
    r"(?P<verb>[a-z]{2,}[a-hj-rtv-z]s) (?P<next>[\w'’-]+)"
)
_NEGATED = re.compile(
    _NP + r" (?P<aux>is|are|was|were|can|could|will|would|should|must|may|might|has|have|had|"
    r"does|do|did) (?P<neg>not|never) (?P<rest>.{3,})$"
)
_NEVER = re.compile(_NP + r" never (?P<verb>[a-z]{3,}s) (?P<rest>.{3,})$")
_INTRO = re.compile(r"^(?P<word>[A-Z][a-z]+) (?P<clause>[^,]{3,}), (?P<main>.+)$")
#: Intro words after which the clause is a condition of the main clause (kept in front of its question).
_CONDITION = ("When", "If", "Once", "After", "Before", "Under", "With", "In", "For", "During")
#: Intro words after which the clause states a fact of its own.
_CAUSE = ("Because", "Since")
_CONTRACTIONS = (
    (r"\bcannot\b", "can not"),
    (r"\bcan't\b", "can not"),
    (r"\bwon't\b", "will not"),
    (r"\b(is|are|was|were|does|do|did|has|have|had|could|would|should|must)n't\b", r"\1 not"),
)
#: Words that never start a subject: pronouns, subordinators, question words.
_NOT_SUBJECT = frozenset(
    """it they this these those he she we you i there that which who what when where why how if
while although though because since as once after before unless until whereas starting using following under with
in for during by from on at to all both most many some such""".split()
)
_NOT_VERBS = frozenset(
    """this its thus plus always perhaps whereas towards across unless less various news series
species means yes process access address basis analysis lens bus gas class""".split()
)
_AUX_NEXT = frozenset("is are was were be been has have had can could will would should must may might do does".split())
_DETERMINERS = frozenset("the a an each every its their this".split())
#: Endings of a word that is no noun (the head of a subject is one): adjectives and participles.
_NOT_HEAD = re.compile(r"(?:-[\w-]*|ed|ous|able|ible|ing|ful|less|['’]s?)$")
_PAST = re.compile(_NP + r" (?P<adverb>(?:[a-z]+ly|also|then|first|later) )?(?P<verb>[a-z]{3,}ed) (?P<next>[\w'’-]+)")
_MODAL = re.compile(_NP + r" (?P<modal>must|can|may|should|will|could|would) (?P<verb>[a-z]{3,}) (?P<next>[\w'’-]+)")
_PLACES = frozenset("through into in across along past near around inside within".split())
_PREPOSITIONS = frozenset("with by in on at from for as to into onto of over under through about after before".split())
_WH = (
    "What",
    "How",
    "Where",
    "Which",
    "When",
    "Who",
    "Is",
    "Are",
    "Was",
    "Were",
    "Does",
    "Do",
    "Did",
    "Can",
    "Could",
    "Will",
    "Would",
    "Should",
    "Must",
    "May",
    "Might",
    "Has",
    "Have",
    "Had",
)
_HEDGE = re.compile(r"(?:about|roughly|around|approximately|nearly|almost|over|under|some|just|only|up to) $", re.I)
_WORDS = re.compile(r"[\w][\w.+#-]*[\w+#]|\w")
_RANGE = re.compile(r"(?:\d\s?(?:-|–|to|and|or)\s?|\d,\s)$")


class Vocabulary:
    """What the rules know of the corpus: each word's ``idf`` and the words written in lower case
    somewhere (``lower``), so that a sentence's capital is dropped in a question ("Probes can be
    ..." -> "How can probes be ...?") but a name's is kept."""

    def __init__(self, texts: list[str]):
        docs = [set(tokens(t)) for t in texts]
        df = Counter(t for d in docs for t in d)
        n = len(texts)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.rare = max(self.idf.values(), default=0.0) * 0.5
        self.lower = {w for t in texts for w in re.findall(r"\b[a-z][\w-]*", t)}
        #: capitalised words seen inside a sentence, not only at its start: names
        self.names = {w for t in texts for w in re.findall(r"(?<=[a-z,;:] )[A-Z][\w-]*", t)}

    def subject(self, np: str) -> str | None:
        """A subject noun phrase fit for a question, its first word lower-cased when the corpus
        writes it so elsewhere; None for a pronoun, a subordinate clause ("If the ...") or a
        phrase without a noun at its end ("The light-dependent")."""
        words = np.split()
        if not words or words[0].lower() in _NOT_SUBJECT or len(words) > 5 or _NOT_HEAD.search(words[-1]):
            return None
        if words[0].lower() in _DETERMINERS and len(words) < 2:
            return None
        if any(
            w.lower() in ("that", "which", "who", "whose", "and", "or", "but", "not")
            or w.lower() in _AUX_NEXT
            or w.isdigit()
            for w in words
        ):
            return None  # a clause, a verb or a value inside: "The river is 777" is no subject
        first = words[0]
        if first.lower() in _DETERMINERS or (
            first[:1].isupper() and first[1:].islower() and first.lower() in self.lower
        ):
            return first.lower() + np[len(first) :]
        return np

    def name(self, np: str) -> bool:
        """Whether ``np`` is a name: no word in lower case, and one written as names are (an
        inner capital or a digit: "RefCell", "II"; a capital inside a sentence: "... by Hawking")."""
        words = np.split()
        if any(w[:1].islower() for w in words):
            return False
        return any(any(c.isupper() for c in w[1:]) or any(c.isdigit() for c in w) or w in self.names for w in words)

    def topical(self, np: str) -> bool:
        """Whether ``np`` holds a rare word (at least half as rare as the rarest, by idf)."""
        return any(self.idf.get(t, 0.0) >= self.rare for t in set(tokens(np)) - STOPWORDS)


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _base(verb: str) -> str:
    """The base form of a present-tense verb: "applies" -> "apply", "pushes" -> "push",
    "uses" -> "use", "has" -> "have"."""
    if verb == "has":
        return "have"
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z|o)es$", verb):
        return verb[:-2]
    return verb[:-1]


def _definition(sentence: str, vocab: Vocabulary) -> str | None:
    """``What is X?`` for "X is ..." when X names a topic (a rare word); "X is inexpensive and
    ..." or "X is advised when ..." is no definition."""
    m = _DEFINITION.match(sentence)
    if not m or len(m["subject"].split()) > 5 or not vocab.topical(m["subject"]):
        return None
    if re.match(r"[a-z]+(?: and|,|\.|$)|(?:[a-z]+ly )?" + _PARTICIPLE + r"\b|not\b|never\b|\d", m["rest"]):
        return None  # "X is inexpensive and ...", "X is advised when ...", "X is 330 metres ...": no definition
    subject = vocab.subject(m["subject"])
    return f"What {m['verb']} {subject}?" if subject else None


def _passive(sentence: str, vocab: Vocabulary) -> str | None:
    """``How can X be computed?`` / ``Where is X stored?`` / ``When is X advised?`` for "X can be
    computed from ..." / "X is stored in ..." / "X is advised when ...": a passive verb at the
    start of the sentence and the word after it."""
    m = _PASSIVE.match(sentence)
    subject = vocab.subject(m["subject"]) if m else None
    if not m or subject is None:
        return None
    wh = {
        "in": "Where",
        "on": "Where",
        "at": "Where",
        "inside": "Where",
        "within": "Where",
        "into": "Where",
        "onto": "Where",
        "when": "When",
    }.get(m["prep"], "How")
    if m["adverb"] and wh == "Where":
        wh = "How"  # "... is compounded daily on the balance": how, not where
    aux = m["aux"].split()
    return f"{wh} {' '.join([aux[0], subject, *aux[1:], m['part']])}?"


def _present(sentence: str, vocab: Vocabulary) -> str | None:
    """``What does X use?`` for "X uses ...": a determiner and a noun, or a name, then a
    present-tense verb and its object."""
    m = _PRESENT.match(sentence)
    if not m or m["verb"] in _NOT_VERBS or re.search(r"(?:ss|us|is|ous)$", m["verb"]):
        return None
    following = m["next"].lower()
    if following in _AUX_NEXT or following in ("and", "or", "of", "not"):
        return None  # "The most common side effects are ...": "effects" is the subject's noun, not a verb
    words = m["subject"].split()
    if words[0].lower() not in _DETERMINERS and not vocab.name(m["subject"]):
        return None  # without a determiner, only a name is a subject: "Lipid" + "nanoparticles" is not
    subject = vocab.subject(m["subject"])
    if subject is None:
        return None
    if following in _PLACES:  # "The river Seine flows through Paris": where, and no object to ask for
        return f"Where does {subject} {m['adverb'] or ''}{_base(m['verb'])}?"
    if following in _PREPOSITIONS:
        return None
    return f"What does {subject} {m['adverb'] or ''}{_base(m['verb'])}?"


def _base_past(verb: str) -> str:
    """The base form of a regular past-tense verb: "gained" -> "gain", "repackaged" ->
    "repackage", "stopped" -> "stop", "carried" -> "carry", "offered" -> "offer"."""
    stem = verb[:-2]
    if verb.endswith("eed"):
        return verb[:-1]
    if verb.endswith("ied"):
        return verb[:-3] + "y"
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsfz":
        return stem[:-1]
    vowels = "aeiou"
    cvc = (
        len(stem) >= 2
        and stem[-1] not in vowels + "wxy"
        and stem[-2] in vowels
        and (len(stem) == 2 or stem[-3] not in vowels or stem[-4:-2] == "qu")
    )
    if cvc and not (stem[-2] == "e" and stem[-1] in "rnlt"):
        return stem + "e"
    if stem.endswith(("c", "g", "v", "z")) or stem.endswith(("ur", "ir")) and stem[-3:-2] in ("q", "u"):
        return stem + "e"
    return stem


def _past(sentence: str, vocab: Vocabulary) -> str | None:
    """``What did X gain?`` for "X gained ...": a regular past-tense verb after the subject, with
    an object after it (a preposition after it marks a participle: "Patients treated with ...")."""
    m = _PAST.match(sentence)
    if not m or m["next"].lower() in _PREPOSITIONS | _AUX_NEXT | {"and", "or", "not", "to"}:
        return None
    subject = vocab.subject(m["subject"])
    if subject is None or (m["subject"].split()[0].lower() not in _DETERMINERS and len(m["subject"].split()) > 3):
        return None
    return f"What did {subject} {m['adverb'] or ''}{_base_past(m['verb'])}?"


def _modal(sentence: str, vocab: Vocabulary) -> str | None:
    """``What must X erase?`` for "X must erase ...": a modal, a verb and its object."""
    m = _MODAL.match(sentence)
    if not m or m["verb"] in _AUX_NEXT | {"not", "also", "only", "then", "now"} or m["verb"].endswith("ly"):
        return None
    if m["next"].lower() in _PREPOSITIONS | _AUX_NEXT | {"and", "or", "not", "to"}:
        return None  # "X can change many times", "X must respond within ...": no object to ask for
    words = m["subject"].split()
    if words[0].lower() not in _DETERMINERS and not vocab.name(m["subject"]):
        return None
    subject = vocab.subject(m["subject"])
    return f"What {m['modal']} {subject} {m['verb']}?" if subject else None


def _wh_phrase(spec, sentence: str) -> tuple[int, int, str] | None:
    """(start, end, question phrase) replacing a value of the sentence: "what percentage", "how
    much", "what year" / "what date", "how many <unit>"; None for a value that is part of a name
    or a version ("Python 3.13", "PEP 703"), of a range or list of values ("5-10%", "2006 and
    2007") or of a formula."""
    start, end = spec.start, spec.end
    before, after = sentence[:start], sentence[end:]
    if re.search(r"[A-Z][\w-]*\s$", before) or re.search(r"[=^/]", sentence[max(0, start - 3) : end + 3]):
        return None
    if _RANGE.search(before) or re.match(r"\s?(?:-|–|to|and|or)\s?\d|,\s?\d", after):
        return None
    hedge = _HEDGE.search(before)
    if hedge:
        start = hedge.start()
    if spec.kind == "percent":
        return start, end, "what percentage"
    if spec.kind == "money":
        return start, end, "how much"
    if spec.kind == "date":
        value = spec.value
        only_year = value.year is not None and value.month is None and value.day is None
        return (start, end, "what year") if only_year else (start, end, "what date")
    if spec.kind == "number":
        unit = re.match(r" ([a-z][a-z-]{2,})\b", after)
        if unit and unit[1] not in STOPWORDS:
            return start, end + unit.end(), f"how many {unit[1]}"
    return None


def _valued(sentence: str, vocab: Vocabulary | None = None) -> str | None:
    """The sentence with one value asked in place ("... signed in what year ...?"), cut at the
    next comma, semicolon or "and" + verb after it ("... 330 metres tall and stands ..." -> "...
    how many metres tall?"); the last fitting value of the sentence, None when none fits."""
    if len(sentence.split()) > 35:
        return None
    for spec in reversed(extract_specifics(sentence)):
        if spec.kind not in ("number", "percent", "money", "date"):
            continue
        phrase = _wh_phrase(spec, sentence)
        if phrase is None or phrase[0] == 0:
            continue
        start, end, wh = phrase
        tail = re.split(r"[;:]|,\s| and (?=[a-z]+(?:s|ed)\b)", sentence[end:], maxsplit=1)[0]
        head = sentence[:start]
        first = head.split(" ", 1)[0]
        if vocab is not None and first[:1].isupper() and first[1:].islower() and first.lower() in vocab.lower:
            head = head[0].lower() + head[1:]
        return _capital((head + wh + tail).rstrip(" .!,") + "?")
    return None


def _negated(sentence: str, vocab: Vocabulary) -> str | None:
    """A negated clause as a yes / no question without the negation: "X is not Y" -> "Is X Y?",
    "X does not Z" -> "Does X Z?", "X is never Y" -> "Is X ever Y?", "X never restarts Y" -> "Does
    X ever restart Y?"; a leading condition ("When
    ..., ") stays in front, a clause joined by "but" / "and" is asked on its own, and what follows
    the predicate after a comma or "and" is left out. A predicate with a condition or an
    exception in it ("... not restarted unless ...") is not asked: its answer is not a plain no."""
    text = sentence
    for pattern, repl in _CONTRACTIONS:
        text = re.sub(pattern, repl, text)
    if not re.search(r"\b(?:not|never)\b", text):
        return None
    prefix, main = "", text
    intro = _INTRO.match(text)
    if intro and intro["word"] in _CAUSE + _CONDITION + ("Although", "Though", "While", "Whereas", "As"):
        if re.search(r"\b(?:not|never)\b", intro["clause"]):
            if intro["word"] not in _CAUSE:
                return None  # "While X has not ..., Y": X's state is a condition, not a fact to ask about
            main = intro["clause"]  # "Because X does not Y, ..." states that X does not Y
        else:
            main = intro["main"]
            if intro["word"] in _CONDITION:
                prefix = f"{intro['word']} {intro['clause']}, "
    parts = re.split(r", (?:but|and|while|whereas) |; ", main)
    clause = next((p for p in parts if re.search(r"\b(?:not|never)\b", p)), None)
    if clause is None:
        return None
    clause = _capital(clause.strip().rstrip("."))
    m = _NEGATED.match(clause)
    bare = _NEVER.match(clause) if m is None else None  # "X never restarts Y": no auxiliary to move
    found = m or bare
    subject = vocab.subject(found["subject"]) if found else None
    if not found or subject is None:
        return None
    rest = re.split(r",\s| and | but | so | which ", found["rest"], maxsplit=1)[0].strip()
    if re.search(r"\b(?:if|unless|except|until|when|only|instead)\b", rest) or not rest:
        return None
    if m is not None:
        aux, rest = m["aux"], ("ever " if m["neg"] == "never" else "") + rest
    else:
        aux, rest = "does", f"ever {_base(found['verb'])} {rest}"
    return f"{prefix}{aux if prefix else _capital(aux)} {subject} {rest}?"


def _template(sentence: str, vocab: Vocabulary) -> str | None:
    """``What does the corpus say about A, B and C?`` with the sentence's three rarest words
    (names and technical terms first); not for a formula."""
    if re.search(r"[=^]", sentence):
        return None
    words = [w for w in _WORDS.findall(sentence) if w.lower() not in STOPWORDS and not w.isdigit() and len(w) > 2]
    first = words[0] if words else ""

    def weight(w: str) -> float:  # rare words first; names and technical terms before common words
        named = (w[0].isupper() and w != first) or any(not ch.isalpha() for ch in w) or w.isupper()
        return vocab.idf.get(w.lower(), 0.0) + (1.0 if named else 0.0)

    ranked = sorted(dict.fromkeys(words), key=lambda w: -weight(w))[:3]
    if len(ranked) < 2:
        return None
    ordered = [w for w in dict.fromkeys(words) if w in ranked]
    return f"What does the corpus say about {', '.join(ordered[:-1])} and {ordered[-1]}?"


#: The rules of an extractive question, best first (see the module doc).
RULES = (
    ("definition", _definition),
    ("passive", _passive),
    ("present", _present),
    ("past", _past),
    ("modal", _modal),
    ("value", _valued),
    ("template", _template),
)


def question_for(sentence: str, vocab: Vocabulary) -> tuple[str, str] | None:
    """(question, rule) for one sentence: the first rule of :data:`RULES` that fits it; a
    sentence that opens with a condition or a setting ("In decoder-only models, a causal mask sets
    ...") is asked on its main clause, the opening kept ("In decoder-only models, what does a
    causal mask set?"); None when no rule fits.

    >>> vocab = Vocabulary(["APY can be computed from the periodic rate.", "A readiness probe indicates whether "
    ...                     "a container is ready; readiness probes run all the time."])
    >>> question_for("APY can be computed from the periodic rate with a formula.", vocab)
    ('How can APY be computed?', 'passive')
    >>> question_for("A readiness probe indicates whether a container is ready.", vocab)
    ('What does a readiness probe indicate?', 'present')
    """
    for rule, make in RULES[:-1]:
        q = make(sentence, vocab)
        if q:
            return q, rule
    intro = _INTRO.match(sentence)
    if intro and intro["word"] in _CONDITION + ("As",):
        for rule, make in RULES[:-1]:
            q = make(_capital(intro["main"]), vocab)
            if q:
                return f"{intro['word']} {intro['clause']}, {q[0].lower()}{q[1:]}", rule
    q = _template(sentence, vocab)
    return (q, "template") if q else None


# --------------------------------------------------------------------------- the items


class _Corpus:
    """The chunks' candidate sentences (6-40 words), their :class:`Vocabulary`, and which
    sentences are used."""

    def __init__(self, chunks: list[Context], seed: int):
        self.chunks = chunks
        self.vocab = Vocabulary([c.text for c in chunks])
        self.idf = self.vocab.idf
        self.words = [set(tokens(c.text)) - STOPWORDS for c in chunks]
        self.sentences = [[s for s in split_sentences(c.text) if 6 <= len(s.split()) <= 40] for c in chunks]
        self.order = list(range(len(chunks)))
        random.Random(seed).shuffle(self.order)
        self.rng = random.Random(seed + 1)
        self.used: set[tuple[int, str]] = set()

    def informative(self, i: int) -> list[str]:
        """Chunk ``i``'s unused sentences, the most informative (highest summed idf) first. Sums run
        over sorted words: a set's order changes with the process's hash seed, and so would the
        float sum's last bit, and with it the order of sentences that tie."""
        return sorted(
            (s for s in self.sentences[i] if (i, s) not in self.used),
            key=lambda s: -sum(self.idf.get(t, 0.0) for t in sorted(set(tokens(s)) - STOPWORDS)),
        )

    def partner(self, i: int) -> int | None:
        """The chunk sharing the most rare words with chunk ``i`` (another document's when there
        is one), None when no chunk shares any."""
        doc = self.chunks[i].metadata.get("document")
        others = [j for j in range(len(self.chunks)) if j != i]
        elsewhere = [j for j in others if self.chunks[j].metadata.get("document") != doc]
        shared = lambda j: sum(self.idf.get(t, 0.0) for t in sorted(self.words[i] & self.words[j]))  # noqa: E731
        best = max(elsewhere or others, key=lambda j: (shared(j), -j), default=None)
        return best if best is not None and shared(best) > 0 else None


_TIERS = {"definition": 0, "passive": 0, "present": 1, "past": 1, "modal": 1, "value": 1, "template": 3}


def _simple(corpus: _Corpus, i: int, rules: tuple[str, ...] = tuple(_TIERS)) -> dict | None:
    """The best extractive item of chunk ``i``: its sentence with the best rule (definition and
    passive first, the word template last; only ``rules``), the most informative among equals."""
    best = None
    for rank, s in enumerate(corpus.informative(i)):
        found = question_for(s, corpus.vocab)
        if found and found[1] in rules and (best is None or (_TIERS[found[1]], rank) < best[0]):
            best = ((_TIERS[found[1]], rank), s, found[0])
    if best is None:
        return None
    corpus.used.add((i, best[1]))
    return {"question": best[2], "answer": best[1], "chunks": [i], "shown": [i]}


def _numeric(corpus: _Corpus, i: int) -> dict | None:
    for s in corpus.informative(i):
        q = _valued(s, corpus.vocab)
        if q:
            corpus.used.add((i, s))
            return {"question": q, "answer": s, "chunks": [i], "shown": [i]}
    return None


def _negation(corpus: _Corpus, i: int) -> dict | None:
    for s in corpus.informative(i):
        q = _negated(s, corpus.vocab)
        if q:
            corpus.used.add((i, s))
            return {"question": q, "answer": f"No. {s}", "chunks": [i], "shown": [i]}
    return None


def _multi_chunk(corpus: _Corpus, i: int) -> dict | None:
    j = corpus.partner(i)
    if j is None:
        return None
    rules = ("definition", "passive", "present", "past", "modal")  # questions that read well joined by "and"
    first, second = _simple(corpus, i, rules), _simple(corpus, j, rules)
    if first is None or second is None or second["question"].split()[0] not in _WH:
        for item, k in ((first, i), (second, j)):  # give the sentence back
            if item is not None:
                corpus.used.discard((k, item["answer"]))
        return None
    q2 = second["question"]
    if q2.split()[0] in _WH:
        q2 = q2[0].lower() + q2[1:]
    return {
        "question": f"{first['question'][:-1]}, and {q2}",
        "answer": f"{first['answer']} {second['answer']}",
        "chunks": [i, j],
        "shown": [i, j],
    }


def _terms(corpus: _Corpus) -> list[str]:
    """The things the corpus defines ("Hawking radiation is a thermal radiation ..."), named by
    a rare word and by more than one word unless a name, each once."""
    found = []
    for sentences in corpus.sentences:
        for s in sentences:
            m = _DEFINITION.match(s)
            made = question_for(s, corpus.vocab) if m else None
            subject = corpus.vocab.subject(m["subject"]) if m and made and made[1] == "definition" else None
            bare = [w for w in (subject or "").split() if w.lower() not in _DETERMINERS]
            if subject and corpus.vocab.topical(subject) and (len(bare) > 1 or corpus.vocab.name(" ".join(bare))):
                found.append(subject)  # "the result" is too vague to ask about
    return list(dict.fromkeys(found))


def _unanswerable_items(corpus: _Corpus) -> list[dict]:
    """Questions about the things the corpus defines that ask for a date no chunk mentioning the
    thing states (see the module doc): names first, in a seeded order within each."""
    items: list[list[dict]] = [[], []]
    for term in _terms(corpus):
        pattern = re.compile(r"\b" + re.escape(term.lower()) + r"\b")
        holding = [i for i, c in enumerate(corpus.chunks) if pattern.search(c.text.lower())]
        if not holding:
            continue
        kinds = {s.kind for i in holding for s in extract_specifics(corpus.chunks[i].text)}
        plural = re.search(r"(?<!s|u|i)s$", term.split()[-1]) is not None and not term.endswith("ics")
        was = "were" if plural else "was"
        if "date" in kinds:
            continue
        q, a = f"When {was} {term} first described?", f"The documents do not say when {term} {was} first described."
        named = any(c.isupper() for c in term)
        items[0 if named else 1].append({"question": _capital(q), "answer": a, "chunks": [], "shown": holding[:3]})
    for group in items:
        corpus.rng.shuffle(group)
    return items[0] + items[1]


def offline_items(
    chunks: list[Context], wanted: dict[str, int], seed: int = 0, accept: Callable[[str], bool] = lambda q: True
) -> tuple[dict[str, list[dict]], list[str]]:
    """Items ``{question, answer, chunks, shown}`` (chunk indices) per kind of ``wanted``
    (``extractive`` and :data:`OFFLINE_EDGE_KINDS`), and notes. The chunks are taken in a seeded
    turn, each sentence used once; ``accept`` may refuse a question (a near-duplicate). An edge
    kind the corpus has no material for gives its places to the other edge kinds, then to
    ``extractive``; each move is noted."""
    corpus = _Corpus(chunks, seed)
    makers: dict[str, Callable[[_Corpus, int], dict | None]] = {
        "extractive": _simple,
        "numeric": _numeric,
        "negation": _negation,
        "multi_chunk": _multi_chunk,
    }
    unanswerable = iter(_unanswerable_items(corpus))
    got: dict[str, list[dict]] = {k: [] for k in wanted}
    notes: list[str] = []

    def fill(kind: str, count: int) -> int:
        """Up to ``count`` more items of ``kind``; returns how many were made."""
        made = 0
        if kind == "unanswerable":
            for item in unanswerable:
                if made == count:
                    break
                if accept(item["question"]):
                    got.setdefault(kind, []).append(item)
                    made += 1
            return made
        while made < count:
            progress = False  # every item uses up at least one sentence: the loop ends
            for i in corpus.order:
                if made == count:
                    break
                new = makers[kind](corpus, i)
                if new is None:
                    continue
                progress = True
                if accept(new["question"]):
                    got.setdefault(kind, []).append(new)
                    made += 1
            if not progress:
                break
        return made

    edges = [k for k in wanted if k in OFFLINE_EDGE_KINDS]
    short = 0
    for kind in edges:
        made = fill(kind, wanted[kind])
        if made < wanted[kind]:
            notes.append(f"{kind}: {made} of {wanted[kind]} questions (the documents give no more)")
            short += wanted[kind] - made
    for kind in OFFLINE_EDGE_KINDS:  # the places of the kinds that fell short go to the others, in turn
        if not short:
            break
        extra = fill(kind, short)
        if extra:
            notes.append(f"{kind}: {extra} more in place of the edge cases above")
            short -= extra
    want = wanted.get("extractive", 0) + short
    if short:
        notes.append(f"{short} edge-case places went to extractive questions")
    if want:
        fill("extractive", want)
    return got, notes


def extractive_items(chunks: list[Context], limit: int, seed: int = 0) -> list[dict]:
    """Up to ``limit`` extractive items ``{question, answer, chunks: [chunk index]}``: the chunks
    are taken in turn (in an order shuffled by ``seed``), each giving its best question (see
    :func:`offline_items`), until ``limit`` items or no sentence is left."""
    got, _ = offline_items(chunks, {"extractive": limit}, seed)
    return [{k: v for k, v in item.items() if k != "shown"} for item in got["extractive"]]
