"""The gaming day's HTML report in a real browser (Debian's headless Chromium through its chromedriver, driven by
Selenium, as tests/system/test_console_browser.py): a day played on the rig in which a royal flush was paid with the Envy
Bonuses it earned two other players, a four of a kind the table paid and a void. The page names the table, labels
every payout by what it is, prints amounts and local times for people, shows no field name or raw value, clips
nothing (text, tables, the plot's labels), and prints to PDF on Letter and on A4 with each meter on its own page and
the signature block whole. With PROGRESSIVE_SCREENSHOTS=1, docs/images/report-day.png is written again."""

from __future__ import annotations

import base64
import os
import re
import shutil
from datetime import time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from test_report_rig import FLOOR, FOUR_ACES, claimed, table

from controller.ledger.chain import utc_now
from controller.report import gaming_day
from controller.report.build import TABLE, Source
from controller.report.render import render
from controller.service.report_files import read_report
from controller.service.views import meter_titles

from rigtable import lock_round

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FOUND = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
ROOT = Path(__file__).resolve().parents[2]
SHOT = ROOT / "docs" / "images" / "report-day.png"
ROYAL = ["AS", "KS", "QS", "JS", "TS"]
NY = ZoneInfo("America/New_York")

pytestmark = pytest.mark.skipif(not FOUND and not os.environ.get("CI"),
                                reason="Debian's chromium and chromium-driver are not installed (CI installs them)")

# What a page for people must not show: field names, Python's values, labels as the journal keys them, UTC stamps.
RAW = re.compile(r"\b[a-z]+_[a-z_]+\b|\b(True|False|None)\b|royal-flush|four-of-a-kind|\+00:00|\bUTC\b|[{}]|\['")

# Every element whose content is wider or taller than its box, every plot label outside its plot, and whether the
# page is wider than the window.
CLIPPED = """
const out = [];
for (const e of document.querySelectorAll('td, th, h1, h2, h3, p, figcaption')) {
  if (e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1)
    out.push(e.tagName + ': ' + e.textContent.slice(0, 60));
}
for (const svg of document.querySelectorAll('svg')) {
  const box = svg.viewBox.baseVal;
  for (const t of svg.querySelectorAll('text')) {
    const b = t.getBBox();
    if (b.x < box.x || b.y < box.y || b.x + b.width > box.x + box.width || b.y + b.height > box.y + box.height)
      out.push('plot label: ' + t.textContent);
  }
}
for (const t of document.querySelectorAll('table'))  // a table past its column: its own width is 100%
  if (t.getBoundingClientRect().right > t.parentElement.getBoundingClientRect().right + 1)
    out.push('table past its column: ' + t.textContent.slice(0, 60));
if (document.documentElement.scrollWidth > window.innerWidth) out.push('the page is wider than the window');
return out;
"""


def browser(profile: Path, width: int = 1000, height: int = 900):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def pdf_pages(driver, width_cm: float, height_cm: float) -> bytes:
    from selenium.webdriver.common.print_page_options import PrintOptions

    options = PrintOptions()
    options.page_width, options.page_height = width_cm, height_cm
    return base64.b64decode(driver.print_page(options))


