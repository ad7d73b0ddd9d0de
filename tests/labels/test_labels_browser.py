"""The offline labeling page in headless Chromium: label three tasks with key presses, reload
(the labels stay in local storage), download the labels and read them back with import_labels."""

from __future__ import annotations

import json

from test_labels_tasks import _result

from helpers import wait_for
from helpers.browser import console_errors, screenshot
from ragmeter.labels import Label, answer_hash, export_tasks, import_labels


def keys(browser, *pressed: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    chain = ActionChains(browser)
    for k in pressed:
        chain.send_keys(k)
    chain.perform()


def test_label_three_tasks_with_the_keyboard_and_download_them(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page = export_tasks(_result(), tmp_path / "tasks.html", criteria=["overall", "faithfulness"], n=3)
    text = page.read_text()
    assert "0.95" not in text and "judge_verdicts" not in text  # verdicts hidden
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    browser.get(page.as_uri())
    assert browser.find_element(By.ID, "progress").text == "0 / 3 tasks labelled"
    assert browser.find_element(By.ID, "question").text == "question 5?"  # the queue's first: widest disagreement
    assert "ensemble disagreement" in browser.find_element(By.ID, "reason").text
    browser.find_element(By.ID, "annotator").send_keys("dana")
    browser.find_element(By.TAG_NAME, "body").click()
    assert [e.get_attribute("data-criterion") for e in browser.find_elements(By.CSS_SELECTOR, ".crit")] == [
        "overall",
        "faithfulness",
    ]
    keys(browser, "4", "5")  # task 1: overall 4, faithfulness 5 -> task 2
    assert browser.find_element(By.ID, "question").text == "question 2?"
    keys(browser, "3", "0")  # task 2: overall 3, faithfulness left blank
    assert browser.find_element(By.ID, "progress").text == "2 / 3 tasks labelled"
    keys(browser, "2", Keys.ARROW_LEFT, Keys.ARROW_RIGHT, Keys.ARROW_DOWN, "1")  # task 3: 2, away and back, overall 1
    assert browser.find_element(By.ID, "progress").text == "3 / 3 tasks labelled"

    # local storage keeps the labels and the annotator across a reload. Chromium writes it to its
    # storage service asynchronously: a reload within milliseconds of the last key press, on a
    # loaded machine, once read the storage before that write (0 / 3), so reload until it shows
    def reloaded() -> str:
        browser.refresh()
        return browser.find_element(By.ID, "progress").text

    assert wait_for(lambda: reloaded() == "3 / 3 tasks labelled", timeout=10, interval=0.2)
    assert browser.find_element(By.ID, "annotator").get_attribute("value") == "dana"
    active = browser.find_elements(By.CSS_SELECTOR, ".crit button.on")
    assert [b.text for b in active] == ["2", "1"]  # task 3 shown again, its two ratings
    assert screenshot(browser, "labeling.png", tmp_path).stat().st_size > 0
    browser.find_element(By.ID, "download").click()
    target = downloads / "labels-dana.json"
    assert wait_for(lambda: target.exists() and target.stat().st_size > 0, timeout=10)
    doc = json.loads(target.read_text())
    assert doc["ragmeter"] == "labels" and doc["annotator"] == "dana"
    h = {s: answer_hash(f"answer {s[1:]}") for s in ("s2", "s5", "s6")}  # each label names its answer
    assert sorted(import_labels(target), key=lambda lb: (lb.sample_id, lb.criterion)) == [
        Label("s2", "dana", "faithfulness", None, h["s2"]),
        Label("s2", "dana", "overall", 3, h["s2"]),
        Label("s5", "dana", "faithfulness", 5, h["s5"]),
        Label("s5", "dana", "overall", 4, h["s5"]),
        Label("s6", "dana", "faithfulness", 1, h["s6"]),
        Label("s6", "dana", "overall", 2, h["s6"]),
    ]
    assert console_errors(browser) == []
