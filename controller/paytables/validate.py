"""May this paytable be used for this wager at this table? The rules of selection, as data.

`check_paytable_for` raises RulesError naming the rule broken. The minimum paying hands and the
Envy Bonus Qualifying Hands below are the regulations' definitions, each with its section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from controller.errors import InputError, RulesError
from controller.games import GAMES, HandKind, game, wager
from controller.money import format_dollars_human
from controller.paytables.load import builtin_paytables
from controller.paytables.model import ANY_WAGER, Paytable, hand_type


@dataclass(frozen=True)
class Minimum:
    """The lowest hand a paytable for a wager may pay: the wager's definition of a winning hand."""

    hand: str
    source: str
    min_rank: int | None = None  # a pair of this rank or better


@dataclass(frozen=True)
class EnvyRule:
    """The lowest Envy Bonus Qualifying Hand(s) a definition allows."""

    allowed: tuple[str, ...]
    source: str


_FIVE_CARD_HAND_BONUS = "five-card-hand-bonus"

MINIMUM_PAYING: Mapping[tuple[str, str], Minimum] = MappingProxyType(
    {
        # "three-of-a-kind or better" or, "if included in the paytable selected", two pair.
        ("caribbean-stud", "progressive"): Minimum("two-pair", "§ 639a.1 \"Progressive Payout Hand\""),
        ("caribbean-stud", "caribbean-stud-bonus"): Minimum("pair", "§ 639a.7(d)(3)", min_rank=10),
        ("four-card-poker", "four-card-progressive"): Minimum(
            "three-of-a-kind", "§ 641a.1 \"Four-Card Progressive Payout Hand\""
        ),
        ("four-card-poker", "five-card-progressive"): Minimum(
            "three-of-a-kind", "§ 641a.1 \"Five-Card Progressive Payout Hand\""
        ),
        ("four-card-poker", "bad-beat"): Minimum("two-pair", "§ 641a.7(d)(6)"),
        # "three-of-a-kind or better or a straight or better ... depending on the paytable".
        ("let-it-ride", "three-card-progressive"): Minimum(
            "straight", "§ 643a.1 \"Three-Card Progressive Payout Hand\""
        ),
        ("let-it-ride", "five-card-progressive"): Minimum(
            "three-of-a-kind", "§ 643a.1 \"Five-Card Progressive Payout Hand\""
        ),
        ("flop-poker", "progressive-flop"): Minimum("flush", "§ 667a.7(d)(4)"),
        ("flop-poker", "flop"): Minimum("pair", "§ 667a.11(d)(2)", min_rank=11),
        ("flop-poker", "three-card-bonus"): Minimum("pair", "§ 667a.7(d)(3)"),
        # "will contain a flush or better": § 639a.7(d)(4), § 641a.7(d)(7), § 643a.7(i) and the
        # same wager of every other game that offers it.
        **{
            (g.id, _FIVE_CARD_HAND_BONUS): Minimum("flush", g.wagers[_FIVE_CARD_HAND_BONUS].source)
            for g in GAMES.values()
            if _FIVE_CARD_HAND_BONUS in g.wagers
        },
    }
)

ENVY_QUALIFYING: Mapping[tuple[str, str], EnvyRule] = MappingProxyType(
    {
        ("caribbean-stud", "progressive"): EnvyRule(
            ("straight-flush",), "§ 639a.1 \"Envy Bonus Qualifying Hand\""
        ),
        # "four-of-a-kind or better or a straight flush or better ... depending on the paytable".
        ("four-card-poker", "four-card-progressive"): EnvyRule(
            ("four-of-a-kind", "straight-flush"), "§ 641a.1 \"Four-Card Envy Bonus Qualifying Hand\""
        ),
        ("four-card-poker", "five-card-progressive"): EnvyRule(
            ("straight-flush",), "§ 641a.1 \"Five-Card Envy Bonus Qualifying Hand\""
        ),
        ("let-it-ride", "three-card-progressive"): EnvyRule(
            ("mini-royal",), "§ 643a.1 \"Three-Card Envy Bonus Qualifying Hand\""
        ),
        ("let-it-ride", "five-card-progressive"): EnvyRule(
            ("straight-flush",), "§ 643a.1 \"Five-Card Envy Bonus Qualifying Hand\""
        ),
    }
)

# Wagers where every row is a wager of its own (§ 668a.4): a paytable may leave out the wagers
# the operator does not offer, but each row it has must be paid as printed.
_ROWS_ARE_SEPARATE_WAGERS = frozenset({HandKind.PROPS_AND_HOPS})


def covers(paytable: Paytable, game_id: str, wager_id: str) -> bool:
    """Whether `paytable` is written for the wager `wager_id` of the game `game_id`."""
    if game_id not in paytable.games or game_id not in GAMES:
        return False
    w = GAMES[game_id].wagers.get(wager_id)
    if w is None or w.hand is not paytable.kind:
        return False
    return paytable.wager in (wager_id, ANY_WAGER)


def printed_paytables(game_id: str, wager_id: str) -> tuple[Paytable, ...]:
    """The paytables the regulations print for a wager (one of which must be selected), if any."""
    return tuple(p for p in builtin_paytables().values() if covers(p, game_id, wager_id))


