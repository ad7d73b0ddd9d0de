"""evaluate() / aevaluate(): sync and async, inside a running loop, failures isolated, task
sharing between metrics, ensembles, results and exports."""

import asyncio
import json

import pytest

import ragmeter as rm
from helpers.scripted import ScriptedJudge
from ragmeter.data import Score
from ragmeter.executors import AsyncioExecutor
from ragmeter.judges import EnsembleJudge
from ragmeter.metrics import resolve_metrics
from ragmeter.metrics.base import Metric

SAMPLES = [
    {
        "id": "a",
        "question": "Who wrote Dune?",
        "contexts": [
            {"id": "d1", "text": "Dune is by Frank Herbert."},
            {"id": "d2", "text": "Dune is set on Arrakis."},
        ],
        "answer": "Frank Herbert.",
        "relevant_ids": ["d1"],
    },
    {
        "id": "b",
        "question": "Where is Dune set?",
        "contexts": [
            {"id": "d1", "text": "Dune is by Frank Herbert."},
            {"id": "d2", "text": "Dune is set on Arrakis."},
        ],
        "answer": "On Arrakis.",
        "relevant_ids": {"d2": 2, "d3": 1},
    },
]


class Useful(Metric):
    """Fraction of chunks the judge calls useful (uses the shared rate_chunks task)."""

    name = "useful"
    threshold, warn = 0.6, 0.4

    async def compute(self, sample, ctx):
        out = (
            await ctx.task(
                "rate_chunks",
                {"question": sample.question, "reference": None, "chunks": [[c.text] for c in sample.contexts]},
            )
        ).output
        useful = sum(c["useful"] for c in out["chunks"])
        return Score(self.name, useful / len(out["chunks"]), explanation=f"{useful} useful")


class Answerable(Metric):
    """(answerable - 1) / 4 from the same rate_chunks task."""

    name = "answerable"

    async def compute(self, sample, ctx):
        out = (
            await ctx.task(
                "rate_chunks",
                {"question": sample.question, "reference": None, "chunks": [[c.text] for c in sample.contexts]},
            )
        ).output
        return Score(self.name, (out["answerable"] - 1) / 4, explanation="estimate")


def rate_first_useful(inputs):
    n = len(inputs["chunks"])
    return {
        "chunks": [{"chunk": i, "relevant": [0] if i == 0 else [], "useful": i == 0} for i in range(n)],
        "answerable": 5,
    }


def test_retrieval_metrics_by_name_with_hand_values():
    result = rm.evaluate(SAMPLES, metrics=["precision@1", "recall@2", "mrr", "ndcg@2"], progress=False)
    a, b = result
    # sample a: d1 relevant at rank 1 -> P@1 = 1, recall@2 = 1/1, RR = 1, nDCG = 1
    assert [a.scores[m].value for m in ("precision@1", "recall@2", "mrr", "ndcg@2")] == [1.0, 1.0, 1.0, 1.0]
    # sample b: d2 (grade 2) at rank 2, d3 (grade 1) not retrieved.
    # P@1 = 0; recall@2 = 1/2; RR = 1/2; DCG@2 = 2/log2(3) = 1.26186; ideal = 2/1 + 1/log2(3) = 2.63093
    assert b.scores["precision@1"].value == 0.0
    assert b.scores["recall@2"].value == 0.5
    assert b.scores["mrr"].value == 0.5
    assert b.scores["ndcg@2"].value == pytest.approx(1.26186 / 2.63093, abs=1e-5)
    summary = result.summary()
    assert summary["mrr"]["mean"] == 0.75 and summary["mrr"]["count"] == 2
    assert all(s.judge == "code" for r in result for s in r.scores.values())


def test_judge_tasks_are_shared_between_metrics():
    judge = ScriptedJudge({"rate_chunks": rate_first_useful})
    result = rm.evaluate(SAMPLES, metrics=[Useful(), Answerable()], judge=judge, progress=False)
    assert judge.calls["rate_chunks"] == 2  # one per sample, shared by both metrics
    assert [r.scores["useful"].value for r in result] == [0.5, 0.5]
    assert [r.scores["answerable"].value for r in result] == [1.0, 1.0]
    assert result.usage.calls == 2
    assert result[0].scores["useful"].label == "warn" and result[0].scores["answerable"].label == "pass"
    assert result[0].scores["useful"].judge == "scripted"


