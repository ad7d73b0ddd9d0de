"""Which composite score agrees best with the human "overall" preference? (RAGChecker development data)

The dashboard grades each sample by one composite of its judged metrics
(:func:`ragmeter.verdicts.composite_score`). This benchmark chooses the default form by evidence:
on ``ragchecker_dev`` (``../shared/data/JUDGE-DEV.md``: two answers to one query, a reference,
two annotators who each say which answer is better overall, -2..2), every answer is scored alone
by the offline judge, the composite is computed in each form, and the statistic is the pairwise
AUROC of the composite's difference (response2 - response1) against the annotator's overall
preference, over the rows with a preference (ties count half). 95% intervals by the cluster
bootstrap over queries (:func:`judge_dev.interval`), for each form and for its difference to the
harmonic mean (the default before this benchmark).

What applies to this data, and so what is measured: the answers come with a query and a
reference but **no retrieved chunks**, so only the answer-side judged metrics have values:
``answer_correctness`` and ``response_completeness`` (against the reference) and
``answer_relevancy`` (question and answer). Faithfulness, the context metrics (recall, precision,
relevance), entity recall, citation metrics and hallucinated specifics need chunks and are not
scored; the retrieval metrics need chunk ids. So the comparison says how the forms combine three
metrics of answer quality; it cannot say how they weigh a retrieval failure (a context recall of
0, the cause of the bundled samples' F 0.00 under the harmonic mean) against a good answer. The
second table shows what each form does to the 20 bundled samples (every default metric scored,
no human labels: descriptive only).

Forms: ``harmonic`` (n / sum 1/s_i, 0 when any is 0), ``weighted`` (the arithmetic mean),
``geometric`` ((prod s_i)^(1/n), 0 when any is 0), ``min``, and each metric alone for reference.

Run::

    python benchmarks/composite_dev.py                 # ../shared/data, the offline judge with embeddings
    python benchmarks/composite_dev.py --lexical       # the lexical path only
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from judge_dev import DEFAULT_DATA, _gather, interval, load_ragchecker, pairwise_auc  # noqa: E402

METRICS = ("answer_correctness", "response_completeness", "answer_relevancy")
FORMS = ("harmonic", "weighted", "geometric", "min")


async def score_answers(judge, rows: list[dict]) -> dict[tuple, dict]:
    """Every distinct (query, answer, reference) scored on :data:`METRICS`: the Scores by metric."""
    from ragmeter.data import Sample
    from ragmeter.metrics import get_metric
    from ragmeter.metrics.scoring import score_sample

    metrics = [get_metric(m) for m in METRICS]
    keys = list(dict.fromkeys((r["query"], r[f"response{k}"], r["gt_answer"]) for r in rows for k in (1, 2)))
    results = await _gather(
        [score_sample(Sample(question=q, answer=a, reference=ref), metrics, judge) for q, a, ref in keys]
    )
    return {key: res.scores for key, res in zip(keys, results)}


def composite(scores: dict, form: str, names: tuple[str, ...]) -> float:
    """The composite of ``names`` in ``form``; a metric without a value is left out (as on the
    dashboard); NaN when none has one."""
    from ragmeter.verdicts import composite_score

    value = composite_score({m: scores[m] for m in names if m in scores}, {m: 1.0 for m in names}, form)
    return float("nan") if value is None else value


def _pair(a: np.ndarray, b: np.ndarray, prefs: np.ndarray):
    return lambda idx: (pairwise_auc(a[idx], prefs[idx])[0], pairwise_auc(b[idx], prefs[idx])[0])


def bundled_grades(judge) -> dict[str, dict]:
    """Per form: the letter grades and the share of F 0.00 of the 20 bundled samples."""
    import ragmeter as rm
    from ragmeter.verdicts import composite_score, grade

    result = rm.evaluate(str(HERE.parent / "examples" / "rag_samples.jsonl"), judge=judge, progress=False)
    out = {}
    for form in FORMS:
        values = [composite_score(r.scores, method=form) for r in result]
        grades = [grade(v) for v in values if v is not None]
        out[form] = {
            "grades": {g: grades.count(g) for g in "ABCDF"},
            "zero": sum(v == 0.0 for v in values),
            "mean": float(np.mean([v for v in values if v is not None])),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="folder holding ragchecker_dev/")
    parser.add_argument("--lexical", action="store_true", help="the offline judge without embeddings")
    args = parser.parse_args(argv)
    from ragmeter.judges.offline import OfflineJudge

    judge = OfflineJudge(embeddings=not args.lexical)
    rows = load_ragchecker(Path(args.data))
    scored = asyncio.run(score_answers(judge, rows))
    prefs = np.array([r["overall_label"] for r in rows])
    queries = np.array([f"{r['dataset']}:{r['query_id']}" for r in rows])
    keyed = [((r["query"], r["response1"], r["gt_answer"]), (r["query"], r["response2"], r["gt_answer"])) for r in rows]

    def diffs(value) -> np.ndarray:
        return np.array([value(scored[k2]) - value(scored[k1]) for k1, k2 in keyed])

    def form_of(form: str, names: tuple[str, ...]):
        return lambda s: composite(s, form, names)

    def alone(m: str):
        return lambda s: s[m].value if s[m].value is not None else float("nan")

    applied = {m: sum(scored[k][m].value is not None for k in scored) for m in METRICS}
    print(
        f"judge: {judge.name}; {len(scored)} answers scored, values per metric: "
        + ", ".join(f"{m} {n}" for m, n in applied.items())
    )
    print(f"rows with an overall preference: {int((prefs != 0).sum())} of {len(rows)} ({len(set(queries))} queries)\n")
    sets = {"all three": METRICS, "correctness + completeness": METRICS[:2]}
    print(
        "| composite | metrics | pairwise AUROC vs overall [95% CI] | minus harmonic [95% CI] | above harmonic | ties |"
    )
    print("|---|---|---|---|---:|---:|")
    for label, names in sets.items():
        base = diffs(form_of("harmonic", names))
        for form in FORMS:
            d = diffs(form_of(form, names))
            ok = ~np.isnan(d) & ~np.isnan(base)
            auc, ties = pairwise_auc(d[ok], prefs[ok])
            ci = interval(_pair(d[ok], base[ok], prefs[ok]), queries[ok])
            delta = (
                "-"
                if form == "harmonic"
                else (f"{auc - pairwise_auc(base[ok], prefs[ok])[0]:+.3f} [{ci['diff'][0]:+.3f}, {ci['diff'][1]:+.3f}]")
            )
            above = "-" if form == "harmonic" else f"{ci['wins']:.0%}"
            print(
                f"| {form} | {label} | {auc:.3f} [{ci['judge'][0]:.3f}, {ci['judge'][1]:.3f}] | {delta} | "
                f"{above} | {ties:.0%} |"
            )
    for m in METRICS:
        d = diffs(alone(m))
        ok = ~np.isnan(d)
        auc, ties = pairwise_auc(d[ok], prefs[ok])
        ci = interval(_pair(d[ok], d[ok], prefs[ok]), queries[ok])
        print(f"| {m} alone | - | {auc:.3f} [{ci['judge'][0]:.3f}, {ci['judge'][1]:.3f}] | - | - | {ties:.0%} |")
    print("\nThe 20 bundled samples (examples/rag_samples.jsonl, default metrics, no human labels):\n")
    print("| composite | A | B | C | D | F | of which 0.00 | mean |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for form, g in bundled_grades(judge).items():
        print(f"| {form} | " + " | ".join(str(g["grades"][x]) for x in "ABCDF") + f" | {g['zero']} | {g['mean']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
