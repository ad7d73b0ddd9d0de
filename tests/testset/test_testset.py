"""Test-set generation: quotas, the write_questions task through the real OpenAI SDK against the
fake server, edge cases kept, near-duplicates dropped, the offline extractive set, documents
from LangChain / LlamaIndex, and the ``ragmeter testset`` command."""

from __future__ import annotations

import argparse
import json
import os

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.servers import FakeLLMServer, answer, oracle
from ragmeter.judges.tasks import InvalidOutput, get_task
from ragmeter.testset import EDGE_KINDS, chunk_documents, generate, load_documents, quotas

DOCS = [
    {"id": "fr", "text": "Paris is the capital of France. The river Seine flows through the city of Paris."},
    {"id": "de", "text": "Berlin is the capital of Germany. The river Spree flows through the city of Berlin."},
    {"id": "it", "text": "Rome is the capital of Italy. The river Tiber flows through the city of Rome."},
    {"id": "es", "text": "Madrid is the capital of Spain. The river Manzanares flows through the city of Madrid."},
    {"id": "pt", "text": "Lisbon is the capital of Portugal. The river Tagus flows through the city of Lisbon."},
    {"id": "at", "text": "Vienna is the capital of Austria. The river Danube flows through the city of Vienna."},
]
TEXT_TO_ID = {d["text"]: d["id"] for d in DOCS}
CITES = {
    "simple": [0],
    "reasoning": [0],
    "multi_context": [0, 1],
    "multi_hop": [0, 1],
    "unanswerable": [],
    "ambiguous": [0],
    "out_of_scope": [],
}


def test_quotas_split_n_by_largest_remainder():
    # 10: 1 edge case; 9 regular = 4.5 / 2.25 / 2.25 -> 4 2 2 + the remainder to simple
    assert quotas(10) == {"simple": 5, "reasoning": 2, "multi_context": 2, "unanswerable": 1}
    # 20 with 20% edge cases: 4 edge cases, one per edge kind; 16 regular = 8 4 4
    assert quotas(20, edge_cases=0.2) == {
        "simple": 8,
        "reasoning": 4,
        "multi_context": 4,
        "unanswerable": 1,
        "ambiguous": 1,
        "out_of_scope": 1,
        "multi_hop": 1,
    }
    assert quotas(4, {"simple": 1}, edge_cases=0.5) == {"simple": 2, "unanswerable": 1, "ambiguous": 1}
    with pytest.raises(ValueError, match="unknown question kind"):
        quotas(10, {"unanswerable": 1.0})


def test_write_questions_task_checks_the_chunks_each_kind_may_cite():
    task = get_task("write_questions")
    inputs = {"kind": "multi_context", "n": 1, "chunks": ["a", "b"]}
    ok = task.validate(inputs, {"items": [{"question": "Q?", "answer": "A.", "chunks": [1, 0]}]})
    assert ok == {"items": [{"question": "Q?", "answer": "A.", "chunks": [0, 1]}]}
    with pytest.raises(InvalidOutput, match="at least 2 chunk"):
        task.validate(inputs, {"items": [{"question": "Q?", "answer": "A.", "chunks": [0]}]})
    with pytest.raises(InvalidOutput, match="must list no chunk"):
        task.validate(
            {**inputs, "kind": "out_of_scope"}, {"items": [{"question": "Q?", "answer": "A.", "chunks": [0]}]}
        )
    with pytest.raises(InvalidOutput, match="exactly 1 items"):
        task.validate(inputs, {"items": []})
    system, user = task.messages(inputs)
    assert "write_questions" not in system and json.loads(user)["definition"].startswith("a question that needs")


