"""One device, one model name: in the daemon's status, its metrics, the journal's device records and the console's
device list; and a device that answers as another model, on the rig, down with the reason, its seat disabled, until
the right model is back."""

from __future__ import annotations

import json
import re
import sqlite3

from test_console import ROUND, STATUS, _text
from test_table_daemon import _metric, table

from controller.console.view import page
from controller.round.faults import DEVICE_FAULT, FaultWatch, check_body

from rigtable import until

SEAT_MODEL = "PJ-SEAT-1B"  # the seat-single-bonus map's


def _faults(daemon) -> list[dict]:
    con = sqlite3.connect(f"file:{daemon.ledger.db_path}?mode=ro", uri=True)
    try:
        return [json.loads(b) for (b,) in con.execute(
            "SELECT body FROM journal WHERE kind = 'device-fault' ORDER BY seq")]
    finally:
        con.close()


async def test_a_wrong_model_at_a_seat_s_unit_is_down_with_its_reason_everywhere(tmp_path):
    async with table(tmp_path) as (daemon, rig):
        status = await daemon.call("status", {})
        devices = {d["id"]: d for d in status["devices"]}
        assert {n: (d["model"], d["identity"]) for n, d in devices.items()} == {
            **{f"seat-{s}": (SEAT_MODEL, "checked") for s in range(1, 8)}, "lockout": ("PJ-LOCKOUT-1", "checked"),
            "sign": ("PJ-SIGN-3", "checked"),
            "shuffler": ("line-protocol-1", "not checked: the line protocol reports no model"),
            "shoe": ("line-protocol-1", "not checked: the line protocol reports no model")}
        assert _metric(daemon, f'progressive_device_info{{device="seat-4",model="{SEAT_MODEL}"}} 1.0')
        assert _metric(daemon, 'progressive_device_info{device="shoe",model="line-protocol-1"} 1.0')

        # seat 4's device is swapped for a lock-out button set to the same unit
        sim = rig.simulator("seat-4")
        rig.mute("seat-4", True)
        await until(lambda: daemon.state.disabled_seats == {4}, "seat 4 disabled")
        sim.model = "PJ-LOCKOUT-1"
        sim.reboot()
        rig.mute("seat-4", False)
        await until(lambda: "PJ-LOCKOUT-1" in daemon.devices["seat-4"].identity_status, "the wrong model seen")
        status = await daemon.call("status", {})
        seat4 = next(d for d in status["devices"] if d["id"] == "seat-4")
        assert seat4["up"] is False and seat4["model"] == SEAT_MODEL
        for word in ("seat-4", "bus table-bus", "unit 4", "'PJ-LOCKOUT-1'", f"'{SEAT_MODEL}'", "seat-single-bonus.toml"):
            assert word in seat4["identity"], (word, seat4["identity"])
        assert [x["seat"] for x in status["seats_disabled"]] == [4]
        assert not any(sim.lights()["accepted"].values())
        await until(lambda: any(b["device"] == "seat-4" for b in _faults(daemon)), "the fault journaled")
        (down,) = [b for b in _faults(daemon) if b["device"] == "seat-4"]
        assert (down["event"], down["model"], down["device_kind"]) == ("down", SEAT_MODEL, "seat")

        sim.model = SEAT_MODEL  # the right device back
        await until(lambda: not daemon.state.disabled_seats, "seat 4 enabled again")
        assert daemon.devices["seat-4"].identity_status == "checked"


def test_the_journal_reads_device_records_with_and_without_a_model():
    from datetime import UTC, datetime

    at = datetime(2026, 12, 5, 15, 41, tzinfo=UTC)
    ((kind, body),) = FaultWatch().device("seat-4", False, at, kind="seat", seats=[4], reason="no reply",
                                          model=SEAT_MODEL)
    assert kind == DEVICE_FAULT and body["model"] == SEAT_MODEL
    assert check_body(kind, body) == {}
    older = {k: v for k, v in body.items() if k != "model"}  # written before models were recorded
    assert check_body(kind, older) == {}
    for bad, field in (({**body, "model": 7}, "model"), ({**body, "colour": "red"}, "body")):
        try:
            check_body(kind, bad)
        except Exception as e:
            assert getattr(e, "field", None) == field, e
        else:
            raise AssertionError(bad)


def test_the_console_shows_each_device_s_model_and_a_wrong_one_at_a_tap():
    wrong = ("seat-4 (bus table-bus, unit 4) reports model 'PJ-LOCKOUT-1' at input_register 4096-4103; expected "
             f"model '{SEAT_MODEL}' (map seat-single-bonus.toml)")
    devices = [{"id": "seat-3", "kind": "seat", "model": SEAT_MODEL, "identity": "checked", "up": True, "errors": 0},
               {"id": "seat-4", "kind": "seat", "model": SEAT_MODEL, "identity": wrong, "up": False, "errors": 1,
                "since": "2026-12-05T15:41:01Z", "last_error": wrong},
               {"id": "shoe", "kind": "card-counter", "model": "line-protocol-1",
                "identity": "not checked: the line protocol reports no model", "up": True, "errors": 0}]
    parts = page.sections({"status": {**STATUS, "devices": devices}, "round": ROUND, "history": []}, None, "t")
    cells = dict(re.findall(r'data-device="([^"]+)"><td>[^<]*<div class="model">(.*?)</div></td>', parts["devices"]))
    assert cells["seat-3"] == f"<small>{SEAT_MODEL}</small>" and cells["shoe"] == "<small>line-protocol-1</small>"
    assert '<details data-key="id-seat-4">' in cells["seat-4"]
    assert " ".join(_text(cells["seat-4"]).split()) == f"{SEAT_MODEL} ✖ identity failed {wrong}"
    assert "<th>Device <small>(model)</small></th>" in parts["devices"]
