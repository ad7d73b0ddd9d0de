"""The judge named on every score (issue 34, item 3): a fingerprint made once per judge, on every
Score, in results files, the store (schema v4, upgraded from v3), reports and traces; compare,
the gate and the pytest plugin say when two runs were judged differently and which field changed."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from dataclasses import replace
from datetime import datetime

import pytest
import sqlalchemy as sa

import ragmeter as rm
import ragmeter.judges.fingerprint as fingerprint_module
from helpers.servers import FakeLLMServer
from ragmeter.cli import main
from ragmeter.judges.fingerprint import CODE_FINGERPRINT, JudgeFingerprint, lookup, task_versions
from ragmeter.judges.offline import OfflineJudge
from ragmeter.judges.offline.settings import DEFAULT_SETTINGS
from ragmeter.judges.openai import OpenAIJudge
from ragmeter.labels import Label
from ragmeter.store import Store, schema
from ragmeter.store.engine import create_engine, database_url

SAMPLES = [
    rm.Sample(
        "Who wrote Dune?",
        [{"id": "a", "text": "Dune is a novel by Frank Herbert, published in 1965."}],
        answer="Frank Herbert wrote Dune.",
        relevant_ids=["a"],
        id="dune",
    ),
    rm.Sample(
        "When was Dune published?",
        [{"id": "b", "text": "Dune was published in 1965."}],
        answer="It was published in 1965.",
        relevant_ids=["b"],
        id="year",
    ),
]


def test_doctests():
    assert doctest.testmod(fingerprint_module).failed == 0


def test_an_llm_judge_is_named_by_backend_model_endpoint_prompts_and_settings_never_credentials():
    secret = "sk-test-0123456789abcdef"
    judge = OpenAIJudge(
        "gpt-4o-mini",
        api_key=secret,
        base_url="https://user:hunter2pass@llm.example:8443/v1?token=qq",
        temperature=0.2,
        seed=7,
        cache=False,
        embedder=None,
    )
    fp = judge.fingerprint
    assert judge.fingerprint is fp  # made once
    d = fp.to_dict()
    assert (d["backend"], d["model"], d["endpoint"], d["temperature"], d["seed"]) == (
        "openai",
        "gpt-4o-mini",
        "compatible https://llm.example:8443",
        0.2,
        7,
    )
    assert d["tasks"] == task_versions() and d["tasks"]["verify_claims"].startswith("2.")  # TaskSpec.version 2
    assert set(d["tasks"]) >= {"extract_claims", "verify_claims", "rate_chunks", "review_context"}
    text = json.dumps(d)
    for leaked in (secret, "hunter2pass", "user:", "token=qq", "/v1"):
        assert leaked not in text
    assert OpenAIJudge("gpt-4o-mini", api_key=secret, cache=False).fingerprint.endpoint == "api.openai.com"
    # another setting, another judge, and the difference names the field
    warmer = OpenAIJudge(
        "gpt-4o-mini",
        api_key=secret,
        base_url="https://llm.example:8443/v1",
        temperature=0.7,
        seed=7,
        cache=False,
        embedder=None,
    ).fingerprint
    assert warmer.id != fp.id and warmer.diff(fp) == ["temperature: 0.2 -> 0.7"]


def test_a_changed_prompt_is_named_by_its_task():
    before = JudgeFingerprint(
        backend="openai", model="m", tasks={"verify_claims": "2.aaaa", "extract_claims": "1.bbbb"}
    )
    after = JudgeFingerprint(backend="openai", model="m", tasks={"verify_claims": "3.cccc", "extract_claims": "1.bbbb"})
    assert after.diff(before) == ["task verify_claims: 2.aaaa -> 3.cccc"]
    # a ragmeter upgrade alone keeps the judge's id: the runs stay comparable, and it is said
    upgraded = replace(before, ragmeter="9.9.9", id="")
    assert upgraded.id == before.id and upgraded.diff(before) == []
    assert upgraded.version_note(before) == f"ragmeter {before.ragmeter} -> 9.9.9"


def test_the_offline_judge_is_named_by_its_rules_and_embedder():
    lexical = OfflineJudge(embeddings=False).fingerprint
    assert (lexical.backend, lexical.endpoint, lexical.embedder) == ("offline", "local", "lexical")
    stricter = OfflineJudge(embeddings=False, settings=replace(DEFAULT_SETTINGS, support_threshold=0.99)).fingerprint
    assert stricter.rules != lexical.rules and [line.split(":")[0] for line in stricter.diff(lexical)] == ["rules"]
    assert stricter.rules.split(".")[0] == lexical.rules.split(".")[0]  # same code, other settings


def test_every_score_carries_its_judge_into_results_files_and_a_fresh_process(tmp_path):
    judge = OfflineJudge(embeddings=False)
    result = rm.evaluate(SAMPLES, metrics=["faithfulness", "mrr"], judge=judge, progress=False)
    for r in result:
        assert r["faithfulness"].fingerprint == judge.fingerprint.id
        assert r["mrr"].fingerprint == CODE_FINGERPRINT.id  # no judge: the code's fingerprint
    assert set(result.judges) == {judge.fingerprint.id, CODE_FINGERPRINT.id}
    assert result.fingerprints("faithfulness") == [judge.fingerprint.id]
    path = tmp_path / "results.jsonl"
    result.save(path)
    header = json.loads(path.read_text().splitlines()[0])
    assert header["judges"][judge.fingerprint.id]["embedder"] == "lexical"
    assert "fingerprint" in json.loads(path.read_text().splitlines()[1])["scores"]["faithfulness"]
    # another process knows nothing of the judge until it reads the file's header
    code = (
        "import sys; from ragmeter.result import EvaluationResult; from ragmeter.judges.fingerprint import lookup;"
        "r = EvaluationResult.load(sys.argv[1]); s = r[0]['faithfulness'];"
        "print(lookup(s.fingerprint).embedder, lookup(s.fingerprint).rules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["lexical", judge.fingerprint.rules]
    md = result.to_markdown()
    assert (
        f"fingerprint {judge.fingerprint.id}: offline, endpoint local" in md
        and f"rules {judge.fingerprint.rules}" in md
    )
    assert f"fingerprint {judge.fingerprint.id}" in result.to_html()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"ragmeter": "results", "metrics": [], "judges": {"x": {"backend": "openai", "seed": "seven"}}})
        + "\n"
    )
    with pytest.raises(ValueError, match=r"judges.x: judge fingerprint field 'seed' must be an integer"):
        rm.EvaluationResult.load(bad)


def test_the_store_keeps_each_judge_once_and_resolves_it_in_another_process(db_url):
    judge = OfflineJudge(embeddings=False)
    result = rm.evaluate(SAMPLES, metrics=["faithfulness", "mrr"], judge=judge, progress=False)
    with Store(db_url) as store:
        first = store.record_run(result)
        store.record_run(result)
        store.record_samples(result.results, source="langchain")
        rows = store.engine.connect().execute(sa.select(schema.judges.c.id)).all()
        assert sorted(i for (i,) in rows) == sorted({judge.fingerprint.id, CODE_FINGERPRINT.id})
    code = (
        "import sys; from ragmeter.store import Store; from ragmeter.judges.fingerprint import lookup;"
        "s = Store(sys.argv[1]); r = s.run(int(sys.argv[2]));"
        "print(r[0]['faithfulness'].fingerprint, lookup(r[0]['faithfulness'].fingerprint).embedder)"
    )
    out = subprocess.run([sys.executable, "-c", code, db_url, str(first)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [judge.fingerprint.id, "lexical"]


def test_a_version_3_database_keeps_its_labels_and_scores(db_url, make_db):
    """v3 -> v4: labels copied (value, source; no answer hash), scores without a fingerprint,
    the same schema as a fresh v4 database."""
    from helpers.store_schema import make_v1, schema_of

    make_v1(db_url)
    engine = create_engine(database_url(db_url))
    with engine.begin() as conn:
        for version, step in ((2, schema.MIGRATIONS[0]), (3, schema.MIGRATIONS[1])):
            step(conn)
            conn.execute(schema.schema_version.insert().values(version=version, applied_at=datetime(2026, 3, 1)))
        v3 = schema._labels_table(sa.MetaData(), "labels", v3=True)
        conn.execute(
            v3.insert(),
            [
                {
                    "sample_id": "s1",
                    "annotator": "ann",
                    "criterion": "faithfulness",
                    "value": 4,
                    "source": "a.json",
                    "created_at": datetime(2026, 3, 2),
                },
                {
                    "sample_id": "s2",
                    "annotator": "ann",
                    "criterion": "overall",
                    "value": None,
                    "source": "a.json",
                    "created_at": datetime(2026, 3, 2),
                },
            ],
        )
    engine.dispose()
    with Store(db_url) as store:
        assert store.labels() == [Label("s1", "ann", "faithfulness", 4), Label("s2", "ann", "overall", None)]
        store.record_labels([Label("s3", "bob", "faithfulness", 0.75, answer_hash="abc")])
        assert store.labels(sample_id="s3") == [Label("s3", "bob", "faithfulness", 0.75, answer_hash="abc")]
        assert [(r.sample.id, r["faithfulness"].value, r["faithfulness"].fingerprint) for r in store.run(1)] == [
            ("s1", 0.75, None),
            ("s2", None, None),
        ]
    fresh = make_db()
    Store(fresh).close()
    assert schema_of(db_url) == schema_of(fresh)


def test_traces_name_the_judge_on_the_carrier_and_each_evaluation_event():
    from ragmeter.tracing.semconv import BASELINE
    from ragmeter.tracing.writer import SpanTarget, carrier_attributes, carrier_events

    judge = OfflineJudge(embeddings=False)
    result = rm.evaluate(SAMPLES[:1], metrics=["faithfulness", "mrr"], judge=judge, progress=False)[0]
    attrs = carrier_attributes(result, SpanTarget(1, 2, "rag"))
    fp = judge.fingerprint
    assert attrs["ragmeter.judge.fingerprint"] == fp.id and attrs["ragmeter.judge.backend"] == "offline"
    assert attrs["ragmeter.judge.rules"] == fp.rules and attrs["ragmeter.judge.embedder"] == "lexical"
    assert attrs["ragmeter.judge.prompts"] == fp.prompts and "ragmeter.judge.model" not in attrs
    events = {e[1]["gen_ai.evaluation.name"]: e[1] for e in carrier_events(result)}
    assert events["faithfulness"][BASELINE.evaluator_id] == fp.id
    assert events["faithfulness"][BASELINE.evaluator_name] == "offline"
    assert events["faithfulness"][BASELINE.evaluator_version] == fp.rules
    assert events["mrr"][BASELINE.evaluator_name] == "code"


def test_an_llm_judges_attributes_carry_no_credentials():
    from ragmeter.tracing.writer import SpanTarget, carrier_attributes

    with FakeLLMServer() as server:
        url = server.openai_url.replace("http://", "http://user:pw-s3cret@")
        judge = OpenAIJudge("gpt-test", api_key="sk-never-shown-0123456789", base_url=url, cache=False, embedder=None)
        result = rm.evaluate(SAMPLES[:1], metrics=["faithfulness"], judge=judge, progress=False)[0]
    assert result["faithfulness"].value == 1.0
    attrs = carrier_attributes(result, SpanTarget(1, 2, "rag"))
    assert attrs["ragmeter.judge.model"] == "gpt-test" and attrs["ragmeter.judge.temperature"] == 0.0
    assert attrs["ragmeter.judge.endpoint"].startswith("compatible http://127.0.0.1:")
    assert not any(secret in str(v) for v in attrs.values() for secret in ("pw-s3cret", "sk-never-shown", "/v1"))


def _runs(tmp_path):
    a = rm.evaluate(SAMPLES, metrics=["faithfulness", "mrr"], judge=OfflineJudge(embeddings=False), progress=False)
    stricter = OfflineJudge(embeddings=False, settings=replace(DEFAULT_SETTINGS, support_threshold=0.99))
    b = rm.evaluate(SAMPLES, metrics=["faithfulness", "mrr"], judge=stricter, progress=False)
    a.save(tmp_path / "a.jsonl")
    b.save(tmp_path / "b.jsonl")
    return a, b


def test_compare_and_the_gate_say_the_runs_were_judged_differently(tmp_path, capsys):
    a, b = _runs(tmp_path)
    cmp = rm.compare(a, b)
    assert list(cmp.judge_changes) == ["faithfulness"]  # mrr needs no judge: the same
    assert cmp.judge_changes["faithfulness"][0].startswith("rules: ")
    assert not cmp.passed and "judged differently (faithfulness: rules: " in cmp.gate()[0]
    assert "JUDGE CHANGED faithfulness: rules: " in cmp.to_text()
    assert rm.compare(a, b, allow_judge_change=True).passed
    assert rm.compare(a, a).judge_changes == {} and rm.compare(a, a).passed
    assert main(["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "FAIL judged differently (faithfulness: rules: " in err and "--allow-judge-change" in err
    assert main(["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--allow-judge-change"]) == 0
    assert "JUDGE CHANGED faithfulness" in capsys.readouterr().out


def test_a_run_written_before_fingerprints_is_not_called_a_change(tmp_path):
    a, b = _runs(tmp_path)
    for r in a:
        for s in r.scores.values():
            s.fingerprint = None
    cmp = rm.compare(a, b)
    assert cmp.judge_changes == {} and cmp.passed
    assert cmp.judge_notes == [
        "judge not recorded for faithfulness, mrr in one run (written before judge "
        "fingerprints): cannot tell whether the judge changed"
    ]


@pytest.mark.slow
def test_the_pytest_plugin_says_when_the_judge_changed_since_the_last_run(pytester):
    test = """
