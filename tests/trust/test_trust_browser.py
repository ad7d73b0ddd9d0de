"""The Trust panel in headless Chromium: the dashboard of a store holding a run, its trust card
and two judges' anchor results (``ragmeter dashboard``), and the stand-alone card page (``ragmeter
trust --out card.html``). The DOM shows the card's numbers, the fitness rows with their rules,
the worst disagreements and the drift; no console error (a CSP violation would be one).
Screenshots go to ``$RAGMETER_SCREENSHOT_DIR`` (else the test's temp dir)."""

from __future__ import annotations

import pytest
from test_anchors import lexical, write_anchors
from test_trust_card import synthetic

from helpers.browser import console_errors, full_page, screenshot
from ragmeter.cli import main
from ragmeter.store import Store
from ragmeter.trust import check_anchors

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trust")
    run, labels, _, _ = synthetic(n_samples=240, n_labeled=150, noise=0.1)
    strict = lexical(0.99)
    for r in run:  # the run was judged by the stricter judge, the second checked on the anchors
        r["faithfulness"].fingerprint = strict.fingerprint.id
    db = str(folder / "history.db")
    anchors = write_anchors(folder / "anchors.jsonl")
    with Store(db) as store:
        run_id = store.record_run(run, dataset="synthetic")
        store.record_labels(labels)
        check_anchors(anchors, lexical(), store=store, n_boot=200)
        check_anchors(anchors, strict, store=store, n_boot=200)
    assert main(["trust", str(run_id), "--db", db, "--bootstrap", "300", "--out", str(folder / "card.html")]) == 0
    assert main(["dashboard", "--db", db, "--out", str(folder / "dashboard.html")]) == 0
    with Store(db) as store:
        card = store.trust_card(run_id)
    return {"dashboard": folder / "dashboard.html", "card_page": folder / "card.html", "card": card}


def _check_panel(browser, card) -> None:
    from selenium.webdriver.common.by import By

    m = card["metrics"]["faithfulness"]
    panel = browser.find_element(By.CSS_SELECTOR, '#trust .trust-metric[data-metric="faithfulness"]')
    assert panel.is_displayed() and panel.get_attribute("data-verdict") == m["verdict"]
    assert f"fit for {m['verdict']}" in panel.find_element(By.CSS_SELECTOR, "h3 .fit-badge").text
    for key in ("auroc", "balanced_accuracy", "kappa", "bias", "ece"):
        cells = panel.find_elements(By.CSS_SELECTOR, f'tr[data-stat="{key}"] td')
        signed = "+" if key == "bias" and m["statistics"][key]["value"] >= 0 else ""
        assert cells[0].text == f"{signed}{m['statistics'][key]['value']:.3f}", key
        low, high = m["statistics"][key]["ci"]
        assert (
            cells[1].text.startswith("[") and f"{abs(low):.3f}" in cells[1].text and f"{abs(high):.3f}" in cells[1].text
        )
    assert "for graded labels" in panel.find_element(By.CSS_SELECTOR, 'tr[data-stat="spearman"]').text
    uses = panel.find_elements(By.CSS_SELECTOR, "table.fitness tbody tr")
    assert [u.get_attribute("data-use") for u in uses] == ["release gate", "trend monitoring", "exploration only"]
    assert "kappa's 95% lower bound >= 0.6 on >= 100 labeled items" in uses[0].text
    assert [u.get_attribute("data-fit") for u in uses] == [str(f["fit"]).lower() for f in m["fitness"]]
    c = m["confusion"]
    assert [panel.find_element(By.CSS_SELECTOR, f'td[data-cell="{k}"]').text for k in ("tp", "fp", "fn", "tn")] == [
        str(c[k]) for k in ("tp", "fp", "fn", "tn")
    ]
    assert panel.find_element(By.CSS_SELECTOR, '[data-ppi="mean"]').text == f"{m['ppi']['mean']:.3f}"
    worst = panel.find_elements(By.CSS_SELECTOR, "ol.worst li")
    assert [w.get_attribute("data-sample") for w in worst] == [r["sample_id"] for r in m["worst"]]
    assert len(panel.find_elements(By.CSS_SELECTOR, "svg.reliability rect.bin")) == len(m["reliability"])


def test_the_dashboard_shows_the_trust_card_and_the_judges_drift(browser, pages, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(pages["dashboard"].as_uri())
    assert "Trust" in [a.text for a in browser.find_elements(By.CSS_SELECTOR, "nav a")]
    _check_panel(browser, pages["card"])
    drift = browser.find_element(By.CSS_SELECTOR, "#trust .drift")
    assert drift.get_attribute("data-anchor") == "anchors" and "rules: " in drift.find_element(By.TAG_NAME, "h3").text
    shift = drift.find_element(By.CSS_SELECTOR, 'tr[data-metric="faithfulness"] td[data-shift]').text
    assert shift.startswith("-") and float(shift) < 0  # a stricter judge
    browser.find_element(By.CSS_SELECTOR, 'a[href="#trust"]').click()
    full_page(browser)
    assert screenshot(browser, "trust-dashboard.png", tmp_path).stat().st_size > 0
    assert console_errors(browser) == []


def test_the_card_page_stands_alone(browser, pages, tmp_path):
    browser.set_window_size(1400, 1000)  # the dashboard's height before: the page fits itself
    browser.get(pages["card_page"].as_uri())
    _check_panel(browser, pages["card"])
    full_page(browser)
    assert screenshot(browser, "trust-card.png", tmp_path).stat().st_size > 0
    assert console_errors(browser) == []
