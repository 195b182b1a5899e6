"""The table daemon on the rig: real drivers over paced PTY lines, real simulators, a real ledger.

Rounds are played through the rig's control API as a dealer would: chips placed, the lock-out pressed,
the shoe jammed, a device muted; the test then looks at what the simulated hardware shows and at the journal.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from rigtable import daemon_on_rig, lit, until

from controller.app.table import TableDaemon

ROOT = Path(__file__).resolve().parent.parent
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
        assert {"meter": "main", "amount": "10000.15"} in status["meters"]
        await until(lambda: lit(rig, 3) == [] and rig.lights()["lockout_lamp"] is False, "lights off")
        await until(lambda: "CS-07-r1" in daemon.ledger.state["main"].recent_rounds, "round closed in the journal")

        text = daemon.metrics.exposition().decode()
        for line in ('progressive_wagers_accepted_total{spot="progressive"} 1.0',
                     'progressive_wagers_not_recognized_total{reason="after lock-out"} 1.0',
                     'progressive_meter_amount_cents{meter="main"} 1.000015e+06',
                     'progressive_rounds_total{outcome="closed"} 1.0',
                     'progressive_round_phase{phase="betting"} 1.0',
                     'progressive_lockout_latency_seconds_count 1.0'):
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


async def test_device_down_disables_wagering_until_it_recovers(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        await rig.place_chip(1, "progressive", 100)
        await until(lambda: "progressive" in lit(rig, 1), "seat 1 acknowledged")
        rig.unplug("shoe")
        await until(lambda: daemon.state.blocked, "wagering disabled")
        await until(lambda: (rig.sign().get("message") or {}).get("message") == "OFFLINE", "sign says OFFLINE")
        await rig.place_chip(4, "progressive", 100)
        await until(lambda: daemon._not_recognized >= 1, "wager while down not recognized")
        assert lit(rig, 4) == [] and "progressive" in lit(rig, 1)  # nothing accepted is lost
        rig.replug("shoe")
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


# --- jackpot claims ----------------------------------------------------------------------------

SUPERVISOR = "floor-1"


def _with_supervisor(cfg, secret):
    from controller.config.credentials import hash_credential, parse_credential
    from controller.config.model import Supervisor

    return replace(cfg, supervisors=(Supervisor(SUPERVISOR, parse_credential(hash_credential(secret, "pbkdf2_sha256"))),))


async def _locked_round(daemon, rig, seats):
    for seat in seats:
        await rig.place_chip(seat, "progressive", 100)
    await until(lambda: len(daemon.state.accepted) == len(seats), "wagers acknowledged")
    await rig.press_lockout()
    await until(lambda: daemon.state.phase.value == "dealing", "dealing")


async def test_royal_flush_claim_approved_paid_and_reset(tmp_path, monkeypatch):
    import controller.app.table as table_mod
    from controller.errors import RulesError

    monkeypatch.setattr(table_mod, "WIN_DISPLAY_S", 0.2)
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
        assert got["status"] == "pending" and "100% of meter = $10000.45" in got["message"]
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
        assert "10% of meter = $1000.00" in got2["message"]
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
