"""Domain profiles: legal citations parsed and checked against the chunks, medical advice flagged,
levels and checks set by one word."""

from __future__ import annotations

import pytest

import ragmeter as rm
from helpers import ROOT
from ragmeter.metrics.domain import LegalCitations, MedicalAdvice
from ragmeter.profiles import PROFILES, get_profile, parse_citations

BROWN = (
    "In Brown v. Board of Education, 347 U.S. 483, 495 (1954), the Court held school segregation "
    "unconstitutional. Id. at 494. See 347 U.S. at 493. Such suits are brought under 42 U.S.C. § 1983. Id."
)


def kinds(text: str) -> list[tuple]:
    return [(c.kind, c.text, c.key, c.name, c.pin, c.year) for c in parse_citations(text, profile="legal")]


def test_cases_statutes_pinpoints_short_forms_and_id():
    assert kinds(BROWN) == [
        (
            "case",
            "Brown v. Board of Education, 347 U.S. 483, 495 (1954)",
            "347 U.S. 483",
            "Brown v. Board of Education",
            "495",
            "1954",
        ),
        ("id", "Id. at 494", "347 U.S. 483", "Brown v. Board of Education", "494", None),
        ("short", "347 U.S. at 493", "347 U.S. 483", "Brown v. Board of Education", "493", None),
        ("statute", "42 U.S.C. § 1983", "42 U.S.C. § 1983", None, None, None),
        ("id", "Id.", "42 U.S.C. § 1983", None, None, None),  # Id. refers to the citation just before it
    ]
    first = parse_citations(BROWN)[0]
    assert BROWN[first.start : first.end] == first.text and first.fields["page"] == "483"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Smith v. Jones, 123 F.3d 456, 460-62 (9th Cir. 1997)",
            ("case", "123 F.3d 456", "460-62", "1997", "9th Cir."),
        ),
        ("See also Miranda v. Arizona, 384 U.S. 436 (1966).", ("case", "384 U.S. 436", None, "1966", None)),
        ("In re Gault, 387 U.S. 1 (1967)", ("case", "387 U.S. 1", None, "1967", None)),
        ("Roe v. Wade, 410 U. S. 113", ("case", "410 U.S. 113", None, None, None)),  # spacing normalised in the key
        ("Doe v. Roe, 55 F. Supp. 2d 100 (S.D.N.Y. 1999)", ("case", "55 F.Supp.2d 100", None, "1999", "S.D.N.Y.")),
        ("29 C.F.R. § 1910.1200(b) applies.", ("statute", "29 C.F.R. § 1910.1200(b)", None, None, None)),
        ("under Cal. Civ. Code § 1714(a).", ("statute", "Cal. Civ. Code § 1714(a)", None, None, None)),
        ("42 U. S. C. § 2000e", ("statute", "42 U.S.C. § 2000e", None, None, None)),
    ],
)
def test_forms(text, expected):
    c = parse_citations(text)[0]
    assert (c.kind, c.key, c.pin, c.year, c.fields.get("court")) == expected


@pytest.mark.parametrize(
    "text, name, written",
    [
        # a clause ending in "in" before the first party is not part of the name
        (
            "The Court in Smith v. Jones, 123 F.3d 456 (1997), held it.",
            "Smith v. Jones",
            "Smith v. Jones, 123 F.3d 456 (1997)",
        ),
        # a docket number between the name and the reporter keeps the name
        (
            "Smith v. Jones, No. 96-1234, 123 F.3d 456 (1997).",
            "Smith v. Jones",
            "Smith v. Jones, No. 96-1234, 123 F.3d 456 (1997)",
        ),
        (
            "Smith v. Jones, Docket No. 96-1234, 123 F.3d 456.",
            "Smith v. Jones",
            "Smith v. Jones, Docket No. 96-1234, 123 F.3d 456",
        ),
        # "of", "on" and "the" inside a party stay
        (
            "See Commission on Civil Rights v. City of New York, 12 F.3d 45",
            "Commission on Civil Rights v. City of New York",
            None,
        ),
    ],
)
def test_case_names(text, name, written):
    [c] = parse_citations(text)
    assert c.name == name and c.key in ("123 F.3d 456", "12 F.3d 45")
    assert c.text == (written or text[text.index(name) :]) and text[c.start : c.end] == c.text


