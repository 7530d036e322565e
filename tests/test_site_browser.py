"""The leaderboard site in a real browser: headless Chromium driven through Selenium, on sites
built from committed results (``results/ptb``, ``results/wikitext-2``) and from a result with a
hostile model name.

They need Debian's ``chromium`` and ``chromium-driver`` packages (``.ci/run`` installs them) and
the ``selenium`` package (the ``dev`` extra); without them they skip, saying what is missing.
``LEADERBOARD_SITE_SCREENSHOT=PATH`` also saves the index's screenshot there (the README's).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_leaderboard import make_result
from test_site import HOSTILE

from leaderboard.cli import main

REPO = Path(__file__).resolve().parent.parent
COMMITTED = [REPO / "results" / "ptb", REPO / "results" / "wikitext-2"]


def _browser_or_skip() -> tuple[str, str]:
    """The Chromium and ChromeDriver executables, or a skip naming what is missing."""
    pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        missing = " and ".join(n for n, p in (("chromium", chromium), ("chromedriver", driver)) if p is None)
        pytest.skip(f"no {missing}: install Debian's chromium and chromium-driver packages")
    return chromium, driver


@pytest.fixture(scope="module")
def browser() -> Iterator:
    chromium, driver_path = _browser_or_skip()
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=options)
    except WebDriverException as error:
        pytest.skip(f"chromium did not start: {error.msg}")
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def committed_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    assert main(["site", *map(str, COMMITTED), "--output-dir", str(out), "--samples", "1000"]) == 0
    return out


def open_page(driver, path: Path) -> None:
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get_log("performance")
    driver.get(path.as_uri())


def requests_made(driver) -> list[str]:
    """The URLs the page asked for since the last call (the browser's network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def column(driver, table, name: str) -> list[str]:
    headers = [th.text.strip(" ▲▼") for th in table.find_elements("css selector", "thead th")]
    index = headers.index(name) + 1
    cells = table.find_elements("css selector", f"tbody tr:not([hidden]) td:nth-child({index})")
    return [cell.text for cell in cells]


def test_the_index_loads_without_errors_or_requests_beyond_its_files(browser, committed_site: Path) -> None:
    open_page(browser, committed_site / "index.html")
    assert browser.find_elements("css selector", "table.leaderboard")
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
    urls = requests_made(browser)
    assert urls and all(url.startswith("file://") for url in urls), urls
    assert any(url.endswith("/site.js") for url in urls) and any(url.endswith(".png") for url in urls)


def test_clicking_a_column_heading_sorts_the_rows(browser, committed_site: Path) -> None:
    open_page(browser, committed_site / "index.html")
    table = browser.find_element("css selector", 'table.leaderboard[data-dataset="ptb"]')
    before = column(browser, table, "model")
    table.find_element("xpath", ".//thead/tr/th[button='params_millions']/button").click()
    sizes = column(browser, table, "params_millions")
    numbers = [float(size) for size in sizes if size]
    assert numbers == sorted(numbers) and sizes[: len(numbers)] == [s for s in sizes if s]
    assert column(browser, table, "model") != before
    table.find_element("xpath", ".//thead/tr/th[button='params_millions']/button").click()
    again = [float(size) for size in column(browser, table, "params_millions") if size]
    assert again == sorted(numbers, reverse=True)


def test_the_kind_filters_hide_rows(browser, committed_site: Path) -> None:
    open_page(browser, committed_site / "index.html")
    table = browser.find_element("css selector", 'table.leaderboard[data-dataset="ptb"]')
    assert "reported" in column(browser, table, "kind")
    browser.find_element("css selector", '#filters input[value="reported"]').click()
    kinds = column(browser, table, "kind")
    assert kinds and "reported" not in kinds and set(kinds) == {"reproduced baseline"}


def test_a_row_links_to_its_result_page_with_its_checksums(browser, committed_site: Path) -> None:
    open_page(browser, committed_site / "index.html")
    browser.find_element("link text", "baselines.pointer_sentinel").click()
    assert "/results/baselines.pointer_sentinel.ptb.test-" in browser.current_url
    record = json.loads((REPO / "results/ptb/baselines.pointer_sentinel.ptb.test.json").read_text())
    text = browser.find_element("tag name", "body").text
    for checksum in (
        record["dataset_sha256"],
        record["vocab_sha256"],
        record["plugin_metadata"]["checkpoint_sha256"],
    ):
        assert checksum in text
    assert "python -m harness eval baselines.pointer_sentinel --dataset ptb --split test" in text
    assert all(url.startswith("file://") for url in requests_made(browser))


def test_the_significance_matrices_render(browser, committed_site: Path) -> None:
    open_page(browser, committed_site / "index.html")
    matrices = browser.find_elements("css selector", "table.matrix")
    assert len(matrices) == 2  # PTB and WikiText-2
    rows = matrices[0].find_elements("css selector", "tbody tr")
    cells = matrices[0].find_elements("css selector", "tbody td")
    assert len(rows) >= 3 and len(cells) == len(rows) ** 2
    hovers = [cell.get_attribute("title") for cell in cells if cell.get_attribute("title")]
    assert len(hovers) == len(rows) * (len(rows) - 1) and all("95% CI [" in hover for hover in hovers)
    assert matrices[0].size["height"] > 50


def test_a_screenshot_of_the_index_is_not_blank(browser, committed_site: Path) -> None:
    import matplotlib.image

    open_page(browser, committed_site / "index.html")
    png = browser.get_screenshot_as_png()
    pixels = matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]
    assert pixels.std() > 0.05
    assert len({tuple(p) for p in pixels.reshape(-1, 3)[::97]}) > 20
    if target := os.environ.get("LEADERBOARD_SITE_SCREENSHOT"):
        Path(target).write_bytes(png)


def test_a_hostile_model_name_is_shown_as_text(browser, tmp_path: Path) -> None:
    results = tmp_path / "results"
    make_result(results, "hostile.test", model=HOSTILE, ppl=100.0)
    make_result(results, "plain.test", model="my.plain", ppl=90.0)
    out = tmp_path / "site"
    assert main(["site", str(results), "--output-dir", str(out), "--samples", "1000", "--no-reported"]) == 0
    for page in (out / "index.html", next((out / "results").glob("hostile*.html"))):
        open_page(browser, page)
        assert browser.execute_script("return window.pwned") is None
        assert HOSTILE[:60] in browser.find_element("tag name", "body").text
        assert [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == []
