"""The pit console (controller/console, docs/console.md): its pure pages and checks, its command line, the
daemon's `authenticate`, and the console as a process over HTTP against a daemon on the rig: CSRF and origin
checks, no secret in a URL or its log, approvals decided by the daemon, the login, and the event stream."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest

from controller.app.table import TableDaemon
from controller.console import gate, server
from controller.console.view import page
from controller.service import sdlisten
from controller.service.control import ControlError, ControlServer

from consolerig import (
    CONSOLE,
    RIG,
    ROYAL,
    SECRET,
    SUPERVISOR,
    TABLE,
    activated,
    console_on_rig,
    console_process,
    csrf_of,
    login_form,
    self_signed,
    tls_console_on_rig,
)
from rigtable import daemon_on_rig, lock_round, until, with_supervisor

FLOOR = {"supervisor": SUPERVISOR, "secret": SECRET}
WRONG = "not-the-secret-42"
TYPED = "hunter2-typed-as-the-name"


# --- pure --------------------------------------------------------------------------------------------


def test_the_listening_address_is_parsed_and_loopback_told_apart():
    assert page.parse_listen("127.0.0.1:8480") == ("127.0.0.1", 8480)
    assert page.parse_listen("[::1]:80") == ("::1", 80)
    for bad in ("8480", ":8480", "host:http", "host:0", "host:70000"):
        with pytest.raises(ValueError):
            page.parse_listen(bad)
    assert all(page.is_loopback(h) for h in ("127.0.0.1", "127.3.2.1", "::1", "localhost", "LOCALHOST"))
    assert not any(page.is_loopback(h) for h in ("0.0.0.0", "::", "10.1.2.3", "pit.example", "localhost.evil"))


def test_only_the_box_own_name_and_a_same_origin_form_are_taken():
    assert page.host_allowed("127.0.0.1:8480", 8480) and page.host_allowed("localhost:8480", 8480)
    assert not page.host_allowed("evil.example:8480", 8480)  # DNS rebinding
    assert not page.host_allowed("127.0.0.1:8481", 8480) and not page.host_allowed(None, 8480)
    me = "http://127.0.0.1:8480"
    assert page.same_origin(me, None, me) and page.same_origin(None, me + "/x?y", me)
    assert not page.same_origin("http://evil.example", me + "/", me)  # Origin wins over Referer
    assert not page.same_origin(None, "http://evil.example/", me) and not page.same_origin(None, None, me)
    assert not page.same_origin("null", None, me)
    assert page.secret_in_query(["a", "Secret"]) and not page.secret_in_query(["supervisor"])


def test_money_is_shown_as_the_sign_reads_it_exactly():
    assert page.dollars("10000.00") == "$10,000.00"
    assert page.dollars("123456789012345678.15") == "$123,456,789,012,345,678.15"  # no float on the way
    assert page.dollars(None) == "—" and page.dollars("<b>") == "&lt;b&gt;"


def test_a_form_token_is_signed_bound_to_its_cookie_and_expires():
    now = [1000.0]
    signer = server.Signer(clock=lambda: now[0], lifetime=3600)
    me, other = "a" * 43, "b" * 43
    token = signer.token(me)
    assert signer.valid(me, token) and token != signer.token(me)  # a nonce each
    assert not signer.valid(other, token)  # fetched with another cookie: worth nothing
    issued, nonce, mac = token.split(".")
    assert not signer.valid(me, f"{int(issued) + 60}.{nonce}.{mac}")  # its time is under the MAC
    assert not signer.valid(me, "") and not signer.valid(me, "x.y") and not signer.valid(me, token + "." * 200)
    assert not server.Signer(clock=lambda: now[0]).valid(me, token)  # a restart: a new key
    now[0] += 3600
    assert signer.valid(me, token)
    now[0] += 1
    assert not signer.valid(me, token)
    flash = signer.flash(me, "claim CS-07-r1-c1: approved <b>")
    assert signer.read_flash(me, flash) == "claim CS-07-r1-c1: approved <b>"
    assert signer.read_flash(other, flash) is None and signer.read_flash(me, "SGk.00") is None
    assert signer.read_flash(me, None) is None


def test_the_sockets_systemd_passes_are_taken_for_this_process_only_and_the_variables_unset():
    env = {"LISTEN_PID": "1", "LISTEN_FDS": "1", "LISTEN_FDNAMES": "x", "OTHER": "y"}
    assert sdlisten.listen_fds(env) == [] and env == {"OTHER": "y"}  # another process's (pid 1's)
    assert sdlisten.listen_fds(env) == []  # not activated
    for bad, says in (({"LISTEN_PID": "me", "LISTEN_FDS": "1"}, "LISTEN_PID='me'"),
                      ({"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "0"}, "LISTEN_FDS='0'"),
                      ({"LISTEN_PID": str(os.getpid())}, "LISTEN_FDS=None")):
        with pytest.raises(ValueError, match=re.escape(says)):
            sdlisten.listen_fds(bad)
        assert bad == {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, pytest.raises(ValueError, match="not a TCP"):
        sdlisten.tcp_listener(udp.fileno())
    with socket.socket() as tcp, pytest.raises(ValueError, match="not listening"):
        sdlisten.tcp_listener(tcp.fileno())


def test_connections_are_counted_per_address_and_in_all():
    c = gate.Connections(per_address=2, total=3)
    assert c.take("10.0.0.1") is None and c.take("10.0.0.1") is None
    assert "2 connections from one address" in (c.take("10.0.0.1") or "")
    assert c.take("10.0.0.2") is None
    assert "3 connections at once" in (c.take("10.0.0.3") or "")
    c.give_back("10.0.0.1")
    assert c.take("10.0.0.3") is None and c.open == {"10.0.0.1": 1, "10.0.0.2": 1, "10.0.0.3": 1}


def test_whatever_the_daemon_says_is_escaped_on_the_page():
    evil = "<script>alert(1)</script>"
    snap = {"status": {"table": evil, "meters": [{"meter": evil, "amount": "1.00"}], "blocks": [],
                       "devices": [{"id": evil, "kind": "sign", "up": False, "errors": 1, "last_error": evil}],
                       "round": {"id": evil, "phase": "dealing"}},
            "round": {"claims": [{"claim_id": evil, "seat": 1, "spot": evil, "status": "pending", "amount": "5.00",
                                  "description": evil}]},
            "history": [{"meter": evil, "hand": evil, "amount": "1.00", "time": "2026"}]}
    html = page.page(page.sections(snap, None, '"tok'), csrf='"tok', flash=evil)
    assert "<script>alert" not in html and "&lt;script&gt;" in html and 'value="&quot;tok"' in html
    assert html.count('<script src="/static/console.js" defer></script>') == 1  # the one script, no inline one


def test_a_daemon_not_answering_is_said_and_the_last_state_stays():
    snap = {"status": {"meters": [{"meter": "main", "amount": "10000.15"}]}, "round": {}, "history": []}
    parts = page.sections(snap, "no such socket", "t")
    assert "not answering (no such socket)" in parts["daemon"] and "$10,000.15" in parts["meters"]
    assert "Waiting for the daemon" in page.sections(None, "no such socket", "t")["meters"]


SERIES = {"day": [{"meter": "main", "span": "day", "start": "2026-11-30T11:00:00+00:00",
                   "end": "2026-11-30T15:00:00+00:00", "opening": "10000.00", "closing": "10000.00",
                   "high": "10012.345678", "low": "10000.00", "entries": 5,
                   "points": [["2026-11-30T11:00:00+00:00", "10000.00"], ["2026-11-30T12:00:00+00:00", "10012.345678"],
                              ["2026-11-30T13:00:00+00:00", "10000.00"], ["2026-11-30T15:00:00+00:00", "10000.00"]]}],
          "30d": [{"meter": "main", "span": "30d", "start": "2026-11-01T10:00:00+00:00",
                   "end": "2026-11-30T15:00:00+00:00", "opening": "10500.00", "closing": "10000.00",
                   "high": "10900.00", "low": "10000.00", "entries": 900,
                   "points": [["2026-11-01T10:00:00+00:00", "10500.00"], ["2026-11-20T10:00:00+00:00", "10900.00"],
                              ["2026-11-20T11:00:00+00:00", "10000.00"], ["2026-11-30T15:00:00+00:00", "10000.00"]]}]}


def test_the_plots_are_drawn_from_the_daemon_series_scaled_to_the_data_and_labelled():
    snap = {"status": {"meters": [{"meter": "main", "amount": "10000.00"}], "time_zone": "America/New_York",
                       "wagers": [{"spot": "progressive", "title": "Progressive Payout Wager", "meter": "main"}]},
            "round": {}, "history": [], "series": SERIES}
    html = page.sections(snap, None, "t")["plots"]
    assert html.count("<svg") == 2 and html.count('role="img"') == 2 and "<h3>Progressive Payout Wager</h3>" in html
    assert '<figure class="plot" data-meter="main" data-span="day">' in html and 'data-span="30d"' in html
    day, month = html.split('data-span="30d"')
    assert ('aria-label="Progressive Payout Wager over the gaming day so far: $10,000.00 at the start, '
            '$10,000.00 at the end, '
            'high $10,012.34, low $10,000.00"') in day  # one format for money everywhere, floored as the sign
    # the caption says when its last amount was (the series lags the live meter), never "now"
    assert "$10,000.00 at 10:00:00 EST; high $10,012.34, low $10,000.00; 5 changes" in day and " now" not in html
    assert "$10,500.00 at the start" in month and "2026-11-30 10:00:00 EST" in month
    assert "time (EST)" in day and "meter ($)" in day and ">06:00<" in day and ">10:00<" in day  # labelled axes
    (line,) = re.findall(r'<polyline [^>]*points="([^"]*)"', day)
    assert all(re.fullmatch(r"\d+,\d+", p) for p in line.split())  # integer pixels only
    xs, ys = [int(p.split(",")[0]) for p in line.split()], [int(p.split(",")[1]) for p in line.split()]
    assert xs[0] == page.LEFT and xs[-1] == page.PW - page.RIGHT  # the whole width: from the first point to the end
    assert min(ys) > page.TOP and max(ys) < page.PH - page.BOTTOM  # the high and the low inside the frame
    assert max(ys) - min(ys) > (page.PH - page.TOP - page.BOTTOM) * 3 // 4  # ... and most of its height
    assert ys[-1] == max(ys)  # the reset: back to the bottom of the line (the low)
    # a month whose journal began yesterday: scaled to the data, not a line at the right edge of 30 days
    recent = {**SERIES["30d"][0], "points": [["2026-11-29T15:00:00+00:00", "10000.00"],
                                             ["2026-11-30T15:00:00+00:00", "10000.00"]]}
    (line,) = re.findall(r'<polyline [^>]*points="([^"]*)"', page.sections(
        {**snap, "series": {"30d": [recent]}}, None, "t")["plots"])
    assert int(line.split()[0].split(",")[0]) == page.LEFT
    assert "<script" not in html
    # a change of 20 cents: the high's and the low's labels stay apart (they were 10 px apart, one over the other)
    small = {**SERIES["day"][0], "high": "10000.20", "points": [["2026-11-30T11:00:00+00:00", "10000.00"],
                                                                 ["2026-11-30T12:00:00+00:00", "10000.20"]]}
    plot = page.sections({**snap, "series": {"day": [small]}}, None, "t")["plots"]
    (low, high) = (int(y) for y in re.findall(rf'<text class="tick" x="{page.LEFT - 8}" y="(\d+)"', plot))
    assert low - high >= page.LABEL_GAP and ">$10,000.00<" in plot and ">$10,000.20<" in plot
    # what the daemon says is escaped; an answer that is not a series, or a refusal, is one line
    evil = {"day": [{**SERIES["day"][0], "meter": "<b>x"}], "30d": [{"meter": "main", "points": "nonsense"}]}
    html = page.sections({**snap, "series": evil}, None, "t")["plots"]
    assert "<b>x" not in html and "&lt;b&gt;x" in html and "not shown" in html
    html = page.sections({**snap, "series": {"error": "unknown operation 'meter_series'"}}, None, "t")["plots"]
    assert "not available: unknown operation" in html
    assert "asked once a minute" in page.sections({**snap, "series": None}, None, "t")["plots"]
    assert "Meters over time" in page.page(page.sections(snap, None, "t"), csrf="t")


def _text(html: str) -> str:
    """What a reader sees of `html`: the tags taken out, the entities read."""
    import html as htmllib

    return htmllib.unescape(re.sub(r"<[^>]+>", " ", html))


ZONE = "America/New_York"
PAYOUTS = [
    {"seat": 4, "kind": "paytable", "hand_of": "player", "hand": "royal-flush", "award": "100% of meter",
     "amount": "10017.85", "paid_by": "attendant", "shared_by": 1},
    {"seat": 6, "kind": "envy", "hand_of": "seat 4", "hand": "royal-flush", "award": "$1,000.00", "amount": "1000.00",
     "paid_by": "table", "shared_by": 1},
    {"seat": 2, "kind": "envy", "hand_of": "seat 4", "hand": "royal-flush", "award": "$5,000.00", "amount": "5000.00",
     "paid_by": "table", "shared_by": 1}]
STATUS = {"table": "CS-07", "game": "caribbean-stud", "version": "1", "time_zone": ZONE, "seats": 7,
          "round": {"id": "CS-07-r9", "phase": "dealing"}, "blocks": [],
          "wagers": [{"spot": "progressive", "title": "Progressive Payout Wager", "meter": "main"},
                     {"spot": "five-card-hand-bonus", "title": "Five Card Hand Bonus", "meter": "bonus"}],
          "meters": [{"meter": "main", "amount": "10017.85"}, {"meter": "bonus", "amount": "10000.00"}],
          "lights": {"accepted": [{"seat": 2, "spots": ["progressive"]}, {"seat": 4, "spots": ["progressive"]}],
                     "win": [4]},
          "seats_disabled": [], "devices": []}
ROUND = {"id": "CS-07-r9", "phase": "dealing",
         "wagers": [{"seat": 2, "spot": "progressive", "amount": "5.00"}, {"seat": 4, "spot": "progressive",
                                                                           "amount": "1.00"},
                    {"seat": 6, "spot": "progressive", "amount": "1.00"}],
         "claims": [{"claim_id": "CS-07-r9-c1", "seat": 4, "spot": "progressive", "status": "pending",
                     "amount": "10017.85", "total": "16017.85", "cards": "AS KS QS JS TS", "by": "",
                     "claimed_by": "dealer", "payouts": PAYOUTS,
                     "description": "claim CS-07-r9-c1: seat 4 AS KS QS JS TS: royal-flush 100% of meter = $10017.85"}],
         "void_requested": None}


def test_a_pending_claim_comes_first_with_every_payout_and_the_total_approved():
    parts = page.sections({"status": STATUS, "round": ROUND, "history": []}, None, "tok")
    html = page.page(parts, csrf="tok", table="CS-07", zone=ZONE)
    assert html.index('id="claims"') < html.index('id="daemon"') < html.index('id="meters"')  # the first thing
    claim = " ".join(_text(parts["claims"]).split())
    assert "JACKPOT CLAIM" in claim and "Seat 4 · Progressive Payout Wager · Royal flush A♠ K♠ Q♠ J♠ 10♠" in claim
    rows = re.findall(r'<tr class="payout kind-(\w+)">(.*?)</tr>', parts["claims"])
    assert [k for k, _ in rows] == ["paytable", "envy", "envy"]
    said = [" ".join(_text(r).split()) for _, r in rows]
    assert said == ["Seat 4 Jackpot Royal flush 100% of meter $10,017.85",
                    "Seat 6 Envy Bonus Royal flush at seat 4 $1,000.00 $1,000.00",
                    "Seat 2 Envy Bonus Royal flush at seat 4 $5,000.00 $5,000.00"]
    assert "Total the supervisor approves $16,017.85" in claim
    assert "✔ Approve $16,016.85" not in claim and "✔ Approve $16,017.85" in claim
    assert "$10017.85" not in _text(html)  # the daemon's own description is not what is shown

    # a fixed award (four of a kind, 300 for 1) is an award, not a jackpot
    four = {**ROUND["claims"][0], "total": "300.00", "payouts": [
        {"seat": 4, "kind": "paytable", "hand": "four-of-a-kind", "award": "300 for 1", "amount": "300.00"}]}
    fixed = " ".join(_text(page.sections({"status": STATUS, "round": {**ROUND, "claims": [four]}, "history": []},
                                         None, "tok")["claims"]).split())
    assert "AWARD CLAIM · AWAITING A SUPERVISOR" in fixed and "JACKPOT" not in fixed


def test_a_decided_claim_says_who_paid_it_and_on_whose_hand():
    """A Five Card Hand Bonus on the dealer's hand the table paid read "PAID by dealer: seat dealer"."""
    dealer = {"claim_id": "CS-07-r9-c2", "seat": "dealer", "spot": "five-card-hand-bonus", "status": "paid",
              "amount": "100.00", "total": "100.00", "by": "dealer", "claimed_by": "dealer", "payouts": [{}, {}]}
    approved = {**ROUND["claims"][0], "status": "paid", "by": "floor-1"}
    claims = page.sections({"status": STATUS, "round": {**ROUND, "claims": [approved, dealer]}, "history": []},
                           None, "t")["claims"]
    said = [" ".join(_text(li).split()) for li in re.findall(r"<li[^>]*>(.*?)</li>", claims)]
    assert said == ["✔ PAID by floor-1: seat 4, Progressive Payout Wager, $16,017.85 (3 payouts) claim CS-07-r9-c1",
                    "✔ PAID by the table (no supervisor needed): the dealer's hand, Five Card Hand Bonus, $100.00 "
                    "(2 payouts) claim CS-07-r9-c2"]
    # a wager on the dealer's hand whose title says so: the hand not said twice
    titled = {**STATUS, "wagers": [*STATUS["wagers"], {"spot": "five-card-hand-bonus-dealer", "meter": "bonus",
                                                       "title": "Five Card Hand Bonus Wager (dealer's hand)"}]}
    on_dealer = {**dealer, "spot": "five-card-hand-bonus-dealer"}
    assert page.claim_on(on_dealer, titled, ", ", "seat") == "Five Card Hand Bonus Wager (dealer&#x27;s hand)"
    assert page.claim_on(ROUND["claims"][0], titled, " · ") == "Seat 4 · Progressive Payout Wager"


