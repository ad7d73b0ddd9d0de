"""JudgeCache: persistence, keys, thread safety, default location, and its use by LLMJudge."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from ragmeter.judges import JudgeError, Usage
from ragmeter.judges.cache import JudgeCache, cache_key, default_cache_path, resolve_cache
from ragmeter.judges.llm import LLMJudge
from ragmeter.judges.tasks import TASKS
from ragmeter.judges.transport import CallableTransport, Reply


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "default-cache"))


def run(coro):
    return asyncio.run(coro)


def scored(score=0.5, prompt=30, completion=10):
    """A transport that answers rate_answer and counts requests."""
    return CallableTransport(
        lambda req: Reply(
            text=json.dumps({"score": score, "reason": "r"}), prompt_tokens=prompt, completion_tokens=completion
        ),
        backend="fake",
        model="m1",
    )


def test_put_get_roundtrip_and_persistence(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    assert cache.get("k") is None
    cache.put(
        "k",
        judge="fake:m",
        task="rate_answer",
        output={"score": 1.0, "reason": "é"},
        usage=Usage(calls=2, prompt_tokens=5).to_dict(),
        note="a note",
    )
    hit = cache.get("k")
    assert hit["output"] == {"score": 1.0, "reason": "é"} and hit["note"] == "a note"
    assert Usage.from_dict(hit["usage"]).calls == 2
    cache.close()
    again = JudgeCache(path)  # a new process would see the same
    assert again.get("k")["task"] == "rate_answer"
    assert len(again) == 1
    assert again.stats()["answers"] == {"fake:m": 1}


def test_directory_path_and_default_location(tmp_path, monkeypatch):
    cache = JudgeCache(tmp_path)
    assert cache.path == tmp_path / "judge-cache.sqlite"
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_path() == tmp_path / "env" / "judge-cache.sqlite"
    assert JudgeCache().path == tmp_path / "env" / "judge-cache.sqlite"
    monkeypatch.delenv("RAGMETER_CACHE_DIR")
    assert default_cache_path() == Path.home() / ".cache" / "ragmeter" / "judge-cache.sqlite"


def test_resolve_cache(tmp_path):
    assert resolve_cache(False) is None
    inst = JudgeCache(tmp_path / "x.sqlite")
    assert resolve_cache(inst) is inst
    a, b = resolve_cache(tmp_path / "y.sqlite"), resolve_cache(str(tmp_path / "y.sqlite"))
    assert a is b  # one shared instance per path
    assert resolve_cache(None).path.parent == tmp_path / "default-cache"
    with pytest.raises(TypeError):
        resolve_cache(42)


def test_cache_key_is_canonical():
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})


def test_vectors_roundtrip_exact(tmp_path):
    cache = JudgeCache(tmp_path)
    v = np.random.default_rng(0).normal(size=(3, 7))
    cache.put_vectors("emb:m", [("k0", v[0]), ("k1", v[1])])
    got = cache.get_vectors(["k0", "k1", "k2"])
    assert set(got) == {"k0", "k1"} and np.array_equal(got["k0"], v[0])
    assert cache.stats()["vectors"] == 2


def test_clear(tmp_path):
    cache = JudgeCache(tmp_path)
    for i, judge in enumerate(["a", "a", "b"]):
        cache.put(f"k{i}", judge=judge, task="t", output={}, usage={})
    assert cache.clear("a") == 2 and len(cache) == 1
    assert cache.clear() == 1 and len(cache) == 0


def test_thread_safe_under_concurrent_use(tmp_path):
    cache = JudgeCache(tmp_path)
    other = JudgeCache(tmp_path)  # a second connection to the same file
    errors = []

    def worker(k):
        try:
            for i in range(50):
                c = cache if i % 2 else other
                c.put(f"{k}-{i}", judge="j", task="t", output={"i": i}, usage={"calls": 1})
                assert c.get(f"{k}-{i}")["output"] == {"i": i}
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(cache) == 400


# --------------------------------------------------------------------------- through LLMJudge


def test_rerun_costs_zero_calls(tmp_path):
    transport = scored()
    judge = LLMJudge(transport, cache=tmp_path)
    inputs = [{"question": f"q{i}", "answer": "a"} for i in range(3)]

    async def dataset():
        return [await judge.run("rate_answer", x) for x in inputs]

    first = run(dataset())
    second = run(dataset())  # another event loop, same judge
    assert len(transport.requests) == 3
    assert [r.output for r in first] == [r.output for r in second]
    assert all(r.usage == Usage(cached=1) for r in second)
    assert all(r.usage.calls == 1 and r.usage.prompt_tokens == 30 for r in first)
    third = run(LLMJudge(scored(), cache=tmp_path).run("rate_answer", inputs[0]))  # a new judge, same cache
    assert third.usage.cached == 1


def test_key_includes_model_task_version_inputs_and_params(tmp_path):
    cache = JudgeCache(tmp_path)
    spec = TASKS["rate_answer"]
    judge = LLMJudge(scored(), cache=cache)
    inputs = {"question": "q", "answer": "a"}
    base = judge.cache_key(spec, inputs)
    assert base == judge.cache_key(spec, dict(reversed(list(inputs.items()))))
    assert base != judge.cache_key(spec, {"question": "q", "answer": "b"})
    assert base != judge.cache_key(dataclasses.replace(spec, version=spec.version + 1), inputs)
    assert base != judge.cache_key(dataclasses.replace(spec, system=spec.system + " Be strict."), inputs)
    other_model = CallableTransport(lambda r: {}, backend="fake", model="m2")
    assert base != LLMJudge(other_model, cache=cache).cache_key(spec, inputs)
    other_backend = CallableTransport(lambda r: {}, backend="other", model="m1")
    assert base != LLMJudge(other_backend, cache=cache).cache_key(spec, inputs)
    assert base != LLMJudge(scored(), cache=cache, temperature=0.5).cache_key(spec, inputs)
    # max_tokens is not part of the key (it only changes whether an answer is cut off)
    assert base == LLMJudge(scored(), cache=cache, max_tokens=99).cache_key(spec, inputs)


def test_failures_are_not_cached(tmp_path):
    bad = CallableTransport(lambda req: {"score": 7, "reason": "r"}, backend="fake", model="m1")
    judge = LLMJudge(bad, cache=tmp_path, max_attempts=2)
    with pytest.raises(JudgeError):
        run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert len(judge.cache) == 0
    good = LLMJudge(scored(), cache=tmp_path)
    assert run(good.run("rate_answer", {"question": "q", "answer": "a"})).usage.calls == 1


def test_cache_false_and_default(tmp_path):
    transport = scored()
    judge = LLMJudge(transport, cache=False)
    run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert judge.cache is None and len(transport.requests) == 2
    default = LLMJudge(scored())
    assert default.cache.path == tmp_path / "default-cache" / "judge-cache.sqlite"


def test_cache_shared_by_threads(tmp_path):
    transport = scored()
    judge = LLMJudge(transport, cache=tmp_path)
    errors = []

    def worker(k):
        try:
            for i in range(5):
                asyncio.run(judge.run("rate_answer", {"question": f"q{i}", "answer": "a"}))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(judge.cache) == 5
    assert 5 <= len(transport.requests) <= 20  # concurrent first askers may both miss; never wrong


def test_broken_cache_file_does_not_stop_judging(tmp_path):
    path = tmp_path / "broken.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    transport = scored()
    judge = LLMJudge(transport, cache=path)
    res = run(judge.run("rate_answer", {"question": "q", "answer": "a"}))
    assert res.output["score"] == 0.5 and res.usage.calls == 1
