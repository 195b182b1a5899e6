"""The games and their wagers, as plain data.

Each wager says which cards form its hand (the game's card rule), what kind of hand is ranked,
and what a fold does to it. Adding a Five Card Hand Bonus game is a few lines here.

Seat numbering (design conventions): seats 1..N clockwise from the dealer's far left, so
settlement "beginning with the player farthest to the dealer's right and continuing
counterclockwise" (639a.11(c), 641a.11(c), 667a.11(d)) is N, N-1, ..., 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from controller.errors import InputError


class HandKind(StrEnum):
    POKER5 = "poker5"  # five-card Poker hands, 639a.6(b), 667a.6(b)
    THREE = "three"  # three-card hands, 667a.6(d), 643a.6(d)
    FOUR = "four"  # Four Card Poker hands, 641a.6(b)
    HOT_ROLLER = "hot-roller"  # completed numbers, 623c.1
    PROPS_AND_HOPS = "props-and-hops"  # single-roll wagers and Six Eight Shake, 668a


class CardRule(StrEnum):
    """Which cards form the hand of a wager."""

    PLAYER = "player"  # all of the player's cards (five)
    PLAYER_FIRST_THREE = "player-first-three"  # the three cards dealt to the player
    PLAYER_AND_COMMUNITY = "player+community"  # player's cards and every community card (five in all)
    PLAYER_AND_FLOP = "player+flop"  # player's two and the first three community cards (647a.11, 653a.11)
    PLAYER_AND_TWO_OF_COMMUNITY = "player+two-of-community"  # player's three + exactly two of three, 667a.11(d)(2)
    PLAYER_BEST_FOUR = "player-best-four"  # best four of the player's five, 641a.11(c)(2)
    DEALER_FIRST_FIVE = "dealer-first-five"  # the dealer's first five cards, 641a.11(c)(7)
    DEALER_AND_FLOP = "dealer+flop"  # dealer's two and the first three community cards
    DEALER_AND_COMMUNITY = "dealer+community"  # dealer's three and the two extra community cards
    DEALER_BEST_FOUR = "dealer-best-four"  # best four of all the dealer's cards, 641a.11(c)


class FoldEffect(StrEnum):
    """What a fold does to a side wager."""

    FORFEIT_KEEP_ENVY = "forfeit-keep-envy"  # 639a.11(b), 641a.11(b)(2): wager lost, Envy Bonus still due
    KEEP = "keep"  # 639a.11(b) Five Card Hand Bonus; 667a.11(b): still eligible
    FORFEIT = "forfeit"  # the wager goes with the hand (Flop Wager is the fold itself)
    NO_FOLD = "no-fold"  # the game has no fold that touches side wagers (643a.7(j))
    IS_THE_FOLD = "is-the-fold"  # § 667a.1 "Fold": not making a Flop Wager; a folded seat has none
    NOT_IN_OUR_COPY = "not-in-our-copy"  # the game's fold rule is not in the regulations we hold


@dataclass(frozen=True)
class Wager:
    id: str
    title: str
    source: str  # section of the regulations that authorizes it
    hand: HandKind
    rule: CardRule
    fold: FoldEffect
    progressive: bool = False  # paid partly from a meter (needs a progressive table game system)
    dealer_rule: CardRule | None = None  # a wager on the dealer's hand is allowed (Five Card Hand Bonus)
    magic_and_lucky: bool = False  # Magic Card and Lucky Bonus payouts, 639a.12(e)(3)
    envy_rule: CardRule | None = None  # the hand other players hold for an Envy Bonus (default: `rule`)
    dealer_bets: bool = False  # players may wager on the dealer's hand (Five Card Hand Bonus only)
    three_card_ace_low: bool = False  # A-2-3 is a three-card straight (see controller/hands/three.py)

    @property
    def lucky_dealer_position(self) -> bool:
        """The Lucky Bonus position may be the dealer's: only where the wager may be placed on the dealer's hand,
        the wagers that position pays (§ 639a.1, § 641a.1 "Lucky Bonus" (ii)). Where it may not (Let It Ride has
        no dealer's hand), the Lucky Bonus is paid to the player "seated in the position that is randomly
        selected" (§ 643a.1 "Lucky Bonus"): the position is drawn among the seats only."""
        return self.magic_and_lucky and self.dealer_bets


@dataclass(frozen=True)
class Game:
    id: str
    title: str
    chapter: str
    max_seats: int
    player_cards: int
    community_cards: tuple[int, ...] = (0,)  # allowed counts
    dealer_cards: tuple[int, ...] = (0,)  # allowed counts
    wagers: dict[str, Wager] = field(default_factory=dict)
    dice: bool = False


def _fchb(rule: CardRule, dealer: CardRule | None, source: str, fold: FoldEffect) -> Wager:
    return Wager(
        id="five-card-hand-bonus",
        title="Five Card Hand Bonus Wager",
        source=source,
        hand=HandKind.POKER5,
        rule=rule,
        fold=fold,
        progressive=True,
        dealer_rule=dealer,
        dealer_bets=dealer is not None,
        magic_and_lucky=True,
    )


def _index(*wagers: Wager) -> dict[str, Wager]:
    return {w.id: w for w in wagers}


GAMES: dict[str, Game] = {
    g.id: g
    for g in (
        Game(
            id="caribbean-stud",
            title="Caribbean Stud Poker",
            chapter="639a",
            max_seats=7,  # 639a.2(a)
            player_cards=5,
            dealer_cards=(5,),
            wagers=_index(
                Wager(
                    "progressive", "Progressive Payout Wager", "§ 639a.7(d)(2)",
                    HandKind.POKER5, CardRule.PLAYER, FoldEffect.FORFEIT_KEEP_ENVY, progressive=True,
                ),
                Wager(
                    "caribbean-stud-bonus", "Caribbean Stud Bonus Wager", "§ 639a.7(d)(3)",
                    HandKind.POKER5, CardRule.PLAYER, FoldEffect.FORFEIT,
                ),
                _fchb(CardRule.PLAYER, CardRule.DEALER_FIRST_FIVE, "§ 639a.7(d)(4)", FoldEffect.KEEP),  # 639a.11(b)
            ),
        ),
        Game(
            id="four-card-poker",
            title="Four Card Poker",
            chapter="641a",
            max_seats=7,  # 641a.2(a)
            player_cards=5,
            dealer_cards=(6,),
            wagers=_index(
                Wager(
                    "aces-up", "Aces Up Wager", "§ 641a.7(d)(2)",
                    HandKind.FOUR, CardRule.PLAYER_BEST_FOUR, FoldEffect.KEEP,  # 641a.11(b)(1)
                ),
                Wager(
                    "four-card-progressive", "Four-Card Progressive Payout Wager", "§ 641a.7(d)(4)",
                    HandKind.FOUR, CardRule.PLAYER_BEST_FOUR, FoldEffect.FORFEIT_KEEP_ENVY, progressive=True,
                ),
                Wager(
                    "five-card-progressive", "Five-Card Progressive Payout Wager", "§ 641a.7(d)(5)",
                    HandKind.POKER5, CardRule.PLAYER, FoldEffect.FORFEIT_KEEP_ENVY, progressive=True,
                ),
                Wager(
                    "bad-beat", "Bad Beat Bonus Wager", "§ 641a.7(d)(6)",
                    HandKind.FOUR, CardRule.PLAYER_BEST_FOUR, FoldEffect.FORFEIT,
                    dealer_rule=CardRule.DEALER_BEST_FOUR,
                ),
                # § 641a.11(b): a fold forfeits the Ante and "end[s] his participation in the round of
                # play"; only the Aces Up Wager is kept ((b)(1)), so the Five Card Hand Bonus goes too.
                _fchb(CardRule.PLAYER, CardRule.DEALER_FIRST_FIVE, "§ 641a.7(d)(7)", FoldEffect.FORFEIT),
            ),
        ),
        Game(
            id="let-it-ride",
            title="Let It Ride Poker",
            chapter="643a",
            max_seats=7,  # 643a.2(a)
            player_cards=3,
            community_cards=(2,),
            wagers=_index(
                Wager(
                    "three-card-progressive", "Three-Card Progressive Wager", "§ 643a.7(g)",
                    HandKind.THREE, CardRule.PLAYER_FIRST_THREE, FoldEffect.NO_FOLD, progressive=True,
                ),
                Wager(
                    "five-card-progressive", "Five-Card Progressive Payout Wager", "§ 643a.7(h)",
                    HandKind.POKER5, CardRule.PLAYER_AND_COMMUNITY, FoldEffect.NO_FOLD, progressive=True,
                ),
                Wager(
                    "five-card-bonus", "Five Card Bonus Wager", "§ 643a.7(e)",
                    HandKind.POKER5, CardRule.PLAYER_AND_COMMUNITY, FoldEffect.NO_FOLD,
                ),
                Wager(
                    "three-card-bonus", "Three Card Bonus Wager", "§ 643a.7(f)",
                    HandKind.THREE, CardRule.PLAYER_FIRST_THREE, FoldEffect.NO_FOLD,
                ),
                _fchb(CardRule.PLAYER_AND_COMMUNITY, None, "§ 643a.7(i)", FoldEffect.NO_FOLD),
            ),
        ),
        Game(
            id="flop-poker",
            title="Flop Poker",
            chapter="667a",
            max_seats=6,  # 667a.2(a)
            player_cards=3,
            community_cards=(3,),
            wagers=_index(
                Wager(
                    "progressive-flop", "Progressive Flop Wager", "§ 667a.7(d)(4)",
                    HandKind.POKER5, CardRule.PLAYER_AND_TWO_OF_COMMUNITY, FoldEffect.KEEP,  # 667a.11(b)
                    progressive=True,
                ),
                Wager(
                    "flop", "Flop Wager", "§ 667a.7(d)(2)",
                    HandKind.POKER5, CardRule.PLAYER_AND_TWO_OF_COMMUNITY, FoldEffect.IS_THE_FOLD,
                ),
                Wager(
                    "three-card-bonus", "Three Card Bonus Wager", "§ 667a.7(d)(3)",
                    HandKind.THREE, CardRule.PLAYER_FIRST_THREE, FoldEffect.KEEP,  # 667a.11(b)
                ),
            ),
        ),
        # The other Five Card Hand Bonus games of the 2014 rulemaking (44 Pa.B. 7683).
        Game(
            id="three-card-poker", title="Three Card Poker", chapter="649a", max_seats=7,
            player_cards=3, community_cards=(2,), dealer_cards=(3,),
            wagers=_index(_fchb(CardRule.PLAYER_AND_COMMUNITY, CardRule.DEALER_AND_COMMUNITY, "§ 649a.7", FoldEffect.NOT_IN_OUR_COPY)),
        ),
        Game(
            id="ultimate-texas-holdem", title="Ultimate Texas Hold 'Em Poker", chapter="653a", max_seats=6,
            player_cards=2, community_cards=(3, 5), dealer_cards=(2,),
            wagers=_index(_fchb(CardRule.PLAYER_AND_FLOP, CardRule.DEALER_AND_FLOP, "§ 653a.11", FoldEffect.NOT_IN_OUR_COPY)),
        ),
        Game(
            id="texas-holdem-bonus", title="Texas Hold 'Em Bonus Poker", chapter="647a", max_seats=6,
            player_cards=2, community_cards=(3, 5), dealer_cards=(2,),
            wagers=_index(_fchb(CardRule.PLAYER_AND_FLOP, CardRule.DEALER_AND_FLOP, "§ 647a.11", FoldEffect.NOT_IN_OUR_COPY)),
        ),
        Game(
            id="mississippi-stud", title="Mississippi Stud Poker", chapter="655a", max_seats=6,
            player_cards=2, community_cards=(3,),
            wagers=_index(_fchb(CardRule.PLAYER_AND_COMMUNITY, None, "§ 655a.7", FoldEffect.NOT_IN_OUR_COPY)),
        ),
        Game(
            id="crazy-4-poker", title="Crazy 4 Poker", chapter="657a", max_seats=6,
            player_cards=5, dealer_cards=(5,),
            wagers=_index(_fchb(CardRule.PLAYER, CardRule.DEALER_FIRST_FIVE, "§ 657a.7", FoldEffect.NOT_IN_OUR_COPY)),
        ),
        Game(
            id="hot-roller-craps", title="Hot Roller Craps", chapter="623c", max_seats=16,  # 623c.1(a)(2)(i)
            player_cards=0, dice=True,
            wagers=_index(
                Wager("hot-roller", "Hot Roller wager", "§ 623c.1", HandKind.HOT_ROLLER, CardRule.PLAYER,
                      FoldEffect.NO_FOLD),
            ),
        ),
        Game(
            id="props-and-hops", title="Props & Hops", chapter="668a", max_seats=6,  # 668a.1(a)
            player_cards=0, dice=True,
            wagers=_index(
                Wager("props-and-hops", "Props & Hops wagers", "§ 668a.2", HandKind.PROPS_AND_HOPS,
                      CardRule.PLAYER, FoldEffect.NO_FOLD),
            ),
        ),
    )
}


def game(game_id: object, field: str = "game") -> Game:
    if not isinstance(game_id, str) or game_id not in GAMES:
        raise InputError(field, f"unknown game {game_id!r}; known games: {', '.join(GAMES)}")
    return GAMES[game_id]


def wager(g: Game, wager_id: object, field: str = "wager") -> Wager:
    if not isinstance(wager_id, str) or wager_id not in g.wagers:
        raise InputError(field, f"{g.title} has no wager {wager_id!r}; its wagers: {', '.join(g.wagers)}")
    return g.wagers[wager_id]


__all__ = ["GAMES", "CardRule", "FoldEffect", "Game", "HandKind", "Wager", "game", "wager"]
