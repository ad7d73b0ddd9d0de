"""Run-level limits (:class:`ragmeter.metrics.requests.Limits`): a record past a limit gets a clear
per-score error, quickly, and the rest of the batch is scored as before."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import string
import sys

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.scripted import ScriptedJudge
from ragmeter.judges import OfflineJudge
from ragmeter.metrics import DEFAULT_METRICS, DEFAULT_RETRIEVAL_METRICS
from ragmeter.metrics.requests import LimitError, Limits, RequestSettings
from ragmeter.metrics.scoring import score_sample

EXAMPLES = ROOT / "examples" / "rag_samples.jsonl"
sys.path.insert(0, str(ROOT / "benchmarks"))


@functools.lru_cache(maxsize=1)
def _sentences() -> list[str]:
    rng = random.Random(0)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(5000)]
    return [
        f"{rng.choice(words).capitalize()} {' '.join(rng.choices(words, k=rng.randint(6, 16)))} "
        f"in {rng.randint(1900, 2024)}."
        for _ in range(3000)
    ]


def varied_text(n_chars: int, seed: int = 0) -> str:
    """``n_chars`` of varied prose-like text: 3,000 distinct sentences over 5,000 invented words,
    with names and years, drawn at random (every claim extractor and verifier has real work)."""
    text = " ".join(random.Random(seed).choices(_sentences(), k=n_chars // 60 + 1))
    return text[:n_chars]


@pytest.fixture(scope="module")
def lexical():
    return OfflineJudge(embeddings=False)


def longest_text(value) -> int:
    """The longest string inside ``value`` (a judge task's inputs)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return max((longest_text(v) for v in value), default=0)
    return 0


class Watching(OfflineJudge):
    """The offline judge, counting its tasks and noting the longest text any task was given."""

    def __init__(self):
        super().__init__(embeddings=False)
        self.tasks, self.longest = 0, 0

    async def run(self, task, inputs):  # noqa: D102
        self.tasks += 1
        self.longest = max(self.longest, longest_text(inputs))
        return await super().run(task, inputs)


@pytest.fixture(scope="module")
def examples():
    return [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]


def values(result):
    return [{k: (s.value, s.error) for k, s in r.scores.items()} for r in result]


def test_a_10mb_answer_is_refused_before_any_judge_work_and_the_others_are_scored(examples):
    """Checked by size and count, not time (it ran for many minutes before the limit; the time to
    refuse it is in benchmarks/offline_speed.py --max-record): no judge task is given a text past
    the limit, and the big record costs no task at all."""
    big = dict(examples[0], id="big", answer=varied_text(10_000_000))
    judge = Watching()
    result = rm.evaluate([examples[1], big, examples[2]], judge=judge, progress=False)
    alone_judge = Watching()
    alone = rm.evaluate([examples[1], examples[2]], judge=alone_judge, progress=False)
    assert judge.longest <= 100_000 and judge.tasks == alone_judge.tasks > 0
    by_id = {r.sample.id: r for r in result}
    assert list(by_id["big"].scores) == list(DEFAULT_METRICS + DEFAULT_RETRIEVAL_METRICS)
    assert by_id["big"].scores["mrr"].value is not None  # retrieval metrics read ids only
    for name in DEFAULT_METRICS:
        s = by_id["big"].scores[name]
        assert s.value is None and s.label is None and s.status == "error"
        assert s.error == (
            "LimitError: sample 'big': field 'answer': 10,000,000 characters; "
            "the limit is 100,000 (Limits.max_answer_chars)"
        )
        assert s.details["limit"] == {"name": "max_answer_chars", "limit": 100_000, "actual": 10_000_000}
    for r in (by_id[examples[1]["id"]], by_id[examples[2]["id"]]):
        assert all(s.error is None for s in r.scores.values())
        assert r.scores["faithfulness"].value is not None
    assert values(alone) == [values(result)[0], values(result)[2]]  # the big record changes nothing else


@pytest.mark.parametrize(
    "change, field, message",
    [
        (
            lambda r: r | {"question": "Why? " * 5_000},
            "question",
            "25,000 characters; the limit is 20,000 (Limits.max_question_chars)",
        ),
        (
            lambda r: r | {"reference": varied_text(150_000)},
            "reference",
            "150,000 characters; the limit is 100,000 (Limits.max_reference_chars)",
        ),
        (
            lambda r: r | {"contexts": r["contexts"][:2] + [{"id": "huge", "text": varied_text(2_000_000)}]},
            "contexts[2]",
            "2,000,000 characters; the limit is 100,000 (Limits.max_chunk_chars)",
        ),
        (
            lambda r: r | {"contexts": [varied_text(300, seed=i) for i in range(250)]},
            "contexts",
            "250 chunks; the limit is 200 (Limits.max_chunks)",
        ),
        (
            lambda r: r | {"contexts": [varied_text(90_000, seed=i) for i in range(5)]},
            "contexts",
            "450,000 characters in 5 chunks; the limit is 400,000 (Limits.max_context_chars)",
        ),
    ],
)
def test_every_field_has_a_limit_named_in_the_error(lexical, examples, change, field, message):
    record = change(dict(examples[0], id="over"))
    result = rm.evaluate(
        [record], metrics=["faithfulness", "context_recall", "hallucinated_specifics"], judge=lexical, progress=False
    )
    for s in result[0].scores.values():
        assert s.value is None and s.error == f"LimitError: sample 'over': field '{field}': {message}"


def test_retrieval_metrics_read_only_ids_and_are_not_limited(examples):
    record = dict(examples[0], id="big", answer=varied_text(200_000), relevant_ids=[examples[0]["contexts"][0]["id"]])
    result = rm.evaluate(
        [record], metrics=["mrr", "faithfulness"], judge=OfflineJudge(embeddings=False), progress=False
    )
    assert result[0].scores["mrr"].value == 1.0
    assert "Limits.max_answer_chars" in result[0].scores["faithfulness"].error


def test_claims_past_the_limit_are_an_error_for_the_metrics_that_use_claims(examples):
    sample = rm.Sample(
        "Who?",
        ["Ann met Bob. Bob met Cy. Cy met Di."],
        answer="Ann met Bob. Bob met Cy. Cy met Di.",
        reference="Ann met Bob.",
        id="s",
    )
    judge = ScriptedJudge(
        {
            "extract_claims": lambda inp: {"claims": [{"unit": i, "text": u} for i, u in enumerate(inp["units"])]},
        }
    )
    result = rm.evaluate(
        [sample],
        metrics=["faithfulness", "citation_accuracy", "hallucinated_specifics"],
        judge=judge,
        limits=Limits(max_claims=2),
        progress=False,
    )
    scores = result[0].scores
    msg = "LimitError: sample 's': field 'answer': 3 distinct claims; the limit is 2 (Limits.max_claims)"
    assert scores["faithfulness"].error == msg and scores["citation_accuracy"].error == msg
    assert scores["hallucinated_specifics"].error is None  # it does not use claims
    assert judge.calls["extract_claims"] == 1 and judge.calls["verify_claims"] == 0  # nothing sent past the limit


def test_limits_are_configurable_per_run(lexical, examples):
    record = dict(examples[0], id="long", answer=varied_text(150_000))
    refused = rm.evaluate([record], metrics=["hallucinated_specifics"], judge=lexical, progress=False)
    assert "Limits.max_answer_chars" in refused[0].scores["hallucinated_specifics"].error
    allowed = rm.evaluate(
        [record],
        metrics=["hallucinated_specifics"],
        judge=lexical,
        progress=False,
        limits=Limits(max_answer_chars=200_000),
    )
    assert allowed[0].scores["hallucinated_specifics"].error is None
    tight = rm.evaluate(
        [examples[0]], metrics=["faithfulness"], judge=lexical, progress=False, limits=Limits(max_chunk_chars=50)
    )
    assert "(Limits.max_chunk_chars)" in tight[0].scores["faithfulness"].error


def test_score_sample_and_ensembles_take_the_run_limits(lexical, examples):
    sample = rm.Sample.from_dict(dict(examples[0], id="x"))
    limits = Limits(max_question_chars=10)
    result = asyncio.run(score_sample(sample, [rm.metrics.Faithfulness()], lexical, limits=limits))
    assert "Limits.max_question_chars" in result.scores["faithfulness"].error
    ensemble = rm.judges.EnsembleJudge([ScriptedJudge({}, name="a"), ScriptedJudge({}, name="b")])
    result = asyncio.run(score_sample(sample, [rm.metrics.Faithfulness()], ensemble, limits=limits))
    assert "Limits.max_question_chars" in result.scores["faithfulness"].error
    assert RequestSettings.for_metrics([], limits).limits is limits
    assert RequestSettings.for_metrics([]).limits == Limits()


def test_the_defaults_change_nothing_on_the_bundled_examples(lexical, examples):
    metrics = list(rm.metrics.REGISTRY)
    default = rm.evaluate(examples, metrics=metrics, judge=lexical, progress=False)
    unlimited = rm.evaluate(examples, metrics=metrics, judge=lexical, progress=False, limits=Limits.unlimited())
    assert values(default) == values(unlimited)
    assert not any(s.error for r in default for s in r.scores.values())


def test_limit_error_names_the_record_and_the_field():
    err = LimitError("sample 'a'", "answer", "max_answer_chars", 10, 12)
    assert isinstance(err, rm.data.RecordError)
    assert str(err) == "sample 'a': field 'answer': 12 characters; the limit is 10 (Limits.max_answer_chars)"
    assert err.to_dict() == {
        "location": "sample 'a'",
        "field": "answer",
        "message": "12 characters; the limit is 10 (Limits.max_answer_chars)",
    }


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_limits_must_be_positive_integers_or_none(bad):
    with pytest.raises(ValueError, match="max_chunks"):
        Limits(max_chunks=bad)
    assert Limits(max_chunks=None).max_chunks is None


def test_reference_statements_count_against_max_claims(lexical, examples):
    record = dict(examples[0], id="r", reference=" ".join(f"Fact number {i} holds." for i in range(8)))
    result = rm.evaluate(
        [record],
        metrics=["context_recall", "entity_recall", "answer_correctness", "faithfulness"],
        judge=lexical,
        limits=Limits(max_claims=7),
        progress=False,
    )
    scores = result[0].scores
    msg = "LimitError: sample 'r': field 'reference': 8 statements; the limit is 7 (Limits.max_claims)"
    assert scores["context_recall"].error == scores["entity_recall"].error == msg
    assert scores["answer_correctness"].error == msg
    assert scores["faithfulness"].error is None and scores["faithfulness"].details["claim_count"] == 7


def test_long_texts_find_the_same_specifics_through_the_index():
    # find_specific looks a figure up in a long text through an index of its digits instead of
    # checking every sentence; it must answer exactly as the sentence-by-sentence check
    from offline_speed import make_samples

    import ragmeter.specifics as sp

    text = " ".join(c for s in make_samples(15, seed=2) for c in s["contexts"])
    specifics = [
        x
        for s in make_samples(30, seed=3)
        for x in sp.extract_specifics(s["answer"] + " " + s["contexts"][0])
        if x.kind in ("number", "money", "percent", "date")
    ]
    assert len(sp._segments(text)) > 16 and len(specifics) > 200
    found = [sp.find_specific(x, text) for x in specifics]
    expected = [any(sp._numeric_in(x, seg) for seg in sp._segments(text) if sp._may_state(x, seg)) for x in specifics]
    assert found == expected and 0 < sum(found) < len(found)


@pytest.mark.slow
def test_the_largest_record_within_the_limits_is_scored(lexical):
    # every field at its default limit (4 chunks of 100,000 characters, ~190 claims, ~190
    # reference statements), all 12 metrics, with no error. How long it takes (~4 s; ~30 s while the
    # offline judge's work grew with the square of the text) is a benchmark, not a test:
    # python benchmarks/offline_speed.py --max-record
    from offline_speed import max_record

    record = max_record(1.0, most_claims=True)
    result = rm.evaluate([record], metrics=list(rm.metrics.REGISTRY), judge=lexical, progress=False)
    assert not [s.error for s in result[0].scores.values() if s.error]
    assert all(s.value is not None or s.status == "n/a" for s in result[0].scores.values())


def test_requests_doctests():
    import doctest

    import ragmeter.metrics.requests as requests

    result = doctest.testmod(requests)
    assert result.failed == 0 and result.attempted >= 2
