"""The pit console in a real browser: Debian's headless Chromium, driven through its chromedriver by Selenium
(nothing downloaded; .ci/run installs both). A table on the rig goes through the states a pit boss sees: idle,
wagers placed (the seat map and its lights), a royal flush claimed (the claim first on the page, every payout of it
and the total), approved on the page through its form (paid: the meter reset, the hit history with its Envy
Bonuses), the bus unplugged (one line for the cable, not one a device), and the link to the authority OFFLINE
(rendered from the table's own recorded answers with its link as a linked table reports it offline: a broker and
an authority would triple the test's time for the same page). In each state and at a desktop's and a tablet's
widths the page is checked: nothing clipped or wider than its box or the window, no text cut by an ellipsis, no
raw Python in the text. With PROGRESSIVE_SCREENSHOTS=1 the screenshots of docs/console.md are written again
(docs/images/console-<state>-<width>.png)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import os
import re
import shutil
from pathlib import Path

import pytest

from controller.console.view import page

from consolerig import ROOT, ROYAL, SECRET, SUPERVISOR, console_on_rig
from rigtable import until

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FOUND = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
SHOTS = ROOT / "docs" / "images"
WAIT_S = 15.0
RESET = "$10,000.00"
WIDTHS = ((1400, 1000), (1180, 900), (820, 1180))  # a desktop; a tablet in landscape and in portrait
RAW = ("[{", "{'", "None", "True", "False")  # Python's reprs: never on the page
CHIPS = ((4, "progressive", 100), (2, "progressive", 500), (6, "progressive", 100), (6, "five-card-hand-bonus", 100))

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
                 "--no-first-run", f"--user-data-dir={profile}", "--window-size=1400,1000", "--lang=en-US"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(WAIT_S)
        yield driver
    finally:
        driver.quit()


def _wait(driver, condition, what: str):
    """Wait for `condition`; one that read an element a live update replaced meanwhile is asked again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition, what)


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


# Every element that overflows its own box (text or a table wider than its card), reaches past the window, or hides
# text behind an ellipsis; described by its tag, class and the start of its text.
LAYOUT = """
const out = [], W = window.innerWidth, what = e => e.tagName + '.' + e.className + ' "' +
  (e.innerText || '').slice(0, 40).replace(/\\s+/g, ' ') + '"';
if (document.documentElement.scrollWidth > W) out.push('page ' + document.documentElement.scrollWidth + ' > ' + W);
for (const e of document.querySelectorAll('body *')) {
  const r = e.getBoundingClientRect();
  if (!r.width || e.closest('details:not([open]) > :not(summary)') || e.closest('svg')) continue;
  if (r.right > W + 1 || r.left < -1) out.push('past the window: ' + what(e));
  if (e.matches('section, table, td, th, .seat, .meter, .claim, figure') && e.scrollWidth > e.clientWidth + 1)
    out.push('wider than its box ' + e.scrollWidth + ' > ' + e.clientWidth + ': ' + what(e));
  if (getComputedStyle(e).textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth) out.push('ellipsis: ' + what(e));
}
return out;
"""


def _look(driver, tmp_path: Path, state: str) -> str:
    """The page in `state` at every width: checked, and photographed (the whole page). Its text at the last."""
    text = ""
    for width, height in WIDTHS:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        problems = driver.execute_script(LAYOUT)
        assert not problems, f"{state} at {width}x{height}: {problems[:8]}"
        text = driver.execute_script("return document.body.innerText")
        assert not [r for r in RAW if r in text], f"{state}: raw Python on the page: {text}"
        full = driver.execute_script("return document.documentElement.scrollHeight")
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": max(full, height), "scale": 1}})
        path = tmp_path / f"console-{state}-{width}.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        assert path.stat().st_size > 10_000  # a page, not a blank
        if os.environ.get("PROGRESSIVE_SCREENSHOTS"):
            shutil.copyfile(path, SHOTS / path.name)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": WIDTHS[0][0], "height": WIDTHS[0][1], "deviceScaleFactor": 1, "mobile": False})
    return text


