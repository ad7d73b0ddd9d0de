"""The dashboard in a real browser: headless Chromium (system packages) loads a page rendered from
two real offline-judge runs of examples/rag_samples.jsonl over file://, and the test checks the
DOM: summary numbers, trend points, a drill-down with its claims, filters and sorting, no console
error (a Content-Security-Policy violation would be one). Screenshots go to
``$RAGMETER_SCREENSHOT_DIR`` (else the test's temp dir). Skipped without Chromium unless
``RAGMETER_REQUIRE_BROWSER=1``."""

from __future__ import annotations

import pytest

import ragmeter as rm
from helpers import ROOT
from helpers.browser import console_errors, full_page, screenshot
from ragmeter.dashboard import RunEntry, SampleEntry, render
from ragmeter.dashboard.model import Verdicts, sample_views

pytestmark = pytest.mark.slow

EXAMPLES = ROOT / "examples" / "rag_samples.jsonl"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """Two runs of the examples (the second with captured latencies and tags), rendered to a file."""
    before = rm.evaluate(str(EXAMPLES), judge="offline", progress=False)
    samples = rm.load_samples(EXAMPLES)
    for i, s in enumerate(samples):
        s.metadata["latency"] = {"retrieval_s": 0.2, "generation_s": 1.0 + 0.4 * i, "total_s": 1.2 + 0.4 * i}
        s.metadata["tags"] = ["even" if i % 2 == 0 else "odd"]
    after = rm.evaluate(samples, judge="offline", progress=False)
    runs = [RunEntry.from_result(before, 1, label="baseline"), RunEntry.from_result(after, 2, label="candidate")]
    entries = SampleEntry.from_result(after, 2)
    path = tmp_path_factory.mktemp("dashboard") / "dashboard.html"
    # two annotators' faithfulness ratings: ann follows the judge, bob is one point harsher on every third
    from ragmeter.labels import Label, agreement_report

    labels = []
    for i, r in enumerate(after):
        rating = 1 + round(4 * r["faithfulness"].value)
        labels += [
            Label(r.sample.id, "ann", "faithfulness", rating),
            Label(r.sample.id, "bob", "faithfulness", max(1, rating - (i % 3 == 0))),
        ]
    agreement = agreement_report(labels, after, n_boot=100)
    path.write_text(render(runs, entries, title="ragmeter dashboard test", agreement=agreement), encoding="utf-8")
    return {
        "path": path,
        "after": after,
        "runs": runs,
        "views": sample_views(entries, Verdicts()),
        "agreement": agreement,
    }


def _visible_ids(browser) -> list[str]:
    from selenium.webdriver.common.by import By

    return [
        el.get_attribute("id")
        for el in browser.find_elements(By.CSS_SELECTOR, "#rows details.sample")
        if el.is_displayed()
    ]


