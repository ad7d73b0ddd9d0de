"""Citation parsing, per-citation verdicts and citation accuracy / precision / recall."""

from __future__ import annotations

import asyncio

import pytest

from helpers.scripted import ScriptedJudge  # noqa: E402
from ragmeter.citations import Unit, parse_citations, strip_citations  # noqa: E402
from ragmeter.data import Context, Sample  # noqa: E402
from ragmeter.metrics import CitationAccuracy, CitationPrecision, CitationRecall, Faithfulness, ScoringContext  # noqa: E402
from ragmeter.metrics.citation import claim_evidence, score_citations  # noqa: E402

CHUNKS = ["Chunk one.", "Chunk two.", "Chunk three."]


def cited(answer: str, contexts=CHUNKS, **kw) -> list[tuple[str, list]]:
    """(unit text, [(target, chunk index or None)]) for every unit."""
    p = parse_citations(answer, contexts, **kw)
    return [(u.text, [(c.target, c.chunk) for c in u.citations]) for u in p.units]


# --------------------------------------------------------------------------- parsing: formats


@pytest.mark.parametrize(
    "answer, chunks",
    [
        ("Einstein was born in 1879 [2].", [1]),
        ("Einstein was born in 1879[2].", [1]),
        ("Einstein was born in 1879 [1][3].", [0, 2]),
        ("Einstein was born in 1879 [1] [3].", [0, 2]),
        ("Einstein was born in 1879 [1], [3].", [0, 2]),
        ("Einstein was born in 1879 [1, 3].", [0, 2]),
        ("Einstein was born in 1879 [1,3].", [0, 2]),
        ("Einstein was born in 1879 [1; 3].", [0, 2]),
        ("Einstein was born in 1879 [1-3].", [0, 1, 2]),
        ("Einstein was born in 1879 [1–3].", [0, 1, 2]),
        ("Einstein was born in 1879 [1]-[3].", [0, 1, 2]),
        ("Einstein was born in 1879 [^2].", [1]),
        ("Einstein was born in 1879 (Source 2).", [1]),
        ("Einstein was born in 1879 (source: 2).", [1]),
        ("Einstein was born in 1879 (Sources 1 and 3).", [0, 2]),
        ("Einstein was born in 1879 [Source 2].", [1]),
        ("Einstein was born in 1879 (Doc 3).", [2]),
        ("Einstein was born in 1879【1】.", [0]),
        ("Einstein was born in 1879【1, 3】.", [0, 2]),
        ("Einstein was born in 1879【2†source】.", [1]),
        ("Einstein was born in 1879. [2]", [1]),
        ("Einstein was born in 1879.[2]", [1]),
    ],
)
def test_every_format_attaches_to_its_sentence(answer, chunks):
    units = cited(answer)
    assert len(units) == 1
    text, cites = units[0]
    assert text == "Einstein was born in 1879."
    assert [c for _, c in cites] == chunks


def test_citation_by_chunk_id():
    contexts = [Context("a", id="doc-3"), Context("b", id="doc-7"), Context("c", id="kb_12")]
    assert cited("Born in 1879 [doc-7].", contexts) == [("Born in 1879.", [("doc-7", 1)])]
    assert cited("Born in 1879 [doc-7, kb_12].", contexts) == [("Born in 1879.", [("doc-7", 1), ("kb_12", 2)])]
    assert cited("Born in 1879 (Source: doc-3).", contexts) == [("Born in 1879.", [("doc-3", 0)])]
    assert cited("Born in 1879 [^doc-3].", contexts) == [("Born in 1879.", [("doc-3", 0)])]
    # an id that no chunk has is an invalid citation, reported not raised
    p = parse_citations("Born in 1879 [doc-9].", contexts)
    assert p.units[0].text == "Born in 1879."
    (c,) = p.citations
    assert not c.valid and c.target == "doc-9" and "unknown chunk id" in c.error
    # ids that are not id-shaped still match exactly, including ids with spaces
    contexts = [Context("a", id="intro"), Context("b", id="Annual report, p. 4")]
    assert cited("Sales rose [intro]. Costs fell [Annual report, p. 4].", contexts) == [
        ("Sales rose.", [("intro", 0)]),
        ("Costs fell.", [("Annual report, p. 4", 1)]),
    ]


