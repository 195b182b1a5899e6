"""The floor view: a link authority's console, every linked table at once. Its rendering as pure functions of the
authority's `status` (a claim awaiting approval first, OFFLINE in words and the casino's local time, one money
format, nothing unescaped, no repr), the tables' floor lines (the link message that tells the authority a table's
round, blocks and claims: bounded, refused in one line naming the field, rate-limited), and three tables linked to
a real authority through a real Mosquitto."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest

from controller.authority.watch import FLOOR_MIN_S
from controller.console.view import floor
from controller.link.mqtt import MqttLink
from controller.linkproto import schema
from controller.meter import ops
from controller.money import parse_cents

from broker import running_broker
from linkrig import AT, METER, PREFIX, LinkRig
from rigtable import until

TABLES = ("cs-01", "fcp-02", "lir-03")
TOPICS = schema.Topics(PREFIX)
NOW = datetime(2026, 12, 5, 15, 41, 30, tzinfo=UTC)  # 10:41:30 EST
REPRS = ("[{", "{'", "None", "True", "False", "Decimal(", "datetime(")


def _status(**over) -> dict:
    """An authority's status: cs-01 with a royal flush locked and awaiting approval, fcp-02 blocked by a device,
    lir-03 OFFLINE since its connection was lost."""
    status = {
        "role": "link-authority", "authority": "link-1", "version": "1.4.0", "broker_connected": True,
        "time_zone": "America/New_York", "ledger_head_seq": 412,
        "meters": [{"meter": METER, "amount": "10000.45", "reset": "10000.00",
                    "locked": [{"claim": "cs-01-r12-c1:0", "amount": "10017.85", "table": "cs-01", "seat": 5,
                                "round_id": "cs-01-r12", "hand": "royal-flush", "award": "100% of meter",
                                "shares": 1, "at": "2026-12-05T15:41:07.120000Z"}]}],
        "tables": [
            {"table": "cs-01", "online": True, "since": "2026-12-05T15:00:00Z", "why": "connected",
             "last_heard": {"message": "floor", "at": "2026-12-05T15:41:29Z"},
             "last_ack": {"seq": 41, "outcome": "applied", "at": "2026-12-05T15:41:07Z"},
             "open_rounds": [{"meter": METER, "round_id": "cs-01-r12"}],
             "floor": {"at": "2026-12-05T15:41:29Z", "received": "2026-12-05T15:41:29Z",
                       "round": {"id": "cs-01-r12", "phase": "dealing"}, "blocks": [], "seats_disabled": [],
                       "claims": [{"claim_id": "cs-01-r12-c1", "seat": 5, "spot": "progressive", "hand": "royal-flush",
                                   "award": "100% of meter", "amount": "16017.85"}],
                       "meters": [METER]}},
            {"table": "fcp-02", "online": True, "since": "2026-12-05T15:00:00Z", "why": "connected",
             "last_heard": {"message": "floor", "at": "2026-12-05T15:41:28Z"}, "last_ack": None, "open_rounds": [],
             "floor": {"at": "2026-12-05T15:41:28Z", "received": "2026-12-05T15:41:28Z",
                       "round": {"id": "fcp-02-r3", "phase": "betting"},
                       "blocks": [{"block": "device", "sources": ["lockout", "sign"]}], "seats_disabled": [4, 5],
                       "claims": [], "meters": [METER]}},
            {"table": "lir-03", "online": False, "since": "2026-12-04T23:05:09Z", "why": "connection lost (its will)",
             "last_heard": {"message": "offline", "at": "2026-12-04T23:05:09Z"}, "last_ack": None,
             "open_rounds": [], "floor": None},
        ],
    }
    status.update(over)
    return status


def _text(html: str) -> str:
    """The words of `html`, as a reader sees them (one space between)."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" ,", ",").replace("( ", "(").replace(" )", ")")


# --- rendering (pure) ------------------------------------------------------------------------------------


