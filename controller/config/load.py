"""Read a table's configuration file and check all of it, collecting every problem.

    cfg = load_config("config/tables/caribbean-stud.toml")   # TableConfig, or ConfigError(problems)
    problems = check_config(path)                             # [] when the file is sound

The file is checked here section by section, in the order their dependencies need: its top-level values
here, each section by its own module (check_meters.py, check_wagers.py, ...; the state they share in
check.py). The checks reuse what the rest of the controller already knows: `MeterParams` for the meter's
parameters (the $10,000 floor, the rate, reserve, ceiling, wager sizes), `check_paytable_for` for the
selection rules of a paytable, the drivers' own settings classes for buses and serial lines, and their
register-map loader. The format and every check are documented in docs/configuration.md.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from controller.config import schema
from controller.config.check import DAEMON_USER
from controller.config.check_anchor import AnchorChecks
from controller.config.check_cards import CardChecks
from controller.config.check_devices import DeviceChecks
from controller.config.check_meters import MeterChecks
from controller.config.check_monitoring import MonitoringChecks
from controller.config.check_mqtt import MqttChecks
from controller.config.check_report import ReportChecks
from controller.config.check_supervisors import SupervisorChecks
from controller.config.check_wagers import WagerChecks
from controller.config.check_wiring import WiringChecks
from controller.config.fields import did_you_mean, show
from controller.config.model import TableConfig
from controller.games import GAMES
from controller.tomlfile.files import FileRefused, probe, show_path
from controller.tomlfile.problems import ConfigError, Problem, join
from controller.tomlfile.toml import read_toml

__all__ = ["DAEMON_USER", "check_config", "in_file_order", "load_config", "read_toml"]

TOP_KEYS = (
    "table", "game", "seats", "description", "state_dir", "allow_example_paytables",
    "wagers", "meters", "cards", "buses", "devices", "supervisors", "supervisors_file", "metrics", "logging",
    "mqtt", "anchor", "report",
)
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
TABLE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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


class _Checker(MeterChecks, WagerChecks, CardChecks, DeviceChecks, WiringChecks, SupervisorChecks, MonitoringChecks,
               MqttChecks, AnchorChecks, ReportChecks):
    """A table's file: its top-level values, then each section by its own checks."""

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
        self._anchor_off_box(any(self.meter_linked.values()))
        self._report(doc.get("report"))

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
            report=self.report,
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
        if not TABLE_ID.fullmatch(value) or len(value) > 32:
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