def test_numbers_as_ids_mode():
    contexts = [Context("a", id="17"), Context("b", id="42")]
    assert cited("Fact [42].", contexts, numbers="ids") == [("Fact.", [("42", 1)])]
    p = parse_citations("Fact [2].", contexts, numbers="ids")
    assert p.citations[0].chunk is None and "unknown chunk id" in p.citations[0].error
    assert cited("Fact [2].", contexts) == [("Fact.", [("2", 1)])]  # positions by default


def test_markers_in_the_middle_split_clauses():
    assert cited("Einstein was born in 1879 [1] and died in 1955 [2].") == [
        ("Einstein was born in 1879", [("1", 0)]),
        ("and died in 1955.", [("2", 1)]),
    ]
    # a marker applies to the text before it; the rest of the sentence is uncited
    assert cited("Einstein[1] was a physicist, born in Ulm [3], who liked sailing.") == [
        ("Einstein", [("1", 0)]),
        ("was a physicist, born in Ulm", [("3", 2)]),
        ("who liked sailing.", []),
    ]
    # end-of-sentence markers on a split sentence go to the last clause
    assert cited("A is true [1], B is true [2][3].") == [
        ("A is true", [("1", 0)]),
        ("B is true.", [("2", 1), ("3", 2)]),
    ]


def test_multiple_sentences_and_uncited_sentences():
    p = parse_citations("Paris is the capital [1]. It is large. It has a tower [2][3]. See the map.", CHUNKS)
    assert [(u.text, u.chunks) for u in p.units] == [
        ("Paris is the capital.", [0]),
        ("It is large.", []),
        ("It has a tower.", [1, 2]),
        ("See the map.", []),
    ]
    assert p.text == "Paris is the capital. It is large. It has a tower. See the map."
    assert [c.unit for c in p.citations] == [0, 2, 2]


def test_mixed_valid_and_invalid_citations():
    p = parse_citations("Fact A [1][7]. Fact B [0]. Fact C [2-4].", CHUNKS)
    assert [(c.target, c.chunk, c.unit) for c in p.citations] == [
        ("1", 0, 0),
        ("7", None, 0),
        ("0", None, 1),
        ("2", 1, 2),
        ("3", 2, 2),
        ("4", None, 2),
    ]
    assert "out of range" in p.invalid[0].error and "3 chunks" in p.invalid[0].error
    assert [u.chunks for u in p.units] == [[0], [], [1, 2]]


def test_repeated_citation_of_a_chunk_is_kept_once_per_unit():
    p = parse_citations("Fact [1][1] and more [1, 1].", CHUNKS)
    assert [(u.text, [c.target for c in u.citations]) for u in p.units] == [("Fact", ["1"]), ("and more.", ["1"])]


@pytest.mark.parametrize(
    "answer",
    [
        "Einstein published four papers in [1905].",
        "The quote reads 'teh' [sic] in the original.",
        "Read the [documentation](https://example.com/1) first.",
        "See [1](https://example.com) for details.",
        "Index it with `items[1]` in Python.",
        "```python\nx = data[2]\n```",
        "Scores lie in [0, 1] for all inputs.",
        "This needs a source [citation needed].",
        "Tick the box [x] when done.",
        "Revenue fell (see chart) in Q3.",
        "It happened (Source: Wikipedia).",
    ],
)
def test_things_that_are_not_citations(answer):
    p = parse_citations(answer, CHUNKS)
    assert p.citations == []
    assert p.text == answer.strip()


def test_year_in_brackets_is_a_citation_when_a_chunk_has_that_id():
    contexts = [Context("a", id="1905")]
    assert cited("Published [1905].", contexts) == [("Published.", [("1905", 0)])]


def test_reference_lists_are_not_citations_or_units():
    answer = "Einstein was born in 1879 [1]. He died in 1955 [2].\n\nSources:\n[1] Britannica\n[2] Wikipedia"
    p = parse_citations(answer, CHUNKS)
    assert [(u.text, u.chunks) for u in p.units] == [("Einstein was born in 1879.", [0]), ("He died in 1955.", [1])]
    assert p.reference_list == ["Sources:", "[1] Britannica", "[2] Wikipedia"]
    assert len(p.citations) == 2
    p = parse_citations("Born in 1879 [^1].\n\n[^1]: Britannica, 2020.", CHUNKS)
    assert [u.text for u in p.units] == ["Born in 1879."] and p.reference_list == ["[^1]: Britannica, 2020."]
    p = parse_citations("Born in 1879 [2].\n[1] Britannica - Einstein\n[2] Wikipedia - Einstein", CHUNKS)
    assert [u.text for u in p.units] == ["Born in 1879."] and len(p.reference_list) == 2