def test_a_claim_awaiting_approval_is_the_first_thing_on_the_floor_page():
    parts = floor.sections({"status": _status()}, None, NOW)
    html = floor.page(parts, csrf="t")
    assert html.index('id="claims"') < html.index('id="tables"') < html.index('id="meters"')
    claims = parts["claims"]
    assert "1 claim awaiting approval" in claims
    card = _text(claims)
    for shown in ("cs-01", "Seat 5", "Royal flush", "100% of meter", "$16,017.85", "$10,017.85 of it locked on fchb-link",
                  "awaiting approval since 10:41:07 EST"):
        assert shown in card, (shown, card)
    # the table's card says it too, and the floor in numbers
    assert 'data-table="cs-01" data-state="claim"' in parts["tables"]
    assert "awaiting approval" in parts["tables"]
    assert _text(parts["daemon"]).split() [:11] == "3 tables · 2 online · 1 OFFLINE · 1 blocked".split()
    assert "/approve" not in html and "<form" not in html  # nothing on it acts
    # whose floor it is and the casino's clock, as a table's page has its id and clock (the header said "Floor")
    authority, tz = floor.identity({"status": _status()})
    named = floor.page(parts, csrf="t", authority=authority, zone=tz)
    assert authority and f"<title>Floor view · link authority {authority} · Pit console</title>" in named
    assert re.search(r'<time id="clock" data-zone="America/New_York"[^>]*>\d\d:\d\d:\d\d E[SD]T</time>', named)
    assert floor.identity({"status": {"table": "CS-07"}}) == (None, None)


def test_each_table_shows_its_link_round_meters_and_blocks_in_words_and_local_time():
    tables = floor.sections({"status": _status()}, None, NOW)["tables"]
    cards = dict(re.findall(r'<article class="table" data-table="([^"]+)"(.*?)</article>', tables, re.S))
    cs, fcp, lir = (_text(cards[t]) for t in TABLES)
    assert "● online since 10:00:00 EST" in cs and "Round cs-01-r12 · dealing (after lock-out)" in cs
    assert "$10,000.45" in cs and "✓ progressive wagering on" in cs
    assert "⚠ device down: lockout, sign" in fcp and "⚠ seats 4, 5 disabled (device down)" in fcp
    assert "betting open" in fcp and 'data-state="blocked"' in tables
    # OFFLINE in words, since when in the casino's time (another day: its date too), and why
    assert "✕ OFFLINE since 2026-12-04 18:05:09 EST (connection lost (its will))" in lir
    assert "✕ link offline: no progressive wager at this table" in lir and "No round yet" in lir
    whole = _text(floor.page(floor.sections({"status": _status()}, None, NOW), csrf="t"))
    assert not any(r in whole for r in REPRS), [r for r in REPRS if r in whole]
    assert "Z" not in re.sub(r"[A-Za-z]{2,}", "", whole)  # no raw ISO time


def test_every_text_of_the_status_is_escaped_and_garbage_is_shown_as_garbage_not_a_crash():
    evil = "<script>alert(1)</script>"
    status = _status(time_zone="Not/AZone")
    status["tables"][0]["floor"]["claims"][0].update(hand=evil, amount="lots", seat=evil)
    status["tables"][1]["floor"]["blocks"][0]["sources"] = [evil]
    status["tables"][2]["since"] = evil
    parts = floor.sections({"status": status}, None, NOW)
    html = "".join(parts.values())
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "—" in parts["claims"]  # an amount that is not one
    assert "UTC" in parts["daemon"]  # an unknown zone: UTC, and it says so


def test_a_lock_without_a_floor_line_is_still_a_claim_on_the_floor():
    """A table OFFLINE (or of a version that sends no floor line) with an award locked at the authority: the
    authority's journal alone puts the claim on the page."""
    status = _status()
    status["tables"][0].update(online=False, floor=None, why="stopped cleanly")
    claims = _text(floor.sections({"status": status}, None, NOW)["claims"])
    assert "cs-01" in claims and "Seat 5" in claims and "$10,017.85" in claims
    assert "table OFFLINE: as it last reported" in claims
    none = floor.sections({"status": _status(meters=[], tables=[])}, None, NOW)
    assert "No claim awaits approval" in none["claims"] and "No linked table" in none["tables"]


def test_the_authority_not_answering_is_said_and_the_floor_it_knew_stays_shown():
    parts = floor.sections({"status": _status()}, "no such socket", NOW)
    assert "✕ The link authority is not answering (no such socket)" in parts["daemon"]
    assert "Royal flush" in parts["claims"] and 'data-table="lir-03"' in parts["tables"]


def test_money_and_times_have_one_format():
    assert floor.money("10017.85") == "$10,017.85" and floor.money("0.5") == "$0.50"
    assert floor.money(None) == "—" and floor.money("1e400") == "—" and floor.money(10) == "—"
    tz = floor.zone("America/New_York")
    assert floor.local("2026-12-05T15:41:07.999Z", tz, NOW) == "10:41:07 EST"
    assert floor.local("2026-07-05T15:41:07Z", tz, NOW) == "2026-07-05 11:41:07 EDT"
    assert floor.local(None, tz) == "—" and floor.local("<b>", tz) == "&lt;b&gt;"


