"""Specifics: numbers, dates, money, percentages, names and quotes (ragmeter.specifics)."""

import doctest

import pytest

import ragmeter.specifics as specifics_module
import ragmeter.specifics_extraction as extraction_module
from ragmeter.specifics import DateValue, Specific, extract_specifics, find_specific, missing_specifics


def kinds(text):
    return [(s.kind, s.text) for s in extract_specifics(text)]


def one(text, kind=None):
    found = [s for s in extract_specifics(text) if kind is None or s.kind == kind]
    assert found, f"no {kind or 'specific'} in {text!r}"
    return found[0]


def test_doctests():
    results = [doctest.testmod(module) for module in (specifics_module, extraction_module)]
    assert sum(r.failed for r in results) == 0 and sum(r.attempted for r in results) >= 10


@pytest.mark.parametrize(
    "text, kind, value",
    [
        ("It has 1,000 users.", "number", 1000.0),
        ("It has 1000 users.", "number", 1000.0),
        ("It has twenty-five users.", "number", 25.0),
        ("It has two hundred and five users.", "number", 205.0),
        ("About 3.5 million people came.", "number", 3.5e6),
        ("It rose 5%.", "percent", 5.0),
        ("It rose 5 percent.", "percent", 5.0),
        ("It rose 12.5 per cent.", "percent", 12.5),
        ("It costs $0.13.", "money", 0.13),
        ("It costs 13 cents.", "money", 0.13),
        ("Debt is $25 billion.", "money", 25e9),
        ("Debt is 25 billion dollars.", "money", 25e9),
        ("Debt is $3.5m.", "money", 3.5e6),
        ("It costs €40.", "money", 40.0),
    ],
)
def test_numeric_values(text, kind, value):
    s = one(text, kind)
    assert s.value == pytest.approx(value)


@pytest.mark.parametrize(
    "text, value",
    [
        ("It opened in 2021.", DateValue(2021)),
        ("It opened on March 3, 2021.", DateValue(2021, 3, 3)),
        ("It opened on 3 March 2021.", DateValue(2021, 3, 3)),
        ("It opened on 2021-03-03.", DateValue(2021, 3, 3)),
        ("It opened in March 2021.", DateValue(2021, 3)),
        ("Results for Q3 2020 were good.", DateValue(2020, quarter=3)),
        ("In the third quarter of 2020 it grew.", DateValue(2020, quarter=3)),
        ("They meet on Friday.", DateValue(weekday=4)),
        ("They meet at 7 pm.", DateValue(time=19 * 60)),
        ("They meet at 10:30.", DateValue(time=10 * 60 + 30)),
    ],
)
def test_dates(text, value):
    assert one(text, "date").value == value


def test_names_and_quotes():
    text = 'Employees of the European Commission must delete TikTok. East Palestine watched "Metropolis" with Will.'
    names = [s.text for s in extract_specifics(text) if s.kind == "name"]
    assert names == ["European Commission", "TikTok", "East Palestine", "Will"]
    quotes = [s.value for s in extract_specifics(text) if s.kind == "quote"]
    assert quotes == ["metropolis"]
    # sentence-initial capitals are not names unless seen capitalised mid-sentence
    assert not [s for s in extract_specifics("However it rained.") if s.kind == "name"]
    assert [s.text for s in extract_specifics("Maggie left. Ann met Maggie.") if s.kind == "name"] == [
        "Maggie",
        "Maggie",
    ]
    # placeholders and compounds are not names
    assert not [s for s in extract_specifics("It costs $XXXX and uses a P-make-like tool.") if s.kind == "name"]


def test_no_double_counting():
    # the number inside an amount, a percentage or a date is reported once
    assert kinds("Revenue of $5 million rose 7% on March 3, 2021.") == [
        ("money", "$5 million"),
        ("percent", "7%"),
        ("date", "March 3, 2021"),
    ]
    assert kinds("Growth of 4-7% is expected.") == [("percent", "4"), ("percent", "7")]


