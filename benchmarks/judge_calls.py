"""Judge calls and prompt size per sample, measured on the wire.

    python benchmarks/judge_calls.py [--samples5 PATH] [--samples10 PATH] [--separate]

Runs ragmeter with the real OpenAI SDK (``OpenAIJudge``) against a local OpenAI-compatible
server on 127.0.0.1 that answers every judge task validly and records every request, on the
20 RAG samples of ``examples/rag_samples.jsonl`` (5 contexts) and, when available, the same
samples with 10 contexts. It reports, per sample: chat requests, embedding requests, prompt
characters and an estimate of prompt tokens (characters / 4; the server cannot tokenise).
Embedding requests depend on timing: the texts of samples in flight share requests, so with the
default settings a run sends fewer embedding requests than samples (one per sample when run one
sample at a time, ``--concurrency 1``).

Metric sets: "RAGAS set" = faithfulness, answer relevancy, context precision, context recall and
context relevance (the set RAGAS and DeepEval were measured on, see ../shared/data/rag_samples);
"all" = every judge metric of ragmeter, citation metrics included.

Measured (2026-11-24, the bundled samples, every sample with a reference): 4 LLM calls per sample
for the RAGAS set and 5 for all, at 5 and at 10 contexts, because ``review_context`` asks
rate_chunks and attribute_statements in one call; est. prompt tokens per sample 2,392 (RAGAS set)
and 2,819 (all) at 5 contexts, 3,126 and 3,554 at 10. ``--separate`` asks the two tasks apart, as
before ``review_context``: 5 and 6 calls, 2,916 / 3,344 tokens at 5 contexts, 3,952 / 4,379 at 10.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the recording OpenAI-compatible server used by the tests

import ragmeter as rm  # noqa: E402
from helpers.servers import FakeLLMServer  # noqa: E402
from ragmeter.judges import OpenAIJudge  # noqa: E402
from ragmeter.metrics import REGISTRY  # noqa: E402

RAGAS_SET = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevance"]
PEERS = {  # measured by the shared data's authors on the same files (calls per sample, prompt tokens per sample)
    5: {"RAGAS evaluate()": (11, 8963), "RAGAS 0.4 collections": (13, 13604), "DeepEval": (17, 9323)},
    10: {"RAGAS evaluate()": (16, None), "RAGAS 0.4 collections": (18, None), "DeepEval": (22, None)},
}


def _prompt_chars(req) -> int:
    return sum(
        len(m.get("content") or "")
        if isinstance(m.get("content"), str)
        else sum(len(p.get("text", "")) for p in m.get("content") or [] if isinstance(p, dict))
        for m in req.messages
    )


def measure(path: Path, metrics: list[str], concurrency: int | None = None, separate: bool = False) -> dict:
    """Run ``metrics`` over the samples at ``path``; return per-sample request counts and sizes
    (``separate``: rate_chunks and attribute_statements asked apart, not as one review_context)."""
    samples = rm.load_samples(path)
    with FakeLLMServer() as server:
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="bench", cache=False)
        judge.combines_tasks = not separate
        result = rm.evaluate(samples, metrics=metrics, judge=judge, progress=False, concurrency=concurrency)
        chats, embeds = server.chat_requests, server.embedding_requests
        n = len(samples)
        chars = sum(_prompt_chars(r) for r in chats)
        errors = sum(s.status == "error" for r in result for s in r.scores.values())
        return {
            "samples": n,
            "chat_per_sample": len(chats) / n,
            "embed_per_sample": len(embeds) / n,
            "prompt_chars_per_sample": chars / n,
            "prompt_tokens_est_per_sample": chars / 4 / n,
            "score_errors": errors,
        }


def main(argv: list[str] | None = None) -> int:
    """Print the table (and JSON with --json)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples5", type=Path, default=ROOT / "examples" / "rag_samples.jsonl")
    p.add_argument(
        "--samples10", type=Path, default=ROOT.parent / "shared" / "data" / "rag_samples" / "samples10.jsonl"
    )
    p.add_argument("--json", action="store_true", help="print the raw numbers as JSON")
    p.add_argument("--concurrency", type=int, default=None, help="samples in flight (default: evaluate()'s)")
    p.add_argument(
        "--separate",
        action="store_true",
        help="ask rate_chunks and attribute_statements apart (the cost before review_context)",
    )
    args = p.parse_args(argv)
    runs = {}
    for contexts, path in ((5, args.samples5), (10, args.samples10)):
        if not path.exists():
            print(f"(skipping {contexts} contexts: {path} not found)")
            continue
        for label, metrics in (("RAGAS set", RAGAS_SET), ("all", list(REGISTRY))):
            runs[(contexts, label)] = measure(path, metrics, args.concurrency, args.separate)
    if args.json:
        print(json.dumps({f"{c} contexts / {label}": v for (c, label), v in runs.items()}, indent=1))
    print(f"{'contexts':>8}  {'metrics':<22} {'LLM calls':>9} {'embed calls':>11} {'prompt tokens (est.)':>21}")
    for (contexts, label), r in runs.items():
        print(
            f"{contexts:>8}  {'ragmeter, ' + label:<22} {r['chat_per_sample']:>9.1f} {r['embed_per_sample']:>11.1f} "
            f"{r['prompt_tokens_est_per_sample']:>21,.0f}"
        )
        if label == "RAGAS set":
            for peer, (calls, tokens) in PEERS[contexts].items():
                print(f"{contexts:>8}  {peer:<22} {calls:>9} {'':>11} {tokens if tokens else '-':>21}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