def test_the_seat_map_says_in_words_who_wagered_what_is_lit_disabled_and_claimed():
    status = {**STATUS, "seats_disabled": [{"seat": 6, "device": "seat-6", "reason": "unit 6: no reply"}]}
    seats = page.sections({"status": status, "round": ROUND, "history": []}, None, "t")["seats"]
    tiles = dict(re.findall(r'data-seat="(\d)"><h3>Seat \d</h3>(.*?)</ul></div>', seats))
    assert len(tiles) == 7
    two, four, six = (" ".join(_text(tiles[n]).split()) for n in "246")
    assert two == "● Progressive Payout Wager $5.00 light on"
    assert four == "★ CLAIM PENDING ✦ Win light on ● Progressive Payout Wager $1.00 light on"
    assert six == "✖ DISABLED (seat-6 down) ○ Progressive Payout Wager $1.00 light off"
    assert _text(tiles["1"]).strip() == "No wager"
    round_text = " ".join(_text(page.sections({"status": status, "round": ROUND, "history": []}, None, "t")
                                ["round"]).split())
    assert "Seat 6 DISABLED: seat-6 is down: no reply" in round_text  # never the daemon's list as Python prints it


def test_one_unplugged_cable_is_one_line_and_a_recovered_device_s_error_is_folded():
    bus = {"bus": "table-bus", "port": "/dev/ttyUSB0"}
    devices = [{"id": f"seat-{n}", "kind": "seat", "up": False, "errors": 1, "since": f"2026-12-05T15:41:0{n}Z",
                "last_error": f"unit {n} function 4: no usable reply after 3 attempt(s) (timeout)", **bus}
               for n in range(1, 8)]
    devices += [{"id": "lockout", "kind": "lockout", "up": False, "errors": 1, "since": "2026-12-05T15:41:08Z",
                 "last_error": "unit 20: no usable reply after 3 attempt(s) (timeout)", **bus},
                {"id": "sign", "kind": "sign", "up": False, "errors": 1, "since": "2026-12-05T15:41:09Z",
                 "last_error": "unit 30: no usable reply after 3 attempt(s) (timeout)", **bus},
                {"id": "shoe", "kind": "card-counter", "up": True, "errors": 2, "since": "2026-12-05T15:40:00Z",
                 "last_error": "a long line about a jam " * 4, "bus": None, "port": "/dev/ttyUSB2"}]
    disabled = [{"seat": n, "device": f"seat-{n}", "reason": d["last_error"]} for n, d in enumerate(devices[:7], 1)]
    status = {**STATUS, "devices": devices, "seats_disabled": disabled}
    parts = page.sections({"status": status, "round": ROUND, "history": []}, None, "t")
    problems = re.findall(r'<p class="alarm problem">(.*?)</p>', parts["devices"])
    assert [" ".join(_text(p).split()) for p in problems] == [
        "✖ bus table-bus (/dev/ttyUSB0) down since 10:41:01 EST: seats 1-7, lock-out and sign unreachable "
        "(no usable reply in 3 tries (timed out))"]
    assert page.cause("unit 2 function 3: no usable reply after 3 attempt(s) (timeout, crc, timeout)") == \
        "no usable reply in 3 tries (timed out, crc)"
    shoe = re.search(r'<tr class="up" data-device="shoe">(.*?)</tr>', parts["devices"]).group(1)
    assert '<details data-key="err-shoe"><summary>2</summary>' in shoe  # folded: the count, the text on a tap
    assert "Seats 1-7 DISABLED: their wagering devices are down" in " ".join(_text(parts["round"]).split())
    page_text = _text(page.page(parts, csrf="t"))
    assert not [raw for raw in ("[{", "{'", "None", "True", "False") if raw in page_text]
    assert page.seats_text([1, 2, 3, 5]) == "seats 1-3 and 5" and page.seats_text([4]) == "seat 4"
    assert page.seats_text([1, 2, 5, 6]) == "seats 1, 2 and 5, 6"


