"""rm.compare / compare_variants and `ragmeter compare`: every statistic against scipy or worked out
by hand on small cases, per-sample transitions, loading from files and the history store, the gate."""

import json
import math

import numpy as np
import pytest
from scipy import stats

import ragmeter as rm
from ragmeter.cli import main
from ragmeter.comparison import IMPROVED, NO_CHANGE, REGRESSED, compare, compare_variants, required_sample_size
from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult


def score(metric, value):
    if value == "error":
        return rm.Score(metric, None, error="judge timed out")
    if value == "n/a":
        return rm.Score(metric, None, explanation="no claims")
    return rm.Score(metric, value)


def run(values, ids=None, metric="m", metadata=None):
    """A run of one metric: ``values`` per sample (a float, "n/a" or "error")."""
    ids = ids or [f"s{i}" for i in range(len(values))]
    out = []
    for i, (sid, v) in enumerate(zip(ids, values)):
        meta = metadata[i] if metadata else {}
        out.append(
            SampleResult(rm.Sample(f"question {sid}", ["ctx"], id=sid, metadata=meta), {metric: score(metric, v)})
        )
    return EvaluationResult(out, [metric])


A5 = [0.9, 0.8, 0.7, 0.6, 0.5]
B5 = [0.6, 0.6, 0.4, 0.5, 0.1]  # d = -0.3, -0.2, -0.3, -0.1, -0.4


def test_paired_statistics_by_hand():
    c = compare(run(A5), run(B5)).metrics["m"]
    # d = [-.3, -.2, -.3, -.1, -.4]: mean -0.26; squared deviations .0016 .0036 .0016 .0256 .0196 = .052
    sd = math.sqrt(0.052 / 4)
    assert c.paired and c.n_a == c.n_b == 5
    assert c.mean_a == pytest.approx(0.7) and c.mean_b == pytest.approx(0.44) and c.diff == pytest.approx(-0.26)
    assert (
        c.effect == "cohen_dz"
        and c.effect_size == pytest.approx(-0.26 / sd)
        and c.effect_size == pytest.approx(-2.2804, abs=1e-4)
    )
    t = -0.26 / (sd / math.sqrt(5))  # -5.099
    assert t == pytest.approx(-5.0990, abs=1e-4)
    assert c.p_values["t"] == pytest.approx(2 * stats.t.sf(abs(t), df=4))
    assert c.p_values["t"] == pytest.approx(stats.ttest_rel(B5, A5).pvalue)
    # exact Wilcoxon: all 5 differences negative, the most extreme of 2^5 sign patterns: p = 2/32
    assert c.p_values["wilcoxon"] == pytest.approx(2 / 32)
    # pairs needed to detect 0.05: (1.959964 + 0.841621)^2 * sd^2 / 0.05^2 = 7.8489 * 0.013 / 0.0025 = 40.8
    assert c.required_n == 41
    assert c.verdict == REGRESSED and c.ci[1] < 0


def test_bootstrap_interval_is_seeded_and_is_the_percentile_bootstrap():
    a, b = run(A5), run(B5)
    c1, c2 = compare(a, b, seed=7, n_boot=500), compare(a, b, seed=7, n_boot=500)
    assert c1.metrics["m"].ci == c2.metrics["m"].ci
    assert compare(a, b, seed=8, n_boot=500).metrics["m"].ci != c1.metrics["m"].ci
    rng = np.random.default_rng(7)
    d = np.array(B5) - np.array(A5)
    means = d[rng.integers(0, 5, size=(500, 5))].mean(axis=1)
    assert c1.metrics["m"].ci == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    assert -0.4 <= c1.metrics["m"].ci[0] <= -0.26 <= c1.metrics["m"].ci[1] <= -0.1


