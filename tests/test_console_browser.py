"""The pit console in a real browser: Debian's headless Chromium, driven through its chromedriver by Selenium
(nothing downloaded; .ci/run installs both). A hit is dealt on the rig and claimed; the claim shows up on the
open page by itself (the event stream), a supervisor approves it there through the form, and the page's meter
and the rig's sign show the reset amount; the meters' plots are on the page. With PROGRESSIVE_SCREENSHOTS=1 the screenshots of docs/console.md
are written again (docs/images/)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path

import pytest

from consolerig import ROOT, ROYAL, SECRET, SUPERVISOR, console_on_rig
from rigtable import lock_round, until

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FOUND = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
SHOTS = ROOT / "docs" / "images"
WAIT_S = 15.0
RESET = "$10,000.00"

pytestmark = pytest.mark.skipif(not FOUND and not os.environ.get("CI"),
                                reason="Debian's chromium and chromium-driver are not installed (CI installs them)")


@contextlib.contextmanager
def browser(profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", f"--user-data-dir={profile}", "--window-size=1180,900"):  # a tablet, landscape
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(WAIT_S)
        yield driver
    finally:
        driver.quit()


def _wait(driver, condition, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.05).until(condition, what)


def _shot(driver, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000  # a page, not a blank
    if os.environ.get("PROGRESSIVE_SCREENSHOTS"):
        shutil.copyfile(path, SHOTS / name)


def _text(driver, css: str) -> str:
    """The text of the first element `css` finds ("" when none): read again when an update replaced it."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(3):
        try:
            found = driver.find_elements(By.CSS_SELECTOR, css)
            return found[0].text if found else ""
        except StaleElementReferenceException:
            continue
    return ""


def _meter(driver) -> str:
    return _text(driver, '[data-meter="main"]')


def _approve(driver, claim: str, tmp_path: Path) -> None:
    """Type the supervisor's name and secret into the claim's approve form, and send it. The form is found
    afresh at each step: an update of the page may replace it (what was typed is kept)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    def field(name: str):
        return driver.find_element(By.CSS_SELECTOR, f'article[data-claim="{claim}"] form.approve {name}')

    for step in (lambda: field("[name=supervisor]").send_keys(SUPERVISOR),
                 lambda: field("[name=secret]").send_keys(SECRET),
                 lambda: _shot(driver, tmp_path, "console-pending-claim.png"),
                 lambda: field("button.approve").click()):
        for _ in range(3):
            try:
                step()
                break
            except StaleElementReferenceException:
                continue


async def test_a_claim_on_the_rig_is_approved_on_the_page_and_the_meter_resets(tmp_path):
    async with console_on_rig(tmp_path) as (daemon, rig, console):
        with browser(tmp_path / "profile") as driver:
            await asyncio.to_thread(driver.get, console.url)
            await asyncio.to_thread(_wait, driver, lambda d: _meter(d) == RESET, "the meter on the page")
            await lock_round(daemon, rig, [(4, "progressive"), (2, "progressive")])
            grown = await asyncio.to_thread(_wait, driver, lambda d: _meter(d) != RESET and _meter(d),
                                            "the contributions on the page")
            grown_cents = daemon.ledger.state["main"].current_cents
            slot = await until(lambda: next((n for n, c in rig.sign()["amounts"] if c == grown_cents), None),
                               lambda: f"the grown meter on the sign: {rig.sign()}")  # the main meter's slot
            claim = (await daemon.call("claim", {"seat": 4, "cards": ROYAL}))["claim_id"]

            article = await asyncio.to_thread(_wait, driver, lambda d: _text(d, f'article[data-claim="{claim}"]'),
                                              "the claim on the page, without a reload")
            assert grown in article and "seat 4" in article.lower()
            assert "royal-flush 100% of meter" in article, article
            await asyncio.to_thread(_approve, driver, claim, tmp_path)
            flash = await asyncio.to_thread(_wait, driver, lambda d: _text(d, "#flash"), "the approval's answer")
            assert claim in flash and "refused" not in flash, flash
            await asyncio.to_thread(_wait, driver, lambda d: _meter(d) == RESET, "the reset meter on the page")
            assert daemon.desk.state.claims[0].status == "paid"
            await until(lambda: dict(rig.sign()["amounts"]).get(slot) == 1_000_000,
                        lambda: f"the reset amount on the sign: {rig.sign()}")
            history = _text(driver, "#history")
            assert grown in history and SUPERVISOR in history
            plots = await asyncio.to_thread(
                _wait, driver, lambda d: d.find_elements("css selector", '#plots figure[data-meter="main"] svg'),
                "the meter's plots")
            assert len(plots) == 2 and "over the gaming day so far" in plots[0].get_attribute("aria-label")
            await asyncio.to_thread(_shot, driver, tmp_path, "console-after-approval.png")
    assert SECRET not in console.log.read_text()