# --- the floor line on the wire --------------------------------------------------------------------------


def _line(**over) -> schema.FloorLine:
    line = schema.FloorLine("cs-01", "2026-12-05T15:41:07Z", "cs-01-r12", "dealing", (("device", ("lockout",)),),
                            (4,), (schema.FloorClaim("cs-01-r12-c1", 5, "progressive", "royal-flush",
                                                     "100% of meter", 1_601_785),), (METER,))
    return replace(line, **over)


def test_a_floor_line_round_trips_and_garbage_is_refused_in_one_line_naming_the_field():
    payload = schema.encode(_line())
    assert schema.decode("t", payload) == _line() and len(payload) < 400
    garbage = {"round.phase": (b'"dealing"', b'"shuffling"'),
               "claims[0].hand": (b'"royal-flush"', b'"' + b"x" * 65 + b'"'),
               "blocks[0].sources[0]": (b'"lockout"', b'"lock out"'),
               "claims[0].amount": (b'"16017.85"', b"16017.85"),
               "seats_disabled[0]": (b"[4]", b"[0]"),
               "claims[0].spot": (b'"progressive"', b'"a\\u0000"')}
    for field, bad in garbage.items():
        with pytest.raises(schema.SchemaError) as e:
            schema.decode("t", payload.replace(*bad))
        assert e.value.field == field and "\n" not in str(e.value), (field, str(e.value))
    many = schema.encode(_line(seats_disabled=tuple(range(1, 18))))
    with pytest.raises(schema.SchemaError, match="more than 16 entries"):
        schema.decode("t", many)
    big = payload.replace(b'"2026-12-05T15:41:07Z"', b'"' + b" " * 9000 + b'"')
    with pytest.raises(schema.SchemaError, match="9318 bytes, more than 8192 for a floor line"):
        schema.decode("t", big)


def test_a_tables_floor_line_is_cut_to_what_the_authority_takes():
    """Made from the table's views: names with other characters made ids, texts printable and short, the lists at
    most 16 long, only the claims that wait for a supervisor, each with the total its approval pays."""
    from types import SimpleNamespace as NS

    from controller.app.linked import floor_line

    status = {"round": {"id": "cs-01-r12", "phase": "dealing"},
              "blocks": [{"block": "closed", "sources": ["J. Smith"]}, {"block": "device", "sources": ["lockout"]}],
              "seats_disabled": [{"seat": s, "device": "seat-bus"} for s in range(1, 21)]}
    pay = NS(kind="paytable", hand="royal-flush\x07" + "x" * 80, award="100% of meter", amount=1_001_785)
    envy = NS(kind="envy", hand="royal-flush", award="$1,000.00", amount=100_000)
    claims = [NS(status="pending", id="cs-01-r12-c1", seat=5, spot="progressive", payouts=(envy, pay)),
              NS(status="paid", id="cs-01-r12-c2", seat=3, spot="progressive", payouts=(pay,))]
    line = floor_line("cs-01", status, claims, [METER, METER], "2026-12-05T15:41:07Z")
    assert line.blocks == (("closed", ("J._Smith",)), ("device", ("lockout",)))
    assert line.seats_disabled == tuple(range(1, 17)) and line.meters == (METER,)
    (c,) = line.claims
    assert (c.claim, c.seat, c.award, c.cents) == ("cs-01-r12-c1", 5, "100% of meter", 1_101_785)
    assert c.hand.startswith("royal-flush x") and len(c.hand) == schema.FLOOR_TEXT
    assert schema.decode("t", schema.encode(line)) == line  # what the table makes, the authority takes


# --- three tables and a real authority -------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path):
    with running_broker(tmp_path / "mosquitto", (*TABLES, "authority")) as b:
        yield b


def _reported(phase: str, blocks=(), claims=(), table: str = "", n: int = 1):
    return lambda: schema.FloorLine(table, datetime.now(UTC).isoformat(), f"{table}-r{n}", phase, blocks, (),
                                    claims, (METER,))