def test_unpaired_statistics_against_scipy_and_by_hand():
    a_vals, b_vals = [0.2, 0.4, 0.6, 0.8], [0.5, 0.7, 0.9]
    c = compare(run(a_vals, ids=["a1", "a2", "a3", "a4"]), run(b_vals, ids=["b1", "b2", "b3"]), seed=1).metrics["m"]
    assert not c.paired and (c.n_a, c.n_b) == (4, 3)
    assert c.diff == pytest.approx(0.7 - 0.5)
    assert c.p_values["welch"] == pytest.approx(stats.ttest_ind(b_vals, a_vals, equal_var=False).pvalue)
    assert c.p_values["mann_whitney"] == pytest.approx(
        stats.mannwhitneyu(b_vals, a_vals, alternative="two-sided").pvalue
    )
    # variances (n-1): a 0.0666..., b 0.04; pooled (3*0.0667 + 2*0.04)/5 = 0.056; d = 0.2/sqrt(0.056) = 0.8452
    # Hedges' g = d * (1 - 3/(4*7 - 9)) = 0.8452 * 0.84211 = 0.7117
    assert c.effect == "hedges_g" and c.effect_size == pytest.approx(0.2 / math.sqrt(0.056) * (1 - 3 / 19))
    # per group to detect 0.05: 2 * 7.84888 * 0.056 / 0.0025 = 351.6 -> 352
    assert c.required_n == 352
    assert c.verdict == NO_CHANGE  # 0.2 up, but 7 samples cannot tell it from noise
    assert c.ci[0] < 0 < c.ci[1]


def test_required_sample_size_formula():
    z = 1.959964 + 0.841621
    assert required_sample_size(0.04, 0.05) == math.ceil(2 * z * z * 0.04 / 0.0025) == 252
    assert required_sample_size(0.04, 0.05, paired=True) == 126
    assert required_sample_size(0.25, 0.1) == math.ceil(2 * z * z * 0.25 / 0.01) == 393
    assert required_sample_size(0.04, 0) is None and required_sample_size(0.0, 0.05) is None
    c = compare(run([0.2, 0.4, 0.6, 0.8], ids="abcd"), run([0.5, 0.7, 0.9], ids="xyz"), min_detectable=0.1).metrics["m"]
    assert c.required_n == math.ceil(2 * z * z * 0.056 / 0.01) == 88


def test_verdicts_follow_tolerance_and_interval():
    base = [0.8, 0.6, 0.9, 0.7, 0.5, 0.8]
    small_drop = [v - 0.03 for v in base]  # CI excludes zero, but within tolerance
    assert compare(run(base), run(small_drop)).metrics["m"].verdict == NO_CHANGE
    assert compare(run(base), run(small_drop), tolerance=0.02).metrics["m"].verdict == REGRESSED
    assert compare(run(base), run(small_drop), tolerance={"m": 0.02}).passed is False
    assert compare(run(base), run(small_drop), tolerance={"*": 0.1}).passed
    noisy = [1.0, 0.1, 1.0, 0.2, 0.9, 0.5]  # mean falls 0.1 but the pairs disagree
    c = compare(run(base), run(noisy)).metrics["m"]
    assert c.diff == pytest.approx(-0.1) and c.ci[0] < 0 < c.ci[1] and c.verdict == NO_CHANGE
    assert compare(run(small_drop), run(base), tolerance=0.02).metrics["m"].verdict == IMPROVED


def test_per_sample_transitions_and_samples_in_one_run():
    a = run([0.857, 0.9, "n/a", 0.5, 0.7, 0.6], ids=["na", "err", "rec", "fell", "same", "gone"])
    b = run(["n/a", "error", 0.4, 0.2, 0.72, 0.9], ids=["na", "err", "rec", "fell", "same", "new"])
    cmp = compare(a, b)
    kinds = {(r.sample_id, r.kind) for r in cmp.regressions}
    assert kinds == {("na", "became n/a"), ("err", "became error"), ("fell", "fell")}
    assert [r.kind for r in cmp.regressions] == ["became error", "became n/a", "fell"]  # worst first
    assert cmp.regressions[0].error == "judge timed out"
    assert [(r.sample_id, r.kind) for r in cmp.improvements] == [("rec", "recovered")]
    assert cmp.only_a == ["gone"] and cmp.only_b == ["new"] and cmp.shared == 5
    text = cmp.to_text()
    assert "na: 0.8570 -> n/a" in text and "err: 0.9000 -> error (judge timed out)" in text
    assert "only in baseline: gone" in text and "only in current: new" in text
    assert cmp.metrics["m"].n_a == 2  # pairs with a value on both sides: "fell" and "same"
    failures = cmp.gate(fail_on_sample_regression=True)
    assert any("3 sample regressions" in f for f in failures)


