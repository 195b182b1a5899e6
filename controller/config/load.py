"""Read a table's configuration file and check all of it, collecting every problem.

    cfg = load_config("config/tables/caribbean-stud.toml")   # TableConfig, or ConfigError(problems)
    problems = check_config(path)                             # [] when the file is sound

The checks reuse what the rest of the controller already knows: `MeterParams` for the meter's
parameters (the $10,000 floor, the rate, reserve, ceiling, wager sizes), `check_paytable_for` for the
selection rules of a paytable, the drivers' own settings classes for buses and serial lines, and their
register-map loader. The format and every check are documented in docs/configuration.md.
"""

from __future__ import annotations

import difflib
import errno
import ipaddress
import os
import re
import stat
import tomllib
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from os import PathLike
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import InputError
from ..games import GAMES, Game
from ..meter.params import DEFAULT_HISTORY, MeterParams
from ..meter_award import RESET_FLOOR_CENTS
from ..money import format_dollars_human
from ..paytables import builtin_paytables, check_paytable_for, load_paytable
from ..paytables.model import Paytable
from . import schema
from .credentials import CredentialError, parse_credential
from .fields import decimals_to_float, did_you_mean, problems_from, show, unknown_key
from .files import (
    MAX_CONFIG_BYTES,
    MAX_SECRET_BYTES,
    FileRefused,
    kind_of,
    limit_text,
    probe,
    read_file,
    show_path,
)
from .model import (
    MAX_STUB_COUNT_EVERY,
    AnchorConfig,
    BusConfig,
    CardsConfig,
    DeviceConfig,
    LinkedMeter,
    LoggingConfig,
    MeterConfig,
    MetricsConfig,
    MqttConfig,
    StandaloneMeter,
    Supervisor,
    TableConfig,
    WagerConfig,
)
from .problems import ConfigError, Problem, Problems, join

TOP_KEYS = (
    "table", "game", "seats", "description", "state_dir", "allow_example_paytables",
    "wagers", "meters", "cards", "buses", "devices", "supervisors", "supervisors_file", "metrics", "logging",
    "mqtt", "anchor",
)
HASHES = ("the supervisors' credential hashes",
          "whoever reads a hash can guess at the secret offline, where no lock-out stops them")
DAEMON_USER = "progressive"  # the user the daemon runs as (systemd/progressived.service)
MAX_PATH_CHARS = 1024  # a path in the configuration: longer is a mistake (the system's own limit is 4096)
REQUIRED_HINTS = {
    "table": 'table = "CS-07": the table\'s id on the casino floor',
    "game": "game = \"caribbean-stud\"; games: " + ", ".join(GAMES),
    "seats": "seats = 7: the betting positions of this table",
    "state_dir": 'state_dir = "/var/lib/progressive": where the journal of the meters is kept',
    "wagers": '[wagers.progressive] with paytable = "..." for each wager offered',
    "devices": "[devices.NAME] for each device: seat wagering devices, lock-out, sign, ...",
}

# The most players a table may have, by game (the limit itself is GAMES[...].max_seats).
SEAT_LIMIT_SOURCE = {
    "caribbean-stud": "§ 639a.2(a)",
    "four-card-poker": "§ 641a.2(a)",
    "let-it-ride": "§ 643a.2(a)",
    "flop-poker": "§ 667a.2(a)",
    "hot-roller-craps": "§ 623c.1(a)(2)(i)",
    "props-and-hops": "§ 668a.1(a)",
}
# The progressive table game system: a wagering device at each betting position ((1)) and a lock-out
# ((2)); for the Five Card Hand Bonus an electronic wagering system at each position with a lockout.
PROGRESSIVE_SYSTEM_SOURCE = {
    "caribbean-stud": "§ 639a.2(c)",
    "four-card-poker": "§ 641a.2(c)",
    "let-it-ride": "§ 643a.2(d)",
    "flop-poker": "§ 667a.2(c)",
}
FIVE_CARD_HAND_BONUS_SYSTEM_SOURCE = {
    "caribbean-stud": "§ 639a.2(d)",
    "four-card-poker": "§ 641a.2(d)",
    "let-it-ride": "§ 643a.2(e)",
}
STUB_SOURCE = {"flop-poker": "§ 667a.8(f)", "let-it-ride": "§ 643a.8(f)"}
SUPERVISOR_SOURCE = "§ 639a.11(c)(5)(iii)"  # a floorperson or above validates a progressive payout

_NAME = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
_METER_ID = re.compile(r"[a-z0-9-]+")
_TABLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CLIENT_ID = re.compile(r"[A-Za-z0-9._-]+")
_TOPIC = re.compile(r"[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)*")
_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_LINE = re.compile(r"\(at line (\d+), column (\d+)\)")

_METER_FIELD = {"reset_cents": "reset", "ceiling_cents": "ceiling", "meter_id": ""}
_METER_HINT = {
    "reset": f'the reset amount is at least the floor: reset = "{RESET_FLOOR_CENTS // 100}.00"',
    "rate": 'the rate of progression is the fraction of each wager added to the meter, more than 0 and less '
            'than 1: rate = "0.15" for 15%',
    "reserve_rate": "the rate of progression and the reserve rate together must be less than 1",
    "ceiling": "the ceiling must be above the reset amount; leave it out for no ceiling",
    "wager_sizes": 'list each accepted wager amount once: wager_sizes = ["1.00", "5.00"]',
    "history_size": f"keep at least the last 25 hits: history_size = {DEFAULT_HISTORY} (the default)",
    "": "a meter id is 1 to 64 characters of a-z, 0-9 and -",
}
_METER_PARAM = {"reset": "reset_cents", "ceiling": "ceiling_cents"}  # TOML key -> MeterParams field
_METER_STAND_INS = {"reset": f"{RESET_FLOOR_CENTS // 100}", "rate": "0.01", "reserve_rate": "0",
                    "ceiling": None, "wager_sizes": ["1.00"], "history_size": DEFAULT_HISTORY, "description": ""}
_NEUTRAL: dict[str, Any] = {  # a valid stand-in for a field found wrong, so the next fields get checked too
    "meter_id": "m", "reset_cents": RESET_FLOOR_CENTS, "rate": Fraction(1, 100), "reserve_rate": Fraction(0),
    "ceiling_cents": None, "wager_sizes": (100,), "history_size": DEFAULT_HISTORY,
}


def load_config(path: str | PathLike[str]) -> TableConfig:
    """The configuration in `path`, checked whole. Raises ConfigError carrying every problem. Warnings
    (what works but should not stay so) are the result's `warnings`, or the error's."""
    cfg, problems, warnings = _run(path)
    if problems or cfg is None:
        raise ConfigError(str(path), problems or [Problem("", "could not be read")], warnings)
    return cfg


def check_config(path: str | PathLike[str]) -> list[Problem]:
    """Every problem of the configuration in `path`; an empty list when it is sound."""
    return _run(path)[1]


