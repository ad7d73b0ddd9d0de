"""Fit the offline judge's combinations by leave-one-source-out, and write them as package data.

The offline judge turns its signals (word overlap, graded support, the rules' verdict and which
hard check failed, relevance by words ...; :mod:`ragmeter.judges.offline.model`) into one score
per item with a small logistic model per judged quantity, each weight held to its expected sign.
This script fits them on the human labels of ``../shared/data`` (``JUDGE-DEV.md``):

- ``claim_support`` on SummEdits (8 domains, cluster = document) and BEGIN (``wow``, ``cmu``,
  cluster = knowledge snippet): an answer's value is the mean of its claims' probabilities (what
  Faithfulness averages), fit by the log-likelihood of the answer's label, each source weighted
  equally, with an intercept per source (the sources' shares of positives differ; AUROC is
  measured within a source);
- ``reference_coverage`` on RAGChecker (5 domains, cluster = query): each response's answer
  correctness and response completeness are computed from its claims' and the reference
  statements' scores exactly as the metrics compute them (word-weighted shares, F1, 0.25 of
  embedding similarity for correctness), and the model is fit by the pairwise likelihood of the
  annotators' preferences (correctness and overall against answer correctness, completeness
  against response completeness), one scale per label;
- ``relevance``: no labeled query-passage source exists in ``shared/data``. The three proxies of
  ``judge_dev.relevance_proxies`` (each RAGChecker query with its reference and another query's;
  BEGIN messages with their snippet and another of the same source; the bundled samples' graded
  chunks) stand in, fit like claim support (a passage's value = its statements' mean).

Model choice, for each quantity and path: start from word overlap alone (the trivial baseline as
the model's only signal), then add signals one at a time (forward selection): a signal is kept
only when the leave-one-source-out mean AUROC improves (by at least 0.001, not fit noise) and no
held-out source loses more than 0.01 against the model without it; then the L2 strength is
chosen from a grid the same way.
Leave-one-source-out: fit on every source but one, score the one left out (with the mean of the
other sources' intercepts), for each source in turn. Every held-out AUROC is printed with the
coverage baseline's on the same items and a 95% cluster-bootstrap interval of the difference.

Features are extracted once per path and cached (``benchmarks/.cache/``, gitignored; keyed by a
hash of the judge's code and word lists), so a refit takes minutes. Deterministic: fixed seeds,
scipy's L-BFGS-B; a cold rerun gives the same file on the lexical path. On the embedding path the
MiniLM's float32 vectors move in their last bits with how texts are batched, and the coverage model
there sits in its linear regime, where its weight and the preferences' scale trade off: a rerun
moved that weight (0.0014 -> 0.0002) with every score the same to 4 decimals.

Run::

    python benchmarks/fit_offline.py ../shared/data                   # fit, print, write the package data
    python benchmarks/fit_offline.py ../shared/data --no-write        # fit and print only
    python benchmarks/fit_offline.py DATA --grounding FOLDER --out my.json   # with a grounding model's signals

A grounding model (``--grounding``: a folder or hub name of a sentence-pair classifier) adds its
``entailment`` and ``contradiction`` probabilities as claim-support signals; the coefficients go
to ``--out``, read by ``OfflineJudge(grounding=..., combinations="my.json")``. To fit on your own
labels, write them in the shape of one of the sets above and point the loaders at them.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from judge_dev import (  # noqa: E402
    DEFAULT_DATA,
    _auc_pair,
    _jsonl,
    _pairwise_pair,
    coverage,
    interval,
    pairwise_auc,
    relevance_proxies,
)
from summedits import auc  # noqa: E402
from summedits import load as load_summedits  # noqa: E402

CACHE = HERE / ".cache"
PACKAGE_FILE = HERE.parent / "core" / "judges" / "offline" / "data" / "combinations.json"
#: L2 strengths tried after the signals are chosen; the first is used while choosing them.
LAMBDAS = (0.01, 0.003, 0.03, 0.1)
#: How much a held-out source may lose when a signal is added (the rule of issue 35).
MAX_LOSS = 0.01
#: How much a signal must raise the mean held-out AUROC to be kept (below it: noise of the fit).
MIN_GAIN = 0.001
#: Signals tried for each quantity, in this order (ties in the selection go to the earlier one).
CANDIDATES = {
    "claim_support": (
        "coverage",
        "graded",
        "passage",
        "window",
        "supported",
        "together",
        "contradicted",
        "unverified",
        "specifics",
        "antonym",
        "negation",
        "alignment",
    ),
    "reference_coverage": (
        "coverage",
        "graded",
        "passage",
        "window",
        "supported",
        "contradicted",
        "unverified",
        "specifics",
        "antonym",
        "negation",
        "alignment",
    ),
    "relevance": ("question", "chunk", "relevant", "partial", "similarity"),
}
#: The labels of RAGChecker and the metric each is compared with.
PAIR_LABELS = (
    ("correctness_label", "correctness"),
    ("overall_label", "correctness"),
    ("completeness_label", "completeness"),
)


def _code_hash(grounding: str | None) -> str:
    """A hash of what the features depend on: the offline judge's code and word lists (not the
    shipped coefficients), the metrics' splitting, and the grounding model's name."""
    root = HERE.parent / "core"
    offline = root / "judges" / "offline"
    files = [f for f in sorted(offline.glob("*.py")) if f.name not in ("model.py", "grounding.py", "__init__.py")]
    files += sorted((offline / "data").glob("*.txt"))
    files += [
        root / "text.py",
        root / "specifics.py",
        root / "specifics_extraction.py",
        root / "citations.py",
    ]
    h = hashlib.sha256((grounding or "").encode())
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- extraction


async def _claims(judge, question: str, answer: str, chunks: list[str]) -> list[dict]:
    """Per claim of the answer (as the metrics extract them), its claim-support signals."""
    from ragmeter.data import Sample
    from ragmeter.metrics.requests import ScoringContext

    ctx = ScoringContext(Sample(question=question, contexts=chunks, answer=answer), judge)
    claims = await ctx.claims()
    if not claims:
        return []
    out = await judge.signals(
        "verify_claims", {"claims": [c["text"] for c in claims], "chunks": ctx.sample.context_texts}
    )
    return [v["features"] for v in out["verdicts"]]


async def _reference(judge, query: str, answer: str, reference: str) -> dict:
    """One RAGChecker response: its claims' and the reference statements' signals and word counts
    (as compare_claims sees them) and the answer-reference similarity answer correctness adds."""
    from ragmeter.data import Sample
    from ragmeter.metrics import AnswerCorrectness
    from ragmeter.metrics.requests import ScoringContext
    from ragmeter.metrics.scoring import score_sample
    from ragmeter.text import split_sentences

    sample = Sample(question=query, answer=answer, reference=reference)
    ctx = ScoringContext(sample, judge)
    claims = await ctx.claims()
    statements = split_sentences(reference)
    res = await score_sample(sample, [AnswerCorrectness(weights=(0, 1))], judge)
    sim = res.scores["answer_correctness"].value or 0.0
    words = [max(1, len(t.split())) for t in statements]
    if not claims:
        return {"claims": [], "claim_words": [], "statements": [], "statement_words": words, "sim": sim}
    out = await judge.signals(
        "compare_claims", {"question": query, "claims": [c["text"] for c in claims], "statements": statements}
    )
    return {
        "claims": [v["features"] for v in out["claims"]],
        "claim_words": [max(1, len(c["text"].split())) for c in claims],
        "statements": [v["features"] for v in out["statements"]],
        "statement_words": words,
        "sim": sim,
    }


async def _relevance(judge, query: str, passage: str) -> list[dict]:
    """Per statement of the passage (split as context relevance splits it), its relevance signals."""
    from ragmeter.data import Sample
    from ragmeter.metrics.requests import ScoringContext

    ctx = ScoringContext(Sample(question=query, contexts=[passage], answer="-"), judge)
    out = await judge.signals("rate_chunks", ctx._rating_inputs())
    return out["chunks"][0]["features"]


async def _gather(coros, concurrency: int = 8) -> list:
    sem = asyncio.Semaphore(concurrency)

    async def one(c):
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


def make_judge(path: str, grounding: str | None = None):
    """The offline judge of ``path`` ("lexical" / "embedding"), with the grounding model if given."""
    from ragmeter.judges.offline import OfflineJudge

    kwargs = {"grounding": grounding} if grounding else {}
    return OfflineJudge(embeddings=(path == "embedding"), **kwargs)


def extract(path: str, data: Path, grounding: str | None = None) -> dict:
    """Every signal of the three quantities on the labeled data (from the cache when current)."""
    key = _code_hash(grounding)
    name = f"fit_offline-{path}" + (f"-{hashlib.sha256(grounding.encode()).hexdigest()[:8]}" if grounding else "")
    cache = CACHE / f"{name}.json.gz"
    if cache.exists():
        with gzip.open(cache, "rt", encoding="utf-8") as f:
            stored = json.load(f)
        if stored.get("key") == key and stored.get("data") == str(data.resolve()):
            return stored
    judge = make_judge(path, grounding)

    begin = [r for r in _jsonl(data / "begin_dev" / "begin_dev.jsonl") if r["begin_label"] != "Generic"]
    items, docs = load_summedits(data / "summedits")
    claim_items = [
        {
            "source": f"begin/{r['data_source']}",
            "cluster": r["knowledge"],
            "label": int(r["begin_label"] == "Fully attributable"),
            "base": coverage(r["response"], r["knowledge"]),
            "args": (
                (r["message"] or "").strip() or "Continue the conversation.",
                r["response"],
                [r["knowledge"]],
            ),
        }
        for r in begin
    ]
    claim_items += [
        {
            "source": f"summedits/{it['domain']}",
            "cluster": it["doc_id"],
            "label": int(it["label"]),
            "base": coverage(it["summary"], docs[it["doc_id"]]["doc"]),
            "args": ("Summarize the document.", it["summary"], [docs[it["doc_id"]]["doc"]]),
        }
        for it in items
    ]
    feats = asyncio.run(_gather([_claims(judge, *it["args"]) for it in claim_items]))
    for it, f in zip(claim_items, feats):
        it["claims"] = f
        del it["args"]

    rows = _jsonl(data / "ragchecker_dev" / "human_pairwise_dev.jsonl")
    keys = list(dict.fromkeys((r["query"], r[f"response{k}"], r["gt_answer"]) for r in rows for k in (1, 2)))
    responses = asyncio.run(_gather([_reference(judge, *k) for k in keys]))
    index = {k: i for i, k in enumerate(keys)}
    pairs = [
        {
            "source": r["dataset"].replace("robustqa/", ""),
            "cluster": f"{r['dataset']}:{r['query_id']}",
            "r1": index[(r["query"], r["response1"], r["gt_answer"])],
            "r2": index[(r["query"], r["response2"], r["gt_answer"])],
            "base": coverage(r["gt_answer"], r["response2"]) - coverage(r["gt_answer"], r["response1"]),
            **{lab: r[lab] for lab, _ in PAIR_LABELS},
        }
        for r in rows
    ]

    rel_items = []
    for proxy, triples in relevance_proxies(data).items():
        rel_items += [
            {"source": proxy, "cluster": q, "label": y, "base": coverage(q, p), "args": (q, p)} for q, p, y in triples
        ]
    feats = asyncio.run(_gather([_relevance(judge, *it["args"]) for it in rel_items]))
    for it, f in zip(rel_items, feats):
        it["statements"] = f
        del it["args"]

    stored = {
        "key": key,
        "data": str(data.resolve()),
        "path": path,
        "grounding": grounding,
        "claim_support": claim_items,
        "reference": {"responses": responses, "pairs": pairs},
        "relevance": rel_items,
    }
    CACHE.mkdir(exist_ok=True)
    with gzip.open(cache, "wt", encoding="utf-8") as f:
        json.dump(stored, f)
    return stored


# --------------------------------------------------------------------------- models


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _bounds(names: list[str]) -> list[tuple[float | None, float | None]]:
    from ragmeter.judges.offline.model import SIGNALS

    return [(0.0, None) if SIGNALS[n] > 0 else (None, 0.0) for n in names]


class MeanData:
    """Items (answers or passages) made of scored parts (claims or statements), with a 0/1 label:
    an item's value is the mean of its parts' probabilities."""

    def __init__(self, items: list[dict], parts: str, names: list[str]):
        self.names = names
        self.sources = sorted({it["source"] for it in items})
        self.items = items
        self.src = np.array([self.sources.index(it["source"]) for it in items])
        self.y = np.array([it["label"] for it in items], dtype=float)
        self.base = np.array([it["base"] for it in items])
        self.cluster = np.array([it["cluster"] for it in items])
        self.count = np.array([len(it[parts]) for it in items])
        self.X = np.array([[f.get(n, 0.0) for n in names] for it in items for f in it[parts]], dtype=float)
        self.X = self.X.reshape(-1, len(names))
        self.part_item = np.repeat(np.arange(len(items)), self.count)

    def values(self, w: np.ndarray, b: float, cols: list[int], rescaled: bool = True) -> np.ndarray:
        """Each item's value as the metric computes it: the mean of its parts' scores (the model's
        probabilities rescaled to its range, as the judge ships them; ``rescaled=False``: the
        probabilities), 0.5 for an item without parts (the middle of the scale, as the harness
        scores an answer without claims)."""
        p = _sigmoid(self.X[:, cols] @ w + b)
        if rescaled:
            low, high = _sigmoid(b), _sigmoid(b + np.maximum(w, 0).sum())
            p = np.clip((p - low) / max(high - low, 1e-12), 0.0, 1.0)
        total = np.bincount(self.part_item, p, minlength=len(self.items))
        return np.where(self.count > 0, total / np.maximum(self.count, 1), 0.5)

    def fit(self, cols: list[int], lam: float, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Weights and per-source intercepts fit on the items ``keep`` (a boolean mask)."""
        from scipy.optimize import minimize

        has = keep & (self.count > 0)
        sources = np.unique(self.src[has])
        n_src = np.bincount(self.src[has], minlength=len(self.sources))
        weight = np.where(has, 1.0 / np.maximum(n_src[self.src], 1) / len(sources), 0.0)
        part_w = weight[self.part_item]
        X = self.X[:, cols]
        y, count, item = self.y, np.maximum(self.count, 1), self.part_item

        def loss(theta):
            w, b = theta[: len(cols)], theta[len(cols) :]
            p = _sigmoid(X @ w + b[self.src[item]])
            P = np.clip(np.bincount(item, p, minlength=len(y)) / count, 1e-9, 1 - 1e-9)
            L = -np.sum(weight * (y * np.log(P) + (1 - y) * np.log(1 - P))) + 0.5 * lam * w @ w
            dP = -weight * (y / P - (1 - y) / (1 - P))
            dz = dP[item] * p * (1 - p) / count[item]
            dz = np.where(part_w > 0, dz, 0.0)
            gw = X.T @ dz + lam * w
            gb = np.bincount(self.src[item], dz, minlength=len(self.sources))
            return L, np.concatenate([gw, gb])

        theta0 = np.zeros(len(cols) + len(self.sources))
        bounds = _bounds([self.names[c] for c in cols]) + [(None, None)] * len(self.sources)
        res = minimize(loss, theta0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 2000})
        w, b = res.x[: len(cols)], res.x[len(cols) :]
        return w, b

    def loso(self, cols: list[int], lam: float) -> dict[str, np.ndarray]:
        """Per held-out source: the values of its items from a fit on the other sources."""
        out = {}
        for k, s in enumerate(self.sources):
            held = self.src == k
            w, b = self.fit(cols, lam, ~held)
            trained = np.unique(self.src[~held & (self.count > 0)])
            out[s] = self.values(w, float(np.mean(b[trained])), cols)[held]
        return out

    def aurocs(self, values: dict[str, np.ndarray]) -> dict[str, float]:
        return {s: auc(v, self.y[self.src == self.sources.index(s)]) for s, v in values.items()}


