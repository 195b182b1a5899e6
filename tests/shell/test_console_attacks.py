"""Attacks on the pit console's forms and on what it shows (docs/security.md, "The pit console"): each runs against
the console process over HTTP and a daemon on the rig, as an adversary would."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

import pytest
from test_console_browser import FOUND, _wait, browser

from consolerig import SECRET, SUPERVISOR, console_on_rig, csrf_of
from rigtable import lock_round

FLOOR = {"supervisor": SUPERVISOR, "secret": SECRET}


async def _page(http, console, want: str) -> str:
    async with asyncio.timeout(10):
        while True:
            async with http.get(console.url) as r:
                html = await r.text()
            if want in html:
                return html
            await asyncio.sleep(0.05)


async def test_a_void_aimed_at_a_round_that_changed_while_its_secret_was_checked_voids_nothing(tmp_path):
    """The daemon voids its current round: a void form of round N that is still being checked (its secret hashed,
    or the console's view a poll behind) when round N settles and N+1 is dealt must not void N+1."""
    async with console_on_rig(tmp_path) as (daemon, rig, console), console.client() as http:
        await lock_round(daemon, rig, [(4, "progressive")])
        first = daemon._round_id()
        token = csrf_of(await _page(http, console, 'action="/void"'))
        checking, checked = asyncio.Event(), asyncio.Event()
        real = daemon.supervisor

        async def slow_check(args):  # the secret's hash taking its time: the table plays on meanwhile
            who = await real(args)
            if args.get("reason") == "misdeal":
                checking.set()
                await checked.wait()
            return who

        daemon.supervisor = slow_check
        form = {"csrf": token, "round_id": first, "reason": "misdeal", **FLOOR}
        posted = asyncio.create_task(http.post(console.url + "void", data=form, headers={"Origin": console.origin},
                                               allow_redirects=False))
        async with asyncio.timeout(10):
            await checking.wait()
        await daemon.call("settle", {"round_id": first})  # the dealer settles round N at the table
        await lock_round(daemon, rig, [(2, "progressive")])  # ... and round N+1 is dealt
        second = daemon._round_id()
        assert second != first
        checked.set()
        async with asyncio.timeout(10):
            response = await posted
        assert response.status == 303
        response.release()
        assert daemon._round_id() == second and daemon.state.phase.value == "dealing"  # N+1 not voided
        html = await _page(http, console, "refused")
        assert f"round {first} is not the current round {second}" in html


async def test_wrong_secrets_in_settle_and_void_forms_count_as_the_logins_do(tmp_path):
    """A form that guesses a secret is a guess, whatever its action: three wrong ones from an address (settle, void,
    settle) and the console refuses the fourth itself, the right secret too, asking the daemon nothing."""
    async with console_on_rig(tmp_path) as (daemon, rig, console), console.client() as http:
        await lock_round(daemon, rig, [(4, "progressive")])
        first = daemon._round_id()
        token = csrf_of(await _page(http, console, 'action="/settle"'))

        def failures() -> float:
            return daemon.metrics.registry.get_sample_value("progressive_auth_failures_total") or 0

        async def post(path: str, data: dict) -> str:
            async with http.post(console.url + path, data={"csrf": token, "round_id": first, **data},
                                 headers={"Origin": console.origin}, allow_redirects=False) as r:
                assert r.status == 303
            return await _page(http, console, "refused")

        wrong = {"supervisor": SUPERVISOR, "secret": "not-the-secret-42"}
        for path in ("settle", "void", "settle"):
            assert "supervisor name or credential not accepted" in await post(path, {**wrong, "reason": "misdeal"})
        hashed = failures()
        assert "too many wrong secrets from this address" in await post("settle", FLOOR)
        assert "too many wrong secrets from this address" in await post("void", {**FLOOR, "reason": "misdeal"})
        assert failures() == hashed == 3  # the daemon hashed the three, and was asked nothing after
        assert daemon._round_id() == first and daemon.state.phase.value == "dealing"
    assert SECRET not in console.log.read_text()


@pytest.mark.skipif(not FOUND and not os.environ.get("CI"), reason="Debian's chromium and chromium-driver are not "
                                                                   "installed (CI installs them)")
async def test_what_a_supervisor_typed_into_a_rounds_void_form_stays_with_that_round(tmp_path):
    """The page keeps what was typed across its live updates, form by form. A void (or settle) form typed for round
    N must not come back filled in as round N+1's when N settles and N+1 is dealt meanwhile: one Enter would then
    void N+1, which the daemon cannot tell from a void meant for it."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    async with console_on_rig(tmp_path) as (daemon, rig, console):
        await lock_round(daemon, rig, [(4, "progressive")])
        first = daemon._round_id()
        with browser(tmp_path / "profile") as driver:
            await asyncio.to_thread(driver.get, console.url)

            def form(action: str) -> dict[str, str]:
                """The form's fields as shown, read again when a live update replaced the form meanwhile."""
                for _ in range(50):
                    try:
                        found = driver.find_element(By.CSS_SELECTOR, f'form[action="/{action}"]')
                        return {i.get_attribute("name"): i.get_property("value")
                                for i in found.find_elements(By.CSS_SELECTOR, "input")}
                    except StaleElementReferenceException:
                        continue
                raise AssertionError(f"the {action} form was replaced 50 times while read")

            await asyncio.to_thread(_wait, driver, lambda d: form("void").get("round_id") == first, "round N's form")
            for action, typed in (("settle", {"supervisor": SUPERVISOR, "secret": SECRET}),
                                  ("void", {"reason": "misdeal", "supervisor": SUPERVISOR, "secret": SECRET})):
                driver.find_element(By.CSS_SELECTOR, f"#act-{action} summary").click()
                for name, text in typed.items():
                    driver.find_element(By.CSS_SELECTOR, f'form[action="/{action}"] [name={name}]').send_keys(text)
            assert form("void")["secret"] == SECRET
            await daemon.call("settle", {"round_id": first})  # the dealer settles round N at the table
            await lock_round(daemon, rig, [(2, "progressive")])  # ... and round N+1 is dealt
            second = daemon._round_id()
            await asyncio.to_thread(_wait, driver, lambda d: form("settle").get("round_id") == second,
                                    "round N+1's forms")
            for action in ("settle", "void"):
                assert not any(form(action).get(name) for name in ("reason", "supervisor", "secret")), form(action)


@pytest.mark.skipif(not FOUND and not os.environ.get("CI"), reason="Debian's chromium and chromium-driver are not "
                                                                   "installed (CI installs them)")
async def test_a_time_zone_the_browser_does_not_know_leaves_the_page_live(tmp_path):
    """`time_zone = "localtime"` passes the daemon's check (Python reads the box's zone file) but Chromium's clock
    refuses it: before, the page's script stopped there and the page never went live, a pit boss's screen frozen on
    what it first showed (a claim approved since still waiting, a new one never shown)."""
    from selenium.webdriver.common.by import By

    async with console_on_rig(tmp_path) as (daemon, rig, console):
        daemon.cfg = replace(daemon.cfg, report=replace(daemon.cfg.report, time_zone="localtime"))
        async with console.client() as http:
            await _page(http, console, 'data-zone="localtime"')
        with browser(tmp_path / "profile") as driver:
            await asyncio.to_thread(driver.get, console.url)
            await asyncio.to_thread(_wait, driver, lambda d: d.find_element(By.ID, "live").text == "live",
                                    "the page live")
            await rig.place_chip(4, "progressive", 100)
            await asyncio.to_thread(_wait, driver, lambda d: "light on" in d.find_element(By.ID, "seats").text,
                                    "a wager on the page without a reload")
