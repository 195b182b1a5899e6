"""The table's entries in its journal beside its meters' (controller.meter.journal): a jackpot claim as each of
its events left it, a deal the card-reading shoe read, what only a supervisor lifts, the device faults and
wagering blocks; and `JournalReducer`, the reducer a state directory's ledger replays: every meter, and these
entries checked, none of them moving a meter."""

from __future__ import annotations

from functools import partial
from typing import Any

from controller.cards import parse_cards
from controller.errors import InputError
from controller.meter.journal import MetersReducer
from controller.round.claim_machine import EVENTS
from controller.round.claims import Claim, claim_from_json, claim_to_json
from controller.round.faults import KINDS as FAULT_KINDS
from controller.round.faults import check_body as check_fault

# At a table: a jackpot claim as one of its events left it (controller.round.claim_machine: claimed, approved,
# paid, ...), so that a restart finds it; the meters are untouched (its payouts are meter operations of their own).
CLAIM = "claim"
# At a table: what stops wagering or the round's end that only a supervisor may lift (a deck removed, a void a
# wrong stub count asked for), as it stands after a change, so that a restart does not lift it.
TABLE_STATE = "table-state"
# At a table: a complete deal the card-reading shoe read, with hits in it (the cards, in the order read), so that a
# restart claims its hits still; the meters are untouched.
DEAL = "deal"


def claim_body(claim: Claim, event: str) -> dict[str, Any]:
    """The journal body of a claim record (the claim after `event`)."""
    return {"event": event, "claim": claim_to_json(claim)}


def claim_record(body: dict[str, Any]) -> dict[str, Any]:
    event = body.get("event")
    if event not in EVENTS:
        raise InputError("event", f"{event!r} is not one of {', '.join(EVENTS)}")
    if set(body) != {"event", "claim"}:
        raise InputError("claim", "a claim record has an event and a claim")
    claim = claim_from_json(body["claim"])
    return {"claim": claim.id, "event": event, "status": claim.status}


def deal_record(body: dict[str, Any]) -> dict[str, Any]:
    if set(body) != {"round_id", "cards"} or not isinstance(body["round_id"], str) or not body["round_id"]:
        raise InputError("body", "a deal has round_id and cards")
    cards = body["cards"]
    if not isinstance(cards, list) or not 0 < len(cards) <= 52:
        raise InputError("cards", "must be the list of the cards read, at most 52")
    parse_cards(cards, "cards")
    return {}


def table_state_record(body: dict[str, Any]) -> dict[str, Any]:
    if set(body) != {"deck", "void_requested"}:
        raise InputError("body", "a table state has deck and void_requested")
    deck = body["deck"]
    if not isinstance(deck, list) or not all(isinstance(x, str) and x for x in deck):
        raise InputError("deck", "must be the list of what blocks the deck")
    asked = body["void_requested"]
    if asked is not None and not (isinstance(asked, dict) and set(asked) == {"round_id", "reason"}
                                  and all(isinstance(v, str) and v for v in asked.values())):
        raise InputError("void_requested", "must be null or {round_id, reason}")
    return {}


class JournalReducer(MetersReducer):
    """The reducer of a state directory's journal (a table's or an authority's): its meters, and the table's
    entries beside them checked."""

    def __init__(self) -> None:
        super().__init__({CLAIM: claim_record, TABLE_STATE: table_state_record, DEAL: deal_record,
                          **{kind: partial(check_fault, kind) for kind in sorted(FAULT_KINDS)}})


__all__ = ["CLAIM", "DEAL", "TABLE_STATE", "JournalReducer", "claim_body", "claim_record", "deal_record",
           "table_state_record"]
