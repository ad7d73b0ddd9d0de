"""Internal: The offline judge: every judge task answered without an LLM, a key or the network.

:class:`OfflineJudge` implements the seven tasks of :mod:`ragmeter.judges.tasks` from
deterministic signals:

- claims are the answer's sentences split into clauses (:func:`ragmeter.text.split_claims`);
  meta sentences ("Here is a summary of the passage:", "I hope this helps") are no claims, and
  openers ("Based on the context, ", "Yes, ") are cut off;
- text is normalised before any check: figures and dates split by a tokeniser ("3, 000",
  "31. 8", "December 6 , 1975"), month and weekday names in lower case, and a demonym and its
  country ("Belgian", "Belgium") read the same;
- a claim is *supported* by a chunk when enough of its content words (stemmed) appear in the chunk
  and in one passage of it (a run of up to three sentences); with the ``local`` extra installed, the
  cosine similarity of claim and passage from a small sentence-embedding model (all-MiniLM-L6-v2,
  loaded from an installed package, never downloaded) can lift a paraphrase that shares few words;
- hard checks on specifics override similarity: a number, date, amount, percentage, proper name or
  quotation of the claim that the chunk does not state makes the claim unsupported
  (``contradicted`` when the best-matching passage states a different value of the same kind,
  ``not_found`` otherwise); so do a negation the passage does not share and a word whose antonym the
  passage uses instead ("increased" against "decreased");
- the claim is also aligned word by word with its best passage (``difflib`` on stems), and each
  short difference standing between matching words is judged: a negation added or dropped, an
  antonym, another value of a closed class ("after a month" against "after a year", "fourth"
  against "first", "he" against "she", "may" against "will"), another name in the same place, two
  words trading places around a third ("Bob asked Ann" against "Ann asked Bob"), or a restrictive
  word ("only", "all", "never") the passage does not have;
- verdicts and reasons are deterministic: nothing depends on Python's hash seed;
- each chunk listed in a verdict's ``evidence`` comes with its own verbatim quote: its best-matching
  passage for the claim, cut down to one sentence when one sentence holds as many of the claim's
  words as the whole passage. A claim that no chunk supports alone but the chunks support together
  is ``supported`` with those chunks listed (the reason says "together"), each quoting the part of
  the claim it holds;
- chunk relevance, statement attribution and answer relevancy use the same word overlap and
  similarity between question, statements and chunks. The judge cannot write questions
  (``generates_questions = False``: ``generate_questions`` is asked with ``n = 0`` and answers
  ``questions: []``), so answer relevancy compares question and answer directly.

- every claim, reference statement and chunk statement is scored in [0, 1] by a fitted
  combination of these signals, one per judged quantity (claim support, coverage of a reference,
  query-passage relevance; :mod:`~ragmeter.judges.offline.model`, coefficients fit by
  leave-one-source-out on human labels, ``benchmarks/fit_offline.py``): the ``support`` on each
  verdict (kept through validation, which keeps the task's fields only), which faithfulness
  averages; ``compare_claims`` scores its items the same way, and response completeness uses the
  reference when the sample has one (``completeness_from_reference``);
- :meth:`OfflineJudge.confidence` maps a faithfulness score (the mean claim score) to a
  calibrated probability that a human reader finds the answer fully supported (the claim-support
  combination's Platt map); every ``verify_claims`` verdict carries the map of its own score as
  ``confidence`` (also in its reason);
- with a local grounding model (``OfflineJudge(grounding=...)``,
  :mod:`~ragmeter.judges.offline.grounding`), its entailment and contradiction probabilities for
  each claim and its best passage are signals too.

Every result carries ``note`` saying which signals were used, and Scores made with this judge
carry ``judge="offline"`` (lexical + embedding signals) or ``judge="offline-lexical"`` (no
embedding model) so nobody mistakes them for an LLM verdict or one path for the other.

The rules' thresholds were tuned on one half of the SummEdits documents (see
``benchmarks/summedits.py``) and on the dev halves of SummEdits, BEGIN and RAGChecker
(``benchmarks/judge_dev.py``); :class:`OfflineSettings` holds them; the combinations on top are
chosen by leave-one-source-out (``benchmarks/JUDGE_RESULTS.md``). What it cannot do: arithmetic
("net income fell" from two figures), roles the alignment does not line up ("Ann sold Bob the car"
against "Bob sold Ann the car" when the passage is worded differently), and synonyms, antonyms or
word swaps outside its word lists ("laptops" for "smartphones"); an LLM judge is the better tool
for those.

Modules: :mod:`~ragmeter.judges.offline.judge` (the judge and its tasks),
:mod:`~ragmeter.judges.offline.settings`, :mod:`~ragmeter.judges.offline.verify` (support and
verdicts), :mod:`~ragmeter.judges.offline.checks` (the hard checks),
:mod:`~ragmeter.judges.offline.align` (word alignment), :mod:`~ragmeter.judges.offline.claims`
(claims, evasive answers, question parts), :mod:`~ragmeter.judges.offline.text` (words, claims and
chunks analysed), :mod:`~ragmeter.judges.offline.embed` (embedders),
:mod:`~ragmeter.judges.offline.model` (the fitted combinations),
:mod:`~ragmeter.judges.offline.grounding` (plug-in grounding models) and
:mod:`~ragmeter.judges.offline.lexicon` (the stemmer and the word lists, read from ``data/*.txt``).
"""

from __future__ import annotations

from ragmeter.judges.offline.claims import is_noncommittal
from ragmeter.judges.offline.embed import LexicalEmbedder, local_embeddings_available
from ragmeter.judges.offline.grounding import GroundingModel
from ragmeter.judges.offline.judge import OfflineJudge
from ragmeter.judges.offline.settings import OfflineSettings
from ragmeter.judges.offline.text import content_words

__all__ = [
    "OfflineJudge",
    "OfflineSettings",
    "LexicalEmbedder",
    "GroundingModel",
    "is_noncommittal",
    "content_words",
    "local_embeddings_available",
]
