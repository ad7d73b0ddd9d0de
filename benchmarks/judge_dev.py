"""The offline judge against the coverage baseline on three human-labeled development sets.

Sets (``../shared/data/JUDGE-DEV.md`` defines the mapping and the baseline):

- ``begin_dev``: dialogue responses, ``question`` = message (or "Continue the conversation."),
  ``contexts`` = [knowledge], ``answer`` = response; positive = "Fully attributable" ("Generic"
  left out); statistic: AUROC of faithfulness.
- ``ragchecker_dev``: two answers to one query with a reference; each answer scored alone
  (``question`` = query, ``reference`` = gt_answer, no contexts); statistic: pairwise AUROC of
  the metric's difference (response2 - response1) against the annotator's preference, over rows
  with a preference: answer_correctness vs correctness and overall, response_completeness vs
  completeness.
- ``summedits``: as ``benchmarks/summedits.py`` (halves A / B by document); faithfulness AUROC,
  and balanced accuracy on B with the threshold that maximises it on A.
- query-passage relevance: none of the sets labels it, so three proxies are built from them
  (:func:`relevance_proxies`); statistic: AUROC of context relevance (one chunk per sample)
  against the baseline's coverage of the query by the passage.

Faithfulness is computed from the judge's tasks as the Faithfulness metric does (claims of the
answer's sentences, verified against the chunks): the mean claim support when the judge grades
it (``support`` on each verdict, the offline judge), else supported claims / claims; an answer
without claims scores 1.0. Correctness and completeness are the real metrics
(:class:`~ragmeter.metrics.AnswerCorrectness`, :class:`~ragmeter.metrics.ResponseCompleteness`).

Splits for choosing settings: BEGIN by knowledge snippet, RAGChecker by query, each into "dev"
and "test" halves by a hash of the key (md5, even / odd); SummEdits half A is the dev half, half
B is held back and only scored with ``--final``.

Baseline (content-word coverage): lower-case ``[a-z0-9]+`` tokens minus the stop words of
``ragmeter/judges/offline/data/overlap_stop_words.txt``; share of
the candidate's tokens found in the evidence (answer vs context; reference vs answer).

Every statistic also gets a 95% interval, for the judge and for judge - baseline, by the cluster
bootstrap (:func:`interval`: documents, knowledge snippets or queries drawn with replacement, since
the items of one cluster are not independent), and the share of draws where the judge is above
the baseline: how sure a number is, and how far a gap between halves or a target is within
noise.

Also measured: the
calibration of faithfulness and of the judge's ``confidence`` against the binary labels of BEGIN
and SummEdits (:func:`calibration`: reliability table, expected calibration error, Brier score;
RAGChecker's labels are preferences, so it has none). The confidence and the combinations behind
every score are fit by ``benchmarks/fit_offline.py`` (leave-one-source-out; its table comes first
in ``JUDGE_RESULTS.md``); this script gives the numbers on whole development sets.

Run::

    python benchmarks/judge_dev.py                       # dev and test halves, lexical path
    python benchmarks/judge_dev.py --paths lexical,embedding
    python benchmarks/judge_dev.py --final               # also SummEdits half B (once, at the end)
    python benchmarks/judge_dev.py --reliability
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from summedits import auc, balanced_accuracy, best_threshold, split_halves  # noqa: E402
from summedits import load as load_summedits  # noqa: E402

DEFAULT_DATA = HERE.parent.parent / "shared" / "data"

_RE_WORD = re.compile(r"[a-z0-9]+")
HALVES = ("dev", "test", "all")
#: Bootstrap draws for the 95% intervals (:func:`interval`).
BOOTSTRAP = 1000
#: The value of an answer without claims (not applicable for the metric): the middle of the scale.
NO_CLAIMS = 0.5


def coverage(candidate: str, evidence: str) -> float:
    """The baseline: share of the candidate's content tokens found anywhere in the evidence
    (:func:`ragmeter.judges.offline.text.word_overlap`, which the offline judge also reads as a signal)."""
    from ragmeter.judges.offline.text import word_overlap

    return word_overlap(candidate, [frozenset(_RE_WORD.findall(evidence.lower()))])


def _half(key: str) -> str:
    return "dev" if int(hashlib.md5(key.encode("utf-8")).hexdigest(), 16) % 2 == 0 else "test"


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_begin(data: Path) -> list[dict]:
    """Non-generic BEGIN items as {question, context, answer, label, half}."""
    out = []
    for r in _jsonl(data / "begin_dev" / "begin_dev.jsonl"):
        if r["begin_label"] == "Generic":
            continue
        out.append(
            {
                "question": (r["message"] or "").strip() or "Continue the conversation.",
                "context": r["knowledge"],
                "answer": r["response"],
                "label": int(r["begin_label"] == "Fully attributable"),
                "half": _half(r["knowledge"]),
            }
        )
    return out


def load_ragchecker(data: Path) -> list[dict]:
    """RAGChecker rows with their split half."""
    rows = _jsonl(data / "ragchecker_dev" / "human_pairwise_dev.jsonl")
    for r in rows:
        r["half"] = _half(f"{r['dataset']}:{r['query_id']}")
    return rows


def pairwise_auc(diffs: np.ndarray, prefs: np.ndarray) -> tuple[float, float]:
    """AUROC of the score difference against the preference (rows with a preference), and the
    share of tied differences."""
    m = prefs != 0
    return auc(diffs[m], (prefs[m] > 0).astype(int)), float(np.mean(np.abs(diffs[m]) < 1e-12))


async def faithfulness(judge, question: str, answer: str, chunks: list[str]) -> tuple[float, list[dict]]:
    """Faithfulness as the metric computes it (the answer's distinct claims, verified against the
    chunks): the mean graded support when the judge gives one (``support``), else the supported
    share; NO_CLAIMS when the answer makes no claim (the metric says "not applicable"). Also the
    verdicts (empty without claims)."""
    from ragmeter.data import Sample
    from ragmeter.metrics.requests import ScoringContext

    ctx = ScoringContext(Sample(question=question, contexts=chunks, answer=answer), judge)
    if not await ctx.claims():
        return NO_CLAIMS, []
    verdicts = await ctx.claim_verdicts()
    return float(np.mean([v.get("support", float(v["verdict"] == "supported")) for v in verdicts])), verdicts


def answer_confidence(judge, value: float, verdicts: list[dict]) -> float | None:
    """An answer's calibrated confidence: the judge's map of its faithfulness ``value``
    (``judge.confidence``; None when the answer has no claim or the judge has no such map)."""
    if not verdicts or not callable(getattr(judge, "confidence", None)):
        return None
    return float(judge.confidence(value))


def calibration(p: np.ndarray, y: np.ndarray, bins: int = 10) -> dict:
    """Calibration of probabilities ``p`` against 0/1 labels ``y``: the reliability table (equal-width
    bins: n, mean p, share of positives), the expected calibration error (the n-weighted mean
    |mean p - share of positives| over the bins) and the Brier score (mean (p - y)^2)."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    idx = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    table, ece = [], 0.0
    for k in range(bins):
        m = idx == k
        if m.any():
            table.append((edges[k], edges[k + 1], int(m.sum()), float(p[m].mean()), float(y[m].mean())))
            ece += m.sum() / len(p) * abs(p[m].mean() - y[m].mean())
    return {"table": table, "ece": float(ece), "brier": float(np.mean((p - y) ** 2))}


