"""The table daemon on the rig: real drivers over paced PTY lines, real simulators, a real ledger.

Rounds are played through the rig's control API as a dealer would: chips placed, the lock-out pressed,
the shoe jammed, a device muted; the test then looks at what the simulated hardware shows and at the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import secrets
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import structlog

from controller.app.table import TableDaemon
from controller.errors import InputError
from controller.round import model as rm
from drivers.modbus.core.schedule import Phase as BusPhase

from rigtable import daemon_on_rig, drawing, lit, lock_round, message, until, win, with_supervisor

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "config" / "tables" / "caribbean-stud.toml"
RIG = ROOT / "config" / "hil" / "caribbean-stud-7.toml"


@contextlib.asynccontextmanager
async def table(tmp_path, secret: str | None = None):
    adjust = (lambda cfg: _with_supervisor(cfg, secret)) if secret is not None else (lambda cfg: cfg)
    async with daemon_on_rig(TableDaemon, TABLE, RIG, tmp_path / "state", adjust) as (daemon, rig):
        yield daemon, rig


def shown(rig):
    """Meter amounts on the sign, by meter: the table shows its meters in configuration order, one per
    slot of the sign's register map (slot 1: main, slot 2: bonus)."""
    slots = dict(rig.sign().get("amounts") or [])
    return {"main": slots.get(1), "bonus": slots.get(2)}


