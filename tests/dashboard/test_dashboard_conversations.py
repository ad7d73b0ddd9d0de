"""The dashboard's "Conversations" section: chat-turn samples grouped by conversation with their
turn scores, worst turn, trend and falling flag (numbers worked by hand), the no-retrieval turn
marked; the HTML checked as text, then the page opened in headless Chromium over file:// (DOM,
no console error, a screenshot of the section in ``$RAGMETER_SCREENSHOT_DIR``, else the test's
temp dir). The browser test is skipped without Chromium unless ``RAGMETER_REQUIRE_BROWSER=1``."""

from __future__ import annotations

import pytest

import ragmeter as rm
from helpers.browser import console_errors, full_page, screenshot
from ragmeter.conversations import NO_RETRIEVAL_KEY
from ragmeter.dashboard import RunEntry, SampleEntry, render, render_result
from ragmeter.metrics.criteria import FunctionMetric

QUALITY = FunctionMetric("quality", lambda s: s.metadata["q"], requires=("answer", "contexts"))


def chat_result() -> rm.EvaluationResult:
    """Conversation "falls" scores 0.9, 0.8, 0.4 over turns 1-3; "holds" 0.7, 0.8, then a turn
    without retrieval (quality not applicable); one sample outside any conversation."""
    samples = []
    for conv, values in (("holds", [0.7, 0.8]), ("falls", [0.9, 0.8, 0.4])):
        for t, v in enumerate(values, start=1):
            samples.append(
                rm.Sample(
                    f"question {t} of {conv}?",
                    [f"context {t}"],
                    answer="an answer",
                    conversation_id=conv,
                    turn=t,
                    metadata={"q": v},
                )
            )
    samples.append(
        rm.Sample(
            "thanks!",
            [],
            answer="You're welcome.",
            conversation_id="holds",
            turn=3,
            metadata={"q": 0.0, NO_RETRIEVAL_KEY: True},
        )
    )
    samples.append(rm.Sample("a question on its own?", ["context"], answer="an answer", metadata={"q": 0.5}))
    return rm.evaluate(samples, metrics=[QUALITY], progress=False)


def test_the_section_by_hand():
    html = render_result(chat_result())
    section = html[html.index('<section id="conversations"') : html.index('<section id="samples"')]
    # falls: slope of (1, 0.9), (2, 0.8), (3, 0.4) = -0.25 per turn < -0.05: falling; worst turn 3 (0.40)
    # holds: slope of (1, 0.7), (2, 0.8) = +0.1 per turn; worst turn 1 (0.70); turn 3 has no value
    assert 'data-metric="quality"' in section and "2 conversations, 1 falling" in section
    falls = section[section.index('data-conversation="falls"') : section.index('data-conversation="holds"')]
    holds = section[section.index('data-conversation="holds"') :]
    assert "-0.250 / turn" in falls and 'data-falling="true"' in falls and 'data-worst="3">turn 3</a> (0.40)' in falls
    assert "+0.100 / turn" in holds and 'data-falling="false"' in holds and 'data-worst="1">turn 1</a> (0.70)' in holds
    assert holds.count('class="turn"') == 3 and holds.count("no retrieval</span>") == 1
    assert "not applicable: the sample has no contexts" in holds  # the n/a turn says why
    assert "a question on its own?" not in section


def test_no_conversations_no_section():
    plain = rm.evaluate([rm.Sample("q?", ["c"], answer="a", metadata={"q": 1.0})], metrics=[QUALITY], progress=False)
    assert 'id="conversations"' not in render_result(plain)


def test_two_runs_keep_their_conversations_apart():
    first, second = chat_result(), chat_result()
    runs = [RunEntry.from_result(first, 1), RunEntry.from_result(second, 2)]
    html = render(runs, SampleEntry.from_result(first, 1) + SampleEntry.from_result(second, 2))
    section = html[html.index('<section id="conversations"') : html.index('<section id="samples"')]
    assert "4 conversations, 2 falling" in section and "<th>run</th>" in section
    assert section.count('data-conversation="falls"') == 2 and section.count('data-turn="3"') == 4


@pytest.mark.slow
def test_conversations_section_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By

    path = tmp_path / "dashboard.html"
    path.write_text(render_result(chat_result(), title="conversations"), encoding="utf-8")
    browser.get(path.as_uri())
    section = browser.find_element(By.ID, "conversations")
    rows = section.find_elements(By.CSS_SELECTOR, "tr.conversation")
    assert [r.get_attribute("data-conversation") for r in rows] == ["falls", "holds"]  # the falling one first
    falls, holds = rows
    turns = falls.find_elements(By.CSS_SELECTOR, "a.turn")
    assert [(t.get_attribute("data-turn"), t.text.strip()) for t in turns] == [
        ("1", "1 0.90"),
        ("2", "2 0.80"),
        ("3", "3 0.40"),
    ]
    assert falls.find_element(By.CSS_SELECTOR, "[data-falling]").text == "falling"
    assert holds.find_element(By.CSS_SELECTOR, "[data-falling]").text == "steady"
    assert holds.find_elements(By.CSS_SELECTOR, "a.turn")[2].text.strip() == "3 - no retrieval"
    # the worst-turn link leads to that sample's row in the sample list
    target = falls.find_element(By.CSS_SELECTOR, "a[data-worst]").get_attribute("href").split("#")[1]
    assert "question 3 of falls?" in browser.find_element(By.ID, target).get_attribute("textContent")
    assert (
        falls.find_element(By.CSS_SELECTOR, "a.turn span.v").value_of_css_property("background-color")
        != "rgba(0, 0, 0, 0)"
    )  # the turn chip is coloured by its level
    falls.find_element(By.CSS_SELECTOR, "details.conv-metrics summary").click()
    cells = [c.text for c in falls.find_elements(By.CSS_SELECTOR, "details.conv-metrics td")]
    assert cells == ["0.90", "0.80", "0.40"]
    assert console_errors(browser) == []
    full_page(browser)
    shot = screenshot(browser, "dashboard-conversations.png", tmp_path)
    section.screenshot(str(shot))
    assert shot.stat().st_size > 5000


def test_with_judged_metrics_the_turn_score_is_the_composite():
    samples = [
        rm.Sample(
            f"When was the tower built? ({t})",
            ["The tower was built from 1887 to 1889."],
            answer="From 1887 to 1889.",
            conversation_id="c",
            turn=t,
        )
        for t in (1, 2)
    ]
    result = rm.evaluate(samples, metrics=["faithfulness"], judge="offline", progress=False)
    html = render_result(result)
    section = html[html.index('<section id="conversations"') : html.index('<section id="samples"')]
    value = result[0].scores["faithfulness"].value  # one judged metric: the composite is its value
    assert 'data-metric="composite"' in section and f'data-value="{value:.4f}"' in section
    assert section.count('<span class="grade g-') == 2