def test_the_hit_history_is_in_the_casino_s_time_with_its_envy_bonuses_named():
    history = [{"meter": "main", "number": 1, "time": "2026-12-05T15:41:07.123456Z", "round": "CS-07-r9", "seat": 4,
                "hand": "royal-flush", "award": "100% of meter", "amount": "10017.85", "paid_by": "attendant",
                "approved_by": "floor-1", "kind": "jackpot"},
               {"meter": "main", "number": 2, "time": "2026-07-05T15:41:08.5Z", "round": "CS-07-r9", "seat": 2,
                "hand": "royal-flush", "award": "$5,000.00", "amount": "5000.00", "paid_by": "table",
                "approved_by": "floor-1", "kind": "envy"},
               {"meter": "bonus", "number": 1, "time": "2026-07-05T15:41:06Z", "round": "CS-07-r8", "seat": 3,
                "hand": "flush (dealer's hand)", "award": "50 for 1", "amount": "50.00", "paid_by": "table",
                "approved_by": "dealer", "kind": "award"}]
    html = page.sections({"status": STATUS, "round": ROUND, "history": history}, None, "t")["history"]
    rows = [" ".join(_text(r).split()) for r in re.findall(r"<tr class=\"hit.*?</tr>", html)]
    assert rows == [
        "10:41:07 EST 2026-12-05 · round CS-07-r9 Progressive Payout Wager #1 4 Jackpot 100% of meter Royal flush "
        "$10,017.85 attendant approved by floor-1",
        "11:41:08 EDT 2026-07-05 · round CS-07-r9 Progressive Payout Wager #2 2 Envy Bonus Royal flush (another "
        "player's hand) $5,000.00 table approved by floor-1",
        "11:41:06 EDT 2026-07-05 · round CS-07-r8 Five Card Hand Bonus #1 3 Award 50 for 1 Flush (dealer's hand) "
        "$50.00 table no supervisor needed"]  # the table paid it on the dealer's claim: "approved by dealer" was wrong
    assert page.local_time("2026-12-05T15:41:07Z", page.zone_of({"time_zone": "Nope/Nowhere"})) == \
        "2026-12-05 15:41:07 UTC"  # a zone the box does not know: UTC, said so


