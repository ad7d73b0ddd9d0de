"""The ``ragmeter`` command line.

Commands of other layers (``evaluate-traces`` from :mod:`ragmeter.tracing`) register through the
``ragmeter.cli`` entry-point group, so the core never imports them.

Exit status: 0 when the run completed (bad records are reported, not fatal), 1 when a
``--fail-under`` threshold is not met (or ``compare --fail-on-regression`` finds one), 2 for
unusable input: a missing or unreadable file, no valid record, an unknown metric or judge, a
malformed results file; 2 as well when a report could not be written (the others still are).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Sequence

from ragmeter import __version__
from ragmeter.judges.spec import SPEC_HELP
from ragmeter.metrics import metrics_help

EXIT_OK, EXIT_THRESHOLD, EXIT_INPUT = 0, 1, 2

_DESCRIPTION = """\
Score retrieval-augmented generation.

  ragmeter evaluate data.jsonl                      judge metrics with the default judge
  ragmeter evaluate data.jsonl -m faithfulness,ndcg@10 --judge openai:gpt-4o-mini --out report.html
  ragmeter evaluate-traces otel-export.json         score RAG traces exported by an OTel collector
  ragmeter report results.jsonl --out report.html   render a saved run
  ragmeter compare before.jsonl after.jsonl         what changed between two runs

Input records (JSONL / JSON / CSV) need a question and contexts; RAGAS and DeepEval field names
are accepted (user_input, retrieved_contexts, response, reference, input, retrieval_context,
actual_output, expected_output ...).