def writer(calls: dict):
    """A model that writes one question per request about the first chunk it is shown. The first
    two 'simple' requests get the same question (a duplicate); the first 'unanswerable' answer
    cites a chunk (invalid: asked again); 'reasoning' fails when ``calls['fail']`` says so."""

    def respond(req):
        if req.task != "write_questions":
            return oracle(req)
        inp = req.inputs
        kind, texts = inp["kind"], [c["text"] for c in inp["chunks"]]
        calls[kind] = calls.get(kind, 0) + 1
        cites = CITES[kind]
        question = f"Which {kind} fact number {calls[kind]} concerns {texts[0].split()[0]}?"
        if kind == "simple" and calls[kind] <= 2:
            question = "What is the capital of France?"
        if kind == "unanswerable" and calls[kind] == 1:
            cites = [0]
        if kind == "reasoning" and calls.get("fail"):
            return answer({"items": []})
        return answer({"items": [{"question": question, "answer": f"From {texts[0]}", "chunks": cites}]})

    return respond


def judge_for(server, **kw):
    from ragmeter.judges.openai import OpenAIJudge

    return OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False, **kw)


@pytest.mark.slow  # imports the OpenAI SDK
def test_llm_generation_fills_every_quota_and_says_how_each_item_was_made():
    pytest.importorskip("openai")
    calls: dict = {}
    with FakeLLMServer(writer(calls)) as server:
        ts = generate(DOCS, n=20, judge=judge_for(server), edge_cases=0.2, seed=1)
        requests = server.chat_requests
    want = quotas(20, edge_cases=0.2)
    assert ts.counts() == want and len(ts) == 20
    assert ts.duplicates == 1  # the repeated 'capital of France' question, asked again
    retried = [r for r in requests if "must list no chunk" in r.last_user_text]
    assert len(retried) == 1  # the invalid unanswerable answer was shown back with the error
    assert len(requests) == 20 + 1 + 1 and ts.usage.calls == 22
    assert ts.usage.cost_usd is not None and ts.usage.cost_usd > 0
    assert sum(s.question == "What is the capital of France?" for s in ts) == 1
    for s in ts:
        kind = s.metadata["kind"]
        assert s.metadata["generator"] == "openai:gpt-4o-mini"
        assert s.metadata["edge_case"] == (kind in EDGE_KINDS)
        shown = s.metadata["source_chunks"]
        assert len(shown) == (2 if kind in ("multi_context", "multi_hop") else 1)
        assert s.relevant_ids == ([shown[i] for i in CITES[kind]] or None)
        assert s.answer is None and s.contexts == [] and s.reference.startswith("From ")
        assert s.reference == f"From {ts.chunks[[c.id for c in ts.chunks].index(shown[0])].text}"
        if kind == "multi_hop":  # the partner chunk comes from another document
            assert shown[0] != shown[1]
    # every prefix keeps the edge cases' share (4 of 20): 1 in the first 5, 2 in the first 10
    assert [sum(s.metadata["edge_case"] for s in ts[:k]) for k in (5, 10, 20)] == [1, 2, 4]


def test_edge_cases_keep_their_share_when_a_kind_falls_short():
    pytest.importorskip("openai")
    with FakeLLMServer(writer({"fail": True})) as server, pytest.warns(UserWarning, match="8 of 10 questions"):
        ts = generate(DOCS, n=10, judge=judge_for(server, max_attempts=1), edge_cases=0.1)
    assert ts.counts() == {"simple": 5, "multi_context": 2, "unanswerable": 1}
    assert "reasoning: 0 of 2 questions" in ts.notes
    assert any("no valid answer to write_questions" in n for n in ts.notes)


def test_offline_judge_writes_a_labelled_extractive_set():
    ts = generate(DOCS, n=12, judge="offline", edge_cases=0)  # every sentence of 6+ words: 2 per document
    assert len(ts) == 12 and ts.counts() == {"extractive": 12}
    for s in ts:
        (cid,) = s.relevant_ids
        chunk = next(c for c in ts.chunks if c.id == cid)
        assert s.reference in chunk.text and s.question.endswith("?")
        assert s.metadata["generator"] == "offline" and s.metadata["source_chunks"] == [cid]
    # "Paris is the capital ..." is a definition; "The river Seine flows through ..." a verb of place
    assert {s.question for s in ts} >= {"What is Paris?", "What is Rome?", "Where does the river Seine flow?"}
    assert not any("corpus say" in s.question for s in ts)
    assert "ambiguous, out-of-scope, multi-hop and reasoning questions need an LLM judge" in ts.notes[0]