async def test_a_day_with_a_royal_flush_and_its_envy_bonuses_prints_as_accounting_files_it(tmp_path):
    # the gaming day: from the last whole hour on the casino's clock (the daemon defines its meters within it)
    now = utc_now().astimezone(NY)
    day = gaming_day(now.date(), time(now.hour), NY, "America/New_York")
    async with table(tmp_path) as (daemon, rig):
        await lock_round(daemon, rig, [(2, "progressive"), (4, "progressive"), (6, "progressive")])
        await claimed(daemon, 4, ROYAL)  # 100% of the meter to seat 4; a $1,000 Envy Bonus to seats 2 and 6
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        await lock_round(daemon, rig, [(3, "progressive"), (5, "progressive")])
        await claimed(daemon, 3, FOUR_ACES)  # 300 for 1, paid by the table
        await daemon.call("settle", {"round_id": "CS-07-r2"})
        await lock_round(daemon, rig, [(1, "progressive")])
        await daemon.call("void", {"reason": "misdeal", **FLOOR})
        source = Source(TABLE, daemon.cfg.table, meter_titles(daemon.cfg))  # as `report --config` reads it
    report = read_report(tmp_path / "state", day, source)
    assert report.entries and report.source.title == "Table CS-07"
    page = tmp_path / "report.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    if os.environ.get("PROGRESSIVE_REPORT_PAGE"):
        shutil.copyfile(page, os.environ["PROGRESSIVE_REPORT_PAGE"])

    driver = browser(tmp_path / "profile")
    try:
        driver.get(page.as_uri())
        from selenium.webdriver.common.by import By

        body = driver.find_element(By.TAG_NAME, "body").text
        assert driver.find_element(By.TAG_NAME, "h1").text.startswith("Progressive meter report: Table CS-07, gaming day ")
        rows = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in
                driver.find_elements(By.CSS_SELECTOR, 'section[data-meter="main"] table')[2]
                .find_elements(By.CSS_SELECTOR, "tbody tr")]
        payouts = {(r[2], r[3], r[4]): r[5] for r in rows}  # (seat, what, on the hand) -> amount
        royal = ("4", "Jackpot", "royal flush (100% of meter)")
        assert payouts == {royal: payouts[royal],
                           ("2", "Envy Bonus", "seat 4's royal flush ($1,000.00)"): "$1,000.00",
                           ("6", "Envy Bonus", "seat 4's royal flush ($1,000.00)"): "$1,000.00",
                           ("3", "Fixed award", "four of a kind (300 for 1)"): "$300.00"}, rows
        assert re.fullmatch(r"\$10,000\.\d\d", payouts[royal])
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d\s\d\d:\d\d:\d\d\sE[SD]T", r[0]) for r in rows), rows
        assert "Reconciliation: the meter's visible amount balances: yes" in body
        main = driver.find_element(By.CSS_SELECTOR, 'section[data-meter="main"] h2').text
        assert "Table CS-07, Progressive Payout Wager (meter main)" in main, main  # the wager's name, as people know it
        assert "Prepared by" in body and "Reviewed by" in body and "Signature" in body
        assert "Claim CS-07-r1-c1: approved by floor-1" in body
        raw = RAW.search(body)
        assert raw is None, body[max(raw.start() - 80, 0):raw.end() + 40]
        caption = driver.find_element(By.CSS_SELECTOR, 'section[data-meter="main"] figcaption').text
        assert "defined at" in caption and "with $10,000.00" in caption  # as the readings say: no opening
        assert caption.startswith("Progressive Payout Wager (meter main), visible amount"), caption
        glance = driver.find_element(By.CSS_SELECTOR, "table.glance").text
        assert "Five Card Hand Bonus Wager (meter bonus)" in glance, glance
        assert "not yet defined" in body
        labels = [t.text for t in driver.find_elements(By.CSS_SELECTOR, 'section[data-meter="main"] svg text')]
        hour = f"{now.hour:02d}:00"
        assert labels.count(hour) == 2 and any("E" in x and "T)" in x for x in labels), labels  # start and end
        assert driver.execute_script(CLIPPED) == []

        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        assert driver.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(255, 255, 255)"
        driver.set_window_size(688, 900)  # A4's width between margins of 14 mm (182 mm), Letter's is wider
        assert driver.execute_script(CLIPPED) == []
        driver.set_window_size(1000, 900)
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
        for size in ((21.59, 27.94), (21.0, 29.7)):  # Letter, A4
            pdf = pdf_pages(driver, *size)
            pages = len(re.findall(rb"/Type\s*/Page\b", pdf))
            assert pdf.startswith(b"%PDF") and pages >= 3, pages  # the summary, then a page a meter at least

        if os.environ.get("PROGRESSIVE_SCREENSHOTS"):
            height = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(1000, height + 120)
            shot = tmp_path / "report-day.png"
            driver.save_screenshot(str(shot))
            shutil.copyfile(shot, SHOT)
    finally:
        driver.quit()
    assert report.day.end - report.day.start in (timedelta(hours=23), timedelta(hours=24), timedelta(hours=25))
