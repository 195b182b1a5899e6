"""The floor view in a real browser (Debian's headless Chromium through its chromedriver, as
tests/system/test_console_browser.py): three tables linked to a real authority through a real Mosquitto, the console
pointed at the authority's control socket. A royal flush locked at one table is the first thing on the open page,
without a reload; a table blocked by a device and one OFFLINE say so in words; nothing is clipped at a desktop's
1400x1000 nor a tablet's 1180x900, and there is no raw repr on the page. With PROGRESSIVE_SCREENSHOTS=1 the
screenshots of docs/console.md ("Floor view") are written again (docs/images/console-floor-*.png)."""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest
from test_console_browser import FOUND, _text, _wait, browser

from controller.linkproto import schema
from controller.meter import ops
from controller.money import parse_cents
from controller.service.control import ControlServer

from broker import running_broker
from consolerig import ROOT, console_process
from linkrig import AT, METER, LinkRig
from rigtable import until

TABLES = ("cs-01", "fcp-02", "lir-03")
SHOTS = ROOT / "docs" / "images"
SIZES = ((1400, 1000), (1180, 900))
REPRS = ("[{", "{'", "None", "True", "False")

pytestmark = pytest.mark.skipif(not FOUND and not os.environ.get("CI"),
                                reason="Debian's chromium and chromium-driver are not installed (CI installs them)")

# Every box of the page wider than it shows (its content clipped or spilling out), and the page wider than the window.
CLIPPED = """
const out = [];
document.querySelectorAll("body *").forEach(function (el) {
  const style = getComputedStyle(el);
  if (style.display === "inline" || el.clientWidth === 0 || el.closest("svg")) return;
  if (el.scrollWidth > el.clientWidth + 1) out.push(el.tagName + "." + el.className + ": " + el.scrollWidth + " > "
                                                  + el.clientWidth + " " + el.textContent.slice(0, 60));
  if (style.textOverflow === "ellipsis") out.push(el.tagName + "." + el.className + ": an ellipsis");
});
if (document.documentElement.scrollWidth > window.innerWidth)
  out.push("the page: " + document.documentElement.scrollWidth + " > " + window.innerWidth);
return out;
"""


@pytest.fixture
def broker(tmp_path: Path):
    with running_broker(tmp_path / "mosquitto", (*TABLES, "authority")) as b:
        yield b


def _line(table: str, phase: str, n: int, blocks=(), seats=(), claims=()):
    return lambda: schema.FloorLine(table, datetime.now(UTC).isoformat(), f"{table}-r{n}", phase, blocks, seats,
                                    claims, (METER,))


def _look(driver, tmp_path: Path, state: str) -> str:
    """At each size: nothing clipped, no repr; a screenshot. The page's text at the last size."""
    text = ""
    for width, height in SIZES:
        driver.set_window_size(width, height)
        driver.execute_script("return document.body.offsetHeight")  # laid out again
        inner = driver.execute_script("return window.innerWidth")
        clipped = driver.execute_script(CLIPPED)
        assert not clipped, (width, inner, clipped)
        text = driver.find_element("css selector", "body").text
        assert not any(r in text for r in REPRS), [r for r in REPRS if r in text]
        name = f"console-floor-{state}-{width}.png"
        full = driver.execute_script("return document.documentElement.scrollHeight")
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {  # the whole page, not its first screen
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": inner, "height": max(full + 40, height), "scale": 1}})
        (tmp_path / name).write_bytes(base64.b64decode(shot["data"]))
        assert (tmp_path / name).stat().st_size > 10_000  # a page, not a blank
        if os.environ.get("PROGRESSIVE_SCREENSHOTS"):
            shutil.copyfile(tmp_path / name, SHOTS / name)
    return text


async def test_the_floor_view_in_a_browser_shows_a_claim_first_and_nothing_clipped(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES)
    sock = tmp_path / "authority.sock"
    try:
        authority = await rig.start_authority()
        links = {t: await rig.start_table(t) for t in TABLES}
        await until(lambda: all(link.alive and link.accepts("floor") for link in links.values()), "tables linked")
        cs, fcp, lir = (links[t] for t in TABLES)
        await cs.send(ops.BookContributions("cs-01-r1", "cs-01", ((5, 100), (2, 100), (3, 500)), AT), "fchb",
                      "cs-01-r1:book")
        await fcp.send(ops.BookContributions("fcp-02-r1", "fcp-02", ((1, 100),), AT), "fchb", "fcp-02-r1:book")
        await rig.all_answered()
        cs.floor = _line("cs-01", "dealing", 1)
        fcp.floor = _line("fcp-02", "dealing", 1)
        lir.floor = _line("lir-03", "betting", 7)
        async with ControlServer(sock, authority), console_process(sock, tmp_path / "console.log") as console:
            with browser(tmp_path / "profile") as driver:
                await asyncio.to_thread(driver.get, console.url)
                await asyncio.to_thread(_wait, driver, lambda d: "3 online" in _text(d, "#daemon")
                                        and _text(d, '[data-table="lir-03"] .round').startswith("Round lir-03-r7"),
                                        "three tables online, each its round")
                quiet = await asyncio.to_thread(_look, driver, tmp_path, "quiet")
                assert "No claim awaits approval on the floor" in quiet

                # a royal flush at cs-01 (its award locked at the authority), a device down at fcp-02, lir-03 gone
                seq = await cs.send(ops.LockPercentAward("cs-01-r1", "cs-01", 5, "royal-flush", "100% of meter",
                                                         Fraction(100), datetime.now(UTC), "cs-01-r1-c1:0"), "fchb",
                                    "cs-01-r1-c1:lock:0")
                locked = await cs.answer(seq, 20)
                cents = parse_cents(locked["amount"], "amount")
                cs.floor = _line("cs-01", "dealing", 1, claims=(schema.FloorClaim(
                    "cs-01-r1-c1", 5, "progressive", "royal-flush", "100% of meter", cents + 2 * 500_00),))
                fcp.floor = _line("fcp-02", "betting", 2, blocks=(("device", ("lockout",)),), seats=(4, 5))
                await rig.stop_table("lir-03")
                # the lock is the authority's own, at once; the total its approval pays, the table's floor line
                total = f"${(cents + 100_000) // 100:,}.{cents % 100:02d}"
                first = await asyncio.to_thread(
                    _wait, driver, lambda d: total in _text(d, 'article.pending[data-table="cs-01"]')
                    and _text(d, 'article.pending[data-table="cs-01"]'), "the claim on the open page, without a reload")
                assert "Seat 5" in first and "Royal flush" in first and "awaiting approval since" in first
                await asyncio.to_thread(_wait, driver, lambda d: "OFFLINE" in _text(d, '[data-table="lir-03"]')
                                        and "device down" in _text(d, '[data-table="fcp-02"]'),
                                        "the device down and the table OFFLINE")
                # first on the page: above every table's card
                above = driver.execute_script(
                    "return document.querySelector('article.pending').getBoundingClientRect().top"
                    " < document.querySelector('#tables').getBoundingClientRect().top")
                assert above
                text = await asyncio.to_thread(_look, driver, tmp_path, "claim")
                assert "✕ OFFLINE since" in text and "stopped cleanly" in text
                assert "⚠ seats 4, 5 disabled" in text and "1 claim awaiting approval" in text
    finally:
        await rig.close()