def test_near_duplicate_questions_are_dropped_and_a_short_set_says_so():
    twice = DOCS[:2] + [{"id": "fr-copy", "text": DOCS[0]["text"]}]
    with pytest.warns(UserWarning, match="4 of 10 questions: the documents give no more"):
        ts = generate(twice, n=10, judge="offline", edge_cases=0)
    questions = [s.question for s in ts]
    assert len(questions) == len(set(questions)) == 4 and ts.duplicates == 2
    assert "extractive: 4 of 10 questions" in ts.notes


# Each sentence below fits one rule; the questions are the rules' output worked out by hand.
@pytest.mark.parametrize(
    "sentence, question, rule",
    [
        ("Paris is the capital and the largest city of France.", "What is Paris?", "definition"),
        ("APY can be computed from the periodic rate with a formula.", "How can APY be computed?", "passive"),
        (
            "The produced protein is displayed on the cell surface.",
            "Where is the produced protein displayed?",
            "passive",
        ),
        (
            "Metformin is contraindicated when the filtration rate falls below 30.",
            "When is metformin contraindicated?",
            "passive",
        ),
        (
            "A startup probe protects slow-starting containers from the kubelet.",
            "What does a startup probe protect?",
            "present",
        ),
        (
            "The river Seine flows through Paris and into the English Channel.",
            "Where does the river Seine flow?",
            "present",
        ),
        ("France gained territories in Alsace and Lorraine.", "What did France gain?", "past"),
        ("The controller must erase the data without undue delay.", "What must the controller erase?", "modal"),
        (
            "The Thirty Years' War began in 1618 with the Defenestration of Prague, when nobles rebelled.",
            "The Thirty Years' War began in what year with the Defenestration of Prague?",
            "value",
        ),
        (
            "The tower is 330 metres tall and stands beside the river Seine.",
            "The tower is how many metres tall?",
            "value",
        ),
        (
            "In decoder-only language models, a causal mask sets the scores of future positions.",
            "In decoder-only language models, what does a causal mask set?",
            "present",
        ),
        (
            "Starting with a low dose and using extended-release tablets can reduce these effects.",
            "What does the corpus say about Starting, low and extended-release?",
            "template",
        ),  # equal idf: a term first
    ],
)
def test_offline_question_rules(sentence, question, rule):
    from ragmeter.testset.extractive import Vocabulary, question_for

    corpus = [
        sentence,
        "metformin and the metformin dose; probes and the probe; the tower; Gustave Eiffel met France and Lorraine.",
    ]  # what the corpus writes in lower case, or names
    assert question_for(sentence, Vocabulary(corpus)) == (question, rule)


@pytest.mark.parametrize(
    "sentence, question",
    [
        (
            "A camera flash is not allowed inside the galleries of the museum.",
            "Is a camera flash allowed inside the galleries of the museum?",
        ),
        (
            "Because metformin does not stimulate insulin secretion, it rarely causes hypoglycaemia.",
            "Does metformin stimulate insulin secretion?",
        ),
        (
            "When a readiness probe fails, the pod is removed from the Service, but the container isn't restarted.",
            "When a readiness probe fails, is the container restarted?",
        ),
        ("Bleached corals are not dead and can recover if conditions improve.", "Are bleached corals dead?"),
        (
            "The kubelet never restarts a container that passed its probe.",
            "Does the kubelet ever restart a container that passed its probe?",
        ),
        ("The container is not restarted unless the liveness probe fails.", None),  # an exception: not a plain no
        ("While the startup probe has not succeeded, the other probes are disabled.", None),  # a condition
    ],
)
def test_offline_negation_questions(sentence, question):
    from ragmeter.testset.extractive import Vocabulary, _negated

    assert _negated(sentence, Vocabulary([sentence, "bleached corals"])) == question


