"""Judge task contracts: schemas, and ``validate`` of verify_claims (per-chunk evidence) and
generate_questions (the n = 0 convention)."""

from __future__ import annotations

import copy

import pytest

from ragmeter.judges.tasks import COMBINED_TASKS, TASKS, InvalidOutput, get_task

VERIFY = get_task("verify_claims")
INPUTS = {
    "claims": ["Paris is the capital of France.", "Paris has 2.1 million people.", "Paris is old."],
    "chunks": ["Paris is the capital of France.", "The capital, Paris, has 2.1 million inhabitants."],
}


def verdict(claim, verdict, evidence, reason="r"):
    return {
        "claim": claim,
        "verdict": verdict,
        "evidence": [{"chunk": c, "quote": q} for c, q in evidence],
        "reason": reason,
    }


def answer(*verdicts):
    return {"verdicts": list(verdicts)}


GOOD = answer(
    verdict(
        0, "supported", [(1, "The capital, Paris"), (0, " Paris is the capital of France "), (1, "later duplicate")]
    ),
    verdict(1, "supported", [(1, "has 2.1 million inhabitants")]),
    verdict(2, "not_found", []),
)


def _objects(schema):
    """Every object schema inside ``schema``."""
    if schema.get("type") == "object":
        yield schema
        for p in schema["properties"].values():
            yield from _objects(p)
    elif schema.get("type") == "array":
        yield from _objects(schema["items"])


@pytest.mark.parametrize("name", sorted(TASKS) + sorted(COMBINED_TASKS))
def test_schemas_are_strict_json_schema_compatible(name):
    for obj in _objects(get_task(name).schema):
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])


def test_verify_claims_schema_and_prompt():
    assert VERIFY.version == 2
    item = VERIFY.schema["properties"]["verdicts"]["items"]
    assert list(item["properties"]) == ["claim", "verdict", "evidence", "reason"]
    assert item["properties"]["evidence"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"chunk": {"type": "integer"}, "quote": {"type": "string"}},
            "required": ["chunk", "quote"],
            "additionalProperties": False,
        },
    }
    assert "'evidence' every chunk that supports the claim on its own" in VERIFY.system
    assert "shortest verbatim span of THAT chunk" in VERIFY.system
    assert "for 'contradicted' list the chunks that contradict it" in VERIFY.system


def test_verify_claims_normalises_evidence():
    out = VERIFY.validate(INPUTS, copy.deepcopy(GOOD))
    v0, v1, v2 = out["verdicts"]
    # duplicates merged (first quote kept), sorted by chunk, quotes stripped; derived chunks / quote
    assert v0 == {
        "claim": 0,
        "verdict": "supported",
        "evidence": [
            {"chunk": 0, "quote": "Paris is the capital of France"},
            {"chunk": 1, "quote": "The capital, Paris"},
        ],
        "chunks": [0, 1],
        "quote": "Paris is the capital of France",
        "reason": "r",
    }
    assert v1["chunks"] == [1] and v1["quote"] == "has 2.1 million inhabitants"
    assert v2 == {"claim": 2, "verdict": "not_found", "evidence": [], "chunks": [], "quote": "", "reason": "r"}
    assert VERIFY.validate(INPUTS, out) == out  # idempotent: a normalised answer validates to itself


def test_verify_claims_lenient_where_harmless():
    # verdicts in any order, a missing reason, and evidence on a not_found verdict (dropped)
    out = VERIFY.validate(
        INPUTS,
        answer(
            {"claim": 2, "verdict": "not_found", "evidence": [{"chunk": 0, "quote": "x"}]},
            verdict(1, "contradicted", [(1, "2.1 million")]),
            verdict(0, "supported", [(0, "")]),
        ),
    )["verdicts"]
    assert [v["claim"] for v in out] == [0, 1, 2]
    assert out[0]["evidence"] == [{"chunk": 0, "quote": ""}] and out[0]["quote"] == ""  # an empty quote is a string
    assert out[1]["chunks"] == [1] and out[1]["quote"] == "2.1 million"
    assert out[2]["evidence"] == [] and out[2]["chunks"] == [] and out[2]["reason"] == ""