class PairData:
    """RAGChecker responses (claims and reference statements with their signals) and the annotators'
    pairwise preferences."""

    def __init__(self, ref: dict, names: list[str]):
        self.names = names
        resp = ref["responses"]
        self.pairs = ref["pairs"]
        self.sources = sorted({p["source"] for p in self.pairs})
        self.n = len(resp)

        def flat(key, words):
            X = np.array([[f.get(n, 0.0) for n in names] for r in resp for f in r[key]], dtype=float)
            owner = np.repeat(np.arange(self.n), [len(r[key]) for r in resp])
            wts = np.array([w for r in resp if r[key] for w in r[words]], dtype=float)
            return X.reshape(-1, len(names)), owner, wts

        self.Xc, self.c_owner, self.c_words = flat("claims", "claim_words")
        self.Xs, self.s_owner, self.s_words = flat("statements", "statement_words")
        self.has_claims = np.array([len(r["claims"]) > 0 for r in resp])
        self.s_total = np.array([sum(r["statement_words"]) for r in resp], dtype=float)
        self.sim = np.array([r["sim"] for r in resp])
        self.src = np.array([self.sources.index(p["source"]) for p in self.pairs])
        self.cluster = np.array([p["cluster"] for p in self.pairs])
        self.r1 = np.array([p["r1"] for p in self.pairs])
        self.r2 = np.array([p["r2"] for p in self.pairs])
        self.base = np.array([p["base"] for p in self.pairs])
        self.prefs = {lab: np.array([p[lab] for p in self.pairs], dtype=float) for lab, _ in PAIR_LABELS}

    def metrics(self, w: np.ndarray, b: float, cols: list[int]) -> dict[str, np.ndarray]:
        """Answer correctness and response completeness of every response, as the metrics compute
        them from the items' rescaled scores."""
        low = _sigmoid(b)
        high = _sigmoid(b + np.maximum(w, 0).sum())
        span = max(high - low, 1e-12)

        def share(X, owner, words):
            s = np.clip((_sigmoid(X[:, cols] @ w + b) - low) / span, 0, 1)
            num = np.bincount(owner, s * words, minlength=self.n)
            den = np.bincount(owner, words, minlength=self.n)
            return np.where(den > 0, num / np.maximum(den, 1e-12), 0.0)

        precision = share(self.Xc, self.c_owner, self.c_words)
        recall = np.where(self.has_claims, share(self.Xs, self.s_owner, self.s_words), 0.0)
        f1 = np.where(
            (precision > 0) & (recall > 0),
            2 * precision * recall / np.maximum(precision + recall, 1e-12),
            0.0,
        )
        return {"correctness": 0.75 * f1 + 0.25 * self.sim, "completeness": recall}

    def diffs(self, w, b, cols) -> dict[str, np.ndarray]:
        m = self.metrics(w, b, cols)
        return {k: v[self.r2] - v[self.r1] for k, v in m.items()}

    def fit(self, cols: list[int], lam: float, keep: np.ndarray) -> tuple[np.ndarray, float]:
        """Weights and intercept fit on the pairs ``keep``: the pairwise log-likelihood of each
        label's preferences (one scale per label), sources weighted equally."""
        from scipy.optimize import minimize

        terms = []
        for lab, metric in PAIR_LABELS:
            pref = self.prefs[lab]
            m = keep & (pref != 0)
            n_src = np.bincount(self.src[m], minlength=len(self.sources))
            n_used = max(1, int((n_src > 0).sum()))
            weight = np.where(m, 1.0 / np.maximum(n_src[self.src], 1) / n_used, 0.0)
            terms.append((metric, np.sign(pref), weight))
        nw = len(cols)

        def loss(theta):
            w, b, logk = theta[:nw], theta[nw], theta[nw + 1 :]
            d = self.diffs(w, b, cols)
            total = 0.5 * lam * w @ w
            for (metric, sign, weight), lk in zip(terms, logk):
                z = np.exp(lk) * sign * d[metric]
                total += np.sum(weight * np.logaddexp(0.0, -z))
            return total

        theta0 = np.concatenate(
            [
                np.full(nw, 1.0) * np.array([1 if b[0] == 0 else -1 for b in _bounds([self.names[c] for c in cols])]),
                [0.0],
                np.full(len(terms), np.log(5.0)),
            ]
        )
        bounds = _bounds([self.names[c] for c in cols]) + [(-10, 10)] + [(-3, 5)] * len(terms)
        res = minimize(loss, theta0, method="L-BFGS-B", bounds=bounds, options={"maxiter": 500})
        return res.x[:nw], float(res.x[nw])

    def loso(self, cols: list[int], lam: float) -> dict[str, dict[str, np.ndarray]]:
        out = {}
        for k, s in enumerate(self.sources):
            held = self.src == k
            w, b = self.fit(cols, lam, ~held)
            d = self.diffs(w, b, cols)
            out[s] = {metric: d[metric][held] for metric in ("correctness", "completeness")}
        return out

    def aurocs(self, values: dict[str, dict[str, np.ndarray]]) -> dict[str, float]:
        out = {}
        for s, d in values.items():
            held = self.src == self.sources.index(s)
            for lab, metric in PAIR_LABELS:
                out[f"{s} {lab.split('_')[0]}"] = pairwise_auc(d[metric], self.prefs[lab][held])[0]
        return out


