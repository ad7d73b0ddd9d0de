"""Internal: The dashboard of a history store: the last runs' trends (per dataset), the newest run's summary
and its worst samples, the inline samples' daily means, the sweeps, the human labels' agreement
with each other and with the judge, and the newest run's trust card and its judge's drift on the
anchor set (``ragmeter dashboard``, with ``--dataset``, ``--kind`` and ``--tag`` to choose the runs)."""

from __future__ import annotations

from typing import Any

from ragmeter.dashboard.model import RunEntry, Verdicts
from ragmeter.dashboard.page import render
from ragmeter.dashboard.sweeps import SWEEP_KIND, stored_sweeps

__all__ = ["render_store"]


def render_store(
    store: Any,
    *,
    runs: int = 30,
    samples: int = 500,
    title: str = "ragmeter dashboard",
    verdicts: Verdicts | None = None,
    dataset: str | None = None,
    kind: str | None = None,
    tag: str | None = None,
) -> str:
    """The page of ``store`` (a :class:`ragmeter.store.Store`): the last ``runs`` runs draw the
    trends (one group of charts per dataset), the newest one gives the summary and distributions,
    and its ``samples`` worst samples are listed with their evidence; the last sweeps
    (:func:`ragmeter.sweep` with ``store=``) get their own section, outside the trends and the
    runs. ``dataset``, ``kind`` and ``tag`` keep only the runs that match (as
    :meth:`~ragmeter.store.Store.runs` does; ``kind="sweep"`` shows the sweeps alone). A store of
    sweeps only gives a page of its sweeps. Raises ValueError when no run matches."""
    filters = {k: v for k, v in (("dataset", dataset), ("kind", kind), ("tag", tag)) if v is not None}
    infos = [] if kind == SWEEP_KIND else [i for i in store.runs(limit=None, **filters) if i.kind != SWEEP_KIND]
    infos = list(reversed(infos[:runs]))  # oldest first
    sweeps = stored_sweeps(store) if kind in (None, SWEEP_KIND) and dataset is None and tag is None else []
    if not infos and not sweeps:
        which = ", ".join(f"{k} {v!r}" for k, v in filters.items())
        raise ValueError(
            f"no run {'matches ' + which + ' ' if which else 'is recorded '}in {store.where}; "
            "record one with 'ragmeter evaluate ... --db'"
        )
    if not infos:
        return render([], [], title=title, verdicts=verdicts, sweeps=sweeps)
    entries = [
        RunEntry.from_result(
            store.run(i.id),
            i.id,
            verdicts=verdicts,
            created_at=i.created_at,
            kind=i.kind,
            dataset=i.dataset,
            app_version=i.app_version,
            git_commit=i.git_commit,
            tags=list(i.tags),
            complete=i.complete,
        )
        for i in infos
    ]
    latest = infos[-1]
    listed = store.samples(run_id=latest.id, limit=samples)
    daily = {}
    if kind in (None, "inline") and tag is None:
        daily = {
            m: [tuple(p) for p in store.metric_trend(m, by="day", kind="inline", dataset=dataset)]
            for m in latest.metrics
        }
    agreement, leniency = _human_labels(store, latest.id)
    trust, drift = _trust(store, latest.id)
    return render(
        entries,
        listed,
        title=title,
        verdicts=verdicts,
        daily={m: p for m, p in daily.items() if p},
        agreement=agreement,
        leniency=leniency,
        sweeps=sweeps,
        trust=trust,
        drift=drift,
    )


def _trust(store: Any, run_id: int) -> tuple[dict | None, dict | None]:
    """The trust card of run ``run_id`` (the one stored with it, else one made from the store's
    labels when some count for it) and the shift on the anchor set of the judge that scored it
    against the judge checked before it (None each when there is none)."""
    from ragmeter.trust import judge_drift, trust_card

    judges = [ids[0] for ids in store.run_fingerprints(run_id).values() if len(ids) == 1]
    drift = None
    for fid in dict.fromkeys(judges):
        drift = judge_drift(store, fid)
        if drift is not None:
            break
    card = store.trust_card(run_id)
    if card is None:
        labels = store.labels()
        made = trust_card(store.run(run_id), labels) if labels else None
        card = made.to_dict() if made is not None and made.metrics else None
        if card is not None:
            card["run"] = f"run {run_id}"
    return card, drift


def _human_labels(store: Any, run_id: int) -> tuple[dict, dict]:
    """The agreement report against run ``run_id`` and the judge's leniency per criterion, when
    the store holds human labels ({} and {} otherwise)."""
    labels = store.labels()
    if not labels:
        return {}, {}
    from ragmeter.labels import agreement_report, judge_leniency
    from ragmeter.labels.criteria import criterion_metrics

    report = agreement_report(labels, store.run(run_id))
    return report, {c: judge_leniency(store, c) for c in report if c in criterion_metrics()}
