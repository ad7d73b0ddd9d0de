"""Internal: The ``ragmeter trust`` command, registered with the core CLI through the ``ragmeter.cli``
entry point. Two forms::

    ragmeter trust RESULTS --labels LABELS [--out card.html|.md|.json|.txt] [--db STORE]
    ragmeter trust check --anchors ANCHORS --judge SPEC [--db STORE]

The first prints the trust card of a run (a results file, or a run id / tag in the store) against
human labels (a file, or the store's) and stores the card with a stored run; the second scores an
anchor set with a judge, stores the results under the judge's fingerprint and shows the shift
against the judge checked before on the same set.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ragmeter.cli import EXIT_OK

__all__ = ["register"]

_USAGE = (
    "ragmeter trust RESULTS [--labels LABELS] [--out PATH] [--db STORE] [options]\n"
    "       ragmeter trust check --anchors ANCHORS --judge SPEC [--db STORE] [options]"
)


def _store(args: argparse.Namespace, required: bool = False) -> Any:
    db = args.db or os.environ.get("RAGMETER_DB")
    if not db and not required:
        return None
    from ragmeter.store import Store

    return Store(db)


def _metrics(values: list[str] | None) -> list[str] | None:
    from ragmeter.cli import metric_list

    return metric_list(values)


def _cmd_card(args: argparse.Namespace) -> int:
    from ragmeter.trust.card import trust_card

    if args.anchors or args.judge:
        raise ValueError("--anchors and --judge belong to 'ragmeter trust check'")
    for path in args.out or []:
        if os.path.splitext(path)[1].lower() not in (".html", ".htm", ".md", ".markdown", ".json", ".txt"):
            raise ValueError(f"--out {path}: unknown trust card type (use .html, .md, .json or .txt)")
    db = args.db or os.environ.get("RAGMETER_DB")
    labels: Any = args.labels
    if labels is None:
        if not db:
            raise ValueError(
                "give --labels LABELS (a labels file), or --db STORE holding labels ('ragmeter labels import')"
            )
        with _store(args, required=True) as store:
            labels = store.labels()
        if not labels:
            raise ValueError(f"{db}: no labels stored; give --labels LABELS")
    card = trust_card(
        args.results,
        labels,
        metrics=_metrics(args.metric),
        n_boot=args.bootstrap,
        seed=args.seed,
        worst=args.worst,
        db=db,
    )
    print(card.to_text(), end="")
    for path in args.out or []:
        card.save(path)
        print(f"wrote {path}")
    run_id = card.data.get("run_id")
    if run_id is not None:
        with _store(args, required=True) as store:
            store.record_trust_card(run_id, card.to_dict())
            print(f"stored the card with run {run_id} in {store.where}")
    return EXIT_OK


def _cmd_check(args: argparse.Namespace) -> int:
    from ragmeter.fileio import json_text, write_text_atomic
    from ragmeter.trust.anchors import check_anchors

    if not args.anchors:
        raise ValueError("ragmeter trust check needs --anchors ANCHORS (a labeled JSONL anchor set)")
    if not args.judge:
        raise ValueError("ragmeter trust check needs --judge SPEC (the judge to check)")
    if args.labels:
        raise ValueError("--labels belongs to 'ragmeter trust RESULTS'; an anchor set carries its labels")
    store = _store(args)
    try:
        check = check_anchors(
            args.anchors,
            args.judge,
            metrics=_metrics(args.metric),
            store=store,
            n_boot=args.bootstrap,
            seed=args.seed,
            progress=not args.no_progress,
        )
    finally:
        if store is not None:
            store.close()
    print(check.to_text(), end="")
    for path in args.out or []:
        if os.path.splitext(path)[1].lower() != ".json":
            raise ValueError(f"--out {path}: an anchor check is written as .json")
        write_text_atomic(
            path,
            json_text(
                {
                    "anchor_set": check.anchors.name,
                    "anchor_hash": check.anchors.hash,
                    "fingerprint": check.fingerprint,
                    "judge": check.judge,
                    "results": check.results,
                    "drift": check.drift,
                },
                indent=1,
            ),
        )
        print(f"wrote {path}")
    if store is not None:
        print(f"stored the results of judge {check.judge} (fingerprint {check.fingerprint}) in {store.where}")
    return EXIT_OK


def _cmd_trust(args: argparse.Namespace) -> int:
    if args.results == "check":
        return _cmd_check(args)
    if args.results is None:
        raise ValueError(f"usage: {_USAGE}")
    return _cmd_card(args)


def register(sub: Any) -> None:
    """Add ``trust`` (the trust card, and ``trust check`` for anchor sets) to the ``ragmeter``
    command's subparsers."""
    p = sub.add_parser(
        "trust",
        help="how far the judge can be trusted: trust card against labels; anchor-set drift",
        usage=_USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="ragmeter trust RESULTS --labels LABELS: the run's judge against human labels, "
        "per metric: AUROC, balanced accuracy and Cohen's kappa at the threshold, Spearman, "
        "bias in human units, calibration, each with a 95% (cluster) bootstrap interval; "
        "the confusion at the threshold; the mean in human units corrected with the labels "
        "(PPI++); the worst disagreements; and the uses the judge is fit for, with the "
        "rule beside each.\n\nragmeter trust check --anchors ANCHORS --judge SPEC: score "
        "a frozen labeled anchor set, store the results under the judge's fingerprint and "
        "show the shift against the judge checked before on it.",
    )
    p.add_argument(
        "results",
        nargs="?",
        metavar="RESULTS",
        help="results .jsonl / .json, or a run id or tag in the store (--db); 'check' for an anchor check",
    )
    p.add_argument(
        "--labels",
        metavar="LABELS",
        help="labels file (.jsonl, .json, .csv: sample_id, answer or answer_hash, metric or criterion, "
        "value, annotator, optional cluster and scale; or what the labeling page downloads); "
        "default: the store's labels",
    )
    p.add_argument("--anchors", metavar="ANCHORS", help="check: the anchor set (JSONL samples, each with 'labels')")
    p.add_argument("-j", "--judge", metavar="SPEC", help="check: the judge to score the anchors with")
    p.add_argument("-m", "--metric", action="append", metavar="LIST", help="only these metrics (comma-separated)")
    p.add_argument(
        "-o",
        "--out",
        action="append",
        metavar="PATH",
        help="write the card: .html, .md, .json or .txt (check: .json); repeatable",
    )
    p.add_argument(
        "--db",
        metavar="PATH|URL",
        help="the store: run ids and tags, labels, where cards and anchor results are kept (default $RAGMETER_DB)",
    )
    p.add_argument(
        "--bootstrap", type=int, default=1000, metavar="N", help="bootstrap draws per interval (default 1000)"
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--worst", type=int, default=5, metavar="N", help="worst disagreements listed per metric (default 5)"
    )
    p.add_argument("--no-progress", action="store_true", help="check: no progress bar")
    p.set_defaults(func=_cmd_trust)
