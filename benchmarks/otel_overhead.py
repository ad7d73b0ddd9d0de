"""Overhead of RagmeterSpanProcessor on the application: per span and per traced request.

Three measurements, each against the same TracerProvider setup without the processor:

1. request thread: the time ``on_start`` + ``on_end`` take per span (what the processor adds to
   the thread that starts and ends spans), for plain spans and for OpenInference RAG spans;
2. per span, end to end: creating and ending spans through a provider with a batch exporter
   (no-op export), with and without the processor (the processor's collector and scorer threads
   run meanwhile and compete for the GIL: that is included);
3. per traced request: a real LangChain RAG chain (fake chat model) instrumented by
   openinference-instrumentation-langchain, with and without the processor, every request
   scored in the background with a cheap deterministic metric.

Targets: under 20 microseconds per span on the request thread, under 5% added time per traced
request. Run::

    python benchmarks/otel_overhead.py            # about a minute
    python benchmarks/otel_overhead.py --quick    # a few seconds, noisier
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.trace import set_span_in_context  # noqa: E402

from ragmeter.data import Score  # noqa: E402
from ragmeter.metrics.base import Metric  # noqa: E402
from ragmeter.tracing import RagmeterSpanProcessor  # noqa: E402


class NullExporter(SpanExporter):
    """Accepts spans and drops them (the export cost is not what is measured)."""

    def export(self, spans):  # noqa: D102
        return SpanExportResult.SUCCESS

    def shutdown(self):  # noqa: D102
        pass


class CountContexts(Metric):
    """A cheap deterministic metric, so the measurement is the processor's, not a judge's."""

    name = "context_count"
    uses_judge = False
    requires = ("contexts",)

    async def compute(self, sample, ctx):  # noqa: D102
        return Score(self.name, min(1.0, len(sample.contexts) / 4), explanation="count")


def make_provider(with_ragmeter: bool) -> tuple[TracerProvider, RagmeterSpanProcessor | None]:
    provider = TracerProvider(shutdown_on_exit=False)
    proc = None
    if with_ragmeter:
        proc = RagmeterSpanProcessor([CountContexts()], tracer_provider=provider, max_queue=100_000)
        provider.add_span_processor(proc)
    provider.add_span_processor(BatchSpanProcessor(NullExporter(), max_queue_size=1_000_000, schedule_delay_millis=200))
    return provider, proc


DOCS = [
    "Paris is the capital of France.",
    "Berlin is the capital of Germany.",
    "France borders Spain.",
    "Madrid is the capital of Spain.",
    "The Seine flows through Paris.",
]


def plain_request(tracer) -> int:
    """A non-RAG request: an HTTP-like span with 4 nested children (5 spans)."""
    with tracer.start_as_current_span("GET /items", attributes={"http.request.method": "GET", "http.route": "/items"}):
        for i in range(2):
            with tracer.start_as_current_span("SELECT items", attributes={"db.system": "postgresql"}):
                pass
            with tracer.start_as_current_span("cache get", attributes={"cache.key": f"k{i}"}):
                pass
    return 5


def rag_request(tracer) -> int:
    """An OpenInference-shaped RAG request: CHAIN -> RETRIEVER (5 documents) + LLM (3 spans)."""
    q = "What is the capital of France?"
    chain = tracer.start_span("rag", attributes={"openinference.span.kind": "CHAIN", "input.value": q})
    ctx = set_span_in_context(chain)
    r = tracer.start_span(
        "retrieve", context=ctx, attributes={"openinference.span.kind": "RETRIEVER", "input.value": q}
    )
    for i, d in enumerate(DOCS):
        r.set_attribute(f"retrieval.documents.{i}.document.content", d)
        r.set_attribute(f"retrieval.documents.{i}.document.id", f"d{i}")
        r.set_attribute(f"retrieval.documents.{i}.document.score", 0.9 - i / 10)
    r.end()
    llm = tracer.start_span("llm", context=ctx, attributes={"openinference.span.kind": "LLM"})
    llm.set_attribute("llm.output_messages.0.message.role", "assistant")
    llm.set_attribute("llm.output_messages.0.message.content", "Paris is the capital of France [1].")
    llm.end()
    chain.set_attribute("output.value", "Paris is the capital of France [1].")
    chain.end()
    return 3


def request_thread_cost(n: int) -> dict[str, float]:
    """Nanoseconds per span spent in on_start + on_end (spans pre-made, collector running)."""
    provider, _ = make_provider(False)
    tracer = provider.get_tracer("bench")
    plain = []
    for _ in range(n // 5):
        with tracer.start_as_current_span("GET /items") as s:
            pass
        plain.append(s)
    rag = []
    for _ in range(n // 3):
        chain = tracer.start_span("rag", attributes={"openinference.span.kind": "CHAIN"})
        chain.end()
        rag.append(chain)
    out = {}
    for label, spans in (("plain", plain), ("rag", rag)):
        proc = RagmeterSpanProcessor([CountContexts()], write_spans=False, max_buffered_spans=10**7)
        on_start, on_end = proc.on_start, proc.on_end
        gc.collect()
        t0 = time.perf_counter_ns()
        for s in spans:
            on_start(s, None)
            on_end(s)
        out[label] = (time.perf_counter_ns() - t0) / len(spans)
        proc.shutdown()
    provider.shutdown()
    return out


def per_span_cost(n_requests: int, rounds: int) -> dict[str, dict[str, float]]:
    """Nanoseconds per span through the provider, with and without the processor."""
    out: dict[str, dict[str, float]] = {}
    for label, request in (("plain", plain_request), ("rag", rag_request)):
        res = {}
        for with_ragmeter in (False, True):
            provider, proc = make_provider(with_ragmeter)
            tracer = provider.get_tracer("bench")
            spans_per = request(tracer)  # warm up

            walls, cpus = [], []
            for _ in range(rounds):
                gc.collect()
                c0, t0 = time.process_time_ns(), time.perf_counter_ns()
                for _ in range(n_requests):
                    request(tracer)
                t1 = time.perf_counter_ns()
                provider.force_flush(60_000)  # background work (collector, scoring, carriers) counts as CPU
                c1 = time.process_time_ns()
                walls.append(t1 - t0)
                cpus.append(c1 - c0)
            key = "with" if with_ragmeter else "without"
            res[key] = statistics.median(walls) / (n_requests * spans_per)
            res[key + "_cpu"] = statistics.median(cpus) / (n_requests * spans_per)
            if proc is not None:
                res["scored"] = proc.stats["scored"]
            provider.shutdown()
        res["added_ns"] = res["with"] - res["without"]
        res["added_pct"] = 100.0 * res["added_ns"] / res["without"]
        res["added_cpu_ns"] = res["with_cpu"] - res["without_cpu"]
        out[label] = res
    return out


def _slow_chain(latency: float):
    """The test suite's LangChain RAG chain with a fake chat model that waits ``latency`` seconds
    (a stand-in for the network time of a real model call)."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from helpers.tracing import langchain_chain

    chain = langchain_chain(["Paris is the capital of France [1]."] * 100_000)
    if latency <= 0:
        return chain

    class SlowModel(FakeListChatModel):
        def _call(self, *args, **kwargs):  # noqa: D102
            time.sleep(latency)
            return super()._call(*args, **kwargs)

    steps = list(chain.steps)
    steps[2] = SlowModel(responses=["Paris is the capital of France [1]."])
    from langchain_core.runnables import RunnableSequence

    return RunnableSequence(*steps)