@pytest.mark.parametrize(
    "claim, text, expected",
    [
        ("It has 1,000 users.", "it has 1000 users", True),
        ("It has 1,000 users.", "one thousand users", True),
        ("It has 1,000 users.", "1,001 users", False),
        ("It rose 5%.", "a 5 percent rise", True),
        ("It rose 5%.", "it rose 5 points", False),
        ("It costs $0.13.", "13 cents each", True),
        ("It costs $0.13.", "$0.15 each", False),
        ("Debt is $25 billion.", "debt of $25.3 billion", True),
        ("Debt is $25 billion.", "debt of $35 billion", False),
        ("It costs €40.", "it costs $40", False),
        ("It opened in 2021.", "It opened on March 3, 2021.", True),
        ("It opened on March 3, 2021.", "It opened in 2021.", False),
        ("It opened on March 3, 2021.", "It opened on March 4, 2021.", False),
        ("Results for Q3 2020.", "In the third quarter of 2020.", True),
        ("They meet at 7 pm.", "Let's make it 7.", True),
        ("They met President Biden.", "Joe Biden met them.", True),
        ("They met Joe Biden.", "Joe Smith and Ann Biden", True),
        ("They met Joe Biden.", "Joe Smith met them.", False),
        ("He met Chinese officials.", "China said so.", True),
        ("The U.S. Food & Drug Administration said so.", "the U.S. Food and Drug Administration", True),
        ("We improve GANs here.", "A GAN is trained.", True),
        ('He said "time to go".', "he said it was time to go, then left", True),
        ('He said "time to go".', "he said it was time to leave", False),
        # A hedged round figure: "about" half a step of its last significant digit either way,
        # "over" one step up, "nearly" / "under" one step down; no hedge, no rounding.
        ("It holds about 69,000 fans.", "it holds 69,250 fans", True),
        ("It holds 69,000 fans.", "it holds 69,250 fans", False),
        ("It holds about 65,000 fans.", "it holds 69,250 fans", False),
        ("It holds over 69,000 fans.", "it holds 69,250 fans", True),
        ("It holds over 70,000 fans.", "it holds 69,250 fans", False),
        ("It holds nearly 70,000 fans.", "it holds 69,250 fans", True),
        ("It holds nearly 69,000 fans.", "it holds 69,250 fans", False),
        ("It cost about $5 million.", "it cost $4.6 million", True),
        ("It cost about $5 million.", "it cost $3 million", False),
        # An ordinal in digits is the ordinal in words.
        ("In the 1st quarter.", "in the first quarter", True),
        ("In the 2nd quarter.", "in the first quarter", False),
        ("In the 21st century.", "in the twenty-first century", True),
    ],
)
def test_find_specific(claim, text, expected):
    spec = [s for s in extract_specifics(claim) if s.kind in ("number", "money", "percent", "date", "name", "quote")][0]
    assert find_specific(spec, text) is expected


def test_missing_specifics():
    answer = "Ann Lee joined IBM in 2019 and earns $90,000, up 7%."
    contexts = ["Ann Lee joined IBM in 2018.", "Her salary is $90,000 after a 5% raise."]
    assert [s.text for s in missing_specifics(answer, contexts)] == ["2019", "7%"]
    assert missing_specifics(answer, []) == [s for s in extract_specifics(answer)]
    assert missing_specifics("No specifics here.", ["x"]) == []


def test_specific_is_hashable_and_stable():
    a = extract_specifics("It rose 5% in 2021.")
    b = extract_specifics("It rose 5% in 2021.")
    assert a == b and len({*a}) == 2
    assert all(isinstance(s, Specific) and s.start >= 0 and s.end > s.start for s in a)


def test_type_error():
    with pytest.raises(TypeError):
        extract_specifics(None)  # type: ignore[arg-type]


def test_name_after_a_title_or_an_initial():
    names = [
        s.text
        for s in extract_specifics("The agent called Mr. Smith. Dr. Jane Doe met J. K. Rowling.")
        if s.kind == "name"
    ]
    assert names == ["Smith", "Jane Doe", "J. K. Rowling"]


def test_a_clause_after_a_dash_or_a_bracketed_marker_starts_like_a_sentence():
    """Bill summaries open with "Title - Verb ..." and mark sections "(Sec. 3) Verb ...": the verb
    is capitalised because a clause starts there, not because it is a name."""

    def names(text):
        return [s.text for s in extract_specifics(text) if s.kind == "name"]

    assert names("Rural Broadband Act of 2019 - Directs the Secretary of Agriculture to award grants.") == [
        "Rural Broadband Act",
        "Secretary of Agriculture",
    ]
    assert names("Housing Act - (Sec. 3) Requires the Secretary to report. (Sec. 4) Authorizes funds.") == [
        "Housing Act",
        "Secretary",
    ]
    assert names("Funds for FY2020-FY2024 and FY2025.") == []
    # a name after a dash is still a name when it is capitalised mid-sentence elsewhere, or has two words
    assert names("The winner - Smith - thanked the fans of Smith.") == ["Smith", "Smith"]
    assert names("The winner - John Smith - spoke.") == ["John Smith"]
