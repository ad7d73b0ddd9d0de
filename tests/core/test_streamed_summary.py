"""Bugs found while making mypy pass (issue 36, item 6), each with the test that reproduced it."""

from __future__ import annotations

import pytest

import ragmeter as rm
from ragmeter.data import Sample
from ragmeter.labels import Label
from ragmeter.streaming import StreamedResult
from ragmeter.trust import ppi_mean


def test_a_streamed_result_summarises_with_labels_like_one_in_memory(tmp_path):
    """``summary(labels=...)`` on the result of ``evaluate(out=...)`` raised TypeError: the
    streamed result's ``summary`` took no ``labels`` (mypy: incompatible override)."""
    samples = [
        Sample(f"q{i}", ["c"], answer="the cat sat" if i % 2 == 0 else "a dog ran", reference="the cat sat", id=f"s{i}")
        for i in range(24)
    ]
    # token_f1 is 1 on the even samples, 0 on the odd ones; people pass only every fourth sample
    labels = [Label(f"s{i}", "ann", "token_f1", 1.0 if i % 4 == 0 else 0.0, scale="0-1") for i in range(12)]
    streamed = rm.evaluate(samples, ["token_f1"], out=tmp_path / "run.jsonl", progress=False)
    assert isinstance(streamed, StreamedResult)
    row = streamed.summary(labels=labels)["token_f1"]
    in_memory = rm.evaluate(samples, ["token_f1"], progress=False)
    assert row == in_memory.summary(labels=labels)["token_f1"]
    judged = [1.0 if i % 2 == 0 else 0.0 for i in range(24)]
    expected = ppi_mean([lb.value for lb in labels], judged[:12], judged[12:])
    assert row["human_n"] == 12 and row["human_scale"] == "0-1"
    assert row["human_mean"] == pytest.approx(expected.mean) and row["human_ci"] == pytest.approx(list(expected.ci))
    assert row["mean"] == 0.5 and row["human_mean"] < 0.5  # people are stricter than the metric
    assert "human_mean" not in streamed.summary()["token_f1"]