def traced_request_cost(n_requests: int, rounds: int, latency: float = 0.0) -> dict[str, float] | None:
    """Microseconds per real LangChain RAG request (OpenInference-instrumented), with and
    without the processor; ``latency``: seconds the fake model waits per call."""
    try:
        from openinference.instrumentation.langchain import LangChainInstrumentor
    except ImportError:
        return None
    res: dict[str, float] = {}
    # alternate the two setups so that drift (CPU frequency, other load) hits both alike
    setups = {}
    for with_ragmeter in (False, True):
        setups[with_ragmeter] = make_provider(with_ragmeter)
    chain = _slow_chain(latency)
    inst = LangChainInstrumentor()
    times: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for r in range(rounds):
        for with_ragmeter in (False, True) if r % 2 == 0 else (True, False):
            provider, proc = setups[with_ragmeter]
            inst.instrument(tracer_provider=provider)
            try:
                chain.invoke("What is the capital of France?")  # warm up
                provider.force_flush(60_000)
                gc.collect()
                c0, t0 = time.process_time_ns(), time.perf_counter_ns()
                for _ in range(n_requests):
                    chain.invoke("What is the capital of France?")
                t1 = time.perf_counter_ns()
                provider.force_flush(60_000)
                c1 = time.process_time_ns()
            finally:
                inst.uninstrument()
            times[with_ragmeter].append((t1 - t0) / n_requests)
            cpu[with_ragmeter].append((c1 - c0) / n_requests)
    res["without_us"] = statistics.median(times[False]) / 1e3
    res["with_us"] = statistics.median(times[True]) / 1e3
    res["added_pct"] = 100.0 * (res["with_us"] - res["without_us"]) / res["without_us"]
    res["without_cpu_us"] = statistics.median(cpu[False]) / 1e3
    res["with_cpu_us"] = statistics.median(cpu[True]) / 1e3
    res["added_cpu_us"] = res["with_cpu_us"] - res["without_cpu_us"]
    proc = setups[True][1]
    res["scored"] = proc.stats["scored"] if proc else 0
    for provider, _ in setups.values():
        provider.shutdown()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations (a few seconds, noisier)")
    ap.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = ap.parse_args(argv)
    n_spans, n_req, rounds, lc_req, lc_rounds = (20_000, 500, 5, 40, 4) if args.quick else (200_000, 2000, 7, 150, 8)
    report = {
        "request_thread_ns_per_span": request_thread_cost(n_spans),
        "per_span_ns": per_span_cost(n_req, rounds),
        "langchain_request": traced_request_cost(lc_req, lc_rounds),
        "langchain_request_20ms_model": traced_request_cost(max(10, lc_req // 5), lc_rounds, latency=0.02),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    rt = report["request_thread_ns_per_span"]
    print(f"ragmeter OpenTelemetry overhead (python {sys.version.split()[0]})")
    print(
        f"  request thread, on_start + on_end per span: plain {rt['plain'] / 1e3:.2f} us, "
        f"RAG {rt['rag'] / 1e3:.2f} us   (target < 20 us)"
    )
    for label, r in report["per_span_ns"].items():
        print(
            f"  per {label} span through the provider: {r['without'] / 1e3:.2f} us without, {r['with'] / 1e3:.2f} us "
            f"with ragmeter ({r['added_ns'] / 1e3:+.2f} us, {r['added_pct']:+.1f}%); CPU incl. background threads "
            f"{r['without_cpu'] / 1e3:.2f} -> {r['with_cpu'] / 1e3:.2f} us ({r['added_cpu_ns'] / 1e3:+.2f} us)"
            + (f"; {r['scored']} calls scored" if r.get("scored") else "")
        )
    for key, label in (
        ("langchain_request", "instant fake model"),
        ("langchain_request_20ms_model", "fake model, 20 ms"),
    ):
        lc = report[key]
        if lc:
            print(
                f"  traced LangChain RAG request (OpenInference, {label}): {lc['without_us']:.0f} us without, "
                f"{lc['with_us']:.0f} us with ragmeter: {lc['added_pct']:+.1f}% (target < 5%); CPU incl. "
                f"background {lc['without_cpu_us']:.0f} -> {lc['with_cpu_us']:.0f} us ({lc['added_cpu_us']:+.0f} us); "
                f"{lc['scored']} requests scored"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
