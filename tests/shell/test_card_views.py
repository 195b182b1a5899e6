"""The card table's `status` and `round` views (controller/app/card_views.py), built from values alone."""

from __future__ import annotations

from pathlib import Path

from controller.app.card_views import card_status, meters_json, round_json
from controller.config import load_config
from controller.ledger.ledger import Head
from controller.linkproto.schema import MeterValue
from controller.round import model as rm

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"seats_disabled": [{"seat": 2, "device": "seat-2", "reason": "timeout"}], "devices": [],
         "uptime_seconds": 1.5, "lights": {"accepted": [], "win": []}}


def test_linked_meters_follow_the_tables_own_and_show_no_amount_before_the_authority_sends_one():
    assert meters_json({}, {"jackpot": "floor-a", "bonus": "floor-b"},
                       {"floor-b": MeterValue("floor-b", 1234567, 9, "t", 1000000)}) == [
        {"meter": "bonus", "linked": "floor-b", "amount": "12345.67"},
        {"meter": "jackpot", "linked": "floor-a", "amount": None},
    ]
    assert meters_json({}, None, {}) == []


def test_status_names_the_round_its_blocks_with_a_source_and_the_link_only_at_a_linked_table():
    cfg = load_config(ROOT / "config" / "tables" / "caribbean-stud.toml")
    s = rm.TableState(3, phase=rm.Phase.DEALING, blocks={rm.Block.CLOSED: frozenset({"sam"}),
                                                        rm.Block.DECK: frozenset()})
    out = card_status(cfg, s, "CS-07-r3", [], Head(12, "ab"), anchor=None, link=None, shell=SHELL)
    assert out["round"] == {"id": "CS-07-r3", "phase": "dealing"}
    assert out["blocks"] == [{"block": "closed", "sources": ["sam"]}]  # a block nobody holds is not shown
    assert (out["ledger_head_seq"], out["ledger_head_hash"]) == (12, "ab")
    assert out["seats_disabled"] == SHELL["seats_disabled"] and out["lights"] == SHELL["lights"]
    assert "link" not in out and out["table"] == cfg.table
    linked = card_status(cfg, s, "CS-07-r3", [], Head(12, "ab"), anchor=None, link={"alive": True}, shell=SHELL)
    assert linked["link"] == {"alive": True}


def test_round_lists_its_wagers_by_seat_and_spot_in_dollars():
    s = rm.TableState(3, accepted={(5, "progressive"): 100, (2, "progressive"): 500}, void_requested="stub count")
    assert round_json(s, "CS-07-r3", 1, []) == {
        "id": "CS-07-r3", "phase": "betting",
        "wagers": [{"seat": 2, "spot": "progressive", "amount": "5.00"},
                   {"seat": 5, "spot": "progressive", "amount": "1.00"}],
        "not_recognized": 1, "claims": [], "void_requested": "stub count",
    }
