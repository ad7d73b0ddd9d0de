"""Internal: The ``ragmeter`` command line.

Commands of other layers (``evaluate-traces`` from :mod:`ragmeter.tracing`) register through the
``ragmeter.cli`` entry-point group, so the core never imports them.

Exit status: 0 when the run completed (bad records are reported, not fatal; some scores that
errored are counted in the summary), 1 when a ``--fail-under`` threshold is not met (or the
``compare`` gate fails) or when every score of a run errored (unless ``--allow-errors``), 2 for
unusable input: a missing or unreadable file, no valid record, an unknown metric or judge, a
malformed results file; 2 as well when a report or the history store could not be written (the
others still are, and the summary is printed); 130 after Ctrl-C (one line says what was kept and
how to resume; no traceback). A closed stdout (``ragmeter evaluate ... | head -1``) is a normal
end: reports are written before anything is printed, and the exit status is the one the run would
have had.

Errors are one line, ``ragmeter: error: ...`` (a store's names the store, password redacted, and
the cause); ``RAGMETER_DEBUG=1`` prints the traceback after it.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import sys
import textwrap
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from ragmeter import __version__
from ragmeter.judges.spec import spec_help
from ragmeter.metrics import metrics_help
from ragmeter.profiles import PROFILES

EXIT_OK, EXIT_THRESHOLD, EXIT_INPUT = 0, 1, 2
#: Set to 1 for the traceback after an error's one line.
DEBUG_VAR = "RAGMETER_DEBUG"
#: Exit status after Ctrl-C (128 + SIGINT, as a shell reports a command stopped by it).
EXIT_INTERRUPTED = 130

_DESCRIPTION = """\
Score retrieval-augmented generation.

  ragmeter evaluate data.jsonl                      judge metrics with the default judge
  ragmeter evaluate data.jsonl -m faithfulness,ndcg@10 --judge openai:gpt-4o-mini --out report.html
  ragmeter evaluate-traces otel-export.json         score RAG traces exported by an OTel collector
  ragmeter report results.jsonl --out report.html   render a saved run
  ragmeter compare before.jsonl after.jsonl         regression gate: what changed, and is it real

Input records (JSONL / JSON / CSV) need a question and contexts; RAGAS and DeepEval field names
are accepted (user_input, retrieved_contexts, response, reference, input, retrieval_context,
actual_output, expected_output ...).

"""

_JUDGES = (
    "Judges: {judges}. The default is $RAGMETER_JUDGE, else OpenAI when OPENAI_API_KEY is set, "
    "else Anthropic when ANTHROPIC_API_KEY is set, else offline (no key, no network)."
)


def metric_list(values: Sequence[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` -> ["a", "b", "c"]; None when no metric was named."""
    if not values:
        return None
    out: list[str] = []
    for v in values:
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


def metric_values(values: Sequence[str] | None, flag: str) -> dict[str, float]:
    """``[METRIC=]X`` options, repeated and / or comma-separated, as {metric: X} (``"*"`` for a
    bare X, every metric): ``["0.1", "faithfulness=0.03,answer_relevancy=0.08"]`` -> {"*": 0.1,
    "faithfulness": 0.03, "answer_relevancy": 0.08}. A value that is not a finite number, or a
    metric given twice, is a ValueError naming ``flag``."""
    out: dict[str, float] = {}
    for item in (x.strip() for v in values or [] for x in v.split(",")):
        if not item:
            continue
        name, sep, num = item.partition("=")
        key, num = (name.strip(), num) if sep else ("*", name)
        try:
            value = float(num)
        except ValueError:
            value = math.nan
        if not key or not math.isfinite(value):
            raise ValueError(
                f"{flag} {item!r}: expected a number or METRIC=NUMBER (repeat the option or separate with commas)"
            )
        if key in out:
            raise ValueError(f"{flag} {item!r}: {'every metric' if key == '*' else key} is given twice")
        out[key] = value
    return out


