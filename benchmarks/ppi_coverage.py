"""Coverage and width of ragmeter's PPI++ intervals (``ragmeter.trust.ppi_mean``) on simulated
judges with a known bias and noise.

Each draw makes ``N`` judged items and ``n`` of them labeled: a latent quality ``q ~ Beta(2, 2)``
(true mean 0.5), a human label (binary: ``Bernoulli(q)``; 1-5: ``1 + 4 q`` plus rater noise of
sd 0.5, rounded and clipped; true mean 3.0) and the judge's value ``q + bias + noise`` (clipped
to [0, 1]; on the 1-5 scale read as ``1 + 4 value``). Per setting, over ``--draws`` draws (1,000
by default), it reports how often each 95% interval covers the true mean: the judge's own mean
(``mean +/- 1.96 sd / sqrt(N)``), the labels' own and PPI++'s, and PPI++'s width against the
labels' (the price of using only labels).

    python benchmarks/ppi_coverage.py                   # the numbers in docs/measured.md (about 20 s on one core)
    python benchmarks/ppi_coverage.py --draws 200 --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

from ragmeter.trust import ppi_mean

BIASES = (0.0, 0.1, -0.15, 0.25)
NOISES = (0.05, 0.2)
LABELED = (50, 200)
SCALES = ("binary", "1-5")
N_JUDGED = 2000


def draw(rng: np.random.Generator, n: int, big_n: int, bias: float, noise: float, scale: str):
    """One draw: (labels, judge on the labeled items, judge on the others, the true mean)."""
    q = rng.beta(2, 2, n + big_n)
    f = np.clip(q + bias + rng.normal(0, noise, n + big_n), 0, 1)
    if scale == "binary":
        y, truth = (rng.random(n + big_n) < q).astype(float), 0.5
    else:
        y = np.clip(np.rint(1 + 4 * q + rng.normal(0, 0.5, n + big_n)), 1, 5)
        truth = 3.0  # 1 + 4 q is symmetric about 3, and so are the rater noise, the rounding and the clipping
        f = 1 + 4 * f
    return y[:n], f[:n], f[n:], truth


def setting(rng: np.random.Generator, draws: int, n: int, bias: float, noise: float, scale: str) -> dict:
    ppi = labels = judge = 0
    width, labels_width, lam = [], [], []
    for _ in range(draws):
        y, f, g, truth = draw(rng, n, N_JUDGED, bias, noise, scale)
        est = ppi_mean(y, f, g)
        ppi += est.ci[0] <= truth <= est.ci[1]
        labels += est.labels_ci[0] <= truth <= est.labels_ci[1]
        allf = np.concatenate([f, g])
        half = 1.96 * allf.std(ddof=1) / math.sqrt(len(allf))
        judge += allf.mean() - half <= truth <= allf.mean() + half
        width.append(est.ci[1] - est.ci[0])
        labels_width.append(est.labels_ci[1] - est.labels_ci[0])
        lam.append(est.lam)
    return {
        "scale": scale,
        "n": n,
        "N": N_JUDGED,
        "bias": bias,
        "noise": noise,
        "draws": draws,
        "coverage_ppi": ppi / draws,
        "coverage_labels": labels / draws,
        "coverage_judge": judge / draws,
        "width_ratio": float(np.mean(width) / np.mean(labels_width)),
        "lambda": float(np.mean(lam)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=1000, help="draws per setting (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    t0 = time.perf_counter()
    for scale in SCALES:
        for n in LABELED:
            for bias in BIASES:
                for noise in NOISES:
                    rows.append(setting(rng, args.draws, n, bias, noise, scale))
    print(
        f"PPI++ coverage of the true mean, {args.draws} draws per setting, N = {N_JUDGED} judged items "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    print("labels  n    bias   noise  judge  labels  PPI++  PPI++ width / labels'  lambda")
    for r in rows:
        print(
            f"{r['scale']:<7} {r['n']:<4} {r['bias']:+.2f}  {r['noise']:.2f}   {r['coverage_judge']:.3f}  "
            f"{r['coverage_labels']:.3f}   {r['coverage_ppi']:.3f}  {r['width_ratio']:.2f}                   "
            f"{r['lambda']:.2f}"
        )
    worst = min(r["coverage_ppi"] for r in rows)
    print(
        f"lowest PPI++ coverage: {worst:.3f}; settings where the judge's own interval covers less than 50%: "
        f"{sum(r['coverage_judge'] < 0.5 for r in rows)} of {len(rows)}"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
