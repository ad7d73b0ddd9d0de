"""Tests for ragmeter.metrics.retrieval: worked examples, trec_eval's own expected outputs,
random cross-checks against pytrec_eval, single-vs-batched agreement and input validation."""

from __future__ import annotations

import doctest
import math
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import ragmeter.metrics.relevance as relevance
import ragmeter.metrics.retrieval as retrieval
import ragmeter.metrics.retrieval_batch as retrieval_batch
from helpers import ROOT, TESTS
from ragmeter.metrics.retrieval import (
    RelevanceMatrix,
    average_precision,
    batch_average_precision,
    batch_hit_rate,
    batch_mrr,
    batch_ndcg_at_k,
    batch_precision_at_k,
    batch_r_precision,
    batch_recall_at_k,
    context_precision,
    hit_rate,
    mean_reciprocal_rank,
    mrr,
    ndcg_at_k,
    precision_at_k,
    r_precision,
    rank_by_score,
    recall_at_k,
    relevance_matrix,
)

TREC_DIR = TESTS / "data" / "trec_eval"

SINGLE = {
    "precision": precision_at_k,
    "recall": recall_at_k,
    "hit_rate": hit_rate,
    "mrr": mrr,
    "average_precision": average_precision,
    "ndcg": ndcg_at_k,
    "r_precision": r_precision,
}
BATCH = {
    "precision": batch_precision_at_k,
    "recall": batch_recall_at_k,
    "hit_rate": batch_hit_rate,
    "mrr": batch_mrr,
    "average_precision": batch_average_precision,
    "ndcg": batch_ndcg_at_k,
    "r_precision": batch_r_precision,
}

# trec_eval measure -> (metric name, k)
TREC_MEASURES = {
    "map": ("average_precision", None),
    "recip_rank": ("mrr", None),
    "P_5": ("precision", 5),
    "P_10": ("precision", 10),
    "ndcg": ("ndcg", None),
    "ndcg_cut_10": ("ndcg", 10),
    "Rprec": ("r_precision", None),
    "recall_100": ("recall", 100),
}


@pytest.mark.parametrize("module", [retrieval, relevance, retrieval_batch], ids=lambda m: m.__name__)
def test_doctests_pass(module):
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0


# ------------------------------------------------------------------ worked examples


def test_worked_example_precision_and_recall():
    retrieved = ["doc1", "doc2", "doc3", "doc4", "doc5"]
    relevant = {"doc1", "doc3", "doc7"}
    assert precision_at_k(retrieved, relevant, k=5) == pytest.approx(0.4)
    assert recall_at_k(retrieved, relevant) == pytest.approx(2 / 3)
    assert recall_at_k(retrieved, relevant, k=5) == pytest.approx(2 / 3)


def test_worked_example_mrr_over_three_queries():
    # first relevant at rank 2, nowhere, rank 3: (1/2 + 0 + 1/3) / 3 = 0.27778
    queries = [
        (["a", "b", "c"], {"b"}),
        (["a", "b", "c"], {"z"}),
        (["a", "b", "c"], {"c", "z"}),
    ]
    assert mean_reciprocal_rank(queries) == pytest.approx(0.2778, abs=1e-4)
    assert [mrr(r, rel) for r, rel in queries] == [0.5, 0.0, pytest.approx(1 / 3)]
    m = relevance_matrix([q[0] for q in queries], [q[1] for q in queries])
    assert float(batch_mrr(m).mean()) == pytest.approx(0.2778, abs=1e-4)
    assert mean_reciprocal_rank(queries, k=2) == pytest.approx(0.5 / 3)


def test_context_precision_examples():
    assert context_precision([0, 1, 1, 0, 0]) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert round(context_precision([0, 1, 1, 0, 0]), 4) == 0.5833
    assert context_precision([True, False, True]) == pytest.approx((1 + 2 / 3) / 2)
    assert context_precision(np.array([1, 1])) == 1.0
    assert context_precision([np.True_, np.False_, np.int64(1)]) == pytest.approx((1 + 2 / 3) / 2)
    assert context_precision([0, 0, 0]) == 0.0
    assert context_precision([False]) == 0.0


