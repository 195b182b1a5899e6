"""[cards]: where the cards are read from, the shuffler, the counts of the stub."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.config import schema
from controller.config.check import Checker
from controller.config.model import MAX_STUB_COUNT_EVERY, CardsConfig

STUB_SOURCE = {"flop-poker": "§ 667a.8(f)", "let-it-ride": "§ 643a.8(f)"}


class CardChecks(Checker):
    """[cards], after the game: `cards` (and `cards_ok`, false once a problem is found)."""

    def _cards(self, doc: Mapping[str, Any]) -> None:
        g = self.game
        raw = doc.get("cards")
        if g is not None and g.dice:
            if raw is not None:
                self.cards_ok = False
                self.add("cards", f"{g.title} is a dice game: it has no cards", "remove the [cards] section")
            return
        if raw is None:
            self.cards_ok = False
            if g is not None:
                self.add("cards", "is required at a card table",
                         '[cards] with source = "shoe" or "dealer" and shuffler = "counting", "non-counting" or "none"')
            return
        m = self.section(raw, "cards", "[cards]", schema.CardsModel, hints={
            "source": 'source = "shoe" (a card-reading shoe reports each card) or "dealer" (entered by the dealer)',
            "shuffler": 'shuffler = "counting" (an automated shuffler counts the deck after each shuffle), '
                        '"non-counting" or "none"',
        })
        if m is None:
            self.cards_ok = False
            return
        src = STUB_SOURCE.get(g.id, "§ 667a.8(f), § 643a.8(f)") if g is not None else "§ 667a.8(f)"
        every = m.stub_count_every
        if m.shuffler != "counting":
            if every is None:
                every = MAX_STUB_COUNT_EVERY
            elif every > MAX_STUB_COUNT_EVERY:
                self.cards_ok = False
                self.add("cards.stub_count_every",
                         f"{every} rounds: without a shuffler that counts the cards, the stub is counted at least "
                         f"once every {MAX_STUB_COUNT_EVERY} rounds of play ({src})",
                         f"stub_count_every = {MAX_STUB_COUNT_EVERY} or fewer")
        if m.two_decks and m.shuffler == "none":
            self.cards_ok = False
            self.add("cards.two_decks", "two decks are played only with an automated card shuffling device "
                     "that holds one deck while the other is in play (§ 667a.3(b))",
                     'set shuffler = "counting" or "non-counting", or two_decks = false')
        if self.cards_ok:
            self.cards = CardsConfig(m.source, m.shuffler, every, m.two_decks)


__all__ = ["STUB_SOURCE", "CardChecks"]