EDGE_DOCS = [
    {
        "id": "tower",
        "text": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. The tower is "
        "330 metres tall and stands beside the river Seine. The tower was not designed by Gustave "
        "Eiffel himself, but by two engineers of his company.",
    },
    {
        "id": "louvre",
        "text": "The Louvre is the most visited art museum in the world. The Mona Lisa has hung in the "
        "Louvre since 1797. A camera flash is not allowed inside the galleries of the museum.",
    },
    {
        "id": "seine",
        "text": "The river Seine flows through Paris and into the English Channel. The river is 777 "
        "kilometres long from its source to the sea.",
    },
]


def test_offline_edge_cases_fill_their_share():
    """``--edge-cases`` without an LLM wrote 0 edge cases (issue 38): the offline generator makes
    the four kinds it can, each in its share, and labels them."""
    ts = generate(EDGE_DOCS, n=8, judge="offline", edge_cases=0.5)
    assert ts.counts() == {"extractive": 4, "numeric": 1, "negation": 1, "unanswerable": 1, "multi_chunk": 1}
    by_kind = {s.metadata["kind"]: s for s in ts if s.metadata["edge_case"]}
    assert set(by_kind) == {"numeric", "negation", "unanswerable", "multi_chunk"}
    assert not any(s.metadata["edge_case"] for s in ts if s.metadata["kind"] == "extractive")
    # the only negated clause of the corpus; its answer is no
    neg = by_kind["negation"]
    assert neg.question in (
        "Is a camera flash allowed inside the galleries of the museum?",
        "Was the tower designed by Gustave Eiffel himself?",
    )
    assert neg.reference.startswith("No. ") and len(neg.relevant_ids) == 1
    # a value asked in place: 330 metres, 1797, two engineers or 777 kilometres
    num = by_kind["numeric"]
    assert any(w in num.question for w in ("how many", "what year")) and num.reference.endswith(".")
    # a thing the corpus defines, with no date in any chunk that names it: no relevant chunk
    una = by_kind["unanswerable"]
    assert una.question in ("When was the Eiffel Tower first described?", "When was the Louvre first described?")
    assert una.relevant_ids is None and una.reference.startswith("The documents do not say when")
    assert "1797" not in " ".join(c.text for c in ts.chunks if c.id in una.metadata["source_chunks"])
    # two questions on two chunks, both relevant
    multi = by_kind["multi_chunk"]
    assert ", and " in multi.question and len(set(multi.relevant_ids)) == 2
    assert {s.metadata["kind"] for s in ts[:4]} & {"numeric", "negation", "unanswerable", "multi_chunk"}
    assert "ambiguous, out-of-scope, multi-hop" in ts.notes[0]


def test_offline_edge_kinds_without_material_give_their_places_to_the_others():
    ts = generate(DOCS, n=10, judge="offline", edge_cases=0.4)  # no number, no negation in DOCS
    counts = ts.counts()
    assert counts["extractive"] == 6 and sum(v for k, v in counts.items() if k != "extractive") == 4
    assert "numeric" not in counts and "negation" not in counts
    assert any(n.startswith("numeric: 0 of 1 questions") for n in ts.notes)
    assert any(n.startswith("negation: 0 of 1 questions") for n in ts.notes)


