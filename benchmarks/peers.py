"""ragmeter, RAGAS and DeepEval side by side: wall time, LLM calls, prompt size, memory and CPU.

    python benchmarks/peers.py [--sizes 20 1000] [--latency 0.3] [--peers ragmeter ragas deepeval]

The peers are installed by this script into their own environment (``benchmarks/.peers-venv``,
RAGAS 0.4.3 and DeepEval 4.3.1 with pip, and langchain-community < 0.4, which RAGAS 0.4.3 imports from,
on first run or with ``--install``); ragmeter runs from
the interpreter that runs this script. Every run talks to one local OpenAI-compatible server
(``tests/helpers/servers.py`` ``FakeLLMServer``, in its own process so its CPU and memory are not
counted) that waits ``--latency`` seconds before each reply, embeddings included. The server
answers ragmeter's tasks with its oracle and every peer prompt with a valid instance of the JSON
schema the peer sent (RAGAS: instructor's JSON mode, the schema in the system message; DeepEval:
``response_format`` json_schema),
so each peer parses every reply; ``--log DIR`` writes the first request and reply of each prompt
kind there.

Each run is a fresh process scoring ``examples/rag_samples.jsonl`` (5 chunks per sample) repeated
with distinct ids to each size (``throughput.records``), with the five metrics faithfulness,
answer relevancy, context precision, context recall and context relevance:

- ragmeter: ``evaluate()`` with the default settings (``OpenAIJudge``, no cache);
- RAGAS: the collections API (``ragas.metrics.collections``, instructor LLM from
  ``llm_factory``, modern OpenAI embeddings), ``ascore`` of every sample and metric gathered with
  at most ``--ragas-concurrency`` (100) in flight. ``--ragas-concurrency 0`` runs each metric's
  ``abatch_score`` over all samples at once (RAGAS's own, uncapped): at 1,000 samples that spent
  over 25 minutes in httpcore's connection-pool scans (5,000 requests queued on one client);
- DeepEval: ``evaluate()`` with ``AsyncConfig(run_async=True, max_concurrent=100)``
  (``--deepeval-concurrency``; its default is 20), no cache, no result printing.

Per run: wall seconds, chat requests and prompt tokens per sample (message characters / 4, as
``judge_calls.py`` counts them; the server cannot tokenise), embedding requests, peak RSS of the
client process, client CPU seconds (user + system) and score errors. "x fastest peer" is
ragmeter's wall time over the fastest peer's at the same size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".peers-venv"
# RAGAS 0.4.3 imports langchain_community.chat_models.vertexai, which langchain-community 0.4 removed.
PEER_PINS = ["ragas==0.4.3", "deepeval==4.3.1", "langchain-community<0.4"]
QUIET_ENV = {  # no telemetry, no login prompts, no network but the local server
    "RAGAS_DO_NOT_TRACK": "true",
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "NO",
    "DEEPEVAL_GRPC_LOGGING": "NO",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "ERROR_REPORTING": "NO",
    "CONFIDENT_TRACE_FLUSH": "NO",
    "TOKENIZERS_PARALLELISM": "false",
    "OPENAI_API_KEY": "bench",
}


# --------------------------------------------------------------------------- the peers' environment


def peer_python() -> Path:
    """The peers' interpreter, creating the environment and installing the pinned peers if needed."""
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    probe = (
        "import importlib.metadata as m, ragas.llms, deepeval.metrics; print(m.version('ragas'), m.version('deepeval'))"
    )
    have = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=False, env=dict(os.environ, **QUIET_ENV)
    )
    wanted = " ".join(p.split("==")[1] for p in PEER_PINS if "==" in p)
    if have.returncode != 0 or have.stdout.strip().splitlines()[-1:] != [wanted]:
        print(f"installing {', '.join(PEER_PINS)} into {VENV} (a few minutes) ...", flush=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PINS], check=True)
    return python


# --------------------------------------------------------------------------- the server (child process)