async def test_round_on_the_rig(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await until(lambda: shown(rig) == {"main": 1_000_000, "bonus": 1_000_000}, "sign shows the meters")

        await rig.place_chip(3, "progressive", 100)
        await until(lambda: "progressive" in lit(rig, 3), "seat 3 acknowledged")
        await rig.press_lockout()
        await until(lambda: daemon.state.phase.value == "dealing", "booked and dealing")
        await until(lambda: rig.lights()["lockout_lamp"] is True, "lock-out lamp on")
        (bus,) = daemon.buses.values()
        assert bus.scheduler.phase is BusPhase.DEALING  # seats read for health only while the cards are dealt
        # the longest the press could have waited: from the lock-out read before it to the wagers frozen
        window = daemon.metrics.registry.get_sample_value("progressive_lockout_window_seconds_sum")
        assert daemon.metrics.registry.get_sample_value("progressive_lockout_window_seconds_count") == 1
        assert 0 < window < 1.0, window

        # after lock-out: not recognized, no light
        await rig.place_chip(5, "progressive", 100)
        await until(lambda: daemon._not_recognized == 1, "late wager noted")
        assert lit(rig, 5) == []

        # the meter grew by the rate of progression (15% of $1, 2% to reserve) and the sign shows it
        await until(lambda: shown(rig).get("main") == 1_000_015, "sign shows the new amount")
        assert daemon.ledger.state["main"].wagers_count == 1

        result = await daemon.call("settle", {"round_id": "CS-07-r1"})
        assert "CS-07-r2 open for betting" in result["message"]
        status = await daemon.call("status", {})
        assert status["round"] == {"id": "CS-07-r2", "phase": "betting"}
        assert bus.scheduler.phase is BusPhase.BETTING
        assert {"meter": "main", "amount": "10000.15"} in status["meters"]
        await until(lambda: lit(rig, 3) == [] and rig.lights()["lockout_lamp"] is False, "lights off")
        await until(lambda: "CS-07-r1" in daemon.ledger.state["main"].recent_rounds, "round closed in the journal")

        text = daemon.metrics.exposition().decode()
        for line in ('progressive_wagers_accepted_total{spot="progressive"} 1.0',
                     'progressive_wagers_not_recognized_total{reason="after lock-out"} 1.0',
                     'progressive_meter_amount_cents{meter="main"} 1.000015e+06',
                     'progressive_rounds_total{outcome="closed"} 1.0',
                     'progressive_round_phase{phase="betting"} 1.0',
                     'progressive_lockout_latency_seconds_count 1.0',
                     'progressive_ledger_wal_checkpoint_seconds_count 1.0'):  # after the booking
            assert line in text, line
        promtool = shutil.which("promtool")
        if promtool:  # CI installs it; the metrics tests insist on it there
            r = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
            assert r.returncode == 0 and not r.stdout.strip(), (r.stdout + r.stderr).decode()


async def test_shoe_jam_voids_the_round(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await rig.place_chip(2, "progressive", 100)
        await until(lambda: "progressive" in lit(rig, 2), "seat 2 acknowledged")
        await rig.press_lockout()
        await until(lambda: daemon.state.phase.value == "dealing", "dealing")
        await rig.jam_shoe()
        await until(lambda: daemon.state.round_no == 2, "voided, next round open")
        main = daemon.ledger.state["main"]
        assert main.voided_rounds == 1 and main.wagers_count == 0 and main.current == 10_000 * 100 * 10_000
        await until(lambda: shown(rig).get("main") == 1_000_000, "sign shows the reset amount again")


@pytest.mark.parametrize("device", ["shoe", "lockout"])
async def test_device_down_disables_wagering_until_it_recovers(tmp_path, device):
    """A device of the whole table (the card counter, the lock-out button) down disables every seat."""
    down, back = ((lambda: rig.unplug("shoe")), (lambda: rig.replug("shoe"))) if device == "shoe" else (
        (lambda: rig.mute("lockout", True)), (lambda: rig.mute("lockout", False)))  # the bus answers on
    async with table(tmp_path) as (daemon, rig):
        await rig.place_chip(1, "progressive", 100)
        await until(lambda: "progressive" in lit(rig, 1), "seat 1 acknowledged")
        down()
        await until(lambda: daemon.state.blocks.get(rm.Block.DEVICE) == {device}, "wagering disabled")
        assert not daemon.state.seats_down
        await until(lambda: (rig.sign().get("message") or {}).get("message") == "OFFLINE", "sign says OFFLINE")
        await rig.place_chip(4, "progressive", 100)
        await until(lambda: daemon._not_recognized >= 1, "wager while down not recognized")
        assert lit(rig, 4) == [] and "progressive" in lit(rig, 1)  # nothing accepted is lost
        back()
        await until(lambda: not daemon.state.blocked, "wagering enabled again")
        await until(lambda: shown(rig).get("main") == 1_000_000 and not rig.sign().get("message"),
                    lambda: f"sign shows the meters again: {rig.sign()}")
        await rig.remove_chip(4, "progressive")  # lifted and placed again, now that wagering is back
        await until(lambda: (4, "progressive") not in daemon.state.sensed, "removal seen by a poll")
        await rig.place_chip(4, "progressive", 100)
        await until(lambda: "progressive" in lit(rig, 4), "seat 4 acknowledged after recovery")
        await rig.press_lockout()
        await until(lambda: daemon.state.phase.value == "dealing", "dealing")
        assert daemon.ledger.state["main"].wagers_count == 2


def _rig_on_tcp(tmp_path) -> Path:
    """The rig of RIG with its seats, lock-out and sign behind a Modbus TCP gateway in place of the RTU bus."""
    text, n = re.subn(r'\[\[rtu\]\]\nname = "table-bus"\n.*?(?=devices = \[)',
                      '[[tcp]]\nname = "table-bus"\nhost = "127.0.0.1"\nport = 0\n', RIG.read_text(), flags=re.S)
    assert n == 1
    path = tmp_path / "caribbean-stud-7-tcp.toml"
    path.write_text(text)
    return path


def _table_on_tcp(cfg):
    """`cfg` with its table bus on Modbus TCP (attach points it at the rig's gateway)."""
    from controller.config.model import BusConfig
    from drivers.modbus import TcpSettings

    devices = {n: replace(d, transport="tcp") if d.bus == "table-bus" else d for n, d in cfg.devices.items()}
    return replace(cfg, buses={**cfg.buses, "table-bus": BusConfig("table-bus", "tcp", TcpSettings(host="127.0.0.1"))},
                   devices=devices)


def _metric(daemon, line: str) -> bool:
    return line in daemon.metrics.exposition().decode()


@pytest.mark.parametrize("transport", ["rtu", "tcp"])
async def test_a_seat_device_down_disables_that_seat_and_the_table_wagers_on(tmp_path, monkeypatch, transport):
    """docs/rounds.md, "A device down": seat 4's device stops answering (muted; its bus and the other units on it
    answer on). Seat 4 takes no new wager and the sign names it now and then, the meters between; the other seats
    wager, and lock-out books their wagers with the one seat 4 made before; no other device on the bus goes down,
    and each is polled on. Back, seat 4's device reports the chip placed meanwhile, which is not taken (present at
    contact) until it is placed again."""
    import controller.app.sign as sign_mod

    monkeypatch.setattr(sign_mod, "SEAT_SHOWN_S", 0.3)
    monkeypatch.setattr(sign_mod, "SEAT_EVERY_S", 1.0)
    rig_file, adjust = (RIG, lambda cfg: cfg) if transport == "rtu" else (_rig_on_tcp(tmp_path), _table_on_tcp)
    bonus = "five-card-hand-bonus"
    with structlog.testing.capture_logs() as logs:
        async with daemon_on_rig(TableDaemon, TABLE, rig_file, tmp_path / "state", adjust) as (daemon, rig):
            assert daemon.cfg.buses["table-bus"].transport == transport
            others = [n for n, d in daemon.cfg.devices.items() if d.bus == "table-bus" and n != "seat-4"]
            await rig.place_chip(1, "progressive", 100)
            await rig.place_chip(4, "progressive", 100)
            await until(lambda: "progressive" in lit(rig, 1) and "progressive" in lit(rig, 4),
                        "seats 1, 4 acknowledged")
            outages = {n: i.errors for n, i in daemon._info.items()}
            polls = {n: daemon.devices[n].polls for n in others}

            rig.mute("seat-4", True)
            await until(lambda: daemon.state.disabled_seats == {4}, "seat 4 disabled")
            assert not daemon.state.blocked
            status = await daemon.call("status", {})
            assert status["blocks"] == [] and [(x["seat"], x["device"]) for x in status["seats_disabled"]] == [
                (4, "seat-4")] and status["seats_disabled"][0]["reason"]
            assert _metric(daemon, 'progressive_seat_disabled{seat="4"} 1.0')
            assert _metric(daemon, 'progressive_seat_disabled{seat="5"} 0.0')
            assert _metric(daemon, 'progressive_wagering_blocked{block="device"} 0.0')
            # what the alert rules join on: the bus still up (its other devices answer), seat 4's device and bus
            assert _metric(daemon, 'progressive_bus_up{bus="table-bus"} 1.0')
            assert _metric(daemon, 'progressive_seat_device_info{device="seat-4",seat="4"} 1.0')
            assert _metric(daemon, 'progressive_device_bus_info{bus="table-bus",device="seat-4"} 1.0')
            (disabled,) = [e for e in logs if e["event"] == "seat wagering disabled"]
            assert (disabled["device"], disabled["seats"], disabled["log_level"]) == ("seat-4", [4], "warning")
            assert disabled["reason"] == status["seats_disabled"][0]["reason"]

            # the sign names seat 4, and shows the meters between
            await until(lambda: (rig.sign().get("message") or {}).get("seat") == 4 and message(rig) == "OFFLINE",
                        lambda: f"the sign names seat 4: {rig.sign()}")
            await until(lambda: message(rig) is None and shown(rig)["main"] == 1_000_000,
                        lambda: f"the meters between: {rig.sign()}")
            await until(lambda: message(rig) == "OFFLINE", lambda: f"seat 4 named again: {rig.sign()}")

            await rig.place_chip(4, bonus, 100)  # at the dead seat: nobody sees it
            await rig.place_chip(5, "progressive", 100)
            await until(lambda: "progressive" in lit(rig, 5), "seat 5 acknowledged while seat 4 is down")
            assert (4, bonus) not in daemon.state.sensed and (4, bonus) not in daemon.state.accepted
            await until(lambda: all(daemon.devices[n].polls >= polls[n] + (2 if n == "sign" else 10) for n in others),
                        lambda: f"the bus's other devices polled on: {polls} -> "
                                f"{ {n: daemon.devices[n].polls for n in others} }")

            rig.mute("seat-4", False)
            await until(lambda: not daemon.state.seats_down, "seat 4 enabled again")
            await until(lambda: _metric(daemon, 'progressive_wagers_not_recognized_total'
                                                '{reason="present-at-contact"} 1.0'),
                        "the chip placed while seat 4 was down is present at contact")
            assert (4, bonus) not in daemon.state.accepted and bonus not in lit(rig, 4)
            assert _metric(daemon, 'progressive_seat_disabled{seat="4"} 0.0')
            await until(lambda: message(rig) is None, lambda: f"the sign shows the meters only: {rig.sign()}")
            assert [e["seats"] for e in logs if e["event"] == "seat wagering enabled"] == [[4]]
            await rig.remove_chip(4, bonus)
            await until(lambda: (4, bonus) not in daemon.devices["seat-4"].wagers, "the removal seen by a poll")
            await rig.place_chip(4, bonus, 100)
            await until(lambda: bonus in lit(rig, 4), "placed again: seat 4 acknowledged")

            await rig.press_lockout()
            await until(lambda: daemon.state.phase.value == "dealing", "booked and dealing")
            assert daemon.ledger.state["main"].wagers_count == 3 and daemon.ledger.state["bonus"].wagers_count == 1
            assert {n: i.errors for n, i in daemon._info.items()} == {**outages, "seat-4": outages["seat-4"] + 1}

            # the whole bus silent (its cable pulled): the bus is down, for its one alert; back, it is up
            for n in [*others, "seat-4"]:
                rig.mute(n, True)
            # each of its 9 devices times out on its own (3 tries of up to 0.5 s on TCP): allow for a loaded machine
            await until(lambda: _metric(daemon, 'progressive_bus_up{bus="table-bus"} 0.0'), "the bus down", 60)
            for n in [*others, "seat-4"]:
                rig.mute(n, False)
            await until(lambda: _metric(daemon, 'progressive_bus_up{bus="table-bus"} 1.0'), "the bus up again")


# --- jackpot claims ----------------------------------------------------------------------------

SUPERVISOR = "floor-1"


def _with_supervisor(cfg, secret):
    return with_supervisor(cfg, SUPERVISOR, secret)


async def _locked_round(daemon, rig, seats):
    for seat in seats:
        await rig.place_chip(seat, "progressive", 100)
    await until(lambda: len(daemon.state.accepted) == len(seats), "wagers acknowledged")
    await rig.press_lockout()
    await until(lambda: daemon.state.phase.value == "dealing", "dealing")


async def test_royal_flush_claim_approved_paid_and_reset(tmp_path, monkeypatch):
    import controller.app.sign as sign_mod
    from controller.errors import RulesError

    monkeypatch.setattr(sign_mod, "WIN_DISPLAY_S", 0.2)
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        await _locked_round(daemon, rig, [7, 6, 2])
        before = daemon.ledger.state["main"].current  # 10,000.45 (three wagers at 15%)

        # a claim for a losing hand changes nothing
        with pytest.raises(RulesError, match="not a winning hand"):
            await daemon.call("claim", {"seat": 6, "cards": ["2S", "7H", "9D", "JC", "KS"]})
        # a seat without a wager cannot claim
        with pytest.raises(RulesError, match="no accepted"):
            await daemon.call("claim", {"seat": 4, "cards": ["AS", "KS", "QS", "JS", "TS"]})

        got = await daemon.call("claim", {"seat": 6, "cards": ["AS", "KS", "QS", "JS", "TS"]})
        assert got["status"] == "pending" and "100% of meter = $10,000.45" in got["message"]
        await until(lambda: rig.lights()["seats"].get(6, {}).get("win"), "win light on")
        await until(lambda: (rig.sign().get("message") or {}).get("message") == "PENDING", "sign says PENDING")
        # settlement order: seat 2 after 6, not before; and nothing settles while a claim waits
        with pytest.raises(RulesError, match="awaits"):
            await daemon.call("settle", {"round_id": "CS-07-r1"})
        with pytest.raises(PermissionError):
            await daemon.call("approve", {"claim_id": got["claim_id"], "supervisor": SUPERVISOR, "secret": "wrong"})
        assert daemon.ledger.state["main"].current == before  # nothing paid yet

        done = await daemon.call("approve", {"claim_id": got["claim_id"], "supervisor": SUPERVISOR,
                                             "secret": "s3cret-floor"})
        assert "approved by floor-1 and paid" in done["message"]
        main = daemon.ledger.state["main"]
        # the royal flush, and an Envy Bonus of $1,000 to each other $1 progressive wagerer (Paytable D,
        # § 639a.12(d)(6)), paid by the table
        royal = [h for h in main.history if h.seat == 6]
        assert len(royal) == 1 and royal[0].amount_cents == 1_000_045 and royal[0].approved_by == SUPERVISOR
        assert sorted((h.seat, h.amount_cents, h.paid_by) for h in main.history if h.seat != 6) == [
            (2, 100_000, "table"), (7, 100_000, "table")]
        assert main.paid_by_table_cents == 200_000
        assert main.current_cents == 1_000_000  # reset to $10,000 (the reserve funds part of it)
        await until(lambda: (rig.sign().get("message") or {}).get("message") == "WIN", "sign shows the win")
        assert rig.sign()["message"]["amount_cents"] == 1_000_045 and rig.sign()["message"]["seat"] == 6
        await until(lambda: not rig.sign().get("message") and shown(rig)["main"] == 1_000_000,
                    lambda: f"then the new amount: {rig.sign()}")

        # seat 2 comes after seat 6: a straight flush pays 10% of the meter as it is now
        with pytest.raises(RulesError, match="settled before seat 6"):
            await daemon.call("claim", {"seat": 7, "cards": ["9H", "8H", "7H", "6H", "5H"]})
        got2 = await daemon.call("claim", {"seat": 2, "cards": ["9H", "8H", "7H", "6H", "5H"]})
        assert "10% of meter = $1,000.00" in got2["message"]
        rejected = await daemon.call("reject", {"claim_id": got2["claim_id"], "supervisor": SUPERVISOR,
                                                "secret": "s3cret-floor", "reason": "cards switched"})
        assert "nothing paid" in rejected["message"]
        assert daemon.ledger.state["main"].hit_count == 3
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        history = await daemon.call("history", {})
        assert sorted((h["seat"], h["amount"]) for h in history) == [(2, "1000.00"), (6, "10000.45"), (7, "1000.00")]


async def test_every_progressive_payout_waits_for_a_floorperson(tmp_path):
    """§ 639a.11(c)(5)(iii): even a 9 for 1 on the Progressive Payout Wager is validated; the table pays it
    and the meter does not move."""
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        await _locked_round(daemon, rig, [3])
        got = await daemon.call("claim", {"seat": 3, "cards": ["2S", "2H", "2D", "9C", "KS"]})
        assert got["status"] == "pending" and "9 for 1 = $9.00" in got["message"]
        await daemon.call("approve", {"claim_id": got["claim_id"], "supervisor": SUPERVISOR, "secret": "s3cret-floor"})
        main = daemon.ledger.state["main"]
        assert main.paid_by_table_cents == 900 and main.current_cents == 1_000_015


# --- Five Card Hand Bonus: Magic Card, Lucky Bonus, the dealer's hand -------------------------------------

BONUS = "five-card-hand-bonus"
ON_DEALER = "five-card-hand-bonus-dealer"
FLOOR = {"supervisor": SUPERVISOR, "secret": "s3cret-floor"}


@contextlib.asynccontextmanager
async def bonus_table(tmp_path, *, magic: str, lucky: int | str, secret: str = "s3cret-floor", state: str = "state"):
    """The example table on the rig (its seat devices sense the three spots: seat-single-bonus.toml), with the
    draws of lock-out fixed."""
    daemon_class = functools.partial(TableDaemon, draw=drawing(magic, lucky))
    adjust = lambda cfg: _with_supervisor(cfg, secret)  # noqa: E731
    async with daemon_on_rig(daemon_class, TABLE, RIG, tmp_path / state, adjust) as (daemon, rig):
        yield daemon, rig


def _hits(meter, round_id="CS-07-r1"):
    return [(h.seat, h.hand, h.award, h.amount_cents, h.paid_by) for h in meter.history if h.round_id == round_id]


async def test_magic_card_claimed_with_the_hand_and_paid(tmp_path):
    from controller.errors import RulesError

    async with bonus_table(tmp_path, magic="9H", lucky=1) as (daemon, rig):
        await lock_round(daemon, rig, [(4, "progressive"), (4, BONUS)])
        bonus = daemon.ledger.state["bonus"].current_cents  # $10,000.20

        # the Magic Card in a losing hand pays nothing: it is paid on top of a winning hand only
        with pytest.raises(RulesError, match="not a winning hand"):
            await daemon.call("claim", {"seat": 4, "spot": BONUS, "cards": ["9H", "9S", "2D", "5C", "KH"]})
        got = await daemon.call("claim", {"seat": 4, "spot": BONUS, "cards": ["2H", "5H", "9H", "JH", "KH"]})
        assert got["status"] == "paid" and got["draws"] == {"magic_card": "9H", "lucky_seat": 1}
        assert "flush 50 for 1 = $50.00, Magic Card 9H 20 for 1 = $20.00" in got["message"]
        meter = daemon.ledger.state["bonus"]
        assert _hits(meter) == [(4, "flush", "50 for 1", 5_000, "table"),
                                (4, "magic card 9H", "20 for 1", 2_000, "table")]
        assert meter.paid_by_table_cents == 7_000 and meter.current_cents == bonus  # the table pays, not the meter
        await until(lambda: win(rig, 4), "win light on")
        await until(lambda: (rig.sign().get("message") or {}) == {"message": "WIN", "table": "CS-07", "seat": 4,
                                                                 "amount_cents": 7_000}, lambda: f"{rig.sign()}")

        # the seat's other wager on the same hand: claimed without a spot, the Progressive Payout Wager
        with pytest.raises(InputError, match="same cards"):
            await daemon.call("claim", {"seat": 4, "cards": ["2H", "5H", "9H", "JH", "QH"]})
        again = await daemon.call("claim", {"seat": 4, "cards": ["2H", "5H", "9H", "JH", "KH"]})
        assert again["status"] == "pending" and "flush 40 for 1 = $40.00" in again["message"]
        assert "Magic" not in again["message"]
        with pytest.raises(RulesError, match="CS-07-r1-c1 was paid by the table"):  # paid by the table at once
            await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        await daemon.call("approve", {"claim_id": again["claim_id"], **FLOOR})
        assert _hits(daemon.ledger.state["main"]) == [(4, "flush", "40 for 1", 4_000, "table")]
        with pytest.raises(RulesError, match="seat 4 was settled in round CS-07-r1 already"):
            await daemon.call("claim", {"seat": 4, "spot": BONUS, "cards": ["2H", "5H", "9H", "JH", "KH"]})


async def test_magic_card_after_a_restart_is_the_one_recorded_at_lock_out(tmp_path):
    async with bonus_table(tmp_path, magic="QC", lucky=2) as (daemon, rig):
        await lock_round(daemon, rig, [(3, BONUS)])
    # started again while the round is dealt: the draw of the new process is not the round's
    async with bonus_table(tmp_path, magic="2D", lucky=3) as (daemon, rig):
        assert daemon.state.phase.value == "dealing"
        got = await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ["QC", "QD", "QS", "4H", "4C"]})
        assert got["draws"] == {"magic_card": "QC", "lucky_seat": 2}
        assert _hits(daemon.ledger.state["bonus"]) == [(3, "full-house", "100 for 1", 10_000, "table"),
                                                       (3, "magic card QC", "20 for 1", 2_000, "table")]


