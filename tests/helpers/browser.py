"""A headless Chromium for tests, driven by Selenium: the system's ``chromium`` and
``chromedriver`` (Debian packages ``chromium`` and ``chromium-driver``), never a downloaded one.

Every test gets the ``browser`` fixture (tests/conftest.py registers this module; one
browser per module, a fresh profile directory, no network services) and can save screenshots
with :func:`screenshot`. Binaries: ``$RAGMETER_CHROMIUM`` / ``$RAGMETER_CHROMEDRIVER``, else
``/usr/bin/chromium`` / ``/usr/bin/chromedriver``, else ``chromium`` / ``chromedriver`` on PATH.
Without them (or without selenium) the tests are skipped, unless ``RAGMETER_REQUIRE_BROWSER=1``
(CI sets it), which makes a missing browser a failure. Screenshots go to
``$RAGMETER_SCREENSHOT_DIR`` when set, else to the test's temp directory.

The chromedriver path is passed through a Selenium ``Service`` (Selenium then skips Selenium
Manager, which would otherwise download a driver) and the browser path through the options.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

__all__ = ["REQUIRE", "find_binaries", "start_browser", "browser", "screenshot", "full_page", "console_errors"]

#: CI sets ``RAGMETER_REQUIRE_BROWSER=1``: a missing browser fails the tests instead of skipping them.
REQUIRE = os.environ.get("RAGMETER_REQUIRE_BROWSER") == "1"

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
    "--force-device-scale-factor=1",
)


def _binary(env: str, default: str, name: str) -> str | None:
    for path in (os.environ.get(env), default, shutil.which(name)):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def find_binaries() -> tuple[str, str] | None:
    """(chromium, chromedriver) paths, or None when either is missing."""
    chromium = _binary("RAGMETER_CHROMIUM", "/usr/bin/chromium", "chromium")
    driver = _binary("RAGMETER_CHROMEDRIVER", "/usr/bin/chromedriver", "chromedriver")
    return (chromium, driver) if chromium and driver else None


def _unavailable(msg: str) -> None:
    if REQUIRE:
        pytest.fail(msg + " (RAGMETER_REQUIRE_BROWSER=1)")
    pytest.skip(msg)


def start_browser(profile: Path):
    """A headless Chromium WebDriver with ``profile`` as its fresh user-data directory."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_binaries()
    assert found is not None
    chromium, driver = found
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages, for console_errors()
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A headless Chromium (Selenium WebDriver) for the test module; skipped (or failed, with
    ``RAGMETER_REQUIRE_BROWSER=1``) when selenium, chromium or chromedriver is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        _unavailable("selenium is not installed (pip install selenium)")
    if find_binaries() is None:
        _unavailable(
            "no chromium / chromedriver (apt-get install chromium chromium-driver, or set "
            "RAGMETER_CHROMIUM and RAGMETER_CHROMEDRIVER)"
        )
    driver = start_browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver) -> list[str]:
    """The page's console messages of level SEVERE since the last call (script errors, blocked
    resources, Content-Security-Policy violations)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def full_page(driver, width: int = 1400, max_height: int = 12000) -> None:
    """Resize the window to the page's whole height (capped), so a screenshot shows all of it."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max_height, int(height) + 140))


def screenshot(driver, name: str, tmp_path: Path) -> Path:
    """Save a PNG screenshot as ``name`` in ``$RAGMETER_SCREENSHOT_DIR`` (else ``tmp_path``); returns its path."""
    folder = Path(os.environ.get("RAGMETER_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    assert driver.save_screenshot(str(path)), f"could not save {path}"
    return path