@pytest.mark.parametrize(
    "bad, exc",
    [
        ([], ValueError),
        ([0, 2], ValueError),
        ([1, 0.5], ValueError),
        ([1, None], ValueError),
        (["1"], ValueError),
        ("0110", TypeError),
        ({1, 0}, TypeError),
        (None, TypeError),
    ],
)
def test_context_precision_rejects_bad_input(bad, exc):
    with pytest.raises(exc):
        context_precision(bad)


# ------------------------------------------------------------------ semantics


def test_precision_divides_by_k_even_when_fewer_retrieved():
    assert precision_at_k(["a", "b"], {"a"}, k=10) == 0.1
    assert precision_at_k(["a", "b"], {"a"}) == 0.5


def test_duplicates_count_as_not_relevant():
    ranking = ["a", "a", "b"]
    rel = {"a"}
    assert precision_at_k(ranking, rel) == pytest.approx(1 / 3)
    assert precision_at_k(ranking, rel, k=2) == 0.5
    assert recall_at_k(ranking, rel) == 1.0
    assert average_precision(ranking, rel) == 1.0
    assert ndcg_at_k(ranking, rel) == 1.0
    assert ndcg_at_k(["b", "a", "a"], {"a": 2}) == pytest.approx(1 / math.log2(3))
    assert mrr(["b", "b", "a"], {"b"}) == 1.0
    assert mrr(["x", "b", "b"], {"b"}) == 0.5


def test_graded_relevance_levels():
    ranking = ["g0", "g2", "neg", "g1", "g3"]
    grades = {"g0": 0, "g1": 1, "g2": 2, "g3": 3, "neg": -1, "unretrieved": 1}
    # relevant = grade >= 1: g2 (rank 2), g1 (rank 4), g3 (rank 5), unretrieved
    assert precision_at_k(ranking, grades) == pytest.approx(3 / 5)
    assert recall_at_k(ranking, grades) == pytest.approx(3 / 4)
    assert mrr(ranking, grades) == 0.5
    assert average_precision(ranking, grades) == pytest.approx((1 / 2 + 2 / 4 + 3 / 5) / 4)
    assert r_precision(ranking, grades) == pytest.approx(2 / 4)
    # NDCG: gain = grade (negative -> 0); ideal = 3, 2, 1, 1
    dcg = 2 / math.log2(3) + 1 / math.log2(5) + 3 / math.log2(6)
    idcg = 3 + 2 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)
    assert ndcg_at_k(ranking, grades) == pytest.approx(dcg / idcg)
    # cut at 2: ideal cut at 2 as well (ndcg_cut_2)
    assert ndcg_at_k(ranking, grades, k=2) == pytest.approx((2 / math.log2(3)) / (3 + 2 / math.log2(3)))


def test_binary_collections_are_grade_one():
    ranking = ["a", "x", "b"]
    for rel in ({"a", "b"}, ["a", "b", "a"], ("b", "a"), frozenset("ab"), {"a": 1, "b": 1}, np.array(["a", "b"])):
        assert ndcg_at_k(ranking, rel) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
        assert average_precision(ranking, rel) == pytest.approx((1 + 2 / 3) / 2)


def test_r_precision_with_k_cuts_ranking_first():
    ranking = ["a", "b", "x", "c"]
    rel = {"a", "b", "c"}
    assert r_precision(ranking, rel) == pytest.approx(2 / 3)
    assert r_precision(ranking, rel, k=1) == pytest.approx(1 / 3)


@pytest.mark.parametrize("k", [None, 1, 3, 100])
def test_no_nan_on_empty_inputs(k):
    for name, f in SINGLE.items():
        for ranking, rel in (([], set()), ([], {"a"}), (["a"], set()), (["a"], {"a": 0}), ([], {})):
            value = f(ranking, rel, k=k)
            assert value == 0.0, (name, ranking, rel, k)
            assert isinstance(value, float)