@pytest.mark.parametrize("table_file, positions", [
    ("caribbean-stud.toml", range(0, 8)),  # seats 1-7 and the dealer's position (§ 639a.1 "Lucky Bonus" (ii))
    ("four-card-poker.toml", range(0, 8)),  # § 641a.1 "Lucky Bonus" (ii)
    ("let-it-ride.toml", range(1, 8)),  # a seat only: no dealer's hand (§ 643a.1 "Lucky Bonus")
])
def test_lucky_bonus_position_is_drawn_among_the_positions_of_the_game(table_file, positions):
    from controller.config import load_config

    cfg = load_config(ROOT / "config" / "tables" / table_file)
    daemon = TableDaemon(cfg, {})
    asked: list[int] = []

    def drawn(k: int) -> int | None:  # the position lock-out records when the CSPRNG gives k
        daemon._draw = lambda n: asked.append(n) or (0 if n == 52 else k)
        return daemon._draws()["lucky_seat"]

    drawn(0)
    n = asked[-1]
    # each outcome of the draw is one position, each position one outcome: every position equally likely
    assert sorted(drawn(k) for k in range(n)) == list(positions)
    daemon._draw = secrets.randbelow  # the OS CSPRNG, as in production
    assert {daemon._draws()["lucky_seat"] for _ in range(400)} == set(positions)


