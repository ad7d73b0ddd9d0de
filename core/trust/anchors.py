"""Internal: Anchor sets and judge drift: a frozen, labeled set of samples scored by each judge version.

``ragmeter trust check --anchors anchors.jsonl --judge SPEC`` (:func:`check_anchors`) scores the
anchor set with the judge and stores, per metric and judge fingerprint
(:mod:`ragmeter.judges.fingerprint`), the judge's mean, its agreement with the anchors' labels
(the trust card's statistics, :mod:`ragmeter.trust.card`) and every item's value. When the
judge's fingerprint differs from the one checked before on the same anchor set (same content:
``anchor_hash``), it shows the shift: per metric the mean of the per-item differences (new -
old) over the anchors with a 95% bootstrap interval (resampling clusters when the anchors name
them), and which fingerprint field changed.

``compare`` uses the anchors (:func:`anchor_attribution`): when both runs' judges have anchor
results on one anchor set, it says how much of the change in a metric's mean the judge's shift
on the anchors accounts for.

Anchor file: JSONL samples (ragmeter, RAGAS or DeepEval field names) each with ``labels``, an
object of metric (or labeling-page criterion) -> human value, and optionally ``scale`` (one
scale, or an object of metric -> scale) and ``cluster``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.data import RecordError, Sample
from ragmeter.labels.agreement import STATISTICS, bootstrap_ci
from ragmeter.labels.io import Label, answer_hash
from ragmeter.labels.matching import metric_of
from ragmeter.labels.scales import check_value
from ragmeter.readers import load_samples

__all__ = [
    "AnchorSet",
    "AnchorCheck",
    "load_anchors",
    "check_anchors",
    "anchor_shift",
    "judge_drift",
    "anchor_attribution",
    "new_judge_lines",
]


@dataclass
class AnchorSet:
    """A loaded anchor set: its ``name`` (the file's stem), ``hash`` (of its samples and labels:
    the same content is the same set), ``samples``, ``labels`` and ``errors`` (records left out,
    each naming its line and field)."""

    name: str
    hash: str
    samples: list[Sample]
    labels: list[Label]
    errors: list[str] = field(default_factory=list)

    @property
    def metrics(self) -> list[str]:
        """The metrics the anchors are labeled on, in order of first appearance."""
        return list(dict.fromkeys(metric_of(lb.criterion) for lb in self.labels))


def load_anchors(path: str | os.PathLike) -> AnchorSet:
    """Read an anchor file (see the module doc). A record without ``labels``, or with a label
    that is not a number on its scale, is left out and reported (``errors``); ValueError when no
    record is left."""
    path = Path(path)
    dataset = load_samples(path)
    errors = [str(e) for e in dataset.errors]
    samples, labels = [], []
    for _n, s in enumerate(dataset, start=1):
        meta = dict(s.metadata)
        raw, scales, cluster = meta.pop("labels", None), meta.pop("scale", None), meta.pop("cluster", None)
        where = f"{path}: sample {s.id!r}"
        try:
            if not isinstance(raw, Mapping) or not raw:
                raise RecordError(where, "labels", "an anchor needs labels: an object of metric -> human value")
            mine = []
            for metric, value in raw.items():
                scale = scales.get(metric) if isinstance(scales, Mapping) else scales
                try:
                    value = check_value(value, scale)
                except ValueError as exc:
                    raise RecordError(where, f"labels.{metric}", str(exc)) from None
                if value is not None:
                    mine.append(
                        Label(
                            str(s.id),
                            "anchor",
                            str(metric),
                            value,
                            answer_hash(s.answer),
                            None if cluster is None else str(cluster),
                            scale,
                            where=where,
                        )
                    )
        except RecordError as err:
            errors.append(str(err))
            continue
        s.metadata = meta
        samples.append(s)
        labels += mine
    if not samples:
        raise ValueError(f"{path}: no anchor with labels" + (f" ({errors[0]})" if errors else ""))
    digest = hashlib.sha256()
    for s in samples:
        digest.update(json.dumps(s.to_dict(), sort_keys=True, ensure_ascii=False, default=str).encode("utf-8"))
    for lb in labels:
        digest.update(json.dumps(lb.to_dict(), sort_keys=True).encode("utf-8"))
    return AnchorSet(path.stem, digest.hexdigest()[:16], samples, labels, errors)


@dataclass
class AnchorCheck:
    """One judge on one anchor set: the ``anchors``, the judge's ``fingerprint`` id and ``judge``
    name, per metric the stored row (``results``: n, mean, statistics, values), the trust
    ``card`` of the anchors, and ``drift`` (the shift against the fingerprint checked before,
    see :func:`anchor_shift`; None without one) and whether the fingerprint is ``new`` to this
    anchor set."""

    anchors: AnchorSet
    fingerprint: str
    judge: str
    results: dict[str, dict[str, Any]]
    card: Any
    drift: dict[str, Any] | None = None
    new: bool = True

    def to_text(self) -> str:
        """What ``ragmeter trust check`` prints."""
        a = self.anchors
        lines = [
            f"anchor set {a.name} ({a.hash}): {len(a.samples)} anchors, {len(a.labels)} labels; judge {self.judge} "
            f"(fingerprint {self.fingerprint}, {'new' if self.new else 'checked before'} on this set)"
        ]
        lines += [f"  left out: {e}" for e in a.errors[:10]]
        for metric, row in self.results.items():
            stats = row["statistics"]
            shown = ", ".join(
                f"{STATISTICS[k][0]} {stats[k]['value']:.3f}"
                for k in ("auroc", "kappa", "spearman", "bias")
                if stats.get(k, {}).get("value") is not None
            )
            lines.append(
                f"{metric}: mean {_num(row['mean'])} over {row['n']} anchors; {shown or 'no statistic'}; "
                f"fit for {row['verdict']}"
            )
        if self.drift is None:
            lines.append("no other judge was checked on this anchor set: nothing to compare with")
        else:
            lines += _drift_lines(self.drift)
        return "\n".join(lines) + "\n"


def _num(x: Any, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _drift_lines(drift: Mapping[str, Any]) -> list[str]:
    lines = [
        f"shift against {drift['before']} (checked {drift['before_at']}): "
        + ("; ".join(drift["changes"]) or "judge fields not recorded")
    ]
    for metric, d in drift["metrics"].items():
        if d.get("shift") is None:
            lines.append(f"  {metric}: n/a ({d.get('note')})")
        else:
            lo, hi = d["ci"] if d.get("ci") else (float("nan"), float("nan"))
            lines.append(
                f"  {metric}: mean {_num(d['before'])} -> {_num(d['after'])}, shift {_num(d['shift'], True)} "
                f"95% CI [{_num(lo, True)}, {_num(hi, True)}] over {d['n']} anchors"
                + (f"; {d['note']}" if d.get("note") else "")
            )
    return lines


def check_anchors(
    anchors: str | os.PathLike | AnchorSet,
    judge: Any,
    *,
    metrics: Iterable[str] | None = None,
    store: Any = None,
    n_boot: int = 1000,
    seed: int = 0,
    progress: bool = False,
) -> AnchorCheck:
    """Score the anchor set with ``judge`` (a Judge or a spec) on its labeled ``metrics`` (default:
    all), measure the judge against the labels (the trust card's statistics), store the results
    per metric under the judge's fingerprint in ``store`` (a :class:`~ragmeter.store.Store`, or
    None) and compare with the fingerprint checked before on the same set (see the module doc)."""
    from ragmeter.judges.spec import resolve_judge
    from ragmeter.runner import evaluate
    from ragmeter.trust.card import trust_card

    anchor_set = anchors if isinstance(anchors, AnchorSet) else load_anchors(anchors)
    wanted = list(metrics) if metrics is not None else anchor_set.metrics
    unknown = [m for m in wanted if m not in anchor_set.metrics]
    if unknown:
        raise ValueError(
            f"the anchors have no labels for {', '.join(unknown)} (labeled: {', '.join(anchor_set.metrics)})"
        )
    judge_obj = resolve_judge(judge, [])
    if judge_obj is None:
        raise ValueError("an anchor check needs a judge (--judge SPEC)")
    result = evaluate(anchor_set.samples, metrics=wanted, judge=judge_obj, progress=progress)
    card = trust_card(result, anchor_set.labels, n_boot=n_boot, seed=seed)
    fp = judge_obj.fingerprint.id
    results = {}
    for metric in wanted:
        values = {str(r.sample.id): r.scores[metric].value for r in result if r.scores[metric].value is not None}
        m = card.metrics.get(metric, {})
        results[metric] = {
            "n": len(values),
            "mean": float(np.mean(list(values.values()))) if values else None,
            "statistics": m.get("statistics", {}),
            "verdict": m.get("verdict", "exploration only"),
            "values": values,
            "clusters": {lb.sample_id: lb.cluster for lb in anchor_set.labels if lb.cluster},
        }
    check = AnchorCheck(anchor_set, fp, judge_obj.name, results, card)
    if store is not None:
        seen = store.anchor_results(anchor_set.hash)
        check.new = not any(r["fingerprint"] == fp for r in seen)
        previous = next((r for r in seen if r["fingerprint"] != fp), None)
        store.record_anchor_results(anchor_set.name, anchor_set.hash, fp, judge_obj.name, results)
        if previous is not None:
            before = {
                r["metric"]: r
                for r in seen
                if r["fingerprint"] == previous["fingerprint"] and r["created_at"] == previous["created_at"]
            }
            check.drift = anchor_shift(before, results, previous["fingerprint"], fp, n_boot=n_boot, seed=seed)
            check.drift.update(anchor_set=anchor_set.name, before_at=previous["created_at"])
    return check


def anchor_shift(
    before: Mapping[str, Mapping[str, Any]],
    after: Mapping[str, Mapping[str, Any]],
    before_id: str,
    after_id: str,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The judge's shift on the anchors from fingerprint ``before_id`` to ``after_id``: per
    metric the means, the mean of the per-item differences (after - before, over the anchors
    both scored) with its 95% bootstrap interval (clusters resampled when the anchors name
    them), and which fingerprint fields changed."""
    from ragmeter.judges.fingerprint import lookup

    a, b = lookup(before_id), lookup(after_id)
    out: dict[str, Any] = {
        "before": before_id,
        "after": after_id,
        "changes": b.diff(a) if a is not None and b is not None else [],
        "metrics": {},
    }
    for metric, new in after.items():
        old = before.get(metric)
        if old is None:
            out["metrics"][metric] = {"after": new["mean"], "shift": None, "n": 0, "note": "not checked before"}
            continue
        ids = [s for s in new["values"] if s in old["values"]]
        d = np.array([new["values"][s] - old["values"][s] for s in ids], dtype=float)
        clusters = new.get("clusters") or {}
        keys = [clusters.get(s, f"\x00{s}") for s in ids] if clusters else None
        entry: dict[str, Any] = {"before": old["mean"], "after": new["mean"], "n": len(ids)}
        if len(ids) < 2:
            entry.update(shift=None, note=f"{len(ids)} anchors scored by both")
        else:
            entry["shift"] = float(d.mean())

            def shift(idx: np.ndarray, d: np.ndarray = d) -> float:
                return float(d[idx].mean())

            ci = bootstrap_ci(shift, len(ids), n_boot=n_boot, seed=seed, clusters=keys)
            entry["ci"] = list(ci)
            old_k = (old.get("statistics") or {}).get("kappa", {}).get("value")
            new_k = (new.get("statistics") or {}).get("kappa", {}).get("value")
            if old_k is not None and new_k is not None:
                entry["note"] = f"kappa {old_k:.3f} -> {new_k:.3f}"
        out["metrics"][metric] = entry
    return out