async def test_three_linked_tables_on_the_floor_of_a_real_authority(tmp_path, broker):
    rig = LinkRig(tmp_path, broker, TABLES)
    try:
        a = await rig.start_authority()
        links = {t: await rig.start_table(t) for t in TABLES}
        await until(lambda: all(link.alive and link.accepts("floor") for link in links.values()),
                    "every table hears the authority, which takes floor lines")
        cs, fcp = links["cs-01"], links["fcp-02"]
        await cs.send(ops.BookContributions("cs-01-r1", "cs-01", ((5, 100), (2, 100)), AT), "fchb", "cs-01-r1:book")
        await rig.all_answered()
        seq = await cs.send(ops.LockPercentAward("cs-01-r1", "cs-01", 5, "royal-flush", "100% of meter", Fraction(100), AT,
                                                 "cs-01-r1-c1:0"), "fchb", "cs-01-r1-c1:lock:0")
        locked = await cs.answer(seq, 20)
        cs.floor = _reported("dealing", claims=(schema.FloorClaim("cs-01-r1-c1", 5, "five-card-hand-bonus",
                                                                  "royal-flush", "100% of meter",
                                                                  parse_cents(locked["amount"], "amount")),),
                             table="cs-01")
        fcp.floor = _reported("betting", blocks=(("device", ("lockout",)),), table="fcp-02")
        await rig.stop_table("lir-03")  # a clean stop: OFFLINE, stopped cleanly

        def floor_of(t: str) -> dict:
            return next(x for x in a.status()["tables"] if x["table"] == t)

        await until(lambda: floor_of("cs-01")["floor"] and floor_of("fcp-02")["floor"]
                    and not floor_of("lir-03")["online"], lambda: f"the floor lines: {a.status()['tables']}")
        status = a.status()
        assert status["time_zone"] == "America/New_York"
        assert floor_of("cs-01")["open_rounds"] == [{"meter": METER, "round_id": "cs-01-r1"}]
        assert status["meters"][0]["locked"][0]["hand"] == "royal-flush"
        parts = floor.sections({"status": status}, None, datetime.now(UTC))
        claims = _text(parts["claims"])
        assert "cs-01" in claims and "Seat 5" in claims and "Royal flush" in claims
        assert floor.money(locked["amount"]) in claims and "awaiting approval since" in claims
        tables = _text(parts["tables"])
        assert "⚠ device down: lockout" in tables and "✕ OFFLINE since" in tables and "stopped cleanly" in tables

        # a change at the table is on the authority within about a second (FLOOR_EVERY_S)
        t0 = asyncio.get_running_loop().time()
        fcp.floor = _reported("dealing", table="fcp-02")
        await until(lambda: floor_of("fcp-02")["floor"]["round"]["phase"] == "dealing", "the change heard", 20)
        took = asyncio.get_running_loop().time() - t0
        print(f"a table's change on the authority's floor after {took:.2f} s")  # measured, not a goal (load)
        assert floor_of("fcp-02")["floor"]["blocks"] == []

        # the table's own credentials flooding or sending garbage: dropped, counted, the last good line kept
        # the broker takes the username as the client id (use_username_as_clientid): whoever holds the table's
        # password takes the table's session, and the table's link would take it back, cutting the flood mid-way.
        # The table's own link is stopped first: the flood is the one session of fcp-02.
        await rig.stop_table("fcp-02")
        raw = MqttLink(broker.settings("fcp-02"), ())
        task = asyncio.create_task(raw.run(lambda _t, _p: None))
        try:
            await raw.wait_connected(10)
            good = schema.encode(_reported("locking", table="fcp-02")())
            t0 = asyncio.get_running_loop().time()
            for _ in range(20):
                await raw.publish(TOPICS.up("fcp-02"), good, qos=1)
            # one line per table per FLOOR_MIN_S taken, whatever the pace of a loaded machine: the rest dropped
            taken = int((asyncio.get_running_loop().time() - t0) / FLOOR_MIN_S) + 2
            await raw.publish(TOPICS.up("fcp-02"), good.replace(b'"locking"', b'"<b>"'), qos=1)
            await until(lambda: (a.metrics.registry.get_sample_value(
                "progressive_link_messages_dropped_total", {"reason": "floor_too_often"}) or 0) >= 20 - taken,
                "a flood of floor lines dropped and counted", 10)
            await until(lambda: (a.metrics.registry.get_sample_value(
                "progressive_link_messages_dropped_total", {"reason": "bad_schema"}) or 0) >= 1, "garbage counted")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        assert floor_of("fcp-02")["floor"]["round"]["phase"] in ("locking", "dealing")
        assert a.ledger is not None and not any("floor" in k for k in a.ledger.state)  # never journaled
    finally:
        await rig.close()