def parse_fail_under(values: Sequence[str] | None) -> dict[str, float]:
    """``["0.7"]`` -> {"*": 0.7}; ``["faithfulness=0.85"]`` -> {"faithfulness": 0.85} (see
    :func:`metric_values`: repeatable, comma lists)."""
    out = metric_values(values, "--fail-under")
    for key, value in out.items():
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"--fail-under {key}={value:g}: threshold must be between 0 and 1")
    return out


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--concurrency 0`` is an error, not the default)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or str(value) != text.strip().lstrip("+"):
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


_REPORT_TYPES = (".md", ".markdown", ".html", ".htm", ".json", ".jsonl", ".csv")


def check_run_options(args: argparse.Namespace) -> None:
    """Reject bad ``--fail-under`` values and report types before any judge call is spent."""
    parse_fail_under(getattr(args, "fail_under", None))
    for path in getattr(args, "out", None) or []:
        suffix = Path(path).suffix.lower()
        if suffix not in _REPORT_TYPES:
            raise ValueError(
                f"--out {path}: unknown report type {suffix or '(none)'!r} (use .md, .html, .json, .jsonl or .csv)"
            )


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


def score_errors(result: Any) -> tuple[int, int, str | None]:
    """``(errored, total, first)``: how many scores of ``result`` errored, of how many, and the
    first error as ``sample <id>, <metric>: <message>`` (None when none errored)."""
    errored, total, first = 0, 0, None
    for r in result.results:
        for name, score in r.scores.items():
            total += 1
            if score.error:
                errored += 1
                if first is None:
                    first = f"sample {r.sample.id}, {name}: {score.error}"
    return errored, total, first


def _print_result(result: Any, out: Any) -> None:
    from ragmeter.report import _HEADER, _usage_line, latency_line, summary_rows, text_table

    errored = score_errors(result)[0]
    print(
        f"ragmeter: {len(result)} samples scored, {len(result.invalid)} invalid, judge: {result.judge}"
        + (f", {errored} scores errored" if errored else ""),
        file=out,
    )
    print(text_table(_HEADER, summary_rows(result)), file=out)
    latency = latency_line(result)
    if latency:
        print(latency, file=out)
    print(_usage_line(result), file=out)
    from ragmeter.report import repeat_lines

    for line in repeat_lines(result):
        print(line, file=out)
    for err in result.invalid:
        print(f"invalid record: {err}", file=sys.stderr)


def debug() -> bool:
    """Whether ``RAGMETER_DEBUG=1``: errors print their traceback after the one line."""
    return os.environ.get(DEBUG_VAR, "").strip().lower() in ("1", "true", "yes")


def error_line(message: Any, exc: BaseException | None = None) -> None:
    """``ragmeter: error: <message>`` on stderr; with ``RAGMETER_DEBUG=1`` the traceback of ``exc`` too."""
    print(f"ragmeter: error: {message}", file=sys.stderr)
    if exc is not None and debug():
        traceback.print_exception(exc, file=sys.stderr)


