"""Internal: Agreement between annotators (Cohen's kappa, Krippendorff's alpha) and between the judge and
the annotators (rank correlation, balanced accuracy at a threshold, a suggested threshold).

Written in numpy from the published formulas (each is stated in its docstring) and checked in
the tests against hand-worked examples and Krippendorff's own published values. Confidence
intervals are percentile bootstraps over items (units), seeded, so a run repeats exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "cohen_kappa",
    "krippendorff_alpha",
    "alpha_with_ci",
    "kappa_with_ci",
    "bootstrap_ci",
    "is_missing",
    "balanced_accuracy",
    "confusion",
    "suggest_threshold",
    "judge_vs_humans",
    "ranks",
    "auroc",
    "spearman",
    "reliability",
    "STATISTICS",
]

_LEVELS = ("nominal", "ordinal", "interval", "ratio")

#: The judge-vs-human statistics of a trust card (:mod:`ragmeter.trust.card`), in order:
#: key -> (name shown, which labels it applies to).
STATISTICS = {
    "auroc": ("AUROC", "binary"),
    "balanced_accuracy": ("balanced accuracy", "all"),
    "kappa": ("Cohen's kappa", "all"),
    "spearman": ("Spearman", "graded"),
    "bias": ("bias (judge - human)", "all"),
    "ece": ("calibration error (ECE)", "all"),
}


def is_missing(value: Any) -> bool:
    """True for a missing label: None or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def cohen_kappa(
    a: Sequence[Any], b: Sequence[Any], weights: str | None = None, labels: Sequence[Any] | None = None
) -> float:
    """Cohen's kappa of two annotators' labels of the same items (pairs with a missing label are left out).

    With categories ``labels`` (default: the sorted labels seen), ``O`` the observed proportions
    (``O[i, j]``: share of items labelled ``i`` by ``a`` and ``j`` by ``b``) and ``E`` the
    proportions expected by chance (outer product of the two annotators' marginals)::

        kappa = 1 - sum(w * O) / sum(w * E)

    where ``w[i, j]`` is 0 on the diagonal and 1 elsewhere (``weights=None``), ``|i - j|``
    (``"linear"``) or ``(i - j)**2`` (``"quadratic"``), ``i, j`` the categories' positions in
    ``labels``. Unweighted, this is ``(p_o - p_e) / (1 - p_e)``. Raises ValueError with no
    complete pair; NaN when chance agreement is total (one category only).

    >>> cohen_kappa([1, 2, 3], [1, 3, 3]), cohen_kappa([1, 2, 3], [1, 3, 3], "quadratic")
    (0.5, 0.8)
    """
    if len(a) != len(b):
        raise ValueError(f"the two annotators label different numbers of items ({len(a)} and {len(b)})")
    pairs = [(x, y) for x, y in zip(a, b) if not is_missing(x) and not is_missing(y)]
    if not pairs:
        raise ValueError("no item has a label from both annotators")
    cats = sorted({v for p in pairs for v in p}) if labels is None else list(labels)
    index = {c: i for i, c in enumerate(cats)}
    k = len(cats)
    observed = np.zeros((k, k))
    for x, y in pairs:
        if x not in index or y not in index:
            raise ValueError(f"label {x if x not in index else y!r} is not one of {cats}")
        observed[index[x], index[y]] += 1
    observed /= len(pairs)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((k, k))
    if weights is None:
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j).astype(float)
    elif weights == "quadratic":
        w = ((i - j) ** 2).astype(float)
    else:
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    chance = float((w * expected).sum())
    if chance == 0:
        return float("nan")
    return float(1 - (w * observed).sum() / chance)


def _units(ratings: Any) -> list[list[float]]:
    """Each unit's (item's) non-missing values; ``ratings`` is annotators x items."""
    rows = [list(r) for r in ratings]
    if not rows:
        return []
    n_items = len(rows[0])
    if any(len(r) != n_items for r in rows):
        raise ValueError("every annotator's row must have one entry per item (None for a missing label)")
    return [[float(r[u]) for r in rows if not is_missing(r[u])] for u in range(n_items)]