from ragmeter.judges.offline import OfflineJudge
from ragmeter.testing import assert_rag

def test_grounded():
    assert_rag({"question": "Who wrote Dune?", "contexts": ["Dune is by Frank Herbert."],
                "answer": "Frank Herbert wrote Dune.", "id": "dune"}, faithfulness=0.0, judge=JUDGE)
"""
    db = pytester.path / "history.db"
    pytester.makepyfile(test_rag=test.replace("JUDGE", "OfflineJudge(embeddings=False)"))
    first = pytester.runpytest("-p", "ragmeter.pytest_plugin", "--ragmeter-db", str(db))
    first.assert_outcomes(passed=1)
    assert "judge changed" not in first.stdout.str()
    again = pytester.runpytest("-p", "ragmeter.pytest_plugin", "--ragmeter-db", str(db))
    assert "judge changed" not in again.stdout.str()  # same judge, nothing to say
    pytester.makepyfile(
        test_rag=test.replace(
            "JUDGE",
            "OfflineJudge(embeddings=False, settings=__import__("
            "'ragmeter.judges.offline.settings', fromlist=['x']).OfflineSettings("
            "support_threshold=0.99))",
        )
    )
    changed = pytester.runpytest("-p", "ragmeter.pytest_plugin", "--ragmeter-db", str(db))
    changed.stdout.re_match_lines(
        [
            r"recorded run 3 in .*",
            r"judge changed since run 2: faithfulness: rules: \S+ -> \S+ "
            r"\(scores are not comparable with that run's\)",
        ]
    )


def test_lookup_of_an_unknown_id_is_none():
    assert lookup("no-such-id") is None and lookup(None) is None
