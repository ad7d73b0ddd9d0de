"""Internal: The ``ragmeter evaluate-traces`` and ``ragmeter serve`` commands, registered with the core CLI
through the ``ragmeter.cli`` entry point (the core never imports :mod:`ragmeter.tracing`)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from ragmeter.cli import EXIT_INPUT, EXIT_OK, add_run_options, check_run_options, finish, metric_list

__all__ = ["register"]


def _stats_line(stats: dict[str, int]) -> str:
    skipped = ", ".join(
        f"{k.removeprefix('skipped_').replace('_', ' ')} {v}" for k, v in stats.items() if k.startswith("skipped_")
    )
    return (
        f"ragmeter: {stats.get('spans', 0)} spans in {stats.get('traces', 0)} traces, "
        f"{stats.get('invocations', 0)} RAG calls, {stats.get('samples', 0)} scored"
        + (f", skipped: {skipped}" if skipped else "")
        + (f" (scores of {stats['read_back']} read back from their evaluation spans)" if stats.get("read_back") else "")
        + (f", {stats['unreadable']} unreadable (see invalid records)" if stats.get("unreadable") else "")
        + (f", {stats['not_rag']} LLM calls without retrieval" if stats.get("not_rag") else "")
    )


def _cmd_evaluate_traces(args: argparse.Namespace) -> int:
    from ragmeter.tracing.offline import evaluate_traces

    check_run_options(args)
    result = evaluate_traces(
        args.file,
        metrics=metric_list(args.metrics),
        judge=args.judge,
        export=args.export,
        endpoint=args.endpoint,
        concurrency=args.concurrency,
        progress=not args.no_progress,
        rescore=args.rescore,
        phoenix=args.phoenix,
        langfuse=args.langfuse,
        evaluation_logs=args.evaluation_logs,
        id_keys=_id_keys(args.id_keys),
    )
    status = finish(result, args, preface=[_stats_line(result.trace_stats)] if result.trace_stats else ())
    problems = []
    if result.export:
        print(f"exported {result.export['spans']} evaluation spans to {result.export['endpoint']}")
        if result.export.get("failed"):
            problems.append(
                f"{result.export['failed']} evaluation spans could not be exported to {result.export['endpoint']}"
            )
    if result.phoenix:
        sent = result.phoenix
        judged, found = sent.get("spans_judged", 0), sent.get("spans_found")
        print(
            f"sent {sent['span_annotations']} span and {sent['document_annotations']} document annotations "
            f"to Phoenix at {sent['endpoint']}; "
            + (
                f"it could not be asked which of the {judged} judged spans it has"
                if found is None
                else f"it has {found} of the {judged} judged spans"
            )
        )
        if sent.get("failed"):
            problems.append(f"{sent['failed']} Phoenix annotation requests failed (see the log)")
        if found == 0 and judged:
            problems.append(
                f"Phoenix at {sent['endpoint']} has none of the {judged} judged spans, so it shows none "
                "of the annotations: send the traces to that Phoenix (and project) too"
            )
        elif found is not None and found < judged:
            print(f"ragmeter: Phoenix shows annotations only on the spans it has ({found} of {judged})")
    if result.langfuse:
        sent = result.langfuse
        print(
            f"sent {sent['scores']} scores to Langfuse at {sent['endpoint'] or 'the default host'} "
            f"in {sent['requests']} requests"
        )
        if sent.get("failed"):
            problems.append(f"{sent['failed']} Langfuse scores did not get through (see the log)")
    if result.evaluation_logs:
        sent = result.evaluation_logs
        print(f"exported {sent['exported']} evaluation log records to {sent['endpoint']}")
        if sent.get("export_failed") or sent.get("failed"):
            problems.append(
                f"{sent['export_failed'] + sent['failed']} evaluation log records could not be exported "
                f"to {sent['endpoint']}"
            )
    for p in problems:
        print(f"ragmeter: error: {p}", file=sys.stderr)
    return EXIT_INPUT if problems and status == EXIT_OK else status


def _id_keys(raw: list[str] | None) -> list[str] | None:
    keys = [k.strip() for part in raw or () for k in part.split(",") if k.strip()]
    return keys or None


def _serve_sinks(args: argparse.Namespace) -> list:
    """The result sinks ``serve`` was asked for (Phoenix, Langfuse, evaluation log records)."""
    sinks: list = []
    if args.phoenix:
        from ragmeter.tracing.phoenix import PhoenixAnnotationSink

        sinks.append(PhoenixAnnotationSink(endpoint=args.phoenix))
        _ = sinks[-1].client  # a missing client fails here, not at the first score
    if args.langfuse:
        from ragmeter.tracing.langfuse import LangfuseScoreSink

        sinks.append(LangfuseScoreSink(endpoint=args.langfuse))
        _ = sinks[-1].client
    if args.evaluation_logs:
        from ragmeter.tracing.events import EvaluationLogSink

        sinks.append(EvaluationLogSink(endpoint=args.evaluation_logs))
    return sinks


def _add_sink_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--phoenix",
        metavar="URL",
        help="also send the scores to Arize Phoenix at URL as span and document annotations "
        '(needs pip install "ragmeter[phoenix]")',
    )
    p.add_argument(
        "--langfuse",
        metavar="URL",
        help="also send the scores to Langfuse at URL as scores on the judged spans (keys from "
        'LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY; needs pip install "ragmeter[langfuse]")',
    )
    p.add_argument(
        "--evaluation-logs",
        metavar="URL",
        help="also export each score as a gen_ai.evaluation.result log record over OTLP/HTTP to URL "
        "(/v1/logs is added to a bare URL), in the judged span's context",
    )
    p.add_argument(
        "--id-keys",
        action="append",
        metavar="LIST",
        help="document metadata keys read, in order, as chunk ids when a span records no document id "
        "(comma-separated; default id,doc_id,document_id,chunk_id,node_id); a chunk without one "
        "gets a content-hash id",
    )


def _serve_token(args: argparse.Namespace) -> str | None:
    """The bearer token: ``--token``, else the first line of ``--token-file``, else
    ``$RAGMETER_SERVE_TOKEN`` (None: none). ValueError for both flags or an unreadable file."""
    import os

    from ragmeter.tracing.serve import TOKEN_ENV

    if args.token is not None and args.token_file is not None:
        raise ValueError("give --token or --token-file, not both")
    if args.token_file is not None:
        try:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except OSError as exc:
            raise ValueError(f"cannot read the token file {args.token_file}: {exc.strerror or exc}") from None
        if not token:
            raise ValueError(f"the token file {args.token_file} is empty")
        return token
    return args.token if args.token is not None else (os.environ.get(TOKEN_ENV) or None)


def _cmd_serve(args: argparse.Namespace) -> int:
    import ssl

    from ragmeter.redact import redact
    from ragmeter.tracing.serve import EvaluationService
    from ragmeter.tracing.serve_http import is_loopback

    token = None
    try:
        token = _serve_token(args)
        service = EvaluationService(
            metric_list(args.metrics),
            args.judge,
            host=args.host,
            port=args.otlp_port,
            grpc_port=args.otlp_grpc_port,
            sinks=_serve_sinks(args),
            id_keys=_id_keys(args.id_keys),
            forward=args.forward,
            forward_all=args.forward_all,
            max_body=args.max_body,
            token=token,
            insecure=args.insecure,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            workers=args.workers,
            max_connections=args.max_connections,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
            idle_timeout=args.idle_timeout,
            sample_rate=args.sample_rate,
            max_queue=args.max_queue,
            concurrency=args.concurrency,
            grace_period=args.grace_period,
            ttl=args.ttl,
            max_buffered_spans=args.max_pending_spans,
            max_traces=args.max_traces,
            shutdown_timeout=args.shutdown_timeout,
        )
    except (ValueError, OSError, ssl.SSLError) as exc:
        print(f"ragmeter serve: error: {redact(str(exc), [token] if token else [])}", file=sys.stderr)
        return EXIT_INPUT
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    service.start()
    access = ("bearer token required" if service.secured else "no token") + (", TLS" if args.tls_cert else "")
    print(
        f"ragmeter serve: OTLP/HTTP on {service.url}/v1/traces ({access})"
        + (f", OTLP/gRPC on port {service.grpc_port}" if service.grpc_port else "")
        + (f", forwarding evaluation spans to {redact(service.forward)}" if service.forward else ", not forwarding"),
        flush=True,
    )
    if not is_loopback(args.host) and not args.tls_cert:
        print(
            "ragmeter serve: warning: listening beyond this machine without TLS: "
            + ("the token and " if service.secured else "")
            + "the traces travel in clear text; use "
            "--tls-cert/--tls-key or a TLS-terminating proxy in front",
            file=sys.stderr,
            flush=True,
        )
    while not stop.wait(0.5):
        pass
    print("ragmeter serve: draining", flush=True)
    complete = service.shutdown()
    s = service.stats()
    print(
        f"ragmeter serve: stopped; {s['spans_received']} spans received, {s['samples_scored']} samples scored, "
        f"{s['samples_dropped']} dropped, {s['carriers_exported']} evaluation spans exported",
        flush=True,
    )
    return EXIT_OK if complete else EXIT_INPUT


def _add_serve(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run an OTLP/HTTP evaluation service",
        description="Receive OTLP/HTTP traces (protobuf or JSON) at /v1/traces, score the RAG calls "
        "in them, and export evaluation spans to the next OTLP endpoint. Endpoints: "
        "/healthz, /readyz, /metrics. Listens on 127.0.0.1 unless --host says otherwise "
        "(then a token is needed, or --insecure). SIGTERM drains and stops. Settings left "
        "out use their RAGMETER_* environment variable, else the default shown.",
    )
    p.add_argument("-m", "--metrics", action="append", metavar="LIST", help="metrics to score (comma-separated)")
    p.add_argument("-j", "--judge", metavar="SPEC", help="judge spec (see 'ragmeter evaluate --help')")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only). Another address needs a "
        "token, or --insecure",
    )
    p.add_argument("--otlp-port", type=int, default=4318, help="OTLP/HTTP port (default 4318)")
    p.add_argument(
        "--token-file",
        metavar="PATH",
        help="bearer token (the file's first line) every request but /healthz and /readyz must carry "
        "as 'Authorization: Bearer TOKEN' (gRPC: 'authorization' metadata); default "
        "$RAGMETER_SERVE_TOKEN",
    )
    p.add_argument(
        "--token",
        metavar="TOKEN",
        help="the bearer token itself (visible to other users in the process list: prefer --token-file "
        "or $RAGMETER_SERVE_TOKEN)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback --host without a token (anyone who reaches it can send traces and read /metrics)",
    )
    p.add_argument("--tls-cert", metavar="PEM", help="serve HTTPS (and gRPC over TLS) with this certificate chain")
    p.add_argument("--tls-key", metavar="PEM", help="the certificate's private key (default: in --tls-cert)")
    p.add_argument(
        "--max-body",
        type=int,
        default=32 * 1024 * 1024,
        metavar="BYTES",
        help="largest request body, on the wire and once decompressed (default 33554432 = 32 MiB); larger ones get 413",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=16,
        help="requests served at once (threads); 8 times as many more may wait, beyond them 503 (default 16)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=1000,
        help="connections open at once, idle ones included; beyond them the longest-idle one is "
        "closed, or 503 when none is idle (default 1000, at most half the open-file limit)",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="seconds for a request's line and headers, and the TLS handshake (default 10)",
    )
    p.add_argument("--body-timeout", type=float, default=30.0, help="seconds for a request's body (default 30)")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=30.0,
        help="seconds a kept-alive connection may wait for its next request (default 30)",
    )
    p.add_argument(
        "--otlp-grpc-port",
        type=int,
        metavar="PORT",
        help="also receive OTLP/gRPC on PORT, e.g. 4317 (default off; needs grpcio). The Collector's "
        "loadbalancing exporter speaks gRPC only",
    )
    p.add_argument(
        "--forward",
        metavar="URL",
        help="OTLP/HTTP endpoint for the evaluation spans, e.g. http://jaeger:4318 (/v1/traces is "
        "added to a bare URL); without it scores are only counted",
    )
    p.add_argument("--forward-all", action="store_true", help="forward the received spans too")
    p.add_argument("--sample-rate", type=float, help="share of traces scored (default 1.0)")
    p.add_argument(
        "--max-queue", type=int, help="scoring backlog in samples; requests get 429 from 3/4 of it (default 1000)"
    )
    p.add_argument("--concurrency", type=int, help="samples scored at once (default 4)")
    p.add_argument("--grace-period", type=float, help="seconds to wait for late spans of an ended call (default 2)")
    p.add_argument("--ttl", type=float, help="seconds after which an incomplete trace expires (default 300)")
    p.add_argument("--max-pending-spans", type=int, help="received spans not yet grouped before 429 (default 100000)")
    p.add_argument("--max-traces", type=int, help="traces held at once (default 10000)")
    p.add_argument("--shutdown-timeout", type=float, help="seconds SIGTERM waits for pending work (default 30)")
    _add_sink_options(p)
    p.set_defaults(func=_cmd_serve)


def register(sub: Any) -> None:
    """Add ``evaluate-traces`` and ``serve`` to the ``ragmeter`` command's subparsers."""
    p = sub.add_parser(
        "evaluate-traces",
        help="score RAG invocations in an OTLP JSON trace export",
        description="Read an OTLP JSON export (the OTel collector's file exporter format), group spans "
        "into one sample per RAG invocation, score them, and optionally send evaluation "
        "spans back to an OTLP endpoint.",
    )
    p.add_argument(
        "file", metavar="FILE", help="OTLP JSON export (one ExportTraceServiceRequest per line, or one JSON document)"
    )
    add_run_options(p)
    p.add_argument("--export", choices=["otlp"], help="also export evaluation carrier spans over OTLP/HTTP")
    p.add_argument(
        "--endpoint",
        metavar="URL",
        help="OTLP/HTTP traces endpoint for --export (default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or "
        "$OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318/v1/traces)",
    )
    p.add_argument(
        "--rescore",
        action="store_true",
        help="also score RAG calls that already carry a ragmeter evaluation span (default: skip and count them)",
    )
    _add_sink_options(p)
    p.set_defaults(func=_cmd_evaluate_traces)
    _add_serve(sub)
