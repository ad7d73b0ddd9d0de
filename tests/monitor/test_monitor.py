"""ragmeter.monitor.Monitor: rolling windows, rules with hysteresis, OpenTelemetry metrics read with
the SDK's InMemoryMetricReader, bounded state, thread safety, the history store, and feeding from
the captures (LangChain handler, span processor). Every number is worked out by hand below."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ragmeter as rm
from ragmeter.data import Context, Sample, Score
from ragmeter.judges.base import Embedder, Usage
from ragmeter.metrics.scoring import SampleResult
from ragmeter.monitor import Alert, Monitor, percentile, psi
from ragmeter.monitor.rules import PSI_EPSILON, Trigger


def result(
    i: int = 0,
    *,
    question: str | None = None,
    contexts=("Paris is the capital of France.",),
    cost=None,
    latency=None,
    relevance_chunks=None,
    **values,
) -> SampleResult:
    """A scored sample: ``values`` metric -> value (None: an errored score)."""
    scores = {m: Score(m, v) if v is not None else Score(m, None, error="judge timed out") for m, v in values.items()}
    if relevance_chunks is not None:
        value = sum(relevance_chunks) / len(relevance_chunks)
        scores["context_relevance"] = Score(
            "context_relevance",
            value,
            details={"chunks": [{"index": k, "score": s} for k, s in enumerate(relevance_chunks)]},
        )
    ctx = [c if isinstance(c, Context) else Context(c) for c in contexts]
    meta = {} if latency is None else {"latency": {"total_s": latency}}
    return SampleResult(
        Sample(question or f"question {i}", ctx, answer="an answer", id=f"s{i}", metadata=meta),
        scores,
        usage=Usage(calls=1, cost_usd=cost),
    )


def quiet(**kw) -> Monitor:
    """A monitor without OTel metrics and without the default rules that are not under test."""
    kw.setdefault("meter_provider", False)
    for k in ("max_drop", "no_retrieval_limit", "error_rate_limit", "psi_limit"):
        kw.setdefault(k, None)
    return Monitor(**kw)


# ------------------------------------------------------------------ statistics by hand


def test_public_names():
    assert rm.Monitor is Monitor and "Monitor" in rm.__all__


def test_p95_linear_interpolation_by_hand():
    # 1..20 s: position 0.95 * 19 = 18.05 -> 19 + 0.05 * (20 - 19) = 19.05
    assert percentile([float(x) for x in range(20, 0, -1)], 95) == pytest.approx(19.05, abs=1e-12)
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85, abs=1e-12)  # 2.85 -> 3 + 0.85
    assert percentile([7.0], 95) == 7.0
    assert percentile(list(range(1, 21)), 95) == pytest.approx(float(np.percentile(range(1, 21), 95)))


def test_psi_by_hand_on_a_small_case():
    # two bins split at 0.5; reference 2 + 2 -> shares 0.5, 0.5; recent 1 + 3 -> 0.25, 0.75
    # PSI = (0.25 - 0.5) ln(0.25 / 0.5) + (0.75 - 0.5) ln(0.75 / 0.5)
    #     = (-0.25)(-0.693147) + (0.25)(0.405465) = 0.173287 + 0.101366 = 0.274653
    value = psi([0.1, 0.2, 0.8, 0.9], [0.3, 0.6, 0.7, 0.95], edges=[0.0, 0.5, 1.0])
    assert value == pytest.approx(0.25 * math.log(2) + 0.25 * math.log(1.5), abs=1e-12)
    assert round(value, 6) == 0.274653
    assert psi([0.1, 0.9], [0.1, 0.9], edges=[0.0, 0.5, 1.0]) == 0.0
    # an empty bin counts PSI_EPSILON: recent all high -> (1e-4 - 0.5) ln(1e-4 / 0.5) + 0.5 ln 2 = 4.604318
    assert psi([0.1, 0.9], [0.9, 0.9], edges=[0, 0.5, 1]) == pytest.approx(
        (PSI_EPSILON - 0.5) * math.log(PSI_EPSILON / 0.5) + 0.5 * math.log(2)
    )


def test_rules_doctests():
    import doctest

    from ragmeter.monitor import rules

    assert doctest.testmod(rules).failed == 0


def test_trigger_fires_once_and_resolves_once_with_a_margin():
    t = Trigger(0.7, above=False, margin=0.035)
    states = [t.update(v) for v in (0.8, 0.69, 0.5, 0.6, 0.71, 0.734, 0.735, 0.9, 0.69)]
    assert states == [None, "firing", None, None, None, None, "resolved", None, "firing"]


# ------------------------------------------------------------------ rules


def test_floor_hysteresis_one_alert_and_one_resolution():
    alerts: list[Alert] = []
    mon = quiet(window=200, recent=10, min_samples=10, thresholds={"faithfulness": 0.7}, on_alert=alerts.append)
    # 30 good (0.9), 30 bad (0.5), 30 good. Mean of the last 10 after k bad: (0.9 (10 - k) + 0.5 k) / 10
    # < 0.7 when k > 5: fires on the 6th bad sample (#36) at 0.66. Back: (0.5 (10 - j) + 0.9 j) / 10
    # >= 0.7 + 0.05 * 0.7 = 0.735 when j >= 5.875: resolves on the 6th good one (#66) at 0.74.
    fired_at = {}
    for i, v in enumerate([0.9] * 30 + [0.5] * 30 + [0.9] * 30, start=1):
        before = len(alerts)
        mon.observe(result(i, faithfulness=v))
        if len(alerts) > before:
            fired_at[alerts[-1].state] = i
    assert [(a.rule, a.metric, a.state) for a in alerts] == [
        ("score_floor", "faithfulness", "firing"),
        ("score_floor", "faithfulness", "resolved"),
    ]
    assert fired_at == {"firing": 36, "resolved": 66}
    assert alerts[0].value == pytest.approx(0.66) and alerts[1].value == pytest.approx(0.74)
    assert alerts[0].limit == 0.7 and "below the limit 0.7" in alerts[0].message
    assert mon.stats["alerts_fired"] == 1 and mon.stats["alerts_resolved"] == 1


def test_no_alert_before_min_samples():
    alerts = []
    mon = quiet(window=100, recent=10, min_samples=20, thresholds={"faithfulness": 0.7}, on_alert=alerts.append)
    for i in range(1, 20):
        mon.observe(result(i, faithfulness=0.1))
    assert alerts == []  # 19 samples, all far below the floor: still nothing
    mon.observe(result(20, faithfulness=0.1))
    assert [(a.rule, a.state, a.value) for a in alerts] == [("score_floor", "firing", pytest.approx(0.1))]


def test_faithfulness_degradation_against_the_earlier_window():
    alerts = []
    mon = quiet(window=200, recent=10, min_samples=10, thresholds={}, max_drop=0.1, on_alert=alerts.append)
    # 100 at 0.95 then 0.8: recent mean after k bad = 0.95 - 0.015 k; earlier mean 0.95;
    # drop 0.015 k > 0.1 first at k = 7 (#107), drop 0.105
    for i in range(1, 121):
        mon.observe(result(i, faithfulness=0.95 if i <= 100 else 0.8))
        if alerts:
            break
    assert i == 107
    [a] = alerts
    assert (a.rule, a.metric, a.state) == ("faithfulness_degradation", "faithfulness", "firing")
    assert a.value == pytest.approx(0.105) and a.limit == 0.1
    # still 0.8 for 100 more: the earlier mean stays the pre-drop 0.95 while firing, so the 0.8s
    # filling the window do not resolve it
    for i in range(108, 208):
        mon.observe(result(i, faithfulness=0.8))
    assert len(alerts) == 1
    # recovery: after j samples at 0.95 the recent mean is 0.8 + 0.015 j; resolved when the drop
    # 0.95 - that <= 0.1 - 0.005 (the margin), i.e. j >= 3.67: the 4th, drop 0.09
    for j in range(1, 11):
        mon.observe(result(300 + j, faithfulness=0.95))
        if len(alerts) == 2:
            break
    assert j == 4 and alerts[1].state == "resolved" and alerts[1].value == pytest.approx(0.09)


def test_retrieval_degradation_on_context_recall():
    alerts = []
    mon = quiet(window=40, recent=10, min_samples=10, thresholds={}, max_drop=0.22, on_alert=alerts.append)
    for i in range(30):
        mon.observe(result(i, context_recall=0.9 if i < 20 else 0.5))
    # after 20 good: the 6th bad gives recent (4 * 0.9 + 6 * 0.5) / 10 = 0.66, earlier 0.9: drop 0.24 > 0.22
    # (the 5th: 0.70, drop 0.20: not above)
    assert [(a.rule, a.metric, a.state) for a in alerts] == [("retrieval_degradation", "context_recall", "firing")]
    assert alerts[0].value == pytest.approx(0.24)


def test_no_retrieval_rate_by_hand():
    alerts = []
    mon = quiet(
        window=50,
        recent=4,
        min_samples=4,
        no_retrieval_limit=0.5,
        relevance_floor=0.0,
        retrieval_score_floor=0.35,
        on_alert=alerts.append,
    )
    mon.observe(result(1, contexts=()))  # no chunks: counts, True
    mon.observe(result(2, relevance_chunks=[0.0, 0.0], contexts=("a", "b")))  # nothing relevant: True
    mon.observe(result(3, relevance_chunks=[0.0, 0.5], contexts=("a", "b")))  # one relevant chunk: False
    mon.observe(result(4, contexts=("a",)))  # no signal at all: not counted
    assert mon.snapshot()["no_retrieval"] == pytest.approx(2 / 3) and alerts == []  # 3 counted < min 4
    mon.observe(result(5, contexts=(Context("a", score=0.2), Context("b", score=0.3))))  # best 0.3 <= 0.35: True
    # 4 counted samples, 3 without retrieval: 3 / 4 = 0.75 > 0.5
    assert mon.snapshot()["no_retrieval"] == 0.75
    assert [(a.rule, a.value, a.state) for a in alerts] == [("no_retrieval_rate", 0.75, "firing")]
    for i in range(6, 8):  # two samples with a relevant chunk
        mon.observe(result(i, relevance_chunks=[0.9], contexts=("a",)))
    # the last 4 counted: #3 False, #5 True, #6 False, #7 False -> 1 / 4 = 0.25 <= 0.5 - 0.025: resolved
    assert mon.snapshot()["no_retrieval"] == 0.25
    assert [(a.rule, a.state) for a in alerts][-1] == ("no_retrieval_rate", "resolved") and len(alerts) == 2


def test_latency_p95_by_hand():
    alerts = []
    mon = quiet(window=50, recent=20, min_samples=20, latency_p95_limit=19.0, on_alert=alerts.append)
    for t in range(1, 21):  # 1..20 s: p95 = 19.05 (see test_p95_linear_interpolation_by_hand)
        mon.observe(result(t, latency=float(t)))
    mon.observe(result(99))  # no latency: not in the window
    assert mon.snapshot()["latency_p95"] == pytest.approx(19.05)
    assert [(a.rule, a.metric, a.state, round(a.value, 6)) for a in alerts] == [("latency_p95", None, "firing", 19.05)]


def test_judge_error_rate():
    alerts = []
    mon = quiet(window=50, recent=4, min_samples=4, error_rate_limit=0.1, on_alert=alerts.append)
    for i in range(3):
        mon.observe(result(i, faithfulness=0.9, answer_relevancy=0.8))
    na = Score("citation_accuracy", None, explanation="not applicable: no citations")
    r = result(3, faithfulness=0.9, answer_relevancy=None)
    r.scores["citation_accuracy"] = na
    mon.observe(r)
    # 1 errored score of 8 computed (the n/a one is left out): 0.125 > 0.1
    assert mon.snapshot()["error_rate"] == 0.125
    assert [(a.rule, a.value) for a in alerts] == [("judge_error_rate", 0.125)]


def test_judge_cost_per_hour_with_an_injected_clock():
    now = [1_000_000.0]
    alerts = []
    mon = quiet(
        window=50, recent=5, min_samples=5, cost_per_hour_limit=0.05, on_alert=alerts.append, clock=lambda: now[0]
    )
    for i in range(6):
        mon.observe(result(i, cost=0.01))
        now[0] += 60.0
    # six samples a minute apart, 0.01 USD each: 0.06 in the last hour > 0.05 (fires on the 6th)
    assert mon.snapshot()["cost_per_hour"] == pytest.approx(0.06)
    assert [(a.rule, a.state) for a in alerts] == [("judge_cost_per_hour", "firing")]
    now[0] += 3600.0
    mon.observe(result(7, cost=None))  # unknown price counts 0; the earlier spend left the hour
    assert mon.snapshot()["cost_per_hour"] == 0.0
    assert [(a.rule, a.state) for a in alerts][-1] == ("judge_cost_per_hour", "resolved")


def test_psi_drift_rule_and_reference_from_an_offline_run():
    alerts = []
    mon = quiet(
        window=50,
        recent=4,
        min_samples=4,
        psi_limit=0.25,
        psi_bins=2,
        drift_on="context_recall",
        on_alert=alerts.append,
    )
    mon.set_reference([result(i, context_recall=v) for i, v in enumerate([0.1, 0.2, 0.8, 0.9])])
    for i, v in enumerate([0.3, 0.6, 0.7, 0.95]):
        mon.observe(result(10 + i, context_recall=v))
    # as test_psi_by_hand_on_a_small_case: 0.274653 > 0.25
    assert mon.snapshot()["drift"]["psi"] == pytest.approx(0.274653, abs=1e-6)
    assert [(a.rule, a.metric, a.state) for a in alerts] == [("drift_psi", "context_recall", "firing")]


def test_psi_reference_fills_from_the_first_samples():
    mon = quiet(window=50, recent=4, min_samples=4, drift_on="context_recall", reference_size=4, psi_bins=2)
    for i, v in enumerate([0.1, 0.2, 0.8, 0.9, 0.3, 0.6, 0.7]):
        mon.observe(result(i, context_recall=v))
    assert mon.snapshot()["drift"]["psi"] is None  # 3 recent values < 4
    mon.observe(result(8, context_recall=0.95))
    assert mon.snapshot()["drift"]["psi"] == pytest.approx(0.274653, abs=1e-6)


class TopicEmbedder(Embedder):
    """Questions about refunds -> (1, 0), anything else -> (0, 1): centroid distances by hand."""

    name = "topic"

    def __init__(self):
        self.calls = 0

    async def embed(self, texts):
        self.calls += 1
        return np.array([[1.0, 0.0] if "refund" in t else [0.0, 1.0] for t in texts]), Usage(embedding_calls=1)


def test_centroid_drift_with_an_embedder():
    alerts = []
    emb = TopicEmbedder()
    mon = quiet(
        window=50, recent=4, min_samples=4, reference_size=4, embedder=emb, centroid_limit=0.15, on_alert=alerts.append
    )
    for i in range(4):
        mon.observe(result(i, question=f"how do I get a refund {i}"))
    for i in range(2):
        mon.observe(result(10 + i, question=f"refund status {i}"))
    for i in range(2):
        mon.observe(result(20 + i, question=f"where is my parcel {i}"))
    assert mon.flush(10)
    # reference centroid (1, 0); recent (0.5, 0.5): cosine 0.5 / 0.7071 = 0.7071 -> distance 0.292893
    assert mon.snapshot()["drift"]["centroid_distance"] == pytest.approx(1 - 1 / math.sqrt(2))
    assert [(a.rule, a.state) for a in alerts] == [("drift_centroid", "firing")]
    assert mon.buffer_sizes()["drift_question_vectors"] == 4


# ------------------------------------------------------------------ selection, robustness, bounds


def test_sample_rate_and_should_score_reuse_the_captures_sampling():
    from ragmeter.inline import sampled

    mon = quiet(sample_rate=0.5, should_score=lambda s: True if "urgent" in s.question else None)
    kept = [mon.observe(result(i, faithfulness=0.9)) for i in range(200)]
    assert kept == [sampled(f"s{i}", 0.5) for i in range(200)] and 50 < sum(kept) < 150
    forced = next(i for i in range(1000, 2000) if not sampled(f"s{i}", 0.5))
    assert mon.observe(result(forced, question="urgent question", faithfulness=0.9)) is True
    st = mon.stats
    assert st["observed"] == sum(kept) + 1 and st["sampled_out"] == 200 - sum(kept)


def test_observe_never_raises_and_counts_drops():
    seen = []
    mon = quiet(on_alert=lambda a: 1 / 0, window=10, recent=2, min_samples=2, thresholds={"faithfulness": 0.7})
    assert mon.observe(None) is False  # not a SampleResult
    assert mon.observe(object()) is False
    for i in range(3):
        seen.append(mon.observe(result(i, faithfulness=0.1)))  # the on_alert callback raises: swallowed
    assert seen == [True] * 3
    assert mon.stats["dropped"] == 2 and mon.stats["observed"] == 3 and mon.stats["alerts_fired"] == 1


def test_state_is_bounded_after_ten_windows_of_traffic():
    now = [0.0]
    mon = quiet(
        window=100,
        recent=20,
        min_samples=20,
        reference_size=30,
        drift_on="context_recall",
        clock=lambda: now[0],
        embedder=TopicEmbedder(),
    )
    for i in range(1000):  # 10x the window, many minutes, every kind of signal
        now[0] += 7.0
        mon.observe(
            result(
                i,
                faithfulness=(i % 10) / 10,
                context_recall=0.5,
                latency=1.0,
                cost=0.001,
                relevance_chunks=[0.2, 0.0],
                question=f"refund {i}" if i % 2 else f"parcel {i}",
            )
        )
    mon.flush(10)
    sizes = mon.buffer_sizes()
    assert sizes["series.faithfulness.full"] == 100 and sizes["series.faithfulness.recent"] == 20
    assert sizes["latency"] == sizes["no_retrieval"] == sizes["judged"] == sizes["drift_recent"] == 20
    assert sizes["drift_reference"] == 30 and sizes["drift_question_vectors"] == 20
    assert sizes["cost_buckets"] <= 61 and sizes["alerts"] <= 100
    # 100 values cycling 0.0 .. 0.9: mean 0.45 (the running sum agrees with a fresh sum)
    assert mon.snapshot()["means"]["faithfulness"]["full"] == pytest.approx(0.45, abs=1e-12)


def test_observe_is_thread_safe_and_counts_are_exact():
    mon = quiet(window=4000, recent=50, min_samples=50, thresholds={})
    barrier = threading.Barrier(8)

    def feed(t: int) -> None:
        barrier.wait()
        for i in range(500):
            mon.observe(result(t * 1000 + i, faithfulness=(t + 1) / 10, latency=float(t)))

    threads = [threading.Thread(target=feed, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    snap = mon.snapshot()
    assert snap["counts"] == {"observed": 4000, "sampled_out": 0, "dropped": 0}
    # 500 each of 0.1 .. 0.8: mean 0.45, all 4000 in the window
    assert snap["means"]["faithfulness"]["count"] == 4000
    assert snap["means"]["faithfulness"]["full"] == pytest.approx(0.45, abs=1e-12)


# ------------------------------------------------------------------ OpenTelemetry


def _points(reader) -> dict:
    """{(instrument name, frozenset(attributes)): (value, unit)} of one collection."""
    out = {}
    data = reader.get_metrics_data()
    for rm_ in data.resource_metrics:
        for sm in rm_.scope_metrics:
            assert sm.scope.name == "ragmeter.monitor"
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    out[(metric.name, frozenset(p.attributes.items()))] = (p.value, metric.unit)
    return out


def test_otel_metrics_exact_values_with_the_in_memory_reader():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    mon = Monitor(
        window=10,
        recent=4,
        min_samples=4,
        thresholds={"faithfulness": 0.7},
        meter_provider=provider,
        max_drop=None,
        psi_limit=None,
        error_rate_limit=None,
        no_retrieval_limit=0.5,
        latency_p95_limit=2.0,
        sample_rate=0.5,
        attributes={"service": "rag-api"},
    )
    faith = [1.0, 0.8, 0.6, 0.4, 0.2, 1.0]
    kept, i = 0, 0
    while kept < 6:  # six kept samples; the sampled-out ones are counted too
        i += 1
        kept += mon.observe(
            result(i, contexts=() if kept == 5 else ("c",), latency=float(kept + 1), faithfulness=faith[kept])
        )
    sampled_out = mon.stats["sampled_out"]
    assert sampled_out == i - 6 and sampled_out > 0
    p = _points(reader)
    svc = ("service", "rag-api")

    def at(name, **attrs):
        return p[(name, frozenset({svc, *((f"ragmeter.{k}", v) for k, v in attrs.items())}))]

    # recent = last 4 (0.6, 0.4, 0.2, 1.0) -> 0.55; full = 4.0 / 6 = 0.666667
    assert at("ragmeter.monitor.score.mean", metric="faithfulness", window="recent") == (pytest.approx(0.55), "1")
    assert at("ragmeter.monitor.score.mean", metric="faithfulness", window="full")[0] == pytest.approx(4.0 / 6)
    # latencies 3, 4, 5, 6 s in the last 4: p95 position 2.85 -> 5 + 0.85 = 5.85
    assert at("ragmeter.monitor.latency.p95") == (pytest.approx(5.85), "s")
    # no-retrieval: only the 6th kept sample had no chunks; the others have chunks but no signal
    assert at("ragmeter.monitor.no_retrieval") == (1.0, "1")
    assert at("ragmeter.monitor.samples", outcome="observed") == (6, "{sample}")
    assert at("ragmeter.monitor.samples", outcome="sampled_out") == (sampled_out, "{sample}")
    assert at("ragmeter.monitor.samples", outcome="dropped") == (0, "{sample}")
    # the floor fired at the 5th kept sample (0.8 + 0.6 + 0.4 + 0.2) / 4 = 0.5 and is still firing
    # (0.55 < 0.735); latency p95 of (1, 2, 3, 4) = 3.85 > 2 fired at the 4th
    assert at("ragmeter.monitor.alerts", rule="score_floor", metric="faithfulness", state="firing") == (1, "{alert}")
    assert at("ragmeter.monitor.alerts", rule="latency_p95", state="firing")[0] == 1
    assert at("ragmeter.monitor.alert.firing", rule="score_floor", metric="faithfulness")[0] == 1
    assert not any(k[0] == "ragmeter.monitor.drift" for k in p)  # no value yet: no point, not a fake 0
    assert ("ragmeter.monitor.judge.cost", frozenset({svc})) in p  # 0.0 USD/h: costs unknown count 0
    assert p[("ragmeter.monitor.judge.cost", frozenset({svc}))] == (0.0, "{USD}/h")


def test_core_does_not_import_opentelemetry_without_metrics():
    code = textwrap.dedent("""
        import sys
        import ragmeter as rm
        mon = rm.Monitor(meter_provider=False)
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
    """)
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# ------------------------------------------------------------------ store and captures


def test_monitor_writes_observed_samples_to_the_store_in_batches(tmp_path):
    from ragmeter.store import Store

    db = tmp_path / "history.db"
    mon = quiet(store=str(db), window=20, recent=5, min_samples=5)
    for i in range(12):
        mon.observe(result(i, faithfulness=0.9))
    assert mon.close(10)
    assert mon.stats["store_written"] == 12
    with Store(str(db)) as store:
        [run] = store.runs(kind="inline")
        assert run.source == "monitor"
        assert len(store.samples(run.id)) == 12


def test_fed_by_the_langchain_handler():
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    from ragmeter.integrations.langchain import RagmeterCallbackHandler
    from ragmeter.judges.offline import OfflineJudge

    docs = [Document(id="d1", page_content="Paris is the capital of France.")]
    prompt = ChatPromptTemplate.from_messages([("system", "Context:\n{context}"), ("human", "{question}")])
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(docs)
    retriever = store.as_retriever(search_kwargs={"k": 1})
    chain = (
        {
            "context": retriever | RunnableLambda(lambda ds: "\n".join(d.page_content for d in ds)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | FakeListChatModel(responses=["Paris is the capital of France."])
        | StrOutputParser()
    )
    mon = quiet(window=20, recent=2, min_samples=2)
    handler = RagmeterCallbackHandler(
        metrics=["faithfulness"], judge=OfflineJudge(embeddings=False), on_result=mon.observe
    )
    for _ in range(3):
        chain.invoke("What is the capital of France?", config={"callbacks": [handler]})
    assert handler.flush(10)
    snap = mon.snapshot()
    assert snap["counts"]["observed"] == len(handler.results) == 3
    assert snap["means"]["faithfulness"] == {"recent": 1.0, "full": 1.0, "count": 3}  # it quotes its context


def test_fed_by_the_span_processor():
    from helpers.tracing import genai_rag, rag_provider

    mon = quiet(window=20, recent=2, min_samples=2)
    proc, provider, _ = rag_provider(on_result=mon.observe)
    tracer = provider.get_tracer("app")
    for _ in range(2):
        with tracer.start_as_current_span("rag request"):
            genai_rag(tracer)
    assert provider.force_flush(10_000)
    snap = mon.snapshot()
    assert snap["counts"]["observed"] == 2
    assert set(snap["means"]) == {"context_count", "answer_overlap"}
    proc.shutdown()


def test_two_monitors_share_a_provider_told_apart_by_their_attributes():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    a = Monitor(meter_provider=provider, attributes={"app": "a"})
    b = Monitor(meter_provider=provider, attributes={"app": "b"})
    a.observe(result(1, faithfulness=0.5))
    for i in range(2, 4):
        b.observe(result(i, faithfulness=0.9))
    p = _points(reader)
    observed = ("ragmeter.outcome", "observed")
    assert p[("ragmeter.monitor.samples", frozenset({("app", "a"), observed}))][0] == 1
    assert p[("ragmeter.monitor.samples", frozenset({("app", "b"), observed}))][0] == 2
    mean = {("ragmeter.metric", "faithfulness"), ("ragmeter.window", "recent")}
    assert p[("ragmeter.monitor.score.mean", frozenset({("app", "b"), *mean}))][0] == 0.9