def store_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a history store's error (:class:`ragmeter.store.engine.StoreError`),
    without importing the store (SQLAlchemy) when no store was used."""
    engine = sys.modules.get("ragmeter.store.engine")
    return engine is not None and isinstance(exc, engine.StoreError)


def db_of(args: argparse.Namespace) -> str | None:
    """The history store of a command with a ``--db`` option: ``--db``, else ``$RAGMETER_DB``."""
    if not hasattr(args, "db"):
        return None
    return args.db or os.environ.get("RAGMETER_DB") or None


def open_recorder(args: argparse.Namespace, *, stream: str | None = None, resume: bool = False) -> Any:
    """The :class:`~ragmeter.store.recorder.RunRecorder` of ``--db`` (None without a store): a
    new run, or with ``resume`` the one linked to the results file ``stream`` (else the newest of
    the dataset). A store that cannot be opened gives None and sets ``args.store_failed`` to its
    error (the run goes on; :func:`finish` tries the store again)."""
    db = db_of(args)
    if not db:
        return None
    from ragmeter.store import Store
    from ragmeter.store.recorder import RunRecorder

    dataset = getattr(args, "dataset", None)
    try:
        store = Store(db)
    except Exception as exc:
        if not store_error(exc):
            raise
        args.store_failed = exc
        return None
    try:
        if not resume:
            return RunRecorder.new(store, dataset)
        if stream is None:
            return RunRecorder.for_dataset(store, dataset)
        return RunRecorder.for_file(store, dataset, stream)
    except BaseException as exc:
        store.close()
        if not store_error(exc):
            raise
        args.store_failed = exc
        return None


def _record(result: Any, args: argparse.Namespace, recorder: Any) -> tuple[list[str], bool]:
    """Record ``result`` in the ``--db`` store: finish the run ``recorder`` wrote as it went, or
    record it now. Returns (the lines to print: where it was recorded, and a new judge's shift on
    the anchor set when it was checked; whether the store failed: its error is printed)."""
    if recorder is None and not db_of(args):
        return [], False
    stream = getattr(args, "stream", None)
    if recorder is None:  # the store failed at the start (or the run was not recorded as it went): try it now
        recorder = open_recorder(args, stream=stream, resume=bool(stream))
        if recorder is not None and stream:
            from ragmeter.streaming import run_key_of, set_run_key

            if run_key_of(stream) != recorder.key:
                set_run_key(stream, recorder.key)  # so that --resume finds this run again
    if recorder is None:
        failed = getattr(args, "store_failed", None)
        error_line(f"{failed}; the run was not recorded", failed)
        return [], True
    try:
        line, err = recorder.finish(result)
        if line:
            from ragmeter.trust.anchors import new_judge_lines

            # a new judge: its shift on the anchor set, when checked
            lines = [line, *new_judge_lines(recorder.store, recorder.run_id)]
    finally:
        recorder.close()
    if err:
        error_line(err)
        return [], True
    return lines, False


def finish(result: Any, args: argparse.Namespace, preface: Sequence[str] = (), recorder: Any = None) -> int:
    """Write the reports and the history store first (one that cannot be written does not stop
    the others: a one-line error, exit status 2), then print ``preface`` lines, the summary and
    what was written, and check the thresholds; returns the exit status. ``recorder``: the
    :class:`~ragmeter.store.recorder.RunRecorder` that recorded the run as it went, finished
    here. When every score errored the status is 1 (unless ``args.allow_errors``); when only
    some did, the run still passes and the summary counts them."""
    wrote, unwritten = [], 0
    for path in args.out or []:
        try:
            result.save(path)
        except (OSError, ValueError) as err:
            print(f"ragmeter: error: could not write {path}: {err}", file=sys.stderr)
            unwritten += 1
            continue
        wrote.append(f"wrote {path}")
    lines, store_failed = _record(result, args, recorder)
    wrote += lines
    unwritten += store_failed
    failures = _check_thresholds(result.summary(), parse_fail_under(getattr(args, "fail_under", None)))
    errored, total, first = score_errors(result)
    all_errored = hasattr(args, "allow_errors") and not args.allow_errors and total and errored == total
    for line in preface:
        print(line)
    _print_result(result, sys.stdout)
    for line in wrote:
        print(line)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    if all_errored:
        print(
            f"ragmeter: error: all {errored} of {total} scores errored; the first: {first} "
            "(--allow-errors to exit 0 anyway)",
            file=sys.stderr,
        )
    if unwritten:
        return EXIT_INPUT
    return EXIT_THRESHOLD if failures or all_errored else EXIT_OK


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from ragmeter.data import Dataset
    from ragmeter.metrics import resolve_metrics
    from ragmeter.readers import load_samples
    from ragmeter.runner import evaluate

    check_run_options(args)  # reject bad thresholds and report types before spending judge calls
    args.dataset = Path(args.file).stem
    streams = [p for p in args.out or [] if Path(p).suffix.lower() == ".jsonl"]
    db = db_of(args)
    if args.resume and (len(streams) > 1 or not (streams or db)):
        raise ValueError(
            "--resume needs exactly one .jsonl --out (the results file to write and resume from) or a --db store"
        )
    if streams and (args.resume or db):  # results written as they are scored, into the file and the store
        return _cmd_evaluate_streamed(args, streams[0])
    dataset = load_samples(args.file)
    if not dataset:
        for err in dataset.errors:
            print(f"invalid record: {err}", file=sys.stderr)
        print(f"ragmeter: {args.file}: no valid records", file=sys.stderr)
        return EXIT_INPUT
    metrics = resolve_metrics(metric_list(args.metrics), dataset)
    recorder = open_recorder(args, resume=args.resume)
    preface: list[str] = []
    previous = None
    try:
        if args.resume and recorder is None:  # the store is where the run resumes from
            failed = args.store_failed
            error_line(f"{failed}; nothing to resume from", failed)
            return EXIT_INPUT
        if recorder is not None and recorder.run is not None:  # --resume: score the samples not stored yet
            previous = recorder.store.run(recorder.run.id)
            todo = Dataset([s for s in dataset if s.id not in recorder.done], dataset.errors, dataset.source)
            preface.append(
                f"ragmeter: {len(todo)} samples scored now, {len(dataset) - len(todo)} already in run {recorder.run.id}"
            )
            dataset = todo
        result = evaluate(
            dataset,
            metrics,
            args.judge,
            concurrency=args.concurrency,
            progress=not args.no_progress and len(dataset) > 0,
            profile=args.profile,
            executor=executor_from(args),
            recorder=recorder,
            repeats=args.repeats,
            repeat_band=args.repeat_band,
            capture_content=args.capture_content,
        )
    except BaseException:
        if recorder is not None:
            recorder.close()  # what was scored stays recorded (the run marked incomplete)
        raise
    if previous is not None:
        result = _joined(previous, result)
    _judge_notice(args, result)
    if result.profile:
        preface.append(f"ragmeter: profile {result.profile}")
    return finish(result, args, preface, recorder)


def _judge_notice(args: argparse.Namespace, result: Any) -> None:
    """Say so (stderr) when no judge was asked for and the default picked the offline one."""
    if args.judge is None:
        from ragmeter.judges.spec import default_judge_notice

        notice = default_judge_notice(result.judge)
        if notice:
            print(f"ragmeter: {notice}", file=sys.stderr)


def _joined(previous: Any, new: Any) -> Any:
    """A resumed run: the samples stored before, then the ones scored now."""
    from ragmeter.result import EvaluationResult

    joined = EvaluationResult(
        list(previous.results) + list(new.results),
        previous.metrics + [m for m in new.metrics if m not in previous.metrics],
        judge=new.judge,
        invalid=new.invalid,
        duration_s=previous.duration_s + new.duration_s,
        thresholds={**previous.thresholds, **new.thresholds},
    )
    joined.profile = new.profile
    return joined


def executor_from(args: argparse.Namespace) -> Any:
    """The executor ``--executor`` names: None (the runner's asyncio default) or a RayExecutor."""
    if args.executor != "ray":
        return None
    from ragmeter.executors import RayExecutor

    per_worker = {"concurrency": args.concurrency} if args.concurrency else {}
    return RayExecutor(args.ray_address, workers=args.workers, **per_worker)


def _cmd_evaluate_streamed(args: argparse.Namespace, stream: str) -> int:
    """``evaluate --resume`` or ``--db`` with a .jsonl ``--out``: samples read a line at a time,
    results appended to ``stream`` (and recorded in the store) as they finish; with ``--resume``
    the samples already in that file are skipped (see :mod:`ragmeter.streaming`)."""
    from ragmeter.runner import evaluate
    from ragmeter.streaming import StreamedResult

    args.stream = stream
    recorder = open_recorder(args, stream=stream, resume=args.resume)
    try:
        # evaluate(out=...) returns a StreamedResult
        result = cast(
            StreamedResult,
            evaluate(
                args.file,
                metric_list(args.metrics),
                args.judge,
                concurrency=args.concurrency,
                progress=not args.no_progress,
                profile=args.profile,
                executor=executor_from(args),
                out=stream,
                resume=args.resume,
                recorder=recorder,
                repeats=args.repeats,
                repeat_band=args.repeat_band,
                capture_content=args.capture_content,
            ),
        )
    except BaseException:
        if recorder is not None:
            recorder.close()  # what was scored stays recorded (the run marked incomplete)
        raise
    if not result.scored and not result.skipped:
        if recorder is not None:
            recorder.close()
        for err in result.invalid:
            print(f"invalid record: {err}", file=sys.stderr)
        print(f"ragmeter: {args.file}: no valid records", file=sys.stderr)
        return EXIT_INPUT
    _judge_notice(args, result)
    preface = (
        [f"ragmeter: {result.scored} samples scored now, {result.skipped} already in {stream}"] if args.resume else []
    )
    if result.profile:
        preface.append(f"ragmeter: profile {result.profile}")
    return finish(result, args, preface, recorder)


def _cmd_report(args: argparse.Namespace) -> int:
    check_run_options(args)
    from ragmeter.result import EvaluationResult

    return finish(EvaluationResult.load(args.results), args)


def parse_tolerance(values: Sequence[str] | None) -> float | dict[str, float]:
    """``None`` -> 0.05; ``["0.02"]`` -> 0.02; ``["faithfulness=0.03", "0.1"]`` (or
    ``["faithfulness=0.03,0.1"]``) -> {"faithfulness": 0.03, "*": 0.1}. Metric names are checked
    against the runs by :func:`ragmeter.comparison.compare` (a typo is an error, not ignored)."""
    out = metric_values(values, "--tolerance")
    for key, value in out.items():
        if value < 0:
            raise ValueError(f"--tolerance {key}={value:g}: a tolerance is 0 or more")
    if not out:
        return 0.05
    return out["*"] if list(out) == ["*"] else {"*": 0.05, **out}


def _cmd_compare(args: argparse.Namespace) -> int:
    from ragmeter.comparison import compare

    floors = parse_fail_under(args.fail_under)
    for path in args.out or []:
        if Path(path).suffix.lower() not in (".md", ".markdown", ".json", ".txt"):
            raise ValueError(f"--out {path}: unknown comparison report type (use .md, .json or .txt)")
    db = args.db or os.environ.get("RAGMETER_DB")
    cmp = compare(
        args.baseline,
        args.current,
        tolerance=parse_tolerance(args.tolerance),
        n_boot=args.n_boot,
        seed=args.seed,
        paired=args.paired,
        min_detectable=args.min_detectable,
        db=db,
        allow_judge_change=args.allow_judge_change,
        labels=args.labels,
    )
    print(cmp.to_text(max_rows=args.max_rows), end="")
    for path in args.out or []:
        cmp.save(path, max_rows=args.max_rows)
        print(f"wrote {path}")
    failures = cmp.gate(floors, fail_on_sample_regression=args.fail_on_sample_regression)
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return EXIT_THRESHOLD if failures else EXIT_OK


def _cmd_dashboard(args: argparse.Namespace) -> int:
    from ragmeter.dashboard import render_store
    from ragmeter.fileio import write_text_atomic
    from ragmeter.store import Store
    from ragmeter.store.engine import database_url, writable

    url = database_url(args.db)
    path = (
        Path(url.database)
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
        else None
    )
    # a store on a read-only mount (or in a folder or file that cannot be written) is read as it is: never written
    read_only = path is not None and path.is_file() and not (writable(path) and writable(path.parent))
    with Store(args.db, read_only=read_only) as store:
        page = render_store(
            store, runs=args.runs, samples=args.samples, dataset=args.dataset, kind=args.kind, tag=args.tag
        )
    write_text_atomic(args.out, page)
    print(f"wrote {args.out}")
    return EXIT_OK


def add_run_options(p: argparse.ArgumentParser) -> None:
    """The options every scoring command takes: metrics, judge, reports, thresholds, concurrency."""
    p.add_argument("-m", "--metrics", action="append", metavar="LIST", help=metrics_help())
    p.add_argument(
        "-j",
        "--judge",
        metavar="SPEC",
        help=spec_help() + "; keys from OPENAI_API_KEY / ANTHROPIC_API_KEY, OPENAI_BASE_URL for "
        "OpenAI-compatible servers. Default: see 'ragmeter --help'",
    )
    p.add_argument(
        "-o",
        "--out",
        action="append",
        metavar="PATH",
        help="write the report; format from the suffix: .md, .html, .json, .jsonl (re-readable by "
        "'ragmeter report' and 'compare'), .csv. Repeatable",
    )
    p.add_argument(
        "--fail-under",
        action="append",
        metavar="[METRIC=]X",
        help="exit 1 when a metric's mean is below X (all metrics, or METRIC=X for one; repeatable)",
    )
    p.add_argument(
        "--allow-errors",
        action="store_true",
        help="exit 0 even when every score errored (e.g. an unreachable judge); without it that is "
        "exit 1. When only some scores errored the run passes and the summary counts them",
    )
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=None,
        help="samples scored at once (default: the judge's cap on requests in flight, 64 for an LLM judge; else 8)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--db",
        metavar="PATH|URL",
        help="record the run in a history store: a SQLite file or a postgresql:// URL "
        "(default: $RAGMETER_DB when set; see 'ragmeter dashboard'). Results are recorded as they are "
        "scored (and a .jsonl --out written as they are), the run marked incomplete until it ends; "
        "--resume finishes a killed run",
    )