async def _gather(coros, concurrency: int = 8):
    sem = asyncio.Semaphore(concurrency)

    async def one(c):
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


async def reference_scores(judge, rows: list[dict]) -> dict[str, np.ndarray]:
    """answer_correctness and response_completeness of response1 and response2 of every row."""
    from ragmeter.data import Sample
    from ragmeter.metrics import AnswerCorrectness, ResponseCompleteness
    from ragmeter.metrics.scoring import score_sample

    metrics = [AnswerCorrectness(), ResponseCompleteness()]
    cache: dict[tuple, dict] = {}

    async def one(query: str, answer: str, reference: str) -> dict:
        key = (query, answer, reference)
        if key not in cache:
            res = await score_sample(Sample(question=query, answer=answer, reference=reference), metrics, judge)
            cache[key] = {k: (s.value if s.value is not None else NO_CLAIMS) for k, s in res.scores.items()}
        return cache[key]

    jobs = [(r["query"], r[f"response{k}"], r["gt_answer"]) for r in rows for k in (1, 2)]
    for key in dict.fromkeys(jobs):
        await one(*key)
    out = {}
    for name in ("answer_correctness", "response_completeness"):
        s1 = np.array([cache[(r["query"], r["response1"], r["gt_answer"])][name] for r in rows])
        s2 = np.array([cache[(r["query"], r["response2"], r["gt_answer"])][name] for r in rows])
        out[name] = s2 - s1
    return out