def _alpha_from_units(units: list[list[float]], level: str) -> float:
    pairable = [u for u in units if len(u) >= 2]
    values = sorted({v for u in pairable for v in u})
    if len(values) < 2:
        return float("nan")
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    o = np.zeros((k, k))  # coincidence matrix
    for u in pairable:
        counts = np.zeros(k)
        for v in u:
            counts[index[v]] += 1
        o += (np.outer(counts, counts) - np.diag(counts)) / (len(u) - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    x = np.array(values)
    if level == "nominal":
        delta = 1.0 - np.eye(k)
    elif level == "interval":
        delta = np.subtract.outer(x, x) ** 2
    elif level == "ratio":
        total = np.add.outer(x, x)
        delta = np.divide(np.subtract.outer(x, x) ** 2, total**2, out=np.zeros((k, k)), where=total != 0)
    else:  # ordinal: (sum of n_g for g from c to k) - (n_c + n_k) / 2, squared
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        lo, hi = np.minimum.outer(np.arange(k), np.arange(k)), np.maximum.outer(np.arange(k), np.arange(k))
        delta = (cum[hi + 1] - cum[lo] - (n_c[lo] + n_c[hi]) / 2) ** 2
    expected = (np.outer(n_c, n_c) * delta).sum()
    if expected == 0:
        return float("nan")
    return float(1 - (n - 1) * (o * delta).sum() / expected)


def krippendorff_alpha(ratings: Any, level: str = "ordinal") -> float:
    """Krippendorff's alpha of ``ratings`` (annotators x items; None or NaN for a missing label).

    From the coincidence matrix ``o[c, k]`` (each item with ``m >= 2`` labels adds ``1 / (m - 1)``
    for every ordered pair of its labels from different annotators), ``n_c = sum_k o[c, k]`` and
    ``n = sum_c n_c``::

        alpha = 1 - (n - 1) * sum(o[c, k] * d[c, k]) / sum(n_c * n_k * d[c, k])

    with the squared difference ``d``: nominal ``c != k``; interval ``(c - k)**2``; ratio
    ``((c - k) / (c + k))**2``; ordinal ``(sum_{g=c..k} n_g - (n_c + n_k) / 2)**2``. Items
    labelled once are left out; NaN when fewer than two distinct values are pairable.
    """
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {', '.join(_LEVELS)}, got {level!r}")
    return _alpha_from_units(_units(ratings), level)


def bootstrap_ci(
    statistic: Callable[[np.ndarray], float],
    n_items: int,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    clusters: Sequence[Any] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(indices)`` over items drawn with replacement
    (``n_boot`` draws from ``numpy.random.default_rng(seed)``; draws giving NaN are dropped).
    (NaN, NaN) when no draw gives a number.

    ``clusters`` (one key per item: a document, a conversation, a query) resamples whole
    clusters instead (the cluster bootstrap): items of one cluster are not independent, and
    drawing them one by one makes the interval too narrow. Each draw takes as many clusters as
    there are, with replacement, and every item of each; with one item per cluster, numbered in
    item order, the draws are those of the item bootstrap."""
    rng = np.random.default_rng(seed)
    if clusters is None:
        draws = (rng.integers(0, n_items, n_items) for _ in range(n_boot)) if n_items else iter(())
    else:
        if len(clusters) != n_items:
            raise ValueError(f"{len(clusters)} cluster keys for {n_items} items")
        members = list(_cluster_members(clusters).values())
        draws = (
            (np.concatenate([members[k] for k in rng.integers(0, len(members), len(members))]) for _ in range(n_boot))
            if n_items
            else iter(())
        )
    drawn = [statistic(idx) for idx in draws]
    stats = np.array([s for s in drawn if s is not None and not math.isnan(s)])
    if not len(stats):
        return (float("nan"), float("nan"))
    tail = (1 - confidence) / 2 * 100
    return (float(np.percentile(stats, tail)), float(np.percentile(stats, 100 - tail)))


def _cluster_members(clusters: Sequence[Any]) -> dict[Any, np.ndarray]:
    """Cluster key -> the indices of its items, clusters in order of first appearance."""
    out: dict[Any, list[int]] = {}
    for i, key in enumerate(clusters):
        out.setdefault(key, []).append(i)
    return {k: np.array(v) for k, v in out.items()}


def ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, tied values sharing their mean rank ([10, 20, 20, 30] ->
    [1, 2.5, 2.5, 4])."""
    x = np.asarray(values, dtype=float)
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2
    return mean_rank[inv.ravel()]


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """Area under the ROC curve of ``scores`` for the ``positive`` items (ties count half): the
    Mann-Whitney statistic ``(R1 - n1 (n1 + 1) / 2) / (n1 n0)``, ``R1`` the sum of the
    positives' ranks (:func:`ranks`). NaN without both classes.

    >>> auroc([0.9, 0.5, 0.5, 0.1], [True, True, False, False])  # ranks 4, 2.5, 2.5, 1: (6.5 - 3) / 4
    0.875
    """
    s, pos = np.asarray(scores, dtype=float), np.asarray(positive, dtype=bool)
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if not n1 or not n0:
        return float("nan")
    return float((ranks(s)[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation: Pearson's correlation of the two samples' :func:`ranks`
    (ties share their mean rank). NaN with fewer than two items or a constant sample.

    >>> spearman([1, 2, 3, 4], [10, 30, 20, 40])  # ranks 1 2 3 4 / 1 3 2 4: 1 - 6 * 2 / (4 * 15)
    0.8
    """
    if len(x) != len(y):
        raise ValueError(f"spearman needs pairs, got {len(x)} and {len(y)} values")
    if len(x) < 2:
        return float("nan")
    rx, ry = ranks(x), ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx**2).sum() * (ry**2).sum()))
    return float((rx * ry).sum() / denom) if denom else float("nan")


def reliability(
    confidence: Sequence[float] | np.ndarray, outcome: Sequence[bool] | np.ndarray, bins: int = 10
) -> dict[str, Any]:
    """Calibration of ``confidence`` (the judge's value in [0, 1], read as the probability that
    people pass the item) against ``outcome`` (they do): ``bins`` equal-width bins of [0, 1]
    (the last one closed), each with its ``n``, mean confidence and pass rate; and the expected
    calibration error ``ece = sum_b n_b / n * |pass rate_b - mean confidence_b|`` (NaN without
    items).

    >>> reliability([0.1, 0.2, 0.9, 0.8], [False, True, True, True], bins=2)["ece"]  # |0.5-0.15|/2 + |1-0.85|/2
    0.25
    """
    c, o = np.asarray(confidence, dtype=float), np.asarray(outcome, dtype=float)
    which = np.minimum((c * bins).astype(int), bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        m = which == b
        n = int(m.sum())
        if n:
            conf, rate = float(c[m].mean()), float(o[m].mean())
            ece += n / len(c) * abs(rate - conf)
            rows.append({"low": b / bins, "high": (b + 1) / bins, "n": n, "confidence": conf, "pass_rate": rate})
    return {"bins": rows, "ece": round(ece, 12) if len(c) else float("nan")}


def alpha_with_ci(ratings: Any, level: str = "ordinal", *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """``{"alpha", "ci": (low, high), "items"}``: Krippendorff's alpha and its bootstrap interval
    over items (see :func:`bootstrap_ci`)."""
    units = _units(ratings)
    alpha = _alpha_from_units(units, level)
    ci = bootstrap_ci(
        lambda idx: _alpha_from_units([units[i] for i in idx], level), len(units), n_boot=n_boot, seed=seed
    )
    return {"alpha": alpha, "ci": ci, "items": sum(len(u) >= 2 for u in units)}


def kappa_with_ci(
    a: Sequence[Any],
    b: Sequence[Any],
    weights: str | None = "quadratic",
    *,
    labels: Sequence[Any] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """``{"kappa", "ci": (low, high), "items"}``: :func:`cohen_kappa` (categories ``labels``,
    default the labels seen) and its bootstrap interval."""
    pairs = [(x, y) for x, y in zip(a, b) if not is_missing(x) and not is_missing(y)]
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    labels = sorted(set(xs) | set(ys)) if labels is None else list(labels)
    kappa = cohen_kappa(xs, ys, weights, labels)
    ci = bootstrap_ci(
        lambda idx: cohen_kappa([xs[i] for i in idx], [ys[i] for i in idx], weights, labels),
        len(pairs),
        n_boot=n_boot,
        seed=seed,
    )
    return {"kappa": kappa, "ci": ci, "items": len(pairs)}


def confusion(judge_pass: Sequence[bool], human_pass: Sequence[bool]) -> dict[str, int]:
    """The confusion table with the humans as truth: ``tp`` both pass, ``fp`` the judge passes what
    the humans fail, ``fn`` the judge fails what the humans pass, ``tn`` both fail."""
    pairs = list(zip(judge_pass, human_pass))
    return {
        "tp": sum(j and h for j, h in pairs),
        "fp": sum(j and not h for j, h in pairs),
        "fn": sum(h and not j for j, h in pairs),
        "tn": sum(not j and not h for j, h in pairs),
    }


def balanced_accuracy(table: dict[str, int]) -> float:
    """``(tp / (tp + fn) + tn / (tn + fp)) / 2``; with one class absent, the other class's rate."""
    rates = [
        table["tp"] / (table["tp"] + table["fn"]) if table["tp"] + table["fn"] else None,
        table["tn"] / (table["tn"] + table["fp"]) if table["tn"] + table["fp"] else None,
    ]
    present = [r for r in rates if r is not None]
    return sum(present) / len(present) if present else float("nan")


def suggest_threshold(judge: Sequence[float], human_pass: Sequence[bool], current: float | None = None) -> float:
    """The threshold ``t`` (one of the judge's values) for which "judge value >= t" best matches
    the humans' pass/fail by balanced accuracy; ties go to the ``t`` closest to ``current``, then
    the lowest. NaN without items."""
    best, best_key = float("nan"), None
    for t in sorted(set(judge)):
        ba = balanced_accuracy(confusion([v >= t for v in judge], human_pass))
        key = (-ba, abs(t - current) if current is not None else 0.0, t)
        if best_key is None or key < best_key:
            best, best_key = t, key
    return best


def judge_vs_humans(
    judge: Sequence[float],
    human: Sequence[float],
    threshold: float,
    *,
    human_pass_at: float = 4.0,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """How one metric's judge values match the humans' ratings (1-5, e.g. the mean over annotators) of the same items.

    Returns ``spearman`` and ``kendall`` (scipy's rho and tau-b, with p-values), the confusion
    table and ``balanced_accuracy`` of judge pass (value >= ``threshold``) against human pass
    (rating >= ``human_pass_at``), and ``suggested_threshold`` (:func:`suggest_threshold`) with
    ``suggested_ci``, its bootstrap interval over items. Needs scipy (``pip install "ragmeter[stats]"``).
    """
    from ragmeter._extras import needs_extra

    with needs_extra("judge_vs_humans()", "stats", "scipy"):
        from scipy import stats

    pairs = [(float(j), float(h)) for j, h in zip(judge, human) if not is_missing(j) and not is_missing(h)]
    js, hs = [p[0] for p in pairs], [p[1] for p in pairs]
    human_pass = [h >= human_pass_at for h in hs]
    table = confusion([j >= threshold for j in js], human_pass)
    out: dict[str, Any] = {
        "items": len(pairs),
        "threshold": threshold,
        "confusion": table,
        "balanced_accuracy": balanced_accuracy(table),
    }
    varied = len(pairs) >= 2 and len(set(js)) > 1 and len(set(hs)) > 1
    rho = stats.spearmanr(js, hs) if varied else None  # for its p-value; the statistic is spearman()'s
    tau = stats.kendalltau(js, hs) if varied else None
    out["spearman"] = spearman(js, hs) if varied else float("nan")
    out["spearman_p"] = float(rho.pvalue) if rho else float("nan")
    out["kendall"] = float(tau.statistic) if tau else float("nan")
    out["kendall_p"] = float(tau.pvalue) if tau else float("nan")
    out["suggested_threshold"] = suggest_threshold(js, human_pass, threshold)
    out["suggested_ci"] = bootstrap_ci(
        lambda idx: suggest_threshold([js[i] for i in idx], [human_pass[i] for i in idx], threshold),
        len(pairs),
        n_boot=n_boot,
        seed=seed,
    )
    return out