def test_the_table_s_names_are_on_the_page_its_login_and_its_clock():
    parts = page.sections({"status": STATUS, "round": ROUND, "history": []}, None, "t")
    html = page.page(parts, csrf="t", table="CS-07", zone=ZONE)
    assert "<title>CS-07 · Pit console</title>" in html and '<time id="clock" data-zone="America/New_York"' in html
    assert re.search(r'title="[^"]*">\d\d:\d\d:\d\d E[SD]T</time>', html)
    assert "Five Card Hand Bonus</span><small class=\"id\">meter bonus" in parts["meters"]
    login = page.login_page(csrf="t", table="CS-07")
    assert "<title>CS-07 · Pit console: log in</title>" in login and "Log in as a supervisor of table CS-07" in login
    assert page.identity({"status": STATUS}) == ("CS-07", ZONE) and page.identity(None) == (None, None)
    # the daemon's answers in the page's words: one format of money, the cards' suits, the hand and payouts named
    assert page.money_words("royal-flush = $10017.85, envy bonus $1,000.00 <b>") == \
        "Royal flush = $10,017.85, Envy Bonus $1,000.00 &lt;b&gt;"
    assert page.money_words("claim CS-07-r3-c1: seat 5 AS KS QS JS TS: royal-flush 100% of meter = $10001.65, "
                            "envy bonus to seat 6 $1,000.00: approved by floor-1 and paid") == \
        ("claim CS-07-r3-c1: seat 5 A♠ K♠ Q♠ J♠ 10♠: Royal flush 100% of meter = $10,001.65, "
         "Envy Bonus to seat 6 $1,000.00: approved by floor-1 and paid")
    assert page.money_words("three-of-a-kind 9C 9D 9H AS KS and four-of-a-kind") == \
        "Three of a kind 9♣ 9♦ 9♥ A♠ K♠ and Four of a kind"
    assert "Table <b>CS-07</b> · Caribbean Stud Poker · controller" in parts["daemon"]
    # settle while dealing, void while a round is open: each with a supervisor's name and secret
    assert 'action="/settle"' in parts["round"] and 'action="/void"' in parts["round"]
    assert parts["round"].count('name="secret"') == 2 and 'name="round_id" value="CS-07-r9"' in parts["round"]
    betting = page.sections({"status": {**STATUS, "round": {"id": "CS-07-r10", "phase": "betting"}},
                             "round": {}, "history": []}, None, "t")["round"]
    assert 'action="/settle"' not in betting and 'action="/void"' in betting


def test_a_hit_says_whether_it_was_an_envy_bonus_from_the_table_s_paytable():
    from datetime import UTC, datetime

    from controller.config import load_config
    from controller.meter.state import Hit
    from controller.service.views import hit_json, hit_kind, table_json

    cfg = load_config(TABLE)
    at = datetime(2026, 12, 5, 15, 41, 7, tzinfo=UTC)

    def hit(hand, award, paid_by):
        return Hit(1, "CS-07", "CS-07-r1", 2, hand, award, 100_000, paid_by, 1, 0, 0, at, "floor-1")

    assert hit_kind(cfg, "main", hit("royal-flush", "$1,000.00", "table")) == "envy"
    assert hit_kind(cfg, "main", hit("straight-flush", "$1,500.00", "table")) == "envy"
    assert hit_kind(cfg, "main", hit("royal-flush", "100% of meter", "attendant")) == "jackpot"
    assert hit_kind(cfg, "bonus", hit("royal-flush", "$1,000.00", "table")) != "envy"  # no envy table there
    assert hit_json("main", hit("royal-flush", "$1,000.00", "table"), "envy")["kind"] == "envy"
    assert "kind" not in hit_json("main", hit("royal-flush", "$1,000.00", "table"))  # as the CLI's audit prints it
    assert table_json(cfg)["time_zone"] == cfg.report.time_zone and table_json(cfg)["seats"] == 7


# --- the command line --------------------------------------------------------------------------------