def fake_instance(schema: dict, root: dict | None = None, key: str = "", items: int = 2):
    """A valid instance of JSON ``schema`` (``$ref``/``$defs``, anyOf, enum, bounds), ``items``
    elements per array; ``key`` is the property name ("verdict" -> "yes", "noncommittal" -> 0)."""
    root = root if root is not None else schema
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return fake_instance(target, root, key, items)
    for alt in ("anyOf", "oneOf"):
        if alt in schema:
            options = [s for s in schema[alt] if s.get("type") != "null"] or schema[alt]
            return fake_instance(options[0], root, key, items)
    if "allOf" in schema:
        return fake_instance(schema["allOf"][0], root, key, items)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return "yes" if "yes" in schema["enum"] else schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        return {k: fake_instance(v, root, k, items) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        n = max(int(schema.get("minItems", 0)), min(items, int(schema.get("maxItems", items))))
        return [fake_instance(schema.get("items") or {"type": "string"}, root, key, items) for _ in range(n)]
    if kind == "integer":
        value = 0 if key == "noncommittal" else 1
        return max(int(schema.get("minimum", value)), min(value, int(schema.get("maximum", value))))
    if kind == "number":
        return float(schema.get("minimum", 1.0)) if "maximum" in schema else 1.0
    if kind == "boolean":
        return True
    return "yes" if key == "verdict" else f"a {key or 'text'} written by the fake model"


def request_schema(body: dict) -> tuple[str, dict | None]:
    """``(prompt kind, JSON schema)`` of a chat request: its forced tool or json_schema format."""
    rf = body.get("response_format") or {}
    if rf.get("type") == "json_schema":
        js = rf.get("json_schema") or {}
        return js.get("name") or "json_schema", js.get("schema")
    tools = body.get("tools") or []
    if tools:
        fn = tools[0].get("function") or tools[0]
        return fn.get("name") or "tool", fn.get("parameters")
    for m in body.get("messages") or []:  # instructor's JSON mode: the schema in the system message
        content = m.get("content") if m.get("role") == "system" else None
        if isinstance(content, str) and "json_schema:" in content:
            start = content.index("{", content.index("json_schema:"))
            schema, _ = json.JSONDecoder().raw_decode(content[start:])
            return schema.get("title") or "json_object", schema
    return ("json_object" if rf.get("type") == "json_object" else "text"), None


def serve(latency: float, log_dir: str | None) -> None:
    """Child process: serve until stdin closes (base URL first, request statistics last)."""
    sys.path.insert(0, str(ROOT.parent / "tests"))
    from helpers.servers import FakeLLMServer, answer, oracle
    from ragmeter.judges.tasks import COMBINED_TASKS, TASKS

    kinds: dict[str, int] = {}
    logged: set[str] = set()

    def responder(req):
        if req.task in TASKS or req.task in COMBINED_TASKS:
            return oracle(req)
        kind, schema = request_schema(req.body)
        out = fake_instance(schema) if schema else {"verdict": "yes", "reason": "ok", "statements": ["ok"]}
        kinds[kind] = kinds.get(kind, 0) + 1
        if log_dir and kind not in logged:
            logged.add(kind)
            Path(log_dir, f"{kind}.json").write_text(json.dumps({"request": req.body, "reply": out}, indent=1))
        return answer(out)

    with FakeLLMServer(responder, latency=latency) as server:
        print(server.openai_url, flush=True)
        sys.stdin.read()
        chats = server.chat_requests
        chars = sum(
            len(m.get("content") or "")
            if isinstance(m.get("content"), str)
            else sum(len(p.get("text", "")) for p in m.get("content") or [] if isinstance(p, dict))
            for r in chats
            for m in r.messages
        )
        print(
            json.dumps(
                {
                    "chat": len(chats),
                    "embed": len(server.embedding_requests),
                    "prompt_chars": chars,
                    "max_concurrent": server.max_concurrent,
                    "peer_kinds": kinds,
                }
            ),
            flush=True,
        )


# --------------------------------------------------------------------------- the runs (child processes)


def _records(n: int) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from throughput import records

    return records(n)


def _texts(record: dict) -> list[str]:
    return [c["text"] if isinstance(c, dict) else c for c in record["contexts"]]


def run_ragmeter(n: int, url: str) -> dict:
    """ragmeter ``evaluate()`` with its defaults."""
    from throughput import METRICS

    import ragmeter as rm
    from ragmeter.judges import OpenAIJudge

    data = _records(n)
    judge = OpenAIJudge("gpt-4o-mini", base_url=url, api_key="bench", cache=False)
    t0 = time.perf_counter()
    result = rm.evaluate(data, metrics=METRICS, judge=judge, progress=False)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "errors": sum(s.status == "error" for r in result for s in r.scores.values())}


