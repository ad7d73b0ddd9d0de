"""The ``ragmeter evaluate-traces`` command, registered with the core CLI through the
``ragmeter.cli`` entry point (the core never imports :mod:`ragmeter.tracing`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ragmeter.cli import EXIT_INPUT, EXIT_OK, add_run_options, check_run_options, finish, metric_list

__all__ = ["register"]


def _cmd_evaluate_traces(args: argparse.Namespace) -> int:
    from ragmeter.tracing.offline import evaluate_traces

    check_run_options(args)
    result = evaluate_traces(args.file, metrics=metric_list(args.metrics), judge=args.judge,
                             export=args.export, endpoint=args.endpoint, concurrency=args.concurrency,
                             progress=not args.no_progress)
    stats = result.trace_stats
    if stats:
        skipped = ", ".join(f"{k.replace('skipped_', '')} {v}" for k, v in stats.items() if k.startswith("skipped_"))
        print(f"ragmeter: {stats.get('spans', 0)} spans in {stats.get('traces', 0)} traces, "
              f"{stats.get('invocations', 0)} RAG calls, {stats.get('samples', 0)} scored"
              + (f", skipped: {skipped}" if skipped else "")
              + (f", {stats['unreadable']} unreadable (see invalid records)" if stats.get("unreadable") else "")
              + (f", {stats['not_rag']} LLM calls without retrieval" if stats.get("not_rag") else ""))
    status = finish(result, args)
    export = result.export
    if export:
        print(f"exported {export['spans']} evaluation spans to {export['endpoint']}")
        if export.get("failed"):
            print(f"ragmeter: error: {export['failed']} evaluation spans could not be exported to "
                  f"{export['endpoint']}", file=sys.stderr)
            return EXIT_INPUT if status == EXIT_OK else status
    return status


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
    p.set_defaults(func=_cmd_evaluate_traces)
