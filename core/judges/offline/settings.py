"""Internal: The offline judge's thresholds and switches (:class:`OfflineSettings`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OfflineSettings:
    """Thresholds and switches of the offline judge. The defaults were tuned on half A of the
    SummEdits documents only (``benchmarks/summedits.py``); half B was never used for a choice.

    Support of a claim by a chunk: ``lexical = doc_weight * coverage(chunk) + (1 - doc_weight) *
    coverage(best passage)``, where coverage is the share of the claim's stemmed content words
    found, and the best passage is the run of up to ``window`` sentences that covers most of them.
    With embeddings, ``blended = (1 - embed_weight) * lexical + embed_weight * s`` where ``s`` is
    the claim-passage cosine mapped from ``embed_floor..embed_ceiling`` to 0..1, and the support is
    ``max(lexical, blended)`` (``embed_mode="rescue"``: similarity can rescue a paraphrase, never
    sink a literal match) or ``blended`` (``"blend"``). A claim is supported when the support
    reaches ``support_threshold`` (lexical path) / ``embed_support_threshold`` (embedding path)
    and no hard check fails:

    - specifics (``specifics_check``; names too with ``name_check``): every number, date, amount,
      percentage, name and quote of the claim must be stated in the chunk; numbers, amounts and
      percentages (``specifics_near_kinds``) within ``specifics_near`` sentences of the passage
      (None: anywhere in the chunk), or elsewhere in the chunk among the same words (one content
      word in common among the ``specifics_context`` words either side of it; 0 = off).
      A different value of the same kind in the passage makes the claim ``contradicted``. With
      ``soft_small_numbers``, a spelled-out count up to ten ("two friends") only fails on a rival.
    - negation (``negation_check``) when the passage covers at least ``negation_min_coverage`` of
      the claim: a word the claim negates that the passage states plainly, or the reverse
      (``negation_strict="sentence"``: only when no passage sentence holding the word has a
      negation, or every one negates it and the claim has no negation; ``True``: only when the
      other side has no negation at all; ``False``: any such word); and a negated claim whose
      passage has no negation at all while covering ``negation_inserted`` of its words. "Not only",
      "not until" and "no doubt" are no negations.
    - antonyms (``antonym_check``): a claim word absent from the passage (± ``antonym_range``
      sentences) whose opposite is there, next to at least one of the same content words
      (within ``antonym_context`` tokens; 0 = anywhere).
    - alignment (``align_rules``; () = off) when the passage covers at least ``align_min_coverage``
      of the claim: the claim's words aligned with the passage's, each difference of at most
      ``align_max_gap`` words with matching words on both sides is checked by the named rules:
      ``negation`` (only a negation differs), ``antonym``, ``closed`` (another ordinal, time unit,
      frequency, quantity, temporal preposition, gendered pronoun, modal or scale: "millions" for
      "billions"), ``name`` (capitalised words against capitalised words), ``swap`` (two content
      words on either side of a third in the reverse order), ``insert_negation`` /
      ``delete_negation`` (a negation added / dropped), ``polarity`` (one content word for one
      content word of opposite sentiment, |valence| >= 1.5 in the VADER lexicon: "poor" for
      "good") and ``insert_restrictive`` ("only", "all", "every", "always", "never", "first",
      "last" added; ``not_found``). The others make the claim ``contradicted``. A passage of
      several sentences is aligned as a whole and, when that finds nothing, sentence by sentence;
      "$8.2m" / "$8.2 million" and "Q3" / "third quarter" are aligned in one spelling.

    Graded support (``support`` on each verdict, what faithfulness averages): the claim's word
    coverage ``c`` (the share of its words, all but a few function words, repeats counted, that
    the best chunk states; :func:`~ragmeter.judges.offline.verify.word_coverage`) scaled so that
    ``full_support`` counts fully, times ``contradicted_weight`` for a contradicted claim or
    ``check_weight`` for one a hard check leaves not found, then ``verdict_weight * supported +
    (1 - verdict_weight) * that``. Answer correctness (``compare_claims``) grades the answer's
    claims in the reference without the verdict's weight and with ``claim_full_support``, and the
    reference's statements in the answer by plain word coverage. Chosen on the dev halves of SummEdits, BEGIN and RAGChecker
    together (``benchmarks/judge_dev.py``, ``benchmarks/JUDGE_RESULTS.md``).

    The graded support is one signal of the fitted combinations
    (:mod:`ragmeter.judges.offline.model`), which give each claim, statement and relevance its score;
    the calibrated confidence is the claim-support combination's Platt map.

    The embedding path needs the same support as the lexical path (``embed_support_threshold`` =
    ``support_threshold``): similarity only adds claims that the lexical signals miss. On this
    data the cosine barely separates paraphrases from meaning-changing edits: on half A's items
    with a single replaced phrase, the cosine of the edited summary and its original has an AUC of
    0.58 for consistent against inconsistent edits, that of the replaced and the replacing words
    in context 0.54; so it is no help against the edits the hard checks miss.

    Other tasks: a statement is relevant to a question when it holds ``relevance_threshold`` of
    the question's content words or (with embeddings) its cosine reaches
    ``relevance_embed_threshold``; a chunk is useful for a reference when it holds
    ``useful_threshold`` of the reference's content words; a question part is covered when the
    answer holds ``part_threshold`` of its content words. These were set by hand (no benchmark).
    A statement that is not relevant keeps partial credit in context relevance: at most
    ``relevance_partial`` times its share of the question's words over ``relevance_threshold``
    or its cosine over ``relevance_embed_threshold`` (chosen on query-passage proxies built from
    the development sets, ``benchmarks/JUDGE_RESULTS.md``, round 5); that graded relevance is one
    signal of the relevance combination. A chunk is useful for the question (context precision)
    when its statements' mean relevance score reaches ``useful_score``; a reference statement is
    attributed to the chunks (context recall) when its reference-coverage score reaches
    ``attributed_score``; a claim the rules find supported stays supported (faithfulness's
    verdicts, citations) only when its claim-support score reaches ``supported_score``.
    """

    window: int = 3
    doc_weight: float = 0.5
    support_threshold: float = 0.25
    embed_support_threshold: float = 0.25
    embed_mode: str = "rescue"
    embed_weight: float = 0.7
    embed_floor: float = 0.2
    embed_ceiling: float = 0.8
    specifics_check: bool = True
    name_check: bool = True
    specifics_near: int | None = 1
    specifics_near_kinds: tuple = ("number", "money", "percent")
    specifics_context: int = 3
    soft_small_numbers: bool = True
    negation_check: bool = True
    negation_min_coverage: float = 0.6
    negation_strict: bool | str = "sentence"
    negation_inserted: float | None = 0.7
    antonym_check: bool = True
    antonym_range: int | None = 1
    antonym_context: int = 3
    align_rules: tuple = (
        "negation",
        "antonym",
        "closed",
        "name",
        "swap",
        "insert_negation",
        "delete_negation",
        "insert_restrictive",
        "polarity",
    )
    align_min_coverage: float = 0.5
    align_max_gap: int = 4
    full_support: float = 1.0
    claim_full_support: float = 0.7
    verdict_weight: float = 0.6
    verdict_full: float = 0.5
    contradicted_weight: float = 0.2
    check_weight: float = 0.5
    relevance_threshold: float = 0.34
    relevance_embed_threshold: float = 0.45
    relevance_partial: float = 0.25
    useful_threshold: float = 0.3
    part_threshold: float = 0.5
    useful_score: float = 0.5
    attributed_score: float = 0.5
    supported_score: float = 0.5


#: The tuned defaults.
DEFAULT_SETTINGS = OfflineSettings()