def test_numpy_inputs_and_int_ids():
    assert precision_at_k(np.array([3, 1, 2]), {1, 7}, k=np.int64(2)) == 0.5
    assert recall_at_k((3, 1, 2), [1, 7]) == 0.5


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "k, exc",
    [
        (0, ValueError),
        (-1, ValueError),
        (1.5, TypeError),
        (2.0, TypeError),
        (True, TypeError),
        ("5", TypeError),
    ],
)
def test_k_validation(k, exc):
    for f in SINGLE.values():
        with pytest.raises(exc, match="k must be a positive int"):
            f(["a"], {"a"}, k=k)
    m = relevance_matrix([["a"]], [{"a"}])
    for f in BATCH.values():
        with pytest.raises(exc, match="k must be a positive int"):
            f(m, k=k)
    with pytest.raises(exc):
        mean_reciprocal_rank([(["a"], {"a"})], k=k)


@pytest.mark.parametrize(
    "retrieved, exc, msg",
    [
        ("doc1", TypeError, "not a single str"),
        ({"a", "b"}, TypeError, "unordered"),
        ({"a": 1.0}, TypeError, "unordered"),
        (None, TypeError, "ordered sequence"),
        (["a", None], ValueError, r"retrieved_ids\[1\] is None"),
        (["a", ["b"]], TypeError, r"retrieved_ids\[1\] is an unhashable list"),
        (np.zeros((2, 2)), ValueError, "1-dimensional"),
    ],
)
def test_retrieved_ids_validation(retrieved, exc, msg):
    with pytest.raises(exc, match=msg):
        precision_at_k(retrieved, {"a"})


@pytest.mark.parametrize(
    "relevant, exc, msg",
    [
        ("doc1", TypeError, "not a single str"),
        ({"a": float("nan")}, ValueError, r"relevant\['a'\] is nan"),
        ({"a": float("inf")}, ValueError, r"relevant\['a'\] is inf"),
        ({"a": None}, ValueError, r"relevant\['a'\] is None"),
        ({"a": "2"}, TypeError, r"relevant\['a'\] must be a number"),
        ({None: 1}, ValueError, "is None"),
        ({"a", None}, ValueError, "is None"),
        (5, TypeError, "collection of relevant ids"),
    ],
)
def test_relevant_validation(relevant, exc, msg):
    with pytest.raises(exc, match=msg):
        recall_at_k(["a"], relevant)


def test_mean_reciprocal_rank_validation():
    with pytest.raises(ValueError, match="empty"):
        mean_reciprocal_rank([])
    with pytest.raises(TypeError, match="pair"):
        mean_reciprocal_rank([(["a"], {"a"}, 3)])
    with pytest.raises(TypeError, match="iterable"):
        mean_reciprocal_rank(None)


def test_rank_by_score_breaks_ties_by_descending_id():
    assert rank_by_score({"d1": 1.0, "d10": 1.0, "d9": 1.0, "d2": 2.0}) == ["d2", "d9", "d10", "d1"]
    assert rank_by_score({}) == []
    with pytest.raises(ValueError, match=r"scores\['a'\] is nan"):
        rank_by_score({"a": float("nan")})
    with pytest.raises(ValueError, match=r"scores\['a'\] is None"):
        rank_by_score({"a": None})
    with pytest.raises(TypeError, match="must be a number"):
        rank_by_score({"a": "1"})
    with pytest.raises(TypeError, match="dict"):
        rank_by_score(["a", "b"])
    with pytest.raises(TypeError, match="comparable"):
        rank_by_score({"a": 1.0, 2: 1.0})