# Whether the meter core records which booked wagers are on the dealer's hand (an optional field of the booking).


async def test_wagers_on_the_dealers_hand_are_resumed_after_a_restart(tmp_path):
    """Started again while a round is dealt, the daemon restores every accepted wager from the journal on its
    spot: a wager on the dealer's hand is one again (the dealer's-hand claim pays it), not an own-hand wager."""
    from controller.errors import RulesError

    chips = [(5, BONUS), (5, ON_DEALER), (2, ON_DEALER), (3, BONUS), (6, "progressive")]
    async with bonus_table(tmp_path, magic="2C", lucky=4) as (daemon, rig):
        await lock_round(daemon, rig, chips)
        locked = dict(daemon.state.accepted)
    assert locked == {chip: 100 for chip in chips}
    async with bonus_table(tmp_path, magic="3C", lucky=1) as (daemon, rig):
        assert daemon.state.phase.value == "dealing"
        restored = dict(daemon.state.accepted)
        # a seat's own-hand wager and its wager on the dealer's hand: booked in that order, told apart by it
        assert {k: c for k, c in restored.items() if k[0] != 2} == {k: c for k, c in locked.items() if k[0] != 2}
        assert restored == locked
        got = await daemon.call("claim", {"seat": "dealer", "cards": ["3H", "4H", "6H", "8H", "TH"]})
        assert got["status"] == "paid" and got["draws"] == {"magic_card": "2C", "lucky_seat": 4}
        assert _hits(daemon.ledger.state["bonus"]) == [(5, "flush (dealer's hand)", "50 for 1", 5_000, "table"),
                                                       (2, "flush (dealer's hand)", "50 for 1", 5_000, "table")]
        with pytest.raises(RulesError, match="seat 2 has no accepted"):
            await daemon.call("claim", {"seat": 2, "spot": BONUS, "cards": ["2S", "2H", "2D", "9C", "9S"]})


async def test_lucky_bonus_paid_with_the_hand_of_the_lucky_seat(tmp_path):
    from controller.errors import RulesError

    async with bonus_table(tmp_path, magic="AS", lucky=3) as (daemon, rig):
        await lock_round(daemon, rig, [(5, BONUS), (3, BONUS)])
        got5 = await daemon.call("claim", {"seat": 5, "spot": BONUS, "cards": ["KS", "KH", "KD", "4C", "4D"]})
        assert got5["status"] == "paid" and "Lucky" not in got5["message"]
        # the lucky seat is paid its Lucky Bonus with a winning hand, and only then (§ 639a.1, docs/rules.md)
        with pytest.raises(RulesError, match="not a winning hand"):
            await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ["2S", "7H", "9D", "JC", "QS"]})
        assert _hits(daemon.ledger.state["bonus"]) == [(5, "full-house", "100 for 1", 10_000, "table")]
        got3 = await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ["QH", "QD", "QC", "7C", "7D"]})
        assert got3["status"] == "paid"
        assert "full-house 100 for 1 = $100.00, Lucky Bonus 5 for 1 = $5.00" in got3["message"]
        meter = daemon.ledger.state["bonus"]
        assert _hits(meter) == [(5, "full-house", "100 for 1", 10_000, "table"),
                                (3, "full-house", "100 for 1", 10_000, "table"),
                                (3, "lucky bonus", "5 for 1", 500, "table")]
        assert meter.paid_by_table_cents == 20_500
        await until(lambda: win(rig, 3) and win(rig, 5), "win lights on")