def test_gate_messages_name_metric_amount_and_worst_samples():
    cmp = compare(run(A5), run(B5))
    [msg] = cmp.gate()
    assert msg.startswith("m: mean fell by 0.2600 (0.7000 -> 0.4400, 95% CI")
    assert "worst samples: s4: 0.5000 -> 0.1000" in msg
    assert cmp.gate({"m": 0.5}) == [msg, "m: mean 0.4400 < 0.5 (--fail-under)"]
    assert "no such metric" in compare(run(A5), run(A5)).gate({"x": 0.1})[0]
    assert compare(run(A5), run(A5)).passed


def test_human_ratings_compare_like_metrics():
    meta_a = [{"human_rating": v} for v in (5, 4, 4, 5, 3)]
    meta_b = [{"human_rating": v, "stars": s} for v, s in zip((3, 3, 2, 4, 2), (1, 2, 3, 4, 5))]
    a, b = run(A5, metadata=meta_a), run(A5, metadata=meta_b)
    cmp = compare(a, b, tolerance={"human_rating": 0.5, "*": 0.05})
    h = cmp.metrics["human_rating"]
    assert h.mean_a == pytest.approx(4.2) and h.mean_b == pytest.approx(2.8) and h.verdict == REGRESSED
    assert h.p_values["t"] == pytest.approx(stats.ttest_rel([3, 3, 2, 4, 2], [5, 4, 4, 5, 3]).pvalue)
    assert "stars" not in cmp.metrics  # only in one run (and not named)
    assert cmp.metrics["m"].verdict == NO_CHANGE


def test_compare_variants_splits_one_run_by_tag():
    values = [0.9, 0.8, 0.85, 0.95, 0.6, 0.5, 0.55, 0.7]
    meta = [{"variant": v} for v in "AAAABBBB"]
    c = compare_variants(run(values, metadata=meta), tag_key="variant", seed=3)
    m = c.metrics["m"]
    assert not c.paired and c.names == ("variant=A", "variant=B")
    assert m.diff == pytest.approx(0.5875 - 0.875)
    assert m.p_values["welch"] == pytest.approx(stats.ttest_ind(values[4:], values[:4], equal_var=False).pvalue)
    assert m.verdict == REGRESSED
    # two independent groups: each holds its own samples, none is reported "only in" one of them (issue 38)
    for report in (c.to_text(), c.to_markdown()):
        assert "only in" not in report.lower(), report
    assert c.to_text().startswith(
        "unpaired comparison, variant=A -> variant=B: 4 samples in variant=A, 4 in variant=B\n"
    )
    with pytest.raises(ValueError, match="variants"):
        compare_variants(run(values, metadata=[{"variant": v} for v in "AABBCCDD"]))


def test_results_files_and_store_runs(tmp_path):
    from ragmeter.store import Store

    a, b = run(A5), run(B5)
    a.save(tmp_path / "a.jsonl")
    b.save(tmp_path / "b.json")
    cmp = compare(tmp_path / "a.jsonl", tmp_path / "b.json")
    assert cmp.names == ("a.jsonl", "b.json") and cmp.metrics["m"].diff == pytest.approx(-0.26)
    db = tmp_path / "h.db"
    with Store(db) as store:
        first = store.record_run(a, tags=["baseline"])
        store.record_run(b, tags=["nightly"])
    by_tag = compare("baseline", "nightly", db=db)
    assert by_tag.metrics["m"].diff == pytest.approx(-0.26) and by_tag.names[0] == f"run {first} (baseline)"
    assert compare(str(first), "nightly", db=db).metrics["m"].verdict == REGRESSED
    with pytest.raises(KeyError, match="neither a results file"):
        compare("nope", "nightly", db=db)