def test_relevance_matrix_layout_and_validation():
    m = relevance_matrix(
        {"q1": {"a": 0.5, "b": 0.9, "c": 0.1}, "q2": ["x", "x", "y"]},
        {"q1": {"b": 2, "c": 1}, "q2": {"x"}, "unused": {"z"}},
    )
    assert isinstance(m, RelevanceMatrix)
    assert m.query_ids == ("q1", "q2") and len(m) == 2 and m.depth == 3
    assert m.grades.tolist() == [[2.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    assert m.n_retrieved.tolist() == [3, 3]
    assert m.n_relevant.tolist() == [2, 1]
    assert m.ideal.tolist() == [[2.0, 1.0], [1.0, 0.0]]
    with pytest.raises(ValueError):
        m.grades[0, 0] = 5.0
    assert repr(m) == "RelevanceMatrix(n_queries=2, depth=3)"

    with pytest.raises(ValueError, match="no judgements for query 'q2'"):
        relevance_matrix({"q1": ["a"], "q2": ["b"]}, {"q1": {"a"}})
    with pytest.raises(ValueError, match="2 rankings but qrels has 1"):
        relevance_matrix([["a"], ["b"]], [{"a"}])
    with pytest.raises(TypeError, match="qrels must be a dict"):
        relevance_matrix({"q1": ["a"]}, [{"a"}])
    with pytest.raises(TypeError, match="qrels must be a sequence"):
        relevance_matrix([["a"]], {"q1": {"a"}})
    with pytest.raises(TypeError, match="runs must be"):
        relevance_matrix("abc", ["a"])
    with pytest.raises(ValueError, match="empty"):
        relevance_matrix([], [])
    with pytest.raises(ValueError, match=r"runs\[1\]\[0\] is None"):
        relevance_matrix([["a"], [None]], [{"a"}, {"a"}])
    with pytest.raises(ValueError, match=r"qrels\['q'\]\['a'\] is nan"):
        relevance_matrix({"q": ["a"]}, {"q": {"a": float("nan")}})
    with pytest.raises(ValueError, match="depth must be a positive int"):
        relevance_matrix([["a"]], [{"a"}], depth=0)
    with pytest.raises(TypeError, match="depth must be a positive int"):
        relevance_matrix([["a"]], [{"a"}], depth=2.0)
    for f in BATCH.values():
        with pytest.raises(TypeError, match="RelevanceMatrix"):
            f([["a"]])


def test_relevance_matrix_all_empty_runs():
    m = relevance_matrix([[], []], [{"a"}, set()])
    assert m.depth == 1
    for f in BATCH.values():
        for k in (None, 1, 5):
            assert f(m, k=k).tolist() == [0.0, 0.0]


def test_truncated_depth():
    rng = random.Random(7)
    runs = [[f"d{rng.randrange(40)}" for _ in range(rng.randrange(0, 30))] for _ in range(20)]
    qrels = [{f"d{i}": rng.randrange(-1, 4) for i in rng.sample(range(40), 15)} for _ in range(20)]
    full = relevance_matrix(runs, qrels)
    short = relevance_matrix(runs, qrels, depth=10)
    assert short.depth == 10
    for name, f in BATCH.items():
        if name == "r_precision":
            continue
        for k in (1, 5, 10):
            assert np.array_equal(f(short, k=k), f(full, k=k)), (name, k)
        with pytest.raises(ValueError, match="depth=10"):
            f(short, k=11)
        with pytest.raises(ValueError, match="depth=10"):
            f(short)
    # R-precision needs the top R ranks; R is at most 15 here, so depth 15 suffices
    assert np.array_equal(batch_r_precision(relevance_matrix(runs, qrels, depth=15)), batch_r_precision(full))
    with pytest.raises(ValueError, match="r_precision needs the top"):
        batch_r_precision(relevance_matrix([["a", "b", "c"]], [{"a", "b", "c"}], depth=2))
    # a depth larger than every ranking is just padding
    assert np.array_equal(batch_ndcg_at_k(relevance_matrix(runs, qrels, depth=100)), batch_ndcg_at_k(full))


# ------------------------------------------------------------------ trec_eval expected outputs


def _read_qrels(path: Path) -> dict:
    qrels: dict = defaultdict(dict)
    for line in path.read_text().splitlines():
        if line.strip():
            qid, _, docno, grade = line.split()
            qrels[qid][docno] = int(grade)
    return dict(qrels)


def _read_run(path: Path) -> dict:
    run: dict = defaultdict(dict)
    for line in path.read_text().splitlines():
        if line.strip():
            qid, _, docno, _rank, score, _tag = line.split()[:6]
            run[qid][docno] = float(score)
    return dict(run)


def _read_expected(path: Path) -> dict:
    expected: dict = defaultdict(dict)
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in TREC_MEASURES and parts[1] != "all":
            expected[parts[1]][parts[0]] = float(parts[2])
    return dict(expected)


QRELS = _read_qrels(TREC_DIR / "qrels.test")
RUN = _read_run(TREC_DIR / "results.test")
EXPECTED = _read_expected(TREC_DIR / "out.test.aq")
CASES = [(q, meas) for q in sorted(EXPECTED) for meas in sorted(EXPECTED[q])]


def test_fixture_has_every_measure_for_every_query():
    assert sorted(EXPECTED) == ["301", "302", "303"]
    assert all(set(EXPECTED[q]) == set(TREC_MEASURES) for q in EXPECTED)


@pytest.mark.parametrize("qid, measure", CASES)
def test_matches_trec_eval_expected_output(qid, measure):
    name, k = TREC_MEASURES[measure]
    ranking = rank_by_score(RUN[qid])
    single = SINGLE[name](ranking, QRELS[qid], k=k)
    # trec_eval prints 4 decimals, so its printed value is within 5e-5 of the exact one
    assert abs(single - EXPECTED[qid][measure]) <= 5e-5 + 1e-12


def test_matches_trec_eval_expected_output_batched():
    qids = sorted(EXPECTED)
    m = relevance_matrix({q: RUN[q] for q in qids}, QRELS)
    for measure, (name, k) in TREC_MEASURES.items():
        got = BATCH[name](m, k=k)
        want = np.array([EXPECTED[q][measure] for q in qids])
        assert np.all(np.abs(got - want) <= 5e-5 + 1e-12), measure


def test_fixture_matches_pytrec_eval_exactly():
    # The ties in results.test move map/ndcg of query 301 by ~8e-6 only, below the 4
    # printed decimals; full-precision pytrec_eval pins the descending-docno tie-break.
    pytrec_eval = pytest.importorskip("pytrec_eval")
    measures = set(TREC_MEASURES)
    ref = pytrec_eval.RelevanceEvaluator(QRELS, measures).evaluate(RUN)
    for qid in sorted(RUN):
        ranking = rank_by_score(RUN[qid])
        for measure, (name, k) in TREC_MEASURES.items():
            assert SINGLE[name](ranking, QRELS[qid], k=k) == pytest.approx(ref[qid][measure], abs=1e-9), (qid, measure)
    ascending = sorted(RUN["301"], key=lambda d: (-RUN["301"][d], d))
    assert average_precision(ascending, QRELS["301"]) != pytest.approx(ref["301"]["map"], abs=1e-9)


# ------------------------------------------------------------------ random cross-checks


def _random_collection(seed: int, n_queries: int = 50):
    """Random graded qrels (grades -1..3, some queries without relevant docs) and runs whose
    scores take few distinct values, so ties are frequent."""
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(120)]  # unpadded ids: string order != numeric order
    qrels, runs = {}, {}
    for q in range(n_queries):
        qid = f"q{q}"
        judged = rng.sample(pool, rng.randrange(1, 40))
        if q % 10 == 3:
            qrels[qid] = {d: rng.choice([-1, 0]) for d in judged}
        else:
            qrels[qid] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for d in judged}
        n_ret = 0 if q == 7 else rng.randrange(1, 60)
        runs[qid] = {d: rng.randrange(6) / 2 for d in rng.sample(pool, n_ret)}
    return qrels, runs