"""

_JUDGES = ("Judges: {judges}. The default is $RAGMETER_JUDGE, else OpenAI when OPENAI_API_KEY is set, "
           "else Anthropic when ANTHROPIC_API_KEY is set, else offline (no key, no network).")


def metric_list(values: Sequence[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` -> ["a", "b", "c"]; None when no metric was named."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


def parse_fail_under(values: Sequence[str] | None) -> dict[str, float]:
    """``["0.7"]`` -> {"*": 0.7}; ``["faithfulness=0.85"]`` -> {"faithfulness": 0.85}."""
    out: dict[str, float] = {}
    for v in values or []:
        name, sep, num = v.rpartition("=")
        key = name.strip() if sep else "*"
        try:
            value = float(num)
        except ValueError:
            raise ValueError(f"--fail-under {v!r}: expected a number or METRIC=NUMBER") from None
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"--fail-under {v!r}: threshold must be between 0 and 1")
        out[key] = value
    return out


_REPORT_TYPES = (".md", ".markdown", ".html", ".htm", ".json", ".jsonl", ".csv")


def check_run_options(args: argparse.Namespace) -> None:
    """Reject bad ``--fail-under`` values and report types before any judge call is spent."""
    parse_fail_under(getattr(args, "fail_under", None))
    for path in getattr(args, "out", None) or []:
        suffix = Path(path).suffix.lower()
        if suffix not in _REPORT_TYPES:
            raise ValueError(f"--out {path}: unknown report type {suffix or '(none)'!r} (use .md, .html, .json, .jsonl or .csv)")


def _check_thresholds(summary: dict[str, dict[str, Any]], thresholds: dict[str, float]) -> list[str]:
    failures = []
    for metric, row in summary.items():
        limit = thresholds.get(metric, thresholds.get("*"))
        if limit is None:
            continue
        mean = row["mean"]
        if mean is None or mean < limit:
            failures.append(f"{metric}: mean {'none' if mean is None else f'{mean:.4f}'} < {limit}")
    unknown = [m for m in thresholds if m != "*" and m not in summary]
    failures += [f"{m}: no such metric in this run" for m in unknown]
    return failures


def _print_result(result: Any, out: Any) -> None:
    from ragmeter.report import _HEADER, _usage_line, summary_rows, text_table

    print(f"ragmeter: {len(result)} samples scored, {len(result.invalid)} invalid, judge: {result.judge}", file=out)
    print(text_table(_HEADER, summary_rows(result)), file=out)
    print(_usage_line(result), file=out)
    for err in result.invalid:
        print(f"invalid record: {err}", file=sys.stderr)


def finish(result: Any, args: argparse.Namespace) -> int:
    """Print the summary, write the reports (one that cannot be written does not stop the
    others) and check the thresholds; returns the exit status."""
    _print_result(result, sys.stdout)
    unwritten = 0
    for path in args.out or []:
        try:
            result.save(path)
        except (OSError, ValueError) as err:
            print(f"ragmeter: error: could not write {path}: {err}", file=sys.stderr)
            unwritten += 1
            continue
        print(f"wrote {path}")
    db = getattr(args, "db", None) or (os.environ.get("RAGMETER_DB") if hasattr(args, "db") else None)
    if db:
        from ragmeter.store import Store

        with Store(db) as store:
            run_id = store.record_run(result, dataset=getattr(args, "dataset", None))
        print(f"recorded run {run_id} in {store.where}")
    failures = _check_thresholds(result.summary(), parse_fail_under(getattr(args, "fail_under", None)))
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    if unwritten:
        return EXIT_INPUT
    return EXIT_THRESHOLD if failures else EXIT_OK


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from ragmeter.data import load_samples
    from ragmeter.runner import evaluate, resolve_metrics

    check_run_options(args)  # reject bad thresholds and report types before spending judge calls
    dataset = load_samples(args.file)
    args.dataset = Path(args.file).stem
    if not dataset:
        for err in dataset.errors:
            print(f"invalid record: {err}", file=sys.stderr)
        print(f"ragmeter: {args.file}: no valid records", file=sys.stderr)
        return EXIT_INPUT
    metrics = resolve_metrics(metric_list(args.metrics), dataset)
    result = evaluate(dataset, metrics, args.judge, concurrency=args.concurrency, progress=not args.no_progress)
    return finish(result, args)


def _cmd_report(args: argparse.Namespace) -> int:
    from ragmeter.result import EvaluationResult

    check_run_options(args)
    result = EvaluationResult.from_jsonl(args.results)
    return finish(result, args)


def _num(v: float | None, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _cmd_compare(args: argparse.Namespace) -> int:
    from ragmeter.report import compare_results, text_table
    from ragmeter.result import EvaluationResult

    before, after = EvaluationResult.from_jsonl(args.before), EvaluationResult.from_jsonl(args.after)
    cmp = compare_results(before, after, tolerance=args.tolerance)
    rows = [[m, _num(r["before"]), _num(r["after"]), _num(r["delta"], signed=True)] for m, r in cmp["metrics"].items()]
    print(f"{cmp['shared_samples']} shared samples ({cmp['only_before']} only before, {cmp['only_after']} only after)")
    print(text_table(["metric", "before", "after", "delta"], rows))
    print(f"{len(cmp['regressions'])} regressions, {len(cmp['improvements'])} improvements (tolerance {args.tolerance})")
    for r in cmp["regressions"][:20]:
        after_v = "error" if r["after"] is None else f"{r['after']:.4f}"
        print(f"  regression {r['sample_id']} {r['metric']}: {r['before']:.4f} -> {after_v}")
    return EXIT_THRESHOLD if (args.fail_on_regression and cmp["regressions"]) else EXIT_OK


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from ragmeter.dashboard import render_store
    from ragmeter.fileio import write_text_atomic
    from ragmeter.store import Store

    with Store(args.db) as store:
        page = render_store(store, runs=args.runs, samples=args.samples)
    write_text_atomic(args.out, page)
    print(f"wrote {args.out}")
    return EXIT_OK


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options every scoring command takes: metrics, judge, reports, thresholds, concurrency."""
    p.add_argument("-m", "--metrics", action="append", metavar="LIST", help=metrics_help())
    p.add_argument("-j", "--judge", metavar="SPEC",
                   help=SPEC_HELP + "; keys from OPENAI_API_KEY / ANTHROPIC_API_KEY, OPENAI_BASE_URL for "
                        "OpenAI-compatible servers. Default: see 'ragmeter --help'")
    p.add_argument("-o", "--out", action="append", metavar="PATH",
                   help="write the report; format from the suffix: .md, .html, .json, .jsonl (re-readable by "
                        "'ragmeter report' and 'compare'), .csv. Repeatable")
    p.add_argument("--fail-under", action="append", metavar="[METRIC=]X",
                   help="exit 1 when a metric's mean is below X (all metrics, or METRIC=X for one; repeatable)")
    p.add_argument("--concurrency", type=int, default=8, help="samples scored at once (default 8)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--db", metavar="PATH|URL",
                   help="record the run in a history store: a SQLite file or a postgresql:// URL "
                        "(default: $RAGMETER_DB when set; see 'ragmeter dashboard')")


