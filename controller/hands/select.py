"""Form the hand a wager is settled on, from the cards on the table and the game's card rule.

`form_hand` checks the cards (ints 0..51, no card twice anywhere on the table, the counts the
rule needs) and returns a `Hand`: its kind, value, category and the cards that make it.

Card counts each rule accepts (cards in the order dealt):

    player                   player 5
    player-first-three       player 3 to 5; the first three
    player+community         player and community 5 in all
    player+flop              player 2, community 3 to 5; the first three community cards
    player+two-of-community  player 3, community 3; the best of the three ways to take two
    player-best-four         player 5; the best four
    dealer-first-five        dealer 5 or 6; the first five
    dealer+flop              dealer 2, community 3 to 5; the first three community cards
    dealer+community         dealer and community 5 in all
    dealer-best-four         dealer 4 to 7; the best four

Choices that tie have the same value, so which one is the hand matters only for the cards shown:
player+two-of-community keeps the first of the community pairs (1st, 2nd), (1st, 3rd), (2nd, 3rd).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from itertools import combinations
from typing import TypeVar

from controller.cards import card_str, cards_str
from controller.errors import CardError, RulesError
from controller.games import CardRule, HandKind
from controller.hands import four, poker5, three


@dataclass(frozen=True)
class Hand:
    """A ranked hand. Hands of one kind are ordered by value; equal values tie (§ 667a.6(c)),
    even when the cards differ (then the hands compare neither < nor > but are not ==)."""

    kind: HandKind
    value: int
    category: IntEnum
    cards: tuple[int, ...]

    @property
    def label(self) -> str:
        """The category as the regulations name it: ``full-house``, ``mini-royal``."""
        return self.category.label  # type: ignore[attr-defined, no-any-return]

    def __str__(self) -> str:
        return f"{self.label} ({cards_str(self.cards)})"

    def _other_value(self, other: Hand) -> int:
        if other.kind is not self.kind:
            raise TypeError(f"a {self.kind.value} hand does not compare with a {other.kind.value} hand")
        return other.value

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Hand):
            return NotImplemented
        return self.value < self._other_value(other)

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Hand):
            return NotImplemented
        return self.value <= self._other_value(other)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Hand):
            return NotImplemented
        return self.value > self._other_value(other)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Hand):
            return NotImplemented
        return self.value >= self._other_value(other)


Cards = tuple[int, ...]
_EVALUATE: dict[HandKind, Callable[[Sequence[int]], int]] = {
    HandKind.POKER5: poker5.evaluate,
    HandKind.THREE: three.evaluate,
    HandKind.FOUR: four.evaluate,
}
_CATEGORY: dict[HandKind, Callable[[int], IntEnum]] = {
    HandKind.POKER5: poker5.category,
    HandKind.THREE: three.category,
    HandKind.FOUR: four.category,
}


def _hand(kind: HandKind, cards: Cards) -> Hand:
    value = _EVALUATE[kind](cards)
    return Hand(kind, value, _CATEGORY[kind](value), cards)


def _best_hand(kind: HandKind, choices: list[Cards]) -> Hand:
    """The best of several ways to form the hand; of equal ones, the first."""
    top = _hand(kind, choices[0])
    for cards in choices[1:]:
        h = _hand(kind, cards)
        if h.value > top.value:
            top = h
    return top


# The kind of hand each card rule forms.
FORMS: dict[CardRule, HandKind] = {
    CardRule.PLAYER: HandKind.POKER5,
    CardRule.PLAYER_FIRST_THREE: HandKind.THREE,
    CardRule.PLAYER_AND_COMMUNITY: HandKind.POKER5,
    CardRule.PLAYER_AND_FLOP: HandKind.POKER5,
    CardRule.PLAYER_AND_TWO_OF_COMMUNITY: HandKind.POKER5,
    CardRule.PLAYER_BEST_FOUR: HandKind.FOUR,
    CardRule.DEALER_FIRST_FIVE: HandKind.POKER5,
    CardRule.DEALER_AND_FLOP: HandKind.POKER5,
    CardRule.DEALER_AND_COMMUNITY: HandKind.POKER5,
    CardRule.DEALER_BEST_FOUR: HandKind.FOUR,
}


def form_hand(
    rule: CardRule,
    kind: HandKind,
    player: Sequence[int],
    community: Sequence[int] = (),
    dealer: Sequence[int] = (),
    *,
    three_card_ace_low: bool = False,
) -> Hand:
    """The hand of `kind` that `rule` forms from the player's, the community and the dealer's cards.

    `three_card_ace_low`: whether A-2-3 is a straight in a three-card hand (the game's rule; see
    controller/hands/three.py).

    Cards are ints 0..51 in the order dealt. Every card given is checked, whether the rule uses
    it or not: a card that is not a card, or one seen twice, is a CardError naming its place
    (``community[1]``); so is a count of cards the rule cannot use. A rule that forms another
    kind of hand than `kind` is a RulesError.
    """
    rule = _member(CardRule, rule, "rule")
    kind = _member(HandKind, kind, "kind")
    formed = FORMS.get(rule)
    if formed is not kind:
        what = f"a {formed.value} hand" if formed else "no hand"
        raise RulesError("kind", f"the {rule.value} rule forms {what}, not a {kind.value} hand")
    seen: dict[int, str] = {}
    p = _cards("player", player, seen)
    c = _cards("community", community, seen)
    d = _cards("dealer", dealer, seen)
    return _form(rule, p, c, d, three_card_ace_low)


def _form(rule: CardRule, p: Cards, c: Cards, d: Cards, ace_low: bool = False) -> Hand:
    R = CardRule
    if rule is R.PLAYER:
        _count("player", p, rule, 5)
        return _hand(HandKind.POKER5, p)
    if rule is R.PLAYER_FIRST_THREE:
        _count("player", p, rule, 3, 5)
        value = three.evaluate(p[:3], ace_low)
        return Hand(HandKind.THREE, value, three.category(value), p[:3])
    if rule is R.PLAYER_AND_COMMUNITY:
        _five_in_all("player", p, c, rule)
        return _hand(HandKind.POKER5, p + c)
    if rule is R.PLAYER_AND_FLOP:  # 647a.11, 653a.11 as amended in 2014: never the turn or river
        _count("player", p, rule, 2)
        _count("community", c, rule, 3, 5)
        return _hand(HandKind.POKER5, p + c[:3])
    if rule is R.PLAYER_AND_TWO_OF_COMMUNITY:  # § 667a.11(d)(2): all three own cards, exactly two
        _count("player", p, rule, 3)
        _count("community", c, rule, 3)
        return _best_hand(HandKind.POKER5, [p + two for two in combinations(c, 2)])
    if rule is R.PLAYER_BEST_FOUR:  # § 641a.11(c)(2)
        _count("player", p, rule, 5)
        return _best_four(p)
    if rule is R.DEALER_FIRST_FIVE:  # § 641a.11(c)(7)
        _count("dealer", d, rule, 5, 6)
        return _hand(HandKind.POKER5, d[:5])
    if rule is R.DEALER_AND_FLOP:
        _count("dealer", d, rule, 2)
        _count("community", c, rule, 3, 5)
        return _hand(HandKind.POKER5, d + c[:3])
    if rule is R.DEALER_AND_COMMUNITY:  # Three Card Poker: the dealer's three and the two extra cards
        _five_in_all("dealer", d, c, rule)
        return _hand(HandKind.POKER5, d + c)
    if rule is R.DEALER_BEST_FOUR:  # § 641a.11(c): the best four of the dealer's six
        _count("dealer", d, rule, 4, 7)
        return _best_four(d)
    raise AssertionError(rule)  # FORMS has every rule


def _best_four(cards: Cards) -> Hand:
    value, chosen = four.best(cards)
    return Hand(HandKind.FOUR, value, four.category(value), chosen)


def _count(field: str, cards: Cards, rule: CardRule, low: int, high: int | None = None) -> None:
    """`cards` must number `low` (to `high`) for `rule`."""
    top = low if high is None else high
    if not low <= len(cards) <= top:
        want = str(low) if top == low else f"{low} to {top}"
        raise CardError(field, f"has {len(cards)} cards; the {rule.value} rule needs {want}")


def _five_in_all(field: str, own: Cards, community: Cards, rule: CardRule) -> None:
    if len(own) + len(community) != 5:
        raise CardError(
            "community",
            f"{field} holds {len(own)} cards and community {len(community)}; "
            f"the {rule.value} rule needs five in all",
        )


E = TypeVar("E", CardRule, HandKind)


def _member(enum: type[E], value: object, field: str) -> E:
    if isinstance(value, str):  # a value of another type is none of the members'
        with contextlib.suppress(ValueError):
            return enum(value)
    known = ", ".join(m.value for m in enum)
    raise RulesError(field, f"unknown {field} {value!r}; known: {known}")


def _cards(field: str, cards: object, seen: dict[int, str]) -> Cards:
    if not isinstance(cards, (list, tuple)):
        raise CardError(field, f"must be a list of cards (ints 0..51), not {cards!r}")
    for i, card in enumerate(cards):
        where = f"{field}[{i}]"
        if type(card) is not int or not 0 <= card < 52:
            raise CardError(where, f"is not a card (an int 0..51): {card!r}")
        if card in seen:
            raise CardError(where, f"duplicate card {card_str(card)} (already at {seen[card]})")
        seen[card] = where
    return tuple(cards)


__all__ = ["FORMS", "Cards", "Hand", "form_hand"]
