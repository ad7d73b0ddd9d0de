"""Watch a RAG service degrade and recover with ragmeter.Monitor (no network, no judge: the scored
samples are built here, as a capture's on_result callback would hand them over).

    python examples/monitor_degradation.py

Requests 1-80 are healthy; at request 81 a vector-index shard is lost: most questions retrieve
nothing, answers are made up and faithfulness falls; at request 121 the shard is back. The monitor
fires each alert once when its rule crosses the limit and resolves it once when the rule is back.
The output is deterministic (seeded values, a simulated clock).
"""

from __future__ import annotations

import logging
import random

import ragmeter as rm
from ragmeter import Context, Sample, SampleResult, Score
from ragmeter.judges import Usage

OUTAGE = range(81, 121)


def scored_request(n: int, rng: random.Random) -> SampleResult:
    """Request ``n`` as the inline scorer would report it."""
    lost = n in OUTAGE and rng.random() < 0.6
    if lost:  # nothing retrieved: the model answers from memory
        contexts, chunks = [], []
        faithfulness = rng.uniform(0.2, 0.5)
    else:
        contexts = [Context("Refunds are issued within 14 days.", id="kb-1"), Context("Shipping is free.", id="kb-2")]
        chunks = [rng.uniform(0.4, 0.9), rng.uniform(0.0, 0.4)]
        faithfulness = rng.uniform(0.8, 1.0)
    scores = {"faithfulness": Score("faithfulness", round(faithfulness, 3))}
    if chunks:
        scores["context_relevance"] = Score(
            "context_relevance",
            round(sum(chunks) / 2, 3),
            details={"chunks": [{"index": i, "score": s} for i, s in enumerate(chunks)]},
        )
    latency = rng.uniform(0.8, 2.5)
    sample = Sample(
        f"How long do refunds take? (request {n})",
        contexts,
        answer="Within 14 days.",
        id=f"req-{n}",
        metadata={"latency": {"total_s": round(latency, 3)}},
    )
    return SampleResult(sample, scores, usage=Usage(calls=2, cost_usd=0.0004))


def main() -> None:
    # alerts also go to the "ragmeter.monitor" logger; here the callback prints them instead
    logging.getLogger("ragmeter.monitor").addHandler(logging.NullHandler())
    now = [1_767_225_600.0]  # a simulated clock: one request every 30 s
    request = [0]

    def on_alert(alert: rm.monitor.Alert) -> None:
        print(f"request {request[0]:>3}  {alert.message}")

    monitor = rm.Monitor(
        window=500,
        min_samples=20,
        recent=20,
        thresholds={"faithfulness": 0.7},
        no_retrieval_limit=0.2,
        max_drop=0.15,
        on_alert=on_alert,
        meter_provider=False,
        clock=lambda: now[0],
    )
    rng = random.Random(17)
    for n in range(1, 201):
        request[0] = n
        monitor.observe(scored_request(n, rng))  # in production: on_result=monitor.observe
        now[0] += 30.0
    snap = monitor.snapshot()
    print(
        f"after {snap['counts']['observed']} requests: faithfulness mean (last 20) "
        f"{snap['means']['faithfulness']['recent']:.3f}, no-retrieval rate {snap['no_retrieval']:.2f}, "
        f"alerts fired {monitor.stats['alerts_fired']}, resolved {monitor.stats['alerts_resolved']}"
    )


if __name__ == "__main__":
    main()