async def test_dealer_hand_claim_pays_every_seat_that_wagered_on_it(tmp_path):
    async with bonus_table(tmp_path, magic="8D", lucky="dealer") as (daemon, rig):
        await lock_round(daemon, rig, [(5, ON_DEALER), (2, ON_DEALER), (3, BONUS), (6, "progressive")])
        assert daemon.ledger.state["bonus"].current_cents == 1_000_060  # three $1 wagers at 20%

        got = await daemon.call("claim", {"seat": "dealer", "cards": ["9D", "8D", "7D", "6D", "5D"]})
        # 10% of $10,000.60 = $1,000.06, divided equally (§ 639a.12(e)(2)); the Magic Card is one of the dealer's
        # cards and the dealer's position was drawn for the Lucky Bonus: both pay every wager on the dealer's hand
        assert got["status"] == "pending" and got["draws"] == {"magic_card": "8D", "lucky_seat": "dealer"}
        assert got["message"].startswith(f"claim {got['claim_id']}: the dealer's hand 9D 8D 7D 6D 5D: seat 5 "
                                         "straight-flush 10% of meter (1 of 2 shares) = $500.03")
        await until(lambda: win(rig, 5) and win(rig, 2), "win lights of both seats on")
        assert not win(rig, 3) and not win(rig, 6)
        await until(lambda: message(rig) == "PENDING", "sign says PENDING")
        assert rig.sign()["message"]["seat"] == 0  # the dealer's position

        await daemon.call("approve", {"claim_id": got["claim_id"], **FLOOR})
        meter = daemon.ledger.state["bonus"]
        sf, magic = "straight-flush (dealer's hand)", "magic card 8D (dealer's hand)"
        lucky = "lucky bonus (dealer's position)"
        assert _hits(meter) == [  # in settlement order: seat 5, then seat 2
            (5, sf, "10% of meter", 50_003, "attendant"), (5, magic, "20 for 1", 2_000, "table"),
            (5, lucky, "5 for 1", 500, "table"),
            (2, sf, "10% of meter", 50_003, "attendant"), (2, magic, "20 for 1", 2_000, "table"),
            (2, lucky, "5 for 1", 500, "table")]
        assert [h.shares for h in meter.history if h.award == "10% of meter"] == [2, 2]
        assert all(h.approved_by == SUPERVISOR for h in meter.history)
        assert meter.owed_cents == 0 and meter.current_cents == 1_000_000  # back to the reset amount
        await until(lambda: (rig.sign().get("message") or {}) == {"message": "WIN", "table": "CS-07", "seat": 0,
                                                                 "amount_cents": 105_006}, lambda: f"{rig.sign()}")

        # seat 3 comes after the dealer's hand (settled at seat 5's turn): its own hand is paid from the meter now
        own = await daemon.call("claim", {"seat": 3, "spot": BONUS, "cards": ["2H", "5H", "9H", "JH", "KH"]})
        assert own["status"] == "paid" and "Magic" not in own["message"]
        history = await daemon.call("history", {})
        assert [(h["seat"], h["amount"]) for h in history if h["meter"] == "bonus"] == [
            (5, "500.03"), (5, "20.00"), (5, "5.00"), (2, "500.03"), (2, "20.00"), (2, "5.00"), (3, "50.00")]


def _kinds_after(daemon, seq: int) -> list[tuple[str, str]]:
    """(kind, claim event) of each journal entry after `seq`."""
    from controller.ledger import journal
    from controller.ledger.chain import Entry

    conn = journal.connect(daemon.ledger.db_path, "ro")
    try:
        entries = [Entry(e) for _s, _k, e, _h in journal.rows(conn, seq + 1)]
    finally:
        conn.close()
    return [(e.kind, e.body.get("event", "")) for e in entries]


async def test_rejected_dealer_hand_claim_changes_nothing(tmp_path, monkeypatch):
    import controller.app.sign as sign_mod
    from controller.errors import RulesError

    monkeypatch.setattr(sign_mod, "WIN_DISPLAY_S", 0.5)  # seat 6's WIN is over before the light is awaited off
    async with bonus_table(tmp_path, magic="2C", lucky=4) as (daemon, rig):
        await lock_round(daemon, rig, [(6, ON_DEALER), (1, ON_DEALER), (6, "progressive")])
        dealer = {"seat": "dealer"}

        # wrong or duplicate cards: refused, naming the field
        with pytest.raises(InputError, match=r"^cards\[4\]: duplicate card AH \(already at cards\[0\]\)"):
            await daemon.call("claim", {**dealer, "cards": ["AH", "KH", "QH", "JH", "AH"]})
        with pytest.raises(InputError, match=r"^cards: has 4 cards; the rules require 5"):
            await daemon.call("claim", {**dealer, "cards": ["AH", "KH", "QH", "JH"]})
        with pytest.raises(InputError, match=r"^cards\[1\]: "):
            await daemon.call("claim", {**dealer, "cards": ["AH", "ZZ", "QH", "JH", "TH"]})
        with pytest.raises(InputError, match=r"^spot: .*claim it with seat \"dealer\""):
            await daemon.call("claim", {"seat": 6, "spot": ON_DEALER, "cards": ["AH", "KH", "QH", "JH", "TH"]})
        with pytest.raises(InputError, match=r"^seat: must be a seat number or \"dealer\""):
            await daemon.call("claim", {"seat": "the dealer", "cards": ["AH", "KH", "QH", "JH", "TH"]})

        # seat 6's own hand first (its turn comes before the dealer's hand, settled at seat 6's turn)
        trips = await daemon.call("claim", {"seat": 6, "cards": ["2S", "2H", "2D", "9C", "KS"]})
        await daemon.call("approve", {"claim_id": trips["claim_id"], **FLOOR})
        with pytest.raises(InputError, match=r"^cards\[0\]: duplicate card KS \(already at seat 6, claim CS-07-r1-c1"):
            await daemon.call("claim", {**dealer, "cards": ["KS", "QS", "JS", "TS", "9S"]})

        meter = daemon.ledger.state["bonus"]
        head = daemon.ledger.head.seq
        got = await daemon.call("claim", {**dealer, "cards": ["9D", "8D", "7D", "6D", "5D"]})
        assert got["status"] == "pending"
        await until(lambda: win(rig, 1) and message(rig) == "PENDING", "win light of seat 1, PENDING")
        done = await daemon.call("reject", {"claim_id": got["claim_id"], "supervisor": SUPERVISOR,
                                            "secret": "s3cret-floor", "reason": "hole cards exposed"})
        assert "nothing paid" in done["message"]
        assert daemon.ledger.state["bonus"] == meter  # no meter moved: the journal holds the claim's records only
        assert _kinds_after(daemon, head) == [("claim", "claimed"), ("claim", "rejected")]
        await until(lambda: not win(rig, 1) and message(rig) is None, lambda: f"light off, meters: {rig.lights()}")
        assert win(rig, 6)  # seat 6 keeps the light of its paid hand

        # the rejected claim settled nothing: the dealer's hand can be claimed again; a flush is paid by the table
        flush = await daemon.call("claim", {**dealer, "cards": ["3H", "4H", "6H", "8H", "TH"]})
        assert flush["status"] == "paid"
        assert _hits(daemon.ledger.state["bonus"]) == [(6, "flush (dealer's hand)", "50 for 1", 5_000, "table"),
                                                       (1, "flush (dealer's hand)", "50 for 1", 5_000, "table")]
        with pytest.raises(RulesError, match="the dealer's hand was settled in round CS-07-r1 already"):
            await daemon.call("claim", {**dealer, "cards": ["3H", "4H", "6H", "8H", "TH"]})