@pytest.mark.parametrize(
    "text",
    [
        "The Eiffel Tower was built from 1887 to 1889.",
        "Take 500 mg twice daily.",
        "See section 3 of the manual.",
        "He got 3 A. 4 B. grades.",
        "Python 3.12 (2023) added it.",
    ],
)
def test_prose_has_no_legal_citations(text):
    assert parse_citations(text) == []


def test_other_profiles_have_no_domain_citations_and_unknown_profiles_raise():
    assert parse_citations(BROWN, profile="default") == [] and parse_citations(BROWN, profile="medical") == []
    with pytest.raises(ValueError, match="unknown profile 'tax'; known: default, legal, medical"):
        parse_citations(BROWN, profile="tax")


def test_an_id_or_short_form_with_nothing_before_it_refers_to_nothing():
    assert [(c.kind, c.key) for c in parse_citations("Id. at 5. And 347 U.S. at 493.")] == [
        ("id", None),
        ("short", None),
    ]


def test_legal_citations_checked_against_the_chunks():
    chunks = [
        "Brown v. Board of Education, 347 U.S. 483 (1954), overruled Plessy.",
        "Section 1983 of title 42 lets people sue state officials.",
    ]  # no "42 U.S.C. § 1983" citation
    score = LegalCitations().score(rm.Sample("What did Brown hold?", chunks, answer=BROWN))
    # 5 citations: the case, its Id. and its short form are in chunk 0 (3 found); the statute and its Id. are not
    assert score.value == pytest.approx(3 / 5) and score.label == "fail" and score.judge == "code"
    assert [r["chunks"] for r in score.details["citations"]] == [[0], [0], [0], [], []]
    assert score.details["missing"] == ["42 U.S.C. § 1983", "Id."]
    none = LegalCitations().score(rm.Sample("q?", chunks, answer="Segregation was held unconstitutional."))
    assert none.status == "n/a" and "cites no case or statute" in none.explanation


IBUPROFEN = ["Adults: ibuprofen 400 mg every 6 hours as needed; do not exceed 1,200 mg a day."]


@pytest.mark.parametrize(
    "answer, value, flagged",
    [
        ("Take ibuprofen 400 mg every 6 hours. Consult your doctor if the pain persists.", 1.0, []),
        ("Take ibuprofen 400 mg every 6 hours.", 0.0, ["no safety caveat"]),
        ("Take ibuprofen 800 mg every 4 hours. Ask your pharmacist first.", 0.0, ["no source chunk"]),
        # two advice sentences, one sourced, with a caveat: 1 / 2
        (
            "Take ibuprofen 400 mg every 6 hours. Double the dose at night. This is not medical advice.",
            0.5,
            ["no source chunk"],
        ),
        # a caveat in the dose's own sentence is still a caveat, and its words need no source (issue 38)
        (
            "Take ibuprofen 400 mg every 6 hours, up to 1,200 mg a day; check with your doctor if you have stomach or "
            "kidney problems.",
            1.0,
            [],
        ),
        (
            "Take ibuprofen 400 mg every 6 hours, up to 1,200 mg a day. Check with your doctor if you have stomach or "
            "kidney problems.",
            1.0,
            [],
        ),
        ("Check with your doctor before you take ibuprofen 400 mg every 6 hours.", 1.0, []),
        ("Take ibuprofen 800 mg every 6 hours; check with your doctor first.", 0.0, ["no source chunk"]),
    ],
)
def test_medical_advice_needs_a_source_and_a_caveat(answer, value, flagged):
    score = MedicalAdvice().score(rm.Sample("How much ibuprofen can I take?", IBUPROFEN, answer=answer))
    assert score.value == value
    assert [f.split(" (")[0].split(" for ")[0] for f in score.details["flags"]] == flagged
    assert score.label == ("pass" if value == 1.0 else "fail" if value < 0.5 else "warn")


def test_medical_without_advice_is_not_applicable():
    score = MedicalAdvice().score(rm.Sample("What is ibuprofen?", IBUPROFEN, answer="Ibuprofen is an NSAID."))
    assert score.status == "n/a" and "no dosage or treatment advice" in score.explanation


