"""How well does the offline judge detect unfaithful summaries? (SummEdits, balanced accuracy)

Each SummEdits item is a (document, summary, label) triple; label 1 = the summary is consistent
with the document. We score every item with the offline judge exactly as the Faithfulness metric
would: ``extract_claims`` on ``{"question": "", "units": split_sentences(summary)}``, then
``verify_claims`` on ``{"claims": [...], "chunks": [document]}``; the score is the mean graded
support of the claims (``support`` on each verdict; a judge without it: supported claims /
claims), 1.0 when the summary yields no claim. Since issue 15 the offline judge grades support
(see ``benchmarks/JUDGE_RESULTS.md``, which also holds the numbers of that version; the table
below is of the pass/fail version before it).

Protocol (fixed before looking at results, and the only one reported):

- Split: documents, not items. Within each domain, the documents are sorted by ``doc_id`` (a hex
  hash, so the order is arbitrary) and alternately assigned to half A (even positions) and half B
  (odd positions). Every item follows its document, so no document is in both halves.
- Threshold: "consistent" means score >= t. t is the value that maximises balanced accuracy on
  one half (ties broken towards the smaller t); balanced accuracy is then measured on the other
  half with that t. "A -> B" (threshold from A, measured on B) is the held-out number; "B -> A" is
  the swap, reported for information, as is the AUC of the score on each half.
- Tuning: every setting of the offline judge (OfflineSettings, the word lists) was chosen by the
  balanced accuracy at the best threshold on half A only; among settings within 0.005 of the best,
  the stricter support threshold was preferred (safer outside SummEdits). Half B was scored six
  times during the first development round: after the first tuning round (lexical 0.627), after
  adding the WordNet antonym and irregular-verb lists (0.628, twice), after the last change, an
  inserted-negation check chosen on half A (0.632), and after speed-only changes and dropping
  punctuation-only "sentences" (0.632, twice). A second round (error analysis by edit type on
  half A; every choice made on half A only, with A's documents also split into two folds to see
  whether a change helped both; clitic stemming and placing figures by their neighbouring words
  were kept as corrections although about neutral on A) scored half B twice more: 7th, midway (lexical 0.654, embedding 0.652), after
  the word-by-word alignment checks, sentence-level negation, "not only" / "no doubt" not read as
  negations, clitics ("company's") stemmed, titles before names ("Mr. Smith"), figures placed by
  their neighbouring words, and set order out of the reasons; 8th, final (lexical 0.649, embedding
  0.649), after the role-swap rule was rewritten, alignment anchors allowed across one- or
  two-word differences, an added "only" / "all" caught at the start of a claim, and the
  embedding path's support threshold set to the lexical one (0.30 -> 0.25). Half B's numbers were
  never used to choose a setting. After the 8th run, one bug fix found on the bundled RAG examples
  (not on SummEdits) changed claim splitting: a coordinated bare predicate whose subject cannot be
  found is no longer split off as a subject-less fragment ("... how branches diverged and came
  together" gave the claim "came together."). The 9th scoring of half B, to keep the published
  numbers true, gave 0.6495 on both paths. A third round (new session) chose, on half A only
  with A's two folds both improving, checks that are general rather than SummEdits word lists:
  each sentence of a multi-sentence passage also aligned on its own, "$8.2m" / "$8.2 million"
  and "Q3" / "third quarter" aligned in one spelling, an antonym checked against the words next
  to the claim's word rather than the whole claim, a one-for-one swap of words of opposite
  sentiment (VADER lexicon, |valence| >= 1.5), and thousands / millions / billions as a closed
  class. Half A went from 0.6980 to 0.7025 (folds 0.7055 -> 0.7101 and 0.6905 -> 0.6950); tried
  on half A and rejected: the same-slot replacement of a document word, inserted words absent
  from the document, indirect WordNet antonyms, a lower bar for inserted negations, dates placed
  near the passage, sentiment outside the alignment, a lower support threshold (0.20 scored
  +0.0016 on A, within the 0.005 that keeps the stricter setting). The 10th and final scoring of
  half B gave 0.6481 on both paths, 0.0014 below the 9th: the gains on A did not carry over.
  Nothing was changed after it.

Published anchors (balanced accuracy on SummEdits): SummaC-Conv 0.571, ChatGPT 0.712, GPT-4 0.821.

Results of this version (4,681 items, 162 documents; 2 CPUs; embedding time excludes the one-off
model load of a few seconds)::

    | path      | t (from A) | held-out BA A->B | t (from B) | swap BA B->A | AUC A | AUC B | time  |
    |-----------|-----------:|-----------------:|-----------:|-------------:|------:|------:|------:|
    | lexical   |      0.800 |           0.6481 |      0.800 |       0.7025 | 0.707 | 0.653 |  7 s  |
    | embedding |      0.800 |           0.6481 |      0.800 |       0.7032 | 0.708 | 0.653 |  9 s  |

(The second round's version: held-out 0.6495 / 0.6495, swap 0.6980 / 0.6987, AUC A 0.703 /
0.704, AUC B 0.654; the first round's: held-out 0.632 / 0.630.) The held-out number, 0.6481, is
below the 0.65 target. Over the last three scorings it moved 0.654 -> 0.6495 -> 0.6481 while
half A rose: the differences are within the noise of a half of 81 documents, and the gap between
the halves (0.70 on A, 0.65 on B, with the same threshold) is larger than anything the last two
rounds changed. By domain (A->B, lexical): ectsum 0.761, sales_email 0.683, scitldr 0.657,
sales_call 0.648, samsum 0.632, podcast 0.611, qmsumm 0.602, news 0.585.

What the checks catch: changed numbers, names, dates, negations (also at sentence level and as an
aligned difference), antonyms, another value of a closed class in the same place ("after a
month" for "after a year", "fourth" for "first", "she" for "he"), swapped roles, an added
"only" / "all". Most of the gain on half A is fewer false alarms (at t = 0.8, 93.2% of the
consistent items kept against 91.6%), not more catches. What they miss, by error analysis on
half A: of the 775 inconsistent items whose edits change only lower-case words ("learn" ->
"infer", "smartphones" -> "laptops", "comprehensive" -> "limited"), 69% still score as
consistent, because the consistent items of SummEdits are themselves paraphrases that replace the
same kinds of words with synonyms ("arrested" -> "detained"); word lists, WordNet relations
(synonyms, sister terms: tried on half A, no gain) and the small embedding model (AUC 0.54 for the replaced and replacing
words in context, 0.58 for the whole edited summary against its original) do not tell the two
apart. Coverage of the claim's words does not either (the consistent paraphrases cover fewer of
the document's words than the inconsistent edits).
The embedding signal (claim-passage cosine) only rescues claims the lexical signals reject and
leaves the accuracy where the lexical path has it.

Run::

    python benchmarks/summedits.py                    # both paths, full data
    python benchmarks/summedits.py --quick            # 30 documents, for a smoke test
    python benchmarks/summedits.py --paths lexical    # lexical signals only
    python benchmarks/summedits.py /path/to/summedits # items.jsonl + docs.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "summedits"


def load(data_dir: Path) -> tuple[list[dict], dict[str, dict]]:
    """Items (id, domain, doc_id, summary, label) and documents by doc_id."""
    docs = {}
    with open(data_dir / "docs.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                docs[d["doc_id"]] = d
    items = []
    with open(data_dir / "items.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                it = json.loads(line)
                if it["doc_id"] in docs:
                    items.append(it)
    return items, docs


def split_halves(docs: dict[str, dict]) -> dict[str, str]:
    """doc_id -> "A" | "B": per domain, documents sorted by doc_id alternate A, B, A, B, ..."""
    by_domain: dict[str, list[str]] = defaultdict(list)
    for doc_id, d in docs.items():
        by_domain[d.get("domain", "")].append(doc_id)
    half = {}
    for domain in sorted(by_domain):
        for i, doc_id in enumerate(sorted(by_domain[domain])):
            half[doc_id] = "A" if i % 2 == 0 else "B"
    return half


def balanced_accuracy(scores: np.ndarray, labels: np.ndarray, t: float) -> float:
    """Mean of the recall on consistent (score >= t) and on inconsistent (score < t) items."""
    pred = scores >= t
    pos, neg = labels == 1, labels == 0
    tpr = float(np.mean(pred[pos])) if pos.any() else 0.0
    tnr = float(np.mean(~pred[neg])) if neg.any() else 0.0
    return (tpr + tnr) / 2


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """(t, balanced accuracy) maximising balanced accuracy over all distinct score cut points."""
    candidates = sorted(set(np.round(scores, 9).tolist()) | {float("inf")})
    best_t, best_ba = candidates[0], -1.0
    for t in candidates:
        ba = balanced_accuracy(scores, labels, t)
        if ba > best_ba + 1e-12:
            best_t, best_ba = t, ba
    return best_t, best_ba


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties count half): the Mann-Whitney statistic
    ``(sum of the positives' ranks - n1 (n1 + 1) / 2) / (n1 n0)``, tied scores sharing their mean
    rank. Example: scores [0.9, 0.5, 0.5, 0.1], labels [1, 1, 0, 0]: ranks 4, 2.5, 2.5, 1, so
    (6.5 - 3) / 4 = 0.875."""
    scores, labels = np.asarray(scores, float), np.asarray(labels)
    n1 = int(np.sum(labels == 1))
    n0 = int(np.sum(labels == 0))
    if not n1 or not n0:
        return float("nan")
    _, inv, counts = np.unique(scores, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2
    ranks = mean_rank[inv.ravel()]
    return float((ranks[labels == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


async def score_items(judge, items: list[dict], docs: dict[str, dict], concurrency: int = 8) -> list[float]:
    """Faithfulness (supported claims / claims) of every item, from the judge's tasks."""
    from ragmeter.text import split_sentences

    sem = asyncio.Semaphore(concurrency)

    async def one(it: dict) -> float:
        async with sem:
            units = split_sentences(it["summary"])
            claims = (await judge.run("extract_claims", {"question": "", "units": units})).output["claims"]
            if not claims:
                return 1.0
            out = await judge.run(
                "verify_claims", {"claims": [c["text"] for c in claims], "chunks": [docs[it["doc_id"]]["doc"]]}
            )
            verdicts = out.output["verdicts"]
            # the mean graded support when the judge gives one (the offline judge), else the supported share
            return sum(v.get("support", float(v["verdict"] == "supported")) for v in verdicts) / len(verdicts)

    return list(await asyncio.gather(*(one(it) for it in items)))


def evaluate(scores: np.ndarray, labels: np.ndarray, halves: np.ndarray) -> dict:
    """Thresholds and balanced accuracies in both directions, plus AUCs."""
    a, b = halves == "A", halves == "B"
    t_a, ba_a_fit = best_threshold(scores[a], labels[a])
    t_b, ba_b_fit = best_threshold(scores[b], labels[b])
    return {
        "t_A": t_a,
        "fit_A": ba_a_fit,
        "A->B": balanced_accuracy(scores[b], labels[b], t_a),
        "t_B": t_b,
        "fit_B": ba_b_fit,
        "B->A": balanced_accuracy(scores[a], labels[a], t_b),
        "auc_A": auc(scores[a], labels[a]),
        "auc_B": auc(scores[b], labels[b]),
        "n_A": int(a.sum()),
        "n_B": int(b.sum()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="folder with items.jsonl and docs.jsonl")
    parser.add_argument("--quick", action="store_true", help="30 documents (15 per half) only")
    parser.add_argument("--paths", default="lexical,embedding", help="comma-separated: lexical, embedding")
    parser.add_argument("--by-domain", action="store_true", help="also print held-out balanced accuracy per domain")
    parser.add_argument("--dump", help="write per-item scores to this JSONL file")
    args = parser.parse_args(argv)

    from ragmeter.judges.offline import OfflineJudge

    items, docs = load(Path(args.data))
    half = split_halves(docs)
    if args.quick:
        keep = set()
        for h in ("A", "B"):
            keep |= set(sorted(d for d in docs if half[d] == h)[:15])
        items = [it for it in items if it["doc_id"] in keep]
    labels = np.array([int(it["label"]) for it in items])
    halves = np.array([half[it["doc_id"]] for it in items])
    print(
        f"SummEdits: {len(items)} items, {len({it['doc_id'] for it in items})} documents "
        f"(half A: {int((halves == 'A').sum())} items, half B: {int((halves == 'B').sum())} items; "
        f"{labels.mean():.1%} consistent)"
    )

    rows = []
    dumps: dict[str, list[float]] = {}
    for path in [p.strip() for p in args.paths.split(",") if p.strip()]:
        if path not in ("lexical", "embedding"):
            parser.error(f"unknown path {path!r}")
        judge = OfflineJudge(embeddings=(path == "embedding"))
        if path == "embedding":
            judge.embedder.encode(["warm up"])  # model load is not part of the timing
        t0 = time.perf_counter()
        scores = np.array(asyncio.run(score_items(judge, items, docs)))
        elapsed = time.perf_counter() - t0
        res = evaluate(scores, labels, halves)
        res.update(path=path, seconds=elapsed, per_item_ms=1000 * elapsed / max(1, len(items)))
        rows.append(res)
        dumps[path] = scores.tolist()
        if args.by_domain:
            doms = np.array([it["domain"] for it in items])
            for d in sorted(set(doms)):
                m = doms == d
                ba_ab = balanced_accuracy(scores[m & (halves == "B")], labels[m & (halves == "B")], res["t_A"])
                ba_ba = balanced_accuracy(scores[m & (halves == "A")], labels[m & (halves == "A")], res["t_B"])
                print(f"  {path:9s} {d:12s} A->B {ba_ab:.3f}  B->A {ba_ba:.3f}  (n={int(m.sum())})")

    print()
    print(
        "| path      | t (from A) | held-out BA A->B | t (from B) | swap BA B->A | AUC A | AUC B | time    | ms/item |"
    )
    print(
        "|-----------|-----------:|-----------------:|-----------:|-------------:|------:|------:|--------:|--------:|"
    )
    for r in rows:
        print(
            f"| {r['path']:9s} | {r['t_A']:10.3f} | {r['A->B']:16.4f} | {r['t_B']:10.3f} | {r['B->A']:12.4f} | "
            f"{r['auc_A']:5.3f} | {r['auc_B']:5.3f} | {r['seconds']:6.1f}s | {r['per_item_ms']:7.1f} |"
        )
    print("\nAnchors (balanced accuracy): SummaC-Conv 0.571, ChatGPT 0.712, GPT-4 0.821. Target: >= 0.65 held out.")
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            for i, it in enumerate(items):
                rec = {
                    "id": it["id"],
                    "doc_id": it["doc_id"],
                    "half": str(halves[i]),
                    "label": int(labels[i]),
                    "domain": it["domain"],
                    **{f"score_{k}": v[i] for k, v in dumps.items()},
                }
                f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