def select(data, candidates: tuple[str, ...], log) -> tuple[list[int], float, dict]:
    """Forward selection from word overlap alone: add the signal that raises the mean held-out
    AUROC most, among those with which no held-out source loses more than MAX_LOSS; stop when
    none qualifies. Then the L2 strength by the same rule. Returns the columns, the strength and
    the held-out AUROCs of the choice."""
    names = data.names
    cols = [names.index("overlap")]
    lam = LAMBDAS[0]
    current = data.aurocs(data.loso(cols, lam))
    log(f"  overlap alone: mean {np.mean(list(current.values())):.4f}")
    left = [c for c in candidates if c in names]
    while left:
        best = None
        for c in left:
            trial = data.aurocs(data.loso(cols + [names.index(c)], lam))
            gain = np.mean(list(trial.values())) - np.mean(list(current.values()))
            worst = min(trial[s] - current[s] for s in current)
            ok = gain >= MIN_GAIN and worst >= -MAX_LOSS
            log(
                f"  + {c:13s} mean {np.mean(list(trial.values())):.4f} ({gain:+.4f}), worst source {worst:+.4f}"
                f"{'' if ok else '  (rejected)'}"
            )
            if ok and (best is None or gain > best[1]):
                best = (c, gain, trial)
        if best is None:
            break
        cols.append(names.index(best[0]))
        current = best[2]
        left.remove(best[0])
        log(f"  kept {best[0]}: {', '.join(names[c] for c in cols)}")
    for trial_lam in LAMBDAS[1:]:
        trial = data.aurocs(data.loso(cols, trial_lam))
        gain = np.mean(list(trial.values())) - np.mean(list(current.values()))
        worst = min(trial[s] - current[s] for s in current)
        ok = gain >= MIN_GAIN and worst >= -MAX_LOSS
        log(
            f"  lambda {trial_lam:g}: mean {np.mean(list(trial.values())):.4f} ({gain:+.4f}), worst {worst:+.4f}"
            f"{'' if ok else '  (not taken)'}"
        )
        if ok:
            lam, current = trial_lam, trial
    return cols, lam, current


