"""What inline capture costs the request thread: LangChain handler and LlamaIndex instrumentation.

A real LCEL RAG chain (an in-memory vector store retriever with a deterministic fake embedding,
a prompt, a fake chat model, a string parser) and a real LlamaIndex query engine (vector index,
hashing embedding, an LLM that answers from its context) are called one request at a time on the
main thread, with and without ragmeter capturing every request (inline mode, every sample scored
in the background with a cheap deterministic metric, so the judge's cost is not what is
measured). Blocks of requests alternate between the two setups so that drift hits both alike;
after each block the background work is drained, so it is counted in the block that caused it.
Reported per request: p50 / p95 wall time with and without capture, the difference, and the time
ragmeter's end-of-request hook takes on the request thread (LangChain ``_persist_run``, LlamaIndex
``on_span_exit``, summed over the request's spans).

Two kinds of request: an instant fake model (CPU-bound back-to-back requests: the background work
competes with the next request for the GIL, the worst case), and ``--wait-ms`` of I/O wait per
request (a model or vector store call; default 20 ms), during which the background work runs.

Run::

    python benchmarks/inline_overhead.py            # about two minutes
    python benchmarks/inline_overhead.py --quick    # a few seconds, noisier
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from ragmeter.data import Score  # noqa: E402
from ragmeter.metrics.base import Metric  # noqa: E402

QUESTIONS = [
    "What is the capital of France?",
    "Who wrote Dune?",
    "What is green tea made from?",
    "What does Rust guarantee?",
    "Which river flows through Paris?",
]
TEXTS = [
    "Paris is the capital of France.",
    "Berlin is the capital of Germany.",
    "Dune was written by Frank Herbert in 1965.",
    "Green tea is made from unoxidised leaves.",
    "Rust guarantees memory safety without a garbage collector.",
    "The Seine flows through Paris.",
    "Madrid is the capital of Spain.",
    "France borders Spain and Germany.",
]


class CountContexts(Metric):
    """A cheap deterministic metric, so the measurement is the capture's, not a judge's."""

    name = "context_count"
    uses_judge = False
    requires = ("contexts",)

    async def compute(self, sample, ctx):  # noqa: D102
        return Score(self.name, min(1.0, len(sample.contexts) / 4), explanation="count")


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


class HookTimer:
    """Wraps a bound method and sums the time spent in it (the request thread's share)."""

    def __init__(self, owner: Any, name: str):
        self.total_ns = 0
        self.calls = 0
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter_ns()
            try:
                return inner(*args, **kwargs)
            finally:
                self.total_ns += time.perf_counter_ns() - t0
                self.calls += 1

        object.__setattr__(owner, name, timed)


def langchain_app(wait: float = 0.0) -> Callable[[str, list], Any]:
    """``call(question, callbacks)``: one request through a real LCEL RAG chain whose fake chat
    model waits ``wait`` seconds (I/O: the GIL is released)."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=256))
    store.add_documents(
        [Document(id=f"doc-{i}", page_content=t, metadata={"source": "kb.txt", "row": i}) for i, t in enumerate(TEXTS)]
    )
    retriever = store.as_retriever(search_kwargs={"k": 4})
    prompt = ChatPromptTemplate.from_template("Answer from the context.\nContext: {context}\nQuestion: {question}")

    class WaitingModel(FakeListChatModel):
        def _call(self, *args: Any, **kwargs: Any) -> str:  # noqa: D102
            if wait:
                time.sleep(wait)
            return super()._call(*args, **kwargs)

    llm = WaitingModel(responses=["Paris is the capital of France [1]."])

    def fmt(docs):
        return "\n".join(f"[{i + 1}] {d.page_content}" for i, d in enumerate(docs))

    chain = {"context": retriever | fmt, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()

    def call(question: str, callbacks: list) -> Any:
        return chain.invoke(question, config={"callbacks": callbacks, "metadata": {"reference": "Paris"}})

    return call


class Setup:
    """One way of running the requests: ``call(question)``, with ``enter`` / ``leave`` around each
    block of requests and ``drain`` after it (the background work the block caused)."""

    def __init__(
        self,
        call: Callable[[str], Any],
        enter: Callable[[], Any] = lambda: None,
        leave: Callable[[], Any] = lambda: None,
        drain: Callable[[], Any] = lambda: None,
    ):
        self.call, self.enter, self.leave, self.drain = call, enter, leave, drain
        self.times: list[float] = []
        self.cpu: list[float] = []


def measure_langchain(n: int, rounds: int, wait: float = 0.0) -> dict[str, Any]:
    """Per-request wall times of the LCEL chain: without a handler, with the handler's run
    tracking alone (callbacks, nothing built or scored), and with a RagmeterCallbackHandler."""
    from ragmeter.integrations.langchain import RagmeterCallbackHandler

    call = langchain_app(wait)
    handler = RagmeterCallbackHandler([CountContexts()], max_queue=10**6, keep=1000, attach_to_trace=False)
    timer = HookTimer(handler, "_persist_run")
    setups = {
        "without": Setup(lambda q: call(q, [])),
        "with": Setup(lambda q: call(q, [handler]), drain=lambda: handler.flush(60)),
    }
    try:
        from ragmeter.integrations.langchain.tracker import RunTracker
    except ImportError:  # an older ragmeter (BaseTracer-based)
        pass
    else:

        class TrackOnly(RunTracker):
            def _persist_run(self, run: Any) -> None:
                pass

        tracker = TrackOnly()
        setups["callbacks only"] = Setup(lambda q: call(q, [tracker]))
    return _alternate(setups, n, rounds, timer, lambda: handler.stats, QUESTIONS)


def measure_llamaindex(n: int, rounds: int, wait: float = 0.0) -> dict[str, Any] | None:
    """Per-request wall times of a LlamaIndex query engine without and with RagmeterInstrumentation
    (the query embedding waits ``wait`` seconds)."""
    try:
        from helpers.llamaindex_app import HashEmbedding, build_index, engine
    except ImportError:
        return None
    from ragmeter.integrations.llamaindex import RagmeterInstrumentation

    class WaitingEmbedding(HashEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            if wait:
                time.sleep(wait)
            return super()._get_query_embedding(query)

    qe = engine(build_index(), top_k=3, embed_model=WaitingEmbedding())
    meter = RagmeterInstrumentation([CountContexts()], max_queue=10**6, keep=1000, attach_to_trace=False)
    timer = HookTimer(meter._capture, "on_span_exit")
    questions = [f"What is the secret code of the {a}?" for a in ("falcon", "otter", "badger", "heron", "lynx")]
    setups = {
        "without": Setup(qe.query),
        "with": Setup(qe.query, enter=meter.attach, leave=meter.detach, drain=lambda: meter.flush(60)),
    }
    out = _alternate(setups, n, rounds, timer, lambda: meter.stats, questions)
    meter.shutdown(10)
    return out


def _alternate(
    setups: dict[str, Setup], n: int, rounds: int, timer: HookTimer, stats: Callable[[], dict], questions: list[str]
) -> dict[str, Any]:
    for setup in setups.values():  # warm up
        setup.enter()
        for q in questions:
            setup.call(q)
        setup.leave()
        setup.drain()
    timer.total_ns = timer.calls = 0
    order = list(setups)
    for r in range(rounds):
        for label in order[r % len(order) :] + order[: r % len(order)]:  # a different order each round
            setup = setups[label]
            setup.enter()
            gc.collect()
            c0 = time.process_time_ns()
            for i in range(n):
                q = questions[i % len(questions)]
                t0 = time.perf_counter_ns()
                setup.call(q)
                setup.times.append((time.perf_counter_ns() - t0) / 1e3)
            setup.leave()
            setup.drain()  # background work runs meanwhile, as in an application; drained after each block
            setup.cpu.append((time.process_time_ns() - c0) / n / 1e3)
    res: dict[str, Any] = {}
    for label, setup in setups.items():
        key = label.replace(" ", "_")
        res[f"{key}_p50_us"] = percentile(setup.times, 0.5)
        res[f"{key}_p95_us"] = percentile(setup.times, 0.95)
        res[f"{key}_cpu_us"] = statistics.median(setup.cpu)
    for label in setups:
        if label != "without":
            key = label.replace(" ", "_")
            res[f"{key}_added_p50_us"] = res[f"{key}_p50_us"] - res["without_p50_us"]
            res[f"{key}_added_p95_us"] = res[f"{key}_p95_us"] - res["without_p95_us"]
    res["hook_us_per_request"] = timer.total_ns / (n * rounds) / 1e3
    s = stats()
    res["captured"], res["scored"], res["dropped"] = s.get("captured", 0), s.get("scored", 0), s.get("dropped", 0)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests (a few seconds, noisier)")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON")
    ap.add_argument("--wait-ms", type=float, default=20.0, help="I/O wait per request in the second run (ms)")
    args = ap.parse_args(argv)
    n, rounds = (50, 6) if args.quick else (100, 20)
    wait = args.wait_ms / 1000.0
    report = {
        "langchain, instant model": measure_langchain(n, rounds),
        "llamaindex, instant model": measure_llamaindex(n, rounds),
        f"langchain, {args.wait_ms:g} ms I/O": measure_langchain(max(10, n // 4), rounds, wait),
        f"llamaindex, {args.wait_ms:g} ms I/O": measure_llamaindex(max(10, n // 4), rounds, wait),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"ragmeter inline capture, cost on the request thread (python {sys.version.split()[0]}, "
        f"{rounds} rounds of blocks per setup)"
    )
    for name, r in report.items():
        if r is None:
            print(f"  {name}: not installed")
            continue
        line = (
            f"  {name}: p50 {r['without_p50_us']:.0f} -> {r['with_p50_us']:.0f} us ({r['with_added_p50_us']:+.0f}), "
            f"p95 {r['without_p95_us']:.0f} -> {r['with_p95_us']:.0f} us ({r['with_added_p95_us']:+.0f}); "
        )
        if "callbacks_only_p50_us" in r:
            line += (
                f"callbacks alone p50 {r['callbacks_only_added_p50_us']:+.0f} us, "
                f"p95 {r['callbacks_only_added_p95_us']:+.0f} us; "
            )
        print(
            line + f"end-of-request hook {r['hook_us_per_request']:.0f} us; CPU per request incl. background "
            f"{r['without_cpu_us']:.0f} -> {r['with_cpu_us']:.0f} us; {r['captured']} captured, "
            f"{r['scored']} scored, {r['dropped']} dropped"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