PYTREC_FAMILIES = {
    "map": "average_precision",
    "map_cut": "average_precision",
    "recip_rank": "mrr",
    "P": "precision",
    "recall": "recall",
    "ndcg": "ndcg",
    "ndcg_cut": "ndcg",
    "Rprec": "r_precision",
    "success": "hit_rate",
}


def _pytrec_name(measure: str) -> tuple[str, int | None]:
    family, _, cut = measure.rpartition("_")
    if family in PYTREC_FAMILIES and cut.isdigit():
        return PYTREC_FAMILIES[family], int(cut)
    return PYTREC_FAMILIES[measure], None


@pytest.mark.parametrize("seed", [0, 1])
def test_random_runs_match_pytrec_eval(seed):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, runs = _random_collection(seed)
    ref = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC_FAMILIES)).evaluate(runs)
    qids = sorted(runs)
    m = relevance_matrix({q: runs[q] for q in qids}, qrels)
    measures = sorted(ref[qids[0]])
    assert {"map", "recip_rank", "P_5", "P_10", "ndcg", "ndcg_cut_10", "Rprec", "recall_100"} <= set(measures)
    for measure in measures:
        name, k = _pytrec_name(measure)
        want = np.array([ref[q][measure] for q in qids])
        np.testing.assert_allclose(BATCH[name](m, k=k), want, rtol=0, atol=1e-9, err_msg=measure)
        single = np.array([SINGLE[name](rank_by_score(runs[q]), qrels[q], k=k) for q in qids])
        np.testing.assert_allclose(single, want, rtol=0, atol=1e-9, err_msg=measure)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_single_and_batched_agree_exactly(seed):
    rng = random.Random(seed)
    runs, qrels = [], []
    for q in range(60):
        # duplicates allowed in rankings, float and negative grades, binary sets, empty lists
        runs.append([rng.randrange(50) for _ in range(rng.randrange(0, 40))])
        if q % 3 == 0:
            qrels.append({rng.randrange(50) for _ in range(rng.randrange(0, 12))})
        else:
            qrels.append(
                {rng.randrange(50): rng.choice([-2, 0, 0.5, 1, 1.5, 2, 3, 4]) for _ in range(rng.randrange(0, 25))}
            )
    m = relevance_matrix(runs, qrels)
    for name, f in SINGLE.items():
        for k in (None, 1, 3, 10, 25, 100):
            single = np.array([f(r, rel, k=k) for r, rel in zip(runs, qrels)])
            batched = BATCH[name](m, k=k)
            assert batched.shape == (60,) and batched.dtype == np.float64
            assert np.array_equal(single, batched), (name, k)
            assert np.all((batched >= 0) & (batched <= 1)), (name, k)