def read_toml(path: str | PathLike[str],
              what: str) -> tuple[dict[str, Any] | None, Problem | None, os.stat_result | None]:
    """A configuration file's TOML document and its status, or the one problem that stops its reading
    (`what` names the file in the hint). Bounded and never blocking (files.read_file)."""
    try:
        read = read_file(path)
    except FileRefused as e:
        return None, Problem("", f"cannot read the configuration: {e.reason}", f"give the path of {what}"), None
    try:
        text = read.data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, Problem("", f"is not UTF-8 text (byte {e.start})", "save the file as UTF-8"), read.stat
    try:
        # parse_float=Decimal: no binary float is ever made from the file (money fields refuse floats).
        return tomllib.loads(text, parse_float=Decimal), None, read.stat
    except tomllib.TOMLDecodeError as e:
        return None, _toml_problem(text, e), read.stat
    except (ValueError, RecursionError) as e:
        return None, Problem("", f"malformed TOML: {type(e).__name__}"), read.stat


def in_file_order(doc: Mapping[str, Any], problems: list[Problem]) -> list[Problem]:
    """`problems` in the order of the file's sections (the checks run in the order their dependencies need)."""
    order = {k: i for i, k in enumerate(doc)}
    return sorted(problems, key=lambda pr: order.get(re.split(r"[.\[]", pr.path, maxsplit=1)[0], len(order)))


def _run(path: str | PathLike[str]) -> tuple[TableConfig | None, list[Problem], list[Problem]]:
    p = Path(path)
    doc, problem, st = read_toml(p, "the table's TOML configuration file")
    if doc is None or st is None:
        return None, [problem or Problem("", "could not be read")], []
    checker = _Checker(p.resolve().parent)
    cfg = checker.run(doc, p, st)
    return cfg, in_file_order(doc, checker.problems.items), in_file_order(doc, checker.warnings.items)


def _toml_problem(text: str, e: tomllib.TOMLDecodeError) -> Problem:
    msg = str(e)
    hint = ""
    if "twice" in msg or "overwrite" in msg.lower():
        hint = "each name (wager, meter, bus, device) and each key may be defined once"
    if m := _LINE.search(msg):
        return Problem(f"line {m.group(1)}", f"malformed TOML: {_LINE.sub('', msg).strip()} (column {m.group(2)})", hint)
    line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    return Problem(f"line {line}", f"malformed TOML: {msg.replace('(at end of document)', '').strip()} "
                   "(at the end of the file)", hint)


