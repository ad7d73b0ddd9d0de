"""Judge-based metrics against hand-worked values, with a ScriptedJudge and a dictionary embedder."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

import ragmeter.metrics as M  # noqa: E402
from helpers.scripted import ScriptedJudge  # noqa: E402
from ragmeter.data import Context, Sample, Score  # noqa: E402
from ragmeter.judges.base import Embedder, Usage  # noqa: E402
from ragmeter.metrics import (  # noqa: E402
    AnswerCorrectness,
    AnswerRelevancy,
    CitationAccuracy,
    CitationPrecision,
    CitationRecall,
    ContextPrecision,
    ContextRecall,
    ContextRelevance,
    EntityRecall,
    Faithfulness,
    HallucinatedSpecifics,
    ResponseCompleteness,
    ScoringContext,
)

# --------------------------------------------------------------------------- helpers


class DictEmbedder(Embedder):
    """Deterministic test embedder: fixed vectors for known texts, a hashed unit vector otherwise."""

    name = "dict"

    def __init__(self, vectors: dict[str, list[float]] | None = None, dim: int = 3):
        self.vectors = vectors or {}
        self.dim = dim
        self.calls = 0
        self.texts: list[list[str]] = []

    async def embed(self, texts):
        self.calls += 1
        self.texts.append(list(texts))
        rows = []
        for t in texts:
            if t in self.vectors:
                rows.append(self.vectors[t])
            else:
                rng = np.random.default_rng(sum(map(ord, t)))
                rows.append(list(rng.random(self.dim) + 0.1))
        return np.array(rows, dtype=float), Usage(embedding_calls=1)


def run(metric, sample, judge=None, embedder=None, metrics=None) -> Score:
    ctx = ScoringContext(sample, judge, embedder, metrics or [metric])
    return asyncio.run(metric.ascore(sample, ctx))


def run_all(metrics, sample, judge=None, embedder=None) -> dict[str, Score]:
    ctx = ScoringContext(sample, judge, embedder, metrics)

    async def go():
        return await asyncio.gather(*(m.ascore(sample, ctx) for m in metrics))

    return {s.metric: s for s in asyncio.run(go())}


def one_claim_per_unit(inputs):
    return {"claims": [{"unit": i, "text": u} for i, u in enumerate(inputs["units"])]}


def verdicts_from(table: dict[int, tuple]):
    """verify_claims answer from {claim index: (verdict, [(chunk, quote), ...])}."""

    def answer(inputs):
        out = []
        for i, _ in enumerate(inputs["claims"]):
            verdict, evidence = table.get(i, ("not_found", []))
            out.append(
                {
                    "claim": i,
                    "verdict": verdict,
                    "evidence": [{"chunk": c, "quote": q} for c, q in evidence],
                    "reason": "scripted",
                }
            )
        return {"verdicts": out}

    return answer


EINSTEIN = Sample(
    question="When was Einstein born and where did he die?",
    contexts=[
        Context("Albert Einstein was born in Ulm in 1879. He was a physicist.", id="bio"),
        Context("Einstein died in Princeton in 1955.", id="death"),
        Context("The Eiffel Tower is in Paris.", id="paris"),
    ],
    answer="Einstein was born in 1879 [1]. He died in Princeton [2]. He won a Nobel Prize. He liked sailing.",
    reference="Einstein was born in Ulm in 1879. He died in Princeton in 1955.",
)


# --------------------------------------------------------------------------- faithfulness


def test_faithfulness_supported_over_claims_with_evidence():
    # 4 claims: 0 supported by chunk 0, 1 supported by chunk 1, 2 supported by chunk 0, 3 not found.
    # score = supported / claims = 3 / 4 = 0.75 -> warn (0.7 <= 0.75 < 0.85)
    judge = ScriptedJudge(
        {
            "extract_claims": one_claim_per_unit,
            "verify_claims": verdicts_from(
                {
                    0: ("supported", [(0, "born in Ulm in 1879")]),
                    1: ("supported", [(1, "died in Princeton")]),
                    2: ("supported", [(0, "a physicist with a prize")]),
                }
            ),
        }
    )
    s = run(Faithfulness(), EINSTEIN, judge)
    assert s.value == pytest.approx(0.75)
    assert s.label == "warn" and s.error is None
    assert s.details["unsupported"] == ["He liked sailing."]
    assert s.details["contradicted"] == []
    first = s.details["claims"][0]
    assert first["verdict"] == "supported" and first["chunk"] == 0 and first["chunk_id"] == "bio"
    assert first["quote"] == "born in Ulm in 1879" and first["quote_found"] is True
    assert s.details["claims"][2]["quote_found"] is False  # not verbatim in chunk 0
    # the units given to extract_claims have the citation markers removed
    assert judge.inputs["extract_claims"][0]["units"] == [
        "Einstein was born in 1879.",
        "He died in Princeton.",
        "He won a Nobel Prize.",
        "He liked sailing.",
    ]
    assert judge.calls == {"extract_claims": 1, "verify_claims": 1}
    assert "judge_usage" in s.details and s.judge == "scripted"


def test_faithfulness_details_carry_per_chunk_evidence():
    # claim 0 ("born in 1879") is supported by chunk 0 and, on its own, by chunk 1 (added here);
    # each chunk comes with its own quote; claim 1 is contradicted by chunk 1 with its quote.
    sample = Sample(
        question=EINSTEIN.question,
        contexts=[
            Context("Albert Einstein was born in Ulm in 1879.", id="bio"),
            Context("Einstein (born 1879, Ulm) died in Princeton in 1955.", id="death"),
        ],
        answer="Einstein was born in 1879 [1][2]. He died in 1950 [2].",
    )
    judge = ScriptedJudge(
        {
            "extract_claims": one_claim_per_unit,
            "verify_claims": verdicts_from(
                {
                    0: (
                        "supported",
                        [(1, "born 1879, Ulm"), (0, "born in Ulm in 1879"), (1, "a later duplicate, dropped")],
                    ),
                    1: ("contradicted", [(1, "died in  PRINCETON in 1955")]),
                }
            ),
        }
    )
    s = run(Faithfulness(), sample, judge)
    assert s.value == pytest.approx(0.5)
    c0, c1 = s.details["claims"]
    assert c0["verdict"] == "supported" and c0["chunks"] == [0, 1]
    assert c0["evidence"] == [
        {"chunk": 0, "chunk_id": "bio", "quote": "born in Ulm in 1879", "quote_found": True},
        {"chunk": 1, "chunk_id": "death", "quote": "born 1879, Ulm", "quote_found": True},
    ]
    # the single-chunk fields repeat the first evidence entry
    assert (c0["chunk"], c0["chunk_id"], c0["quote"], c0["quote_found"]) == (0, "bio", "born in Ulm in 1879", True)
    # contradicting evidence: the quote is found ignoring case and whitespace
    assert c1["verdict"] == "contradicted" and c1["evidence"] == [
        {"chunk": 1, "chunk_id": "death", "quote": "died in  PRINCETON in 1955", "quote_found": True}
    ]
    assert s.details["contradicted"] == ["He died in 1950."]
    # a quote that is not in its chunk is flagged per chunk
    judge = ScriptedJudge(
        {
            "extract_claims": one_claim_per_unit,
            "verify_claims": verdicts_from(
                {0: ("supported", [(0, "born in Ulm in 1879"), (1, "born in Ulm in 1879")])}
            ),
        }
    )
    c0, c1 = run(Faithfulness(), sample, judge).details["claims"]
    assert [(e["chunk"], e["quote_found"]) for e in c0["evidence"]] == [(0, True), (1, False)]
    assert c1["verdict"] == "not_found" and c1["evidence"] == [] and c1["quote"] == "" and c1["quote_found"] is None


def test_faithfulness_mode_not_contradicted():
    # verdicts: supported, supported, not_found, contradicted
    # mode supported:        2 / 4 = 0.5
    # mode not_contradicted: (4 - 1) / 4 = 0.75
    script = {
        "extract_claims": one_claim_per_unit,
        "verify_claims": verdicts_from(
            {0: ("supported", [(0, "")]), 1: ("supported", [(1, "")]), 3: ("contradicted", [(1, "died in Princeton")])}
        ),
    }
    s1 = run(Faithfulness(), EINSTEIN, ScriptedJudge(script))
    s2 = run(Faithfulness(mode="not_contradicted"), EINSTEIN, ScriptedJudge(script))
    assert s1.value == pytest.approx(0.5)
    assert s2.value == pytest.approx(0.75)
    assert s2.details["contradicted"] == ["He liked sailing."]
    assert s2.details["unsupported"] == ["He won a Nobel Prize."]
    assert "contradicted" in s2.explanation
    with pytest.raises(ValueError):
        Faithfulness(mode="lenient")


def test_faithfulness_no_claims_is_not_applicable_by_default_and_configurable():
    refusal = Sample(question="Who won?", contexts=["Chunk."], answer="I don't know.")
    judge = ScriptedJudge({"extract_claims": {"claims": []}, "verify_claims": verdicts_from({})})
    s = run(Faithfulness(), refusal, judge)
    assert s.value is None and s.error is None and s.status == "n/a" and s.label is None
    assert "no factual claim" in s.explanation
    assert judge.calls["verify_claims"] == 0  # nothing to verify, no call
    s = run(Faithfulness(no_claims_value=1.0), refusal, ScriptedJudge({"extract_claims": {"claims": []}}))
    assert s.value == 1.0 and s.label == "pass" and "no_claims_value" in s.explanation


REPEATED = Sample(
    question="Where is the Eiffel Tower?",
    contexts=[Context("The Eiffel Tower is in Paris. It was completed in 1889.", id="t")],
    answer=" ".join(["The Eiffel Tower is in Paris [1]."] * 9 + ["It is painted bright green every spring [1]."]),
)


def supported_when_paris(inputs):
    return {
        "verdicts": [
            {
                "claim": k,
                "verdict": "supported" if "Paris" in c else "not_found",
                "evidence": [{"chunk": 0, "quote": "The Eiffel Tower is in Paris."}] if "Paris" in c else [],
                "reason": "scripted",
            }
            for k, c in enumerate(inputs["claims"])
        ]
    }


def test_a_repeated_claim_counts_once_in_faithfulness_and_the_citation_metrics():
    # nine copies of a supported sentence + one invented claim: 9 / 10 = 0.9 (pass) before;
    # distinct claims: 1 supported of 2 = 0.5. The citation metrics count it once too: the 8
    # repeating statements have no claim of their own, so their citations are left out.
    judge = ScriptedJudge({"extract_claims": one_claim_per_unit, "verify_claims": supported_when_paris})
    scores = run_all([Faithfulness(), CitationAccuracy(), CitationPrecision(), CitationRecall()], REPEATED, judge)
    assert scores["faithfulness"].value == 0.5 and scores["faithfulness"].label == "fail"
    assert judge.calls == {"extract_claims": 1, "verify_claims": 1}
    assert judge.inputs["verify_claims"][0]["claims"] == [
        "The Eiffel Tower is in Paris.",
        "It is painted bright green every spring.",
    ]
    for name in ("citation_accuracy", "citation_precision", "citation_recall"):
        assert scores[name].value == 0.5, name
    citations = scores["citation_accuracy"].details["citations"]
    assert [c["verdict"] for c in citations] == ["supports"] + ["no_claim"] * 8 + ["does_not_support"]
    assert citations[1]["reason"] == "the cited text repeats claim 0 (statement 0), which counts once there"


@pytest.mark.parametrize(
    "variant",
    [
        "the eiffel tower is in paris",
        "The  Eiffel Tower is in Paris!",
        "The Eiffel Tower is in Paris [2].",
        "THE EIFFEL TOWER, IS IN PARIS.",
    ],
)
def test_claims_are_the_same_ignoring_case_whitespace_punctuation_and_markers(variant):
    from ragmeter.metrics.requests import distinct_claims

    claims = [
        {"unit": 0, "text": "The Eiffel Tower is in Paris."},
        {"unit": 1, "text": variant},
        {"unit": 1, "text": "The Eiffel Tower is in Lyon."},
    ]
    assert distinct_claims(claims) == [
        {"unit": 0, "text": "The Eiffel Tower is in Paris.", "repeats": [1]},
        {"unit": 1, "text": "The Eiffel Tower is in Lyon."},
    ]
    assert claims[0] == {"unit": 0, "text": "The Eiffel Tower is in Paris."}  # not changed in place


# --------------------------------------------------------------------------- answer relevancy


Q = EINSTEIN.question
GEN = ["When was Einstein born?", "Where did Einstein die?", "What did Einstein like?"]
RELEVANCY_VECTORS = {
    Q: [1.0, 0.0, 0.0],
    GEN[0]: [1.0, 0.0, 0.0],  # cos 1.0
    GEN[1]: [0.6, 0.8, 0.0],  # cos 0.6
    GEN[2]: [0.0, 1.0, 0.0],  # cos 0.0
}


def questions_script(noncommittal=False, parts=None):
    return {
        "generate_questions": lambda i: {
            "questions": GEN[: i["n"]] if i["n"] <= 3 else GEN + [f"extra {k}" for k in range(i["n"] - 3)],
            "noncommittal": noncommittal,
            "parts": parts or [{"text": "when born", "covered": True}, {"text": "where died", "covered": True}],
        }
    }


def test_answer_relevancy_mean_and_max_of_cosines():
    # mean = (1.0 + 0.6 + 0.0) / 3 = 0.5333 -> fail (< 0.6); max = 1.0 -> pass
    emb = DictEmbedder(RELEVANCY_VECTORS)
    judge = ScriptedJudge(questions_script())
    s = run(AnswerRelevancy(), EINSTEIN, judge, emb)
    assert s.value == pytest.approx(1.6 / 3)
    assert s.label == "fail"
    assert [q["similarity"] for q in s.details["questions"]] == pytest.approx([1.0, 0.6, 0.0])
    assert judge.inputs["generate_questions"][0]["n"] == 3
    assert emb.calls == 1 and emb.texts[0] == [Q, *GEN]
    s = run(
        AnswerRelevancy(aggregate="max"), EINSTEIN, ScriptedJudge(questions_script()), DictEmbedder(RELEVANCY_VECTORS)
    )
    assert s.value == pytest.approx(1.0) and s.label == "pass"


def test_answer_relevancy_noncommittal_scores_zero():
    emb = DictEmbedder(RELEVANCY_VECTORS)
    s = run(AnswerRelevancy(), EINSTEIN, ScriptedJudge(questions_script(noncommittal=True)), emb)
    assert s.value == 0.0 and s.label == "fail" and "noncommittal" in s.explanation
    assert s.details["noncommittal"] is True


def test_answer_relevancy_rating_variant_needs_no_embeddings():
    judge = ScriptedJudge({"rate_answer": {"score": 0.9, "reason": "direct answer"}})
    s = run(AnswerRelevancy(method="rating"), EINSTEIN, judge, embedder=None)
    assert s.value == pytest.approx(0.9) and s.label == "pass"
    assert s.details["method"] == "rating" and "direct answer" in s.explanation
    assert judge.calls == {"rate_answer": 1}


def test_answer_relevancy_without_question_generation_compares_question_and_answer():
    clean = "Einstein was born in 1879. He died in Princeton. He won a Nobel Prize. He liked sailing."
    # cos([1, 0, 0], [0.8, 0.6, 0]) = 0.8
    emb = DictEmbedder({Q: [1.0, 0.0, 0.0], clean: [0.8, 0.6, 0.0]})
    judge = ScriptedJudge(
        {
            "generate_questions": {
                "questions": [],
                "noncommittal": False,
                "parts": [{"text": "when born", "covered": True}],
            }
        },
        name="offline",
        generates_questions=False,
    )
    s = run(AnswerRelevancy(), EINSTEIN, judge, emb)
    assert s.value == pytest.approx(0.8)
    assert "the offline judge cannot generate questions; score = similarity of question and answer" in s.explanation
    assert judge.inputs["generate_questions"][0]["n"] == 0  # asked for no questions
    assert emb.texts[0] == [Q, clean]


def test_answer_relevancy_without_embedder_is_an_error():
    s = run(AnswerRelevancy(), EINSTEIN, ScriptedJudge(questions_script()), embedder=None)
    assert s.value is None and s.error and "embedder" in s.error and s.label is None


# --------------------------------------------------------------------------- context relevance / precision


def test_context_relevance_statement_ratio_9_of_11_and_decayed():
    # chunk 0: 4 statements, 2 irrelevant + 2 relevant; chunk 1: 7 statements, all relevant.
    # 9 relevant of 11 -> 9 / 11 = 0.8182; per chunk 0.5 and 1.0.
    # decayed (d = 0.9): (0.5 * 1 + 1.0 * 0.9) / (1 + 0.9) = 1.4 / 1.9 = 0.7368
    chunk0 = "Alpha one. Beta two. Gamma three. Delta four."
    chunk1 = " ".join(f"Fact number {k}." for k in range(7))
    sample = Sample(question="Q?", contexts=[chunk0, chunk1])
    judge = ScriptedJudge(
        {
            "rate_chunks": lambda i: {
                "chunks": [
                    {"chunk": 0, "relevant": [1, 3], "useful": True},
                    {"chunk": 1, "relevant": list(range(len(i["chunks"][1]))), "useful": True},
                ],
                "answerable": 5,
            }
        }
    )
    s = run(ContextRelevance(), sample, judge)
    assert (
        len(judge.inputs["rate_chunks"][0]["chunks"][0]) == 4 and len(judge.inputs["rate_chunks"][0]["chunks"][1]) == 7
    )
    assert round(s.value, 4) == 0.8182 and s.label == "pass"
    assert s.details["relevant_statements"] == 9 and s.details["total_statements"] == 11
    assert s.details["relevant_chunks"] == 2
    assert [c["score"] for c in s.details["chunks"]] == pytest.approx([0.5, 1.0])
    assert s.details["chunks"][0]["relevant_statements"] == ["Beta two.", "Delta four."]
    s = run(ContextRelevance(aggregate="decayed"), sample, judge)
    assert s.value == pytest.approx(1.4 / 1.9)


def test_context_relevance_without_statements_is_not_applicable():
    # A chunk with no statement ("...") and a judge that grades nothing: not applicable, not an error.
    sample = Sample(question="Q?", contexts=["..."])
    judge = ScriptedJudge({"rate_chunks": {"chunks": [{"chunk": 0, "relevant": [], "useful": False}], "answerable": 1}})
    s = run(ContextRelevance(), sample, judge)
    assert s.value is None and s.error is None and "no text" in s.explanation


def test_context_precision_rank_aware_against_question_or_reference():
    # useful verdicts [no, yes, yes, no, no] -> (1/2 + 2/3) / 2 = 0.5833 -> warn
    sample = Sample(question="Q?", contexts=[f"Chunk {k}." for k in range(5)])
    useful = [False, True, True, False, False]
    script = {
        "rate_chunks": lambda i: {
            "chunks": [{"chunk": k, "relevant": [], "useful": useful[k]} for k in range(5)],
            "answerable": 3,
        }
    }
    judge = ScriptedJudge(script)
    s = run(ContextPrecision(), sample, judge)
    assert s.value == pytest.approx((1 / 2 + 2 / 3) / 2) and s.label == "warn"
    assert s.details["against"] == "question" and s.details["verdicts"] == useful
    assert judge.inputs["rate_chunks"][0]["reference"] is None
    with_ref = Sample(question="Q?", contexts=[f"Chunk {k}." for k in range(5)], reference="The answer.")
    judge = ScriptedJudge(script)
    s = run(ContextPrecision(), with_ref, judge)
    assert s.details["against"] == "reference"
    assert judge.inputs["rate_chunks"][0]["reference"] == "The answer."
    # no useful chunk -> 0.0, not None
    none_useful = ScriptedJudge(
        {"rate_chunks": {"chunks": [{"chunk": k, "relevant": [], "useful": False} for k in range(5)], "answerable": 1}}
    )
    assert run(ContextPrecision(), sample, none_useful).value == 0.0


# --------------------------------------------------------------------------- context recall / entity recall


ATTRIBUTE = {
    "attribute_statements": lambda i: {
        # statement 0 attributed to chunk 0, statement 1 not: 1 / 2 = 0.5
        "statements": [
            {"statement": 0, "attributed": True, "chunks": [0]},
            {"statement": 1, "attributed": False, "chunks": []},
        ],
        # entities: Einstein, Ulm, 1879 found; Princeton not: 3 / 4 = 0.75
        "entities": [
            {"text": "Einstein", "found": True},
            {"text": "Ulm", "found": True},
            {"text": "1879", "found": True},
            {"text": "Princeton", "found": False},
        ],
    }
}


def test_context_recall_two_statements_one_attributed():
    judge = ScriptedJudge(ATTRIBUTE)
    s = run(ContextRecall(), EINSTEIN, judge)
    assert s.value == pytest.approx(0.5) and s.label == "fail"
    assert s.details["estimate"] is False
    assert s.details["missing"] == ["He died in Princeton in 1955."]
    assert judge.inputs["attribute_statements"][0]["statements"] == [
        "Einstein was born in Ulm in 1879.",
        "He died in Princeton in 1955.",
    ]


def test_context_recall_without_reference_is_a_labelled_estimate():
    # answerable 4 on 1..5 -> (4 - 1) / 4 = 0.75
    sample = Sample(question="Q?", contexts=["A.", "B."])
    judge = ScriptedJudge(
        {
            "rate_chunks": {
                "chunks": [
                    {"chunk": 0, "relevant": [0], "useful": True},
                    {"chunk": 1, "relevant": [], "useful": False},
                ],
                "answerable": 4,
            }
        }
    )
    s = run(ContextRecall(), sample, judge)
    assert s.value == pytest.approx(0.75)
    assert s.details["estimate"] is True and s.details["answerable"] == 4
    assert s.explanation.startswith("estimate (no reference)")
    assert judge.calls == {"rate_chunks": 1}
    s = run(ContextRecall(estimate=False), sample, ScriptedJudge({}))
    assert s.value is None and s.status == "n/a" and "reference" in s.explanation


def test_entity_recall_found_over_entities():
    s = run(EntityRecall(), EINSTEIN, ScriptedJudge(ATTRIBUTE))
    assert s.value == pytest.approx(0.75) and s.label == "pass"
    assert s.details["missing"] == ["Princeton"]
    empty = ScriptedJudge(
        {
            "attribute_statements": {
                "statements": [
                    {"statement": 0, "attributed": True, "chunks": [0]},
                    {"statement": 1, "attributed": True, "chunks": [1]},
                ],
                "entities": [],
            }
        }
    )
    s = run(EntityRecall(), EINSTEIN, empty)
    assert s.value is None and s.status == "n/a" and "no entities" in s.explanation


# --------------------------------------------------------------------------- answer correctness


CORRECT = Sample(
    question="Tell me about Einstein.",
    contexts=["Einstein bio."],
    answer="Einstein was born in 1879 [1]. He was German. He played the violin.",
    reference="Einstein was born in 1879. He was German. He died in 1955. He won the Nobel Prize in 1921.",
)
ANSWER_CLEAN = "Einstein was born in 1879. He was German. He played the violin."
COMPARE = {
    "extract_claims": one_claim_per_unit,
    # claims 0 and 1 are in the reference, claim 2 is not -> precision 2/3
    # reference statements 0 and 1 are in the answer, 2 and 3 are not -> recall 2/4
    "compare_claims": lambda i: {
        "claims": [{"claim": k, "in_reference": k < 2} for k in range(len(i["claims"]))],
        "statements": [{"statement": k, "in_answer": k < 2} for k in range(len(i["statements"]))],
    },
}
# cos([1, 0], [0.6, 0.8]) = 0.6
CORRECT_VECTORS = {ANSWER_CLEAN: [1.0, 0.0], CORRECT.reference: [0.6, 0.8]}


def test_answer_correctness_f1_blended_with_similarity():
    # Shares by words. Claims "Einstein was born in 1879." (5 words, in the reference), "He was
    # German." (3, in), "He played the violin." (4, not): P = 8 / 12 = 2/3. Reference statements
    # of 5, 3, 4 and 7 words, the first two covered: R = 8 / 19.
    # F1 = 2PR / (P + R) = (32/57) / (62/57) = 16/31 = 0.516129
    # value = 0.75 * 0.516129 + 0.25 * 0.6 = 0.387097 + 0.15 = 0.537097 -> warn
    emb = DictEmbedder(CORRECT_VECTORS)
    judge = ScriptedJudge(COMPARE)
    s = run(AnswerCorrectness(), CORRECT, judge, emb)
    assert s.details["f1"] == pytest.approx(16 / 31)
    assert s.details["similarity"] == pytest.approx(0.6)
    assert (s.details["precision"], s.details["recall"]) == (pytest.approx(2 / 3), pytest.approx(8 / 19))
    assert s.explanation.startswith(
        "factual F1 0.52 (precision 0.67: 2 of 3 claims mostly in the reference; "
        "recall 0.42: 2 of 4 reference statements mostly covered; shares by words)"
    )
    assert s.value == pytest.approx(0.75 * 16 / 31 + 0.25 * 0.6)
    assert s.label == "warn"
    assert emb.calls == 1 and sorted(emb.texts[0]) == sorted([ANSWER_CLEAN, CORRECT.reference])
    assert judge.inputs["compare_claims"][0]["statements"] == [
        "Einstein was born in 1879.",
        "He was German.",
        "He died in 1955.",
        "He won the Nobel Prize in 1921.",
    ]
    # weights (0.5, 0.5): 0.5 * 0.516129 + 0.5 * 0.6 = 0.558065
    s = run(AnswerCorrectness(weights=(0.5, 0.5)), CORRECT, ScriptedJudge(COMPARE), DictEmbedder(CORRECT_VECTORS))
    assert s.value == pytest.approx(0.558065, abs=1e-6)
    # weights (1, 0): factual F1 only, no embedding call
    emb = DictEmbedder(CORRECT_VECTORS)
    s = run(AnswerCorrectness(weights=(1, 0)), CORRECT, ScriptedJudge(COMPARE), emb)
    assert s.value == pytest.approx(16 / 31) and emb.calls == 0 and "similarity" not in s.details


def test_answer_correctness_many_claims_do_not_make_an_answer_complete():
    """Precision and recall are rates over their own items: 3 claims all in the reference that
    cover its first statement (5 of its 19 words) -> P = 1, R = 5/19, F1 = 2R / (1 + R) =
    10/24 = 0.4167 (a count F1, TP / (TP + (FP + FN) / 2) = 3 / (3 + 1.5) = 0.667, would call it
    nearly complete)."""
    script = {
        "extract_claims": one_claim_per_unit,
        "compare_claims": lambda i: {
            "claims": [{"claim": k, "in_reference": True} for k in range(len(i["claims"]))],
            "statements": [{"statement": k, "in_answer": k == 0} for k in range(len(i["statements"]))],
        },
    }
    s = run(AnswerCorrectness(weights=(1, 0)), CORRECT, ScriptedJudge(script), DictEmbedder())
    assert (s.details["precision"], s.details["recall"]) == (1.0, pytest.approx(5 / 19))
    assert s.value == pytest.approx(10 / 24) and s.label == "fail"


def test_missing_reference_is_not_applicable():
    sample = Sample(question="Q?", contexts=["C."], answer="A.")
    judge = ScriptedJudge({})
    for metric in (AnswerCorrectness(), EntityRecall()):
        s = run(metric, sample, judge, DictEmbedder())
        assert s.value is None and s.error is None and s.status == "n/a"
        assert "reference" in s.explanation
    assert sum(judge.calls.values()) == 0


# --------------------------------------------------------------------------- response completeness


def test_response_completeness_covered_parts():
    # 3 parts, 2 covered -> 2 / 3 = 0.6667 -> warn
    parts = [
        {"text": "when born", "covered": True},
        {"text": "where died", "covered": True},
        {"text": "why famous", "covered": False},
    ]
    s = run(ResponseCompleteness(), EINSTEIN, ScriptedJudge(questions_script(parts=parts)))
    assert s.value == pytest.approx(2 / 3) and s.label == "warn"
    assert s.details["missing"] == ["why famous"]


def test_response_completeness_shares_the_question_generation_call():
    judge = ScriptedJudge(questions_script())
    scores = run_all([AnswerRelevancy(n=5), ResponseCompleteness()], EINSTEIN, judge, DictEmbedder(RELEVANCY_VECTORS))
    assert judge.calls == {"generate_questions": 1}
    assert judge.inputs["generate_questions"][0]["n"] == 5
    assert scores["response_completeness"].value == 1.0


# --------------------------------------------------------------------------- hallucinated specifics


def test_hallucinated_specifics_lists_what_no_chunk_states():
    # specifics of the answer: "$25 billion", "March 2021", "7%"; the chunk states the first two
    # (as "25 billion dollars" and "March 2021") -> 2 / 3 = 0.6667 -> fail (< 0.75); "7%" listed
    sample = Sample(
        question="What did Acme pay?",
        contexts=["In March 2021 Acme paid 25 billion dollars, up 5%."],
        answer="Acme paid $25 billion in March 2021 [1], up 7%.",
    )
    s = run(HallucinatedSpecifics(), sample)  # no judge needed
    assert s.value == pytest.approx(2 / 3) and s.label == "fail" and s.judge == "code"
    assert s.details["hallucinated"] == [{"kind": "percent", "text": "7%"}]
    assert "7%" in s.explanation
    nothing = Sample(question="Q?", contexts=["C."], answer="It is sunny today.")
    s = run(HallucinatedSpecifics(), nothing)
    assert s.value == 1.0 and s.label == "pass"
    assert run(HallucinatedSpecifics(no_specifics_value=None), nothing).status == "n/a"


def test_hallucinated_specifics_accepts_specifics_from_the_question():
    sample = Sample(question="What happened in 2019?", contexts=["Revenue fell."], answer="In 2019 revenue fell.")
    assert run(HallucinatedSpecifics(), sample).value == 1.0
    assert run(HallucinatedSpecifics(allow_question=False), sample).value == 0.0


# --------------------------------------------------------------------------- invalid judge output


@pytest.mark.parametrize(
    "metric, script",
    [
        (
            Faithfulness(),
            {
                "extract_claims": one_claim_per_unit,
                "verify_claims": lambda i: {
                    "verdicts": [{"claim": k, "verdict": "maybe", "evidence": []} for k in range(len(i["claims"]))]
                },
            },
        ),
        (
            Faithfulness(),
            {
                "extract_claims": one_claim_per_unit,  # supported without evidence
                "verify_claims": lambda i: {
                    "verdicts": [
                        {"claim": k, "verdict": "supported", "evidence": [], "reason": ""}
                        for k in range(len(i["claims"]))
                    ]
                },
            },
        ),
        (Faithfulness(), {"extract_claims": {"claims": [{"unit": 99, "text": "out of range"}]}}),
        (
            ContextRelevance(),
            {"rate_chunks": {"chunks": [{"chunk": 0, "relevant": [0], "useful": True}], "answerable": 3}},
        ),
        (
            ContextRecall(),
            {
                "attribute_statements": {
                    "statements": [{"statement": 0, "attributed": True, "chunks": []}],
                    "entities": [],
                }
            },
        ),
        (
            ResponseCompleteness(),
            {
                "generate_questions": {
                    "questions": ["only one"],
                    "noncommittal": False,
                    "parts": [{"text": "x", "covered": True}],
                }
            },
        ),
        (AnswerRelevancy(method="rating"), {"rate_answer": {"score": 1.7, "reason": "too high"}}),
        (CitationAccuracy(), {"extract_claims": "not json"}),
    ],
)
def test_invalid_judge_output_gives_an_error_score(metric, script):
    s = run(metric, EINSTEIN, ScriptedJudge(script), DictEmbedder())
    assert s.value is None and s.error and s.label is None
    assert s.status == "error"


def test_no_judge_is_an_error_not_a_number():
    s = run(Faithfulness(), EINSTEIN, judge=None)
    assert s.value is None and "judge" in s.error


# --------------------------------------------------------------------------- all metrics, fixed cost


def full_script():
    return {
        "extract_claims": one_claim_per_unit,
        "verify_claims": lambda i: {
            "verdicts": [
                {"claim": k, "verdict": "supported", "evidence": [{"chunk": 0, "quote": ""}], "reason": ""}
                for k in range(len(i["claims"]))
            ]
        },
        "rate_chunks": lambda i: {
            "chunks": [{"chunk": k, "relevant": [0] if s else [], "useful": k == 0} for k, s in enumerate(i["chunks"])],
            "answerable": 4,
        },
        "attribute_statements": lambda i: {
            "statements": [{"statement": k, "attributed": True, "chunks": [0]} for k in range(len(i["statements"]))],
            "entities": [{"text": "Ulm", "found": True}],
        },
        "generate_questions": lambda i: {
            "questions": [f"Question {k}?" for k in range(i["n"])],
            "noncommittal": False,
            "parts": [{"text": "all", "covered": True}],
        },
        "compare_claims": lambda i: {
            "claims": [{"claim": k, "in_reference": True} for k in range(len(i["claims"]))],
            "statements": [{"statement": k, "in_answer": True} for k in range(len(i["statements"]))],
        },
        "rate_answer": {"score": 0.8, "reason": ""},
    }


def all_metrics():
    return [M.get_metric(name) for name in M.REGISTRY]


def with_chunks(n: int) -> Sample:
    extra = [Context(f"Filler chunk number {k}. It says nothing useful.", id=f"f{k}") for k in range(n - 3)]
    return Sample(
        question=EINSTEIN.question,
        contexts=list(EINSTEIN.contexts) + extra,
        answer=EINSTEIN.answer,
        reference=EINSTEIN.reference,
    )


@pytest.mark.parametrize("n_chunks", [3, 10])
def test_all_metrics_at_once_cost_a_fixed_number_of_calls(n_chunks):
    metrics = all_metrics()
    assert len(metrics) == 12
    judge, emb = ScriptedJudge(full_script()), DictEmbedder()
    scores = run_all(metrics, with_chunks(n_chunks), judge, emb)
    # 5 calls: rate_chunks and attribute_statements are asked together as review_context (6 before)
    assert sum(judge.calls.values()) == 5 and judge.calls["review_context"] == 1
    assert all(v == 1 for v in judge.calls.values())
    assert "rate_answer" not in judge.calls
    assert emb.calls == 1
    for name, s in scores.items():
        assert s.error is None, (name, s.error)
        assert s.value is not None and 0.0 <= s.value <= 1.0 and not math.isnan(s.value), name
        assert s.label in ("pass", "warn", "fail")
    # the one embedding call carried the texts of both embedding metrics
    texts = emb.texts[0]
    assert EINSTEIN.question in texts and EINSTEIN.reference in texts and "Question 0?" in texts


def test_calls_do_not_grow_with_the_number_of_chunks():
    counts = []
    for n in (3, 10):
        judge, emb = ScriptedJudge(full_script()), DictEmbedder()
        run_all(all_metrics(), with_chunks(n), judge, emb)
        counts.append((dict(judge.calls), emb.calls))
    assert counts[0] == counts[1]


def test_rating_variant_with_everything_else_stays_within_budget():
    metrics = [m for m in all_metrics() if m.name != "answer_relevancy"] + [AnswerRelevancy(method="rating")]
    judge, emb = ScriptedJudge(full_script()), DictEmbedder()
    run_all(metrics, EINSTEIN, judge, emb)
    # the documented exception to the 5-call budget: the rating variant adds rate_answer while
    # response completeness still needs generate_questions -> 6 calls, each task once (7 before
    # rate_chunks and attribute_statements were asked together as review_context)
    assert sum(judge.calls.values()) == 6 and judge.calls["rate_answer"] == 1
    assert all(v == 1 for v in judge.calls.values())
    assert emb.calls == 1


# --------------------------------------------------------------------------- thresholds


def test_default_thresholds_and_overrides():
    expected = {
        "faithfulness": (0.85, 0.7),
        "answer_relevancy": (0.8, 0.6),
        "context_precision": (0.7, 0.5),
        "context_relevance": (0.5, 0.3),
        "context_recall": (0.8, 0.6),
        "answer_correctness": (0.7, 0.5),
        "response_completeness": (0.8, 0.6),
        "entity_recall": (0.7, 0.5),
        "hallucinated_specifics": (1.0, 0.75),
        "citation_accuracy": (0.8, 0.6),
        "citation_precision": (0.8, 0.6),
        "citation_recall": (0.8, 0.6),
    }
    for name, (threshold, warn) in expected.items():
        m = M.get_metric(name)
        assert (m.threshold, m.warn) == (threshold, warn), name
        assert "Threshold" in type(m).__doc__ and "xample" in type(m).__doc__, name
    m = Faithfulness(threshold=0.5, warn=0.2)
    judge = ScriptedJudge(
        {
            "extract_claims": one_claim_per_unit,
            "verify_claims": verdicts_from({0: ("supported", [(0, "")]), 1: ("supported", [(1, "")])}),
        }
    )
    s = run(m, EINSTEIN, judge)  # 2 / 4 = 0.5 -> pass with the overridden threshold
    assert s.value == 0.5 and s.label == "pass" and s.details["threshold"] == 0.5
    with pytest.raises(ValueError):
        Faithfulness(threshold=0.5, warn=0.6)


def test_metric_score_sync_convenience():
    judge = ScriptedJudge({"extract_claims": one_claim_per_unit, "verify_claims": verdicts_from({})})
    s = Faithfulness().score(EINSTEIN, judge)
    assert s.value == 0.0 and s.label == "fail"


def test_citation_metrics_are_registered():
    assert M.get_metric("citation_precision").__class__ is CitationPrecision
    assert M.get_metric("citation_recall").__class__ is CitationRecall


def test_a_failed_question_generation_does_not_deprive_other_metrics_of_embeddings():
    script = {**COMPARE, "generate_questions": {"questions": [], "noncommittal": False, "parts": []}}  # invalid
    emb = DictEmbedder(CORRECT_VECTORS)
    judge = ScriptedJudge(script)
    scores = run_all([AnswerRelevancy(), AnswerCorrectness()], CORRECT, judge, emb)
    assert scores["answer_relevancy"].status == "error" and "generate_questions" in scores["answer_relevancy"].error
    assert scores["answer_correctness"].value == pytest.approx(0.75 * 16 / 31 + 0.25 * 0.6)
    assert emb.calls == 1 and judge.calls["generate_questions"] == 1


def test_metric_score_takes_a_judge_spec_and_none_is_the_default_judge(monkeypatch):
    """``Metric.score`` resolves its judge as ``evaluate()`` does: a spec string, or None for the
    default judge (``RAGMETER_JUDGE``, else a key's provider, else offline)."""
    import ragmeter as rm
    from helpers.servers import FakeLLMServer

    sample = Sample(
        "Where is the Eiffel Tower?",
        ["The Eiffel Tower is in Paris. It was completed in 1889."],
        answer="The Eiffel Tower is in Paris.",
    )
    by_spec = Faithfulness().score(sample, judge="offline")
    by_default = Faithfulness().score(sample)  # no key in the environment: the offline judge
    assert by_spec.value == by_default.value == 1.0
    assert by_spec.judge.startswith("offline") and by_default.judge == by_spec.judge
    assert by_default.judge == rm.evaluate([sample], metrics=["faithfulness"], progress=False).judge
    with pytest.raises(ValueError, match="unknown judge spec"):
        Faithfulness().score(sample, judge="nonsense")

    with FakeLLMServer() as server:  # the default follows RAGMETER_JUDGE: a real OpenAI SDK, a local server
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("RAGMETER_JUDGE", f"openai:gpt-4o-mini@{server.openai_url}")
        s = Faithfulness().score(sample)
        assert s.judge == "openai:gpt-4o-mini" and s.value == 1.0  # the server's oracle supports every claim
        assert [r.task for r in server.chat_requests] == ["extract_claims", "verify_claims"]
        s = Faithfulness().score(sample, judge=f"openai:gpt-4o-mini@{server.openai_url}")
        assert s.judge == "openai:gpt-4o-mini"