@pytest.mark.slow  # imports LlamaIndex
def test_documents_from_langchain_and_llamaindex():
    docs_mod = pytest.importorskip("langchain_core.documents")
    schema = pytest.importorskip("llama_index.core.schema")
    docs = [
        docs_mod.Document(id="lc-1", page_content="Dune was written by Frank Herbert in 1965."),
        docs_mod.Document(page_content="Green tea is made from unoxidised leaves.", metadata={"source": "tea.txt"}),
        schema.TextNode(id_="li-1", text="The secret code of the otter is K1037."),
        "A plain string document about nothing in particular at all.",
        docs_mod.Document(page_content="Black tea is fully oxidised.", metadata={"source": "tea.txt"}),
    ]
    chunks = chunk_documents(docs)
    assert [c.id for c in chunks] == ["lc-1", "tea.txt", "li-1", "doc-4", "tea.txt@2"]
    long = chunk_documents([{"id": "long", "text": "First sentence here. " * 30}], chunk_size=200)
    assert [c.id for c in long][:2] == ["long#1", "long#2"] and all(len(c.text) <= 200 for c in long)
    assert long[0].metadata == {"document": "long"}
    ts = generate(docs, n=2, judge="offline")
    assert {i for s in ts for i in s.relevant_ids} <= {c.id for c in chunks}


def test_testset_command(tmp_path, capsys):
    from ragmeter.testset.cli import register

    folder = tmp_path / "docs"
    folder.mkdir()
    for d in DOCS:
        (folder / f"{d['id']}.txt").write_text(d["text"])
    (folder / "notes.md").write_text("Helsinki is the capital of Finland, on the Gulf of Finland coast.")
    parser = argparse.ArgumentParser(prog="ragmeter")
    register(parser.add_subparsers(dest="command"))
    out = tmp_path / "testset.jsonl"
    args = parser.parse_args(
        ["testset", str(folder), "--n", "10", "--out", str(out), "--judge", "offline", "--edge-cases", "0.2"]
    )
    assert args.func(args) == 0
    printed = capsys.readouterr()
    assert (
        "wrote 10 questions (" in printed.out
        and f"to {out} and 7 chunks to {tmp_path / 'testset.chunks.jsonl'}" in printed.out
    )
    assert "8 extractive" in printed.out and "need an LLM judge" in printed.err
    loaded = rm.load_samples(out)
    assert len(loaded) == 10 and sum(s.metadata["edge_case"] for s in loaded) == 2
    chunk_ids = {json.loads(line)["id"] for line in (tmp_path / "testset.chunks.jsonl").read_text().splitlines()}
    assert chunk_ids == {"fr.txt", "de.txt", "it.txt", "es.txt", "pt.txt", "at.txt", "notes.md"}
    assert {i for s in loaded for i in s.relevant_ids or ()} <= chunk_ids  # unanswerable: none
    # a JSONL corpus of {id, text} works the same way
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    assert [d["id"] for d in load_documents(corpus)] == [d["id"] for d in DOCS]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1: expected an object with a 'text' string"):
        load_documents(bad)


@pytest.mark.slow
def test_a_seed_gives_the_same_offline_test_set_in_every_process(tmp_path):
    """``seed`` fixes the test set whatever Python's hash seed: sentences were ranked by an idf sum
    taken over a ``set`` of words, whose float rounding followed the set's (per-process) order, so
    the bundled samples gave other questions in some processes (the manual's block of this
    command failed under one hash seed in three)."""
    import subprocess
    import sys

    root = ROOT
    code = (
        "import ragmeter as rm\n"
        "from ragmeter.baselines import pool_chunks\n"
        "from ragmeter.testset import generate\n"
        "chunks = pool_chunks(rm.load_samples('examples/rag_samples.jsonl'))\n"
        "for s in generate(chunks, n=40, judge='offline', edge_cases=0.1, seed=0):\n"
        "    print(s.metadata['kind'], s.question, s.relevant_ids)\n"
    )
    outputs = set()
    for hash_seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "RAGMETER_CACHE_DIR": str(tmp_path / hash_seed)}
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr
        outputs.add(out.stdout)
    assert len(outputs) == 1
