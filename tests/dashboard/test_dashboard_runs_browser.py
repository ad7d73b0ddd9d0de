"""The dashboard's runs in a real browser (issue 38): a SQLite store with runs of two datasets, a
tagged run and inline samples, all with captured response times, rendered by ``render_store`` as
``ragmeter dashboard`` does and opened in headless Chromium over file://. The test checks the DOM:
one trend group per dataset, the runs table, the page's dataset / kind / tag filters (rows and
trend groups follow, the counter too), the response time in seconds in the summary and the
trends, the weakest metric beside each grade, and no console error; it saves a screenshot
(``$RAGMETER_SCREENSHOT_DIR``, else the test's temp dir). Skipped without Chromium unless
``RAGMETER_REQUIRE_BROWSER=1``."""

from __future__ import annotations

import pytest

import ragmeter as rm
from helpers.browser import console_errors, full_page, screenshot
from ragmeter.data import Score
from ragmeter.metrics.scoring import SampleResult
from ragmeter.result import EvaluationResult

pytestmark = pytest.mark.slow


def _run(values: list[tuple[float, float]], latencies: list[float]) -> EvaluationResult:
    """Samples scored on faithfulness and context_recall, with a captured response time each."""
    rows = []
    for i, ((f, c), t) in enumerate(zip(values, latencies)):
        sample = rm.Sample(
            f"question {i}?", ["chunk"], answer="answer", id=f"s{i}", metadata={"latency": {"total_s": t}}
        )
        rows.append(
            SampleResult(
                sample,
                {
                    "faithfulness": Score(
                        "faithfulness", f, label="pass" if f >= 0.85 else "warn" if f >= 0.7 else "fail"
                    ),
                    "context_recall": Score(
                        "context_recall", c, label="pass" if c >= 0.8 else "warn" if c >= 0.6 else "fail"
                    ),
                },
            )
        )
    return EvaluationResult(
        rows,
        ["faithfulness", "context_recall"],
        judge="offline",
        thresholds={"faithfulness": (0.85, 0.7), "context_recall": (0.8, 0.6)},
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    pytest.importorskip("sqlalchemy")
    from ragmeter.dashboard import render_store
    from ragmeter.store import Store

    folder = tmp_path_factory.mktemp("runs")
    with Store(folder / "history.db") as store:
        store.record_run(_run([(0.9, 1.0), (0.8, 0.0), (0.95, 1.0)], [1.0, 2.0, 3.0]), dataset="faq", tags=["nightly"])
        store.record_run(_run([(0.4, 0.5), (0.6, 0.7), (0.5, 0.9)], [4.0, 6.0, 8.0]), dataset="legal")
        store.record_run(_run([(0.92, 1.0), (0.85, 0.0), (0.9, 0.7)], [1.0, 1.5, 2.0]), dataset="faq")
        store.record_samples(_run([(0.7, 0.6)], [0.5]).results, source="langchain")
        store.record_run(_run([(0.5, 0.6), (0.7, 0.8), (0.65, 0.4)], [5.0, 7.0, 9.0]), dataset="legal")
        path = folder / "dashboard.html"
        path.write_text(render_store(store, title="ragmeter runs test"), encoding="utf-8")
    return path


def _shown(browser, css: str) -> list:
    from selenium.webdriver.common.by import By

    return [el for el in browser.find_elements(By.CSS_SELECTOR, css) if el.is_displayed()]


def test_runs_trends_filters_latency_and_weakest_in_chromium(browser, page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(page.as_uri())
    # one trend group per dataset (inline samples without one are their own), no line across them
    groups = {g.get_attribute("data-series"): g for g in _shown(browser, "#trends .trend-group")}
    assert set(groups) == {"faq", "legal", "inline runs without a dataset"}
    for name in ("faq", "legal"):
        line = groups[name].find_element(By.CSS_SELECTOR, 'svg[data-metric="faithfulness"]')
        assert len(line.find_elements(By.TAG_NAME, "circle")) == 2
    # the response time per run in seconds, next to the metric charts: legal's p95 of 5 / 7 / 9 s is 8.8 s
    p95 = groups["legal"].find_element(By.CSS_SELECTOR, 'svg[data-metric="response_time_p95_s"]')
    titles = [t.get_attribute("textContent") for t in p95.find_elements(By.CSS_SELECTOR, "circle title")]
    assert titles == ["run 2: p95 7.80 s (3 values)", "run 5: p95 8.80 s (3 values)"]
    # the summary is the newest run's (legal, run 5): p50 7.00 s, p95 7 + 0.9 * 2 = 8.80 s
    assert browser.find_element(By.CSS_SELECTOR, '#latency b[data-latency="p50"]').text == "7.00"
    assert browser.find_element(By.CSS_SELECTOR, '#latency b[data-latency="p95"]').text == "8.80"

    # the page's filters: dataset, then kind, then tag; the table, the counter and the groups follow
    rows = lambda: [tr.get_attribute("data-run") for tr in _shown(browser, "#runs-table tbody tr")]  # noqa: E731
    assert rows() == ["5", "4", "3", "2", "1"]
    Select(browser.find_element(By.ID, "r-dataset")).select_by_value("faq")
    assert rows() == ["3", "1"] and browser.find_element(By.ID, "runs-shown").text == "2"
    assert [g.get_attribute("data-series") for g in _shown(browser, "#trends .trend-group")] == ["faq"]
    browser.execute_script("document.getElementById('runs').scrollIntoView()")
    assert screenshot(browser, "dashboard-runs-faq.png", tmp_path).stat().st_size > 5_000
    Select(browser.find_element(By.ID, "r-tag")).select_by_value("nightly")
    assert rows() == ["1"]
    browser.find_element(By.CSS_SELECTOR, "#run-filters button[type=reset]").click()
    Select(browser.find_element(By.ID, "r-kind")).select_by_value("inline")
    assert rows() == ["4"]
    assert [g.get_attribute("data-series") for g in _shown(browser, "#trends .trend-group")] == [
        "inline runs without a dataset"
    ]
    browser.find_element(By.CSS_SELECTOR, "#run-filters button[type=reset]").click()  # applied in a timeout: wait
    WebDriverWait(browser, 10).until(lambda b: b.find_element(By.ID, "runs-shown").text == "5")
    assert len(rows()) == 5 and len(_shown(browser, "#trends .trend-group")) == 3

    # every grade has its weakest metric beside it: the worst sample of run 5 is s2 (context_recall 0.40)
    first = _shown(browser, "#rows details.sample")[0]
    assert first.find_element(By.CSS_SELECTOR, ".score .weakest").text == "context recall 0.40"
    assert all(el.find_elements(By.CSS_SELECTOR, ".score .weakest") for el in _shown(browser, "#rows details.sample"))
    full_page(browser)
    assert screenshot(browser, "dashboard-runs.png", tmp_path).stat().st_size > 20_000
    assert console_errors(browser) == []


def test_incomplete_run_is_marked_in_chromium(browser, tmp_path):
    """A run recorded as it is scored and never finished (a killed ``evaluate --db``) says so in the
    page's header and in the runs table; a finished run does not."""
    pytest.importorskip("sqlalchemy")
    from selenium.webdriver.common.by import By

    from ragmeter.dashboard import render_store
    from ragmeter.store import Store

    with Store(tmp_path / "history.db") as store:
        store.record_run(_run([(0.9, 1.0), (0.8, 0.0)], [1.0, 2.0]), dataset="faq")
        begun = store.begin_run(
            "faq",
            judge="offline",
            metrics=["faithfulness", "context_recall"],
            thresholds={"faithfulness": (0.85, 0.7), "context_recall": (0.8, 0.6)},
        )
        store.add_results(begun, _run([(0.7, 0.6)], [0.5]).results)  # then the process was killed
        assert [i.complete for i in store.runs()] == [False, True]
        path = tmp_path / "dashboard.html"
        path.write_text(render_store(store, title="ragmeter incomplete test"), encoding="utf-8")

    browser.get(path.as_uri())
    header = browser.find_element(By.CSS_SELECTOR, "header .facts")
    badge = header.find_element(By.CSS_SELECTOR, ".badge.incomplete")
    assert badge.text == "incomplete" and "--resume" in badge.get_attribute("title")
    assert "latest: run 2 incomplete" in header.text
    rows = {tr.get_attribute("data-run"): tr for tr in _shown(browser, "#runs-table tbody tr")}
    assert {k: tr.get_attribute("data-complete") for k, tr in rows.items()} == {"2": "false", "1": "true"}
    assert rows["2"].find_element(By.CSS_SELECTOR, "td").text == "run 2 incomplete"
    assert rows["1"].find_elements(By.CSS_SELECTOR, ".badge.incomplete") == []
    # the newest run's summary is of the one sample scored before it stopped
    assert "(run 2, 1 samples)" in browser.find_element(By.CSS_SELECTOR, "#summary h2").text
    browser.execute_script("document.getElementById('runs').scrollIntoView()")
    assert screenshot(browser, "dashboard-incomplete.png", tmp_path).stat().st_size > 5_000
    assert console_errors(browser) == []
