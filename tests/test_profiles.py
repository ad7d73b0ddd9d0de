"""Domain profiles: legal citations parsed and checked against the chunks, medical advice flagged,
levels and checks set by one word."""

from __future__ import annotations

import pytest

import ragmeter as rm
from ragmeter.profiles import PROFILES, LegalCitations, MedicalAdvice, get_profile, parse_citations

BROWN = ("In Brown v. Board of Education, 347 U.S. 483, 495 (1954), the Court held school segregation "
         "unconstitutional. Id. at 494. See 347 U.S. at 493. Such suits are brought under 42 U.S.C. § 1983. Id.")


def kinds(text: str) -> list[tuple]:
    return [(c.kind, c.text, c.key, c.name, c.pin, c.year) for c in parse_citations(text, profile="legal")]


def test_cases_statutes_pinpoints_short_forms_and_id():
    assert kinds(BROWN) == [
        ("case", "Brown v. Board of Education, 347 U.S. 483, 495 (1954)", "347 U.S. 483",
         "Brown v. Board of Education", "495", "1954"),
        ("id", "Id. at 494", "347 U.S. 483", "Brown v. Board of Education", "494", None),
        ("short", "347 U.S. at 493", "347 U.S. 483", "Brown v. Board of Education", "493", None),
        ("statute", "42 U.S.C. § 1983", "42 U.S.C. § 1983", None, None, None),
        ("id", "Id.", "42 U.S.C. § 1983", None, None, None),  # Id. refers to the citation just before it
    ]
    first = parse_citations(BROWN)[0]
    assert BROWN[first.start:first.end] == first.text and first.fields["page"] == "483"


@pytest.mark.parametrize("text, expected", [
    ("Smith v. Jones, 123 F.3d 456, 460-62 (9th Cir. 1997)", ("case", "123 F.3d 456", "460-62", "1997", "9th Cir.")),
    ("See also Miranda v. Arizona, 384 U.S. 436 (1966).", ("case", "384 U.S. 436", None, "1966", None)),
    ("In re Gault, 387 U.S. 1 (1967)", ("case", "387 U.S. 1", None, "1967", None)),
    ("Roe v. Wade, 410 U. S. 113", ("case", "410 U.S. 113", None, None, None)),  # spacing normalised in the key
    ("Doe v. Roe, 55 F. Supp. 2d 100 (S.D.N.Y. 1999)", ("case", "55 F.Supp.2d 100", None, "1999", "S.D.N.Y.")),
    ("29 C.F.R. § 1910.1200(b) applies.", ("statute", "29 C.F.R. § 1910.1200(b)", None, None, None)),
    ("under Cal. Civ. Code § 1714(a).", ("statute", "Cal. Civ. Code § 1714(a)", None, None, None)),
    ("42 U. S. C. § 2000e", ("statute", "42 U.S.C. § 2000e", None, None, None)),
])
def test_forms(text, expected):
    c = parse_citations(text)[0]
    assert (c.kind, c.key, c.pin, c.year, c.fields.get("court")) == expected


@pytest.mark.parametrize("text", [
    "The Eiffel Tower was built from 1887 to 1889.", "Take 500 mg twice daily.", "See section 3 of the manual.",
    "He got 3 A. 4 B. grades.", "Python 3.12 (2023) added it.",
])
def test_prose_has_no_legal_citations(text):
    assert parse_citations(text) == []


def test_other_profiles_have_no_domain_citations_and_unknown_profiles_raise():
    assert parse_citations(BROWN, profile="default") == [] and parse_citations(BROWN, profile="medical") == []
    with pytest.raises(ValueError, match="unknown profile 'tax'; known: default, legal, medical"):
        parse_citations(BROWN, profile="tax")


def test_an_id_or_short_form_with_nothing_before_it_refers_to_nothing():
    assert [(c.kind, c.key) for c in parse_citations("Id. at 5. And 347 U.S. at 493.")] == [("id", None),
                                                                                              ("short", None)]


def test_legal_citations_checked_against_the_chunks():
    chunks = ["Brown v. Board of Education, 347 U.S. 483 (1954), overruled Plessy.",
              "Section 1983 of title 42 lets people sue state officials."]  # no "42 U.S.C. § 1983" citation
    score = LegalCitations().score(rm.Sample("What did Brown hold?", chunks, answer=BROWN))
    # 5 citations: the case, its Id. and its short form are in chunk 0 (3 found); the statute and its Id. are not
    assert score.value == pytest.approx(3 / 5) and score.label == "fail" and score.judge == "code"
    assert [r["chunks"] for r in score.details["citations"]] == [[0], [0], [0], [], []]
    assert score.details["missing"] == ["42 U.S.C. § 1983", "Id."]
    none = LegalCitations().score(rm.Sample("q?", chunks, answer="Segregation was held unconstitutional."))
    assert none.status == "n/a" and "cites no case or statute" in none.explanation


IBUPROFEN = ["Adults: ibuprofen 400 mg every 6 hours as needed; do not exceed 1200 mg per day."]


@pytest.mark.parametrize("answer, value, flagged", [
    ("Take ibuprofen 400 mg every 6 hours. Consult your doctor if the pain persists.", 1.0, []),
    ("Take ibuprofen 400 mg every 6 hours.", 0.0, ["no safety caveat"]),
    ("Take ibuprofen 800 mg every 4 hours. Ask your pharmacist first.", 0.0, ["no source chunk"]),
    # two advice sentences, one sourced, with a caveat: 1 / 2
    ("Take ibuprofen 400 mg every 6 hours. Double the dose at night. This is not medical advice.", 0.5,
     ["no source chunk"]),
])
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
        "faithfulness": 0.9, "legal_citations": 0.9}
    default = get_profile("default").metrics(["faithfulness"])
    assert [(m.name, m.threshold) for m in default] == [("faithfulness", rm.metrics.get_metric("faithfulness").threshold)]
    assert set(PROFILES) == {"default", "legal", "medical"}


def test_a_profile_runs_in_evaluate_with_the_offline_judge():
    sample = rm.Sample("How much ibuprofen?", IBUPROFEN, answer="Take ibuprofen 400 mg every 6 hours.")
    result = rm.evaluate([sample], metrics=get_profile("medical").metrics(["faithfulness"]), judge="offline",
                         progress=False)
    scores = result[0].scores
    assert scores["medical_advice"].value == 0.0 and scores["faithfulness"].details["threshold"] == 0.95
