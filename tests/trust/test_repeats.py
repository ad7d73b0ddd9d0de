"""Repeats for unstable judges (issue 34, item 5): a real OpenAI client against a local server
whose verdicts wobble; each Score keeps every value, the mean and the spread; repeats are fresh
requests (the cache keys them apart), optionally only near the threshold; the cost is counted;
the report and the trust card flag the unstable scores."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

import ragmeter as rm
from helpers.servers import FakeLLMServer, answer, oracle
from ragmeter.cli import main
from ragmeter.judges.offline import OfflineJudge
from ragmeter.judges.openai import OpenAIJudge
from ragmeter.labels import Label, answer_hash

SAMPLES = [
    rm.Sample(
        "Who wrote Dune?", ["Dune is a novel by Frank Herbert."], answer="Frank Herbert wrote Dune.", id="wobbly"
    ),
    rm.Sample(
        "When was Dune published?", ["Dune was published in 1965."], answer="It was published in 1965.", id="steady"
    ),
]
# per claim, the verdicts of the successive verify_claims calls: the first claim flips, the other does not
SCRIPT = {
    "Frank Herbert wrote Dune.": ["supported", "not_found", "supported"],
    "It was published in 1965.": ["supported", "supported", "supported"],
}


class Wobbly:
    """A responder: verify_claims answers each claim with the next verdict of its script."""

    def __init__(self):
        self.seen: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, req):
        if req.task != "verify_claims":
            return oracle(req)
        verdicts = []
        for c in req.inputs["claims"]:
            with self.lock:
                n = self.seen[c["text"]]
                self.seen[c["text"]] += 1
            verdict = SCRIPT[c["text"]][n % 3]
            verdicts.append(
                {
                    "claim": c["index"],
                    "verdict": verdict,
                    "reason": "scripted",
                    "evidence": [{"chunk": 0, "quote": "Dune"}] if verdict == "supported" else [],
                }
            )
        return answer({"verdicts": verdicts})


def _judge(server, tmp_path, **kw):
    return OpenAIJudge(
        "judge-model", api_key="sk-test", base_url=server.openai_url, embedder=None, cache=tmp_path / "cache", **kw
    )


def test_each_score_keeps_every_value_the_mean_and_the_spread(tmp_path):
    with FakeLLMServer(Wobbly()) as server:
        result = rm.evaluate(
            SAMPLES, metrics=["faithfulness"], judge=_judge(server, tmp_path), repeats=3, progress=False, concurrency=1
        )
        requests = len(server.chat_requests)
    wobbly, steady = result[0]["faithfulness"], result[1]["faithfulness"]
    rep = wobbly.details["repeats"]
    assert rep["values"] == [1.0, 0.0, 1.0] and rep["k"] == 3 and rep["unstable"] is True
    assert wobbly.value == pytest.approx(2 / 3) and rep["mean"] == pytest.approx(2 / 3)
    assert rep["spread"] == 1.0 and rep["sd"] == pytest.approx((2 / 9) ** 0.5) and rep["errors"] == []
    assert (
        wobbly.label == "fail"
        and "mean of 3 judge runs (1.00, 0.00, 1.00); unstable: the runs' verdicts differ" in wobbly.explanation
    )
    assert steady.details["repeats"]["values"] == [1.0, 1.0, 1.0] and steady.details["repeats"]["unstable"] is False
    # every repeat is a request of its own (the cache keys them apart), and each is counted
    assert requests == 2 * 2 * 3 and result.usage.calls == 12 and rep["calls"] == 4
    assert [p["sample_id"] for p in result.problems() if p["metric"] == "faithfulness"][0] == "wobbly"
    md = result.to_markdown()
    assert "repeats: faithfulness: 2 scores asked 3 times (8 extra judge calls); 1 unstable: wobbly" in md


def test_only_scores_near_the_threshold_are_repeated(tmp_path):
    with FakeLLMServer(Wobbly()) as server:
        # first values: wobbly 1.0, steady 1.0, threshold 0.85: a band of 0.1 repeats neither, one of 0.2 both
        none = rm.evaluate(
            SAMPLES,
            metrics=["faithfulness"],
            judge=_judge(server, tmp_path),
            repeats=3,
            repeat_band=0.1,
            progress=False,
        )
        assert all("repeats" not in r["faithfulness"].details for r in none) and len(server.chat_requests) == 4
        wide = rm.evaluate(
            SAMPLES,
            metrics=[rm.metrics.Faithfulness(threshold=0.9)],
            judge=_judge(server, tmp_path),
            repeats=2,
            repeat_band=0.2,
            progress=False,
        )
    assert all(r["faithfulness"].details["repeats"]["k"] == 2 for r in wide)


def test_a_deterministic_judge_is_not_asked_again_and_bad_settings_are_refused():
    result = rm.evaluate(
        SAMPLES, metrics=["faithfulness"], judge=OfflineJudge(embeddings=False), repeats=3, progress=False
    )
    assert all("repeats" not in r["faithfulness"].details for r in result)
    with pytest.raises(ValueError, match="repeats must be a whole number >= 1"):
        rm.evaluate(SAMPLES, metrics=["faithfulness"], judge="offline", repeats=0, progress=False)
    with pytest.raises(ValueError, match="repeat_band must be between 0 and 1"):
        rm.evaluate(SAMPLES, metrics=["faithfulness"], judge="offline", repeats=2, repeat_band=2, progress=False)


def test_the_cli_and_the_trust_card_flag_unstable_scores(tmp_path, capsys, monkeypatch):
    data = tmp_path / "data.jsonl"
    rm.save_samples(SAMPLES, data)
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "cache"))
    with FakeLLMServer(Wobbly()) as server:
        spec = f"openai:judge-model@{server.openai_url}"
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        assert (
            main(
                [
                    "evaluate",
                    str(data),
                    "-m",
                    "faithfulness",
                    "--judge",
                    spec,
                    "--repeats",
                    "3",
                    "--concurrency",
                    "1",
                    "--no-progress",
                    "--out",
                    str(tmp_path / "r.jsonl"),
                ]
            )
            == 0
        )
    out = capsys.readouterr().out
    assert "repeats: faithfulness: 2 scores asked 3 times (8 extra judge calls); 1 unstable: wobbly" in out
    labels = [Label(s.id, "ann", "faithfulness", 1, answer_hash(s.answer), scale="binary") for s in SAMPLES]
    card = rm.trust_card(str(tmp_path / "r.jsonl"), labels, n_boot=20, min_labels=2)
    assert [u["sample_id"] for u in card.metrics["faithfulness"]["unstable"]] == ["wobbly"]
    assert "unstable under repeats: wobbly" in card.to_text()