def _add_plugin_commands(sub: Any) -> None:
    """Commands other layers register through the ``ragmeter.cli`` entry-point group (each a
    ``register(subparsers)`` function): the core never imports them. A plugin whose layer cannot
    be imported (its extra is not installed) is left out."""
    for ep in sorted(entry_points(group="ragmeter.cli"), key=lambda e: e.name):
        try:
            register = ep.load()
        except ImportError:
            continue
        register(sub)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ragmeter`` command."""
    parser = argparse.ArgumentParser(prog="ragmeter", description=_DESCRIPTION + textwrap.fill(_JUDGES.format(judges=SPEC_HELP), 96),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ragmeter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("evaluate", help="score a dataset file (JSONL / JSON / CSV)",
                       description="Score every record of FILE, print a summary table and write reports.")
    p.add_argument("file", metavar="FILE", help="samples: .jsonl, .json or .csv")
    add_run_options(p)
    p.set_defaults(func=_cmd_evaluate)

    _add_plugin_commands(sub)

    p = sub.add_parser("report", help="render a saved results file (.jsonl from 'evaluate --out')",
                       description="Print the summary of a results JSONL file and write it as .md / .html / .json / .csv.")
    p.add_argument("results", metavar="RESULTS", help="results .jsonl written by 'ragmeter evaluate --out x.jsonl'")
    p.add_argument("-o", "--out", action="append", metavar="PATH", help="report path (.md, .html, .json, .jsonl, .csv)")
    p.add_argument("--fail-under", action="append", metavar="[METRIC=]X", help="exit 1 when a metric's mean is below X")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("dashboard", help="write the HTML dashboard of a history store",
                       description="One self-contained HTML page of the runs recorded with --db: trends over runs "
                                   "and days, the newest run's summary, its worst samples with their evidence.")
    p.add_argument("--db", metavar="PATH|URL", default=None,
                   help="the history store: a SQLite file or a postgresql:// URL (default $RAGMETER_DB, else ragmeter.db)")
    p.add_argument("-o", "--out", metavar="PATH", default="dashboard.html", help="the page to write (default dashboard.html)")
    p.add_argument("--runs", type=int, default=30, help="how many recent runs draw the trends (default 30)")
    p.add_argument("--samples", type=int, default=500, help="how many of the newest run's worst samples to list (default 500)")
    p.set_defaults(func=_cmd_dashboard)

    p = sub.add_parser("compare", help="compare two saved runs", description="Per-metric means and per-sample regressions between two results files.")
    p.add_argument("before", metavar="BEFORE", help="results .jsonl of the baseline run")
    p.add_argument("after", metavar="AFTER", help="results .jsonl of the new run")
    p.add_argument("--tolerance", type=float, default=0.05, help="a sample regresses when a value falls by more than this (default 0.05)")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any sample regressed")
    p.set_defaults(func=_cmd_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ragmeter`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_INPUT
    try:
        return args.func(args)
    except (OSError, ValueError, KeyError, ImportError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"ragmeter: error: {msg}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