def _rejects(mutate, *fragments):
    bad = copy.deepcopy(GOOD)
    mutate(bad["verdicts"])
    with pytest.raises(InvalidOutput) as info:
        VERIFY.validate(INPUTS, bad)
    for f in fragments:
        assert f in str(info.value), str(info.value)
    return str(info.value)


def test_verify_claims_rejects_with_actionable_messages():
    def set_(i, key, value):
        return lambda vs: vs[i].__setitem__(key, value)

    def set_ev(i, j, key, value):
        return lambda vs: vs[i]["evidence"][j].__setitem__(key, value)

    _rejects(set_ev(0, 1, "chunk", 5), "claim 0: evidence[1].chunk = 5 is out of range (valid: 0..1)")
    _rejects(set_ev(0, 0, "chunk", -1), "out of range")
    _rejects(set_ev(0, 0, "chunk", "1"), "claim 0: evidence[0].chunk must be an integer")
    _rejects(
        set_(1, "evidence", []),
        "claim 1 is supported: list in 'evidence' at least one chunk that supports it",
        '"quote"',
    )
    _rejects(
        lambda vs: vs[1].update(verdict="contradicted", evidence=[]),
        "claim 1 is contradicted",
        "at least one chunk that contradicts it",
    )
    _rejects(
        set_ev(1, 0, "quote", 42), "claim 1: evidence[0].quote must be a string", "verbatim span of chunk 1", "got 42"
    )
    _rejects(set_ev(1, 0, "quote", None), "quote must be a string")
    _rejects(lambda vs: vs[1]["evidence"][0].pop("quote"), "quote must be a string")
    _rejects(lambda vs: vs[1]["evidence"][0].pop("chunk"), "claim 1: evidence[0] has no 'chunk' field")
    _rejects(set_(1, "evidence", [1]), "claim 1: evidence[0] must be an object", '"chunk"', '"quote"')
    _rejects(set_(1, "evidence", {"chunk": 1, "quote": "x"}), "claim 1: evidence must be a list")
    _rejects(set_(2, "verdict", "maybe"), "claim 2: verdict must be one of")
    # the version-1 form (chunks + one quote) is turned down with the new form spelled out
    msg = _rejects(
        lambda vs: vs[0].pop("evidence") and vs[0].update(chunks=[0], quote="q"),
        "claim 0 has no 'evidence' list",
        "[] for 'not_found'",
    )
    assert '"chunk": <chunk index>' in msg


# --------------------------------------------------------------------------- generate_questions


QUESTIONS = get_task("generate_questions")
PARTS = [{"text": "when", "covered": True}]


def test_generate_questions_n_zero_means_no_questions():
    # judges that cannot write questions (generates_questions = False) are asked with n = 0
    inputs = {"question": "When?", "answer": "In 1889.", "n": 0}
    out = QUESTIONS.validate(inputs, {"questions": [], "noncommittal": False, "parts": PARTS})
    assert out == {"questions": [], "noncommittal": False, "parts": PARTS}
    with pytest.raises(InvalidOutput, match=r"n is 0: write no question \('questions' must be \[\]\), got 1"):
        QUESTIONS.validate(inputs, {"questions": ["When was it built?"], "noncommittal": False, "parts": PARTS})
    with pytest.raises(InvalidOutput, match="at least one part"):  # parts are still required with n = 0
        QUESTIONS.validate(inputs, {"questions": [], "noncommittal": False, "parts": []})


def test_generate_questions_exactly_n():
    inputs = {"question": "When?", "answer": "In 1889.", "n": 2}
    out = QUESTIONS.validate(inputs, {"questions": ["When?", " Which year? "], "noncommittal": False, "parts": PARTS})
    assert out["questions"] == ["When?", "Which year?"]
    with pytest.raises(InvalidOutput, match="expected exactly 2 questions, got 0"):
        QUESTIONS.validate(inputs, {"questions": [], "noncommittal": False, "parts": PARTS})