def test_failures_are_isolated_and_reported():
    class Boom(Metric):
        name = "boom"
        uses_judge = False

        async def compute(self, sample, ctx):
            if sample.id == "b":
                raise RuntimeError("kaput")
            return Score(self.name, 1.0, explanation="fine")

    bad_judge = ScriptedJudge({"rate_chunks": {"chunks": [], "answerable": 9}})  # invalid: no verdicts
    records = SAMPLES + [{"id": "c", "question": "q", "contexts": "oops"}]
    result = rm.evaluate(records, metrics=[Boom(), Useful(), "mrr"], judge=bad_judge, progress=False)
    assert len(result) == 2 and [str(e) for e in result.invalid] == [
        "record 3: field 'contexts': expected a list, got str"
    ]
    assert result[0].scores["boom"].value == 1.0
    assert result[1].scores["boom"].value is None and "kaput" in result[1].scores["boom"].error
    for r in result:
        s = r.scores["useful"]
        assert s.value is None and s.status == "error" and "expected exactly one entry per chunk" in s.error
        assert r.scores["mrr"].value is not None  # other metrics unaffected
    assert result.summary()["useful"]["errors"] == 2
    problems = result.problems()
    assert problems[0]["value"] is None  # errors first


def test_not_applicable_when_field_missing():
    result = rm.evaluate([{"question": "q", "contexts": [{"id": "x", "text": "t"}]}], metrics=["mrr"], progress=False)
    s = result[0].scores["mrr"]
    assert s.value is None and s.status == "n/a" and "relevant_ids" in s.explanation and s.label is None
    assert result.summary()["mrr"]["n/a"] == 1


def test_sync_evaluate_inside_running_loop_and_aevaluate():
    async def main():
        inner = rm.evaluate(SAMPLES, metrics=["mrr"], progress=False)  # works inside a running loop (Jupyter)
        outer = await rm.aevaluate(SAMPLES, metrics=["mrr"], progress=False)
        return inner, outer

    inner, outer = asyncio.run(main())
    assert inner.values("mrr") == outer.values("mrr") == [1.0, 0.5]


def test_concurrency_cap_is_respected():
    running, peak = 0, 0

    class Track(Metric):
        name = "track"
        uses_judge = False

        async def compute(self, sample, ctx):
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            return Score(self.name, 1.0, explanation="ok")

    records = [{"question": f"q{i}", "contexts": []} for i in range(30)]
    rm.evaluate(records, metrics=[Track()], concurrency=4, progress=False)
    assert peak == 4
    with pytest.raises(ValueError):
        AsyncioExecutor(0)


def test_ensemble_median_and_disagreement():
    def judge_with(useful_count, name):
        def rate(inputs):
            n = len(inputs["chunks"])
            return {
                "chunks": [{"chunk": i, "relevant": [], "useful": i < useful_count} for i in range(n)],
                "answerable": 3,
            }

        return ScriptedJudge({"rate_chunks": rate}, name=name)

    ens = EnsembleJudge([judge_with(2, "j1"), judge_with(2, "j2"), judge_with(0, "j3")])
    result = rm.evaluate(SAMPLES[:1], metrics=[Useful()], judge=ens, progress=False)
    s = result[0].scores["useful"]
    # members: 1.0, 1.0, 0.0 -> median 1.0, spread 1.0 > 0.3 -> flagged
    assert s.value == 1.0 and s.judge == "ensemble" and s.label == "pass"
    assert s.details["disagreement"] is True and s.details["members"]["j3"]["value"] == 0.0
    assert any(p["metric"] == "useful" for p in result.problems())
    assert Useful().score(rm.Sample("q", ["a", "b"]), judge=ens).value == 1.0  # Metric.score handles ensembles


def test_resolve_metrics_defaults_and_errors():
    plain = rm.samples_from_records([{"question": "q", "contexts": []}])
    with_ids = rm.samples_from_records(SAMPLES)
    assert [m.name for m in resolve_metrics(None, plain)] == list(rm.metrics.DEFAULT_METRICS)
    assert [m.name for m in resolve_metrics(None, with_ids)][-4:] == ["precision@5", "recall@5", "mrr", "ndcg@10"]
    with pytest.raises(ValueError, match="unknown metric"):
        resolve_metrics(["faithfulnes"])
    with pytest.raises(ValueError, match="twice"):
        resolve_metrics(["mrr", "mrr"])
    with pytest.raises(ValueError, match="positive integer"):
        resolve_metrics(["precision@0"])


def test_exports_round_trip(tmp_path):
    result = rm.evaluate(SAMPLES + [{"question": "q", "contexts": 3}], metrics=["mrr", "precision@1"], progress=False)
    path = result.save(tmp_path / "r.jsonl")
    back = rm.EvaluationResult.from_jsonl(path)
    assert back.summary() == result.summary()
    assert [str(e) for e in back.invalid] == [str(e) for e in result.invalid]
    data = json.loads(result.to_json())
    assert data["summary"]["mrr"]["mean"] == 0.75 and len(data["samples"]) == 2
    md = result.to_markdown()
    assert "| mrr | 0.7500 |" in md and "Invalid records (1)" in md
    html = rm.evaluate(
        [{"question": "<script>alert(1)</script>", "contexts": [{"id": "x", "text": "t"}], "relevant_ids": ["y"]}],
        metrics=["mrr"],
        progress=False,
    ).to_html()
    assert "<script>alert" not in html and "&lt;script&gt;" in html
    df = result.to_pandas()
    assert list(df["mrr"]) == [1.0, 0.5] and "mrr_label" in df.columns
    result.save(tmp_path / "r.csv")
    assert (tmp_path / "r.csv").read_text().splitlines()[0].startswith("sample_id,question,answer,mrr")
    with pytest.raises(ValueError, match="unknown report type"):
        result.save(tmp_path / "r.txt")