def relevance_proxies(data: Path) -> dict[str, list[tuple[str, str, int]]]:
    """Query-passage relevance sets built from the labeled data at hand (the development data has
    no query-passage labels): (query, passage, relevant) triples.

    - ``ragchecker-qp``: each query with its reference answer (relevant) and with the reference of
      another query of the same domain (not relevant; seeded choice).
    - ``begin-qp``: every third dialogue message with its knowledge snippet (relevant) and with
      another item's snippet from the same source (not relevant): same-topic, hard negatives.
    - ``bundled-qp``: the bundled samples' question with each chunk, relevant when its
      ``relevant_ids`` grade is above 0 (``examples/rag_samples.jsonl``).
    """
    import random

    rng = random.Random(3)
    out: dict[str, list[tuple[str, str, int]]] = {}
    firsts: dict[tuple, dict] = {}
    for r in _jsonl(data / "ragchecker_dev" / "human_pairwise_dev.jsonl"):
        firsts.setdefault((r["dataset"], r["query_id"]), r)
    rows = list(firsts.values())
    out["ragchecker-qp"] = [
        t
        for r in rows
        for t in (
            (r["query"], r["gt_answer"], 1),
            (r["query"], rng.choice([x for x in rows if x["dataset"] == r["dataset"] and x is not r])["gt_answer"], 0),
        )
    ]
    begin = _jsonl(data / "begin_dev" / "begin_dev.jsonl")
    items = []
    for r in begin[::3]:
        q = (r["message"] or "").strip()
        if q:
            other = rng.choice(
                [x for x in begin if x["data_source"] == r["data_source"] and x["knowledge"] != r["knowledge"]]
            )
            items += [(q, r["knowledge"], 1), (q, other["knowledge"], 0)]
    out["begin-qp"] = items
    out["bundled-qp"] = [
        (r["question"], c["text"], int(r["relevant_ids"].get(c["id"], 0) > 0))
        for r in _jsonl(HERE.parent / "examples" / "rag_samples.jsonl")
        for c in r["contexts"]
    ]
    return out


async def context_relevance(judge, items: list[tuple[str, str, int]]) -> list[float]:
    """The ContextRelevance metric of each (query, passage) as a one-chunk sample."""
    from ragmeter.data import Sample
    from ragmeter.metrics import ContextRelevance
    from ragmeter.metrics.scoring import score_sample

    async def one(q: str, p: str) -> float:
        res = await score_sample(Sample(question=q, contexts=[p], answer="-"), [ContextRelevance()], judge)
        value = res.scores["context_relevance"].value
        return value if value is not None else 0.0

    return await _gather([one(q, p) for q, p, _ in items])


def _auc_pair(judge: np.ndarray, base: np.ndarray, labels: np.ndarray):
    """A statistic for :func:`interval`: (judge AUROC, baseline AUROC) on the rows ``idx``."""
    return lambda idx: (auc(judge[idx], labels[idx]), auc(base[idx], labels[idx]))