# --- hits detected from the card-reading shoe ------------------------------------------------------------------


async def test_royal_flush_dealt_by_the_shoe_is_detected_and_paid_after_approval(tmp_path, monkeypatch):
    """At a table whose cards come from the card-reading shoe, a complete deal is read as the dealer deals it (one
    card at a time, seat 1 first, the dealer last in each rotation: docs/rounds.md) and each winning hand goes
    through the dealer's claim path, claimed by the shoe."""
    import controller.app.sign as sign_mod
    import controller.app.table as table_mod
    from controller.cards import parse_cards
    from controller.errors import RulesError

    monkeypatch.setattr(table_mod, "DEAL_SETTLED_S", 0.2)
    monkeypatch.setattr(sign_mod, "WIN_DISPLAY_S", 0.2)
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        await _locked_round(daemon, rig, [3, 5])
        meter = daemon.ledger.state["main"].current_cents  # $10,000.30: two $1 wagers at 15%
        seat3, seat5, dealer = "AS KS QS JS TS".split(), "2D 7C 9H JD 4S".split(), "3H 5C 8D QC KD".split()
        await rig.deal([card for i in range(5) for card in (seat3[i], seat5[i], dealer[i])])

        await until(lambda: daemon.desk.state.pending is not None, "the detected royal flush is claimed")
        claim = daemon.desk.state.pending
        assert (claim.seat, claim.spot, claim.cards) == (3, "progressive", parse_cards(seat3))
        assert claim.amount_cents == meter and claim.needs_approval
        await until(lambda: win(rig, 3) and message(rig) == "PENDING", lambda: f"win light, PENDING: {rig.lights()}")
        assert not win(rig, 5)
        assert rig.sign()["message"]["seat"] == 3 and rig.sign()["message"]["amount_cents"] == meter
        assert daemon.ledger.state["main"].current_cents == meter  # nothing paid before a floorperson approves
        with pytest.raises(RulesError, match="awaits a supervisor"):
            await daemon.call("settle", {"round_id": "CS-07-r1"})

        await daemon.call("approve", {"claim_id": claim.id, **FLOOR})
        main = daemon.ledger.state["main"]
        royal = [h for h in main.history if h.seat == 3]
        assert [(h.hand, h.award, h.amount_cents, h.approved_by) for h in royal] == [
            ("royal-flush", "100% of meter", meter, SUPERVISOR)]
        # the Envy Bonus of Paytable D to the other progressive wagerer, paid by the table (§ 639a.12(d)(6))
        assert [(h.seat, h.amount_cents, h.paid_by) for h in main.history if h.seat != 3] == [(5, 100_000, "table")]
        assert main.current_cents == 1_000_000  # reset to $10,000
        await until(lambda: (rig.sign().get("message") or {}) == {"message": "WIN", "table": "CS-07", "seat": 3,
                                                                 "amount_cents": meter}, lambda: f"{rig.sign()}")

        # the dealer's claim for the same hand afterwards: claimed already
        with pytest.raises(RulesError, match="seat 3 was settled in round CS-07-r1 already"):
            await daemon.call("claim", {"seat": 3, "cards": seat3})
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        assert [(h["seat"], h["amount"]) for h in await daemon.call("history", {})] == [(3, "10000.30"), (5, "1000.00")]
        # as the journal has it, unless asked what each payout is (the console's question)
        assert not [h for h in await daemon.call("history", {}) if "kind" in h]
        assert [(h["seat"], h["kind"]) for h in await daemon.call("history", {"kinds": True})] == [
            (3, "jackpot"), (5, "envy")]


async def test_a_settle_right_after_the_deal_claims_the_shoes_hits_first_and_never_drops_them(tmp_path):
    """The dealer settles at once after the last card (the demo's dealer does so within a second), before the shoe's
    hits would be claimed by themselves (DEAL_SETTLED_S, 3 s, untouched here). The settle claims them now, in
    settlement order: it is refused naming the claim that now awaits a supervisor, and the hit claimed after it; each is claimed, approved and paid in turn, and only then does the round settle. Before, the
    settle was accepted and both hits dropped with a warning."""
    from controller.errors import RulesError

    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        await _locked_round(daemon, rig, [3, 5])
        seat3, seat5, dealer = "AS KS QS JS TS".split(), "9D 8D 7D 6D 5D".split(), "3H 5C 8C QC KD".split()
        await rig.deal([card for i in range(5) for card in (seat3[i], seat5[i], dealer[i])])
        await until(lambda: daemon.shoe.detected is not None, "the deal complete, its hits detected")
        with pytest.raises(RulesError) as refused:
            await daemon.call("settle", {"round_id": "CS-07-r1"})
        first = daemon.desk.state.pending
        assert first is not None and first.claimed_by == "shoe" and first.seat in (3, 5), daemon.desk.claims_json()
        other = 8 - first.seat  # the hands are settled from the dealer's right: seat 5's first
        assert f"{first.id} awaits a supervisor's approval" in str(refused.value), refused.value
        assert f"then the shoe's detected hit of round CS-07-r1 not claimed yet: seat {other}" in str(refused.value)
        await daemon.call("approve", {"claim_id": first.id, **FLOOR})
        await until(lambda: daemon.desk.state.pending is not None and daemon.desk.state.pending.seat == other,
                    "the other hit claimed after the first")
        # the sign shows the claim that waits, not the win of the one before it (shown for 10 s: so well within)
        await until(lambda: message(rig) == "PENDING" and rig.sign()["message"]["seat"] == other,
                    lambda: f"PENDING for seat {other}: {rig.sign()}", timeout=3)
        with pytest.raises(RulesError, match="awaits a supervisor's approval") as refused:
            await daemon.call("settle", {"round_id": "CS-07-r1"})
        assert "not claimed yet" not in str(refused.value)
        await daemon.call("approve", {"claim_id": daemon.desk.state.pending.id, **FLOOR})
        await until(lambda: daemon.desk.busy is None, "the claim's records journaled")
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        paid = sorted((h.seat, h.hand) for h in daemon.ledger.state["main"].history)
        assert (3, "royal-flush") in paid and (5, "straight-flush") in paid, paid


