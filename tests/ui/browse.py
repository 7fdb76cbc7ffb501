"""Driving the explorer in the browser as a user does: enter a key, go to a page, wait for what
it shows; and the screenshots the README shows (docs/screenshots/)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

# The README's screenshots are rewritten only when asked (`make screenshots`), so a test run
# leaves the work tree clean; otherwise they go to the test data directory, still taken and
# checked.
_DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SCREENSHOTS = (_DOCS if os.environ.get("BRAINSTREAM_WRITE_SCREENSHOTS") else
               Path(__file__).resolve().parents[2] / ".brainstream-test-screenshots")
T = TypeVar("T")


def wait(driver: WebDriver, check: Callable[[WebDriver], T], what: str,
         timeout: float = 30) -> T:
    """Poll the page until `check` answers something truthy."""
    result: T = WebDriverWait(driver, timeout, poll_frequency=0.1).until(check, message=what)
    return result


def css(driver: WebDriver | WebElement, selector: str) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, selector)


def one(driver: WebDriver, selector: str, what: str | None = None) -> WebElement:
    """The first element matching `selector`, once the page shows it."""
    found: list[WebElement] = wait(driver, lambda d: css(d, selector), what or selector)
    return found[0]


def enter_key(driver: WebDriver, base_url: str, key: str) -> None:
    """Open the explorer and use `key` as a user types it in the key form."""
    if not driver.current_url.startswith(base_url + "/ui/"):
        driver.get(base_url + "/ui")
    driver.execute_script("document.getElementById('key-state').textContent = ''")
    field = one(driver, "#api-key")
    field.clear()
    field.send_keys(key)
    one(driver, "#key-form button").click()
    wait(driver, lambda d: "namespace" in one(d, "#key-state").text, "the key's namespaces")


def go(driver: WebDriver, fragment: str) -> None:
    """Go to a page of the explorer (its hash route), as a link would."""
    driver.execute_script("location.hash = arguments[0]", fragment)


def error_code(driver: WebDriver) -> str:
    """The code of the API error the page shows."""
    return str(one(driver, "[data-test=error]", "an error box").get_attribute("data-code"))


def ids(elements: list[WebElement]) -> list[str]:
    return [str(e.get_attribute("data-id")) for e in elements]


def screenshot(driver: WebDriver, name: str, *, max_height: int = 1300) -> None:
    """SCREENSHOTS/<name>.png: the whole page as the browser shows it (the window grown
    to the page's height, at most `max_height`, then put back)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    size = driver.get_window_size()
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(size["width"], min(max(int(height), size["height"]), max_height))
    try:
        assert driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    finally:
        driver.set_window_size(size["width"], size["height"])


def graph_nodes(driver: WebDriver) -> set[str]:
    """The ids of the nodes the graph view draws (cytoscape's own model)."""
    found: Any = driver.execute_script(
        "return window.explorerGraph ? window.explorerGraph.nodes().map(n => n.id()) : []")
    return set(found)