def test_printing_a_result_shows_the_metric_means():
    """print(result) shows each metric's mean (as RAGAS users expect), then the run's size."""
    result = rm.evaluate(
        [
            {"question": "q", "contexts": [{"id": "a", "text": "t"}, {"id": "b", "text": "u"}], "relevant_ids": ["b"]},
            {"question": "r", "contexts": [{"id": "a", "text": "t"}], "relevant_ids": ["a"]},
        ],
        metrics=["mrr", "precision@1"],
        progress=False,
    )
    # mrr: (1/2 + 1/1) / 2 = 0.75; precision@1: (0 + 1) / 2 = 0.5
    assert str(result) == "EvaluationResult({'mrr': 0.75, 'precision@1': 0.5}, 2 samples, judge='code', invalid=0)"


# ---------------------------------------------------------------------------- response time


def _timed(latencies):
    return [
        rm.Sample(
            f"q{i}?",
            [{"id": "d1", "text": "Dune is by Frank Herbert."}],
            answer="Frank Herbert.",
            relevant_ids=["d1"],
            id=f"t{i}",
            metadata={} if t is None else {"latency": {"retrieval_s": 0.1, "total_s": t}},
        )
        for i, t in enumerate(latencies)
    ]


def test_response_time_is_scored_where_latency_was_captured():
    # defaults pass <= 3 s, warn <= 5 s: 2.4 s -> 1.0 pass; 4.0 s -> 1 - 0.5 * (4 - 3) / (5 - 3) = 0.75 warn;
    # 7.5 s -> 0.5 * (10 - 7.5) / 5 = 0.25 fail; no latency -> n/a (a reason, no value)
    result = rm.evaluate(_timed([2.4, 4.0, 7.5, None]), metrics=["mrr"], progress=False)
    assert result.metrics == ["mrr", "response_time"]
    assert result.thresholds["response_time"] == (1.0, 0.5)
    got = [(s.value, s.label, s.judge) for s in result.scores("response_time")]
    assert got == [(1.0, "pass", "code"), (0.75, "warn", "code"), (0.25, "fail", "code"), (None, None, "code")]
    assert result[3].scores["response_time"].explanation == "no response time was captured for this sample"
    row = result.summary()["response_time"]
    assert (row["count"], row["n/a"], row["errors"], row["pass"], row["warn"], row["fail"]) == (3, 1, 0, 1, 1, 1)
    assert row["mean"] == pytest.approx((1.0 + 0.75 + 0.25) / 3)
    assert list(result[0].scores) == ["mrr", "response_time"]  # next to the metrics, after them
    from ragmeter.report import markdown_report

    assert "response_time" in markdown_report(result)


def test_response_time_levels_off_and_absent():
    strict = rm.evaluate(_timed([2.4]), metrics=["mrr"], progress=False, response_time=(1.0, 2.0))
    # 2.4 s over warn 2 s: 0.5 * (4 - 2.4) / 2 = 0.4 fail
    assert (strict[0].scores["response_time"].value, strict[0].scores["response_time"].label) == (
        pytest.approx(0.4),
        "fail",
    )
    off = rm.evaluate(_timed([2.4]), metrics=["mrr"], progress=False, response_time=None)
    assert off.metrics == ["mrr"] and "response_time" not in off[0].scores
    none = rm.evaluate(_timed([None, None]), metrics=["mrr"], progress=False)
    assert none.metrics == ["mrr"] and "response_time" not in none.thresholds
    assert all("response_time" not in r.scores for r in none)


def test_response_time_costs_no_judge_call_and_shows_once_on_the_dashboard():
    from ragmeter.dashboard.model import RunEntry, Verdicts, sample_views

    def run(latencies):
        judge = ScriptedJudge(
            {"rate_chunks": lambda inputs: {"chunks": [{"useful": True, "answerable": 5} for _ in inputs["chunks"]]}}
        )
        return rm.evaluate(_timed(latencies), metrics=[Useful()], judge=judge, progress=False), judge

    timed, judge_timed = run([1.0, 6.0])
    plain, judge_plain = run([None, None])
    assert judge_timed.calls == judge_plain.calls == {"rate_chunks": 2} and timed.usage == plain.usage
    entry = RunEntry.from_result(timed)
    assert list(entry.summary) == ["useful", "response_time"] and entry.summary["response_time"]["count"] == 2
    strict = Verdicts(pass_under=0.5, warn_under=2.0)  # the page's levels replace the default ones
    views = sample_views([type("E", (), {"result": r})() for r in timed], strict)
    assert [v.scores["response_time"].label for v in views] == ["warn", "fail"]
    assert [r.scores["response_time"].label for r in timed] == ["pass", "fail"]  # the result is unchanged