def judge_drift(store: Any, fingerprint: str | None = None) -> dict[str, Any] | None:
    """The shift on the newest anchor set between the judge ``fingerprint`` (default: the newest
    checked) and the fingerprint checked on that set before it; None without two."""
    rows = store.anchor_results()
    if not rows:
        return None
    target = fingerprint or rows[0]["fingerprint"]
    mine = next((r for r in rows if r["fingerprint"] == target), None)
    if mine is None:
        return None
    same_set = [r for r in rows if r["anchor_hash"] == mine["anchor_hash"]]
    previous = next((r for r in same_set if r["fingerprint"] != target and r["created_at"] <= mine["created_at"]), None)
    if previous is None:
        return None

    def group(head: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        return {
            r["metric"]: r
            for r in same_set
            if r["fingerprint"] == head["fingerprint"] and r["created_at"] == head["created_at"]
        }

    drift = anchor_shift(group(previous), group(mine), previous["fingerprint"], target)
    drift.update(anchor_set=mine["anchor_set"], before_at=previous["created_at"])
    return drift


def anchor_attribution(
    store: Any, before_id: str, after_id: str, metric: str, change: float, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any] | None:
    """How much of ``change`` (a metric's change in means between a run judged by ``before_id``
    and one judged by ``after_id``) the judge's shift on the anchors accounts for: the shift
    with its interval (:func:`anchor_shift`, on the newest anchor set both judges were checked
    on), its share of the change and what is left. None when the two judges have no anchor
    results in common."""
    rows = [r for r in store.anchor_results() if r["metric"] == metric]
    after = next((r for r in rows if r["fingerprint"] == after_id), None)
    before = next(
        (
            r
            for r in rows
            if r["fingerprint"] == before_id and after is not None and r["anchor_hash"] == after["anchor_hash"]
        ),
        None,
    )
    if after is None or before is None:
        return None
    shift = anchor_shift({metric: before}, {metric: after}, before_id, after_id, n_boot=n_boot, seed=seed)
    d = shift["metrics"][metric]
    if d.get("shift") is None:
        return None
    out = {
        "anchor_set": after["anchor_set"],
        "n": d["n"],
        "shift": d["shift"],
        "ci": d["ci"],
        "change": change,
        "share": d["shift"] / change if change else None,
        "left": change - d["shift"],
        "changes": shift["changes"],
    }
    return out


def new_judge_lines(store: Any, run_id: int) -> list[str]:
    """For a run just recorded: when its judge's fingerprint differs from the previous run's of
    the same kind and dataset and both judges were checked on an anchor set, the judge's shift on
    the anchors (one line per metric); else nothing."""
    if not store.anchor_results():
        return []
    infos = store.runs(limit=None)
    this = next((i for i in infos if i.id == run_id), None)
    earlier = [
        i for i in infos if this is not None and i.id < run_id and i.kind == this.kind and i.dataset == this.dataset
    ]
    if not earlier:
        return []
    now, before = store.run_fingerprints(run_id), store.run_fingerprints(earlier[0].id)
    lines = []
    for metric, b in now.items():
        a = before.get(metric) or []
        if len(a) != 1 or len(b) != 1 or a == b:
            continue
        att = anchor_attribution(store, a[0], b[0], metric, 0.0)
        if att is not None:
            what = "; ".join(att["changes"]) or f"fingerprint {a[0]} -> {b[0]}"
            lines.append(
                f"new judge for {metric} since run {earlier[0].id} ({what}): its shift on the anchor set "
                f"{att['anchor_set']} is {att['shift']:+.4f} [{att['ci'][0]:+.4f}, {att['ci'][1]:+.4f}] over "
                f"{att['n']} anchors"
            )
    return lines