# --------------------------------------------------------------------------- report


def loso_table(data, cols: list[int], lam: float, quantity: str, path: str) -> list[dict]:
    """One row per held-out source (and statistic): n, clusters, coverage's AUROC, the fitted
    combination's, the rules' (the graded support of round 9), and the difference to coverage
    with its 95% cluster-bootstrap interval."""
    rows = []
    values = data.loso(cols, lam)
    if isinstance(data, MeanData):
        rules_col = data.names.index("graded" if quantity == "claim_support" else "partial")
        for s, v in values.items():
            held = data.src == data.sources.index(s)
            y, base = data.y[held], data.base[held]
            rules = _rules_values(data, held, rules_col)
            ci = interval(_auc_pair(v, base, y), data.cluster[held])
            rows.append(
                {
                    "quantity": quantity,
                    "path": path,
                    "source": s,
                    "statistic": "AUROC",
                    "n": int(held.sum()),
                    "clusters": ci["clusters"],
                    "coverage": auc(base, y),
                    "rules": auc(rules, y),
                    "judge": auc(v, y),
                    "ci": ci["diff"],
                    "wins": ci["wins"],
                }
            )
    else:
        graded = data.names.index("graded")
        for s, d in values.items():
            held = data.src == data.sources.index(s)
            old = _rules_diffs(data, graded)
            for lab, metric in PAIR_LABELS:
                prefs = data.prefs[lab][held]
                ci = interval(_pairwise_pair(d[metric], data.base[held], prefs), data.cluster[held])
                rows.append(
                    {
                        "quantity": quantity,
                        "path": path,
                        "source": s,
                        "statistic": f"{'answer_correctness' if metric == 'correctness' else 'response_completeness'}"
                        f" vs {lab.split('_')[0]}",
                        "n": int((prefs != 0).sum()),
                        "clusters": ci["clusters"],
                        "coverage": pairwise_auc(data.base[held], prefs)[0],
                        "rules": pairwise_auc(old[metric][held], prefs)[0],
                        "judge": pairwise_auc(d[metric], prefs)[0],
                        "ci": ci["diff"],
                        "wins": ci["wins"],
                    }
                )
    return rows