def run_ragas(n: int, url: str, concurrency: int | None) -> dict:
    """RAGAS 0.4 collections: every metric's ``abatch_score`` over all samples, gathered."""
    import asyncio

    from openai import AsyncOpenAI
    from ragas.embeddings.base import embedding_factory
    from ragas.llms import llm_factory
    from ragas.metrics.collections import (
        AnswerRelevancy,
        ContextPrecision,
        ContextRecall,
        ContextRelevance,
        Faithfulness,
    )

    data = _records(n)
    client = AsyncOpenAI(base_url=url, api_key="bench")
    llm = llm_factory("gpt-4o-mini", client=client)
    emb = embedding_factory("openai", model="text-embedding-3-small", client=client)
    metrics = [
        (
            Faithfulness(llm=llm),
            lambda r: {"user_input": r["question"], "response": r["answer"], "retrieved_contexts": _texts(r)},
        ),
        (AnswerRelevancy(llm=llm, embeddings=emb), lambda r: {"user_input": r["question"], "response": r["answer"]}),
        (
            ContextPrecision(llm=llm),
            lambda r: {"user_input": r["question"], "reference": r["reference"], "retrieved_contexts": _texts(r)},
        ),
        (
            ContextRecall(llm=llm),
            lambda r: {"user_input": r["question"], "reference": r["reference"], "retrieved_contexts": _texts(r)},
        ),
        (ContextRelevance(llm=llm), lambda r: {"user_input": r["question"], "retrieved_contexts": _texts(r)}),
    ]

    async def main() -> list:
        if concurrency is None:
            return await asyncio.gather(
                *(m.abatch_score([make(r) for r in data]) for m, make in metrics), return_exceptions=True
            )
        sem = asyncio.Semaphore(concurrency)

        async def one(m, kwargs):
            async with sem:
                return await m.ascore(**kwargs)

        return await asyncio.gather(*(one(m, make(r)) for r in data for m, make in metrics), return_exceptions=True)

    t0 = time.perf_counter()
    out = asyncio.run(main())
    wall = time.perf_counter() - t0
    flat = [x for group in out for x in (group if isinstance(group, list) else [group])]
    errors = [x for x in flat if isinstance(x, BaseException)]
    return {
        "wall_s": wall,
        "errors": len(errors) + (n * len(metrics) - len(flat) if concurrency is None else 0),
        "first_error": repr(errors[0])[:300] if errors else None,
    }


def run_deepeval(n: int, url: str, concurrency: int) -> dict:
    """DeepEval ``evaluate()`` with async on (``max_concurrent``), no cache, nothing printed."""
    from deepeval import evaluate
    from deepeval.evaluate.configs import (
        AsyncConfig,
        CacheConfig,
        DisplayConfig,
        ErrorConfig,
    )
    from deepeval.metrics import (
        AnswerRelevancyMetric,
        ContextualPrecisionMetric,
        ContextualRecallMetric,
        ContextualRelevancyMetric,
        FaithfulnessMetric,
    )
    from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase

    data = _records(n)
    model = GPTModel(model="gpt-4o-mini", base_url=url, api_key="bench")
    metrics = [
        cls(model=model, async_mode=True)
        for cls in (
            FaithfulnessMetric,
            AnswerRelevancyMetric,
            ContextualPrecisionMetric,
            ContextualRecallMetric,
            ContextualRelevancyMetric,
        )
    ]
    cases = [
        LLMTestCase(
            input=r["question"], actual_output=r["answer"], expected_output=r["reference"], retrieval_context=_texts(r)
        )
        for r in data
    ]
    t0 = time.perf_counter()
    result = evaluate(
        cases,
        metrics,
        async_config=AsyncConfig(run_async=True, max_concurrent=concurrency),
        display_config=DisplayConfig(show_indicator=False, print_results=False),
        cache_config=CacheConfig(write_cache=False, use_cache=False),
        error_config=ErrorConfig(ignore_errors=True),
    )
    wall = time.perf_counter() - t0
    errors = [m.error for t in result.test_results for m in (t.metrics_data or []) if m.error]
    return {"wall_s": wall, "errors": len(errors), "first_error": errors[0][:300] if errors else None}


