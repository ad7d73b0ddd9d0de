"""The cascade judge: LLM calls and tokens per sample against the routed share, and what not asking
the LLM costs in agreement with people.

    python benchmarks/cascade.py ../shared/data [--routes 0,0.1,0.2,0.3,0.5,1]

1. Calls and tokens. ``cascade:offline>openai:gpt-4o-mini`` runs through the real OpenAI SDK
   against a local OpenAI-compatible server on 127.0.0.1 that answers every judge task validly and
   records every request (``tests/helpers/servers.py``), on the 20 bundled RAG samples
   (``examples/rag_samples.jsonl``) and on the 767 BEGIN dialogue turns of ``../shared/data``
   (knowledge snippet as the one chunk), with RAGAS's five metrics (faithfulness, answer
   relevancy, context precision, context recall, context relevance). Per routed share: the share
   actually routed, LLM calls per sample, prompt tokens per sample (characters / 4: the server
   cannot tokenise) and the calls the cascade saved (``Usage.saved_calls``); the LLM judge alone
   (route 1) is the reference.
2. Agreement on the confident share. On BEGIN (grounded dialogue) and SummEdits (summaries), the
   human-labeled development sets: the offline judge's faithfulness AUROC on the answers it keeps
   (its calibrated confidence at or above the cut of each share) against its AUROC on all answers.
   A cascade is worth it when the kept answers are the ones the offline judge ranks well.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))  # the recording OpenAI-compatible server the tests use

from judge_dev import DEFAULT_DATA, _gather, faithfulness, load_begin  # noqa: E402
from summedits import auc  # noqa: E402
from summedits import load as load_summedits  # noqa: E402

import ragmeter as rm  # noqa: E402
from helpers.servers import FakeLLMServer  # noqa: E402
from ragmeter.judges import CascadeJudge, OfflineJudge, OpenAIJudge  # noqa: E402
from ragmeter.judges.cascade import ROUTE_ALL, cut_for  # noqa: E402

RAGAS_SET = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "context_relevance"]


def _prompt_chars(req) -> int:
    return sum(len(m.get("content") or "") if isinstance(m.get("content"), str) else 0 for m in req.messages)


def calls(samples: list, routes: list[float], embeddings: bool) -> list[dict]:
    """Per route: routed share, LLM calls, prompt tokens (est.) and saved calls per sample."""
    out = []
    for route in routes:
        with FakeLLMServer() as server:
            llm = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="bench", cache=False)
            judge = CascadeJudge(OfflineJudge(embeddings=embeddings), llm, route=route)
            result = rm.evaluate(samples, metrics=RAGAS_SET, judge=judge, progress=False)
            n = len(samples)
            routed = sum(any(s.details.get("cascade", {}).get("routed") for s in r.scores.values()) for r in result)
            chars = sum(_prompt_chars(r) for r in server.chat_requests)
            errors = sum(s.status == "error" for r in result for s in r.scores.values())
            out.append(
                {
                    "route": route,
                    "cut": judge.cut,
                    "routed": routed / n,
                    "calls": len(server.chat_requests) / n,
                    "tokens": chars / 4 / n,
                    "saved": result.usage.saved_calls / n,
                    "errors": errors,
                }
            )
    return out


def confident_share(data: Path, routes: list[float], embeddings: bool) -> list[dict]:
    """Per set and route: the share kept by the offline judge and its AUROC there, against all."""
    judge = OfflineJudge(embeddings=embeddings)
    begin = load_begin(data)
    items, docs = load_summedits(data / "summedits")
    sets = {
        "BEGIN": [
            (
                "Continue the conversation." if not it["question"] else it["question"],
                it["answer"],
                [it["context"]],
                it["label"],
            )
            for it in begin
        ],
        "SummEdits": [
            ("Summarize the document.", it["summary"], [docs[it["doc_id"]]["doc"]], int(it["label"])) for it in items
        ],
    }
    rows = []
    for name, rows_in in sets.items():
        out = asyncio.run(_gather([faithfulness(judge, q, a, c) for q, a, c, _ in rows_in]))
        value = np.array([v for v, _ in out])
        y = np.array([lab for *_, lab in rows_in])
        has = np.array([bool(verdicts) for _, verdicts in out])
        p = np.array([judge.confidence(v) if h else 0.5 for v, h in zip(value, has)])
        conf = np.maximum(p, 1 - p)
        for route in routes:
            cut = cut_for(judge, route)
            kept = ~(has & (conf < cut)) & (cut < ROUTE_ALL)  # answers without claims stay, but at route 1
            rows.append(
                {
                    "set": name,
                    "route": route,
                    "cut": cut,
                    "kept": float(kept.mean()),
                    "auroc_all": auc(value, y),
                    "auroc_kept": auc(value[kept], y[kept]) if kept.sum() > 1 else None,
                    "positives_kept": float(y[kept].mean()) if kept.any() else None,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--routes", default="0,0.1,0.2,0.3,0.5,1")
    parser.add_argument("--path", default="lexical", choices=("lexical", "embedding"))
    args = parser.parse_args(argv)
    routes = [float(x) for x in args.routes.split(",")]
    embeddings = args.path == "embedding"
    data = Path(args.data)
    bundled = rm.load_samples(ROOT / "examples" / "rag_samples.jsonl")
    begin = [
        rm.Sample(id=f"begin-{i}", question=it["question"], contexts=[it["context"]], answer=it["answer"])
        for i, it in enumerate(load_begin(data))
    ]
    print(f"LLM calls per sample (RAGAS's 5 metrics; offline path: {args.path}; the LLM judge alone = route 1)\n")
    print(
        "| samples | route | cut | routed | LLM calls / sample | prompt tokens / sample (est.) | calls saved / sample |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, samples in (("bundled (20)", bundled), (f"BEGIN ({len(begin)})", begin)):
        for r in calls(samples, routes, embeddings):
            print(
                f"| {label} | {r['route']:g} | {r['cut']:.3f} | {r['routed']:.0%} | {r['calls']:.2f} | "
                f"{r['tokens']:,.0f} | {r['saved']:.2f} |" + (f" ({r['errors']} errors)" if r["errors"] else "")
            )
    print("\nThe offline judge's faithfulness AUROC on the answers it keeps\n")
    print("| set | route | cut | kept | AUROC kept | AUROC all | positives among kept |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in confident_share(data, routes, embeddings):
        kept_auc = f"{r['auroc_kept']:.3f}" if r["auroc_kept"] is not None and not np.isnan(r["auroc_kept"]) else "n/a"
        pos = f"{r['positives_kept']:.0%}" if r["positives_kept"] is not None else "-"
        print(
            f"| {r['set']} | {r['route']:g} | {r['cut']:.3f} | {r['kept']:.0%} | {kept_auc} | {r['auroc_all']:.3f} | {pos} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