def _rules_values(data: MeanData, held: np.ndarray, col: int) -> np.ndarray:
    """The rules' values (round 9): the mean of the graded signal over an item's parts."""
    total = np.bincount(data.part_item, data.X[:, col], minlength=len(data.items))
    return np.where(data.count > 0, total / np.maximum(data.count, 1), 0.5)[held]


def _rules_diffs(data: PairData, col: int) -> dict[str, np.ndarray]:
    """Round 9's correctness and completeness differences: the metrics over the graded signal."""
    saved = (data.Xc, data.Xs)
    try:
        # A model that returns the graded signal itself: weight 1 on it through an identity link.
        def share(X, owner, words):
            s = X[:, col]
            num = np.bincount(owner, s * words, minlength=data.n)
            den = np.bincount(owner, words, minlength=data.n)
            return np.where(den > 0, num / np.maximum(den, 1e-12), 0.0)

        p = share(data.Xc, data.c_owner, data.c_words)
        r = np.where(data.has_claims, share(data.Xs, data.s_owner, data.s_words), 0.0)
        f1 = np.where((p > 0) & (r > 0), 2 * p * r / np.maximum(p + r, 1e-12), 0.0)
        m = {"correctness": 0.75 * f1 + 0.25 * data.sim, "completeness": r}
        return {k: v[data.r2] - v[data.r1] for k, v in m.items()}
    finally:
        data.Xc, data.Xs = saved