def child(peer: str, n: int, url: str, args: argparse.Namespace) -> dict:
    """Run one peer on ``n`` samples; add CPU and peak RSS of this process."""
    sys.path.insert(0, str(ROOT))
    cpu0 = time.process_time()
    if peer == "ragmeter":
        out = run_ragmeter(n, url)
    elif peer == "ragas":
        out = run_ragas(n, url, args.ragas_concurrency or None)
    else:
        out = run_deepeval(n, url, args.deepeval_concurrency)
    out["cpu_s"] = time.process_time() - cpu0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# --------------------------------------------------------------------------- the parent


def measure(peer: str, n: int, args: argparse.Namespace) -> dict:
    """Start a server, run ``peer`` on ``n`` samples in a fresh process, return the numbers."""
    cmd = [sys.executable, __file__, "--serve", str(args.latency)] + (["--log", args.log] if args.log else [])
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    env = dict(os.environ, **QUIET_ENV)
    python = sys.executable if peer == "ragmeter" else str(peer_python())
    flags = [
        "--ragas-concurrency",
        str(args.ragas_concurrency),
        "--deepeval-concurrency",
        str(args.deepeval_concurrency),
    ]
    try:
        url = server.stdout.readline().strip()
        proc = subprocess.run(
            [python, __file__, "--child", peer, str(n), url, *flags],
            env=env,
            capture_output=True,
            text=True,
            cwd="/tmp",
            timeout=args.timeout,
            check=False,
        )
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            result = {"failed": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}
        else:
            result = json.loads(lines[-1])
    except subprocess.TimeoutExpired:
        result = {"failed": f"did not finish in {args.timeout} s"}
    finally:
        stats, _ = server.communicate("", timeout=120)
    result.update(json.loads(stats.strip().splitlines()[-1]))
    return result


def main(argv: list[str] | None = None) -> int:
    """Print one table (and the raw numbers with --json)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[20, 1000])
    p.add_argument(
        "--peers", nargs="+", default=["ragmeter", "ragas", "deepeval"], choices=["ragmeter", "ragas", "deepeval"]
    )
    p.add_argument("--latency", type=float, default=0.3, help="seconds per request (default 0.3)")
    p.add_argument(
        "--ragas-concurrency",
        type=int,
        default=100,
        help="RAGAS samples x metrics in flight (default 100; 0: abatch_score, uncapped)",
    )
    p.add_argument("--deepeval-concurrency", type=int, default=100, help="DeepEval max_concurrent (default 100)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds one run may take")
    p.add_argument("--log", help="directory for the first request and reply of each peer prompt kind")
    p.add_argument("--install", action="store_true", help="only create the peers' environment")
    p.add_argument("--json", action="store_true")
    p.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.log)
        return 0
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.child[2], args)))
        return 0
    if args.install:
        print(peer_python())
        return 0
    if args.log:
        Path(args.log).mkdir(parents=True, exist_ok=True)
    if set(args.peers) - {"ragmeter"}:
        peer_python()
    print(
        f"{'samples':>7} {'peer':<9} {'wall s':>8} {'x fastest peer':>14} {'calls/sample':>12} "
        f"{'prompt tok/sample':>17} {'embed req':>9} {'peak RSS MB':>11} {'CPU s':>7} {'errors':>6}",
        flush=True,
    )
    rows = []
    order = [p for p in args.peers if p != "ragmeter"] + (["ragmeter"] if "ragmeter" in args.peers else [])
    for n in args.sizes:
        peer_walls = []
        for peer in order:  # ragmeter last: its row shows the ratio to the fastest peer
            r = measure(peer, n, args)
            r.update(samples=n, peer=peer)
            rows.append(r)
            if "failed" in r:
                print(f"{n:>7} {peer:<9} failed: {r['failed']}", flush=True)
                continue
            if peer != "ragmeter":
                peer_walls.append(r["wall_s"])
            ratio = f"{r['wall_s'] / min(peer_walls):.2f}" if peer == "ragmeter" and peer_walls else ""
            print(
                f"{n:>7} {peer:<9} {r['wall_s']:>8.1f} {ratio:>14} {r['chat'] / n:>12.1f} "
                f"{r['prompt_chars'] / 4 / n:>17,.0f} {r['embed']:>9} {r['peak_rss_mb']:>11.0f} {r['cpu_s']:>7.1f} "
                f"{r['errors']:>6}",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