def test_reports_to_dict_markdown_truncation(tmp_path):
    n = 30
    cmp = compare(run([0.9] * n), run([0.1 + i / 1000 for i in range(n)]))
    text = cmp.to_text(max_rows=20)
    assert "30 sample regressions" in text and "showing 20 of 30 regressions" in text
    md = cmp.to_markdown(max_rows=20)
    assert "Gate: **FAILED**" in md and "showing 20 of 30 regressions" in md and "| s0 | m | fell |" in md
    data = json.loads(json.dumps(cmp.to_dict()))
    assert data["passed"] is False and len(data["regressions"]) == 30 and data["metrics"]["m"]["verdict"] == REGRESSED
    with pytest.raises(ValueError, match="use .md, .json or .txt"):
        cmp.save(tmp_path / "x.html")


# --------------------------------------------------------------------------- CLI


def cli(args, capsys):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_codes_and_reports(tmp_path, capsys):
    a, b = tmp_path / "base.jsonl", tmp_path / "cur.jsonl"
    run([0.9] * 30).save(a)
    run([0.1 + i / 1000 for i in range(30)]).save(b)
    outs = [tmp_path / "c.md", tmp_path / "c.json", tmp_path / "c.txt"]
    code, out, err = cli(["compare", a, b, *sum((["--out", o] for o in outs), [])], capsys)
    assert code == 1
    assert "showing 20 of 30 regressions" in out and "regressed" in out
    assert "FAIL m: mean fell by 0.7855" in err and "worst samples: s0: 0.9000 -> 0.1000" in err
    assert all(o.exists() for o in outs) and json.loads(outs[1].read_text())["passed"] is False
    assert "showing 20 of 30" in outs[2].read_text()
    code, out, _ = cli(["compare", a, b, "--max-rows", "5", "--tolerance", "0.9"], capsys)
    assert code == 0 and "showing 5 of 30 regressions" not in out  # nothing fell by more than 0.9
    code, _, err = cli(["compare", a, b, "--tolerance", "m=0.9", "--fail-under", "m=0.5"], capsys)
    assert code == 1 and "m: mean 0.1145 < 0.5" in err
    code, _, err = cli(["compare", a, a, "--fail-on-sample-regression"], capsys)
    assert code == 0
    code, _, err = cli(["compare", a, b, "--tolerance", "0.7", "--fail-on-sample-regression"], capsys)
    assert code == 1 and "30 sample regressions" in err
    code, _, err = cli(["compare", a, b, "--tolerance", "m=x"], capsys)
    assert code == 2 and "--tolerance" in err
    code, _, err = cli(["compare", a, b, "--out", tmp_path / "c.csv"], capsys)
    assert code == 2 and "--out" in err and not (tmp_path / "c.csv").exists()


def test_cli_store_refs_and_unpaired(tmp_path, capsys, monkeypatch):
    from ragmeter.store import Store

    db = tmp_path / "h.db"
    with Store(db) as store:
        store.record_run(run(A5), tags=["baseline"])
        rid = store.record_run(run(B5, ids=list("vwxyz")))
    code, out, err = cli(["compare", "baseline", rid, "--db", db], capsys)
    assert (
        code == 1
        and out.startswith("unpaired comparison")
        and "p welch" in out
        and "FAIL m: mean fell by 0.2600" in err
    )
    monkeypatch.setenv("RAGMETER_DB", str(db))
    code, out, _ = cli(["compare", "baseline", rid, "--paired"], capsys)
    assert code == 0 and "0 shared samples" in out
    code, _, err = cli(["compare", "baseline", "missing-tag"], capsys)
    assert code == 2 and "missing-tag" in err
    monkeypatch.delenv("RAGMETER_DB")
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(["compare", "typo.jsnl", "x.jsonl"], capsys)
    assert code == 2 and "typo.jsnl: no such results file, and no history store" in err
    assert not (tmp_path / "ragmeter.db").exists()


# ---------------------------------------------------------------------------- issue 33, item 10


