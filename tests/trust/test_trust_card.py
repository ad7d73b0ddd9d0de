"""The trust card (issue 34, item 1): every statistic checked against scikit-learn or scipy, the
(cluster) bootstrap intervals, n/a with the reason, the fitness verdict and its rules, bad input
reported per line, content kept out when it was not captured, the CLI and the store."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.calibration import calibration_curve
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score, confusion_matrix, roc_auc_score

import ragmeter as rm
from ragmeter.cli import main
from ragmeter.data import Sample, Score
from ragmeter.labels import Label, answer_hash, bootstrap_ci
from ragmeter.labels.agreement import auroc, reliability, spearman
from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult
from ragmeter.store import Store
from ragmeter.trust import trust_card
from ragmeter.trust.card import USES

THRESHOLD = 0.7


def synthetic(
    n_samples: int = 200,
    n_labeled: int = 120,
    *,
    scale: str = "binary",
    noise: float = 0.15,
    seed: int = 3,
    clusters: int | None = 30,
    captured: bool = True,
):
    """A run of ``n_samples`` faithfulness scores and labels on the first ``n_labeled``: the
    judge's value is a latent quality plus noise; people label the quality (binary: 1 above
    0.6; 1-5: rounded 1 + 4 q; 0-1: q), in ``clusters`` clusters."""
    rng = np.random.default_rng(seed)
    q = rng.beta(2, 1.5, n_samples)
    v = np.clip(q + rng.normal(0, noise, n_samples), 0, 1)
    results, labels = [], []
    for i in range(n_samples):
        meta = {} if captured else {"content_captured": False}
        s = Sample(f"question {i}?", [f"chunk {i}"], answer=f"answer {i}", id=f"s{i}", metadata=meta)
        label = "pass" if v[i] >= THRESHOLD else "fail"
        results.append(
            SampleResult(
                s,
                {
                    "faithfulness": Score(
                        "faithfulness",
                        float(v[i]),
                        label=label,
                        explanation=f"why {i}",
                        details={"unsupported": [f"claim {i}"]},
                    )
                },
            )
        )
        if i < n_labeled:
            human = {
                "binary": int(q[i] > 0.6),
                "1-5": int(np.clip(np.rint(1 + 4 * q[i]), 1, 5)),
                "0-1": round(float(q[i]), 3),
            }[scale]
            labels.append(
                Label(
                    s.id,
                    "ann",
                    "faithfulness",
                    human,
                    answer_hash(s.answer),
                    cluster=f"c{i % clusters}" if clusters else None,
                    scale=scale,
                )
            )
    run = EvaluationResult(results, ["faithfulness"], judge="offline", thresholds={"faithfulness": (THRESHOLD, 0.5)})
    return run, labels, v, q


def _arrays(run, labels, scale):
    v = np.array([run[i]["faithfulness"].value for i in range(len(labels))])
    h = np.array([lb.value for lb in labels], dtype=float)
    hpass = h >= {"binary": 0.5, "1-5": 4.0, "0-1": THRESHOLD}[scale]
    return v, h, hpass


def test_binary_statistics_agree_with_scikit_learn():
    run, labels, _, _ = synthetic()
    card = trust_card(run, labels, n_boot=200)
    m = card.metrics["faithfulness"]
    v, h, hpass = _arrays(run, labels, "binary")
    jpass = v >= THRESHOLD
    st = m["statistics"]
    assert m["n"] == 120 and m["clusters"] == 30 and m["scale"] == "binary"
    assert st["auroc"]["value"] == pytest.approx(roc_auc_score(hpass, v))
    assert st["balanced_accuracy"]["value"] == pytest.approx(balanced_accuracy_score(hpass, jpass))
    assert st["kappa"]["value"] == pytest.approx(cohen_kappa_score(hpass, jpass))
    (tn, fp), (fn, tp) = confusion_matrix(hpass, jpass)
    assert m["confusion"] == {"tp": tp, "fp": fp, "fn": fn, "tn": tn}
    assert st["bias"]["value"] == pytest.approx(jpass.mean() - h.mean())  # judge pass rate - human pass rate
    # ECE from scikit-learn's reliability curve (uniform bins) weighted by the bins' counts
    prob_true, prob_pred = calibration_curve(hpass, v, n_bins=10, strategy="uniform")
    counts = np.bincount(np.minimum((v * 10).astype(int), 9), minlength=10)
    counts = counts[counts > 0]
    assert st["ece"]["value"] == pytest.approx(float(np.sum(counts / counts.sum() * np.abs(prob_true - prob_pred))))
    assert [b["pass_rate"] for b in m["reliability"]] == pytest.approx(list(prob_true))
    assert st["spearman"] == {"value": None, "ci": None, "reason": "for graded labels (binary labels: see AUROC)"}
    for key in ("auroc", "balanced_accuracy", "kappa", "bias", "ece"):
        low, high = st[key]["ci"]
        assert low <= st[key]["value"] <= high, key


@pytest.mark.parametrize("scale", ["1-5", "0-1"])
def test_graded_statistics_agree_with_scipy(scale):
    run, labels, _, _ = synthetic(scale=scale, clusters=None)
    m = trust_card(run, labels, n_boot=100).metrics["faithfulness"]
    v, h, hpass = _arrays(run, labels, scale)
    st = m["statistics"]
    assert st["spearman"]["value"] == pytest.approx(sps.spearmanr(v, h).statistic)
    judge_h = 1 + 4 * v if scale == "1-5" else v
    assert st["bias"]["value"] == pytest.approx(judge_h.mean() - h.mean())
    assert st["kappa"]["value"] == pytest.approx(cohen_kappa_score(hpass, v >= THRESHOLD))
    assert st["auroc"]["value"] is None and "for binary labels" in st["auroc"]["reason"]
    assert m["clusters"] is None


def test_the_numpy_statistics_against_scipy_and_scikit_learn_on_ties():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, 60).astype(float)  # many ties
    y = x + rng.integers(-2, 3, 60)
    assert spearman(x, y) == pytest.approx(sps.spearmanr(x, y).statistic)
    pos = rng.random(60) < 0.4
    assert auroc(x, pos) == pytest.approx(roc_auc_score(pos, x))
    assert np.isnan(auroc(x, np.ones(60, bool))) and np.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert reliability([], [])["ece"] != reliability([], [])["ece"]  # NaN without items


def test_the_bootstrap_matches_scipys_and_the_cluster_bootstrap_resamples_clusters():
    rng = np.random.default_rng(1)
    x = rng.normal(0.6, 0.2, 80)
    ours = bootstrap_ci(lambda idx: float(x[idx].mean()), len(x), n_boot=20000, seed=1)
    theirs = sps.bootstrap((x,), np.mean, method="percentile", n_resamples=20000, random_state=2).confidence_interval
    assert ours == pytest.approx((theirs.low, theirs.high), abs=0.004)
    # one item per cluster, numbered in item order: the very draws of the item bootstrap
    assert bootstrap_ci(
        lambda idx: float(x[idx].mean()), 80, n_boot=300, seed=4, clusters=list(range(80))
    ) == bootstrap_ci(lambda idx: float(x[idx].mean()), 80, n_boot=300, seed=4)
    # 20 clusters of 4 copies of one value: items are not independent, the interval is twice as wide
    dup = np.repeat(x[:20], 4)
    items = bootstrap_ci(lambda idx: float(dup[idx].mean()), 80, n_boot=4000, seed=5)
    whole = bootstrap_ci(
        lambda idx: float(dup[idx].mean()), 80, n_boot=4000, seed=5, clusters=np.repeat(np.arange(20), 4)
    )
    assert (whole[1] - whole[0]) / (items[1] - items[0]) == pytest.approx(2.0, rel=0.15)
    with pytest.raises(ValueError, match="3 cluster keys for 80 items"):
        bootstrap_ci(lambda idx: 0.0, 80, clusters=[1, 2, 3])


def test_the_fitness_verdict_follows_its_rules():
    good = trust_card(*synthetic(n_samples=300, n_labeled=200, noise=0.02)[:2], n_boot=300).metrics["faithfulness"]
    assert good["verdict"] == "release gate" and good["statistics"]["kappa"]["ci"][0] >= 0.6
    assert [f["use"] for f in good["fitness"]] == [u for u, _, _ in USES]
    assert good["fitness"][0]["rule"] == "kappa's 95% lower bound >= 0.6 on >= 100 labeled items"
    noisy = trust_card(*synthetic(n_samples=200, n_labeled=80, noise=0.25)[:2], n_boot=300).metrics["faithfulness"]
    assert noisy["verdict"] == "trend monitoring"
    assert noisy["fitness"][0]["because"] == "80 labeled items < 100"
    assert noisy["fitness"][1]["because"].startswith("AUROC's lower bound 0.")
    few = trust_card(*synthetic(n_labeled=30)[:2], n_boot=100).metrics["faithfulness"]
    assert few["verdict"] == "exploration only" and few["fitness"][1]["because"] == "30 labeled items < 50"


def test_statistics_without_enough_labels_are_na_with_the_reason():
    run, labels, _, _ = synthetic(n_labeled=6)
    st = trust_card(run, labels, n_boot=50).metrics["faithfulness"]["statistics"]
    assert all(s["value"] is None and s["reason"] == "too few labels: 6 < 10" for k, s in st.items() if k != "spearman")
    run, labels, _, _ = synthetic()
    passing = [Label(lb.sample_id, "ann", lb.criterion, 1, lb.answer_hash, scale="binary") for lb in labels]
    st = trust_card(run, passing, n_boot=50).metrics["faithfulness"]["statistics"]
    assert st["auroc"]["value"] is None and st["auroc"]["reason"] == (
        "people pass all 120 items: it needs items they pass and items they fail"
    )
    assert st["bias"]["value"] is not None and st["ece"]["value"] is not None


def test_the_mean_in_human_units_and_the_worst_disagreements():
    run, labels, v, q = synthetic()
    m = trust_card(run, labels, n_boot=100, worst=3).metrics["faithfulness"]
    ppi = m["ppi"]
    assert (ppi["n"], ppi["N"]) == (120, 80) and ppi["method"] == "PPI++" and ppi["ci"][0] < ppi["mean"] < ppi["ci"][1]
    rows = m["worst"]
    assert len(rows) == 3 and all(r["judge"]["pass"] != r["human"]["pass"] for r in rows)  # opposite verdicts first
    assert rows[0]["gap"] >= rows[1]["gap"] >= rows[2]["gap"]
    assert rows[0]["question"].startswith("question ") and rows[0]["judge"]["evidence"] == [
        f"unsupported: 'claim {rows[0]['sample_id'][1:]}'"
    ]
    hidden = trust_card(*synthetic(captured=False)[:2], n_boot=50, worst=3).metrics["faithfulness"]["worst"]
    assert all(
        r["question"] is None
        and r["answer"] is None
        and r["judge"]["explanation"] is None
        and r["judge"]["evidence"] == []
        for r in hidden
    )
    assert rows[0]["answer"] == f"answer {rows[0]['sample_id'][1:]}"


def _write_labels(path, labels, extra_lines=()):
    lines = [json.dumps({**lb.to_dict(), "annotator": "ann"}) for lb in labels] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n")


def test_the_cli_prints_writes_and_stores_the_card(tmp_path, capsys):
    run, labels, _, _ = synthetic()
    run.save(tmp_path / "results.jsonl")
    bad = [
        json.dumps({"sample_id": "nope", "annotator": "a", "metric": "faithfulness", "value": 1, "scale": "binary"}),
        json.dumps({"sample_id": "s1", "annotator": "a", "metric": "faithfulness", "value": 3, "scale": "binary"}),
        json.dumps(
            {
                "sample_id": "s2",
                "annotator": "b",
                "metric": "faithfulness",
                "value": 1,
                "scale": "binary",
                "answer": "another answer",
            }
        ),
    ]
    _write_labels(tmp_path / "labels.jsonl", labels, bad)
    outs = [str(tmp_path / f"card.{x}") for x in ("html", "md", "json", "txt")]
    argv = ["trust", str(tmp_path / "results.jsonl"), "--labels", str(tmp_path / "labels.jsonl"), "--bootstrap", "100"]
    assert main(argv + sum((["--out", o] for o in outs), [])) == 0
    text = capsys.readouterr().out
    assert text.startswith(
        "trust card: results.jsonl, 200 samples, judge offline\n"
        "labels: 120 counted, 2 left out, 0 blank, 1 unreadable\n"
    )
    assert (
        f"left out: {tmp_path / 'labels.jsonl'}: line 122: field 'value': expected 0 or 1 on the binary scale" in text
    )
    assert f"left out: {tmp_path / 'labels.jsonl'}: line 121: sample 'nope' is not in the run" in text
    assert "line 123: sample 's2': the answer changed since it was labeled" in text
    assert "faithfulness (binary labels, threshold 0.7): 120 labeled items in 30 clusters" in text
    assert "-> fit for " in text and "rule: kappa's 95% lower bound >= 0.6 on >= 100 labeled items" in text
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["metrics"]["faithfulness"]["n"] == 120 and card["run_id"] is None
    assert (tmp_path / "card.txt").read_text() in text
    assert "| Cohen's kappa |" in (tmp_path / "card.md").read_text()
    assert 'data-metric="faithfulness"' in (tmp_path / "card.html").read_text()
    # a stored run: the card is stored with it, and the dashboard shows it
    db = str(tmp_path / "history.db")
    with Store(db) as store:
        run_id = store.record_run(run, dataset="synthetic")
    assert (
        main(["trust", str(run_id), "--labels", str(tmp_path / "labels.jsonl"), "--db", db, "--bootstrap", "50"]) == 0
    )
    assert f"stored the card with run {run_id} in sqlite:///" in capsys.readouterr().out
    with Store(db) as store:
        assert store.trust_card(run_id)["metrics"]["faithfulness"]["n"] == 120
        store.record_labels(labels)
    assert main(["trust", str(run_id), "--db", db, "--bootstrap", "50"]) == 0  # the store's labels
    assert "labels: 120 counted, 0 left out" in capsys.readouterr().out
    assert main(["dashboard", "--db", db, "--out", str(tmp_path / "dash.html")]) == 0
    page = (tmp_path / "dash.html").read_text()
    assert '<section id="trust">' in page and '<a href="#trust">Trust' in page


def test_the_cli_refuses_what_it_cannot_do(tmp_path, capsys):
    run, labels, _, _ = synthetic(n_samples=20, n_labeled=12)
    run.save(tmp_path / "results.jsonl")
    assert main(["trust", str(tmp_path / "results.jsonl")]) == 2
    assert "give --labels LABELS" in capsys.readouterr().err
    _write_labels(tmp_path / "l.jsonl", labels)
    assert (
        main(["trust", str(tmp_path / "results.jsonl"), "--labels", str(tmp_path / "l.jsonl"), "--out", "x.pdf"]) == 2
    )
    assert "unknown trust card type" in capsys.readouterr().err
    assert (
        main(["trust", str(tmp_path / "results.jsonl"), "--labels", str(tmp_path / "l.jsonl"), "--anchors", "a"]) == 2
    )
    assert "--anchors and --judge belong to 'ragmeter trust check'" in capsys.readouterr().err
    assert main(["trust"]) == 2


def test_the_help_says_95_percent(capsys):
    """The description is printed as written (no %-formatting): it showed "95%%"."""
    with pytest.raises(SystemExit):
        main(["trust", "--help"])
    out = capsys.readouterr().out
    assert "95% (cluster) bootstrap interval" in out and "%%" not in out


def test_a_card_on_labels_that_match_nothing_says_so(tmp_path):
    run, _, _, _ = synthetic(n_samples=10, n_labeled=0)
    card = trust_card(run, [Label("zz", "a", "faithfulness", 1, scale="binary")])
    assert card.metrics == {} and "no metric of the run has labels that count for it" in card.to_text()
    assert card.data["labels"]["left_out"] == ["sample 'zz' is not in the run"]


def test_rm_trust_card_from_a_results_file(tmp_path):
    run, labels, _, _ = synthetic(n_samples=40, n_labeled=30)
    run.save(tmp_path / "r.jsonl")
    card = rm.trust_card(str(tmp_path / "r.jsonl"), labels, n_boot=50)
    assert card.verdict("faithfulness") == "exploration only" and "TrustCard('r.jsonl'" in repr(card)


def test_the_dashboard_makes_the_card_from_the_stores_labels(tmp_path):
    """No card stored with the newest run, but labels in the store that count for it: the
    dashboard shows the card it makes from them."""
    from ragmeter.dashboard import render_store

    run, labels, _, _ = synthetic(n_samples=60, n_labeled=40)
    with Store(tmp_path / "h.db") as store:
        store.record_run(run)
        assert '<section id="trust">' not in render_store(store)
        store.record_labels(labels)
        page = render_store(store)
    assert '<section id="trust">' in page and "run 1: 40 labels counted" in page
    assert 'data-metric="faithfulness" data-verdict="exploration only"' in page
