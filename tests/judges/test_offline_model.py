"""The offline judge's fitted combinations (issue 35): the model's arithmetic, the shipped
coefficients, how the judge applies them, and the fit script's leave-one-source-out machinery on
synthetic data (the real data lives outside the tests)."""

import asyncio
import json
import math
import sys

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from helpers import ROOT
from ragmeter import Sample, evaluate
from ragmeter.judges.offline import OfflineJudge
from ragmeter.judges.offline.model import QUANTITIES, SIGNALS, Combination, load_combinations


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z))


def test_a_score_is_the_probability_rescaled_to_the_models_own_range():
    m = Combination("claim_support", {"overlap": 2.0, "supported": 1.0, "contradicted": -3.0}, -1.0, (1.0, 0.0))
    low, high = sigmoid(-1.0), sigmoid(-1.0 + 3.0)  # every signal at 0 / at its favourable end
    x = {"overlap": 0.5, "supported": 1.0}
    p = sigmoid(-1.0 + 2.0 * 0.5 + 1.0)
    assert m.probability(x) == pytest.approx(p)
    assert m.score(x) == round((p - low) / (high - low), 4)
    assert m.score({"overlap": 1.0, "supported": 1.0}) == 1.0
    assert m.score({}) == 0.0  # nothing found
    assert m.score({"overlap": 1.0, "contradicted": 1.0}) == 0.0  # sigmoid(-2) < sigmoid(-1): clipped
    p = sigmoid(-1.0 + 2.0 - 3.0 + 1.0)  # supported words and a contradiction: partly supported
    assert m.score({"overlap": 1.0, "supported": 1.0, "contradicted": 1.0}) == round((p - low) / (high - low), 4)
    # a missing signal counts 0; the order of the scores is the order of the probabilities
    xs = [{"overlap": v} for v in (0.1, 0.4, 0.9)]
    assert [m.score(x) for x in xs] == sorted(m.score(x) for x in xs)


def test_confidence_maps_a_mean_score_back_to_the_probability_then_platt():
    a, c = 2.5, -0.4
    m = Combination("claim_support", {"overlap": 3.0}, -1.5, (a, c))
    low, high = sigmoid(-1.5), sigmoid(1.5)
    for value in (0.0, 0.3, 0.8, 1.0):
        p = low + value * (high - low)
        assert m.confidence(value) == round(sigmoid(a * math.log(p / (1 - p)) + c), 4)
    assert m.confidence(0.2) < m.confidence(0.6) < m.confidence(1.0)


def test_routing_cut_interpolates_the_stored_quantiles():
    m = Combination(
        "claim_support", {"overlap": 1.0}, 0.0, (1.0, 0.0), routing=tuple(0.5 + 0.025 * k for k in range(21))
    )
    assert m.routing_cut(0.0) == 0.5 and m.routing_cut(1.0) == 1.0
    assert m.routing_cut(0.3) == pytest.approx(0.65)
    assert m.routing_cut(0.325) == pytest.approx(0.6625)


def test_a_weight_against_its_signals_direction_or_an_unknown_signal_is_refused():
    with pytest.raises(ValueError, match="'contradicted' must have sign -1"):
        Combination("claim_support", {"contradicted": 0.5}, 0.0)
    with pytest.raises(ValueError, match="unknown signals"):
        Combination("claim_support", {"made_up": 1.0}, 0.0)


def test_a_coefficients_file_with_a_missing_part_names_the_file_and_the_part(tmp_path):
    good = {"weights": {"overlap": 1.0}, "intercept": 0.0}
    block = {
        "claim_support": {**good, "calibration": [1, 0], "routing": [0.5, 1.0]},
        "reference_coverage": good,
        "relevance": good,
    }
    path = tmp_path / "fit.json"
    path.write_text(json.dumps({"lexical": block}))
    assert load_combinations("lexical", path).claim_support.routing == (0.5, 1.0)
    with pytest.raises(ValueError, match=r"fit.json: no coefficients for the 'embedding' path"):
        load_combinations("embedding", path)
    del block["relevance"]
    path.write_text(json.dumps({"lexical": block}))
    with pytest.raises(ValueError, match=r"fit.json: the 'lexical' path has no 'relevance' combination"):
        load_combinations("lexical", path)


