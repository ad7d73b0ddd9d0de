"""String metrics (exact match, token F1, ROUGE-L, BLEU): worked examples by hand, the reference
libraries (sacreBLEU, rouge-score) where installed, and their use as registered metrics."""

from __future__ import annotations

import doctest
import math
import random

import pytest

import ragmeter as rm
from ragmeter.metrics import STRING_METRICS, get_metric, metrics_help, strings
from ragmeter.metrics.strings import (
    bleu,
    exact_match,
    normalize_answer,
    rouge_l,
    token_f1,
)

CAT = ("The cat sat on the mat.", "A cat was sitting on the mat.")


def test_doctests_pass():
    result = doctest.testmod(strings)
    assert result.attempted > 0 and result.failed == 0


def test_worked_example_by_hand():
    # normalised: "cat sat on mat" vs "cat was sitting on mat": 3 shared of 4 and 5
    assert normalize_answer(CAT[0]) == "cat sat on mat"
    assert token_f1(*CAT) == pytest.approx(2 * (3 / 4) * (3 / 5) / (3 / 4 + 3 / 5), abs=1e-15)
    assert exact_match(*CAT) == 0.0
    # ROUGE-L: LCS "cat on the mat" = 4 of 6 and 7 tokens -> 8/13
    assert rouge_l(*CAT) == pytest.approx(8 / 13, abs=1e-15)
    # BLEU: 13a tokens: 7 in the answer (the . counts), 8 in the reference; matches
    # 1-grams 5/7 (cat on the mat .), 2-grams 3/6 (on the, the mat, mat .), 3-grams 2/5, 4-grams 1/4;
    # BP = exp(1 - 8/7)
    expected = math.exp(1 - 8 / 7) * math.exp(
        (math.log(5 / 7) + math.log(3 / 6) + math.log(2 / 5) + math.log(1 / 4)) / 4
    )
    assert bleu(*CAT) == pytest.approx(expected, abs=1e-12)


def test_edge_cases():
    assert exact_match("The Eiffel Tower!", "eiffel  tower") == 1.0
    assert token_f1("the", "a") == 1.0  # both normalise to nothing (SQuAD: F1 = their equality)
    assert token_f1("the", "Paris") == 0.0
    assert token_f1("Paris", "London") == 0.0
    assert rouge_l("", "anything") == 0.0 and rouge_l("x", "y") == 0.0
    assert bleu("", "anything") == 0.0
    assert bleu("completely different words", "nothing shared here") == 0.0  # no n-gram matches
    assert bleu(*[CAT[1]] * 2) == pytest.approx(1.0)
    # wording, not truth: a negation that reuses the words scores high
    assert token_f1("The capital of France is not Paris.", "The capital of France is Paris.") > 0.9
    assert rouge_l("Paris è la capitale", "Parigi è la capitale") == pytest.approx(0.75)  # non-ASCII letters kept


def _lcs_dp(a, b):
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b):
            cur = row[j + 1]
            row[j + 1] = prev + 1 if x == y else max(row[j + 1], row[j])
            prev = cur
    return row[-1]


def test_bit_parallel_lcs_equals_dynamic_programming():
    rng = random.Random(1)
    for _ in range(500):
        a = [rng.choice("abcde") for _ in range(rng.randrange(0, 30))]
        b = [rng.choice("abcde") for _ in range(rng.randrange(0, 30))]
        assert strings._lcs_length(a, b) == _lcs_dp(a, b)


def _random_pairs(n: int, seed: int = 0):
    rng = random.Random(seed)
    words = "the a cat dog sat on mat , . ; 1 2 3-4 3.5 Paris is not was & (x) don't".split()
    pairs = [
        CAT,
        ("Paris, 1889-1890: it's 3.5 m tall & 'wide'.", "Paris in 1889 - it is 3.5m tall"),
        ("a", "a b c d e"),
        ("x y", "x y"),
    ]
    for _ in range(n):
        pairs.append(
            (
                " ".join(rng.choice(words) for _ in range(rng.randrange(0, 20))),
                " ".join(rng.choice(words) for _ in range(rng.randrange(1, 20))),
            )
        )
    return pairs


def test_bleu_equals_sacrebleu_sentence_bleu():
    sacrebleu = pytest.importorskip("sacrebleu")
    for answer, reference in _random_pairs(1000):
        want = sacrebleu.sentence_bleu(answer, [reference]).score / 100
        assert bleu(answer, reference) == pytest.approx(want, abs=1e-12), (answer, reference)


def test_rouge_l_equals_rouge_score():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    for answer, reference in _random_pairs(1000):
        want = scorer.score(reference, answer)["rougeL"].fmeasure
        assert rouge_l(answer, reference) == pytest.approx(want, abs=1e-12), (answer, reference)


def test_registered_and_run_without_a_judge():
    assert set(STRING_METRICS) == {"exact_match", "token_f1", "rouge_l", "bleu"}
    assert all(n in rm.metrics.METRIC_NAMES for n in STRING_METRICS)
    assert "exact_match, token_f1, rouge_l, bleu" in metrics_help()
    for name in STRING_METRICS:
        metric = get_metric(name)
        assert metric.name == name and not metric.uses_judge
        assert "wording, not truth" in " ".join(type(metric).__doc__.split())
    answered = rm.Sample("Q?", ["ctx"], answer=CAT[0], reference=CAT[1], id="a")
    no_reference = rm.Sample("Q?", ["ctx"], answer=CAT[0], id="b")
    result = rm.evaluate([answered, no_reference], metrics=list(STRING_METRICS), progress=False)
    scores = result[0].scores
    assert scores["token_f1"].value == pytest.approx(2 / 3) and scores["token_f1"].label == "pass"
    assert scores["rouge_l"].value == pytest.approx(8 / 13)
    assert scores["exact_match"].value == 0.0 and scores["exact_match"].label == "fail"
    assert all(s.judge == "code" for s in scores.values())
    assert all(s.value is None and "no reference" in s.explanation for s in result[1].scores.values())
