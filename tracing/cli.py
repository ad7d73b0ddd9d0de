"""The ``ragmeter evaluate-traces`` command, registered with the core CLI through the
``ragmeter.cli`` entry point (the core never imports :mod:`ragmeter.tracing`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ragmeter.cli import EXIT_INPUT, EXIT_OK, add_run_options, check_run_options, finish, metric_list

__all__ = ["register"]


def _stats_line(stats: dict[str, int]) -> str:
    skipped = ", ".join(f"{k.removeprefix('skipped_').replace('_', ' ')} {v}" for k, v in stats.items()
                        if k.startswith("skipped_"))
    return (f"ragmeter: {stats.get('spans', 0)} spans in {stats.get('traces', 0)} traces, "
            f"{stats.get('invocations', 0)} RAG calls, {stats.get('samples', 0)} scored"
            + (f", skipped: {skipped}" if skipped else "")
            + (f", {stats['unreadable']} unreadable (see invalid records)" if stats.get("unreadable") else "")
            + (f", {stats['not_rag']} LLM calls without retrieval" if stats.get("not_rag") else ""))


def _cmd_evaluate_traces(args: argparse.Namespace) -> int:
    from ragmeter.tracing.offline import evaluate_traces

    check_run_options(args)
    result = evaluate_traces(args.file, metrics=metric_list(args.metrics), judge=args.judge,
                             export=args.export, endpoint=args.endpoint, concurrency=args.concurrency,
                             progress=not args.no_progress, rescore=args.rescore, phoenix=args.phoenix)
    status = finish(result, args, preface=[_stats_line(result.trace_stats)] if result.trace_stats else ())
    problems = []
    if result.export:
        print(f"exported {result.export['spans']} evaluation spans to {result.export['endpoint']}")
        if result.export.get("failed"):
            problems.append(f"{result.export['failed']} evaluation spans could not be exported to {result.export['endpoint']}")
    if result.phoenix:
        sent = result.phoenix
        print(f"sent {sent['span_annotations']} span and {sent['document_annotations']} document annotations "
              f"to Phoenix at {sent['endpoint']}")
        if sent.get("failed"):
            problems.append(f"{sent['failed']} Phoenix annotation requests failed (see the log)")
    for p in problems:
        print(f"ragmeter: error: {p}", file=sys.stderr)
    return EXIT_INPUT if problems and status == EXIT_OK else status


def register(sub: Any) -> None:
    """Add ``evaluate-traces`` to the ``ragmeter`` command's subparsers."""
    p = sub.add_parser("evaluate-traces", help="score RAG invocations in an OTLP JSON trace export",
                       description="Read an OTLP JSON export (the OTel collector's file exporter format), group spans "
                                   "into one sample per RAG invocation, score them, and optionally send evaluation "
                                   "spans back to an OTLP endpoint.")
    p.add_argument("file", metavar="FILE", help="OTLP JSON export (one ExportTraceServiceRequest per line, or one JSON document)")
    add_run_options(p)
    p.add_argument("--export", choices=["otlp"], help="also export evaluation carrier spans over OTLP/HTTP")
    p.add_argument("--endpoint", metavar="URL",
                   help="OTLP/HTTP traces endpoint for --export (default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or "
                        "$OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318/v1/traces)")
    p.add_argument("--rescore", action="store_true",
                   help="also score RAG calls that already carry a ragmeter evaluation span (default: skip and count them)")
    p.add_argument("--phoenix", metavar="URL",
                   help="also send the scores to Arize Phoenix at URL as span and document annotations "
                        '(needs pip install "ragmeter[phoenix]")')
    p.set_defaults(func=_cmd_evaluate_traces)
