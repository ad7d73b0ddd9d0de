"""Sentence, statement and claim splitting (ragmeter.text)."""

import doctest

import pytest

import ragmeter.text as text_module
from ragmeter.text import split_claims, split_sentences, split_statements


def test_doctests():
    result = doctest.testmod(text_module)
    assert result.failed == 0 and result.attempted >= 8


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Dr. Smith arrived at 3.30 p.m. on Monday. He left early! Why?",
            ["Dr. Smith arrived at 3.30 p.m. on Monday.", "He left early!", "Why?"],
        ),
        ("Mr. and Mrs. Smith arrived. Then they left.", ["Mr. and Mrs. Smith arrived.", "Then they left."]),
        ("The U.S. economy grew. The U.K. did not.", ["The U.S. economy grew.", "The U.K. did not."]),
        (
            "It sold for $3.5 million, i.e. a record. Version 2.1 ships soon.",
            ["It sold for $3.5 million, i.e. a record.", "Version 2.1 ships soon."],
        ),
        ("J. R. R. Tolkien wrote it. It is long.", ["J. R. R. Tolkien wrote it.", "It is long."]),
        ('She said "It works." Then she left.', ['She said "It works."', "Then she left."]),
        ('"Why?" he asked. Nobody knew.', ['"Why?" he asked.', "Nobody knew."]),
        ("See Fig. 2 for details. It is clear.", ["See Fig. 2 for details.", "It is clear."]),
        ("Wait... what happened? Nothing.", ["Wait... what happened?", "Nothing."]),
        ("", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_lists_and_lines():
    text = "Steps:\n1. Install it.\n2) Run it.\n- Check it.\n* Done."
    assert split_sentences(text) == ["Steps:", "Install it.", "Run it.", "Check it.", "Done."]
    # inline numbered list
    assert split_sentences("Do this: (1) install it (2) run it.") == ["Do this:", "install it", "run it."]


def test_hard_wrapped_lines_are_joined():
    text = "The committee met on Monday and\ndecided to postpone the vote.\nNext item."
    assert split_sentences(text) == ["The committee met on Monday and decided to postpone the vote.", "Next item."]


def test_markdown_tables_and_code_fences():
    """A table's header row names columns and states nothing; each body row is one unit; a code
    fence breaks the text without being a unit itself."""
    text = (
        "The plans compare as follows:\n\n| Plan | Monthly price | Deductible |\n|:-----|------:|---|\n"
        "| Basic | $185 | $1,500 |\n| premium | $260 | $500 |\n\n```python\nclient.get_plan(\"basic\")\n```\n"
        "the Premium plan has the lower deductible."
    )
    assert split_sentences(text) == [
        "The plans compare as follows:",
        "| Basic | $185 | $1,500 |",
        "| premium | $260 | $500 |",
        'client.get_plan("basic")',
        "the Premium plan has the lower deductible.",
    ]


def test_type_error():
    with pytest.raises(TypeError):
        split_sentences(None)  # type: ignore[arg-type]


def test_split_statements_semicolons():
    assert split_statements("It is fast; it is small. It is free.") == ["It is fast;", "it is small.", "It is free."]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Einstein was born in 1879 and died in 1955.", ["Einstein was born in 1879", "Einstein died in 1955."]),
        ("She was elected in 2010 and re-elected in 2014.", ["She was elected in 2010", "She was re-elected in 2014."]),
        ("Revenue rose 5%, but margins fell.", ["Revenue rose 5%", "Margins fell."]),
        ("Cats and dogs are pets.", ["Cats and dogs are pets."]),
        ("I like apples and oranges and he eats pears.", ["I like apples and oranges", "He eats pears."]),
        (
            "Media, who was released on bail, spoke to reporters.",
            ["Media spoke to reporters.", "Media was released on bail"],
        ),
        (
            "We propose a new loss, which improves accuracy on ImageNet.",
            ["We propose a new loss.", "A new loss improves accuracy on ImageNet"],
        ),
        # Not clause boundaries: a list item with a relative clause, a conjunction inside brackets,
        # two modifiers of one noun (RAGChecker answers).
        (
            "It offers rewards, benefits, and perks that can outweigh the fee.",
            ["It offers rewards, benefits, and perks that can outweigh the fee."],
        ),
        (
            "A roux is a mixture of fat (commonly butter, but also oil) and flour cooked together.",
            ["A roux is a mixture of fat (commonly butter, but also oil) and flour cooked together."],
        ),
        (
            "Cider can also refer to a filtered and pasteurized product.",
            ["Cider can also refer to a filtered and pasteurized product."],
        ),
    ],
)
def test_split_claims(text, expected):
    assert split_claims(text) == expected


def test_split_claims_relative_off_and_lists_kept():
    text = "The plan, which covers theft, fire, and floods, costs $20 a month."
    assert split_claims(text, relative=False) == [text]
    assert split_claims(text) == ["The plan costs $20 a month.", "The plan covers theft, fire, and floods"]
    claims = split_claims("The agent recommended the Silver plan, which covers damage, theft and vandalism.")
    assert claims == ["The agent recommended the Silver plan.", "The Silver plan covers damage, theft and vandalism"]


def test_claims_are_never_empty():
    for text in ["and", ", which", "A and B.", "It is; and.", "X, who."]:
        assert all(c.strip() for c in split_claims(text))
