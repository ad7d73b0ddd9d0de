"""Internal: The ``ragmeter testset`` command, registered through the ``ragmeter.cli`` entry point group."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ragmeter.cli import EXIT_INPUT, EXIT_OK

__all__ = ["register"]


def _cmd_testset(args: argparse.Namespace) -> int:
    from ragmeter.testset import generate, load_documents

    ts = generate(
        load_documents(args.docs),
        n=args.n,
        judge=args.judge,
        edge_cases=args.edge_cases,
        seed=args.seed,
        chunk_size=args.chunk_size,
    )  # OSError / ValueError: ragmeter.cli.main reports them, exit 2
    out = Path(args.out)
    chunks_out = Path(args.chunks_out) if args.chunks_out else out.with_name(out.stem + ".chunks.jsonl")
    ts.save(out, chunks_out)
    counts = ", ".join(f"{v} {k}" for k, v in ts.counts().items())
    cost = f", ${ts.usage.cost_usd:.4f}" if ts.usage.cost_usd is not None else ""
    print(
        f"wrote {len(ts)} questions ({counts}) to {out} and {len(ts.chunks)} chunks to {chunks_out}; "
        f"{ts.usage.calls} judge requests{cost}, {ts.duplicates} near-duplicates dropped"
    )
    for note in ts.notes:
        print(f"note: {note}", file=sys.stderr)
    return EXIT_OK if ts else EXIT_INPUT


def register(sub: Any) -> None:
    """Add ``testset`` to the ``ragmeter`` command's subparsers."""
    p = sub.add_parser(
        "testset",
        help="generate questions, reference answers and relevant chunk ids from documents",
        description="Generate a test set from DOCS (a folder of .txt / .md files, or a JSONL file of "
        "{id, text}): questions with reference answers and the ids of the chunks that "
        "answer them. The offline judge writes questions by rules plus the edge cases "
        "rules can make (numeric, negation, unanswerable, multi_chunk); an LLM judge "
        "writes simple, reasoning and multi-context questions plus edge cases.",
    )
    p.add_argument("docs", metavar="DOCS", help="folder of .txt / .md files, or a JSONL file of {id, text}")
    p.add_argument("--n", type=int, default=50, help="number of questions (default 50)")
    p.add_argument("--out", default="testset.jsonl", help="where to write the questions (default testset.jsonl)")
    p.add_argument(
        "--chunks-out", metavar="PATH", help="where to write the chunks (default OUT's name + .chunks.jsonl)"
    )
    p.add_argument("--judge", default=None, help="judge spec (default: RAGMETER_JUDGE, else a keyed LLM, else offline)")
    p.add_argument(
        "--edge-cases",
        type=float,
        default=0.1,
        help="share of edge-case questions (default 0.1; with --n 50, 5 of them)",
    )
    p.add_argument("--chunk-size", type=int, default=1000, help="characters per chunk (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the chunk choice (default 0)")
    p.set_defaults(func=_cmd_testset)
