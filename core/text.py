"""Internal: Deterministic text splitting shared by metrics and judges (no model, no network).

``split_sentences`` breaks text into sentences, keeping abbreviations ("e.g.", "Dr.", "U.S."),
initials ("J. K. Rowling"), decimals ("3.14"), version numbers, ellipses and list items intact;
``split_statements`` further breaks a sentence into clauses at semicolons; ``split_claims`` goes
one step further for claim extraction without a model: it also splits coordinated clauses
("X was born in 1905 and died in 1955") and repeats the subject when the second clause has none.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences", "split_statements", "split_claims"]

_ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "cf",
    "al",
    "fig",
    "figs",
    "no",
    "nos",
    "vol",
    "vols",
    "approx",
    "inc",
    "ltd",
    "co",
    "corp",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "u.s",
    "u.k",
    "u.n",
    "e.u",
    "ph.d",
    "a.m",
    "p.m",
    "mt",
    "ft",
    "gen",
    "gov",
    "sen",
    "rep",
    "est",
    "dept",
    "univ",
    "op",
    "ed",
    "eds",
    "lt",
    "col",
    "capt",
    "cmdr",
    "sgt",
    "rev",
    "hon",
    "pres",
    "messrs",
    "mme",
    "mlle",
    "ave",
    "blvd",
    "rd",
    "ch",
    "sec",
    "pp",
    "pg",
    "ca",
    "viz",
    "resp",
    "incl",
    "excl",
    "min",
    "max",
    "avg",
    "div",
    "assn",
    "bros",
    "mfg",
    "yr",
    "yrs",
    "hr",
    "hrs",
    "sq",
    "oz",
    "lb",
    "lbs",
    "kg",
    "km",
    "cm",
    "mm",
    "tel",
    "ext",
    "eq",
    "eqs",
    "ref",
    "refs",
    "chap",
    "art",
    "para",
}

# Abbreviations that normally precede a number or a name ("No. 5", "Dr. Smith"): never a sentence end.
_PREFIX_ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "st",
    "no",
    "nos",
    "vol",
    "fig",
    "figs",
    "gen",
    "gov",
    "sen",
    "rep",
    "lt",
    "col",
    "capt",
    "sgt",
    "rev",
    "hon",
    "pres",
    "mt",
    "pp",
    "sec",
    "eq",
    "eqs",
    "ref",
    "e.g",
    "i.e",
    "cf",
    "vs",
    "approx",
    "ca",
    "viz",
    "incl",
    "chap",
    "art",
    "para",
    "tel",
}

# A candidate boundary: terminal punctuation (plus closing quotes/brackets) followed by space.
_BOUNDARY = re.compile(r"((?:\.\.\.|…|[.!?。！？])+[\"'”’)\]]*)(\s+)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•‣◦▪]|\(?\d{1,3}[.)]|\(?[a-z]\))\s+")
_INLINE_LIST = re.compile(r"(?<=:)\s+(?=\(?\d{1,2}\)\s+\S)|(?<=[,;])\s+(?=\d{1,2}\)\s+\S)|\s+(?=\(\d{1,2}\)\s+\S)")
_HAS_WORD = re.compile(r"[^\W_]")
_TERMINAL = re.compile(r"[.!?:;。！？…\"'”’)\]]$")
_OPENERS = "\"'“‘([«"


def _last_word(before: str) -> str:
    word = before.rsplit(None, 1)[-1] if before.strip() else ""
    return word.lstrip(_OPENERS).rstrip(".").lower()


_RE_INITIALISM = re.compile(r"(?:[a-z]\.)*[a-z]")


def _is_abbreviation(before: str) -> bool:
    word = _last_word(before)
    if not word:
        return False
    if word in _ABBREVIATIONS:
        return True
    # Single letters and dotted initialisms ("J.", "U.S.A.") are not sentence ends.
    return _RE_INITIALISM.fullmatch(word) is not None


def _split_line(line: str) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(line):
        punct = m.group(1)
        end = m.end(1)
        before = line[start : m.start(1) + 1]
        rest = line[m.end() :]
        nxt = rest[:1]
        nxt_word = rest.lstrip(_OPENERS)[:1]
        plain_period = punct.rstrip("\"'”’)]") == "."
        if plain_period and punct == "." and _is_abbreviation(before):
            word = _last_word(before)
            # A known prefix ("Dr.", "No.") or an initial never ends a sentence. Other
            # abbreviations ("etc.", "Inc.", "U.S.") end one when a capitalised word follows
            # that is not itself a name-like continuation; we keep them joined unless the next
            # word starts a typical new sentence (a pronoun or article).
            if word in _PREFIX_ABBREVIATIONS or re.fullmatch(r"[a-z]", word):
                continue
            if not re.match(
                r"(?:The|A|An|It|He|She|They|We|I|This|That|These|Those|In|On|But|And|So|However|There)\b", rest
            ):
                continue
        # The next sentence should not start lower-case right after a period ("approx. two",
        # "the U.S. economy") or after an ellipsis that trails off mid-sentence.
        if nxt and nxt_word.islower() and punct.rstrip("\"'”’)]") in (".", "...", "…"):
            continue
        # A quoted question or exclamation inside a sentence: '"Why?" she asked.'
        if nxt_word.islower() and punct[-1:] in "\"'”’" and punct[:1] in "!?":
            continue
        if nxt and nxt.isdigit() and punct == "." and re.search(r"\b(?:no|nos|p|pp|vol|fig|sec)\.$", before.lower()):
            continue
        piece = line[start:end].strip()
        if piece:
            out.append(piece)
        start = m.end()
    tail = line[start:].strip()
    if tail:
        out.append(tail)
    return out


_FENCE = re.compile(r"^\s*(?:```|~~~)")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _table_row(line: str) -> bool:
    """Whether ``line`` is a Markdown table row ("| Basic | $185 |")."""
    stripped = line.strip()
    return stripped.startswith("|") and stripped.count("|") >= 2


def _logical_lines(text: str) -> list[str]:
    """Lines of ``text`` with hard-wrapped paragraph lines joined back together.

    A line is joined to the previous one when the previous line does not end with terminal
    punctuation and this one starts lower-case (and is not a list item). A Markdown table row
    is a line of its own; the header row (the one above the ``|---|`` rule) and code fences are
    left out.
    """
    lines: list[str] = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if _TABLE_RULE.match(raw) and "|" in raw:
            if len(lines) >= 2 and lines[-1] == "" and _table_row(lines[-2]):
                del lines[-2:]  # the header row names the columns; it states nothing
            lines.append("")
            continue
        if _table_row(raw):
            lines.extend([raw.strip(), ""])
            continue
        if not stripped or _FENCE.match(raw):
            lines.append("")
            continue
        if (
            lines
            and lines[-1]
            and not _TERMINAL.search(lines[-1])
            and stripped[:1].islower()
            and not _LIST_ITEM.match(raw)
        ):
            lines[-1] = lines[-1] + " " + stripped
        else:
            lines.append(raw)
    return [ln for ln in lines if ln.strip()]


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences.

    Lines are split first (list items and paragraphs are separate units, their bullet or number
    removed; hard-wrapped lines that continue lower-case are joined), then each line at
    ``. ! ?`` (or an ellipsis) followed by whitespace, unless the period ends an abbreviation or
    an initial, or the next word starts lower-case. Decimals and versions ("3.14", "v2.1") never
    split: there is no whitespace after their period. Closing quotes stay with their sentence.
    Pieces without a letter or a digit are dropped.

    >>> split_sentences("Dr. Smith arrived at 3.30 p.m. on Monday. He left early! Why?")
    ['Dr. Smith arrived at 3.30 p.m. on Monday.', 'He left early!', 'Why?']
    >>> split_sentences("Steps:\\n1. Install it.\\n2. Run it.")
    ['Steps:', 'Install it.', 'Run it.']
    >>> split_sentences('J. K. Rowling wrote it in the U.S. in 1997. "It sold well." It did.')
    ['J. K. Rowling wrote it in the U.S. in 1997.', '"It sold well."', 'It did.']
    >>> split_sentences("Revenue grew 3.5% vs. last year, see No. 5. The end...")
    ['Revenue grew 3.5% vs. last year, see No. 5.', 'The end...']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    sentences: list[str] = []
    for line in _logical_lines(text):
        line = _LIST_ITEM.sub("", line, count=1).strip()
        if not line:
            continue
        for piece in _split_line(line):
            # Inline numbered lists: "Do this: (1) install it (2) run it"
            if ")" not in piece:
                sentences.append(piece)
                continue
            for part in _INLINE_LIST.split(piece):
                part = re.sub(r"^\(?\d{1,2}\)\s+", "", part).strip()
                if part:
                    sentences.append(part)
    # Pieces without a letter or a digit (". . .", "--") are not sentences.
    return [s for s in sentences if _HAS_WORD.search(s)]


def split_statements(text: str) -> list[str]:
    """Split ``text`` into statements: sentences, further split at semicolons.

    >>> split_statements("It is fast; it is small. It is free.")
    ['It is fast;', 'it is small.', 'It is free.']
    """
    out: list[str] = []
    for sentence in split_sentences(text):
        parts = [p.strip() for p in re.split(r"(?<=;)\s+", sentence) if p.strip()]
        out.extend(parts)
    return out


# --------------------------------------------------------------------------- claims

_AUX = (
    "is|are|was|were|be|been|being|has|have|had|does|do|did|will|would|can|could|shall|should|may|"
    "might|must|won't|can't|cannot|isn't|aren't|wasn't|weren't|hasn't|haven't|hadn't|doesn't|don't|"
    "didn't|wouldn't|couldn't|shouldn't"
)
# Words that can open a predicate (a verb phrase without its own subject).
_PREDICATE_START = re.compile(
    rf"^(?:(?:{_AUX})\b|(?:also|then|later|now|still|never|not|subsequently|eventually|finally)\s+\w+|"
    r"[a-z][a-z-]{2,}ed\b|(?:became|began|built|bought|brought|came|died|found|gave|got|grew|held|kept|"
    r"knew|led|left|lost|made|met|paid|put|ran|said|saw|sent|set|sold|spent|stood|told|took|thought|"
    r"won|wrote|went|fell|rose|drove|chose|broke|spoke|taught|caught|fought|sought|owns|plans|says|"
    r"wants|needs|seems|agrees|asks|suggests|decides|offers|works|lives|goes|makes|takes|gets|gives|"
    r"uses|adds|includes|expects|reports|shows|remains|continues|provides|costs|covers|contains|requires|allows|"
    r"helps|means|becomes|comes|runs|stays|looks|feels|sounds|lasts|leads|owns)\b)"
)
_SUBJECT_END = re.compile(rf"\b(?:{_AUX})\b|\b[a-z]+(?:ed|es|s)\b")
# Clause starters after a comma + conjunction that have their own subject.
_SUBJECT_START = re.compile(
    r"^(?:I|you|he|she|it|we|they|there|this|that|these|those|the|a|an|his|her|its|their|our|my|"
    r"[A-Z][\w'’-]*)\b"
)


_DETERMINERS = {
    "the",
    "a",
    "an",
    "his",
    "her",
    "its",
    "their",
    "our",
    "my",
    "your",
    "this",
    "that",
    "these",
    "those",
    "some",
    "many",
    "several",
    "all",
    "both",
    "each",
    "every",
    "no",
}


_BE_HAVE = {"is", "are", "was", "were", "has", "have", "had"}
_RELATIVE_PRONOUNS = {"that", "which", "who", "whom", "whose"}
_PRONOUN_CLAUSE = re.compile(r"^(?:I|he|she|it|we|they|there)\s+\w+")


def _subject_of(clause: str) -> tuple[str, str] | None:
    """(subject, auxiliary) of ``clause`` by heuristics: the words before its first verb-like
    word, and that word when it is an auxiliary followed by a participle ("was elected")."""
    words = clause.split()
    for i, w in enumerate(words[:8]):
        if i == 0 or words[i - 1].lower() in _DETERMINERS:
            continue
        if _SUBJECT_END.fullmatch(w.lower().strip(",;:")):
            subject = " ".join(words[:i])
            if not subject or subject.endswith(","):
                return None
            aux = ""
            if (
                w.lower() in _BE_HAVE
                and i + 1 < len(words)
                and re.fullmatch(r"[a-z][a-z-]{2,}ed", words[i + 1].lower())
            ):
                aux = w
            return subject, aux
    return None


def _split_coordination(sentence: str) -> list[str]:
    """Split one sentence at coordinating conjunctions that join full clauses or predicates."""
    pattern = re.compile(r"(?:,\s*(?:and|but|while|whereas|yet|so)\s+|;\s+|\s+(?:and|but)\s+(?=\S))")
    parts: list[str] = []
    start = 0
    first_subject: tuple[str, str] | None = None
    for m in pattern.finditer(sentence):
        left = sentence[start : m.start()].strip()
        right = sentence[m.end() :]
        comma = m.group(0).lstrip().startswith((",", ";"))
        predicate = bool(_PREDICATE_START.match(right))
        head = right.split(",")[0]
        head_words = head.split()
        own_subject = bool(_SUBJECT_START.match(right)) and bool(_SUBJECT_END.search(head))
        # "Bob then left" has its own subject; "perks that can ..." is a noun and its relative clause.
        own_subject = own_subject or any(
            _PREDICATE_START.match(" ".join(head_words[k:])) and head_words[k - 1].lower() not in _RELATIVE_PRONOUNS
            for k in (1, 2)
            if len(head_words) > k
        )
        if not comma:  # "X and he left": only a personal pronoun clearly opens a new clause
            own_subject = own_subject and bool(_PRONOUN_CLAUSE.match(right))
        if len(left.split()) < 3 or len(right.split()) < 2:
            continue
        if left.count("(") > left.count(")") or left.count("[") > left.count("]"):
            continue  # inside brackets: "fat (commonly butter, but also oil) and flour"
        last = left.split()[-2:]
        if (
            len(last) == 2
            and last[0].lower() in _DETERMINERS
            and last[1].endswith("ed")
            and re.match(r"[a-z-]+ed\b", right)
        ):
            continue  # two modifiers of one noun: "a filtered and pasteurized product"
        if not (predicate or own_subject):
            continue
        subject = first_subject if parts else _subject_of(left)
        if (
            not own_subject and not subject
        ):  # a bare predicate needs a subject to repeat ("... diverged and came together")
            continue
        if not parts:
            first_subject = subject
        parts.append(left)
        start = m.end()
    if not parts:
        return [sentence]
    parts.append(sentence[start:].strip())
    out = [parts[0]]
    for p in parts[1:]:
        if _PREDICATE_START.match(p) and first_subject:
            noun, aux = first_subject
            if aux and re.match(r"[a-z][a-z-]{2,}ed\b", p):
                noun = f"{noun} {aux}"
            p = f"{noun} {p}"
        out.append(p[:1].upper() + p[1:] if p[:1].islower() and not _PREDICATE_START.match(p) else p)
    return out


def split_claims(text: str, relative: bool = True) -> list[str]:
    """Split ``text`` into claim-sized pieces: statements, further split at coordinated clauses
    and (``relative=True``) at non-restrictive relative clauses (", who ...", ", which ...").

    A second clause without a subject of its own gets the first clause's subject repeated, so
    every piece can be checked on its own. Short fragments are never split off.

    >>> split_claims("Einstein was born in 1879 and died in 1955.")
    ['Einstein was born in 1879', 'Einstein died in 1955.']
    >>> split_claims("Revenue rose 5%, but margins fell. Cats and dogs are pets.")
    ['Revenue rose 5%', 'Margins fell.', 'Cats and dogs are pets.']
    >>> split_claims("She was elected in 2010 and re-elected in 2014.")
    ['She was elected in 2010', 'She was re-elected in 2014.']
    >>> split_claims("Media, who was released on bail, spoke to reporters.")
    ['Media spoke to reporters.', 'Media was released on bail']
    >>> split_claims("Use merge to keep the history of how branches diverged and came together.")
    ['Use merge to keep the history of how branches diverged and came together.']
    """
    out: list[str] = []
    for statement in split_statements(text):
        statement = statement.rstrip(";").strip()
        for clause in _split_coordination(statement):
            for piece in _split_relative(clause) if relative else [clause]:
                piece = piece.strip().strip(",;").strip()
                if piece:
                    out.append(piece)
    return out


_RELATIVE = re.compile(r",\s+(who|which)\s+")
_NP_DETERMINERS = {
    "the",
    "a",
    "an",
    "its",
    "their",
    "his",
    "her",
    "this",
    "that",
    "these",
    "those",
    "our",
    "my",
    "your",
    "some",
    "any",
    "each",
    "every",
}


def _antecedent(left: str) -> str | None:
    """The noun phrase right before a relative clause: back to its determiner (at most five
    words), else a run of capitalised words, else the last word."""
    words = left.split()
    if not words:
        return None
    for i in range(len(words) - 1, max(-1, len(words) - 6), -1):
        if words[i].lower() in _NP_DETERMINERS:
            return " ".join(words[i:]) if i < len(words) - 1 else None
        if words[i].endswith((",", ";", ":")) and i < len(words) - 1:
            break
    caps: list[str] = []
    for w in reversed(words):
        if w[:1].isupper():
            caps.insert(0, w)
        else:
            break
    return " ".join(caps) if caps else words[-1].strip(",;:")


def _split_relative(clause: str) -> list[str]:
    """Split a non-restrictive relative clause (", who ..." / ", which ...") off as its own claim,
    with its antecedent as subject: "Ann, who lives in Oslo, sings" -> "Ann sings", "Ann lives in Oslo"."""
    m = _RELATIVE.search(clause)
    if not m:
        return [clause]
    antecedent = _antecedent(clause[: m.start()])
    tail = clause[m.end() :]
    # Mid-sentence ("Ann, who lives in Oslo, sings"): the clause ends at the comma before the main
    # predicate. Otherwise it runs to the end of the sentence (and keeps its lists).
    end = len(tail)
    for c in re.finditer(r",\s+", tail):
        if _PREDICATE_START.match(tail[c.end() :]):
            end = c.start()
            break
    body = tail[:end].strip().rstrip(".")
    if not antecedent or len(body.split()) < 2:
        return [clause]
    rest_text = tail[end:].lstrip(", ")
    main = clause[: m.start()] + ((" " + rest_text) if rest_text else ".")
    rest = _split_relative(main.strip())
    relative_claim = f"{antecedent} {body}"
    return rest + [relative_claim[:1].upper() + relative_claim[1:]]
