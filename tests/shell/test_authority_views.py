"""The authority's `status` (controller/authority/views.py), a pure function of what it holds: its meters and their
locks from a real journal, every configured table in the configuration's order with its anchors, open rounds (its
latest OPEN_ROUNDS_SHOWN) and floor line."""

from __future__ import annotations

from controller.authority.views import OPEN_ROUNDS_SHOWN, Seen, open_rounds, status_json
from controller.linkproto import anchors, schema
from controller.linkproto.liveness import Liveness

from authority_journal import TABLES, apply, booking, journal, lock, op
from linkrig import METER

REFERENCE = schema.JournalAnchor("cs-01", 40, "ab" * 32, "2026-11-30T01:02:03Z")
PLANTED = schema.JournalAnchor("cs-01", 10**12, "cd" * 32, "2026-11-30T01:02:04Z")


async def test_the_status_shows_the_meters_locks_and_every_table_as_held(tmp_path):
    with journal(tmp_path) as led:
        await apply(led, op("cs-01", 1, booking("cs-01", 1)))
        await apply(led, op("cs-01", 2, lock("cs-01", 1, seat=2)))
        held = {"cs-01": anchors.TableAnchors(anchors.Report(REFERENCE, 1.0), anchors.Report(PLANTED, 2.0), 3)}
        line = schema.FloorLine("fcp-02", "2026-11-30T01:02:05Z", "fcp-02-r4", "dealing")
        seen = Seen(Liveness(TABLES, 0.0).tables, {"cs-01": REFERENCE}, held, {"fcp-02": (line, 5.0)})
        status = status_json("link-1", "9.9", True, "America/New_York", led.state, led.head.seq, seen, 61.6)
        assert {k: status[k] for k in ("role", "authority", "version", "broker_connected", "time_zone",
                                       "ledger_head_seq", "uptime_seconds")} == \
            {"role": "link-authority", "authority": "link-1", "version": "9.9", "broker_connected": True,
             "time_zone": "America/New_York", "ledger_head_seq": led.head.seq, "uptime_seconds": 62}
        [meter] = status["meters"]
        [locked] = meter["locked"]
        assert meter["meter"] == METER and meter["reset"] == "10000.00" and locked["claim"] == "cs-01-r1-c1:0"
        assert (locked["table"], locked["seat"], locked["round_id"]) == ("cs-01", 2, "cs-01-r1")
        cs, fcp = status["tables"]
        assert (cs["table"], fcp["table"]) == TABLES
        assert cs["anchor_suspect"] == {"seq": 10**12, "hash": "cd" * 32, "at": PLANTED.at, "reports": 3}
        assert cs["open_rounds"] == [{"meter": METER, "round_id": "cs-01-r1"}] and cs["floor"] is None
        assert fcp["anchor_suspect"] is None and fcp["open_rounds"] == [] and fcp["floor"]["round"]["id"] == "fcp-02-r4"


async def test_a_table_shows_its_latest_open_rounds_in_the_order_of_their_numbers(tmp_path):
    with journal(tmp_path) as led:
        for n in range(1, OPEN_ROUNDS_SHOWN + 6):
            await apply(led, op("cs-01", n, booking("cs-01", n)))
        shown = open_rounds(led.state)["cs-01"]
        assert [r["round_id"] for r in shown] == [f"cs-01-r{n}" for n in range(6, OPEN_ROUNDS_SHOWN + 6)]