@pytest.mark.parametrize("args, says", [
    (["--listen", "0.0.0.0:8480"], "not a loopback address: on the network the console needs --tls-cert"),
    (["--listen", "10.0.0.5:8480", "--tls-cert", "c.pem"], "--tls-cert and --tls-key go together"),
    (["--listen", "nowhere"], "--listen: 'nowhere' is not HOST:PORT"),
    (["--listen", "10.0.0.5:8480", "--tls-cert", "no.pem", "--tls-key", "no.key"], "--tls-cert no.pem"),
])
def test_the_network_without_tls_is_refused_in_one_line(tmp_path, args, says):
    r = subprocess.run([str(CONSOLE), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr, r.stderr


def test_a_socket_systemd_passes_that_is_not_a_listening_tcp_one_is_refused_in_one_line(tmp_path):
    with socket.socket() as tcp, socket.create_server(("127.0.0.1", 0)) as listening:
        for sock, args, says in ((tcp, (), "the socket systemd passed: fd 3: a TCP socket that is not listening"),
                                 (listening, ("--listen", "127.0.0.1:1"), "the socket systemd passed listens on")):
            r = subprocess.run(activated(sock, *args), capture_output=True, text=True, cwd=tmp_path, timeout=60,
                               pass_fds=(sock.fileno(),))
            assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and says in r.stderr, r.stderr


# --- the daemon's `authenticate` ------------------------------------------------------------------------


async def test_authenticate_checks_a_credential_through_the_throttled_check(tmp_path):
    async with console_on_rig(tmp_path) as (daemon, _rig, _console):
        assert await daemon.call("authenticate", dict(FLOOR)) == {"supervisor": SUPERVISOR}
        with pytest.raises(PermissionError, match="not accepted"):
            await daemon.call("authenticate", {"supervisor": SUPERVISOR, "secret": WRONG})
        with pytest.raises(PermissionError):
            await daemon.call("authenticate", {"supervisor": SUPERVISOR})
        for _ in range(3):  # five wrong guesses of one user: locked out, as for approve
            with pytest.raises(PermissionError):
                await daemon.call("authenticate", {"supervisor": SUPERVISOR, "secret": WRONG})
        with pytest.raises(PermissionError, match="too many wrong secrets"):
            await daemon.call("authenticate", dict(FLOOR))


def test_refused_connections_from_many_addresses_are_logged_a_bounded_number_of_times():
    from structlog.testing import capture_logs

    crowded = gate.Connections(per_address=0)
    with capture_logs() as logged:
        for i in range(5_000):  # an IPv6 /64 has 2**64 source addresses
            address = f"2001:db8::{i:x}"
            crowded.log_refusal(address, crowded.take(address) or "")
    assert len(logged) == gate.REFUSAL_LINES
    assert len(crowded.refusals._spent) <= crowded.refusals.max_keys + 1


# --- over HTTP -------------------------------------------------------------------------------------------


async def _page(http, console, want: str | None = None) -> str:
    """The page, once it shows `want` (the console polls the daemon every 0.5 s)."""
    html = ""

    async def get() -> str:
        nonlocal html
        async with http.get(console.url) as r:
            assert r.status == 200
            html = await r.text()
        return html

    async with asyncio.timeout(10):
        while want is not None and want not in await get():
            await asyncio.sleep(0.05)
    return html if want is not None else await get()


async def test_approvals_go_through_the_daemon_and_no_secret_reaches_a_url_or_the_log(tmp_path):
    async with console_on_rig(tmp_path) as (daemon, rig, console), console.client() as http:
        await lock_round(daemon, rig, [(4, "progressive")])
        claim = (await daemon.call("claim", {"seat": 4, "cards": ROYAL}))["claim_id"]
        html = await _page(http, console, f'data-claim="{claim}"')
        token = csrf_of(html)
        async with http.get(console.url) as r:
            assert r.headers["X-Frame-Options"] == "DENY" and r.headers["Cache-Control"] == "no-store"
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            assert "unsafe-inline" not in r.headers["Content-Security-Policy"]
            cookie = r.headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
        own = {"Origin": console.origin}

        async def post(data, headers=own, path="approve"):
            async with http.post(console.url + path, data=data, headers=headers, allow_redirects=False) as r:
                return r.status, await r.text()

        form = {"csrf": token, "claim_id": claim, **FLOOR}
        async with http.get(console.url + f"?secret={SECRET}") as r:
            assert r.status == 400 and "never sent in a URL" in await r.text()
        async with http.post(console.url + f"approve?secret={SECRET}", data=form, headers=own) as r:
            assert r.status == 400
        assert (await post({**form, "csrf": "forged"}))[0] == 403  # no token of this session
        assert (await post({k: v for k, v in form.items() if k != "csrf"}))[0] == 403
        assert (await post(form, {"Origin": "http://evil.example"}))[0] == 403  # another site's form
        assert (await post(form, {}))[0] == 403  # neither Origin nor Referer
        async with http.get(console.url, headers={"Host": f"evil.example:{console.url.split(':')[-1][:-1]}"}) as r:
            assert r.status == 421  # DNS rebinding: the box's own name only
        assert daemon.desk.state.claims[0].status == "pending"  # none of these reached the daemon

        assert (await post({**form, "secret": ""}))[0] == 303  # the daemon refuses, the page says so
        assert "refused: supervisor name or credential not accepted" in await _page(http, console)
        assert (await post({**form, "supervisor": TYPED, "secret": WRONG}))[0] == 303  # a secret in the name field
        assert "refused" in await _page(http, console)
        assert daemon.desk.state.claims[0].status == "pending"

        assert (await post(form))[0] == 303
        html = await _page(http, console, "No claim awaits a supervisor")
        assert daemon.desk.state.claims[0].status == "paid"
        assert daemon.ledger.state["main"].current_cents == 1_000_000  # reset to $10,000.00
        await _page(http, console, 'data-meter="main">$10,000.00<')
    log = console.log.read_text()
    entries = [json.loads(line) for line in log.splitlines()]
    assert any(e["event"] == "console request" and e["method"] == "POST" and e["path"] == "/approve"
               for e in entries)
    assert any(e["event"] == "console action done" and e["claim"] == claim for e in entries)
    assert SECRET not in log and WRONG not in log and "secret=" not in log and token not in log
    assert TYPED not in log and any(  # a refused name is logged as a fingerprint only
        e["event"] == "console action refused" and e["supervisor"] == server._typed(TYPED) for e in entries)


def test_a_refusal_names_no_field_the_supervisor_did_not_type():
    """Settling with a claim open read "settle of CS-07-r5 refused: round_id: CS-07-r5-c1 awaits ...": the page sent
    round_id itself. A field the supervisor typed is named as the form labels it."""
    assert server.refusal(ControlError("rules", "CS-07-r5-c1 awaits a supervisor's approval", "round_id")) == \
        "CS-07-r5-c1 awaits a supervisor's approval"
    assert server.refusal(ControlError("bad_request", "must not be empty", "reason")) == "the reason: must not be empty"
    assert server.refusal(ControlError("auth", "supervisor name or credential not accepted")) == \
        "supervisor name or credential not accepted"
    assert server.refusal(ControlError("bad_request", "odd", "other.field")) == "other.field: odd"


async def test_a_supervisor_settles_and_voids_the_round_on_the_page_through_the_daemon_s_checks(tmp_path):
    async with console_on_rig(tmp_path) as (daemon, rig, console), console.client() as http:
        await lock_round(daemon, rig, [(4, "progressive")])
        first = daemon._round_id()
        token = csrf_of(await _page(http, console, 'action="/settle"'))
        own = {"Origin": console.origin}

        async def post(path, data, headers=own):
            async with http.post(console.url + path, data=data, headers=headers, allow_redirects=False) as r:
                return r.status

        settle = {"csrf": token, "round_id": first, **FLOOR}
        assert await post("settle", {k: v for k, v in settle.items() if k != "csrf"}) == 403  # no token: not asked
        assert await post("settle", settle, {"Origin": "http://evil.example"}) == 403
        assert await post("settle", {**settle, "secret": WRONG}) == 303
        assert f"settle of {first} refused: supervisor name or credential not accepted" in await _page(http, console)
        assert daemon._round_id() == first and daemon.state.phase.value == "dealing"
        assert await post("settle", settle) == 303
        assert f"round {first} settled (1 wager)" in await _page(http, console)  # the answer, once
        await _page(http, console, "BETTING open")
        second = daemon._round_id()
        assert second != first

        # a void form of the round just settled voids nothing (the daemon voids its current round)
        void = {"csrf": token, "round_id": first, "reason": "misdeal", **FLOOR}
        assert await post("void", void) == 303
        assert f"round {first} is no longer the current round ({second}): nothing voided" in await _page(http, console)
        await lock_round(daemon, rig, [(2, "progressive")])
        assert daemon._round_id() == second
        await _page(http, console, "DEALING")
        assert await post("void", {**void, "round_id": second, "reason": ""}) == 303  # the daemon asks why
        assert "say why the round is voided" in await _page(http, console)
        assert await post("void", {**void, "round_id": second}) == 303
        assert f"round {second} voided: 1 wagers returned" in await _page(http, console)
        assert daemon._round_id() != second
    log = console.log.read_text()
    assert SECRET not in log and WRONG not in log


async def test_a_meter_change_is_on_the_open_page_within_a_second(tmp_path):
    async with console_on_rig(tmp_path) as (daemon, rig, console), console.client() as http:
        await _page(http, console, 'data-meter="main">$10,000.00<')
        changed_at: dict[str, float] = {}

        async def stream() -> None:
            async with http.get(console.url + "events") as r:
                assert r.headers["Content-Type"] == "text/event-stream"
                async for line in r.content:
                    meters = json.loads(line[5:]).get("meters", "") if line.startswith(b"data:") else ""
                    if 'data-meter="main">' in meters and 'data-meter="main">$10,000.00<' not in meters:
                        changed_at["page"] = time.monotonic()
                        return

        async def daemon_side() -> None:
            await until(lambda: daemon.ledger.state["main"].current_cents != 1_000_000, "the meter grew")
            changed_at["daemon"] = time.monotonic()

        async with asyncio.timeout(20), asyncio.TaskGroup() as tg:
            tg.create_task(stream())
            tg.create_task(daemon_side())
            await lock_round(daemon, rig, [(4, "progressive")])  # a $1 wager: its contribution to the meter
        delay = changed_at["page"] - changed_at["daemon"]
        print(f"meter change on the page {delay * 1000:.0f} ms after the daemon's")
        assert delay < 1.0


async def test_on_the_network_a_supervisor_logs_in_and_guesses_are_cut_short(tmp_path):
    async with tls_console_on_rig(tmp_path) as (daemon, _rig, console), console.client() as http:
        token, cookie = await login_form(http, console)
        assert "Secure" in cookie
        own = {"Origin": console.origin}

        async def login(secret: str) -> str:
            async with http.post(console.url + "login", data={"csrf": token, "supervisor": SUPERVISOR,
                                                               "secret": secret}, headers=own) as r:
                return await r.text()

        # a burst from one address: counted guess by guess, so only 3 reach the daemon, and the address is locked
        # out by the console before the daemon locks its user out (5). (The answers share one session: its one-time
        # message goes to whichever page loads first, so the daemon's count is what is checked.)
        def failures() -> float:
            return daemon.metrics.registry.get_sample_value("progressive_auth_failures_total") or 0.0

        before = failures()
        await asyncio.gather(*(login(WRONG) for _ in range(8)))
        assert failures() - before == 3
        assert "too many wrong secrets from this address" in await login(SECRET)
        assert await daemon.call("authenticate", dict(FLOOR)) == {"supervisor": SUPERVISOR}
        console_log = console.log.read_text()
        assert "console secret guesses: address locked out" in console_log and SECRET not in console_log


async def test_every_loopback_address_is_one_client_for_the_guess_count(tmp_path):
    """Wrong secrets from 127.0.0.2 and 127.0.0.3 at once, 4 each: they share one count, so 3 reach the daemon
    and both addresses are refused after (before, each address of 127.0.0.0/8 had a count of its own: 6 reached
    the daemon, past its lock-out of the console's user at 5)."""
    async with tls_console_on_rig(tmp_path) as (daemon, _rig, console):

        def failures() -> float:
            return daemon.metrics.registry.get_sample_value("progressive_auth_failures_total") or 0.0

        async def logins(source: str, secrets: list[str]) -> list[str]:
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), connector=aiohttp.TCPConnector(
                    ssl=False, local_addr=(source, 0))) as http:
                token, _ = await login_form(http, console)

                async def login(secret: str) -> str:
                    async with http.post(console.url + "login", data={"csrf": token, "supervisor": SUPERVISOR,
                                                                       "secret": secret},
                                         headers={"Origin": console.origin}) as r:
                        return await r.text()

                return list(await asyncio.gather(*(login(s) for s in secrets)))

        before = failures()
        await asyncio.gather(logins("127.0.0.2", [WRONG] * 4), logins("127.0.0.3", [WRONG] * 4))
        assert failures() - before == 3
        for source in ("127.0.0.2", "127.0.0.3"):
            assert "too many wrong secrets from this address" in (await logins(source, [SECRET]))[0]
        assert await daemon.call("authenticate", dict(FLOOR)) == {"supervisor": SUPERVISOR}  # its user not locked