def _pairwise_pair(judge: np.ndarray, base: np.ndarray, prefs: np.ndarray):
    """A statistic for :func:`interval`: (judge, baseline) pairwise AUROC on the rows ``idx``."""
    return lambda idx: (pairwise_auc(judge[idx], prefs[idx])[0], pairwise_auc(base[idx], prefs[idx])[0])


def _bacc_pair(judge: np.ndarray, base: np.ndarray, labels: np.ndarray, t_judge: float, t_base: float):
    """A statistic for :func:`interval`: (judge, baseline) balanced accuracy at fixed thresholds."""
    return lambda idx: (
        balanced_accuracy(judge[idx], labels[idx], t_judge),
        balanced_accuracy(base[idx], labels[idx], t_base),
    )


def interval(stat, clusters: np.ndarray, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """95% percentile intervals of a (judge, baseline) statistic by the cluster bootstrap: the
    clusters (documents, knowledge snippets, queries: items of one cluster are not independent)
    are drawn with replacement ``n_boot`` times and ``stat(rows)`` is computed on each draw.
    Returns ``judge`` and ``diff`` (judge - baseline) as (2.5%, 97.5%) and ``wins``, the share of
    draws where the judge is above the baseline."""
    keys, inv = np.unique(clusters, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(inv, minlength=len(keys)))[:-1])
    rng = np.random.default_rng(seed)
    judge, diff = [], []
    for _ in range(n_boot):
        idx = np.concatenate([members[k] for k in rng.integers(0, len(keys), len(keys))])
        j, b = stat(idx)
        judge.append(j)
        diff.append(j - b)
    judge, diff = np.array(judge), np.array(diff)
    ok = ~np.isnan(diff)
    return {
        "judge": tuple(np.percentile(judge[ok], [2.5, 97.5])),
        "diff": tuple(np.percentile(diff[ok], [2.5, 97.5])),
        "wins": float(np.mean(diff[ok] > 0)),
        "clusters": len(keys),
    }