@pytest.mark.slow  # importing llama_index takes ~2 s
def test_llamaindex_difference_examples():
    """The numbers quoted in the module docstring's LlamaIndex section."""
    li = pytest.importorskip("llama_index.core.evaluation.retrieval.metrics")
    retrieved, expected = ["a", "b"], ["a", "b", "c"]
    assert li.NDCG().compute(expected_ids=expected, retrieved_ids=retrieved).score == pytest.approx(0.7654, abs=1e-4)
    assert ndcg_at_k(retrieved, set(expected), k=2) == 1.0
    assert ndcg_at_k(retrieved, set(expected)) == pytest.approx(0.7654, abs=1e-4)
    assert li.AveragePrecision().compute(expected_ids=["a"], retrieved_ids=["a", "a"]).score == 2.0
    assert average_precision(["a", "a"], {"a"}) == 1.0
    assert li.Precision().compute(expected_ids=["a"], retrieved_ids=["a", "a", "x"]).score == 0.5
    assert precision_at_k(["a", "a", "x"], {"a"}) == pytest.approx(1 / 3)
    # without duplicates, LlamaIndex's NDCG is trec_eval's uncut ndcg and its AP is map
    rng = random.Random(3)
    for _ in range(50):
        retrieved = rng.sample(range(30), rng.randrange(1, 15))
        expected = rng.sample(range(30), rng.randrange(1, 10))
        assert li.NDCG().compute(expected_ids=expected, retrieved_ids=retrieved).score == pytest.approx(
            ndcg_at_k(retrieved, expected), abs=1e-12
        )
        assert li.AveragePrecision().compute(expected_ids=expected, retrieved_ids=retrieved).score == pytest.approx(
            average_precision(retrieved, expected), abs=1e-12
        )


# ------------------------------------------------------------------ bulk (numpy) path of relevance_matrix


def _per_query(runs, qrels):
    """The same inputs wrapped so relevance_matrix takes its per-query path (only plain dicts go bulk)."""
    from types import MappingProxyType

    return (
        [MappingProxyType(r) if isinstance(r, dict) else r for r in runs],
        [MappingProxyType(q) if isinstance(q, dict) else sorted(q) for q in qrels],
    )


