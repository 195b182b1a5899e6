"""The round and settlement JSON of `progressivectl settle` (a contract other tools script against).

Input keys: ``game``, ``wager``, ``paytable`` (a built-in id or a TOML file), ``meter`` (``amount``,
``reset`` as decimal strings in dollars), ``seats`` (``seat``, ``wager`` amount, ``folded``,
``cards``), ``community``, ``dealer`` (``cards``, and ``wagers``: the seats and amounts that bet on
the dealer's hand), ``magic_card``, ``lucky_seat`` (a seat number or ``"dealer"``); for dice games
``positions`` and ``rolls``. Every error names the field at fault. See docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.cards import card_str, parse_card, parse_cards
from controller.errors import InputError
from controller.games import Game, Wager
from controller.games import game as find_game
from controller.games import wager as find_wager
from controller.money import format_cents, format_units, parse_cents, parse_units
from controller.paytables import Paytable, check_paytable_for
from controller.positions import DEALER, DEALER_POSITION
from controller.round.settlement import Round, Seat, Settlement, settle

ROUND_KEYS = {
    "game", "wager", "paytable", "meter", "seats", "community", "dealer", "magic_card", "lucky_seat",
    "positions", "rolls",
}
SEAT_KEYS = {"seat", "wager", "folded", "cards"}
DEALER_KEYS = {"cards", "wagers"}
METER_KEYS = {"amount", "reset"}

PaytableLookup = Callable[[str], Paytable]


def _unknown(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in obj:
        if key not in allowed:
            prefix = f"{where}." if where else ""
            raise InputError(f"{prefix}{key}", f"unknown key; expected one of {', '.join(sorted(allowed))}")


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise InputError(where, f"must be an object, not {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(where, f"must be a list, not {type(value).__name__}")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(where, f"must be a whole number, not {value!r}")
    return value


def settle_json(doc: Any, lookup: PaytableLookup) -> dict[str, Any]:
    """Settle the round described by `doc` (decoded JSON) and return the settlement as JSON."""
    doc = _object(doc, "round")
    _unknown(doc, ROUND_KEYS, "")
    for key in ("game", "wager", "paytable"):
        if key not in doc:
            raise InputError(key, "is required")
    g = find_game(doc["game"])
    w = find_wager(g, doc["wager"])
    if not isinstance(doc["paytable"], str):
        raise InputError("paytable", "must be a paytable id or the path of a paytable file")
    pt = lookup(doc["paytable"])
    # The same selection rules as configuration: a paytable the rules forbid settles nothing.
    check_paytable_for(pt, g.id, w.id, linked=False, wager_sizes=())
    if g.dice:
        from controller.dice.settle import settle_dice, to_json

        for key in ("seats", "community", "dealer", "magic_card", "lucky_seat", "meter"):
            if key in doc:
                raise InputError(key, f"is not used by {g.title}; give positions and rolls")
        positions = _list(doc.get("positions", []), "positions")
        rolls = _list(doc.get("rolls", []), "rolls")
        return to_json(settle_dice(g.id, pt, positions, rolls))
    for key in ("positions", "rolls"):
        if key in doc:
            raise InputError(key, f"is for dice games; {g.title} is settled from seats and cards")
    rnd = round_from_json(doc, g, w, pt)
    return settlement_to_json(rnd, settle(rnd))


def round_from_json(doc: Mapping[str, Any], g: Game, w: Wager, pt: Paytable) -> Round:
    meter_doc = _object(doc.get("meter", {}), "meter")
    _unknown(meter_doc, METER_KEYS, "meter")
    if pt.pays_percent_of_meter and "amount" not in meter_doc:
        raise InputError("meter.amount", f"is required: {pt.id} pays a percentage of the meter")
    amount = parse_units(meter_doc["amount"], "meter.amount") if "amount" in meter_doc else 0
    reset = parse_units(meter_doc["reset"], "meter.reset") if "reset" in meter_doc else amount
    if "reset" not in meter_doc and pt.pays_percent_of_meter:
        raise InputError("meter.reset", f"is required: {pt.id} pays a percentage of the meter")

    used: dict[int, str] = {}
    seats: list[Seat] = []
    for i, raw in enumerate(_list(doc.get("seats", []), "seats")):
        where = f"seats[{i}]"
        s = _object(raw, where)
        _unknown(s, SEAT_KEYS, where)
        if "seat" not in s:
            raise InputError(f"{where}.seat", "is required")
        folded = s.get("folded", False)
        if not isinstance(folded, bool):
            raise InputError(f"{where}.folded", f"must be true or false, not {folded!r}")
        cards = parse_cards(s.get("cards", []), f"{where}.cards", seen=used)
        wager_cents = parse_cents(s["wager"], f"{where}.wager") if "wager" in s else 0
        seats.append(Seat(_int(s["seat"], f"{where}.seat"), wager_cents, folded, cards))
    community = parse_cards(doc.get("community", []), "community", seen=used)

    dealer_doc = _object(doc.get("dealer", {}), "dealer")
    _unknown(dealer_doc, DEALER_KEYS, "dealer")
    dealer_cards = parse_cards(dealer_doc.get("cards", []), "dealer.cards", seen=used)
    dealer_wagers: dict[int, int] = {}
    for i, raw in enumerate(_list(dealer_doc.get("wagers", []), "dealer.wagers")):
        where = f"dealer.wagers[{i}]"
        d = _object(raw, where)
        _unknown(d, {"seat", "wager"}, where)
        for key in ("seat", "wager"):
            if key not in d:
                raise InputError(f"{where}.{key}", "is required")
        seat_no = _int(d["seat"], f"{where}.seat")
        if seat_no in dealer_wagers:
            raise InputError(f"{where}.seat", f"seat {seat_no} appears twice")
        dealer_wagers[seat_no] = parse_cents(d["wager"], f"{where}.wager")

    magic = doc.get("magic_card")
    magic_card = parse_card(magic, "magic_card") if magic is not None else None
    lucky = doc.get("lucky_seat")
    if lucky is None:
        lucky_seat = None
    elif lucky == DEALER:
        lucky_seat = DEALER_POSITION
    else:
        lucky_seat = _int(lucky, "lucky_seat")
        if lucky_seat == DEALER_POSITION:
            raise InputError("lucky_seat", "write \"dealer\" for the dealer's position; seats are numbered from 1")
    return Round(
        game=g, wager=w, paytable=pt, meter=amount, reset=reset, seats=tuple(seats), community=community,
        dealer=dealer_cards, dealer_wagers=dealer_wagers, magic_card=magic_card, lucky_seat=lucky_seat,
    )


def settlement_to_json(rnd: Round, st: Settlement) -> dict[str, Any]:
    awards = []
    for p in st.payouts:
        item: dict[str, Any] = {
            "seat": p.seat,
            "wager": format_cents(p.wager),
            "kind": p.kind,
            "hand_of": p.hand_of,
            "hand": p.hand,
            "cards": [card_str(c) for c in p.cards],
            "award": p.award,
            "amount": format_cents(p.amount),
            "paid_by": p.paid_by,
            "requires_validation": p.requires_validation,
        }
        if p.meter_before is not None:
            item["meter_before"] = format_units(p.meter_before)
            item["meter_after"] = format_units(p.meter_after or 0)
        if p.shared_by > 1:
            item["shared_by"] = p.shared_by
        awards.append(item)
    return {
        "game": rnd.game.id,
        "wager": rnd.wager.id,
        "paytable": rnd.paytable.id,
        "awards": awards,
        "forfeited": list(st.forfeited),
        "meter": {
            "before": format_units(st.meter_before),
            "after": format_units(st.meter_after),
            "seeded": format_units(st.seeded),
        },
        "totals": {
            "paid_from_meter": format_cents(st.meter_paid_cents),
            "paid_by_table": format_cents(st.table_paid_cents),
        },
    }


__all__ = ["DEALER_KEYS", "METER_KEYS", "ROUND_KEYS", "SEAT_KEYS", "PaytableLookup", "round_from_json", "settle_json",
           "settlement_to_json"]
