"""Read paytables from TOML files (one paytable per file) and find them by id.

Every error is an InputError whose field names the file and the TOML path at fault, e.g.
``fourcard.toml: pays[3].award: unknown award 'x' ...``. The file format is in docs/paytables.md.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from decimal import Decimal
from functools import cache
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

from controller.awards import Award, Fixed, ForOne, PercentOfMeter, ToOne, parse_award
from controller.cards import RANKS
from controller.errors import InputError
from controller.games import GAMES, HandKind
from controller.hands.categories import category_from_label
from controller.money import format_dollars_human, parse_cents
from controller.paytables.model import ANY_WAGER, DICE_KEYS, EnvyTable, Pay, Paytable, hand_keys, hand_type
from controller.tomlfile.files import FileRefused, probe, read_file, show_path
from controller.tomlfile.toml import TomlError, parse_toml

_TOP_KEYS = (
    "id", "title", "source", "games", "wager", "kind", "linked_allowed", "example", "notes",
    "pays", "envy", "bonus",
)
_PAY_KEYS = ("hand", "award", "min_rank")
_ENVY_KEYS = ("qualifying", "source", "by_wager")
_BONUS_KEYS = ("magic-card", "lucky-bonus")
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
# The largest awards a paytable may pay (the regulations' tables pay at most 25,000 for 1 and $5,000 fixed)
# and the largest wager (also a meter's, controller.config.schema): beyond them a value is a typo.
MAX_ODDS = 1_000_000
MAX_FIXED_AWARD_CENTS = 1_000_000_00
MAX_WAGER_CENTS = 10_000_00  # $10,000.00


class _File:
    """Field paths and typed reads for one file; every error names `name` and the path."""

    def __init__(self, name: str) -> None:
        self.name = name

    def error(self, path: str, problem: str) -> InputError:
        return InputError(f"{self.name}: {path}" if path else self.name, problem)

    def table(self, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(path, f"must be a table, not {_show(value)}")
        return value

    def only_keys(self, table: Mapping[str, object], allowed: Iterable[str], path: str) -> None:
        known = tuple(allowed)
        for key in table:
            if key not in known:
                raise self.error(_join(path, key), f"unknown key; allowed here: {', '.join(known)}")

    def text(self, table: Mapping[str, object], key: str, path: str, *, default: str | None = None) -> str:
        where = _join(path, key)
        if key not in table:
            if default is None:
                raise self.error(where, "is required")
            return default
        value = table[key]
        if not isinstance(value, str):
            raise self.error(where, f"must be a string, not {_show(value)}")
        if default is None and not value.strip():
            raise self.error(where, "must not be empty")
        return value

    def flag(self, table: Mapping[str, object], key: str, path: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.error(_join(path, key), f"must be true or false, not {_show(value)}")
        return value

    def array(self, table: Mapping[str, object], key: str, path: str) -> list[Any]:
        where = _join(path, key)
        if key not in table:
            raise self.error(where, "is required")
        value = table[key]
        if not isinstance(value, list):
            raise self.error(where, f"must be an array, not {_show(value)}")
        if not value:
            raise self.error(where, "must not be empty")
        return value

    def award(self, value: object, path: str) -> Award:
        award = parse_award(value, f"{self.name}: {path}")
        if isinstance(award, (ForOne, ToOne)) and award.multiple > MAX_ODDS:
            raise self.error(path, f"{value!r}: odds above {MAX_ODDS:,} for 1, the most a paytable may pay")
        if isinstance(award, Fixed) and award.cents > MAX_FIXED_AWARD_CENTS:
            raise self.error(path, f"{value!r}: more than {format_dollars_human(MAX_FIXED_AWARD_CENTS)}, the most a "
                             "fixed award may be")
        return award


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(value: object) -> str:
    kinds = {bool: "a boolean", int: "an integer", Decimal: "a decimal number", list: "an array",
             dict: "a table", str: "a string"}
    return kinds.get(type(value), f"a {type(value).__name__}") + f" ({_short(value)})"


def _short(value: object) -> str:
    s = repr(value)
    return s if len(s) <= 40 else s[:37] + "..."


def load_paytable(path: str | PathLike[str]) -> Paytable:
    """A paytable from a TOML file. Its id must equal the file name without ``.toml``."""

    p = Path(path)
    name = show_path(path)
    try:
        data = read_file(p).data  # a regular file of at most 1 MiB: never /dev/zero, never a FIFO
    except FileRefused as e:
        raise InputError(name, f"cannot read the paytable file: {e.reason}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(name, f"is not UTF-8 text (byte {e.start})") from None
    table = load_paytable_text(text, name)
    if table.id != p.stem:
        raise InputError(
            f"{name}: id", f"{table.id!r} differs from the file name; name the file {table.id}.toml"
        )
    return table


def load_paytable_text(text: str, source_name: str) -> Paytable:
    """A paytable from TOML text; `source_name` names it in error messages."""
    # Imported here, as in load_paytable.

    f = _File(source_name)
    try:
        doc = parse_toml(text)  # Decimal, never a binary float: no float is created even for a stray number
    except TomlError as e:
        if e.problem.path:  # at its line
            raise f.error(e.problem.path, e.problem.message) from None
        # over-long integers, absurd nesting
        raise f.error("", f"malformed TOML: {e.detail}: {_short(str(e.__cause__))}") from None
    return _paytable(f, doc)


def _paytable(f: _File, doc: dict[str, Any]) -> Paytable:
    f.only_keys(doc, _TOP_KEYS, "")
    pid = f.text(doc, "id", "")
    if not _ID.fullmatch(pid):
        raise f.error("id", f"{pid!r} must be lower-case words joined by '-', e.g. \"caribbean-stud-progressive-d\"")
    title = f.text(doc, "title", "")
    source = f.text(doc, "source", "")
    kind = _kind(f, doc)
    wager_id = f.text(doc, "wager", "")
    games = _games(f, doc, wager_id, kind)
    linked_allowed = f.flag(doc, "linked_allowed", "", True)
    example = f.flag(doc, "example", "", False)
    notes = f.text(doc, "notes", "", default="")
    wagers = [w for g in games for w in _wagers_of(g, wager_id, kind)]
    progressive = all(w.progressive for w in wagers)

    pays = _pays(f, doc, kind)
    for i, p in enumerate(pays):
        if isinstance(p.award, PercentOfMeter) and not progressive:
            raise f.error(
                f"pays[{i}].award",
                f"{p.award.describe()} needs a progressive meter; the {wager_id} wager is not a progressive wager",
            )

    envy = None
    if "envy" in doc:
        if not progressive:
            raise f.error(
                "envy",
                f"an Envy Bonus is paid only to a progressive wager (§ 639a.1 \"Envy Bonus\"); "
                f"the {wager_id} wager is not progressive",
            )
        envy = _envy(f, f.table(doc["envy"], "envy"), kind, source)

    magic = lucky = None
    if "bonus" in doc:
        bonus = f.table(doc["bonus"], "bonus")
        f.only_keys(bonus, _BONUS_KEYS, "bonus")
        for w in wagers:
            if not w.magic_and_lucky:
                raise f.error(
                    "bonus",
                    f"Magic Card and Lucky Bonus payouts go with the Five Card Hand Bonus Wager "
                    f"(§ 639a.12(e)(3)), not the {w.title}",
                )
        if "magic-card" in bonus:
            magic = f.award(bonus["magic-card"], "bonus.magic-card")
        if "lucky-bonus" in bonus:
            lucky = f.award(bonus["lucky-bonus"], "bonus.lucky-bonus")
        for key, award in (("magic-card", magic), ("lucky-bonus", lucky)):
            if isinstance(award, PercentOfMeter):
                raise f.error(f"bonus.{key}", "a Magic Card or Lucky Bonus is paid at odds, not from the meter")

    return Paytable(
        id=pid, title=title, source=source, games=games, wager=wager_id, kind=kind, pays=pays,
        linked_allowed=linked_allowed, example=example, envy=envy, magic_card=magic, lucky_bonus=lucky,
        notes=notes,
    )


def _kind(f: _File, doc: Mapping[str, object]) -> HandKind:
    text = f.text(doc, "kind", "")
    try:
        return HandKind(text)
    except ValueError:
        raise f.error("kind", f"unknown kind {text!r}; one of {', '.join(k.value for k in HandKind)}") from None


def _wagers_of(game_id: str, wager_id: str, kind: HandKind) -> list[Any]:
    g = GAMES[game_id]
    if wager_id == ANY_WAGER:
        return [w for w in g.wagers.values() if w.hand is kind]
    return [g.wagers[wager_id]] if wager_id in g.wagers else []


def _games(f: _File, doc: Mapping[str, object], wager_id: str, kind: HandKind) -> tuple[str, ...]:
    items = f.array(doc, "games", "")
    seen: dict[str, int] = {}
    for i, g in enumerate(items):
        where = f"games[{i}]"
        if not isinstance(g, str) or g not in GAMES:
            raise f.error(where, f"unknown game {_short(g)}; known games: {', '.join(GAMES)}")
        if g in seen:
            raise f.error(where, f"duplicate game {g!r} (already at games[{seen[g]}])")
        seen[g] = i
        game = GAMES[g]
        if wager_id == ANY_WAGER:
            if kind not in DICE_KEYS:
                raise f.error("wager", "\"*\" (every wager of the game) is only for dice paytables; name the wager")
            if not _wagers_of(g, wager_id, kind):
                raise f.error(where, f"{game.title} has no wager of kind {kind.value}")
            continue
        if wager_id not in game.wagers:
            raise f.error("wager", f"{game.title} has no wager {wager_id!r}; its wagers: {', '.join(game.wagers)}")
        w = game.wagers[wager_id]
        if w.hand is not kind:
            raise f.error(
                "kind",
                f"{kind.value!r} does not fit the {w.title} of {game.title}, which ranks {w.hand.value} hands",
            )
    return tuple(items)


def _hand(f: _File, value: object, kind: HandKind, path: str) -> str:
    """A hand label in its regulation spelling (aliases such as "royal" accepted), or a dice key."""
    allowed = hand_keys(kind)
    if isinstance(value, str):
        enum = hand_type(kind)
        if enum is None:
            if value in allowed:
                return value
        else:
            try:
                return category_from_label(enum, value).label
            except KeyError:
                pass
    raise f.error(path, f"unknown hand {_short(value)} for kind {kind.value}; one of {', '.join(allowed)}")


def _min_rank(f: _File, value: object, path: str) -> int:
    if isinstance(value, str):
        s = value.strip().upper()
        s = "T" if s == "10" else s
        if len(s) == 1 and s in RANKS:
            return RANKS.index(s) + 2
    elif isinstance(value, int) and not isinstance(value, bool) and 2 <= value <= 14:
        return value
    raise f.error(path, f"{_short(value)} is not a rank: write 2..14 (11 = jack, 14 = ace) or one of {' '.join(RANKS)}")


def _pays(f: _File, doc: Mapping[str, object], kind: HandKind) -> tuple[Pay, ...]:
    rows = f.array(doc, "pays", "")
    enum = hand_type(kind)
    out: list[Pay] = []
    seen: dict[tuple[str, int | None], int] = {}
    for i, raw in enumerate(rows):
        where = f"pays[{i}]"
        row = f.table(raw, where)
        f.only_keys(row, _PAY_KEYS, where)
        if "hand" not in row:
            raise f.error(f"{where}.hand", "is required")
        if "award" not in row:
            raise f.error(f"{where}.award", "is required")
        hand = _hand(f, row["hand"], kind, f"{where}.hand")
        min_rank = None
        if "min_rank" in row:
            if enum is None:
                raise f.error(f"{where}.min_rank", "applies to card hands only, not dice outcomes")
            min_rank = _min_rank(f, row["min_rank"], f"{where}.min_rank")
        award = f.award(row["award"], f"{where}.award")
        if (hand, min_rank) in seen:
            raise f.error(f"{where}.hand", f"duplicate hand {hand!r} (already at pays[{seen[hand, min_rank]}])")
        seen[hand, min_rank] = i
        if enum is not None and out:
            prev = out[-1]
            # § 639a.12(d)(1) and every printed table list hands from the highest down.
            here = (enum.from_label(hand), min_rank or 0)
            before = (enum.from_label(prev.hand), prev.min_rank or 0)
            if here > before:
                raise f.error(
                    f"{where}.hand",
                    f"{_describe(hand, min_rank)!r} ranks above {_describe(prev.hand, prev.min_rank)!r} "
                    f"in pays[{i - 1}]; list rows from the highest hand down",
                )
        out.append(Pay(hand, award, min_rank))
    return tuple(out)


def _describe(hand: str, min_rank: int | None) -> str:
    return hand if min_rank is None else f"{hand} of {RANKS[min_rank - 2]}s or better"


def _envy(f: _File, envy: dict[str, Any], kind: HandKind, default_source: str) -> EnvyTable:
    f.only_keys(envy, _ENVY_KEYS, "envy")
    enum = hand_type(kind)
    if enum is None:
        raise f.error("envy", "an Envy Bonus is paid on card hands only")
    if "qualifying" not in envy:
        raise f.error("envy.qualifying", "is required (the lowest Envy Bonus Qualifying Hand)")
    qualifying = _hand(f, envy["qualifying"], kind, "envy.qualifying")
    lowest = enum.from_label(qualifying)
    qualifying_hands = [c.label for c in sorted(enum, reverse=True) if c >= lowest]
    source = f.text(envy, "source", "envy", default=default_source) or default_source
    rows = f.array(envy, "by_wager", "envy")
    by_wager: dict[int, dict[str, Fixed]] = {}
    seen: dict[int, int] = {}
    for i, raw in enumerate(rows):
        where = f"envy.by_wager[{i}]"
        row = f.table(raw, where)
        if "wager" not in row:
            raise f.error(f"{where}.wager", "is required (the size of the receiver's progressive wager)")
        cents = _wager_size(f, row["wager"], f"{where}.wager")
        if cents in seen:
            raise f.error(
                f"{where}.wager",
                f"duplicate wager size {format_dollars_human(cents)} (already at envy.by_wager[{seen[cents]}])",
            )
        seen[cents] = i
        amounts: dict[str, Fixed] = {}
        for key, value in row.items():
            if key == "wager":
                continue
            hand = _hand(f, key, kind, f"{where}.{key}")
            if enum.from_label(hand) < lowest:
                raise f.error(
                    f"{where}.{key}",
                    f"{hand!r} ranks below the qualifying hand {qualifying!r}; it cannot earn an Envy Bonus",
                )
            if hand in amounts:
                raise f.error(f"{where}.{key}", f"duplicate hand {hand!r}")
            award = f.award(value, f"{where}.{key}")
            if not isinstance(award, Fixed):
                raise f.error(
                    f"{where}.{key}",
                    f"an Envy Bonus is a fixed sum such as \"$1,000\" (§ 639a.1 \"Envy Bonus\"), "
                    f"not {award.describe()}",
                )
            amounts[hand] = award
        missing = [h for h in qualifying_hands if h not in amounts]
        if missing:
            raise f.error(where, f"no amount for {', '.join(missing)}: every qualifying hand needs one")
        by_wager[cents] = amounts
    return EnvyTable(qualifying=qualifying, by_wager=by_wager, source=source)


def _wager_size(f: _File, value: object, path: str) -> int:
    if not isinstance(value, str):
        raise f.error(path, f"must be a string of dollars such as \"1.00\", not {_show(value)}")
    cents = parse_cents(value.strip().removeprefix("$").replace(",", ""), f"{f.name}: {path}")
    if cents <= 0:
        raise f.error(path, f"{value!r}: a wager must be more than $0")
    if cents > MAX_WAGER_CENTS:
        raise f.error(path, f"{value!r}: more than {format_dollars_human(MAX_WAGER_CENTS)}, the most a wager may be")
    return cents


# -- finding paytables -------------------------------------------------------------------------


@cache
def _builtin() -> dict[str, Paytable]:
    out: dict[str, Paytable] = {}
    folder = resources.files(__package__).joinpath("builtin")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        name = f"builtin/{entry.name}"
        table = load_paytable_text(entry.read_text(encoding="utf-8"), name)
        if table.id != entry.name.removesuffix(".toml"):
            raise InputError(f"{name}: id", f"{table.id!r} differs from the file name")
        out[table.id] = table
    return out


def builtin_paytables() -> dict[str, Paytable]:
    """Every paytable printed in the regulations, by id (loaded once)."""
    return dict(_builtin())


def _toml_files(folder: str | PathLike[str]) -> list[Path]:

    d = Path(folder)
    st = probe(d)  # never an OSError for a path too long or a loop of links
    if isinstance(st, FileRefused):
        raise InputError(show_path(folder), f"is not a directory of paytable files: {st.reason}")
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise InputError(show_path(folder), "is not a directory of paytable files")
    return sorted(p for p in d.glob("*.toml") if p.is_file())


def all_paytables(extra_dirs: Iterable[str | PathLike[str]] = ()) -> dict[str, Paytable]:
    """The built-in paytables and every ``*.toml`` in `extra_dirs`, by id.

    An id may be defined once: a file may not replace a paytable printed in the regulations.
    """
    out = builtin_paytables()
    where = {pid: f"builtin/{pid}.toml" for pid in out}
    for folder in extra_dirs:
        for path in _toml_files(folder):
            table = load_paytable(path)
            if table.id in where:
                raise InputError(f"{path}: id", f"{table.id!r} is already defined by {where[table.id]}")
            out[table.id] = table
            where[table.id] = str(path)
    return out


def find_paytable(id_or_path: str | PathLike[str], extra_dirs: Iterable[str | PathLike[str]] = ()) -> Paytable:
    """A paytable by id (built in, or ``<id>.toml`` in one of `extra_dirs`) or by file path."""

    text = str(id_or_path)
    if not isinstance(id_or_path, str) or text.endswith(".toml") or "/" in text or "\\" in text:
        return load_paytable(id_or_path)
    dirs = list(extra_dirs)
    found: list[tuple[str, Paytable]] = []
    builtin = _builtin()
    if text in builtin:
        found.append((f"builtin/{text}.toml", builtin[text]))
    for folder in dirs:
        _toml_files(folder)  # a missing directory is an error, not an empty one
        path = Path(folder) / f"{text}.toml"
        if isinstance(probe(path), os.stat_result):  # there (a path too long is not)
            found.append((str(path), load_paytable(path)))
    if not found:
        known = sorted(builtin)
        raise InputError(
            "paytable",
            f"unknown paytable {text!r}; built in: {', '.join(known)}"
            + (f"; searched also {', '.join(str(d) for d in dirs)}" if dirs else ""),
        )
    if len(found) > 1:
        raise InputError("paytable", f"{text!r} is defined twice: {found[0][0]} and {found[1][0]}")
    return found[0][1]


__all__ = ["MAX_FIXED_AWARD_CENTS", "MAX_ODDS", "MAX_WAGER_CENTS", "all_paytables", "builtin_paytables",
           "find_paytable", "load_paytable", "load_paytable_text"]