def test_every_loopback_address_is_one_client():
    assert {page.client_address(a) for a in ("127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "::ffff:127.0.0.3")} \
        == {page.client_address("127.0.0.1")}
    assert page.client_address("::ffff:10.1.2.3") == "10.1.2.3" and page.client_address("10.1.2.4") == "10.1.2.4"
    assert page.client_address(None) == "?"


async def test_a_right_secret_between_wrong_ones_clears_no_address_count(tmp_path):
    """2 wrong secrets, a right one, 1 wrong: the address is locked at its third wrong one all the same (a right
    secret used to clear the address's count, so one known secret kept a guesser under the limit for ever)."""
    async with tls_console_on_rig(tmp_path) as (_daemon, _rig, console):

        async def login(secret: str) -> str:
            async with console.client() as http:  # a fresh browser each time: a login makes a new session
                token, _ = await login_form(http, console)
                async with http.post(console.url + "login", data={"csrf": token, "supervisor": SUPERVISOR,
                                                                   "secret": secret},
                                     headers={"Origin": console.origin}) as r:
                    return await r.text()

        for secret in (WRONG, WRONG, SECRET, WRONG):
            assert "too many wrong secrets" not in await login(secret)
        assert "too many wrong secrets from this address" in await login(SECRET)


async def test_after_a_login_the_page_is_served_and_a_new_session_made(tmp_path):
    async with tls_console_on_rig(tmp_path) as (_daemon, _rig, console), console.client() as http:
        async with http.get(console.url + "login") as r:
            token = csrf_of(await r.text())
            before = r.cookies["pit_session"].value
        async with http.post(console.url + "login", data={"csrf": token, **FLOOR},
                             headers={"Origin": console.origin}, allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/"
            after = r.cookies["pit_session"].value
            assert after != before  # a session planted before the login is worth nothing
        html = await _page(http, console, 'id="meters"')
        assert f"<span>{SUPERVISOR}</span>" in html and csrf_of(html) != token
        async with http.post(console.url + "logout", data={"csrf": csrf_of(html)},
                             headers={"Origin": console.origin}, allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/login"
        async with http.get(console.url, allow_redirects=False, cookies={"pit_session": after}) as r:
            assert r.status == 303  # the session is gone on the server, not only from the browser


async def test_a_flood_of_login_forms_pushes_no_visitor_s_token_out(tmp_path):
    """A login form's token is signed, not stored: any number of visitors leaves the first one's form good."""
    async with tls_console_on_rig(tmp_path) as (_daemon, _rig, console), console.client() as http:
        async with http.get(console.url + "login") as r:
            token = csrf_of(await r.text())
        flood = 4 * server.MAX_SESSIONS  # the cap of the table that anonymous visitors' tokens lived in before
        strangers = aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar(),  # a new visitor every time
                                          connector=aiohttp.TCPConnector(ssl=False, limit=8))
        async with strangers:
            async def visit() -> None:
                async with strangers.get(console.url + "login") as r:
                    assert r.status == 200 and "pit_session" in r.headers["Set-Cookie"]
                    await r.read()

            started = time.monotonic()
            await asyncio.gather(*(visit() for _ in range(flood)))
            print(f"{flood} login forms in {time.monotonic() - started:.2f} s")
        async with http.post(console.url + "login", data={"csrf": token, **FLOOR},
                             headers={"Origin": console.origin}, allow_redirects=False) as r:
            assert r.status == 303 and r.headers["Location"] == "/", await r.text()
        assert f"<span>{SUPERVISOR}</span>" in await _page(http, console, 'id="meters"')


async def test_with_login_always_the_loopback_console_asks_for_a_login_too(tmp_path):
    async with console_process(tmp_path / "control.sock", tmp_path / "console.log", "--login", "always") as console, \
            console.client() as http:
        token, cookie = await login_form(http, console)
        assert "Secure" not in cookie  # plain HTTP on loopback
        async with http.post(console.url + "login", data={"csrf": token, **FLOOR},
                             headers={"Origin": console.origin}) as r:  # no daemon to check the secret
            assert "not logged in: " in await r.text()
        async with http.get(console.url, allow_redirects=False) as r:
            assert r.status == 303


async def test_the_console_serves_on_the_socket_systemd_holds_and_a_visitor_waits_through_a_restart(tmp_path):
    sock = tmp_path / "control.sock"
    with socket.create_server(("127.0.0.1", 0)) as listening:  # what progressive-console.socket holds
        port = listening.getsockname()[1]
        async with console_process(sock, tmp_path / "first.log", listening=listening) as console, \
                console.client() as http:
            assert "The daemon is not answering" in await _page(http, console, "not answering")
        serving = [e for e in map(json.loads, (tmp_path / "first.log").read_text().splitlines())
                   if e["event"] == "console serving"]
        assert serving[0]["inherited"] is True and serving[0]["url"] == f"http://127.0.0.1:{port}/"
        with pytest.raises(OSError) as squatter:  # the console is down: the port is still held
            socket.create_server(("127.0.0.1", port)).close()
        assert squatter.value.errno == errno.EADDRINUSE
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # queued by the kernel meanwhile
        try:
            writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
            async with console_process(sock, tmp_path / "second.log", listening=listening):
                async with asyncio.timeout(10):
                    assert (await reader.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200 ")
        finally:
            writer.close()


async def test_slow_and_crowding_clients_are_cut_off(tmp_path):
    """Raw sockets against the console process: a trickled request head or body is cut off; event streams are
    capped per client address and in all; connections per address."""
    async with console_process(tmp_path / "control.sock", tmp_path / "console.log") as console:
        port = int(console.origin.rsplit(":", 1)[1])
        head = b"Host: 127.0.0.1:%d\r\nCookie: pit_session=%s\r\n" % (port, b"c" * 43)

        async def connect(source: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))

        async def trickled(source: str, start: bytes) -> tuple[bytes, float]:
            """What the console answers to `start` followed by a byte every 0.3 s, and after how long it closed."""
            reader, writer = await connect(source)
            begun = time.monotonic()

            async def trickle() -> None:
                writer.write(start)
                with contextlib.suppress(ConnectionError):
                    while not writer.is_closing():
                        await asyncio.sleep(0.3)  # the pace of a slow client, not a wait for the server
                        writer.write(b"X")
                        await writer.drain()

            async with asyncio.timeout(15), asyncio.TaskGroup() as tg:
                sending = tg.create_task(trickle())
                try:
                    answer = await reader.read()
                except ConnectionError:
                    answer = b""
                elapsed = time.monotonic() - begun
                sending.cancel()
            writer.close()
            return answer, elapsed

        async def stream(source: str) -> tuple[bytes, asyncio.StreamWriter]:
            reader, writer = await connect(source)
            writer.write(b"GET /events HTTP/1.1\r\n" + head + b"Connection: close\r\n\r\n")
            async with asyncio.timeout(5):
                status = await reader.readuntil(b"\r\n")
                if not status.startswith(b"HTTP/1.1 200 "):
                    status += await reader.read()
            return status, writer

        async def crowd() -> None:
            streams = [await stream("127.0.0.1") for _ in range(server.MAX_STREAMS_PER_ADDRESS)]
            assert all(s.startswith(b"HTTP/1.1 200 ") for s, _ in streams)
            refused, _ = await stream("127.0.0.1")
            assert refused.startswith(b"HTTP/1.1 429 ") and b"pages open from one address" in refused
            for n in range(2, 2 + server.MAX_STREAMS // server.MAX_STREAMS_PER_ADDRESS - 1):
                streams += [await stream(f"127.0.0.{n}") for _ in range(server.MAX_STREAMS_PER_ADDRESS)]
            assert all(s.startswith(b"HTTP/1.1 200 ") for s, _ in streams) and len(streams) == server.MAX_STREAMS
            refused, _ = await stream("127.0.0.20")
            assert refused.startswith(b"HTTP/1.1 503 ") and b"pages open at once" in refused
            streams.pop(0)[1].close()  # a page goes away: its place is free within a second
            async with asyncio.timeout(3):
                while not (got := await stream("127.0.0.1"))[0].startswith(b"HTTP/1.1 200 "):
                    got[1].close()
            for _, writer in [*streams, got]:
                writer.close()
            idle = [await connect("127.0.0.30") for _ in range(gate.MAX_PER_ADDRESS)]
            reader, writer = await connect("127.0.0.30")
            async with asyncio.timeout(5):
                refused = await reader.read()
            assert refused.startswith(b"HTTP/1.1 503 ") and b"connections from one address" in refused
            for _ in range(5):  # refused again: answered each time, logged once
                again, w = await connect("127.0.0.30")
                async with asyncio.timeout(5):
                    assert (await again.read()).startswith(b"HTTP/1.1 503 ")
                w.close()
            for _, w in [*idle, (reader, writer)]:
                w.close()

        async with asyncio.TaskGroup() as tg:
            slow_head = tg.create_task(trickled("127.0.0.40", b"GET / HTTP/1.1\r\n" + head + b"X-Slow: "))
            slow_body = tg.create_task(trickled(
                "127.0.0.41", b"POST /login HTTP/1.1\r\n" + head + b"Origin: %s\r\nContent-Length: 900\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\n\r\ncsrf=" % console.origin.encode()))
            tg.create_task(crowd())
        (answer, head_s), (body_answer, body_s) = slow_head.result(), slow_body.result()
        print(f"trickled head cut off after {head_s:.2f} s, trickled body answered 408 and closed after {body_s:.2f} s")
        assert answer == b"" and gate.HEAD_S - 0.5 < head_s < gate.HEAD_S + 2
        assert body_answer.startswith(b"HTTP/1.1 408 ") and server.BODY_S - 0.5 < body_s < server.BODY_S + 2
    assert console.log.read_text().count("console connection refused") == 1


async def test_tls_connections_are_counted_before_their_handshake(tmp_path):
    """Silent TCP connections to the TLS console (no ClientHello) count against the caps while their handshakes
    wait: one address holds at most MAX_PER_ADDRESS of the console's open files; another still gets its page."""
    cert, key = await asyncio.to_thread(self_signed, tmp_path)
    async with console_process(tmp_path / "control.sock", tmp_path / "console.log", "--tls-cert", str(cert),
                               "--tls-key", str(key), tls=True) as console:
        port = int(console.origin.rsplit(":", 1)[1])
        fds = functools.partial(lambda pid: len(os.listdir(f"/proc/{pid}/fd")), console.proc.pid)
        at_rest = fds()
        silent = [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.60", 0))
                  for _ in range(gate.MAX_PER_ADDRESS + 40)]
        reads = [asyncio.ensure_future(reader.read()) for reader, _ in silent]
        closed, waiting = await asyncio.wait(reads, timeout=gate.HEAD_S - 2)  # before any handshake's own timer
        held = fds() - at_rest
        print(f"{len(silent)} silent connections from one address: {len(closed)} closed at once, "
              f"the console holds {held} more files")
        assert len(closed) == 40 and len(waiting) == gate.MAX_PER_ADDRESS and held <= gate.MAX_PER_ADDRESS + 2
        async with console.client() as http, http.get(console.url + "login", ssl=False) as r:
            assert r.status == 200  # from 127.0.0.1: another address
        for _, writer in silent:
            writer.close()
        await asyncio.wait(waiting, timeout=gate.HEAD_S)
    assert console.log.read_text().count("console connection refused") == 1


async def test_bad_input_is_refused_in_one_line_and_kept_out_of_the_log(tmp_path):
    """A token or cookie that is not ASCII, a form that cannot be read, a request aiohttp cannot parse: each is
    answered 400/403 in one line, not 500; the request's text (a secret in it) is not logged; the console serves on."""
    async with console_process(tmp_path / "control.sock", tmp_path / "console.log") as console:
        port = int(console.origin.rsplit(":", 1)[1])
        head = f"Host: 127.0.0.1:{port}\r\nOrigin: {console.origin}\r\nCookie: pit_session={'c' * 43}"

        async def ask(request: str) -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request.encode("latin-1"))
            async with asyncio.timeout(5):
                answer = await reader.read()
            writer.close()
            return answer

        def post(body: str, ctype: str = "application/x-www-form-urlencoded") -> str:
            return (f"POST /approve HTTP/1.1\r\n{head}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                    f"Connection: close\r\n\r\n{body}")

        issued = csrf_of((await ask(f"GET /login HTTP/1.1\r\n{head}\r\nConnection: close\r\n\r\n")).decode())
        issued = issued.split(".")[0]  # a time in the token's life, so that its MAC is compared
        cases = {
            "csrf=%C2%B2.a.b&claim_id=x": (post("csrf=%C2%B2.a.b&claim_id=x"), 403),  # "²": a digit to isdigit()
            "a MAC not ASCII": (post(f"csrf={issued}.nonce.%C3%A9&claim_id=x"), 403),
            "multipart without boundary": (post("x", "multipart/form-data"), 400),
            "charset=bogus": (post("csrf=1", "application/x-www-form-urlencoded; charset=bogus-xx"), 400),
            "a flash cookie not ASCII": (f"GET / HTTP/1.1\r\n{head}; pit_flash=a.\xc3\xa9\r\nConnection: close\r\n\r\n",
                                          200),
            "a chunk size that is a secret": (
                f"POST /approve HTTP/1.1\r\n{head}\r\nTransfer-Encoding: chunked\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\n\r\nsupervisor=floor-1&secret=HUNTER2-CHUNK\r\n\r\n",
                400),
        }
        for name, (request, status) in cases.items():
            answer = await ask(request)
            assert answer.startswith(b"HTTP/1.1 %d " % status) or answer.startswith(b"HTTP/1.0 %d " % status), \
                (name, answer[:200])
            if status != 200:
                assert answer.split(b"\r\n\r\n", 1)[1].count(b"\n") <= 4, (name, answer)  # no traceback
        assert (await ask(f"GET /login HTTP/1.1\r\n{head}\r\nConnection: close\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
    log = console.log.read_text()
    entries = [json.loads(line) for line in log.splitlines()]
    assert "HUNTER2" not in log and "Traceback" not in log and not any(e["level"] == "error" for e in entries)
    assert [(e["status"], e["remote"]) for e in entries if e["event"] == "console bad request"] == [(400, "127.0.0.1")]


def test_the_page_files_are_package_data():
    from controller.console.server import static_files

    files = static_files()
    assert set(files) == {"console.js", "console.css", "floor.css", "plots.css"}
    assert len(files["console.js"][0]) < 4096  # a few KB of plain JS, no build step


# --- the systemd unit ------------------------------------------------------------------------------------

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "progressive-console.service"
SOCKET_UNIT = UNIT.with_suffix(".socket")
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None and not os.environ.get("CI"),
                                   reason="systemd-analyze is not installed (CI installs it)")


@needs_analyze
def test_the_console_unit_verifies_and_keeps_its_exposure_low(tmp_path):
    text = UNIT.read_text()
    # a user of its own (its wrong guesses lock out only itself), in the socket's group
    assert "\nDynamicUser=yes\n" in text and "\nSupplementaryGroups=progressive\n" in text
    # the port is the socket unit's (held while the console is down), the service started by it
    assert "--listen" not in text and "\nRequires=progressive-console.socket\n" in text
    assert "\nListenStream=127.0.0.1:8480\n" in SOCKET_UNIT.read_text()
    unit = tmp_path / UNIT.name
    unit.write_text(text.replace("ExecStart=/usr/bin/progressive-console", f"ExecStart={CONSOLE}"))
    shutil.copyfile(SOCKET_UNIT, tmp_path / SOCKET_UNIT.name)
    r = subprocess.run([ANALYZE, "verify", str(tmp_path / SOCKET_UNIT.name), str(unit)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and UNIT.name not in r.stderr and SOCKET_UNIT.name not in r.stderr, r.stderr
    r = subprocess.run([ANALYZE, "security", "--offline=yes", str(unit)], capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout + r.stderr)
    assert m and float(m.group(1)) <= 2.5, r.stdout + r.stderr


async def test_the_page_says_when_the_daemon_is_down_and_recovers_by_itself(tmp_path):
    sock = tmp_path / "control.sock"
    async with console_process(sock, tmp_path / "console.log") as console, console.client() as http:
        assert "The daemon is not answering (no such socket)" in await _page(http, console, "not answering")
        daemon_class = functools.partial(TableDaemon, control=lambda d: ControlServer(sock, d))
        async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / "state",
                                 lambda cfg: with_supervisor(cfg, SUPERVISOR, SECRET)):
            html = await _page(http, console, "Table <b>CS-07</b>")
            assert 'data-meter="main">$10,000.00<' in html and "not answering" not in html
        html = await _page(http, console, "not answering")  # the daemon stopped: the last state stays shown
        assert 'data-meter="main">$10,000.00<' in html


def _request_behind_the_handshake(port: int) -> bytes:
    """A TLS client whose last handshake message and first request leave in one segment (as a browser's often
    do): what the console answers."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # the test's own certificate
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                s.sendall(outgoing.read())
                data = s.recv(65536)
                assert data, "the console closed during the handshake"
                incoming.write(data)
        tls.write(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n" % port)
        s.sendall(outgoing.read())  # the client's Finished and the request together
        reply = b""
        while b"\r\n" not in reply:
            data = s.recv(65536)
            if not data:
                break
            incoming.write(data)
            with contextlib.suppress(ssl.SSLWantReadError):
                while chunk := tls.read(65536):
                    reply += chunk
        return reply


async def test_a_request_sent_with_the_last_handshake_message_is_answered(tmp_path):
    async with tls_console_on_rig(tmp_path) as (_daemon, _rig, console):
        port = int(console.origin.rsplit(":", 1)[1])
        for _ in range(5):
            reply = await asyncio.to_thread(_request_behind_the_handshake, port)
            assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]


async def test_a_flood_of_requests_is_logged_within_the_access_budget(tmp_path):
    async with console_on_rig(tmp_path) as (_daemon, _rig, console), console.client() as http:
        for _ in range(150):
            async with http.get(console.url + "static/console.css") as r:
                assert r.status == 200
        lines = console.log.read_text().count('"console request"') or console.log.read_text().count("console request")
        assert 0 < lines <= 2 * server.ACCESS_LINES[0], lines  # within one or two windows: not one a request


# --- an answer of the wrong shape costs its section, never the page ---------------------------------------

def _paths(value, at=()):
    """Every place in a JSON value (dict keys and list indexes), the value itself first."""
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


def _replaced(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, new)}
    return [_replaced(v, rest, new) if i == head else v for i, v in enumerate(value)]


MISSHAPEN = (None, "x", 7, -1, True, [], {}, "1e999", [{"a": 1}], {"a": [None]})
HIT = {"meter": "main", "number": 1, "time": "2026-12-05T15:41:07.123456Z", "round": "CS-07-r9", "seat": 4,
       "hand": "royal-flush", "award": "100% of meter", "amount": "10017.85", "paid_by": "attendant",
       "approved_by": "floor-1", "kind": "jackpot"}


def test_any_answer_of_the_wrong_shape_is_one_line_in_its_section_and_the_page_stands():
    """Every place of a realistic answer (status, round, history, plots), each replaced by values of the wrong shape
    (a daemon of another version, a fault): the page is made, and each section that cannot show its part says so."""
    snapshot = {"status": STATUS, "round": ROUND, "history": [HIT], "series": SERIES}
    tried = unshown = 0
    for where in list(_paths(snapshot))[1:]:
        for new in MISSHAPEN:
            errors: list[str] = []
            parts = page.sections(_replaced(snapshot, where, new), None, "t", errors=errors)
            assert set(parts) == set(page.SECTIONS), where
            html = page.page(parts, csrf="t", table="CS-07", zone=ZONE)
            assert len(errors) == html.count("cannot be shown"), (where, new, errors)
            tried, unshown = tried + 1, unshown + bool(errors)
    assert tried > 1000 and unshown > 50  # the check meets answers it cannot show, and each says so


def test_a_section_that_cannot_be_shown_says_so_and_the_others_stand():
    errors: list[str] = []
    parts = page.sections({"status": {**STATUS, "meters": "not a list"}, "round": ROUND, "history": 7}, None, "t",
                          errors=errors)
    assert "cannot be shown" in parts["history"] and "cannot be shown" not in parts["round"]
    assert errors and all(": " in e for e in errors)
    assert "CS-07-r9" in parts["round"]
