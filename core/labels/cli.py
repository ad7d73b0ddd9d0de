"""Internal: The ``ragmeter labels`` command (export tasks, import labels, agreement), registered with the
core CLI through the ``ragmeter.cli`` entry point."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ragmeter.cli import EXIT_OK
from ragmeter.fileio import json_text
from ragmeter.labels.criteria import criteria as labeling_criteria
from ragmeter.labels.io import import_labels
from ragmeter.labels.report import agreement_report, format_leniency, format_report, judge_leniency
from ragmeter.labels.tasks import export_tasks
from ragmeter.result import EvaluationResult

__all__ = ["register"]

_LABEL_FILES = (".json", ".jsonl", ".csv")


def _cmd_export(args: argparse.Namespace) -> int:
    result = EvaluationResult.load(args.results)
    criteria = [c.strip() for c in args.criteria.split(",")] if args.criteria else list(labeling_criteria())
    path = export_tasks(result, args.out, criteria=criteria, show_verdicts=args.show_verdicts, n=args.n, seed=args.seed)
    print(f"wrote {min(len(result), args.n if args.n is not None else len(result))} labeling tasks to {path}")
    return EXIT_OK


def _cmd_import(args: argparse.Namespace) -> int:
    from ragmeter.store import Store

    labels = import_labels(args.file)
    with Store(args.db) as store:
        stored = store.record_labels(labels, source=str(args.file))
        where = store.where
    missing = sum(lb.value is None for lb in labels)
    print(f"stored {stored} labels from {args.file} in {where}" + (f" ({missing} left blank)" if missing else ""))
    return EXIT_OK


def _cmd_agreement(args: argparse.Namespace) -> int:
    leniency: dict[str, list] = {}
    if Path(args.source).suffix.lower() in _LABEL_FILES:
        labels = import_labels(args.source)
    else:
        from ragmeter.store import Store

        with Store(args.source) as store:
            labels = store.labels()
            for criterion in sorted({lb.criterion for lb in labels}):
                rows = judge_leniency(store, criterion, human_pass_at=args.human_pass_at)
                if rows:
                    leniency[criterion] = rows
    if not labels:
        raise ValueError(f"{args.source}: no labels")
    result = EvaluationResult.load(args.results) if args.results else None
    report = agreement_report(labels, result, human_pass_at=args.human_pass_at, n_boot=args.bootstrap, seed=args.seed)
    if args.json:
        print(json_text({"agreement": report, "leniency": leniency}, indent=2))
    else:
        print("\n".join([format_report(report), *(format_leniency(c, rows) for c, rows in leniency.items())]))
    return EXIT_OK


def register(sub: Any) -> None:
    """Add ``labels`` (with ``export``, ``import`` and ``agreement``) to the ``ragmeter`` command's subparsers."""
    p = sub.add_parser(
        "labels",
        help="human labels: export labeling tasks, import labels, measure agreement",
        description="Check the judge against people: export labeling tasks in review-queue order, "
        "import the completed labels into the history store, and measure agreement "
        "between annotators and between the judge and the annotators.",
    )
    lsub = p.add_subparsers(dest="labels_command", metavar="ACTION", required=True)

    e = lsub.add_parser("export", help="write labeling tasks (.jsonl, .csv or an offline .html page)")
    e.add_argument(
        "results", metavar="RESULTS", help="results file written by 'ragmeter evaluate --out' (.jsonl or .json)"
    )
    e.add_argument("--out", required=True, metavar="FILE", help="tasks file: .jsonl, .csv or .html")
    e.add_argument(
        "--criteria",
        metavar="LIST",
        help=f"comma-separated criteria to rate (default: {','.join(labeling_criteria())})",
    )
    e.add_argument("--show-verdicts", action="store_true", help="include the judge's verdicts (hidden by default)")
    e.add_argument("-n", type=int, default=None, metavar="N", help="only the first N tasks of the review queue")
    e.add_argument("--seed", type=int, default=0, help="seed of the random part of the queue (default 0)")
    e.set_defaults(func=_cmd_export)

    i = lsub.add_parser("import", help="store completed labels (.json, .jsonl or .csv) in the history store")
    i.add_argument("file", metavar="FILE", help="labels: sample_id, annotator, criterion, value 1-5 (blank = missing)")
    i.add_argument("--db", metavar="PATH|URL", help="history store (default $RAGMETER_DB, else ragmeter.db)")
    i.set_defaults(func=_cmd_import)

    a = lsub.add_parser("agreement", help="annotator agreement and judge vs humans")
    a.add_argument(
        "source", metavar="FILE_OR_DB", help="labels file (.json, .jsonl, .csv) or history store (path or URL)"
    )
    a.add_argument(
        "--results", metavar="RESULTS", help="results file of the judged run, to compare the judge with the humans"
    )
    a.add_argument(
        "--human-pass-at", type=float, default=4.0, help="a mean human rating at or above this passes (default 4)"
    )
    a.add_argument(
        "--bootstrap", type=int, default=1000, metavar="N", help="bootstrap draws for the intervals (default 1000)"
    )
    a.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a.set_defaults(func=_cmd_agreement)