# --- a table daemon on the rig tells the floor ------------------------------------------------------------


@pytest.fixture
def broker_cs(tmp_path: Path):
    from test_claim_desk_linked import TABLE_ID

    with running_broker(tmp_path / "mosquitto", (TABLE_ID, "authority")) as b:
        yield b


async def test_a_table_daemon_tells_the_floor_its_round_its_claim_and_a_device_down(tmp_path, broker_cs):
    """The table daemon's own views make its floor line: a royal flush on its linked meter with an Envy Bonus
    (the total its approval pays, the lock the authority's), then a device unplugged on the rig."""
    from test_claim_desk_linked import ROYAL, TABLE_ID, _linked_main, authority, linked_table

    from rigtable import lock_round

    async with authority(tmp_path, broker_cs) as link, \
            linked_table(tmp_path, broker_cs, link=_linked_main) as (daemon, rig):
        a = link.authority

        def line() -> dict:
            return next(t for t in a.status()["tables"] if t["table"] == TABLE_ID)["floor"] or {}

        await until(lambda: line().get("round", {}).get("phase") == "betting", lambda: f"betting: {line()}")
        await lock_round(daemon, rig, [(4, "progressive"), (2, "progressive")])
        got = await daemon.call("claim", {"seat": 4, "cards": ROYAL})
        assert got["status"] == "pending", got
        await until(lambda: line().get("claims"), lambda: f"the claim on the floor: {line()}")
        claim = line()["claims"][0]
        payouts = daemon.desk.state.claims[0].payouts
        assert claim["claim_id"] == got["claim_id"] and claim["seat"] == 4 and claim["hand"] == payouts[0].hand
        assert claim["award"] == payouts[0].award and len(payouts) == 2  # the jackpot, and seat 2's Envy Bonus
        assert parse_cents(claim["amount"], "amount") == sum(p.amount for p in payouts)
        assert line()["round"] == {"id": f"{TABLE_ID}-r1", "phase": "dealing"} and line()["meters"] == [METER]
        parts = floor.sections({"status": a.status()}, None, datetime.now(UTC))
        shown = _text(parts["claims"])
        assert TABLE_ID in shown and "Seat 4" in shown and floor.money(claim["amount"]) in shown
        assert "of it locked on fchb-link" in shown  # the lock, from the authority's journal

        rig.unplug("sign")  # and what shares its bus: the lock-out, seats' devices
        await until(lambda: any(b["block"] == "device" and "sign" in b["sources"] for b in line().get("blocks", [])),
                    lambda: f"the device down on the floor: {line()}", 30)
        tables = _text(floor.sections({"status": a.status()}, None)["tables"])
        assert re.search(r"⚠ device down: [a-z0-9, -]*\bsign\b", tables), tables


async def test_a_table_sends_no_floor_line_to_an_authority_that_does_not_take_it(tmp_path, broker, monkeypatch):
    """An authority of before the floor line does not list it in its `kinds`: the table sends it none (the older
    authority would drop each as a bad schema, with a warning line)."""
    monkeypatch.setattr(schema, "ANNOUNCED", schema.ANNOUNCED - {"floor"})
    rig = LinkRig(tmp_path, broker, TABLES[:1])
    try:
        a = await rig.start_authority()
        link = await rig.start_table("cs-01")
        link.floor = _reported("betting", table="cs-01")
        await until(lambda: link.alive and link.accepts("anchor"), "the table heard the authority's expect")
        assert not link.accepts("floor") and not await link.send_floor()
        monkeypatch.setattr(link, "authority_kinds", link.authority_kinds | {"floor"})  # as a newer authority's
        assert await link.send_floor() and not await link.send_floor()  # sent; unchanged: not again
        await until(lambda: "cs-01" in a.floor, "the line at the authority")
    finally:
        await rig.close()


def test_any_authority_answer_of_the_wrong_shape_costs_its_section_never_the_floor():
    from test_console import MISSHAPEN, _paths, _replaced

    snapshot = {"status": _status()}
    tried = unshown = 0
    for where in list(_paths(snapshot))[2:]:  # the status itself stays a mapping: the poller asks its role
        for new in MISSHAPEN:
            errors: list[str] = []
            parts = floor.sections(_replaced(snapshot, where, new), None, NOW, errors)
            html = floor.page(parts, csrf="t")
            assert len(errors) == html.count("cannot be shown"), (where, new, errors)
            tried, unshown = tried + 1, unshown + bool(errors)
    assert tried > 300 and unshown > 10