def _approve(driver, claim: str) -> None:
    """Type the supervisor's name and secret into the claim's approve form, and send it. The form is found
    afresh at each step: an update of the page may replace it (what was typed is kept)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    def field(name: str):
        return driver.find_element(By.CSS_SELECTOR, f'article[data-claim="{claim}"] form.approve {name}')

    for step in (lambda: field("[name=supervisor]").send_keys(SUPERVISOR),
                 lambda: field("[name=secret]").send_keys(SECRET),
                 lambda: field("button.approve").click()):
        for _ in range(3):
            try:
                step()
                break
            except StaleElementReferenceException:
                continue


async def _offline(daemon) -> str:
    """The page of the table's own recorded answers with its Progressive Payout Wager's meter linked and the link
    OFFLINE, as a linked table's status says it (`link.up` false, the linked meter's amount unknown, the link
    block), without the script (so that the live stream does not draw the table's real state over it)."""
    status, rnd = [await daemon.call(op, {}) for op in ("status", "round")]
    history = await daemon.call("history", {"kinds": True})  # as the console asks it: what each payout is
    status = {**status, "meters": [{**m, "linked": "pa-progressive", "amount": None} if m["meter"] == "main" else m
                                   for m in status["meters"]],
              "blocks": [*status["blocks"], {"block": "link", "sources": ["pa-progressive"]}],
              "link": {"up": False, "connected": False, "heard_seconds_ago": 14.2, "timeout_seconds": 5.0}}
    series = {span: await daemon.call("meter_series", {"span": span}) for span in ("day", "30d")}
    parts = page.sections({"status": status, "round": rnd, "history": history, "series": series}, None, "token")
    html = page.page(parts, csrf="token", table=status["table"], zone=status["time_zone"])
    return html.replace('<script src="/static/console.js" defer></script>', "").replace("connecting…", "recorded")


async def test_the_console_in_every_state_reads_at_a_glance_at_desktop_and_tablet_widths(tmp_path):
    async with console_on_rig(tmp_path) as (daemon, rig, console):
        with browser(tmp_path / "profile") as driver:
            look = functools.partial(_look, driver, tmp_path)
            await asyncio.to_thread(driver.get, console.url)
            await asyncio.to_thread(_wait, driver, lambda d: _meter(d) == RESET, "the meter on the page")
            assert driver.title == "CS-07 · Pit console"
            idle = await asyncio.to_thread(look, "idle")
            assert "Every device answers" in idle and "No claim awaits a supervisor" in idle
            assert "Progressive Payout Wager" in idle and re.search(r"\d\d:\d\d:\d\d E[SD]T", idle), idle

            for seat, spot, cents in CHIPS:  # wagers: acknowledged, their lights on, not yet locked
                await rig.place_chip(seat, spot, cents)
            await asyncio.to_thread(_wait, driver, lambda d: _text(d, "#seats").count("light on") == len(CHIPS),
                                    "every wager lit on the seat map")
            seat6 = _text(driver, '.seat[data-seat="6"]')
            assert "Five Card Hand Bonus" in seat6 and "$1.00" in seat6
            assert "$5.00" in _text(driver, '.seat[data-seat="2"]') and "No wager" in _text(driver, '.seat[data-seat="1"]')
            await asyncio.to_thread(look, "wagers")

            await rig.press_lockout()
            await until(lambda: daemon.state.phase.value == "dealing", "dealing")
            grown = await asyncio.to_thread(_wait, driver, lambda d: _meter(d) != RESET and _meter(d),
                                            "the contributions on the page")
            claim = (await daemon.call("claim", {"seat": 4, "cards": ROYAL}))["claim_id"]
            article = await asyncio.to_thread(_wait, driver, lambda d: _text(d, f'article[data-claim="{claim}"]'),
                                              "the claim on the page, without a reload")
            first = driver.execute_script("return document.querySelector('main > section').innerText")
            assert "JACKPOT CLAIM" in first  # the first thing on the page
            # every payout: the jackpot and both Envy Bonuses, and the total the supervisor approves
            assert grown in article and "Jackpot" in article and article.count("Envy Bonus") == 2, article
            assert "$5,000.00" in article and "$1,000.00" in article
            cents = daemon.desk.state.claims[0].payouts
            total = page.dollars(f"{sum(p.amount for p in cents) // 100}.{sum(p.amount for p in cents) % 100:02d}")
            assert f"Total the supervisor approves {total}" in article, article
            assert "CLAIM PENDING" in _text(driver, '.seat[data-seat="4"]')
            await asyncio.to_thread(look, "pending-claim")

            await asyncio.to_thread(_approve, driver, claim)
            flash = await asyncio.to_thread(_wait, driver, lambda d: _text(d, "#flash"), "the approval's answer")
            assert claim in flash and "refused" not in flash, flash
            await asyncio.to_thread(_wait, driver, lambda d: _meter(d) == RESET, "the reset meter on the page")
            assert daemon.desk.state.claims[0].status == "paid"
            history = await asyncio.to_thread(_wait, driver, lambda d: "Envy Bonus" in _text(d, "#history")
                                              and _text(d, "#history"), "the Envy Bonuses in the hit history")
            assert grown in history and SUPERVISOR in history and history.count("Envy Bonus") == 2, history
            assert re.search(r"\d\d:\d\d:\d\d E[SD]T\n\d{4}-\d\d-\d\d", history), history  # the casino's time
            assert "PAID" in _text(driver, "#claims") and total in _text(driver, "#claims")
            await asyncio.to_thread(
                _wait, driver, lambda d: len(d.find_elements("css selector", '#plots figure[data-meter="main"] svg'))
                == 2, "the meter's plots")
            await asyncio.to_thread(look, "paid")

            cut = rig.unplug("sign")  # the table's bus: seven seats, the lock-out and the sign on one cable
            assert len(cut) == 9
            problem = await asyncio.to_thread(
                _wait, driver, lambda d: "seats 1-7, lock-out and sign unreachable" in _text(d, "#devices")
                and _text(d, ".problem"), "one line for the unplugged bus")
            assert problem.startswith("✖ bus table-bus (") and " down since " in problem, problem
            assert len(driver.find_elements("css selector", ".problem")) == 1
            assert "DISABLED" in _text(driver, '.seat[data-seat="3"]')
            await asyncio.to_thread(look, "device-down")

            rig.replug("sign")
            await asyncio.to_thread(_wait, driver, lambda d: "Every device answers" in _text(d, "#devices"),
                                    "every device back")
            recovered = _text(driver, '#devices tr[data-device="seat-3"]')
            assert "up" in recovered and "no usable reply" not in recovered, recovered  # its last error folded away

            html = await _offline(daemon)
            driver.execute_script("document.open(); document.write(arguments[0]); document.close();", html)
            offline = await asyncio.to_thread(_wait, driver, lambda d: _text(d, ".link-offline"), "the link OFFLINE")
            assert "Link to the authority OFFLINE" in offline and _meter(driver) == "✖ OFFLINE"
            assert _text(driver, "#history").count("Envy Bonus") == 2, _text(driver, "#history")
            await asyncio.to_thread(look, "link-offline")
            # the layout check sees what it is for: a cell holding a line wider than its card
            driver.execute_script("document.querySelector('#history td').insertAdjacentHTML('beforeend', "
                                  "'<span style=\"white-space: nowrap\">' + 'W'.repeat(300) + '</span>')")
            assert any("wider than its box" in p for p in driver.execute_script(LAYOUT))
    assert SECRET not in console.log.read_text()