def test_profiles_set_levels_and_checks_in_one_word():
    medical = {m.name: (m.threshold, m.warn) for m in get_profile("medical").metrics()}
    assert medical["faithfulness"] == (0.95, 0.9) and medical["medical_advice"] == (1.0, 0.5)
    assert medical["answer_relevancy"] == (0.8, 0.6)  # the metric's own levels where the profile sets none
    legal = [m.name for m in get_profile("legal").metrics(["faithfulness", "citation_accuracy", "legal_citations"])]
    assert legal == ["faithfulness", "citation_accuracy", "legal_citations"]  # the check is not added twice
    assert {m.name: m.threshold for m in get_profile("legal").metrics(["faithfulness"])} == {
        "faithfulness": 0.9,
        "legal_citations": 0.9,
    }
    default = get_profile("default").metrics(["faithfulness"])
    assert [(m.name, m.threshold) for m in default] == [
        ("faithfulness", rm.metrics.get_metric("faithfulness").threshold)
    ]
    assert set(PROFILES) == {"default", "legal", "medical"}


def test_a_profile_runs_in_evaluate_with_the_offline_judge():
    sample = rm.Sample("How much ibuprofen?", IBUPROFEN, answer="Take ibuprofen 400 mg every 6 hours.")
    result = rm.evaluate(
        [sample], metrics=get_profile("medical").metrics(["faithfulness"]), judge="offline", progress=False
    )
    scores = result[0].scores
    assert scores["medical_advice"].value == 0.0 and scores["faithfulness"].details["threshold"] == 0.95