async def test_a_deal_the_shoe_read_is_claimed_after_a_restart(tmp_path, monkeypatch):
    """Three hits detected (settled from the dealer's right: seat 6, 5, then 3). Seat 6's claim is rejected, seat 5's
    waits, and the controller stops before seat 3's is made. The deal whose hits were being claimed is in the
    journal: the restart reads it again, leaves the hits the shoe claimed before as they are (seat 6 stays rejected:
    before, a restart claimed it again) and claims seat 3's once seat 5's is approved. Before, seat 3's hit was lost
    with the process's memory."""
    import controller.app.table as table_mod
    from controller.errors import RulesError

    monkeypatch.setattr(table_mod, "DEAL_SETTLED_S", 0.2)
    seat3, seat5, seat6 = "AS KS QS JS TS".split(), "9C 8C 7C 6C 5C".split(), "4S 4H 4D 4C 2D".split()
    dealer = "3H 5H 8D QC KD".split()
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        await _locked_round(daemon, rig, [3, 5, 6])
        await rig.deal([card for i in range(5) for card in (seat3[i], seat5[i], seat6[i], dealer[i])])
        await until(lambda: daemon.desk.state.pending is not None and daemon.desk.state.pending.seat == 6, "seat 6's")
        await daemon.call("reject", {"claim_id": daemon.desk.state.pending.id, "reason": "misread", **FLOOR})
        await until(lambda: daemon.desk.state.pending is not None and daemon.desk.state.pending.seat == 5, "seat 5's")
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        assert daemon.round_info()["id"] == "CS-07-r1" and daemon.state.phase.value == "dealing"
        with pytest.raises(RulesError) as refused:
            await daemon.call("settle", {"round_id": "CS-07-r1"})
        assert "not claimed yet: seat 3" in str(refused.value) and "seat 6" not in str(refused.value), refused.value
        await daemon.call("approve", {"claim_id": daemon.desk.state.pending.id, **FLOOR})
        await until(lambda: daemon.desk.state.pending is not None and daemon.desk.state.pending.seat == 3, "seat 3's")
        await daemon.call("approve", {"claim_id": daemon.desk.state.pending.id, **FLOOR})
        await until(lambda: daemon.desk.busy is None, "the claim's records journaled")
        await daemon.call("settle", {"round_id": "CS-07-r1"})
        paid = sorted({h.seat for h in daemon.ledger.state["main"].history if h.paid_by == "attendant"})
        assert paid == [3, 5], daemon.ledger.state["main"].history


async def test_a_dealers_claim_at_the_settle_drops_none_of_the_shoes_hits(tmp_path):
    """The dealer claims a hand (a wrong one) at the moment the round is settled, right after the deal: the shoe's
    hits wait for that claim's verification instead of being dropped (before: both dropped with "another claim is
    being verified", and the next settle went through with nothing paid)."""
    from controller.errors import InputError

    seat3, seat5, dealer = "AS KS QS JS TS".split(), "9D 8D 7D 6D 5D".split(), "3H 5C 8C QC KD".split()
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        await _locked_round(daemon, rig, [3, 5])
        await rig.deal([card for i in range(5) for card in (seat3[i], seat5[i], dealer[i])])
        await until(lambda: daemon.shoe.detected is not None, "the deal complete, its hits detected")
        wrong, settle = await asyncio.gather(
            daemon.call("claim", {"seat": 3, "cards": "2S 7H 9C JC KC".split()}),
            daemon.call("settle", {"round_id": "CS-07-r1"}), return_exceptions=True)
        assert isinstance(settle, InputError), settle
        for _ in range(4):  # approve what waits until the round settles
            await until(lambda: daemon.desk.busy is None and daemon.desk.state.open is None
                        or daemon.desk.state.pending is not None, "a claim that waits, or none")
            if daemon.desk.state.pending is None:
                with contextlib.suppress(InputError):
                    await daemon.call("settle", {"round_id": "CS-07-r1"})
                if daemon.round_info()["id"] != "CS-07-r1":
                    break
                continue
            await daemon.call("approve", {"claim_id": daemon.desk.state.pending.id, **FLOOR})
        paid = sorted((h.seat, h.hand) for h in daemon.ledger.state["main"].history if h.paid_by == "attendant")
        assert paid == [(3, "royal-flush"), (5, "straight-flush")], paid


async def test_a_deal_cut_by_a_restart_is_not_read_as_another(tmp_path):
    """The controller stops in the middle of a deal: the cards read before are gone, and the ones read after it
    are not the deal from its start. Nothing is detected in that round (before: the later cards were read as the
    first ones, and hands that were never dealt could be claimed); the dealer claims."""
    seat3, seat5, dealer = "AS KS QS JS TS".split(), "2D 7C 9H JD 4S".split(), "3H 5C 8D QC KD".split()
    deal = [card for i in range(5) for card in (seat3[i], seat5[i], dealer[i])]
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        await _locked_round(daemon, rig, [3, 5])
        await rig.deal(deal[:6])
        await until(lambda: len(daemon.shoe.cards) == 6, "six cards read")
    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        assert daemon.state.phase.value == "dealing" and daemon.shoe.deal_unknown == "CS-07-r1"
        await rig.deal(deal[6:] + deal[:6])  # fifteen cards more: a whole deal's worth, in another order
        await until(lambda: len(daemon.shoe.cards) == 15, "the cards read")
        assert daemon.shoe.detected is None and daemon.desk.state.pending is None
        await daemon.call("settle", {"round_id": "CS-07-r1"})  # nothing detected holds it


async def test_the_demos_dealer_settles_a_round_with_a_detected_hit_once_its_floorperson_approved(tmp_path):
    """The demo's scripted dealer settles a second after the deal; with a royal flush in it, the settle claims the
    hit and is refused while it waits: the demo's floorperson approves it and the round settles, paid (before, the
    demo never paid a detected hit: the settle dropped it)."""
    import random

    from controller.cards import parse_card
    from hil.dealer import play

    seat3, seat5, dealer = "AS KS QS JS TS".split(), "2D 7C 9H JD 4S".split(), "3H 5C 8D QC KD".split()
    cards = [parse_card(c) for i in range(5) for c in (seat3[i], seat5[i], dealer[i])]

    class Script(random.Random):
        def randint(self, a, b):
            return 2  # two players

        def sample(self, population, k):
            return [3, 5] if k == 2 else cards  # seats 3 and 5; then the deal

    async with table(tmp_path, secret="s3cret-floor") as (daemon, rig):
        assert await play(rig, daemon, rounds=1, rng=Script(), pause=0.05,
                          floorperson=(SUPERVISOR, "s3cret-floor")) == 1
        royal = [(h.seat, h.hand, h.approved_by) for h in daemon.ledger.state["main"].history if h.seat == 3]
        assert royal == [(3, "royal-flush", SUPERVISOR)]
        assert daemon.round_info()["id"] == "CS-07-r2"