def test_marker_at_the_start_and_marker_only_answers():
    assert cited("[2] Einstein was born in 1879.") == [("Einstein was born in 1879.", [("2", 1)])]
    p = parse_citations("[1]", CHUNKS)
    assert p.units == [] and len(p.citations) == 1 and p.citations[0].unit is None
    assert parse_citations("", CHUNKS).units == []


def test_list_items_and_lines():
    answer = "Key facts:\n- Born in 1879 [1]\n- Died in 1955 [2]\n1. Nobel Prize in 1921 [3]."
    assert cited(answer) == [
        ("Key facts:", []),
        ("Born in 1879", [("1", 0)]),
        ("Died in 1955", [("2", 1)]),
        ("Nobel Prize in 1921.", [("3", 2)]),
    ]


def test_strip_citations():
    assert strip_citations("Born in 1879 [1], died in 1955 [2][3].", CHUNKS) == "Born in 1879, died in 1955."
    assert strip_citations("Born[1]in 1879.", CHUNKS) == "Born in 1879."


# --------------------------------------------------------------------------- scoring: pure functions


def supported(*chunks):
    return {"verdict": "supported", "evidence": [{"chunk": c, "quote": ""} for c in chunks]}


NOT_FOUND = {"verdict": "not_found", "evidence": []}


def verdicts(*vs):
    return [{"claim": i, **v} for i, v in enumerate(vs)]


def test_precision_recall_accuracy_hand_computed():
    # Answer: "Paris is the capital of France [1][3]. It has 2.1 million inhabitants [2] and hosts the
    # Louvre [5]. The Louvre is the most visited museum [doc-4]. It opened in 1793."
    contexts = [
        Context("Paris is the capital of France.", id="doc-1"),
        Context("Paris has 2.1 million inhabitants.", id="doc-2"),
        Context("Paris, capital of France, has 2.1 million inhabitants.", id="doc-3"),
        Context("The Louvre is the most visited museum.", id="doc-4"),
    ]
    answer = (
        "Paris is the capital of France [1][3]. It has 2.1 million inhabitants [2] and hosts the Louvre [5]. "
        "The Louvre is the most visited museum [doc-4]. It opened in 1793."
    )
    p = parse_citations(answer, contexts)
    assert [(u.text, u.chunks) for u in p.units] == [
        ("Paris is the capital of France.", [0, 2]),
        ("It has 2.1 million inhabitants", [1]),
        ("and hosts the Louvre.", []),
        ("The Louvre is the most visited museum.", [3]),
        ("It opened in 1793.", []),
    ]
    claims = [{"unit": u, "text": f"claim {u}"} for u in range(5)]
    vs = verdicts(supported(0, 2), supported(1, 2), NOT_FOUND, supported(3), NOT_FOUND)
    r = score_citations(p.units, claims, vs)
    # citations: [1]->0 supports, [3]->2 supports, [2]->1 supports, [5] invalid, [doc-4]->3 supports
    assert [c["verdict"] for c in r.citations] == ["supports", "supports", "supports", "invalid", "supports"]
    # accuracy 4 / 5; precision: every valid citation supports its unit alone -> precise; invalid never
    # -> 4 / 5; recall: units with claims 5, fully supported by their citations: u0, u1, u3 -> 3 / 5
    assert r.accuracy == pytest.approx(0.8)
    assert r.precision == pytest.approx(0.8)
    assert r.recall == pytest.approx(0.6)
    # uncited claims: claim 2 (only an invalid citation) and claim 4 (none)
    assert [(c["claim"], c["statement"]) for c in r.uncited_claims] == [
        (2, "and hosts the Louvre."),
        (4, "It opened in 1793."),
    ]
    assert r.uncited_claims[0]["invalid_citations"] == ["5"]
    assert r.citations[3]["statement"] == "and hosts the Louvre." and "out of range" in r.citations[3]["reason"]