@pytest.mark.parametrize("path", ["lexical", "embedding"])
def test_the_shipped_combinations_read_known_signals_in_their_directions(path):
    combos = load_combinations(path)
    for q in QUANTITIES:
        m = combos.get(q)
        assert "overlap" in m.weights  # word overlap, the baseline, is always one of the signals
        assert all(SIGNALS[k] * w >= 0 for k, w in m.weights.items())
    routing = combos.claim_support.routing
    assert len(routing) == 21 and list(routing) == sorted(routing) and 0.5 <= routing[0] and routing[-1] <= 1.0


def test_the_judge_scores_claims_with_the_fitted_combination_and_reports_its_signals():
    judge = OfflineJudge(embeddings=False)
    model = judge.combinations.claim_support
    raw = asyncio.run(
        judge.signals(
            "verify_claims",
            {
                "claims": ["Revenue rose 7% in 2021.", "The sky is green."],
                "chunks": ["In 2021 revenue rose 5%. The sky is blue."],
            },
        )
    )
    out = asyncio.run(
        judge.run(
            "verify_claims",
            {
                "claims": ["Revenue rose 7% in 2021.", "The sky is green."],
                "chunks": ["In 2021 revenue rose 5%. The sky is blue."],
            },
        )
    ).output
    for v, r in zip(out["verdicts"], raw["verdicts"]):
        assert v["support"] == model.score(r["features"])
        assert v["confidence"] == model.confidence(v["support"])
        assert set(SIGNALS) >= set(r["features"]) >= {"overlap", "supported", "contradicted", "specifics"}
    assert out["verdicts"][0]["verdict"] == "contradicted" and raw["verdicts"][0]["features"]["specifics"] == 1.0
    assert "features" not in out["verdicts"][0]  # validated answers keep the task's fields (and the score)


def test_faithfulness_is_the_mean_claim_score_and_its_confidence_the_platt_map():
    judge = OfflineJudge(embeddings=False)
    sample = Sample(
        question="q",
        contexts=["The museum opens at 9 am. Entry costs 12 euros."],
        answer="The museum opens at 9 am. Entry costs 15 euros.",
    )
    score = evaluate([sample], metrics=["faithfulness"], judge=judge, progress=False)[0].scores["faithfulness"]
    supports = [c["support"] for c in score.details["claims"]]
    assert score.value == pytest.approx(sum(supports) / len(supports))
    assert score.details["confidence"] == judge.confidence(score.value)
    assert supports[0] == 1.0 and supports[1] < 0.5  # the invented price scores low


def test_coefficients_from_a_file_change_the_scores(tmp_path):
    shipped = load_combinations("lexical")
    data = {"lexical": {q: shipped.get(q).to_dict() for q in QUANTITIES}}
    data["lexical"]["claim_support"]["weights"] = {"overlap": 5.0}  # word overlap alone
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(data))
    judge = OfflineJudge(embeddings=False, combinations=path)
    out = asyncio.run(
        judge.run("verify_claims", {"claims": ["Revenue rose 7% in 2021."], "chunks": ["In 2021 revenue rose 5%."]})
    ).output
    # "7%" is the only word the chunk lacks ("revenue", "rose", "7", "2021": 3 of 4 found)
    m = judge.combinations.claim_support
    assert out["verdicts"][0]["support"] == m.score({"overlap": 0.75})


# --------------------------------------------------------------------------- the fit script


@pytest.fixture(scope="module")
def fit():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import fit_offline
    finally:
        sys.path.pop(0)
    return fit_offline


