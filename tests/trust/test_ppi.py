"""PPI++ (issue 34, item 2): the hand-worked example, a fixed-seed simulation that fails if the
correction is wrong, the difference of two runs (paired and independent), and its use by
``result.summary(labels=...)`` and ``ragmeter compare --labels`` (A/B and the gate)."""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest

import ragmeter as rm
import ragmeter.trust.ppi as ppi_module
from ragmeter.cli import main
from ragmeter.data import Sample, Score
from ragmeter.labels import Label, answer_hash
from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult
from ragmeter.trust import ppi_mean, ppi_mean_diff
from ragmeter.trust.ppi import t_quantile


def test_the_docstring_example_worked_by_hand():
    assert doctest.testmod(ppi_module).failed == 0
    est = ppi_mean([1, 0, 1, 0], [0.8, 0.4, 0.8, 0.4], [0.8, 0.8, 0.4, 0.8], min_labels=4)
    assert est.labels == 0.5 and est.judge == pytest.approx(0.65) and est.mean == pytest.approx(0.6)
    q = t_quantile(3)
    assert est.se == pytest.approx(0.2) and est.ci == pytest.approx((0.6 - q * 0.2, 0.6 + q * 0.2))
    assert est.labels_ci == pytest.approx((0.5 - q * math.sqrt(1 / 3 / 4), 0.5 + q * math.sqrt(1 / 3 / 4)))
    # a fixed lambda: 0 is the labels alone; 1 is plain PPI
    assert ppi_mean([1, 0, 1, 0], [0.8, 0.4, 0.8, 0.4], [0.8] * 4, lam=0.0, min_labels=4).mean == 0.5
    assert ppi_mean([1, 0, 1, 0], [0.8, 0.4, 0.8, 0.4], [0.8] * 4, lam=1.0, min_labels=4).mean == pytest.approx(0.7)


def test_the_t_quantile_against_scipy():
    from scipy import stats

    for df in (9, 10, 14, 30, 49, 100, 999, 10**6):
        assert t_quantile(df) == pytest.approx(stats.t.ppf(0.975, df), abs=3e-4)


def _draw(rng, n, big_n, bias, noise):
    """n labeled + big_n unlabeled items: quality q ~ Beta(2, 2) (mean 0.5), a binary human label
    ~ Bernoulli(q), a judge value q + bias + noise (clipped)."""
    q = rng.beta(2, 2, n + big_n)
    y = (rng.random(n + big_n) < q).astype(float)
    f = np.clip(q + bias + rng.normal(0, noise, n + big_n), 0, 1)
    return y[:n], f[:n], f[n:]


def test_a_fixed_seed_simulation_fails_if_the_correction_is_wrong():
    """A judge 0.2 too lenient: its mean's interval never covers the truth (0.5); PPI++'s does
    about 95% of the time and is narrower than the labels' own."""
    rng = np.random.default_rng(20260101)
    covered, naive, width, labels_width, errors = 0, 0, [], [], []
    draws = 300
    for _ in range(draws):
        y, f, g = _draw(rng, 150, 1500, 0.2, 0.1)
        est = ppi_mean(y, f, g)
        covered += est.ci[0] <= 0.5 <= est.ci[1]
        allf = np.concatenate([f, g])
        half = 1.96 * allf.std(ddof=1) / math.sqrt(len(allf))
        naive += allf.mean() - half <= 0.5 <= allf.mean() + half
        width.append(est.ci[1] - est.ci[0])
        labels_width.append(est.labels_ci[1] - est.labels_ci[0])
        errors.append(est.mean - 0.5)
    assert covered / draws >= 0.92 and naive == 0
    assert abs(np.mean(errors)) < 0.01  # unbiased: a wrong sign or a missing rectifier is off by ~0.2
    assert np.mean(width) < np.mean(labels_width)
    # one big draw: the estimate lands on the truth, the judge 0.2 off
    y, f, g = _draw(np.random.default_rng(7), 3000, 30000, 0.2, 0.1)
    est = ppi_mean(y, f, g)
    assert abs(est.mean - 0.5) < 0.015 and abs(est.judge - 0.5) > 0.15 and 0.5 < est.lam <= 1.0


def test_lambda_follows_how_much_the_judge_knows():
    rng = np.random.default_rng(2)
    y, _, _ = _draw(rng, 200, 0, 0, 0)
    noise_f, noise_g = rng.random(200), rng.random(2000)  # a judge that knows nothing
    assert ppi_mean(y, noise_f, noise_g).lam < 0.15
    q = rng.beta(2, 2, 2200)
    exact = ppi_mean(q[:200], q[:200], q[200:])  # labels that are the judge's values: lambda near 1, narrow
    assert exact.lam > 0.85 and (exact.ci[1] - exact.ci[0]) < 0.5 * (exact.labels_ci[1] - exact.labels_ci[0])


def test_too_few_labels_or_nothing_unlabeled_is_na_with_the_reason():
    assert ppi_mean([1, 0, 1], [1, 0, 1], [0.5] * 10).reason == "too few labels: 3 < 10"
    full = ppi_mean([1, 0] * 6, [0.9, 0.1] * 6, [])
    assert full.mean is None and full.labels == 0.5
    assert full.reason == "every judged item is labeled: the labels' own mean is the estimate"
    with pytest.raises(ValueError, match="12 labels for 3 judge values"):
        ppi_mean([1, 0] * 6, [1, 0, 1], [0.5])


