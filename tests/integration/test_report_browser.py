"""The report opened in a real headless browser: Debian's chromium, driven by Selenium through the
system chromedriver (Service(executable_path=...), so selenium-manager downloads nothing).

Checks what a reader would notice: no console errors, every figure decoded and laid out, and
markup planted in the database shown as text without running. Skips with the reason where no
chromium is installed (`.ci/run` installs it with apt-get).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autotune.report.figures import FIG_W_PX
from autotune.testing.synthetic_study import fill_study

CliFn = Callable[..., tuple[int, str, str]]
CHROMIUM = os.environ.get("AUTOTUNE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("AUTOTUNE_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
EVIL = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
FIGURES = 5


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (os.path.isfile(p) or shutil.which(p))]
    if missing:
        hint = "apt-get install chromium chromium-driver"
        pytest.skip(f"no headless browser: {', '.join(missing)} not installed ({hint})")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1200,900"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _open(driver: Any, path: Path) -> list[dict[str, Any]]:
    """Load the file and return its console messages at warning level or worse."""
    driver.get_log("browser")  # drop what an earlier page left
    driver.get(path.as_uri())
    driver.execute_script("return document.readyState")
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def _figures(driver: Any) -> list[dict[str, Any]]:
    """Every figure <img>, with whether the browser decoded it and the size it was drawn at."""
    script = """
        return Array.from(document.querySelectorAll('img.figure')).map(img => ({
            id: img.id, complete: img.complete, natural: img.naturalWidth, natural_h: img.naturalHeight,
            shown: img.getBoundingClientRect().width}));
    """
    result: list[dict[str, Any]] = driver.execute_script(script)
    return result


def test_smoke_report_renders_in_chromium(browser: Any, smoke: tuple[str, Path]) -> None:
    _, tmp = smoke
    errors = _open(browser, tmp / "report.html")
    assert errors == [], errors
    figs = _figures(browser)
    assert len(figs) == FIGURES, figs
    for f in figs:
        assert f["complete"], f
        assert f["natural"] == FIG_W_PX, f
        assert f["shown"] > 100, f
    assert "lora_config = peft.LoraConfig(" in browser.find_element("id", "peft-snippet").text


def test_injected_markup_is_inert_in_chromium(browser: Any, tmp_path: Path, cli: CliFn) -> None:
    url = f"sqlite:///{tmp_path / 'evil.db'}"
    name = f"evil{EVIL}"
    fill_study(url, name=name, n_trials=30, error_text=f"crash {EVIL}", data_source=f"builtin:{EVIL}")
    out = tmp_path / "evil.html"
    code, _, err = cli("report", name, "--storage", url, "--out", str(out))
    assert code == 0, err
    errors = _open(browser, out)
    assert errors == [], errors
    assert browser.execute_script("return window.__pwned === undefined") is True
    # The planted markup reads as text: in the heading and in the error column of the table.
    assert browser.find_element("id", "study-name").text == name
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('#trial-table td')).map(td => td.textContent)"
    )
    assert f"crash {EVIL}" in cells
    assert browser.execute_script("return document.querySelectorAll('script').length") == 0
    assert len(_figures(browser)) == FIGURES