def calibrate(data: MeanData, w: np.ndarray, b: float, cols: list[int]) -> tuple[float, float]:
    """Platt map (a, c) of ``label ~ sigmoid(a * logit(value) + c)`` over the items with parts,
    each source weighted equally (maximum likelihood)."""
    from scipy.optimize import minimize

    v = np.clip(data.values(w, b, cols, rescaled=False), 1e-6, 1 - 1e-6)
    has = data.count > 0
    n_src = np.bincount(data.src[has], minlength=len(data.sources))
    weight = np.where(has, 1.0 / np.maximum(n_src[data.src], 1), 0.0)
    x = np.log(v / (1 - v))
    y = data.y

    def loss(theta):
        z = theta[0] * x + theta[1]
        return np.sum(weight * (np.logaddexp(0, z) - y * z))

    res = minimize(loss, np.array([1.0, 0.0]), method="L-BFGS-B")
    return round(float(res.x[0]), 4), round(float(res.x[1]), 4)


def routing(data: MeanData, w: np.ndarray, b: float, cols: list[int], cal: list[float]) -> list[float]:
    """The quantiles (shares 0, 0.05, ..., 1) of the calibrated confidence ``max(p, 1 - p)`` of
    the answers with claims, each source weighted equally: where a cascade's cut falls for a share."""
    v = np.clip(data.values(w, b, cols, rescaled=False), 1e-9, 1 - 1e-9)
    p = 1.0 / (1.0 + np.exp(-(cal[0] * np.log(v / (1 - v)) + cal[1])))
    conf = np.maximum(p, 1 - p)
    has = data.count > 0
    n_src = np.bincount(data.src[has], minlength=len(data.sources))
    weight = (1.0 / np.maximum(n_src[data.src], 1))[has]
    order = np.argsort(conf[has], kind="stable")
    c, cw = conf[has][order], np.cumsum(weight[order]) / weight.sum()
    return [
        round(float(c[min(len(c) - 1, np.searchsorted(cw, q))]), 4) if q < 1 else round(float(c[-1]), 4)
        for q in np.linspace(0, 1, 21)
    ]


