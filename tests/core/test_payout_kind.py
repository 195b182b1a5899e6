"""What a payout is, decided once (controller/round/payout_kind.py): read from a claim's payout and read back from
the meter's hit history, the same answer, for the report, the daemon's views and the console alike."""

from __future__ import annotations

from pathlib import Path

from controller.cards import parse_card
from controller.config import load_config
from controller.money import UNITS_PER_CENT
from controller.round.claims import Draws, RoundClaims, hit_hand, verify
from controller.round.payout_kind import (
    ENVY,
    FIXED,
    JACKPOT,
    KINDS,
    LUCKY_BONUS,
    MAGIC_CARD,
    TITLES,
    is_envy,
    is_percent,
    payout_kind,
)

ROOT = Path(__file__).resolve().parents[2]
CARIBBEAN = load_config(ROOT / "config" / "tables" / "caribbean-stud.toml")


def claim(spot: str, cards: str, *, others: dict[int, int] | None = None, draws: Draws | None = None):
    w = CARIBBEAN.wagers[spot]
    return verify(RoundClaims("CS-07-r1"), seat=6, spot=spot, wager_cents=100, cards=cards, draws=draws or Draws(),
                  others=others, game=CARIBBEAN.game, wager=w.wager, paytable=w.paytable,
                  meter_units=1_000_060 * UNITS_PER_CENT, reset_units=1_000_000 * UNITS_PER_CENT, meter=w.meter)


def test_a_claim_s_payouts_and_their_hits_in_the_history_are_the_same_kinds():
    royal = claim("progressive", "AS KS QS JS TS", others={2: 100, 7: 500})
    bonus = claim("five-card-hand-bonus", "AS KS QS JS TS", draws=Draws(parse_card("AS"), 6))
    flush = claim("five-card-hand-bonus", "2H 5H 9H JH KH")
    payouts = [*royal.payouts, *bonus.payouts, *flush.payouts]
    kinds = [payout_kind(p.award, p.kind) for p in payouts]
    assert kinds == [JACKPOT, ENVY, ENVY, JACKPOT, MAGIC_CARD, LUCKY_BONUS, FIXED]
    # the history keeps the hand and the award only: the Envy Bonus is known by the wager's paytable
    paytables = {p: CARIBBEAN.wagers[c.spot].paytable for c in (royal, bonus, flush) for p in c.payouts}
    from_hits = [payout_kind(p.award, "envy" if is_envy(paytables[p], hit_hand(p), p.award) else None, hit_hand(p))
                 for p in payouts]
    assert from_hits == kinds
    assert [TITLES[k] for k in kinds[2:]] == ["Envy Bonus", "Jackpot", "Magic Card", "Lucky Bonus", "Fixed award"]
    assert set(TITLES) == set(KINDS)


def test_an_award_that_is_no_award_is_a_fixed_one_never_a_jackpot():
    assert is_percent("100% of meter") and is_percent("10%") and not is_percent("500 for 1")
    assert [payout_kind(a) for a in (None, "", "150% of meter", "lots", 7)] == [FIXED] * 5
    assert payout_kind("100% of meter", kind="paytable", hand="magic card 7H") == JACKPOT
    assert payout_kind("20 for 1", kind="no such kind", hand="lucky bonus (dealer's position)") == LUCKY_BONUS
