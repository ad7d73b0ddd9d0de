"""Judge reliability (issue 13): a cache that cannot open or write, cached answers that fail
validation, a gateway that trickles, an HTML page with status 200, an unusable judge found at
creation, and keys echoed by a gateway kept out of errors and logs. Real SDKs against the local
fake server (``helpers.servers``); nothing is monkeypatched."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import subprocess
import sys

import pytest

import ragmeter as rm
from helpers.servers import FakeLLMServer, Raw, answer, echo_key, html, trickle
from ragmeter.judges import JudgeError, Usage
from ragmeter.judges.cache import JudgeCache
from ragmeter.judges.llm import LLMJudge
from ragmeter.judges.spec import resolve_judge
from ragmeter.judges.transport import CallableTransport, Reply

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

from ragmeter.judges.anthropic import AnthropicJudge, AnthropicTransport  # noqa: E402
from ragmeter.judges.openai import OpenAIJudge, OpenAITransport  # noqa: E402

BACKENDS = ["openai", "anthropic"]
RATE_IN = {"question": "Where is Paris?", "answer": "In France."}
VERIFY_IN = {"claims": ["Paris is in France."], "chunks": ["Paris is the capital of France."]}
KEY = "tok-Zq8pW3xYk2LmN7vB0cD"  # a key no generic pattern knows: only the judge's own redaction hides it


@pytest.fixture(autouse=True)
def _private_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_CACHE_DIR", str(tmp_path / "default-cache"))


async def no_wait(seconds: float) -> None:
    """Backoff without waiting (the retry's delay is not what these tests measure)."""
    await asyncio.sleep(0)


def run(coro):
    return asyncio.run(coro)


def rater(score: float = 0.5) -> CallableTransport:
    """A transport that answers rate_answer with ``score`` and records its requests."""
    return CallableTransport(
        lambda req: Reply(text=json.dumps({"score": score, "reason": "r"})), backend="fake", model="m1"
    )


def make_judge(backend: str, llm_server: FakeLLMServer, **kw) -> LLMJudge:
    kw.setdefault("cache", False)
    kw.setdefault("sleep", no_wait)
    if backend == "openai":
        return OpenAIJudge(
            "gpt-4o-mini", base_url=llm_server.openai_url, api_key=kw.pop("api_key", "test"), embedder=None, **kw
        )
    return AnthropicJudge("claude-haiku-4-5", base_url=llm_server.url, api_key=kw.pop("api_key", "test"), **kw)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# --------------------------------------------------------------------------- 1. cache that cannot open / write


@pytest.mark.parametrize("where", ["/proc/nonexistent/cache", "a-file/cache"])
def test_cache_that_cannot_be_created_warns_once_and_judges(tmp_path, monkeypatch, caplog, where):
    (tmp_path / "a-file").write_text("not a directory")
    monkeypatch.setenv("RAGMETER_CACHE_DIR", where if where.startswith("/") else str(tmp_path / where))
    transport = rater()
    judge = LLMJudge(transport)  # the default cache location
    results = [run(judge.run("rate_answer", {"question": f"q{i}", "answer": "a"})) for i in range(3)]
    assert [r.output["score"] for r in results] == [0.5] * 3 and len(transport.requests) == 3
    assert all(r.usage.calls == 1 for r in results)
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "judge cache" in warned[0] and "without it" in warned[0], warned


def test_cache_write_failures_warn_once_and_continue(tmp_path, caplog):
    cache = JudgeCache(tmp_path / "full.sqlite")
    db = cache._db()
    db.execute(f"PRAGMA max_page_count = {db.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(sqlite3.OperationalError, match="full"):  # fill what is left: a full disk
        for i in range(10_000):
            db.execute("INSERT INTO answers VALUES (?, 'j', 't', '{}', '{}', '', 0)", (f"filler{i}",))
    transport = rater()
    judge = LLMJudge(transport, cache=cache)
    results = [run(judge.run("rate_answer", {"question": f"q{i}", "answer": "a"})) for i in range(3)]
    assert [r.output["score"] for r in results] == [0.5] * 3 and len(transport.requests) == 3
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "could not write" in warned[0] and "full" in warned[0], warned


def test_read_only_cache_serves_hits_and_warns_once_on_write(tmp_path, caplog):
    path = tmp_path / "ro.sqlite"
    run(LLMJudge(rater(0.25), cache=JudgeCache(path)).run("rate_answer", RATE_IN))
    cache = JudgeCache(path)
    cache._db().execute("PRAGMA query_only = ON")  # the file can be read, not written
    transport = rater(0.75)
    judge = LLMJudge(transport, cache=cache)
    assert run(judge.run("rate_answer", RATE_IN)).output["score"] == 0.25  # a hit
    for i in range(3):
        assert run(judge.run("rate_answer", {"question": f"q{i}", "answer": "a"})).output["score"] == 0.75
    assert len(transport.requests) == 3
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "could not write" in warned[0], warned


@pytest.mark.slow
def test_cli_with_unwritable_home_sends_requests_and_scores(llm_server, tmp_path):
    data = tmp_path / "one.jsonl"
    data.write_text(
        json.dumps(
            {
                "question": "Where is Paris?",
                "answer": "Paris is in France.",
                "contexts": ["Paris is the capital of France."],
            }
        )
        + "\n"
    )
    out = tmp_path / "r.json"
    env = {k: v for k, v in os.environ.items() if k != "RAGMETER_CACHE_DIR"}
    env.update(HOME="/proc/nonexistent", OPENAI_API_KEY="sk-x")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragmeter.cli",
            "evaluate",
            str(data),
            "--no-progress",
            "-m",
            "faithfulness,context_recall",
            "--judge",
            f"openai:gpt-4o-mini@{llm_server.openai_url}",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["summary"]["faithfulness"]["mean"] == 1.0
    assert report["usage"]["calls"] == 3 == len(llm_server.chat_requests)  # faithfulness 2 tasks, context recall 1
    assert proc.stderr.count("judge cache") == 1, proc.stderr


# --------------------------------------------------------------------------- 2. cached answers are validated


def _stored(cache: JudgeCache, judge: LLMJudge, task: str, inputs: dict, output: str) -> None:
    """Store ``output`` (raw text) as the cached answer of ``task`` on ``inputs``."""
    from ragmeter.judges.tasks import get_task

    key = judge.cache_key(get_task(task), inputs)
    cache.put(key, judge=judge.name, task=task, output={}, usage={})
    cache._db().execute("UPDATE answers SET output = ? WHERE key = ?", (output, key))


@pytest.mark.parametrize("bad", ['{"score": 0.9, "reas', '{"score": 7, "reason": "r"}', '[1, 2]', '"text"'])
def test_invalid_cached_answer_is_dropped_and_asked_again(tmp_path, caplog, bad):
    cache = JudgeCache(tmp_path / "c.sqlite")
    transport = rater(0.5)
    judge = LLMJudge(transport, cache=cache)
    _stored(cache, judge, "rate_answer", RATE_IN, bad)
    first = run(judge.run("rate_answer", RATE_IN))
    assert first.output["score"] == 0.5 and first.usage.calls == 1 and len(transport.requests) == 1
    second = run(judge.run("rate_answer", RATE_IN))  # the good answer replaced the bad row
    assert second.usage == Usage(cached=1) and second.output == first.output and len(transport.requests) == 1


def test_cached_index_out_of_range_is_asked_again(llm_server, tmp_path):
    cache = JudgeCache(tmp_path / "c.sqlite")
    judge = make_judge("openai", llm_server, cache=cache)
    row = {"verdicts": [{"claim": 5, "verdict": "supported", "evidence": [{"chunk": 9, "quote": "x"}], "reason": "r"}]}
    _stored(cache, judge, "verify_claims", VERIFY_IN, json.dumps(row))
    res = run(judge.run("verify_claims", VERIFY_IN))
    assert res.output["verdicts"][0]["claim"] == 0 and res.usage.calls == 1 and len(llm_server.chat_requests) == 1


def test_cached_answer_of_another_task_is_not_used(tmp_path):
    cache = JudgeCache(tmp_path / "c.sqlite")
    transport = rater(0.5)
    judge = LLMJudge(transport, cache=cache)
    _stored(cache, judge, "rate_answer", RATE_IN, '{"score": 0.9, "reason": "r"}')
    cache._db().execute("UPDATE answers SET task = 'compare_claims'")
    assert run(judge.run("rate_answer", RATE_IN)).output["score"] == 0.5 and len(transport.requests) == 1


def test_corrupt_cache_file_warns_once_per_file(tmp_path, caplog):
    path = tmp_path / "broken.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    transport = rater()
    judge = LLMJudge(transport, cache=path)
    other = LLMJudge(rater(), cache=JudgeCache(path))  # the same file through another cache object
    for i in range(3):
        assert run(judge.run("rate_answer", {"question": f"q{i}", "answer": "a"})).output["score"] == 0.5
        run(other.run("rate_answer", {"question": f"q{i}", "answer": "a"}))
    assert len(transport.requests) == 3
    warned = warnings_of(caplog)
    assert len(warned) == 1 and str(path) in warned[0] and "without it" in warned[0], warned


# --------------------------------------------------------------------------- 6. timeout is a deadline


@pytest.mark.parametrize("backend", BACKENDS)
def test_trickling_gateway_fails_at_the_deadline_then_retries(backend, llm_server):
    llm_server.push(trickle(0.1, answer({"score": 1.0, "reason": "slow"})))  # ~35 s of body at 0.1 s per byte
    judge = make_judge(backend, llm_server, timeout=0.3)
    res = run(judge.run("rate_answer", RATE_IN))
    assert res.usage.calls == 2 and res.usage.retries == 1 and len(llm_server.chat_requests) == 2
    assert res.output["reason"] == "directly answers the question"  # the retry's answer, not the slow one
    first = llm_server.chat_requests[0]  # cut at the deadline: a few of its ~350 bytes, not all (a read timeout
    assert 0 < first.sent_bytes < 50, first.sent_bytes  # that every byte resets would have read them all)


def test_deadline_error_names_the_timeout(llm_server):
    llm_server.push(trickle(0.1))
    judge = make_judge("openai", llm_server, timeout=0.3, max_retries=0)
    with pytest.raises(JudgeError, match=r"no complete answer within timeout=0\.3 s") as info:
        run(judge.run("rate_answer", RATE_IN))
    assert info.value.usage.calls == 1


# --------------------------------------------------------------------------- 8. HTML (non-JSON) with status 200


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "page",
    [html(), Raw("<html>Bad Gateway</html>", content_type="application/json")],
    ids=["text/html", "application/json"],
)
def test_html_page_with_status_200_is_retried(backend, page, llm_server):
    llm_server.push(page)
    res = run(make_judge(backend, llm_server).run("rate_answer", RATE_IN))
    assert res.output["score"] == 1.0 and res.usage.calls == 2 and res.usage.retries == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_html_page_every_time_is_a_named_error(backend, llm_server):
    page = f"<html><body>proxy error for Bearer {KEY} {'x' * 500}</body></html>"
    llm_server.push(*[html(page)] * 3)
    judge = make_judge(backend, llm_server, max_retries=2, api_key=KEY)
    with pytest.raises(JudgeError) as info:
        run(judge.run("rate_answer", RATE_IN))
    msg = str(info.value)
    assert "the server answered HTML/non-JSON with status 200: <html><body>proxy error" in msg
    assert "AttributeError" not in msg and KEY not in msg and "x" * 201 not in msg
    assert info.value.usage.calls == 3


# --------------------------------------------------------------------------- 9. an unusable judge fails fast


def test_missing_key_is_found_when_the_judge_is_resolved(monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY is not set; pass api_key="):
        resolve_judge("openai:gpt-4o-mini")
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY is not set; pass api_key="):
        resolve_judge("anthropic")
    # a base URL that needs no key, or an unknown model, is fine (nothing is sent)
    assert resolve_judge("openai:no-such-model@http://127.0.0.1:9/v1").name == "openai:no-such-model"


def test_check_on_a_judge_object(llm_server):
    for transport in (OpenAITransport("m", api_key=""), AnthropicTransport("m", api_key="")):
        judge = LLMJudge(transport, cache=False)
        with pytest.raises(ValueError, match="no API key"):
            judge.check()
        with pytest.raises(ValueError, match="no API key"):
            resolve_judge(judge)
    ok = make_judge("openai", llm_server)
    ok.check()
    assert resolve_judge(ok) is ok and llm_server.requests == []  # no request is made by a check


# --------------------------------------------------------------------------- 10. upstream error bodies redacted


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("status", [401, 500])
def test_echoed_key_is_redacted_everywhere(backend, status, llm_server, caplog, tmp_path):
    caplog.set_level(logging.DEBUG, logger="ragmeter")
    llm_server.push(*[echo_key(status)] * 3)
    judge = make_judge(backend, llm_server, api_key=KEY, max_retries=2)
    with pytest.raises(JudgeError) as info:
        run(judge.run("rate_answer", RATE_IN))
    err = info.value
    assert "[REDACTED]" in str(err) and KEY not in str(err)
    assert err.__cause__ is None and err.__suppress_context__  # the raw SDK error is not attached
    llm_server.push(*[echo_key(status)] * 30)
    sample = rm.Sample("Where is Paris?", ["Paris is the capital of France."], answer="Paris is in France.")
    result = rm.evaluate([sample], metrics=["faithfulness"], judge=judge, progress=False)
    score = result[0].scores["faithfulness"]
    assert score.status == "error" and "[REDACTED]" in score.error
    for text in (repr(score), result.to_json(), result.to_html(), caplog.text):
        assert KEY not in text


def test_langchain_model_key_is_redacted(llm_server, caplog):
    lc_openai = pytest.importorskip("langchain_openai")
    from ragmeter.judges.langchain import LangChainJudge

    caplog.set_level(logging.DEBUG, logger="ragmeter")
    model = lc_openai.ChatOpenAI(model="gpt-4o-mini", base_url=llm_server.openai_url, api_key=KEY, max_retries=0)
    llm_server.push(echo_key(500), echo_key(401))
    with pytest.raises(JudgeError) as info:
        run(LangChainJudge(model, cache=False, sleep=no_wait).run("rate_answer", RATE_IN))
    assert "[REDACTED]" in str(info.value) and KEY not in str(info.value) and KEY not in caplog.text