def test_profile_checks_are_ordinary_metrics_outside_a_profile(capsys):
    """``metrics=["medical_advice"]`` was "unknown metric" outside a profile (issue 38)."""
    from ragmeter.cli import main
    from ragmeter.metrics import DOMAIN_METRICS, METRIC_NAMES, get_metric, metrics_help

    assert isinstance(get_metric("medical_advice"), MedicalAdvice) and isinstance(
        get_metric("legal_citations"), LegalCitations
    )
    assert set(DOMAIN_METRICS) <= set(METRIC_NAMES) and "medical_advice" in metrics_help()
    assert rm.metrics.MedicalAdvice is MedicalAdvice
    sample = rm.Sample(
        "How much ibuprofen?", IBUPROFEN, answer="Take ibuprofen 400 mg every 6 hours. Ask your pharmacist first."
    )
    result = rm.evaluate([sample], metrics=["medical_advice"], progress=False)
    assert result.metrics == ["medical_advice"] and result[0]["medical_advice"].value == 1.0
    assert result.thresholds["medical_advice"] == (1.0, 0.5) and result.judge == "code"  # no judge needed
    examples = ROOT / "examples" / "rag_samples.jsonl"
    assert main(["evaluate", str(examples), "-m", "legal_citations,medical_advice", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "legal_citations" in out and "medical_advice" in out


# --------------------------------------------------------------------------- profile= in evaluate and the CLI

LEGAL = rm.Sample(
    "What did Brown hold?",
    [
        {"id": "brown", "text": "Brown v. Board of Education, 347 U.S. 483 (1954)."},
        {"id": "other", "text": "Unrelated."},
    ],
    answer="Segregation is unconstitutional: Brown v. Board of Education, 347 U.S. 483 (1954); "
    "suits go under 42 U.S.C. § 1983.",
    relevant_ids=["brown"],
    id="s1",
)


def test_evaluate_profile_sets_levels_adds_checks_and_is_named():
    from ragmeter.report import markdown_report

    result = rm.evaluate([LEGAL], metrics=["mrr", "faithfulness"], judge="offline", profile="legal", progress=False)
    assert result.profile == "legal" and result.metrics[:3] == ["mrr", "faithfulness", "legal_citations"]
    assert result.thresholds["faithfulness"] == (0.9, 0.8) and result.thresholds["legal_citations"] == (0.9, 0.7)
    # the case is in chunk 0, the statute in no chunk: 1 / 2, below the legal warn level 0.7
    score = result[0].scores["legal_citations"]
    assert score.value == 0.5 and score.label == "fail"
    assert result[0].scores["faithfulness"].details["threshold"] == 0.9
    assert "- profile: legal (stricter support" in markdown_report(result)
    plain = rm.evaluate([LEGAL], metrics=["mrr"], progress=False)
    assert plain.profile is None and plain.metrics == ["mrr"] and "- profile:" not in markdown_report(plain)
    with pytest.raises(ValueError, match="unknown profile 'tax'; known: default, legal, medical"):
        rm.evaluate([LEGAL], metrics=["mrr"], profile="tax", progress=False)


def test_the_profile_is_kept_in_results_files_and_the_store(tmp_path):
    from ragmeter.result import EvaluationResult
    from ragmeter.store import Store

    result = rm.evaluate([LEGAL], metrics=["mrr"], profile="medical", progress=False)
    for name in ("r.jsonl", "r.json"):
        path = tmp_path / name
        (result.to_jsonl if name.endswith("l") else result.to_json)(path)
        assert EvaluationResult.load(path).profile == "medical"
    store = Store(tmp_path / "h.db")
    run_id = store.record_run(result, dataset="legal")
    assert store.run(run_id).profile == "medical"
    assert store.run(store.record_run(rm.evaluate([LEGAL], metrics=["mrr"], progress=False))).profile is None


def test_cli_evaluate_profile(tmp_path, capsys):
    import json

    from ragmeter.cli import main

    data = tmp_path / "legal.jsonl"
    data.write_text(json.dumps(LEGAL.to_dict()) + "\n")
    code = main(
        ["evaluate", str(data), "-m", "mrr", "--profile", "legal", "--no-progress", "-o", str(tmp_path / "r.md")]
    )
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("ragmeter: profile legal\n")
    row = next(line.split() for line in out.splitlines() if line.startswith("legal_citations"))
    assert row[1:3] == ["0.5000", "0.5000"]  # mean, median
    assert "- profile: legal" in (tmp_path / "r.md").read_text()
    with pytest.raises(SystemExit):
        main(["evaluate", str(data), "--profile", "tax"])
    assert "invalid choice: 'tax'" in capsys.readouterr().err


# --------------------------------------------------------------------------- relevance bands


@pytest.mark.parametrize(
    "value, profile, band",
    [
        (1.0, "default", "excellent"),
        (0.8, "default", "excellent"),
        (0.7999, "default", "good"),
        (0.5, "default", "good"),
        (0.4999, "default", "poor"),
        (0.0, "default", "poor"),
        (0.9, "legal", "excellent"),
        (0.8999, "legal", "good"),
        (0.7, "medical", "good"),
        (0.6999, "medical", "poor"),
        (None, "default", None),
    ],
)
def test_relevance_bands_at_their_boundaries(value, profile, band):
    from ragmeter.profiles import relevance_band

    assert relevance_band(value, profile=profile) == band


def test_markdown_report_shows_relevance_bands_under_the_runs_profile():
    from ragmeter.metrics import FunctionMetric
    from ragmeter.report import markdown_report

    # a stand-in with the relevance metric's name: values 1.0 and 0.6 -> mean 0.8
    relevancy = FunctionMetric("answer_relevancy", lambda s: s.metadata["v"])
    samples = [
        rm.Sample("q1?", ["c"], answer="a", metadata={"v": 1.0}),
        rm.Sample("q2?", ["c"], answer="a", metadata={"v": 0.6}),
    ]
    report = markdown_report(rm.evaluate(samples, metrics=[relevancy, "exact_match"], progress=False))
    assert (
        "Relevance bands (default: excellent ≥ 0.8, good ≥ 0.5, else poor): answer_relevancy 0.8000 **excellent**"
    ) in report
    legal = markdown_report(rm.evaluate(samples, metrics=[relevancy], profile="legal", progress=False))
    assert "Relevance bands (legal: excellent ≥ 0.9, good ≥ 0.7, else poor): answer_relevancy 0.8000 **good**" in legal
    assert "Relevance bands" not in markdown_report(rm.evaluate(samples, metrics=["exact_match"], progress=False))


def test_profile_doc_examples():
    import doctest

    from ragmeter import profiles

    assert doctest.testmod(profiles).failed == 0