def test_answers_gone_blank_are_a_regression_through_the_share_without_a_value(tmp_path, capsys):
    """Answers set to "" or "I don't know." become n/a, leave the pairs (the mean of what is left
    does not move), and used to pass the gate. 20 samples: 4 going blank is 0 -> 4 of 20 without a
    value, +20% against the tolerance 0.05: regressed, exit 1, said in the table and the message."""
    rows = [json.loads(line) for line in open("examples/rag_samples.jsonl")]
    for i, r in enumerate(rows[:4]):
        r["answer"] = "" if i % 2 else "I don't know."
    blank = tmp_path / "blank.jsonl"
    blank.write_text("".join(json.dumps(r) + "\n" for r in rows))
    base, cur = tmp_path / "base.jsonl", tmp_path / "cur.jsonl"
    for data, out in (("examples/rag_samples.jsonl", base), (blank, cur)):
        assert (
            main(["evaluate", str(data), "-j", "offline", "-m", "faithfulness", "--no-progress", "-o", str(out)]) == 0
        )
    capsys.readouterr()
    code, out, err = cli(["compare", base, cur], capsys)
    assert code == 1  # exit 0 before: nothing regressed
    c = compare(base, cur).metrics["faithfulness"]
    assert c.verdict == REGRESSED and (c.na, c.errors, c.counted) == ((0, 4), (0, 0), (20, 20))
    assert c.n_a == 16 and abs(c.diff) < 0.05  # the pairs left: the mean alone sees nothing
    assert "0 -> 4 of 20" in out and "regressed" in out
    assert (
        "FAIL faithfulness: samples without a value rose 0 -> 4 of 20 (n/a 0 -> 4, errors 0 -> 0; share 0.0% -> 20.0%"
        in err
    )
    assert "became n/a" in out


def test_share_without_a_value_against_the_tolerance_by_hand():
    base = [0.9] * 20
    one, two = base[:19] + ["n/a"], base[:18] + ["n/a", "error"]
    # 1 of 20 = 5.0%: not more than 0.05; 2 of 20 = 10%: more
    assert compare(run(base), run(one)).metrics["m"].verdict == NO_CHANGE
    c = compare(run(base), run(two)).metrics["m"]
    assert c.verdict == REGRESSED and c.na == (0, 1) and c.errors == (0, 1) and c.missing_rates == (0.0, 0.1)
    assert compare(run(base), run(two), tolerance=0.1).passed  # 10% is not more than 0.1
    assert compare(run(two), run(base)).passed  # fewer without a value is no regression
    # unpaired: each run's own share, 0/4 -> 2/5 = 40%
    u = compare(run([0.5] * 4, ids="abcd"), run([0.5, 0.5, 0.5, "n/a", "n/a"], ids="vwxyz")).metrics["m"]
    assert not u.paired and u.counted == (4, 5) and u.missing_change() == "0/4 -> 2/5" and u.verdict == REGRESSED


def test_tolerance_names_are_checked_and_lists_accepted(tmp_path, capsys):
    a, b = tmp_path / "base.jsonl", tmp_path / "cur.jsonl"
    run([0.9 - i % 3 / 100 for i in range(30)], metric="faithfulness").save(a)
    run([0.5 + i % 5 / 100 for i in range(30)], metric="faithfulness").save(b)
    code, _, err = cli(["compare", a, b, "--tolerance", "faithfulnes=0.3"], capsys)
    assert (
        code == 2 and "tolerance for 'faithfulnes': no such metric in these runs; did you mean 'faithfulness'?" in err
    )
    with pytest.raises(ValueError, match="did you mean 'faithfulness'"):
        compare(a, b, tolerance={"faithfulnes": 0.5})
    code, _, err = cli(["compare", a, b, "--tolerance", "faithfulness=0.5,0.01"], capsys)  # comma list
    assert code == 0, err
    code, _, err = cli(["compare", a, b, "--tolerance", "0.01", "--tolerance", "faithfulness=0.5"], capsys)  # repeated
    assert code == 0, err
    code, _, err = cli(["compare", a, b, "--tolerance", "faithfulness=0.5,faithfulness=0.1"], capsys)
    assert code == 2 and "given twice" in err
    code, _, err = cli(["compare", a, b, "--tolerance", "faithfulness=-1"], capsys)
    assert code == 2 and "0 or more" in err
    code, _, err = cli(["compare", a, b, "--tolerance", "0.9", "--fail-under", "faithfulnes=0.5"], capsys)
    assert code == 1 and "faithfulnes: no such metric in the current run (did you mean 'faithfulness'?)" in err