def test_alce_precision_flags_redundant_citations():
    # one unit, two claims: A supported by chunks {0, 2}, B by {1, 2}; cited [1][2][4] = chunks 0, 1, 3
    units = [Unit.of("Paris is the capital and has 2.1 million people.", [0, 1, 3])]
    claims = [{"unit": 0, "text": "A"}, {"unit": 0, "text": "B"}]
    vs = verdicts(supported(0, 2), supported(1, 2))
    r = score_citations(units, claims, vs)
    # union {0, 1, 3} supports A (0) and B (1) -> unit supported -> recall 1 / 1
    # chunk 0: supports A only -> partially; others {1, 3} do not support A -> needed -> precise
    # chunk 1: partially; others {0, 3} do not support B -> precise
    # chunk 3: does not support; others {0, 1} support the unit without it -> imprecise
    assert [c["verdict"] for c in r.citations] == ["partially", "partially", "does_not_support"]
    assert [c["precise"] for c in r.citations] == [True, True, False]
    assert r.precision == pytest.approx(2 / 3)
    assert r.recall == 1.0
    assert r.accuracy == 0.0  # no citation supports the whole statement on its own
    # partial credit: 1/2 + 1/2 + 0 over 3 citations = 1/3
    assert score_citations(units, claims, vs, partial_credit=True).accuracy == pytest.approx(1 / 3)
    # [1][3] = chunks 0 and 2: chunk 0 partially, and chunk 2 alone supports both -> chunk 0 redundant
    r = score_citations([Unit.of("x", [0, 2])], claims, vs)
    assert [c["precise"] for c in r.citations] == [False, True] and r.precision == 0.5
    # a unit not supported by the union: all its citations are imprecise (ALCE), recall 0
    r = score_citations([Unit.of("x", [0, 3])], claims, vs)
    assert [c["precise"] for c in r.citations] == [False, False] and r.recall == 0.0


def test_at_most_citations_reproduces_alces_cap():
    units = [Unit.of("x", [3, 3 - 1, 0])]  # chunk 3 (no), chunk 2 (no), chunk 0 (yes)
    claims = [{"unit": 0, "text": "A"}]
    vs = verdicts(supported(0))
    assert score_citations(units, claims, vs).recall == 1.0
    capped = score_citations(units, claims, vs, at_most_citations=2)
    assert capped.recall == 0.0  # only chunks 3 and 2 count
    assert [c["precise"] for c in capped.citations] == [False, False, None]
    assert capped.precision == 0.0


def test_citations_on_units_without_claims():
    # "See the appendix [2]." makes no claim: its citation is listed as no_claim and not scored;
    # an invalid citation still counts as invalid.
    units = [Unit.of("Paris is the capital.", [0]), Unit.of("See the appendix.", [1]), Unit.of("Thanks!", [None])]
    claims = [{"unit": 0, "text": "Paris is the capital."}]
    r = score_citations(units, claims, verdicts(supported(0)))
    assert [c["verdict"] for c in r.citations] == ["supports", "no_claim", "invalid"]
    assert r.accuracy == pytest.approx(1 / 2) and r.precision == pytest.approx(1 / 2)
    assert r.recall == 1.0 and r.counts["no_claim"] == 1


def test_no_citations_policy():
    # claims but no citation: 0.0 (uncited_value) for all three, the claims listed as uncited
    r = score_citations([Unit.of("A fact.")], [{"unit": 0, "text": "A fact."}], verdicts(supported(0)))
    assert (r.accuracy, r.precision, r.recall) == (0.0, 0.0, 0.0)
    assert "cites no chunk" in r.note and len(r.uncited_claims) == 1
    # no claims and no citations: nothing needed a citation -> 1.0 (no_claims_value)
    r = score_citations([Unit.of("Hello!")], [], [])
    assert (r.accuracy, r.precision, r.recall) == (1.0, 1.0, 1.0)
    # configurable: None means not applicable
    r = score_citations(
        [Unit.of("A fact.")], [{"unit": 0, "text": "A fact."}], verdicts(supported(0)), uncited_value=None
    )
    assert r.accuracy is None and r.recall is None


def test_quote_is_reported_only_when_it_comes_from_the_cited_chunk():
    # a verdict in the version-1 form (one quote for all chunks): the quote belongs to one chunk only
    chunks = ["Paris is the capital of France.", "The capital of France is Paris, a large city."]
    units = [Unit.of("Paris is the capital.", [0, 1])]
    vs = [{"claim": 0, "verdict": "supported", "chunks": [0, 1], "quote": "Paris is the capital of France"}]
    r = score_citations(units, [{"unit": 0, "text": "Paris is the capital."}], vs, chunks=chunks)
    assert r.citations[0]["quote"] == "Paris is the capital of France"
    assert r.citations[1]["quote"] is None