def fit_path(path: str, data_dir: Path, grounding: str | None, log) -> tuple[dict, list[dict]]:
    """The three combinations of one path and their leave-one-source-out rows."""
    from ragmeter.judges.offline.model import SIGNALS

    feats = extract(path, data_dir, grounding)
    names = list(SIGNALS)
    out: dict = {}
    rows: list[dict] = []
    extra = ("entailment", "contradiction") if grounding else ()
    for quantity in ("claim_support", "reference_coverage", "relevance"):
        log(f"[{path}] {quantity}")
        candidates = CANDIDATES[quantity] + (extra if quantity == "claim_support" else ())
        if quantity == "claim_support":
            data = MeanData(feats["claim_support"], "claims", names)
        elif quantity == "relevance":
            data = MeanData(feats["relevance"], "statements", names)
        else:
            data = PairData(feats["reference"], names)
        cols, lam, _ = select(data, candidates, log)
        everything = np.ones(len(data.src), bool)
        if isinstance(data, MeanData):
            w, b_src = data.fit(cols, lam, everything)
            b = float(np.mean(b_src[np.unique(data.src[data.count > 0])]))
        else:
            w, b = data.fit(cols, lam, everything)
        entry = {
            "weights": {names[c]: round(float(x), 6) for c, x in zip(cols, w)},
            "intercept": round(b, 6),
            "lambda": lam,
        }
        if quantity == "claim_support":
            w_r = np.array([entry["weights"][names[c]] for c in cols])
            entry["calibration"] = list(calibrate(data, w_r, entry["intercept"], cols))
            entry["routing"] = routing(data, w_r, entry["intercept"], cols, entry["calibration"])
        out[quantity] = entry
        rows += loso_table(data, cols, lam, quantity, path)
    return out, rows