def _same_matrix(a: RelevanceMatrix, b: RelevanceMatrix) -> None:
    assert a.query_ids == b.query_ids
    for field in ("grades", "n_retrieved", "n_relevant", "ideal"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y), field
        assert not x.flags.writeable


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("depth", [None, 3, 80])
def test_bulk_path_equals_per_query_path(seed, depth):
    rng = random.Random(seed)
    ints = seed % 2 == 1
    ident = (lambda i: i) if ints else (lambda i: f"d{i}")
    runs, qrels = [], []
    for _q in range(40):
        docs = [ident(rng.randrange(60)) for _ in range(rng.randrange(0, 50))]
        if seed < 3:  # scored runs with many ties (few distinct scores, negative zero too)
            runs.append({d: rng.choice([-0.0, 0.0, 0.5, 1, 2.5, -3]) for d in docs})
        else:  # ranked lists with duplicates
            runs.append(docs)
        judged = {ident(rng.randrange(60)) for _ in range(rng.randrange(0, 20))}
        qrels.append(judged if seed % 3 == 0 else {d: rng.choice([-1, 0, 1, 2, 3.5, True]) for d in judged})
    bulk = relevance.relevance_matrix(runs, qrels, depth=depth)
    assert relevance._bulk_matrix(bulk.query_ids, runs, qrels, depth) is not None
    slow_runs, slow_qrels = _per_query(runs, qrels)
    assert relevance._bulk_matrix(bulk.query_ids, slow_runs, slow_qrels, depth) is None
    _same_matrix(bulk, relevance.relevance_matrix(slow_runs, slow_qrels, depth=depth))


def test_bulk_path_hands_bad_values_to_the_per_query_path():
    # every invalid value is caught in bulk and named by the per-query path
    cases = [
        (({"q": {"a": 1.0, "b": float("nan")}}, {"q": {"a"}}), ValueError, r"scores\['b'\] is nan"),
        (({"q": {"a": 1.0, "b": True}}, {"q": {"a"}}), TypeError, r"scores\['b'\] must be a number"),
        (({"q": {"a": "1"}}, {"q": {"a"}}), TypeError, "must be a number"),
        (({"q": {"a": 10**400}}, {"q": {"a"}}), OverflowError, "too large"),
        (({"q": ["a"]}, {"q": {"a": float("inf")}}), ValueError, r"qrels\['q'\]\['a'\] is inf"),
        (({"q": ["a", None]}, {"q": {"a"}}), ValueError, r"runs\['q'\]\[1\] is None"),
        (({"q": {"a": 1.0, 2: 1.0}}, {"q": {"a"}}), TypeError, "comparable"),
    ]
    for (runs, qrels), exc, msg in cases:
        with pytest.raises(exc, match=msg):
            relevance_matrix(runs, qrels)
    with pytest.raises(TypeError, match="unhashable ndarray"):
        relevance_matrix([["a", np.array([1, 2])]], [{"a"}])
    # str and int ids that tie in different queries only: fine, each query is sorted alone
    m = relevance_matrix({"q1": {"a": 1.0, "b": 1.0}, "q2": {1: 1.0, 2: 1.0}}, {"q1": {"a"}, "q2": {1}})
    assert m.grades.tolist() == [[0.0, 1.0], [0.0, 1.0]]


def test_ir_benchmark_collection_matches_pytrec_eval():
    """benchmarks/ir_speed.py on a small collection: every value equals pytrec_eval's exactly."""
    pytest.importorskip("pytrec_eval")
    import importlib.util

    spec = importlib.util.spec_from_file_location("ir_speed", ROOT / "benchmarks" / "ir_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run, qrels = bench.make_collection(300, 100, seed=5)
    ours = bench.time_ragmeter(run, qrels)[-1]
    theirs = bench.time_pytrec_eval(run, qrels)[-1]
    for name in bench.MEASURES:
        np.testing.assert_allclose(ours[name], theirs[name], rtol=0, atol=1e-12, err_msg=name)