def _add_plugin_commands(sub: Any) -> None:
    """Commands other layers register through the ``ragmeter.cli`` entry-point group (each a
    ``register(subparsers)`` function): the core never imports them. A plugin whose layer cannot
    be imported (its extra is not installed) is left out; one that fails otherwise is left out
    and reported (:mod:`ragmeter.plugins`)."""
    from ragmeter.plugins import load_group

    def register(name: str, fn: Any) -> str | None:
        if not callable(fn):
            return f"expected register(subparsers), got {fn!r:.80}"
        fn(sub)
        return None

    load_group("ragmeter.cli", register, skip_missing=True)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ragmeter`` command."""
    parser = argparse.ArgumentParser(
        prog="ragmeter",
        description=_DESCRIPTION + textwrap.fill(_JUDGES.format(judges=spec_help()), 96),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ragmeter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "evaluate",
        help="score a dataset file (JSONL / JSON / CSV)",
        description="Score every record of FILE, print a summary table and write reports.",
    )
    p.add_argument("file", metavar="FILE", help="samples: .jsonl, .json or .csv")
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="domain profile: its pass / warn levels and extra checks (legal: citations of cases and "
        "statutes; medical: dosage advice needs a source and a caveat)",
    )
    add_run_options(p)
    p.add_argument(
        "--executor",
        choices=("asyncio", "ray"),
        default="asyncio",
        help="where samples are scored: this process (asyncio, default) or a Ray cluster (ray; "
        "pip install 'ragmeter[ray]'); with ray, --concurrency is per worker",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        default=None,
        help="the Ray cluster (ray://head:10001, auto); default $RAY_ADDRESS, else a local Ray runtime",
    )
    p.add_argument(
        "--workers", type=positive_int, default=None, help="Ray workers (default: one per CPU of the cluster)"
    )
    p.add_argument(
        "--no-content",
        dest="capture_content",
        action="store_false",
        default=None,
        help="score the content but write none: no question, chunk, answer, reference, claim, quote or "
        "explanation in the reports, the results file, the --db store or the log (default: "
        "$RAGMETER_CAPTURE_CONTENT=false does the same)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        metavar="K",
        help="ask an LLM judge K times per score: the value is their mean, each Score keeps every value "
        "and the spread, and unstable scores (verdicts that differ, or a spread over 0.3) are flagged; "
        "the extra calls are counted (default 1)",
    )
    p.add_argument(
        "--repeat-band",
        type=float,
        default=None,
        metavar="W",
        help="repeat only scores whose first value is within W of the metric's threshold",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="stream: read FILE a line at a time and append each result to the .jsonl --out as it is "
        "scored (memory bounded by --concurrency, not the dataset); samples already in that file are "
        "skipped, so a re-run of an interrupted job scores only the rest. With --db and no .jsonl "
        "--out: finish the newest run of FILE in the store, scoring the samples it lacks",
    )
    p.set_defaults(func=_cmd_evaluate)

    _add_plugin_commands(sub)

    p = sub.add_parser(
        "report",
        help="render a saved results file (.jsonl / .json from 'evaluate --out')",
        description="Print the summary of a results file (.jsonl or .json) and write it as .md / .html / .json / .csv.",
    )
    p.add_argument(
        "results", metavar="RESULTS", help="results .jsonl or .json written by 'ragmeter evaluate --out x.jsonl'"
    )
    p.add_argument("-o", "--out", action="append", metavar="PATH", help="report path (.md, .html, .json, .jsonl, .csv)")
    p.add_argument("--fail-under", action="append", metavar="[METRIC=]X", help="exit 1 when a metric's mean is below X")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "dashboard",
        help="write the HTML dashboard of a history store",
        description="One self-contained HTML page of the runs recorded with --db: trends over runs "
        "(one group of charts per dataset) and days, response times in seconds, the "
        "newest run's summary, its worst samples with their evidence, the sweeps.",
    )
    p.add_argument(
        "--db",
        metavar="PATH|URL",
        default=None,
        help="the history store: a SQLite file or a postgresql:// URL (default $RAGMETER_DB, else ragmeter.db); "
        "a SQLite file that cannot be written (a read-only mount) is read without writing",
    )
    p.add_argument(
        "-o", "--out", metavar="PATH", default="dashboard.html", help="the page to write (default dashboard.html)"
    )
    p.add_argument("--runs", type=int, default=30, help="how many recent runs draw the trends (default 30)")
    p.add_argument(
        "--samples", type=int, default=500, help="how many of the newest run's worst samples to list (default 500)"
    )
    p.add_argument(
        "--dataset",
        metavar="NAME",
        default=None,
        help="only the runs of this dataset (the file name 'evaluate --db' records, e.g. rag_samples)",
    )
    p.add_argument(
        "--kind",
        metavar="KIND",
        default=None,
        help="only the runs of this kind: evaluate, inline (production samples) or sweep",
    )
    p.add_argument("--tag", metavar="TAG", default=None, help="only the runs with this tag (e.g. nightly, pytest)")
    p.set_defaults(func=_cmd_dashboard)

    p = sub.add_parser(
        "compare",
        help="compare two runs: statistics, verdicts, a regression gate",
        description="Per metric: both means, the difference with a bootstrap 95% CI, p-values (paired t and "
        "Wilcoxon, or Welch and Mann-Whitney when samples do not match), effect size and a verdict; "
        "per sample: values that fell by more than the tolerance, became n/a or an error. Exit 1 "
        "when a metric regressed (mean fell by more than its tolerance, CI excluding zero; or the "
        "share of samples with no value, n/a or error, rose by more than its tolerance), a floor "
        "is broken, or (opt-in) any sample regressed.",
    )
    p.add_argument(
        "baseline", metavar="BASELINE", help="results .jsonl / .json, or a run id or tag in the history store (--db)"
    )
    p.add_argument("current", metavar="CURRENT", help="the run to check, same forms as BASELINE")
    p.add_argument(
        "--tolerance",
        action="append",
        metavar="[METRIC=]X",
        help="largest fall of a mean (and of a sample's value), and largest rise of the share of samples "
        "with no value (n/a or error), that is not a regression; all metrics, or METRIC=X for one "
        "(repeatable or comma-separated; an unknown metric is an error; default 0.05)",
    )
    p.add_argument(
        "--fail-under",
        action="append",
        metavar="[METRIC=]X",
        help="exit 1 when the current mean of a metric is below X",
    )
    p.add_argument("--fail-on-sample-regression", action="store_true", help="exit 1 when any sample regressed")
    p.add_argument(
        "--allow-judge-change",
        action="store_true",
        help="gate across judges: without it, a metric judged by a different judge (model, prompts, "
        "settings, rules: the judge fingerprint) in the two runs fails the gate",
    )
    p.add_argument(
        "--labels",
        metavar="LABELS",
        help="human labels (.jsonl / .json / .csv, see 'ragmeter trust'): also compare each labeled metric "
        "in human units (PPI++: the judge's scores corrected by the labels); a fall there beyond the "
        "tolerance fails the gate, and a metric judged differently is gated in human units",
    )
    p.add_argument(
        "--db", metavar="PATH|URL", help="history store for run ids and tags (default $RAGMETER_DB, else ragmeter.db)"
    )
    p.add_argument(
        "-o", "--out", action="append", metavar="PATH", help="write the comparison: .md, .json or .txt (repeatable)"
    )
    p.add_argument("--max-rows", type=int, default=20, help="sample regressions listed (default 20)")
    pairing = p.add_mutually_exclusive_group()
    pairing.add_argument(
        "--paired",
        dest="paired",
        action="store_true",
        default=None,
        help="match samples by id (default: when the ids match)",
    )
    pairing.add_argument("--unpaired", dest="paired", action="store_false", help="independent samples (A/B traffic)")
    p.add_argument(
        "--min-detectable",
        type=float,
        default=None,
        metavar="X",
        help="difference the required sample size is computed for (default: the tolerance)",
    )
    p.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=_cmd_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ragmeter`` command; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_INPUT
    real = sys.stdout
    sys.stdout = out = _ClosedPipeSafe(real)
    try:
        try:
            return args.func(args)
        except Exception as err:
            if not isinstance(err, (OSError, ValueError, KeyError, ImportError)) and not store_error(err):
                raise
            error_line(err.args[0] if isinstance(err, KeyError) and err.args else err, err)
            return EXIT_INPUT
        except KeyboardInterrupt:  # Ctrl-C: stop, say what was kept and how to go on; no traceback
            print(f"ragmeter: interrupted; {interrupted_hint(args)}", file=sys.stderr)
            return EXIT_INTERRUPTED
    finally:
        out.flush()  # here, not at interpreter exit, where a closed pipe prints "Exception ignored"
        sys.stdout = real


def interrupted_hint(args: argparse.Namespace) -> str:
    """What an interrupted command kept and how to go on: a streamed ``evaluate --resume`` run
    names its results file and how many results it holds (the same command scores only the rest);
    another ``evaluate`` says how to make a run resumable."""
    if getattr(args, "command", None) != "evaluate":
        return "nothing more was written"
    streams = [p for p in getattr(args, "out", None) or [] if Path(p).suffix.lower() == ".jsonl"]
    if db_of(args):  # recorded as it went (and streamed into a .jsonl --out)
        return (
            "what was scored is recorded in the history store (the run marked incomplete); run the same "
            "command with --resume to score only the rest"
        )
    if getattr(args, "resume", False) and len(streams) == 1:
        try:
            with open(streams[0], encoding="utf-8", errors="replace") as fh:
                done = max(0, sum(1 for line in fh if line.strip()) - 1)  # the first line is the header
        except OSError:
            done = 0
        return (
            f"{done} results so far in {streams[0]}; run the same command again to score only the rest "
            "(--resume skips the samples already there)"
        )
    return (
        "no report was written; to keep each result as it is scored, run with --resume --out results.jsonl: "
        "after an interruption the same command then scores only the rest"
    )


def _closed_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)


class _ClosedPipeSafe:
    """A stdout wrapper for which a reader that went away (``| head -1``) is a normal end: the
    first write or flush that fails with a broken pipe points the file descriptor at
    ``os.devnull`` (so nothing fails again, not even the flush at interpreter exit) and the
    rest of the output is dropped; the command carries on to its real exit status."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.closed_by_reader = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def _gone(self) -> None:
        self.closed_by_reader = True
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)

    def write(self, text: str) -> int:
        """Write ``text``; dropped once the reader has gone."""
        if not self.closed_by_reader:
            try:
                return self._stream.write(text)
            except OSError as exc:
                if not _closed_pipe(exc):
                    raise
                self._gone()
        return len(text)

    def flush(self) -> None:
        """Flush; a reader that has gone is not an error."""
        try:
            self._stream.flush()
        except OSError as exc:
            if not _closed_pipe(exc):
                raise
            self._gone()
            try:
                self._stream.flush()  # the buffered rest goes to devnull now
            except OSError:
                pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