def _reset(browser, total: int) -> None:
    """Click the filters' reset: the form clears, then the script re-applies the (empty) filters in
    a timeout of its own; wait until the counter shows every sample again (a slow machine may take
    a moment)."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.find_element("id", "f-reset").click()
    WebDriverWait(browser, 10).until(lambda b: b.find_element("id", "shown").text == str(total))


def _select(browser, element_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", element_id)).select_by_value(value)


def test_dashboard_in_chromium(browser, page, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(page["path"].as_uri())
    assert "js" in browser.find_element(By.TAG_NAME, "html").get_attribute("class")  # the script ran
    after = page["after"]

    # summary: every number equals result.summary() (the latest run), plus response_time
    summary = page["runs"][-1].summary
    assert summary["faithfulness"] == after.summary()["faithfulness"]
    for metric, row in summary.items():
        tr = browser.find_element(By.CSS_SELECTOR, f'#summary-table tr[data-metric="{metric}"]')
        for stat in ("count", "mean", "median", "std", "min", "max", "errors", "n/a"):
            text = tr.find_element(By.CSS_SELECTOR, f'td[data-stat="{stat}"]').text
            value = row[stat]
            assert text == (f"{value:.4f}" if isinstance(value, float) else str(value)), (metric, stat)
    assert "response_time" in summary and summary["response_time"]["count"] == len(after)

    # human labels: agreement and the judge against the annotators, as agreement_report computed them
    labels = browser.find_element(By.ID, "labels")
    row = labels.find_element(By.CSS_SELECTOR, 'tr[data-criterion="faithfulness"]')
    expected = page["agreement"]["faithfulness"]
    cells = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:3] == ["faithfulness", str(len(after)), "2"] and cells[3].startswith(
        f'{expected["alpha"]["alpha"]:.3f}'
    )
    assert f'Spearman {expected["judge"]["spearman"]:.3f}' in cells[5] and labels.is_displayed()
    browser.execute_script("arguments[0].scrollIntoView()", labels)
    assert screenshot(browser, "dashboard-labels.png", tmp_path).stat().st_size > 0

    # trends: one chart per metric, one point per run; then the response time p50 and p95 in seconds
    every = browser.find_elements(By.CSS_SELECTOR, "#trends svg.trend")
    charts = [c for c in every if not c.get_attribute("data-metric").startswith("response_time_p")]
    assert len(charts) == len(summary)
    assert [c.get_attribute("data-metric") for c in every[len(charts) :]] == [
        "response_time_p50_s",
        "response_time_p95_s",
    ]
    assert {
        len(c.find_elements(By.CSS_SELECTOR, "circle"))
        for c in charts
        if c.get_attribute("data-metric") != "response_time"
    } == {2}

    # worst composite first, and every sample listed
    views = sorted(page["views"], key=lambda v: (v.composite is None, v.composite or 0.0, v.index))
    assert _visible_ids(browser) == [f"sample-{v.index}" for v in views]

    # drill-down: open the worst sample; its claims and chunks show
    worst = views[0]
    first = browser.find_element(By.ID, f"sample-{worst.index}")
    first.find_element(By.TAG_NAME, "summary").click()
    assert first.get_attribute("open") is not None
    claims = first.find_elements(By.CSS_SELECTOR, ".drill ol.claims > li.claim")
    expected = worst.scores["faithfulness"].details["claims"]
    assert len(claims) == len(expected) and all(c.is_displayed() for c in claims)
    assert claims[0].text.endswith(expected[0]["claim"]) or expected[0]["claim"] in claims[0].text
    assert len(first.find_elements(By.CSS_SELECTOR, ".drill ol.chunks > li")) == len(worst.result.sample.contexts)
    assert worst.diagnosis.kind in first.find_element(By.CSS_SELECTOR, ".verdict").text
    browser.execute_script("document.querySelector('.list').scrollLeft = 0")
    full_page(browser)
    shot = screenshot(browser, "dashboard.png", tmp_path)
    assert shot.stat().st_size > 10_000

    # filters: metric + label, diagnosis, tag, search; the counter follows
    fails = after.summary()["faithfulness"]["fail"]
    _select(browser, "f-metric", "faithfulness")
    _select(browser, "f-label", "fail")
    assert len(_visible_ids(browser)) == fails == int(browser.find_element(By.ID, "shown").text)
    _reset(browser, len(after))
    assert len(_visible_ids(browser)) == len(after)
    _select(browser, "f-diagnosis", "retrieval")
    retrieval = [v for v in views if v.diagnosis.kind == "retrieval"]
    assert 0 < len(retrieval) < len(views)
    assert _visible_ids(browser) == [f"sample-{v.index}" for v in retrieval]
    _select(browser, "f-diagnosis", "")
    _select(browser, "f-tag", "odd")
    assert len(_visible_ids(browser)) == sum(v.index % 2 == 1 for v in views)
    _select(browser, "f-tag", "")
    browser.find_element(By.ID, "f-search").send_keys("Kubernetes")
    wanted = [f"sample-{v.index}" for v in views if "kubernetes" in (v.id + " " + v.result.sample.question).lower()]
    assert wanted and _visible_ids(browser) == wanted
    _reset(browser, len(after))

    # sorting: by sample id, then the other way; by latency
    def ids():
        return [
            browser.find_element(By.ID, i).find_element(By.CSS_SELECTOR, ".sid").text for i in _visible_ids(browser)
        ]

    button = browser.find_element(By.CSS_SELECTOR, 'button[data-sort="id"]')
    button.click()
    assert ids() == sorted(v.id for v in views) and button.get_attribute("aria-sort") == "ascending"
    button.click()
    assert ids() == sorted((v.id for v in views), reverse=True)
    browser.find_element(By.CSS_SELECTOR, 'button[data-sort="m:response_time"]').click()
    by_latency = sorted(views, key=lambda v: (v.scores["response_time"].value, v.index))
    assert _visible_ids(browser) == [f"sample-{v.index}" for v in by_latency]
    assert console_errors(browser) == []


def test_dashboard_without_javascript(browser, page):
    """With scripts disabled the summary, the charts and the native drill-downs still work; the
    filter controls (which need the script) are hidden."""
    from selenium.webdriver.common.by import By

    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.get(page["path"].as_uri())
        assert "js" not in (browser.find_element(By.TAG_NAME, "html").get_attribute("class") or "")
        table = browser.find_element(By.ID, "summary-table")
        assert table.is_displayed()
        mean = page["runs"][-1].summary["faithfulness"]["mean"]
        assert (
            table.find_element(By.CSS_SELECTOR, 'tr[data-metric="faithfulness"] td[data-stat="mean"]').text
            == f"{mean:.4f}"
        )
        assert all(svg.is_displayed() for svg in browser.find_elements(By.CSS_SELECTOR, "#trends svg.trend"))
        assert not browser.find_element(By.ID, "filters").is_displayed()
        sample = browser.find_element(By.CSS_SELECTOR, "#rows details.sample")
        sample.find_element(By.TAG_NAME, "summary").click()
        assert sample.find_element(By.CSS_SELECTOR, ".drill").is_displayed()
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