def print_rows(rows: list[dict]) -> None:
    """The leave-one-source-out table in Markdown."""
    print(
        "| quantity | path | held-out source | statistic | n | clusters | coverage | rules (round 9) | "
        "fitted | fitted - coverage [95% interval] | fitted > coverage |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        lo, hi = r["ci"]
        print(
            f"| {r['quantity']} | {r['path']} | {r['source']} | {r['statistic']} | {r['n']} | {r['clusters']} | "
            f"{r['coverage']:.3f} | {r['rules']:.3f} | **{r['judge']:.3f}** | {r['judge'] - r['coverage']:+.3f} "
            f"[{lo:+.3f}, {hi:+.3f}] | {r['wins']:.0%} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="folder holding the labeled sets")
    parser.add_argument("--paths", default="lexical,embedding", help="comma-separated: lexical, embedding")
    parser.add_argument("--grounding", default=None, help="a grounding model (folder or hub name) whose signals to add")
    parser.add_argument("--out", default=None, help="where to write the coefficients (default: the package data)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--quiet", action="store_true", help="no selection log")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    result = {
        "source": "python benchmarks/fit_offline.py ../shared/data"
        + (f" --grounding {args.grounding}" if args.grounding else "")
    }
    rows: list[dict] = []
    for path in [p.strip() for p in args.paths.split(",") if p.strip()]:
        result[path], path_rows = fit_path(path, Path(args.data), args.grounding, log)
        rows += path_rows
    print_rows(rows)
    print()
    print("```json")
    print(json.dumps({k: v for k, v in result.items() if k != "source"}, indent=1))
    print("```")
    if not args.no_write:
        target = Path(args.out) if args.out else PACKAGE_FILE
        if target == PACKAGE_FILE and set(result) - {"source"} != {"lexical", "embedding"}:
            print("not written: the package data needs both paths (--paths lexical,embedding)", file=sys.stderr)
            return 1
        for path in ("lexical", "embedding"):
            for q in result.get(path, {}).values():
                q.pop("lambda", None)
        target.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"written: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