def test_contradicting_citation_is_flagged():
    units = [Unit.of("Einstein died in 1950.", [0])]
    vs = [{"claim": 0, "verdict": "contradicted", "evidence": [{"chunk": 0, "quote": "died in 1955"}]}]
    r = score_citations(units, [{"unit": 0, "text": "Einstein died in 1950."}], vs)
    assert r.citations[0]["verdict"] == "does_not_support" and r.citations[0]["contradicts_claims"] == [0]
    assert r.unsupported_claims[0]["claim"] == 0
    # the citation shows the cited chunk's contradicting quote
    assert r.citations[0]["quote"] == "died in 1955" and r.citations[0]["quote_found"] is None  # no chunk texts
    r = score_citations(units, [{"unit": 0, "text": "Einstein died in 1950."}], vs, chunks=["He died in 1955."])
    assert r.citations[0]["quote_found"] is True


def test_each_cited_chunk_gets_its_own_quote():
    # The case version 1 got wrong: a claim supported by chunks 0 and 1, cited [1][2]; the citation
    # of the second supporting chunk used to get no quote.
    chunks = ["Paris is the capital of France.", "The capital of France is Paris, a large city.", "Rome is in Italy."]
    units = [Unit.of("Paris is the capital of France.", [0, 1, 2])]
    claims = [{"unit": 0, "text": "Paris is the capital of France."}]
    vs = [
        {
            "claim": 0,
            "verdict": "supported",
            "evidence": [
                {"chunk": 0, "quote": "Paris is the capital of France"},
                {"chunk": 1, "quote": "The capital of France is Paris"},
            ],
        }
    ]
    r = score_citations(units, claims, vs, chunks=chunks)
    assert [(c["chunk"], c["verdict"], c["quote"], c["quote_found"]) for c in r.citations] == [
        (0, "supports", "Paris is the capital of France", True),
        (1, "supports", "The capital of France is Paris", True),
        (2, "does_not_support", None, None),  # chunk 2 is in no evidence of the claim
    ]
    # a quote the judge did not copy verbatim is still that chunk's quote, flagged as not found
    vs[0]["evidence"][1]["quote"] = "Paris is France's capital"
    r = score_citations(units, claims, vs, chunks=chunks)
    assert r.citations[1]["quote"] == "Paris is France's capital" and r.citations[1]["quote_found"] is False
    # with two claims in the statement, a chunk's quote comes from the claim it supports
    claims2 = [{"unit": 0, "text": "Paris is the capital."}, {"unit": 0, "text": "Rome is in Italy."}]
    vs2 = [
        {"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "Paris is the capital"}]},
        {"claim": 1, "verdict": "supported", "evidence": [{"chunk": 2, "quote": "Rome is in Italy"}]},
    ]
    r = score_citations(units, claims2, vs2, chunks=chunks)
    assert [(c["verdict"], c["quote"]) for c in r.citations] == [
        ("partially", "Paris is the capital"),
        ("does_not_support", None),
        ("partially", "Rome is in Italy"),
    ]


def test_claim_evidence_reads_both_verdict_forms():
    assert claim_evidence(
        {
            "verdict": "supported",
            "evidence": [{"chunk": 1, "quote": " b "}, {"chunk": 0, "quote": "a"}],
            "chunks": [0, 1],
            "quote": "a",
        }
    ) == [{"chunk": 1, "quote": "b"}, {"chunk": 0, "quote": "a"}]
    # version-1 form: the one quote goes to the first listed chunk that contains it
    v1 = {"verdict": "supported", "chunks": [0, 1], "quote": "large city"}
    texts = ["Paris is the capital.", "Paris is a large city."]
    assert claim_evidence(v1, texts) == [{"chunk": 0, "quote": ""}, {"chunk": 1, "quote": "large city"}]
    assert claim_evidence(v1) == [{"chunk": 0, "quote": "large city"}, {"chunk": 1, "quote": ""}]
    assert claim_evidence({"verdict": "not_found", "chunks": [], "quote": ""}) == []
    assert claim_evidence({"verdict": "not_found"}) == []


def test_citation_to_second_supporting_chunk_through_the_judge():
    # End to end through a scripted judge (answers validated): "[2]" cites the second of two chunks
    # that each support the claim; its record carries chunk 1's quote, and Faithfulness lists both.
    sample = Sample(
        question="What is the capital of France?",
        contexts=[
            Context("Paris is the capital of France.", id="a"),
            Context("France's capital, Paris, is on the Seine.", id="b"),
        ],
        answer="Paris is the capital of France [2].",
    )
    judge = ScriptedJudge(
        {
            "extract_claims": lambda i: {"claims": [{"unit": 0, "text": "Paris is the capital of France."}]},
            "verify_claims": {
                "verdicts": [
                    {
                        "claim": 0,
                        "verdict": "supported",
                        "reason": "both say so",
                        "evidence": [
                            {"chunk": 1, "quote": "France's capital, Paris"},
                            {"chunk": 0, "quote": "Paris is the capital of France"},
                        ],
                    }
                ]
            },
        }
    )
    scores = score_all([Faithfulness(), CitationAccuracy()], sample, judge)
    rec = scores["citation_accuracy"].details["citations"][0]
    assert (rec["chunk"], rec["verdict"], rec["quote"], rec["quote_found"]) == (
        1,
        "supports",
        "France's capital, Paris",
        True,
    )
    assert scores["citation_accuracy"].details["claims"][0]["evidence"] == [
        {"chunk": 0, "quote": "Paris is the capital of France"},
        {"chunk": 1, "quote": "France's capital, Paris"},
    ]
    assert [(e["chunk_id"], e["quote"]) for e in scores["faithfulness"].details["claims"][0]["evidence"]] == [
        ("a", "Paris is the capital of France"),
        ("b", "France's capital, Paris"),
    ]
    assert judge.calls == {"extract_claims": 1, "verify_claims": 1}


# --------------------------------------------------------------------------- metrics with a judge


PARIS = Sample(
    question="Tell me about Paris.",
    contexts=[
        Context("Paris is the capital of France.", id="doc-1"),
        Context("Paris has 2.1 million inhabitants.", id="doc-2"),
        Context("Paris, capital of France, has 2.1 million inhabitants.", id="doc-3"),
        Context("The Louvre is the most visited museum.", id="doc-4"),
    ],
    answer=(
        "Paris is the capital of France [1][2]. It has 2.1 million inhabitants [2] and hosts the Louvre [9]. "
        "The Louvre is the most visited museum [doc-4]. It opened in 1793."
    ),
)


def paris_judge():
    table = {
        0: ("supported", [(0, "Paris is the capital of France"), (2, "Paris, capital of France")]),
        1: ("supported", [(1, "Paris has 2.1 million inhabitants"), (2, "has 2.1 million inhabitants")]),
        3: ("supported", [(3, "most visited museum")]),
    }

    def verify(inputs):
        out = []
        for i in range(len(inputs["claims"])):
            v, ev = table.get(i, ("not_found", []))
            out.append({"claim": i, "verdict": v, "evidence": [{"chunk": c, "quote": q} for c, q in ev], "reason": ""})
        return {"verdicts": out}

    return ScriptedJudge(
        {
            "extract_claims": lambda i: {"claims": [{"unit": k, "text": u} for k, u in enumerate(i["units"])]},
            "verify_claims": verify,
        }
    )


def score_all(metrics, sample, judge):
    ctx = ScoringContext(sample, judge, None, metrics)

    async def go():
        return await asyncio.gather(*(m.ascore(sample, ctx) for m in metrics))

    return {s.metric: s for s in asyncio.run(go())}


def test_citation_metrics_with_faithfulness_cost_zero_extra_calls():
    alone = paris_judge()
    score_all([Faithfulness()], PARIS, alone)
    together = paris_judge()
    scores = score_all([Faithfulness(), CitationAccuracy(), CitationPrecision(), CitationRecall()], PARIS, together)
    assert together.calls == alone.calls == {"extract_claims": 1, "verify_claims": 1}
    # citations: [1] -> chunk 0 supports u0; [2] -> chunk 1 does not support u0 (claim 0 is in chunks 0, 2);
    # [2] -> chunk 1 supports u1; [9] invalid; [doc-4] -> chunk 3 supports u3.
    # accuracy: 3 supports of 5 = 0.6 -> warn
    # precision: u0 union {0, 1} supports; [1] alone -> precise; [2] alone no, others {0} support -> imprecise;
    #   u1 [2] precise; [9] invalid; [doc-4] precise -> 3 / 5 = 0.6
    # recall: 5 units with claims; supported by their citations: u0, u1, u3 -> 3 / 5 = 0.6
    acc, prec, rec = scores["citation_accuracy"], scores["citation_precision"], scores["citation_recall"]
    assert acc.value == pytest.approx(0.6) and acc.label == "warn"
    assert prec.value == pytest.approx(0.6)
    assert rec.value == pytest.approx(0.6)
    # faithfulness: 3 of 5 claims supported
    assert scores["faithfulness"].value == pytest.approx(0.6)
    # every citation metric carries all three measures, per-citation records and uncited claims
    for s in (acc, prec, rec):
        assert (s.details["accuracy"], s.details["precision"], s.details["recall"]) == pytest.approx((0.6, 0.6, 0.6))
    recs = acc.details["citations"]
    assert [(r["target"], r["chunk"], r["verdict"]) for r in recs] == [
        ("1", 0, "supports"),
        ("2", 1, "does_not_support"),
        ("2", 1, "supports"),
        ("9", None, "invalid"),
        ("doc-4", 3, "supports"),
    ]
    assert recs[0]["statement"] == "Paris is the capital of France."
    assert recs[0]["quote"] == "Paris is the capital of France"
    assert recs[1]["quote"] is None  # chunk 1 is in no evidence of claim 0
    assert recs[2]["quote"] == "Paris has 2.1 million inhabitants"
    assert recs[4]["quote"] == "most visited museum"
    assert all(r["quote_found"] for r in recs if r["quote"])
    assert [c["text"] for c in acc.details["uncited_claims"]] == ["and hosts the Louvre.", "It opened in 1793."]
    assert [c["target"] for c in acc.details["invalid_citations"]] == ["9"]
    assert "1 claim" not in acc.explanation and "2 claims without a citation" in acc.explanation


def test_citation_metric_on_an_answer_without_citations_or_claims():
    sample = Sample(question="Q?", contexts=["C."], answer="I don't know.")
    judge = ScriptedJudge({"extract_claims": {"claims": []}})
    s = score_all([CitationAccuracy()], sample, judge)["citation_accuracy"]
    assert s.value == 1.0 and "no claim" in s.explanation
    s = score_all([CitationRecall(no_claims_value=None)], sample, ScriptedJudge({"extract_claims": {"claims": []}}))
    s = s["citation_recall"]
    assert s.value is None and s.status == "n/a"
    uncited = Sample(question="Q?", contexts=["C."], answer="Paris is big.")
    judge = ScriptedJudge(
        {
            "extract_claims": {"claims": [{"unit": 0, "text": "Paris is big."}]},
            "verify_claims": {
                "verdicts": [{"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "Paris is big."}]}]
            },
        }
    )
    s = score_all([CitationAccuracy()], uncited, judge)["citation_accuracy"]
    assert s.value == 0.0 and s.label == "fail" and s.details["uncited_claims"][0]["text"] == "Paris is big."


def test_citation_metric_numbers_as_ids():
    # chunk ids are numbers that disagree with positions: "[2]" is chunk 1 as a position, chunk 0 as an id
    sample = Sample(
        question="Q?",
        contexts=[Context("Paris is the capital.", id="2"), Context("Rome is in Italy.", id="1")],
        answer="Paris is the capital [2].",
    )
    script = {
        "extract_claims": {"claims": [{"unit": 0, "text": "Paris is the capital."}]},
        "verify_claims": {
            "verdicts": [
                {"claim": 0, "verdict": "supported", "evidence": [{"chunk": 0, "quote": "Paris is the capital."}]}
            ]
        },
    }
    assert score_all([CitationAccuracy()], sample, ScriptedJudge(script))["citation_accuracy"].value == 0.0
    assert score_all([CitationAccuracy(numbers="ids")], sample, ScriptedJudge(script))["citation_accuracy"].value == 1.0
    # a number that is no position but is a chunk id cites that chunk
    sample = Sample(
        question="Q?", contexts=[Context("Paris is the capital.", id="42")], answer="Paris is the capital [42]."
    )
    assert score_all([CitationAccuracy()], sample, ScriptedJudge(script))["citation_accuracy"].value == 1.0