def synthetic(n_sources=4, n=150, seed=0):
    """Answers of 1-3 claims whose labels follow a known model: an answer is faithful when every
    claim is supported; 'supported' and 'overlap' carry the signal, 'window' is noise."""
    rng = np.random.default_rng(seed)
    items = []
    for s in range(n_sources):
        for i in range(n):
            claims = []
            for _ in range(rng.integers(1, 4)):
                sup = float(rng.random() < 0.7)
                claims.append(
                    {
                        "overlap": float(np.clip(0.5 + 0.4 * sup + rng.normal(0, 0.2), 0, 1)),
                        "supported": sup,
                        "window": float(rng.random()),
                    }
                )
            y = int(all(c["supported"] for c in claims) and rng.random() < 0.9)
            items.append(
                {
                    "source": f"s{s}",
                    "cluster": f"s{s}-{i // 3}",
                    "label": y,
                    "base": float(np.mean([c["overlap"] for c in claims])),
                    "claims": claims,
                }
            )
    return items


def test_the_mean_model_fit_matches_a_logistic_regression_on_one_part_items(fit):
    # With one claim per answer, the answer's value is one sigmoid: the fit is an L2 logistic
    # regression (one intercept per source), which scikit-learn computes the same way.
    rng = np.random.default_rng(1)
    items = []
    for s in range(2):
        for i in range(300):
            x = float(rng.random())
            items.append(
                {
                    "source": f"s{s}",
                    "cluster": str(i),
                    "label": int(rng.random() < sigmoid(3 * x - 1 + s)),
                    "base": x,
                    "claims": [{"overlap": x}],
                }
            )
    data = fit.MeanData(items, "claims", list(SIGNALS))
    col = data.names.index("overlap")
    w, b = data.fit([col], 0.0, np.ones(len(items), bool))
    X = np.column_stack([[it["claims"][0]["overlap"] for it in items], [it["source"] == "s1" for it in items]])
    y = [it["label"] for it in items]
    weights = np.array([0.5 / 300] * 600)  # each source weighted equally, as the fit does
    ref = LogisticRegression(C=1e9, tol=1e-10, max_iter=10000).fit(X, y, sample_weight=weights)
    assert w[0] == pytest.approx(ref.coef_[0][0], abs=2e-3)
    assert b[0] == pytest.approx(ref.intercept_[0], abs=2e-3)
    assert b[1] - b[0] == pytest.approx(ref.coef_[0][1], abs=2e-3)


def test_leave_one_source_out_scores_each_source_with_a_fit_on_the_others(fit):
    items = synthetic()
    data = fit.MeanData(items, "claims", list(SIGNALS))
    cols = [data.names.index("overlap"), data.names.index("supported")]
    held = data.loso(cols, 0.01)
    assert sorted(held) == ["s0", "s1", "s2", "s3"]
    for s, values in held.items():
        mask = data.src == data.sources.index(s)
        w, b = data.fit(cols, 0.01, ~mask)  # what the held-out values come from
        expected = data.values(w, float(np.mean(b[[k for k in range(4) if data.sources[k] != s]])), cols)[mask]
        assert np.allclose(values, expected)
        assert roc_auc_score(data.y[mask], values) > 0.85


def test_forward_selection_keeps_the_signal_that_helps_every_source_and_leaves_the_noise(fit):
    data = fit.MeanData(synthetic(), "claims", list(SIGNALS))
    cols, lam, aurocs = fit.select(data, ("window", "supported"), log=lambda msg: None)
    assert [data.names[c] for c in cols] == ["overlap", "supported"]
    assert lam in fit.LAMBDAS and set(aurocs) == {"s0", "s1", "s2", "s3"}


def test_the_fit_is_deterministic(fit):
    data = fit.MeanData(synthetic(seed=3), "claims", list(SIGNALS))
    cols = [data.names.index("overlap"), data.names.index("supported")]
    first = data.fit(cols, 0.03, np.ones(len(data.items), bool))
    second = data.fit(cols, 0.03, np.ones(len(data.items), bool))
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
