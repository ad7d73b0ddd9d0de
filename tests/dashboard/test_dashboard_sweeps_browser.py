"""The dashboard's "Sweeps" section in a real browser: a sweep recorded in a SQLite store (judge
cost from the real OpenAI SDK against the fake server), the page rendered by ``render_store`` as
``ragmeter dashboard`` does, opened in headless Chromium over file://; the test checks the DOM
(table of settings with quality and cost, one chart per metric and parameter, point colours by
level, no console error) and saves a screenshot of the section (``$RAGMETER_SCREENSHOT_DIR``,
else the test's temp dir). Skipped without Chromium unless ``RAGMETER_REQUIRE_BROWSER=1``."""

from __future__ import annotations

import pytest

import ragmeter as rm
from helpers.browser import console_errors, full_page, screenshot
from helpers.servers import FakeLLMServer

pytestmark = pytest.mark.slow

CHUNKS = {"a": "Paris is the capital of France.", "b": "France is in Europe.", "c": "Dune is a novel."}
ORDER = ["a", "c", "b"]


def build(top_k: int, chunk_size: int):
    """The first ``top_k`` chunks of ORDER (chunk_size only changes the answer's wording)."""
    return lambda q: (f"Paris is in France ({chunk_size}).", [{"id": i, "text": CHUNKS[i]} for i in ORDER[:top_k]])


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    pytest.importorskip("openai")
    from ragmeter.dashboard import render_store
    from ragmeter.judges.openai import OpenAIJudge
    from ragmeter.metrics.answer import AnswerRelevancy
    from ragmeter.store import Store

    folder = tmp_path_factory.mktemp("sweeps")
    question = rm.Sample("Where is Paris?", relevant_ids=["a", "b"])
    with FakeLLMServer() as server, Store(folder / "history.db") as store:
        store.record_run(rm.evaluate([question], metrics=["mrr"], progress=False), dataset="nightly")
        judge = OpenAIJudge("gpt-4o-mini", base_url=server.openai_url, api_key="test", cache=False)
        table = rm.sweep(
            build,
            {"top_k": [1, 2, 3], "chunk_size": [256, 512]},
            [question],
            metrics=["recall@3", AnswerRelevancy(method="rating")],
            judge=judge,
            progress=False,
            store=store,
        )
        path = folder / "dashboard.html"
        path.write_text(render_store(store), encoding="utf-8")
    return {"path": path, "table": table}


def test_sweeps_section_in_chromium(browser, page, tmp_path):
    from selenium.webdriver.common.by import By

    from ragmeter.judges.pricing import cost_of, price_for

    browser.get(page["path"].as_uri())
    table = page["table"]
    section = browser.find_element(By.ID, "sweeps")
    rows = section.find_elements(By.CSS_SELECTOR, "table.sweep-table tbody tr")
    head = [
        th.get_attribute("textContent") for th in section.find_elements(By.CSS_SELECTOR, "table.sweep-table thead th")
    ]
    assert head == [
        "top_k",
        "chunk_size",
        "recall@3",
        "answer_relevancy",
        "response_time",
        "p50 s",
        "p95 s",
        "samples",
        "not scored",
        "judge calls",
        "tokens",
        "cost (USD)",
    ]
    # retrieved a | a c | a c b, relevant a, b: recall 1/2, 1/2, 2/2 at each chunk size
    cells = [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]
    assert [(c[0], c[1], c[2]) for c in cells] == [
        ("1", "256", "0.5000"),
        ("1", "512", "0.5000"),
        ("2", "256", "0.5000"),
        ("2", "512", "0.5000"),
        ("3", "256", "1.0000"),
        ("3", "512", "1.0000"),
    ]
    # one judge call per setting; the fake server bills 100 prompt + 20 completion tokens: the cost next to quality
    cost = cost_of(price_for("gpt-4o-mini"), 100, 20)
    assert all(c[7:] == ["1", "0", "1", "120", f"${cost:.6f}"] for c in cells)
    # the pipeline's response time in seconds, p50 <= p95, as each setting's result gives it (one question each)
    assert all(float(c[5]) == float(c[6]) == round(r["p50_s"], 3) for c, r in zip(cells, table.rows))
    assert [r["cost_usd"] for r in table.rows] == pytest.approx([cost] * 6)
    # one chart per metric and parameter, each point titled with its mean and coloured by the metric's levels
    charts = section.find_elements(By.CSS_SELECTOR, "figure[data-chart]")
    assert [c.get_attribute("data-chart") for c in charts] == [
        f"{m} vs {p}" for m in ("recall@3", "answer_relevancy", "response_time") for p in ("top_k", "chunk_size")
    ]
    points = charts[0].find_elements(By.CSS_SELECTOR, "circle")
    titles = [p.find_element(By.TAG_NAME, "title").get_attribute("textContent") for p in points]
    assert titles == [
        "top_k=1: mean 0.5000 (2 values)",
        "top_k=2: mean 0.5000 (2 values)",
        "top_k=3: mean 1.0000 (2 values)",
    ]
    assert [p.get_attribute("class") for p in points] == ["pt s-fail", "pt s-fail", "pt s-pass"]  # levels 0.8 / 0.6
    # the sweep's settings are not runs of the trends: the page's summary is the one evaluate run
    assert "One run on this page" in browser.find_element(By.ID, "trends").text
    assert console_errors(browser) == []
    full_page(browser)
    browser.execute_script("arguments[0].scrollIntoView()", section)
    shot = screenshot(browser, "dashboard-sweeps.png", tmp_path)
    section.screenshot(str(shot))
    assert shot.stat().st_size > 0