async def test_a_lock_out_booked_on_only_one_of_its_meters_is_reversed_at_start(tmp_path):
    """The controller stopped between the journal entries of one lock-out (two meters): the round was never
    dealt, so the restart reverses what was booked instead of resuming the round without the other meter's
    wagers."""
    from datetime import UTC, datetime

    from controller.ledger import Ledger, software_digest
    from controller.meter import ops as meter_ops
    from controller.meter.journal import op_body
    from controller.round.journal import JournalReducer

    async with table(tmp_path) as (daemon, rig):
        pass  # the meters are defined
    at = datetime.now(UTC)
    with Ledger.open(tmp_path / "state", JournalReducer(), software_digest=software_digest()) as led:
        op = meter_ops.BookContributions("CS-07-r1", "CS-07", ((3, 500),), at, round_meters=("bonus", "main"))
        led.submit(op.kind, op_body("main", op), "CS-07-r1:book:main")  # the bonus entry never came
        assert "CS-07-r1" in led.state["main"].open_rounds
    async with table(tmp_path) as (daemon, rig):
        main = daemon.ledger.state["main"]
        assert not main.open_rounds and main.contributions == 0 and main.wagers_count == 0
        assert daemon.round_info()["id"] == "CS-07-r2" and daemon.state.phase.value == "betting"


# A table whose Five Card Hand Bonus meter is linked (its own Progressive Payout Wager meter stays its own). The
# broker is not running: the link never connects, and the table starts with progressive wagering disabled.

LINKED = "bonus-link"


def _linked_bonus(cfg, port: int):
    from controller.config.model import LinkedMeter, MqttConfig

    mqtt = MqttConfig(host="127.0.0.1", port=port, tls=False, client_id=cfg.table, topic_prefix="progressive/v1",
                      link_timeout=2.0)
    return replace(cfg, meters={**cfg.meters, "bonus": LinkedMeter("bonus", LINKED, (100,))}, mqtt=mqtt)


@contextlib.asynccontextmanager
async def linked_table(tmp_path):
    from tableproc import free_port

    port = free_port()  # nobody listens there
    async with daemon_on_rig(TableDaemon, TABLE, RIG, tmp_path / "state", lambda cfg: _linked_bonus(cfg, port)) as (
            daemon, rig):
        assert daemon.link is not None and not daemon.link.alive
        yield daemon, rig


async def _book_r1(tmp_path, *, on_main: bool) -> None:
    """Round CS-07-r1 booked at lock-out on the linked meter (seat 3's bonus wager), and on the table's own meter
    (its progressive wager) if `on_main`: each booking names both meters, as a lock-out of both writes them."""
    from datetime import UTC, datetime

    from controller.ledger import Ledger, software_digest
    from controller.link.outbox import LINK_SEND, OutboxReducer, send_body
    from controller.meter import ops as meter_ops
    from controller.meter.journal import op_body
    from controller.round.journal import JournalReducer

    async with linked_table(tmp_path):
        pass  # the table's meter is defined, the link journal created
    at = datetime.now(UTC)
    with Ledger.open(tmp_path / "state" / "link", OutboxReducer(), software_digest=software_digest()) as box:
        op = meter_ops.BookContributions("CS-07-r1", "CS-07", ((3, 100),), at, round_meters=("bonus", "main"))
        box.submit(LINK_SEND, send_body("bonus", LINKED, op), "CS-07-r1:book:bonus")
        assert box.state.open_rounds["bonus"]["CS-07-r1"][2] == ("bonus", "main")
    if on_main:
        with Ledger.open(tmp_path / "state", JournalReducer(), software_digest=software_digest()) as led:
            op = meter_ops.BookContributions("CS-07-r1", "CS-07", ((3, 500),), at, round_meters=("bonus", "main"))
            led.submit(op.kind, op_body("main", op), "CS-07-r1:book:main")


async def test_a_lock_out_booked_on_its_linked_meter_only_is_reversed_at_start(tmp_path):
    """The controller stopped after the booking on the linked meter (in the link journal) and before the one on
    the table's own meter: the round was never dealt, so the restart voids the linked booking through the link
    journal (sent to the authority once the link is up) instead of resuming the round with only its bonus wagers."""
    await _book_r1(tmp_path, on_main=False)
    async with linked_table(tmp_path) as (daemon, rig):
        box = daemon.link.outbox
        assert "CS-07-r1" not in box.open_rounds.get("bonus", {})
        voids = [(s.meter, s.linked, s.body["round_id"]) for s in box.pending.values() if s.kind == "void-round"]
        assert voids == [("bonus", LINKED, "CS-07-r1")]
        assert await daemon.meters.port("bonus").journaled("bonus", "CS-07-r1:void:bonus")
        main = daemon.ledger.state["main"]
        assert not main.open_rounds and main.contributions == 0 and main.wagers_count == 0
        assert daemon.round_info()["id"] == "CS-07-r2" and daemon.state.phase.value == "betting"
        assert daemon.state.accepted == {}


async def test_a_lock_out_booked_on_its_local_and_linked_meters_is_resumed_at_start(tmp_path):
    """Booked on both meters, in both journals: the round was dealt, and the restart resumes it with every wager."""
    await _book_r1(tmp_path, on_main=True)
    async with linked_table(tmp_path) as (daemon, rig):
        box = daemon.link.outbox
        assert [s.kind for s in box.pending.values()] == ["book-contributions"]  # nothing reversed
        assert "CS-07-r1" in box.open_rounds["bonus"] and "CS-07-r1" in daemon.ledger.state["main"].open_rounds
        assert daemon.round_info()["id"] == "CS-07-r1" and daemon.state.phase.value == "dealing"
        assert dict(daemon.state.accepted) == {(3, "progressive"): 500, (3, "five-card-hand-bonus"): 100}
        assert daemon.journal.booked["CS-07-r1"] == ("bonus", "main")


@pytest.mark.parametrize("closed", ["main", "bonus"])
async def test_a_round_closed_on_one_of_its_meters_is_not_taken_for_an_unfinished_lock_out(tmp_path, closed):
    """The controller stopped between the closes of a settled round (one per meter, in two journals): the round
    was dealt and booked on both meters, so nothing is voided; it stays open on the other meter for the dealer."""
    from datetime import UTC, datetime

    from controller.ledger import Ledger, software_digest
    from controller.link.outbox import LINK_SEND, OutboxReducer, send_body
    from controller.meter import ops as meter_ops
    from controller.meter.journal import op_body
    from controller.round.journal import JournalReducer

    await _book_r1(tmp_path, on_main=True)
    op = meter_ops.CloseRound("CS-07-r1", datetime.now(UTC))
    if closed == "main":
        with Ledger.open(tmp_path / "state", JournalReducer(), software_digest=software_digest()) as led:
            led.submit(op.kind, op_body("main", op), "CS-07-r1:close:main")
    else:
        with Ledger.open(tmp_path / "state" / "link", OutboxReducer(), software_digest=software_digest()) as box:
            box.submit(LINK_SEND, send_body("bonus", LINKED, op), "CS-07-r1:close:bonus")
    still = "bonus" if closed == "main" else "main"
    async with linked_table(tmp_path) as (daemon, rig):
        box = daemon.link.outbox
        assert not [s for s in box.pending.values() if s.kind == "void-round"]  # nothing reversed
        main = daemon.ledger.state["main"]
        assert main.voided_rounds == 0 and main.wagers_count == 1
        assert daemon.round_info()["id"] == "CS-07-r1"  # left open for the dealer to settle (or void)
        assert daemon.journal.booked["CS-07-r1"] == (still,)