def test_the_difference_of_two_runs_paired_and_independent():
    rng = np.random.default_rng(11)
    ya, fa, ga = _draw(rng, 100, 900, 0.1, 0.1)
    yb, fb, gb = _draw(rng, 100, 900, 0.1, 0.1)
    a, b = ppi_mean(ya, fa, ga), ppi_mean(yb, fb, gb)
    ind = ppi_mean_diff(a, b)
    assert ind.method == "PPI++ independent" and ind.mean == pytest.approx(b.mean - a.mean)
    assert ind.se == pytest.approx(math.hypot(a.se, b.se))
    paired = ppi_mean_diff(a, b, paired=(list(yb - ya), list(fb - fa), list(gb - ga)))
    assert paired.method == "PPI++ paired"
    assert paired.mean == pytest.approx(ppi_mean(yb - ya, fb - fa, gb - ga).mean)
    # too few samples labeled in both runs: the independent form
    assert ppi_mean_diff(a, b, paired=([1.0], [0.5], [0.1])).method == "PPI++ independent"
    assert ppi_mean_diff(a, ppi_mean([1], [1], [1])).reason == "current: too few labels: 1 < 10"


def _runs(n=120, labeled=60, drop=0.0, judge_shift=0.0, seed=5):
    """Two runs of the same questions; in ``current`` the answers people labeled got worse by
    ``drop`` in quality (so their labels differ) while the judge saw ``judge_shift``."""
    rng = np.random.default_rng(seed)
    q = rng.beta(3, 2, n)
    labels, runs = [], []
    for name, d, shift in (("baseline", 0.0, 0.0), ("current", drop, judge_shift)):
        results = []
        for i in range(n):
            qi = max(0.0, q[i] - d)
            answer = f"answer {i}" + ("" if d == 0 else " (changed)")
            v = float(np.clip(qi + 0.15 + shift + rng.normal(0, 0.05), 0, 1))
            results.append(
                SampleResult(
                    Sample(f"q{i}", ["c"], answer=answer, id=f"s{i}"),
                    {"faithfulness": Score("faithfulness", v, label="pass" if v >= 0.7 else "fail")},
                )
            )
            if i < labeled:
                labels.append(Label(f"s{i}", "ann", "faithfulness", round(qi, 3), answer_hash(answer), scale="0-1"))
        runs.append(EvaluationResult(results, ["faithfulness"], judge=name, thresholds={"faithfulness": (0.7, 0.5)}))
    return runs[0], runs[1], labels


def test_summary_with_labels_gives_the_mean_in_human_units():
    base, _, labels = _runs()
    row = base.summary(labels=labels)["faithfulness"]
    assert row["human_n"] == 60 and row["human_scale"] == "0-1" and "human_reason" not in row
    judged = [r["faithfulness"].value for r in base]
    exp = ppi_mean([lb.value for lb in labels[:60]], judged[:60], judged[60:])
    assert row["human_mean"] == pytest.approx(exp.mean) and row["human_ci"] == pytest.approx(list(exp.ci))
    assert row["mean"] - row["human_mean"] > 0.1  # the judge is 0.15 too lenient; the labels correct it
    assert "human_mean" not in base.summary()["faithfulness"]


def test_compare_with_labels_gates_in_human_units(tmp_path, capsys):
    # the answers got worse by 0.2 for people; the judge, whose leniency grew, says no change
    base, cur, labels = _runs(drop=0.2, judge_shift=0.2)
    plain = rm.compare(base, cur)
    assert plain.metrics["faithfulness"].verdict == "no detectable change" and plain.human == {}
    cmp = rm.compare(base, cur, labels=labels)
    h = cmp.human["faithfulness"]
    assert h["verdict"] == "regressed" and h["method"] == "PPI++ paired" and h["ci"][1] < 0  # both answers labeled
    assert h["baseline"]["n"] == 60 and h["current"]["n"] == 60
    assert not cmp.passed and cmp.gate()[-1].startswith("faithfulness: in human units (0-1) the mean fell by")
    # labels on different samples in the two runs (A/B style): the difference of the runs' own estimates
    old_answers = {answer_hash(f"answer {i}") for i in range(120)}
    apart = [lb for lb in labels if (lb.answer_hash in old_answers) == (int(lb.sample_id[1:]) < 30)]
    h = rm.compare(base, cur, labels=apart).human["faithfulness"]
    assert h["method"] == "PPI++ independent" and (h["baseline"]["n"], h["current"]["n"]) == (30, 30)
    assert h["mean"] == pytest.approx(h["current"]["mean"] - h["baseline"]["mean"])
    base.save(tmp_path / "a.jsonl")
    cur.save(tmp_path / "b.jsonl")
    (tmp_path / "l.jsonl").write_text("\n".join(json.dumps(lb.to_dict()) for lb in labels) + "\n")
    argv = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--labels", str(tmp_path / "l.jsonl")]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "in human units (PPI++: the judge's scores corrected by the labels):" in out
    assert "FAIL faithfulness: in human units (0-1) the mean fell by" in err
    # unchanged answers keep their labels (the same hash): a paired difference, no change
    same_a, same_b, same_labels = _runs(drop=0.0)
    h = rm.compare(same_a, same_b, labels=same_labels).human["faithfulness"]
    assert h["method"] == "PPI++ paired" and h["verdict"] == "no detectable change"
    assert h["mean"] == pytest.approx(0.0, abs=0.05)