class _Checker:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.problems = Problems()
        self.warnings = Problems()  # what works, but should not stay so (a file of credentials others read)
        self.game: Game | None = None
        self.seats: int | None = None
        self.meters: dict[str, MeterConfig | None] = {}
        self.meter_linked: dict[str, bool] = {}  # every meter declared (valid or not): is it linked?
        self.wagers: dict[str, WagerConfig | None] = {}
        self.buses: dict[str, BusConfig | None] = {}
        self.devices: dict[str, DeviceConfig | None] = {}
        self.cards: CardsConfig | None = None
        self.cards_ok = True
        self.supervisors: list[Supervisor] = []
        self.metrics = MetricsConfig()
        self.logging = LoggingConfig()
        self.mqtt: MqttConfig | None = None
        self.anchor = AnchorConfig()
        self._maps: dict[Path, Any] = {}
        # Each device's kind, seats and roles as soon as they are known, even if the rest of it is wrong,
        # so that one bad unit id does not hide a seat without a device.
        self.device_common: dict[str, Any] = {}

    # --- helpers ---------------------------------------------------------------------------------

    def add(self, path: str, message: str, hint: str = "") -> None:
        self.problems.add(path, message, hint)

    def validate(self, model: type[BaseModel], data: Mapping[str, Any], path: str,
                 allowed: tuple[str, ...] = (), hints: Mapping[str, str] | None = None,
                 stand_ins: Mapping[str, Any] | None = None) -> Any:
        """`data` validated by `model`, or None. Every problem is reported: unknown keys first (then left
        out, so that the known keys are still checked), then each bad value. With `stand_ins` (valid raw
        values by key), a table with bad values is validated again with those keys replaced, and
        ``(model, bad keys)`` is returned so that the caller can go on checking the rest."""
        known = tuple(model.model_fields)
        data = dict(data)
        for k in list(data):
            if k not in known:
                del data[k]
                self.problems.items.append(unknown_key(join(path, k), k, allowed or known))
        try:
            value = model.model_validate(data)
            return value if stand_ins is None else (value, frozenset())
        except ValidationError as e:
            self.problems.extend(problems_from(e, path, allowed=allowed or known, required_hints=hints))
            if stand_ins is None:
                return None
            bad = frozenset(str(err["loc"][0]) for err in e.errors() if err["loc"])
            if not bad <= set(stand_ins):
                return None
            try:
                return model.model_validate({**data, **{k: stand_ins[k] for k in bad}}), bad
            except ValidationError:
                return None

    def table(self, value: object, path: str, example: str) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.add(path, f"must be a table, not {show(value)}", f"write it as {example}")
        return None

    def path(self, text: str) -> Path:
        """A path from the file: absolute, or relative to the configuration file's directory."""
        p = Path(text)
        return p if p.is_absolute() else (self.base / p)

    def usable_path(self, text: str, at: str) -> Path | None:
        """`path(text)`, or None after a problem at `at` for a path no file can have."""
        if len(text) > MAX_PATH_CHARS:
            self.add(at, f"the path is {len(text):,} characters long, more than the {MAX_PATH_CHARS:,} a path in the "
                     "configuration may have", "give the file's real path")
            return None
        if "\0" in text:
            self.add(at, "the path contains a NUL character", "give the file's real path")
            return None
        return self.path(text)

    def name(self, name: str, path: str, what: str) -> bool:
        if _NAME.fullmatch(name) and len(name) <= 48:
            return True
        self.add(path, f"{name!r} is not a valid {what} name",
                 "use lower-case letters and digits, words joined by - or _, at most 48 characters")
        return False

    def sub_toml(self, ref: str, at: str, what: str) -> tuple[Path, Any, Any] | None:
        """(path, FileRead, TOML document) of a file the configuration names at `at` and that only the daemon's
        user reads (`what`: "the supervisors file"); None after a problem at `at`."""
        path = self.usable_path(ref, at)
        if path is None:
            return None
        try:
            read = read_file(path)
        except FileRefused as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                self.add(at, f"{show_path(ref)}: cannot read it (permission denied): only the daemon's user "
                         f"({DAEMON_USER}) or root can read {what}",
                         f"check the configuration as root or as that user: sudo -u {DAEMON_USER} progressivectl "
                         "check-config FILE")
            else:
                self.add(at, f"{show_path(ref)}: cannot read it: {e.reason}",
                         "the path is absolute or relative to this configuration file")
            return None
        try:
            sub_doc: Any = tomllib.loads(read.text(ref), parse_float=Decimal)
        except FileRefused as e:
            self.add(at, f"{show_path(ref)}: {e.reason}", "save the file as UTF-8")
            return None
        except tomllib.TOMLDecodeError as e:
            p = _toml_problem(read.data.decode("utf-8"), e)
            self.add(at, f"{show_path(ref)}: {p.path}: {p.message}", p.hint)
            return None
        except (ValueError, RecursionError) as e:
            self.add(at, f"{show_path(ref)}: malformed TOML: {type(e).__name__}")
            return None
        return path, read, sub_doc

    def secret_file(self, text: object, at: str, holds: str, *, limit: int = MAX_SECRET_BYTES,
                    minimum: int = 0) -> Path | None:
        """The path of a file holding a secret in clear (`holds`: "the journal key"): a regular file of at most
        `limit` bytes (and at least `minimum`) that only its owner may read; None after a problem at `at`."""
        if not isinstance(text, str) or not text.strip():
            self.add(at, f"must be the path of a file, not {show(text)}")
            return None
        p = self.usable_path(text, at)
        if p is None:
            return None
        st = probe(p)
        where = "the path is absolute or relative to this configuration file"
        if st is None or isinstance(st, FileRefused):
            self.add(at, f"{show_path(text)}: no such file" if st is None else f"{show_path(text)}: {st.reason}", where)
            return None
        if (kind := kind_of(st.st_mode)) is not None:
            self.add(at, f"{show_path(text)}: it is {kind}, not a regular file", where)
            return None
        if st.st_size > limit:
            self.add(at, f"{show_path(text)}: it is {st.st_size:,} bytes, more than the {limit_text(limit)} such a "
                     "file may have", where)
            return None
        if st.st_size < minimum:
            self.add(at, f"{show_path(text)}: it is {st.st_size:,} bytes; {holds} has at least {minimum}")
            return None
        if (exposed := readable_by_others(p, st, holds)) is not None:
            self.add(at, *exposed)  # a secret in clear, unlike a hash: refused, not only warned about
            return None
        return p

    def _anchor(self, raw: object, state_dir: Path | None) -> None:
        """[anchor]: where the journal's head is anchored (controller.app.anchoring), with which key, and the
        remote syslog it is also sent to."""
        if raw is None:
            return
        body = self.table(raw, "anchor", '[anchor] key_file = "journal.key"')
        m = None if body is None else self.validate(schema.AnchorModel, body, "anchor")
        if m is None:
            return
        file = key_file = None
        syslog = None
        ok = True
        if m.file is not None:
            file = self.usable_path(m.file, "anchor.file")
            ok = file is not None
            if file is not None and state_dir is not None and _inside(file, state_dir):
                ok = False
                self.add("anchor.file", f"{show_path(m.file)} is inside state_dir: a copy of the state directory "
                         "put back would bring back its old anchor with it",
                         "leave it out (the default is beside state_dir, in STATE_DIR-anchor/), or give a path "
                         "outside state_dir")
            elif file is not None and isinstance(st := probe(file), os.stat_result) \
                    and (kind := kind_of(st.st_mode)) is not None:
                ok = False
                self.add("anchor.file", f"{show_path(m.file)}: it is {kind}, not a regular file",
                         "the anchor is a small file the daemon writes")
        if m.key_file is not None:
            key_file = self.secret_file(m.key_file, "anchor.key_file", "the journal key", minimum=32)
            ok = ok and key_file is not None
            if key_file is not None and state_dir is not None and _inside(key_file, state_dir):
                ok = False
                self.add("anchor.key_file", f"{show_path(m.key_file)} is inside state_dir: whoever copies the "
                         "state directory would have the key", "keep the key in /etc/progressive, mode 0400")
        if m.syslog is not None:
            syslog = _host_port(m.syslog)
            if syslog is None or not _valid_host(syslog[0]):
                ok = False
                self.add("anchor.syslog", f"{m.syslog!r} is not host:port",
                         'syslog = "logs.casino.example:514" (RFC 5424 over UDP)')
        if ok:
            self.anchor = AnchorConfig(file, key_file, syslog)

    # --- the whole file ----------------------------------------------------------------------------

    def run(self, doc: dict[str, Any], source: Path, source_stat: os.stat_result | None = None) -> TableConfig | None:
        for key in doc:
            if key not in TOP_KEYS:
                self.add(join("", key), "unknown key", did_you_mean(key, TOP_KEYS))
        for key, hint in REQUIRED_HINTS.items():
            if key not in doc:
                self.add(key, "is required", hint)
        table = self._table_id(doc.get("table"))
        self._game(doc.get("game"))
        self._seats(doc.get("seats"))
        description = self._text(doc, "description")
        allow_examples = self._flag(doc, "allow_example_paytables")
        state_dir = self._state_dir(doc.get("state_dir"))

        if "meters" in doc and (meters := self.table(doc["meters"], "meters", "[meters.main]")) is not None:
            for mid, raw in meters.items():
                self._meter(mid, raw)
        if "wagers" in doc and (wagers := self.table(doc["wagers"], "wagers", "[wagers.progressive]")) is not None:
            self._wagers(wagers, allow_examples)
        self._cards(doc)
        if "buses" in doc and (buses := self.table(doc["buses"], "buses", "[buses.table-bus]")) is not None:
            for name, raw in buses.items():
                self._bus(name, raw)
        if "devices" in doc and (devices := self.table(doc["devices"], "devices", "[devices.seat-1]")) is not None:
            for name, raw in devices.items():
                self._device(name, raw)
            self._devices_together()
        self._supervisor_source(doc, source, source_stat)
        self._metrics(doc.get("metrics"))
        self._logging(doc.get("logging"))
        self._mqtt(doc.get("mqtt"), table)
        self._anchor(doc.get("anchor"), state_dir)

        if self.problems or self.game is None or self.seats is None or table is None or state_dir is None:
            return None
        return TableConfig(
            source=source.resolve(),
            table=table,
            game=self.game,
            seats=self.seats,
            state_dir=state_dir,
            wagers={k: v for k, v in self.wagers.items() if v is not None},
            meters={k: v for k, v in self.meters.items() if v is not None},
            buses={k: v for k, v in self.buses.items() if v is not None},
            devices={k: v for k, v in self.devices.items() if v is not None},
            cards=self.cards,
            supervisors=tuple(self.supervisors),
            metrics=self.metrics,
            logging=self.logging,
            mqtt=self.mqtt,
            anchor=self.anchor,
            description=description,
            allow_example_paytables=allow_examples,
            warnings=tuple(self.warnings.items),
        )

    # --- top-level values --------------------------------------------------------------------------

    def _table_id(self, value: object) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.add("table", f"must be a string, not {show(value)}", 'table = "CS-07"')
            return None
        if not _TABLE_ID.fullmatch(value) or len(value) > 32:
            self.add("table", f"{value!r} is not a table id",
                     "1 to 32 letters, digits, '.', '_' or '-', starting with a letter or digit")
            return None
        return value

    def _game(self, value: object) -> None:
        if value is None:
            return
        if isinstance(value, str) and value in GAMES:
            self.game = GAMES[value]
            return
        what = repr(value) if isinstance(value, str) else show(value)
        self.add("game", f"unknown game {what}",
                 (did_you_mean(value, GAMES) if isinstance(value, str) else "") or "games: " + ", ".join(GAMES))

    def _seats(self, value: object) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            self.add("seats", f"must be a whole number, not {show(value)}", "seats = 7")
            return
        if value < 1:
            self.add("seats", f"must be at least 1, not {value}", "seats = 7")
            return
        g = self.game
        if g is None and value > schema.MAX_TABLE_SEATS:  # with the game known, its own maximum is checked
            self.add("seats", f"must be at most {schema.MAX_TABLE_SEATS} (the most any game has), not {value}",
                     "seats = 7")
            return
        if g is not None and value > g.max_seats:
            source = SEAT_LIMIT_SOURCE.get(g.id, f"§ {g.chapter}.2(a)")
            place = "wager positions" if g.dice else "betting positions"
            self.add("seats", f"{value} seats, but {g.title} has at most {g.max_seats} {place} ({source})",
                     f"seats = {g.max_seats} or fewer")
            return
        self.seats = value

    def _text(self, doc: Mapping[str, Any], key: str) -> str:
        value = doc.get(key, "")
        if not isinstance(value, str):
            self.add(key, f"must be a string, not {show(value)}")
            return ""
        return value

    def _flag(self, doc: Mapping[str, Any], key: str) -> bool:
        value = doc.get(key, False)
        if not isinstance(value, bool):
            self.add(key, f"must be true or false, not {show(value)}", f"{key} = false")
            return False
        return value

    def _state_dir(self, value: object) -> Path | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.add("state_dir", f"must be the path of a directory, not {show(value)}",
                     REQUIRED_HINTS["state_dir"])
            return None
        p = self.usable_path(value, "state_dir")
        if p is None:
            return None
        st = probe(p)
        if isinstance(st, FileRefused):
            self.add("state_dir", f"{show_path(value)}: {st.reason}",
                     "give the directory the daemon keeps its journal in")
            return None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            self.add("state_dir", f"{value} exists and is not a directory",
                     "give the directory the daemon keeps its journal in")
            return None
        return p

    # --- meters ------------------------------------------------------------------------------------

    def _meter(self, mid: str, raw: object) -> None:
        at = join("meters", mid)
        self.meters[mid] = None
        if not _METER_ID.fullmatch(mid) or len(mid) > 64:
            self.add(at, f"{mid!r} is not a valid meter id", _METER_HINT[""])
            return
        body = self.table(raw, at, f'[meters.{mid}] with reset, rate and wager_sizes, or linked = "..."')
        if body is None:
            return
        if "linked" in body:
            self.meter_linked[mid] = True
            rest = dict(body)
            for k in schema.STANDALONE_ONLY:
                if k in rest:
                    del rest[k]
                    self.add(join(at, k), "is set by the link authority: a linked meter takes its parameters "
                             "from the authority that owns it",
                             f"remove {k}, or remove linked to make this meter the table's own")
            m = self.validate(schema.LinkedMeterModel, rest, at,
                              allowed=tuple(schema.LinkedMeterModel.model_fields))
            if m is not None:
                sizes = tuple(m.wager_sizes)
                for i, size in enumerate(sizes):
                    if size <= 0:
                        self.add(join(at, "wager_sizes", i), "must be more than zero", _METER_HINT["wager_sizes"])
                    elif size in sizes[:i]:
                        self.add(join(at, "wager_sizes", i), f"{format_dollars_human(size)} is listed twice",
                                 _METER_HINT["wager_sizes"])
                self.meters[mid] = LinkedMeter(mid, m.linked, tuple(sorted(set(sizes))))
            return
        self.meter_linked[mid] = False
        allowed = (*schema.StandaloneMeterModel.model_fields, "linked")
        checked = self.validate(schema.StandaloneMeterModel, body, at, allowed=allowed, hints={
            "reset": f'reset = "{RESET_FLOOR_CENTS // 100}.00" (at least the $10,000 floor)',
            "rate": 'rate = "0.15" (15% of each wager goes to the meter)',
            "wager_sizes": 'wager_sizes = ["1.00", "5.00"] (the wager amounts accepted)',
        }, stand_ins=_METER_STAND_INS)
        if checked is None:
            return
        m, bad = checked
        quiet = {_METER_PARAM.get(k, k) for k in bad}
        params = self._meter_params(mid, at, {
            "meter_id": mid, "reset_cents": m.reset, "rate": m.rate, "reserve_rate": m.reserve_rate,
            "ceiling_cents": m.ceiling, "wager_sizes": tuple(m.wager_sizes), "history_size": m.history_size,
        }, quiet)
        if params is not None and not bad:
            self.meters[mid] = StandaloneMeter(mid, params)

    def _meter_params(self, mid: str, at: str, kwargs: dict[str, Any], quiet: set[str]) -> MeterParams | None:
        """MeterParams checks the parameters and stops at the first problem; to report them all, each
        field found wrong is replaced by a valid stand-in and the rest checked again. Problems of the
        fields in `quiet` (already reported, holding stand-ins) are not reported again."""
        found = False
        for _ in range(len(_NEUTRAL) + 1):
            try:
                params = MeterParams(**kwargs)
            except InputError as e:
                found = True
                head, bracket, rest = e.field.partition("[")
                key = _METER_FIELD.get(head, head)
                if head not in quiet:
                    self.add(join(at, key) + (bracket + rest if bracket else ""), e.problem,
                             _METER_HINT.get(key, ""))
                if head not in _NEUTRAL or kwargs.get(head) == _NEUTRAL[head]:
                    return None
                kwargs[head] = _NEUTRAL[head]
                continue
            return None if found else params
        return None

    # --- wagers ------------------------------------------------------------------------------------

    def _wagers(self, wagers: dict[str, Any], allow_examples: bool) -> None:
        g = self.game
        if not wagers:
            self.add("wagers", "no wager is offered", '[wagers.progressive] with paytable = "..."')
        used: dict[str, str] = {}
        for wid, raw in wagers.items():
            at = join("wagers", wid)
            self.wagers[wid] = None
            w = None
            if g is not None:
                w = g.wagers.get(wid)
                if w is None:
                    self.add(at, f"{g.title} has no wager {wid!r}",
                             did_you_mean(wid, g.wagers).replace("keys allowed here", "its wagers"))
            body = self.table(raw, at, f'[wagers.{wid}] with paytable = "..."')
            if body is None:
                continue
            m = self.validate(schema.WagerModel, body, at, hints={
                "paytable": 'paytable = "caribbean-stud-progressive-d" (a built-in id) or the path of a paytable file'})
            if m is None or w is None or g is None:
                continue
            meter = m.meter
            if w.progressive and meter is None:
                self.add(join(at, "meter"), f"is required: the {w.title} is paid from a progressive meter",
                         'meter = "main", and define it in [meters.main]')
                continue
            if not w.progressive and meter is not None:
                self.add(join(at, "meter"), f"the {w.title} is not a progressive wager and has no meter",
                         "remove meter")
                continue
            if meter is not None:
                if meter not in self.meter_linked and meter not in self.meters:
                    known = ", ".join(self.meters) or "none is defined"
                    self.add(join(at, "meter"), f"no meter {meter!r} is defined",
                             f"define [meters.{meter}] or use one of the meters: {known}")
                    continue
                if meter in used:
                    self.add(join(at, "meter"), f"meter {meter!r} is already the meter of {used[meter]}",
                             "each progressive wager has a meter of its own")
                    continue
                used[meter] = at
            pt = self._paytable(m.paytable, join(at, "paytable"))
            if pt is None:
                continue
            linked = self.meter_linked.get(meter, False) if meter else False
            mc = self.meters.get(meter) if meter else None
            sizes = mc.wager_sizes if mc is not None else ()
            if self._select(pt, m.paytable, wid, join(at, "paytable"), linked=linked, sizes=(),
                            allow_examples=allow_examples) and sizes:
                # The rules may need a row for each wager size (an Envy Bonus table): that is the meter's
                # wager_sizes to fix, or the paytable.
                self._select(pt, m.paytable, wid, join("meters", meter or "", "wager_sizes"), linked=linked,
                             sizes=sizes, allow_examples=allow_examples)
            self.wagers[wid] = WagerConfig(wid, w, pt, m.paytable, meter)
        if all(v is not None for v in self.wagers.values()):
            wanted = {w.meter for w in self.wagers.values() if w is not None and w.meter}
            for mid in self.meter_linked:
                if mid not in wanted:
                    self.add(join("meters", mid), "no wager uses this meter",
                             f'remove it, or set meter = "{mid}" on the progressive wager it belongs to')

    def _paytable(self, ref: str, at: str) -> Paytable | None:
        if "/" in ref or "\\" in ref or ref.endswith(".toml"):
            p = self.usable_path(ref, at)
            if p is None:
                return None
            try:
                return load_paytable(p)
            except InputError as e:
                self.add(at, str(e).replace(str(p), ref),
                         "a paytable file's path is relative to this configuration file; "
                         "docs/paytables.md describes the format")
                return None
        builtin = builtin_paytables()
        if ref in builtin:
            return builtin[ref]
        close = difflib.get_close_matches(ref, list(builtin), n=1, cutoff=0.6)
        self.add(at, f"unknown paytable {ref!r}",
                 (f"did you mean {close[0]!r}? " if close else "") + "`progressivectl paytables` lists the built-in "
                 "ids; a paytable file is given by its path, e.g. \"../paytables/NAME.toml\"")
        return None

    def _select(self, pt: Paytable, ref: str, wid: str, at: str, *, linked: bool, sizes: tuple[int, ...],
                allow_examples: bool) -> bool:
        g = self.game
        assert g is not None
        try:
            check_paytable_for(pt, g.id, wid, linked=linked, wager_sizes=sizes, allow_examples=allow_examples)
        except InputError as e:
            if pt.example and not allow_examples:
                hint = ("use the paytable of the Rules Submission; allow_example_paytables = true is for "
                        "test tables only")
            elif sizes:
                hint = "offer only wager sizes the paytable has rows for, or use a paytable that has rows for them"
            else:
                hint = (f"`progressivectl check-paytable --game {g.id} --wager {wid} --paytable {ref}"
                        + (" --linked" if linked else "") + "` explains; `progressivectl paytables` lists them")
            self.add(at, e.problem, hint)
            return False
        return True

    # --- cards -------------------------------------------------------------------------------------

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
        body = self.table(raw, "cards", "[cards]")
        m = None if body is None else self.validate(schema.CardsModel, body, "cards", hints={
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

    # --- buses -------------------------------------------------------------------------------------

    def _bus(self, name: str, raw: object) -> None:
        from drivers.modbus import SerialBusSettings, TcpSettings

        at = join("buses", name)
        self.buses[name] = None
        if not self.name(name, at, "bus"):
            return
        body = self.table(raw, at, f'[buses.{name}] with transport = "rtu" and port = "/dev/ttyUSB0"')
        if body is None:
            return
        rest = {k: v for k, v in body.items() if k not in ("transport", "description")}
        transport = body.get("transport")
        if "description" in body and not isinstance(body["description"], str):
            self.add(join(at, "description"), f"must be a string, not {show(body['description'])}")
        model: type[BaseModel]
        if transport == "rtu":
            model = SerialBusSettings
        elif transport == "tcp":
            model = TcpSettings
        else:
            why = "is required" if transport is None else f"must be \"rtu\" or \"tcp\", not {show(transport)}"
            self.add(join(at, "transport"), why,
                     'transport = "rtu" (an RS-485 line) or "tcp" (a Modbus TCP connection); a line-protocol '
                     'device has its own port and no bus')
            return
        allowed = (*model.model_fields, "transport", "description")
        settings = self.validate(model, decimals_to_float(rest), at, allowed=allowed, hints={
            "port": 'port = "/dev/ttyUSB0" (the serial port of the RS-485 line)',
            "host": 'host = "10.0.0.5" (the Modbus TCP gateway)'})
        if settings is not None:
            self.buses[name] = BusConfig(name, transport, settings)

    # --- devices -----------------------------------------------------------------------------------

    def _device(self, name: str, raw: object) -> None:
        from drivers.modbus import SerialBusSettings, TcpSettings

        at = join("devices", name)
        self.devices[name] = None
        if not self.name(name, at, "device"):
            return
        body = self.table(raw, at, f'[devices.{name}] with kind and transport')
        if body is None:
            return
        line_model = schema.line_fields()
        modbus_keys = tuple(schema.ModbusFields.model_fields)
        line_keys = tuple(line_model.model_fields)
        common_keys = tuple(schema.DeviceCommon.model_fields)
        common = self.validate(schema.DeviceCommon, {k: v for k, v in body.items() if k in common_keys}, at, hints={
            "kind": 'kind = "seat", "lockout", "sign", "card-counter" or "dice-entry"',
            "transport": 'transport = "rtu" or "tcp" (Modbus, on a bus) or "line" (the line protocol, on its own port)',
        })
        if common is not None:
            self.device_common[name] = common
        transport = body.get("transport")
        rest = {k: v for k, v in body.items() if k not in common_keys}
        if transport in ("rtu", "tcp"):
            bus_keys = set(SerialBusSettings.model_fields) | set(TcpSettings.model_fields) | set(line_keys)
            for k in list(rest):
                if k in bus_keys and k not in modbus_keys:
                    del rest[k]
                    bus = body.get("bus")
                    self.add(join(at, k), "is a setting of the bus, not of a Modbus device",
                             f"set it in [buses.{bus}]" if isinstance(bus, str) else "set it in the [buses.NAME] "
                             "this device is on")
            fields = self.validate(schema.ModbusFields, rest, at, allowed=common_keys + modbus_keys, hints={
                "bus": 'bus = "table-bus": the [buses.table-bus] this device is on',
                "unit": "unit = 1: the device's Modbus unit id",
                "register_map": 'register_map = "../devices/seat-single.toml": what each register means',
            })
        elif transport == "line":
            for k in list(rest):
                if k in modbus_keys:
                    del rest[k]
                    self.add(join(at, k), f"only a Modbus device (transport = \"rtu\" or \"tcp\") has a {k}",
                             'a line-protocol device has its own serial port: port = "/dev/ttyUSB1"')
            fields = self.validate(line_model, decimals_to_float(rest), at, allowed=common_keys + line_keys, hints={
                "port": 'port = "/dev/ttyUSB1": the serial port the device is on'})
        else:
            return  # the transport's problem is already reported by DeviceCommon
        if common is None or fields is None:
            return
        dev = self._device_meaning(name, at, common, fields)
        self.devices[name] = dev

    def _device_meaning(self, name: str, at: str, common: Any, fields: Any) -> DeviceConfig | None:
        ok = True
        kind, transport = common.kind, common.transport
        seats = tuple(common.seats)
        if kind == "seat" and not seats:
            ok = False
            self.add(join(at, "seats"), "is required: a seat device lists the seats it serves",
                     "seats = [3] (or [1, 2, 3] for a device that serves several)")
        if kind != "seat" and seats:
            ok = False
            self.add(join(at, "seats"), f"only a seat device serves seats, not a {kind}", "remove seats")
        roles = tuple(common.roles)
        if kind == "card-counter":
            if not roles:
                ok = False
                self.add(join(at, "roles"), "is required: what the card counter is",
                         'roles = ["shuffler"], ["shoe"] or ["shuffler", "shoe"]')
            for i, role in enumerate(roles):
                if role in roles[:i]:
                    ok = False
                    self.add(join(at, "roles", i), f"{role!r} is listed twice", "list each role once")
            if common.reads_cards and "shoe" not in roles:
                ok = False
                self.add(join(at, "reads_cards"), "only a shoe reads the cards as they are dealt",
                         'add "shoe" to roles, or remove reads_cards')
        else:
            if roles:
                ok = False
                self.add(join(at, "roles"), f"only a card-counter has roles, not a {kind}", "remove roles")
            if common.reads_cards:
                ok = False
                self.add(join(at, "reads_cards"), f"only a card-counter shoe reads cards, not a {kind}",
                         "remove reads_cards")
        if transport == "line":
            line = self._line_settings(at, fields)
            if line is None or not ok:
                return None
            return DeviceConfig(name, kind, transport, seats, roles, common.reads_cards, common.description,
                                line=line)
        # Modbus
        if kind in ("card-counter", "dice-entry"):
            self.add(join(at, "transport"), f"a {kind} speaks the line protocol; Modbus register maps describe "
                     "seats, lock-outs and signs", 'transport = "line", with port = "/dev/ttyUSB1"')
            return None
        unit = fields.unit
        lo, hi = (1, 247) if transport == "rtu" else (0, 255)
        if not lo <= unit <= hi:
            ok = False
            self.add(join(at, "unit"), f"{unit} is not a Modbus {transport.upper()} unit id ({lo}-{hi})",
                     "the unit id set on the device (its Modbus address)")
        map_path = self.usable_path(fields.register_map, join(at, "register_map"))
        rmap = None if map_path is None else self._register_map(map_path, fields.register_map, join(at, "register_map"))
        if rmap is not None:
            map_kind = getattr(rmap.kind, "value", rmap.kind)
            if map_kind != kind:
                ok = False
                self.add(join(at, "kind"), f"{kind!r}, but the register map {fields.register_map} describes a "
                         f"{map_kind} device", "use the register map of this device's model")
            elif kind == "seat" and seats:
                local = list(rmap.seats)
                if len(local) != len(seats):
                    ok = False
                    self.add(join(at, "seats"),
                             f"the register map {fields.register_map} serves {len(local)} seat(s); this device lists "
                             f"{len(seats)}", f"list {len(local)} table seat(s), the first being the table seat of "
                             "the map's first seat")
                else:
                    want = [seats[0] + s - local[0] for s in local]
                    if list(seats) != want:
                        ok = False
                        self.add(join(at, "seats"), "a Modbus seat device serves the table seats that follow its "
                                 "first seat in the order of its register map",
                                 f"seats = {want}")
        else:
            ok = False  # the map's problems are reported once, at the first device that names it
        if not ok or map_path is None:
            return None
        return DeviceConfig(name, kind, transport, seats, roles, common.reads_cards, common.description,
                            bus=fields.bus, unit=unit, register_map_path=map_path.resolve(), register_map=rmap,
                            poll_interval=fields.poll_interval)

    def _line_settings(self, at: str, fields: BaseModel) -> Any:
        from drivers.line import LineSettings

        try:
            return LineSettings(**fields.model_dump())
        except InputError as e:
            self.add(join(at, *e.field.split(".")), e.problem, "see docs/line-protocol.md for the serial settings")
            return None
        except (TypeError, ValueError) as e:
            self.add(at, f"serial settings refused: {e}")
            return None

    def _register_map(self, path: Path, ref: str, at: str) -> Any:
        if path in self._maps:
            return self._maps[path]
        self._maps[path] = None
        st = probe(path)
        if st is None or isinstance(st, FileRefused):
            self.add(at, f"{ref}: no such file" if st is None else f"{show_path(ref)}: {st.reason}",
                     "the path is relative to this configuration file; register maps are kept in config/devices/")
            return None
        from drivers.modbus import RegisterMapError, load_register_map

        try:
            rmap = load_register_map(path)
        except RegisterMapError as e:
            for where, problem in e.errors:
                self.add(at, f"{ref}: {where}: {problem}" if where else f"{ref}: {problem}",
                         "docs/register-maps.md describes the format")
            return None
        except InputError as e:
            self.add(at, f"{ref}: {e.problem}", "docs/register-maps.md describes the format")
            return None
        self._maps[path] = rmap
        return rmap

    def _devices_together(self) -> None:
        """What no device can say alone: buses, units, ports, seats served, the devices a table needs."""
        g, n = self.game, self.seats
        all_valid = all(d is not None for d in self.devices.values())
        devices = {k: d for k, d in self.devices.items() if d is not None}
        used_buses: set[str] = set()
        units: dict[tuple[str, int], str] = {}
        ports: dict[str, str] = {}
        for b in self.buses.values():
            if b is not None and b.transport == "rtu":
                port = b.settings.port  # type: ignore[union-attr]
                where = join("buses", b.name)
                if port in ports:
                    self.add(join(where, "port"), f"{port} is already the port of {ports[port]}",
                             "devices on one RS-485 line share one bus: put them all on that bus")
                ports.setdefault(port, where)
        gateways: dict[tuple[str, int], str] = {}
        for b in self.buses.values():
            if b is not None and b.transport == "tcp":
                s = b.settings
                key = (s.host, s.port)  # type: ignore[union-attr]
                if key in gateways:
                    self.add(join("buses", b.name), f"{s.host}:{s.port} is already {gateways[key]}",  # type: ignore[union-attr]
                             "devices behind one gateway share one bus")
                gateways.setdefault(key, join("buses", b.name))
        for name, d in devices.items():
            at = join("devices", name)
            if d.transport in ("rtu", "tcp"):
                assert d.bus is not None and d.unit is not None
                used_buses.add(d.bus)
                if d.bus not in self.buses:
                    known = ", ".join(b for b in self.buses) or "none is defined"
                    self.add(join(at, "bus"), f"no bus {d.bus!r} is defined",
                             f"define [buses.{d.bus}] with transport = \"{d.transport}\", or use one of: {known}")
                    continue
                bus = self.buses[d.bus]
                if bus is None:
                    continue
                if bus.transport != d.transport:
                    self.add(join(at, "transport"), f"{d.transport!r}, but bus {d.bus!r} is {bus.transport!r}",
                             f'transport = "{bus.transport}"')
                key = (d.bus, d.unit)
                if key in units:
                    self.add(join(at, "unit"), f"unit {d.unit} is already used on bus {d.bus!r} by {units[key]}",
                             "each device on a bus has its own unit id")
                units.setdefault(key, at)
            elif d.line is not None:
                port = d.line.port
                if port in ports:
                    self.add(join(at, "port"), f"{port} is already the port of {ports[port]}",
                             "each line-protocol device is on a serial port of its own")
                ports.setdefault(port, at)
        if all_valid:
            for b in self.buses:
                if b not in used_buses and self.buses[b] is not None:
                    self.add(join("buses", b), "no device is on this bus",
                             f'remove it, or set bus = "{b}" on the devices wired to it')
        if g is None:
            return

        # Seats served: each seat by one seat device at most; at a card table every seat has one. These
        # checks use each device's kind and seats, known even when the rest of the device is wrong.
        commons = self.device_common
        complete = set(commons) == set(self.devices)
        served: dict[int, str] = {}
        for name, c in commons.items():
            if c.kind != "seat":
                continue
            for i, seat in enumerate(c.seats):
                where = join("devices", name, "seats", i)
                if n is not None and seat > n:
                    self.add(where, f"seat {seat} is out of range: the table has seats 1-{n}",
                             f"seats = {n} at the top of the file counts the seats")
                elif seat in served:
                    self.add(where, f"seat {seat} is already served by {served[seat]}",
                             "each seat has one wagering device")
                else:
                    served[seat] = join("devices", name)
        if not complete:
            return  # a device whose kind or seats are unknown may be the one that seems missing
        system = self._system_source()
        if n is not None:
            missing = [s for s in range(1, n + 1) if s not in served]
            if g.dice:
                if served and missing:
                    self.add("devices", f"{_seats_text(missing)} without a seat device, while others have one",
                             "at a dice table either every wager position has a seat device or none has "
                             "(wagers are then entered at the dice-entry terminal)")
            elif missing:
                why = f" ({system}(1): a wagering device at each betting position)" if system else ""
                self.add("devices", f"{_seats_text(missing)} without a seat device{why}",
                         f"add [devices.seat-{missing[0]}] with kind = \"seat\" and seats = [{missing[0]}], or add "
                         "the seat to a device that serves several")
        kinds: dict[str, list[str]] = {}
        for name, c in commons.items():
            kinds.setdefault(c.kind, []).append(name)
        if g.dice:
            for name in kinds.get("card-counter", []):
                self.add(join("devices", name, "kind"), f"{g.title} is a dice game: it has no card counter",
                         "remove the device")
            entry = kinds.get("dice-entry", [])
            if not entry:
                self.add("devices", "no dice-entry device: the controller learns each roll from it",
                         '[devices.dice] with kind = "dice-entry" and transport = "line"')
            for name in entry[1:]:
                self.add(join("devices", name), f"a second dice-entry device (the first is devices.{entry[0]})",
                         "one dice-entry terminal per table")
        else:
            for name in kinds.get("dice-entry", []):
                self.add(join("devices", name, "kind"), f"{g.title} is a card game: it has no dice entry",
                         "remove the device")
            if system and not kinds.get("lockout"):
                self.add("devices", f"no lock-out device ({system}(2): a mechanism, such as a lock-out button, "
                         "that stops wagers being recognized after \"no more bets\")",
                         '[devices.lockout] with kind = "lockout"')
            self._card_devices(commons)
        if self.meter_linked and not kinds.get("sign"):  # the table has a meter
            self.add("devices", "no sign: the players see the progressive meters on a meter sign",
                     '[devices.sign] with kind = "sign"')

    def _card_devices(self, devices: Mapping[str, Any]) -> None:
        cards = self.cards
        if cards is None:
            return
        shufflers = [n for n, d in devices.items() if d.kind == "card-counter" and "shuffler" in d.roles]
        readers = [n for n, d in devices.items() if d.kind == "card-counter" and "shoe" in d.roles and d.reads_cards]
        if cards.source == "shoe" and not readers:
            self.add("cards.source", "is \"shoe\", but no device is a card-reading shoe",
                     'add a [devices.shoe] with kind = "card-counter", roles = ["shoe"] and reads_cards = true, '
                     'or set source = "dealer"')
        if cards.shuffler == "counting" and not shufflers:
            self.add("cards.shuffler", "is \"counting\", but no device is a shuffler: the controller must receive "
                     "the count after each shuffle to know 52 cards are present (§ 667a.5(b))",
                     'add a [devices.shuffler] with kind = "card-counter" and roles = ["shuffler"]')
        if cards.shuffler == "none":
            for name in shufflers:
                self.add(join("devices", name, "roles"), "names a shuffler, but cards.shuffler = \"none\"",
                         'set shuffler = "counting" in [cards] if this shuffler counts the cards')

    def _system_source(self) -> str | None:
        """The section requiring a progressive table game system, if a wager offered needs one."""
        g = self.game
        if g is None or g.dice:
            return None
        offered = [w for w in self.wagers.values() if w is not None]
        if any(w.wager.progressive and w.id != "five-card-hand-bonus" for w in offered):
            return PROGRESSIVE_SYSTEM_SOURCE.get(g.id, "§ 605a.7")
        if any(w.id == "five-card-hand-bonus" for w in offered):
            return FIVE_CARD_HAND_BONUS_SYSTEM_SOURCE.get(g.id, "§ 605a.7")
        return None

    # --- people, metrics, logging, link ---------------------------------------------------------

    def _supervisor_source(self, doc: Mapping[str, Any], source: Path, source_stat: os.stat_result | None) -> None:
        """The supervisors: [[supervisors]] in this file, or the file `supervisors_file` names (kept from the
        socket's group: this file is theirs to read, the credential hashes are not)."""
        if "supervisors_file" not in doc:
            raw = doc.get("supervisors")
            self._supervisors(raw)
            if isinstance(raw, list) and raw and source_stat is not None:
                where = source.resolve()
                if (exposed := readable_by_others(where, source_stat, *HASHES)) is not None:
                    message, hint = exposed
                    self.warnings.add("supervisors", message, f"{hint}; or move the [[supervisors]] entries to a "
                                      "supervisors_file that only the daemon's user can read (docs/operations.md)")
            return
        ref = doc["supervisors_file"]
        at = "supervisors_file"
        if "supervisors" in doc:
            self.add(at, "and [[supervisors]] in this file both list supervisors: one or the other",
                     "keep the supervisors in the supervisors file only (readable by the daemon's user only), and "
                     "remove the [[supervisors]] entries from this file")
            return
        if not isinstance(ref, str) or not ref.strip():
            self.add(at, f"must be the path of a file, not {show(ref)}",
                     'supervisors_file = "supervisors.toml": [[supervisors]] entries, in a file only the daemon reads')
            return
        got = self.sub_toml(ref, at, "the supervisors file")
        if got is None:
            return
        path, read, sub_doc = got
        # The file's problems at supervisors_file, the path inside it in the message (as a register map's).
        outer, self.problems = self.problems, Problems()
        try:
            for key in sub_doc:
                if key != "supervisors":
                    self.add(key, "unknown key", "a supervisors file holds [[supervisors]] entries only")
            self._supervisors(sub_doc.get("supervisors"))
        finally:
            inner, self.problems = self.problems, outer
        for p in inner.items:
            self.add(at, f"{show_path(ref)}: {p.path}: {p.message}", p.hint)
        listed = sub_doc.get("supervisors")
        if isinstance(listed, list) and listed and (exposed := readable_by_others(path, read.stat, *HASHES)):
            self.warnings.add(at, *exposed)

    def _supervisors(self, raw: object) -> None:
        if raw is None:
            if self.meter_linked:
                self.add("supervisors", "is required: a floorperson or above validates each progressive payout "
                         f"({SUPERVISOR_SOURCE})",
                         '[[supervisors]] with name = "..." and credential = the line `progressivectl '
                         'hash-credential` prints')
            return
        if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
            self.add("supervisors", f"must be an array of tables ([[supervisors]]), not {show(raw)}",
                     '[[supervisors]] name = "..." credential = "scrypt$..."')
            return
        if not raw and self.meter_linked:
            self.add("supervisors", f"no supervisor: a floorperson or above validates each progressive payout "
                     f"({SUPERVISOR_SOURCE})", "add a [[supervisors]] entry")
        names: dict[str, str] = {}
        for i, entry in enumerate(raw):
            at = join("supervisors", i)
            cred_raw = entry.get("credential")
            # The credential is checked by parse_credential alone: pydantic would quote a wrong value in
            # its message, and the value may be a password.
            shape = {k: ("-" if k == "credential" else v) for k, v in entry.items()}
            m = self.validate(schema.SupervisorModel, shape, at, hints={
                "name": 'name = "J. Smith"',
                "credential": "credential = the line `progressivectl hash-credential` prints"})
            if m is None:
                continue
            if not m.name.strip() or not m.name.isprintable() or m.name != m.name.strip():
                self.add(join(at, "name"), "must be printable, without leading or trailing blanks")
                continue
            if m.name in names:
                self.add(join(at, "name"), f"{m.name!r} is already {names[m.name]}", "list each supervisor once")
                continue
            names[m.name] = at
            try:
                cred = parse_credential(cred_raw)
            except CredentialError as e:
                self.add(join(at, "credential"), e.message, e.hint)
                continue
            self.supervisors.append(Supervisor(m.name, cred))

    def _metrics(self, raw: object) -> None:
        if raw is None:
            return
        body = self.table(raw, "metrics", '[metrics] listen = "127.0.0.1:9464"')
        m = None if body is None else self.validate(schema.MetricsModel, body, "metrics")
        if m is None:
            return
        hp = _host_port(m.listen)
        if hp is None:
            self.add("metrics.listen", f"{m.listen!r} is not host:port",
                     'listen = "127.0.0.1:9464", "0.0.0.0:9464" or "[::1]:9464"')
            return
        self.metrics = MetricsConfig(*hp)

    def _logging(self, raw: object) -> None:
        if raw is None:
            return
        body = self.table(raw, "logging", '[logging] format = "json"')
        m = None if body is None else self.validate(schema.LoggingModel, body, "logging")
        if m is not None:
            self.logging = LoggingConfig(m.format, m.level)

    def _mqtt(self, raw: object, table: str | None) -> None:
        if raw is None:
            for mid, linked in self.meter_linked.items():
                if linked:
                    self.add(join("meters", mid, "linked"), "a linked meter needs the [mqtt] section: its link "
                             "authority is reached over MQTT",
                             '[mqtt] with host = "...", or make the meter the table\'s own (reset, rate, ...)')
            return
        body = self.table(raw, "mqtt", '[mqtt] host = "broker.example"')
        m = None if body is None else self.validate(schema.MqttModel, body, "mqtt", hints={
            "host": 'host = "link.casino.example": the MQTT broker of the link authority'})
        if m is None:
            return
        ok = True
        if not _valid_host(m.host):
            ok = False
            self.add("mqtt.host", f"{m.host!r} is not a host name or IP address")
        if not m.tls:
            if not _is_loopback(m.host):
                ok = False
                self.add("mqtt.tls", "is false, but the broker is not on this machine: the link carries the "
                         "meters' money and must be encrypted", "tls = true (the default)")
            for k in ("ca_file", "cert_file", "key_file"):
                if getattr(m, k) is not None:
                    ok = False
                    self.add(join("mqtt", k), "is a TLS setting, but tls = false", f"remove {k} or set tls = true")
        if (m.cert_file is None) != (m.key_file is None):
            ok = False
            have, lack = ("cert_file", "key_file") if m.key_file is None else ("key_file", "cert_file")
            self.add(join("mqtt", lack), f"is required with {have}: a client certificate comes with its key",
                     "set both cert_file and key_file, or neither")
        if m.password_file is not None and m.username is None:
            ok = False
            self.add("mqtt.username", "is required with password_file", 'username = "table-cs-07"')
        files: dict[str, Path | None] = {}
        for k in ("ca_file", "cert_file", "key_file", "password_file"):
            text = getattr(m, k)
            if text is None:
                files[k] = None
                continue
            at = join("mqtt", k)
            p = files[k] = self.usable_path(text, at)
            if p is None:
                ok = False
                continue
            st = probe(p)
            where = "the path is absolute or relative to this configuration file"
            if st is None or isinstance(st, FileRefused):
                ok = False
                self.add(at, f"{text}: no such file" if st is None else f"{text}: {st.reason}", where)
                continue
            if (kind := kind_of(st.st_mode)) is not None:
                ok = False
                self.add(at, f"{text}: it is {kind}, not a regular file", where)
                continue
            limit = MAX_SECRET_BYTES if k == "password_file" else MAX_CONFIG_BYTES
            if st.st_size > limit:
                ok = False
                self.add(at, f"{text}: it is {st.st_size:,} bytes, more than the {limit_text(limit)} such a file may "
                         "have", where)
                continue
            if k in ("key_file", "password_file"):
                what = "the client certificate's private key" if k == "key_file" else "the MQTT password"
                if (exposed := readable_by_others(p, st, what)) is not None:
                    ok = False  # a secret in clear, unlike a hash: refused, not only warned about
                    self.add(at, *exposed)
        client_id = m.client_id or table or ""
        if m.client_id is not None and not _CLIENT_ID.fullmatch(m.client_id):
            ok = False
            self.add("mqtt.client_id", f"{m.client_id!r} is not a client id", "letters, digits, '.', '_' and '-'")
        if not _TOPIC.fullmatch(m.topic_prefix):
            ok = False
            self.add("mqtt.topic_prefix", f"{m.topic_prefix!r} is not a topic prefix",
                     "words of letters, digits, '_' and '-' joined by '/', no wildcards, no leading or trailing '/'")
        if not ok or not client_id:
            return
        port = m.port if m.port is not None else (8883 if m.tls else 1883)
        self.mqtt = MqttConfig(
            host=m.host, port=port, tls=m.tls, client_id=client_id, topic_prefix=m.topic_prefix,
            link_timeout=float(m.link_timeout), protocol=m.protocol, ca_file=files["ca_file"],
            cert_file=files["cert_file"], key_file=files["key_file"], username=m.username,
            password_file=files["password_file"],
        )


def readable_by_others(path: Path, st: os.stat_result, holds: str, why: str = "") -> tuple[str, str] | None:
    """(message, hint) when the file at `path`, which holds `holds`, has any permission for its group or
    others; None when only its owner has (mode 0600 or 0400)."""
    mode = stat.S_IMODE(st.st_mode)
    if not mode & (stat.S_IRWXG | stat.S_IRWXO):
        return None
    readers = [who for bit, who in ((stat.S_IRGRP, "its group"), (stat.S_IROTH, "others")) if mode & bit]
    writers = [who for bit, who in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "others")) if mode & bit]
    how = [f"can be {verb} by {' and '.join(whom)}" for verb, whom in (("read", readers), ("changed", writers)) if whom]
    name = show_path(path)
    return (f"{name} holds {holds} and {' and '.join(how) or 'has permissions for its group or others'} "
            f"(mode {mode:04o})" + (f": {why}" if why else ""), f"chmod 0600 {name}; chown {DAEMON_USER} {name}")


def _inside(path: Path, directory: Path) -> bool:
    """Whether `path` is `directory` or under it (symbolic links resolved where they exist)."""
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError):
        return path.is_relative_to(directory)


def _seats_text(seats: list[int]) -> str:
    if len(seats) == 1:
        return f"seat {seats[0]} is"
    return "seats " + ", ".join(str(s) for s in seats[:-1]) + f" and {seats[-1]} are"


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.fullmatch(host))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_port(text: str) -> tuple[str, int] | None:
    """``host:port`` or ``[v6]:port``."""
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
        if not sep:
            return None
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, sep, port = text.rpartition(":")
        if not sep or not host or ":" in host or not _valid_host(host):
            return None
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return None
    return host, int(port)

