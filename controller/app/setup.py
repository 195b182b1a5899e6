"""From a validated configuration to the round machine's rules (where the table resumes: controller.round.resume)."""

from __future__ import annotations

from controller.config.model import StandaloneMeter, TableConfig
from controller.paytables.model import Paytable
from controller.positions import DEALER
from controller.round.model import SpotRule, TableRules


def award_spots(cfg: TableConfig, rules: TableRules) -> dict[str, tuple[str, str, Paytable]]:
    """Each spot's game, wager and paytable: what its chance of a percentage-of-meter award is counted from."""
    return {s: (cfg.game.id, cfg.wagers[r.wager].wager.id, cfg.wagers[r.wager].paytable) for s, r in rules.spots.items()}


def table_rules(cfg: TableConfig) -> TableRules:
    """One spot per progressive wager (named after the wager, as the register maps name their spots), and
    one more for a wager that may be placed on the dealer's hand (§ 639a.7(d)(4))."""
    spots: dict[str, SpotRule] = {}
    for w in cfg.wagers.values():
        if w.meter is None:
            continue
        sizes = cfg.meters[w.meter].wager_sizes
        spots[w.id] = SpotRule(w.id, w.id, w.meter, sizes)
        if w.wager.dealer_bets:
            spot = f"{w.id}-{DEALER}"  # the spot of a wager on the dealer's hand
            spots[spot] = SpotRule(spot, w.id, w.meter, sizes, on_dealer=True)
    cards = cfg.cards
    counting = cards is None or cards.shuffler == "counting"
    return TableRules(
        table=cfg.table,
        seats=cfg.seats,
        spots=spots,
        counting_shuffler=counting,
        two_decks=bool(cards and cards.two_decks),
        stub_count_every=(cards.stub_count_every or 5) if cards is not None and not counting else 5,
    )


def standalone_meters(cfg: TableConfig) -> list[StandaloneMeter]:
    return [m for m in cfg.meters.values() if isinstance(m, StandaloneMeter)]


__all__ = ["award_spots", "standalone_meters", "table_rules"]