def run_path(path: str, data: Path, final: bool) -> list[dict]:
    """Every statistic of the judge on one path, with the baseline, per split half."""
    from ragmeter.judges.offline import OfflineJudge

    judge = OfflineJudge(embeddings=(path == "embedding"))
    rows: list[dict] = []
    t0 = time.perf_counter()

    begin = load_begin(data)
    b_out = asyncio.run(_gather([faithfulness(judge, it["question"], it["answer"], [it["context"]]) for it in begin]))
    b_scores = np.array([v for v, _ in b_out])
    b_base = np.array([coverage(it["answer"], it["context"]) for it in begin])
    b_lab = np.array([it["label"] for it in begin])
    b_half = np.array([it["half"] for it in begin])
    b_ctx = np.array([it["context"] for it in begin])
    for h in HALVES:
        m = b_half == h if h != "all" else np.ones(len(b_half), bool)
        rows.append(
            {
                "set": "begin",
                "stat": "faithfulness AUROC",
                "half": h,
                "n": int(m.sum()),
                "judge": auc(b_scores[m], b_lab[m]),
                "base": auc(b_base[m], b_lab[m]),
                "boot": (_auc_pair(b_scores[m], b_base[m], b_lab[m]), b_ctx[m]),
            }
        )

    rag = load_ragchecker(data)
    diffs = asyncio.run(reference_scores(judge, rag))
    base_diff = np.array(
        [coverage(r["gt_answer"], r["response2"]) - coverage(r["gt_answer"], r["response1"]) for r in rag]
    )
    r_half = np.array([r["half"] for r in rag])
    r_query = np.array([f"{r['dataset']}:{r['query_id']}" for r in rag])
    for metric, label in (
        ("answer_correctness", "correctness_label"),
        ("answer_correctness", "overall_label"),
        ("response_completeness", "completeness_label"),
    ):
        prefs = np.array([r[label] for r in rag])
        for h in HALVES:
            m = r_half == h if h != "all" else np.ones(len(r_half), bool)
            j, ties = pairwise_auc(diffs[metric][m], prefs[m])
            b, _ = pairwise_auc(base_diff[m], prefs[m])
            rows.append(
                {
                    "set": "ragchecker",
                    "stat": f"{metric} vs {label.split('_')[0]}",
                    "half": h,
                    "n": int((prefs[m] != 0).sum()),
                    "judge": j,
                    "base": b,
                    "ties": ties,
                    "boot": (_pairwise_pair(diffs[metric][m], base_diff[m], prefs[m]), r_query[m]),
                }
            )

    items, docs = load_summedits(data / "summedits")
    half = split_halves(docs)
    if not final:
        items = [it for it in items if half[it["doc_id"]] == "A"]
    s_out = asyncio.run(
        _gather(
            [faithfulness(judge, "Summarize the document.", it["summary"], [docs[it["doc_id"]]["doc"]]) for it in items]
        )
    )
    s_scores = np.array([v for v, _ in s_out])
    s_base = np.array([coverage(it["summary"], docs[it["doc_id"]]["doc"]) for it in items])
    s_lab = np.array([int(it["label"]) for it in items])
    s_half = np.array([half[it["doc_id"]] for it in items])
    s_doc = np.array([it["doc_id"] for it in items])
    a = s_half == "A"
    t_j, ba_j = best_threshold(s_scores[a], s_lab[a])
    t_b, ba_b = best_threshold(s_base[a], s_lab[a])
    rows.append(
        {
            "set": "summedits",
            "stat": "faithfulness AUROC",
            "half": "A",
            "n": int(a.sum()),
            "judge": auc(s_scores[a], s_lab[a]),
            "base": auc(s_base[a], s_lab[a]),
            "boot": (_auc_pair(s_scores[a], s_base[a], s_lab[a]), s_doc[a]),
        }
    )
    rows.append(
        {
            "set": "summedits",
            "stat": "faithfulness bAcc (fit on A)",
            "half": "A",
            "n": int(a.sum()),
            "judge": ba_j,
            "base": ba_b,
            "boot": (_bacc_pair(s_scores[a], s_base[a], s_lab[a], t_j, t_b), s_doc[a]),
        }
    )
    if final:
        b = s_half == "B"
        rows.append(
            {
                "set": "summedits",
                "stat": "faithfulness AUROC",
                "half": "B",
                "n": int(b.sum()),
                "judge": auc(s_scores[b], s_lab[b]),
                "base": auc(s_base[b], s_lab[b]),
                "boot": (_auc_pair(s_scores[b], s_base[b], s_lab[b]), s_doc[b]),
            }
        )
        rows.append(
            {
                "set": "summedits",
                "stat": "faithfulness bAcc (t from A)",
                "half": "B",
                "n": int(b.sum()),
                "judge": balanced_accuracy(s_scores[b], s_lab[b], t_j),
                "base": balanced_accuracy(s_base[b], s_lab[b], t_b),
                "boot": (_bacc_pair(s_scores[b], s_base[b], s_lab[b], t_j, t_b), s_doc[b]),
            }
        )
    for name, items in relevance_proxies(data).items():
        scores = np.array(asyncio.run(context_relevance(judge, items)))
        y = np.array([it[2] for it in items])
        base = np.array([coverage(q, p) for q, p, _ in items])
        rows.append(
            {
                "set": name,
                "stat": "context_relevance AUROC (proxy)",
                "half": "all",
                "n": len(items),
                "judge": auc(scores, y),
                "base": auc(base, y),
                "boot": (_auc_pair(scores, base, y), np.array([q for q, _, _ in items])),
            }
        )
    # Calibration of faithfulness against the binary labels (answers with claims: the metric is
    # "not applicable" to the others); RAGChecker's labels are preferences between two answers,
    # so no absolute probability can be checked against them.
    groups = [("begin", h, b_out, b_lab, b_half == h if h != "all" else np.ones(len(b_half), bool)) for h in HALVES]
    groups += [("summedits", h, s_out, s_lab, s_half == h) for h in (("A", "B") if final else ("A",))]
    for name, h, out, lab, m in groups:
        keep = [i for i in np.flatnonzero(m) if out[i][1]]
        y = lab[keep].astype(float)
        score = calibration(np.array([out[i][0] for i in keep]), y)
        conf = [answer_confidence(judge, out[i][0], out[i][1]) for i in keep]
        rows.append(
            {
                "set": name,
                "stat": "faithfulness calibration",
                "half": h,
                "n": len(keep),
                "calibration": True,
                "score": score,
                "confidence": calibration(np.array(conf), y) if None not in conf else None,
            }
        )
    for r in rows:
        r["path"] = path
    print(f"[{path}] {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="folder holding the three sets")
    parser.add_argument("--paths", default="lexical", help="comma-separated: lexical, embedding")
    parser.add_argument("--final", action="store_true", help="also score SummEdits half B (held back)")
    parser.add_argument("--reliability", action="store_true", help="print the reliability tables")
    args = parser.parse_args(argv)
    rows = []
    for path in [p.strip() for p in args.paths.split(",") if p.strip()]:
        rows.extend(run_path(path, Path(args.data), args.final))
    print("| path | set | statistic | half | n | judge | baseline | judge - baseline |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        if r.get("calibration"):
            continue
        ties = f" ({r['ties']:.0%} ties)" if r.get("ties", 0) > 0.2 else ""
        print(
            f"| {r['path']} | {r['set']} | {r['stat']} | {r['half']} | {r['n']} | {r['judge']:.3f}{ties} | "
            f"{r['base']:.3f} | {r['judge'] - r['base']:+.3f} |"
        )
    print()
    print(
        f"95% intervals, cluster bootstrap ({BOOTSTRAP} draws of documents, knowledge snippets or queries);"
        " 'judge > baseline' is the share of draws where the judge is above the baseline:"
    )
    print()
    print("| path | set | statistic | half | clusters | judge | judge - baseline | judge > baseline |")
    print("|---|---|---|---|---:|---|---|---:|")
    for r in rows:
        if r.get("boot") is None:
            continue
        ci = interval(*r["boot"])
        print(
            f"| {r['path']} | {r['set']} | {r['stat']} | {r['half']} | {ci['clusters']} | "
            f"{r['judge']:.3f} [{ci['judge'][0]:.3f}, {ci['judge'][1]:.3f}] | "
            f"{r['judge'] - r['base']:+.3f} [{ci['diff'][0]:+.3f}, {ci['diff'][1]:+.3f}] | {ci['wins']:.0%} |"
        )
    print()
    print("| path | set | half | n | positives | faithfulness ECE / Brier | confidence ECE / Brier |")
    print("|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        if r.get("calibration"):
            sc, cf = r["score"], r["confidence"]
            pos = sum(n * share for _, _, n, _, share in sc["table"]) / max(1, r["n"])
            conf = f"{cf['ece']:.3f} / {cf['brier']:.3f}" if cf else "-"
            print(
                f"| {r['path']} | {r['set']} | {r['half']} | {r['n']} | {pos:.0%} | "
                f"{sc['ece']:.3f} / {sc['brier']:.3f} | {conf} |"
            )
    if args.reliability:
        for r in rows:
            if not r.get("calibration"):
                continue
            for what in ("score", "confidence"):
                if r[what] is None:
                    continue
                label = "faithfulness" if what == "score" else what
                print(f"\nReliability, {r['path']} {r['set']} {r['half']}, {label}:\n")
                print("| bin | n | mean | positives |")
                print("|---|---:|---:|---:|")
                for lo, hi, n, mean, share in r[what]["table"]:
                    print(f"| {lo:.1f}-{hi:.1f} | {n} | {mean:.3f} | {share:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
