"""What every check of a configuration file shares: the problems and warnings found, what is known so far
of each section (the checks of one section read what another found), and the helpers they all use.

A section's checks are in its own module (check_meters.py, check_wagers.py, check_cards.py, check_devices.py,
check_supervisors.py, check_monitoring.py, check_mqtt.py, check_anchor.py), each a class on `Checker`; the
table's checker (load.py) and the link authority's (authority.py) are made of them.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from controller.config.fields import problems_from, show, unknown_key
from controller.config.model import (
    AnchorConfig,
    BusConfig,
    CardsConfig,
    DeviceConfig,
    LoggingConfig,
    MeterConfig,
    MetricsConfig,
    MqttConfig,
    ReportConfig,
    Supervisor,
    WagerConfig,
)
from controller.games import Game
from controller.tomlfile.files import MAX_SECRET_BYTES, FileRefused, kind_of, limit_text, probe, read_file, show_path
from controller.tomlfile.problems import Problems, join
from controller.tomlfile.toml import InvalidTable, TomlError, parse_toml, validate_table

DAEMON_USER = "progressive"  # the user the daemon runs as (systemd/progressived.service)
MAX_PATH_CHARS = 1024  # a path in the configuration: longer is a mistake (the system's own limit is 4096)
_NAME = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*")
_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")


class Checker:
    """The state of one file's checks, and the helpers every section's checks use."""

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
        self.report = ReportConfig()
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
            value = validate_table(model, data, at=path)
            return value if stand_ins is None else (value, frozenset())
        except InvalidTable as e:
            self.problems.extend(problems_from(e.errors, allowed=allowed or known, required_hints=hints))
            if stand_ins is None:
                return None
            bad = frozenset(str(err.keys[0]) for err in e.errors if err.keys)
            if not bad <= set(stand_ins):
                return None
            try:
                return validate_table(model, {**data, **{k: stand_ins[k] for k in bad}}, at=path), bad
            except InvalidTable:
                return None

    def table(self, value: object, path: str, example: str) -> dict[str, Any] | None:
        if isinstance(value, dict):
            return value
        self.add(path, f"must be a table, not {show(value)}", f"write it as {example}")
        return None

    def entry(self, section: str, name: str, raw: object, what: str,
              example: str) -> tuple[str, dict[str, Any] | None]:
        """The TOML path of [section.name] (`what`: "bus") and its table; None for the table after a problem
        with its name or its value."""
        at = join(section, name)
        if not self.name(name, at, what):
            return at, None
        return at, self.table(raw, at, example)

    def section(self, raw: object, name: str, example: str, model: type[BaseModel],
                hints: Mapping[str, str] | None = None) -> Any:
        """The section [name], whose value is `raw`, validated by `model`; None when it is left out, or after
        its problems (`example` shows how to write it as a table)."""
        if raw is None:
            return None
        body = self.table(raw, name, example)
        return None if body is None else self.validate(model, body, name, hints=hints)

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
            sub_doc: Any = parse_toml(read.text(ref))
        except FileRefused as e:
            self.add(at, f"{show_path(ref)}: {e.reason}", "save the file as UTF-8")
            return None
        except TomlError as e:  # the file's own path (its line) inside the message, as a register map's
            p = e.problem
            self.add(at, ": ".join(part for part in (show_path(ref), p.path, p.message) if part), p.hint)
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


def valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.fullmatch(host))


def host_port(text: str) -> tuple[str, int] | None:
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
        if not sep or not host or ":" in host or not valid_host(host):
            return None
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return None
    return host, int(port)


__all__ = ["DAEMON_USER", "MAX_PATH_CHARS", "Checker", "host_port", "readable_by_others", "valid_host"]