def _same_rows(paytable: Paytable, printed: Paytable) -> bool:
    if paytable.kind in _ROWS_ARE_SEPARATE_WAGERS:
        # Rows the regulations print no odds for (§ 585.2(f)(2)-(4)) are the operator's own.
        want = {p.hand: p for p in printed.pays}
        return all(want.get(p.hand, p) == p for p in paytable.pays)
    if paytable.pays != printed.pays:
        return False
    envy_ok = (paytable.envy is None and printed.envy is None) or (
        paytable.envy is not None
        and printed.envy is not None
        and paytable.envy.qualifying == printed.envy.qualifying
        and paytable.envy.by_wager == printed.envy.by_wager
    )
    # Magic Card and Lucky Bonus are optional ("may pay", § 639a.12(e)(3)) but paid as printed.
    bonus_ok = all(
        mine is None or mine == theirs
        for mine, theirs in ((paytable.magic_card, printed.magic_card), (paytable.lucky_bonus, printed.lucky_bonus))
    )
    return envy_ok and bonus_ok


def _fail(problem: str) -> RulesError:
    return RulesError("paytable", problem)


def _check_lowest_paying(paytable: Paytable, game_id: str, wager_id: str, title: str) -> None:
    """No row pays a hand below the lowest winning hand the regulations give the wager."""
    minimum = MINIMUM_PAYING.get((game_id, wager_id))
    enum = hand_type(paytable.kind)
    if minimum is not None and enum is not None:
        lowest = paytable.lowest_paying()
        floor = (enum.from_label(minimum.hand), minimum.min_rank or 0)
        if (paytable.category(lowest), lowest.min_rank or 0) < floor:
            shown = lowest.hand if lowest.min_rank is None else f"{lowest.hand} (rank {lowest.min_rank}+)"
            want = minimum.hand if minimum.min_rank is None else f"{minimum.hand} of rank {minimum.min_rank}+"
            raise _fail(
                f"{paytable.id} pays {shown}, below {want}, the lowest winning hand of the {title} "
                f"({minimum.source})"
            )


def _check_envy(paytable: Paytable, game_id: str, wager_id: str, wager_of_game: str) -> None:
    """An envy table only where the regulations define an Envy Bonus, qualifying as they say."""
    envy = paytable.envy
    if envy is not None:
        rule = ENVY_QUALIFYING.get((game_id, wager_id))
        if rule is None:
            raise _fail(f"the regulations define no Envy Bonus for the {wager_of_game}")
        if envy.qualifying not in rule.allowed:
            raise _fail(
                f"the envy table of {paytable.id} qualifies {envy.qualifying} or better; {rule.source} says "
                + " or ".join(f"{h} or better" for h in rule.allowed)
            )


def check_paytable_for(
    paytable: Paytable,
    game_id: str,
    wager_id: str,
    *,
    linked: bool,
    wager_sizes: Sequence[int],
    allow_examples: bool = True,
) -> None:
    """Raise RulesError unless `paytable` may be selected for `wager_id` of `game_id`.

    `linked`: the wager shares a meter with other tables (§ 605a.8). `wager_sizes`: every size of
    the wager offered, in cents (each must have an Envy Bonus row when the paytable has one).
    """
    g = game(game_id)
    w = wager(g, wager_id)
    for i, size in enumerate(wager_sizes):
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise InputError(f"wager_sizes[{i}]", f"a wager size is a positive number of cents, not {size!r}")
    pid = paytable.id

    if not covers(paytable, game_id, wager_id):
        where = ", ".join(paytable.games)
        raise _fail(
            f"{pid} is a paytable for the {paytable.wager} wager of {where} ({paytable.kind.value} hands), "
            f"not for the {w.title} of {g.title}"
        )
    if paytable.example and not allow_examples:
        raise _fail(
            f"{pid} is an example; use the paytable of the certificate holder's Rules Submission (§ 601a.2)"
        )

    if linked and not w.progressive:
        raise _fail(f"only a progressive wager can be linked (§ 605a.8); the {w.title} is not progressive")

    _check_lowest_paying(paytable, game_id, wager_id, w.title)
    _check_envy(paytable, game_id, wager_id, f"{w.title} of {g.title}")

    printed = printed_paytables(game_id, wager_id)
    match = next((p for p in printed if _same_rows(paytable, p)), None)
    if printed and match is None:
        names = ", ".join(p.id for p in printed)
        sources = "; ".join(sorted({p.source for p in printed}))
        raise _fail(
            f"{pid} differs from the paytables the regulations print for the {w.title} of {g.title} "
            f"({sources}): use one of {names}"
        )

    if linked:
        barred = match if match is not None and not match.linked_allowed else None
        if barred is not None or not paytable.linked_allowed:
            why = (
                f"its rows are those of {barred.id}" if barred is not None and barred.id != pid
                else "it is marked linked_allowed = false"
            )
            cite = ""
            if game_id == "caribbean-stud":
                cite = " (§ 639a.12(d)(3): Paytables A, B, C and E may not be linked)"
            raise _fail(f"{pid} may not be selected for linked games: {why}{cite}")

    envy = paytable.envy
    if envy is not None:
        have = envy.wager_sizes
        for size in wager_sizes:
            if size not in envy.by_wager:
                raise _fail(
                    f"envy table of {pid} has no row for a {format_dollars_human(size)} wager; "
                    f"it has {', '.join(format_dollars_human(c) for c in have)}"
                )


__all__ = ["ENVY_QUALIFYING", "MINIMUM_PAYING", "EnvyRule", "Minimum", "check_paytable_for", "covers",
           "printed_paytables"]
