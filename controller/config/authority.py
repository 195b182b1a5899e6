"""Read a link authority's configuration file and check all of it, collecting every problem.

    cfg = load_authority_config("config/link/authority.toml")   # AuthorityConfig, or ConfigError(problems)
    problems = check_authority_config(path)                      # [] when the file is sound

A link authority (`progressived --role link`) owns linked progressive meters (§ 605a.8) that many tables
share over MQTT. Its file is checked exactly as a table's: the same checks of the meters ($10,000 floor,
rate, reserve, ceiling, wager sizes), of [mqtt], [metrics] and [logging], of the supervisors who may log in
to its console ([[supervisors]] or supervisors_file, with the same warning for hashes others can read), each
problem with its TOML path and a hint, carried by the same ConfigError. The format is in docs/configuration.md
("The link authority").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from os import PathLike, stat_result
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.config import schema
from controller.config.check import readable_by_others
from controller.config.check_meters import METER_ID
from controller.config.fields import did_you_mean, show, unknown_key
from controller.config.load import TABLE_ID, _Checker, in_file_order
from controller.config.model import (
    AnchorConfig,
    LoggingConfig,
    MetricsConfig,
    MqttConfig,
    ReportConfig,
    StandaloneMeter,
    Supervisor,
)
from controller.config.names import DistinctNames, normal, refusal
from controller.linkproto import signing
from controller.linkproto.approval import decode_key
from controller.tomlfile.files import FileRefused, read_file, show_path
from controller.tomlfile.problems import ConfigError, Problem, join
from controller.tomlfile.toml import read_toml

AUTHORITY_TOP_KEYS = (
    "authority", "description", "state_dir", "journal", "tables", "heartbeat", "meter_interval", "approvers_file", "signing_key_file", "meters",
    "metrics",
    "logging", "mqtt", "anchor", "report", "supervisors", "supervisors_file",
)
AUTHORITY_REQUIRED_HINTS = {
    "authority": 'authority = "link-1": the link authority\'s id, as its heartbeats name it',
    "state_dir": 'state_dir = "/var/lib/progressived-link": where the journal of the linked meters is kept',
    "tables": 'tables = ["CS-07", "FP-01"]: the ids of the tables allowed to use the link',
    "meters": "[meters.NAME] with reset, rate and wager_sizes for each linked meter the authority owns",
    "mqtt": '[mqtt] with host = "...": the MQTT broker through which the tables reach the authority',
    "approvers_file": 'approvers_file = "approvers.toml": the supervisors whose approval of a payment from a '
                      "linked meter the authority verifies, each with the key `progressivectl approval-key NAME` "
                      "prints (docs/security.md)",
    "signing_key_file": 'signing_key_file = "link-signing.pem": the key the authority signs every message with; '
                        "`progressivectl link-key FILE` makes it and prints the public key for the tables' "
                        "authority_keys (docs/operations.md)",
}
APPROVERS = "the approval keys of the supervisors"
MAX_APPROVERS = 1_000
MAX_KEY_FILE = 4096  # bytes: a PEM Ed25519 key is 119
DEFAULT_HEARTBEAT = 1.0  # seconds
HEARTBEAT_MIN, HEARTBEAT_MAX = Decimal("0.1"), Decimal(60)
# Seconds between two values of one linked meter at most: each value goes to every table (docs/link-at-scale.md).
DEFAULT_METER_INTERVAL = 0.05
MAX_TABLES = 10_000  # tables allowed to use one link (docs/link-at-scale.md: thousands at most)
JOURNAL_HINT = ('journal = "postgresql://progressive@db1,db2/progressive?target_session_attrs=read-write" (the '
                "password in libpq's passfile), or leave it out for the journal in a file under state_dir")

_ID_HINT = "1 to 32 letters, digits, '.', '_' or '-', starting with a letter or digit"
_METER_KEYS = tuple(schema.StandaloneMeterModel.model_fields)
_TABLE_ONLY_MQTT = {  # [mqtt] keys of a table that mean nothing to the authority
    "link_timeout": ("is a table's setting: the time a table waits for the authority",
                     "remove it; heartbeat sets how often the authority is heard"),
    "authority_keys": ("is a table's setting: the keys it checks the authority's messages with",
                       "remove it; the authority signs with signing_key_file"),
}


@dataclass(frozen=True)
class AuthorityConfig:
    """A link authority's configuration once validated: the linked meters it owns (with the parameters of
    a table's own meter), the tables allowed to use them, and its broker."""

    source: Path  # the configuration file
    authority: str
    state_dir: Path
    tables: tuple[str, ...]  # the table ids allowed to use the link, as listed
    meters: dict[str, StandaloneMeter]
    mqtt: MqttConfig
    heartbeat: float = DEFAULT_HEARTBEAT  # seconds between heartbeats
    meter_interval: float = DEFAULT_METER_INTERVAL  # seconds between two published values of a meter, at least
    table_timeout: float | None = None  # reserved: not read from the file yet
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    description: str = ""
    warnings: tuple[Problem, ...] = ()  # as a table's: check-config prints them, the daemon logs them
    # Who may approve a payment from a linked meter: supervisor's name -> approval key (controller.linkproto.approval).
    # Empty: no payment is approved (every one is refused).
    approvers: Mapping[str, bytes] = field(default_factory=dict)
    # What every message the authority publishes is signed with (controller.linkproto.signing). Required in a file.
    signing_key: Ed25519PrivateKey | None = None
    anchor: AnchorConfig = field(default_factory=AnchorConfig)
    # The gaming day of the linked meters' plots (`meter_series`); its `dir` is not taken: no report is written.
    report: ReportConfig = field(default_factory=ReportConfig)
    # Who may log in to the authority's console (its socket's `authenticate`), as at a table; none: nobody can.
    supervisors: tuple[Supervisor, ...] = ()
    # The journal on PostgreSQL (a libpq URL, controller.ledger.pgjournal); None: in SQLite under state_dir.
    journal: str | None = None

    def summary(self) -> dict[str, Any]:
        """What the configuration sets up, for people and scripts (``check-config``)."""
        from controller.meter.params import format_rate
        from controller.money import format_cents

        meters: dict[str, Any] = {}
        for m in self.meters.values():
            p = m.params
            meters[m.id] = {
                "reset": format_cents(p.reset_cents), "rate": format_rate(p.rate),
                "reserve_rate": format_rate(p.reserve_rate),
                "ceiling": None if p.ceiling_cents is None else format_cents(p.ceiling_cents),
                "wager_sizes": [format_cents(c) for c in p.wager_sizes],
            }
        q = self.mqtt
        return {
            "authority": self.authority,
            "tables": list(self.tables),
            "meters": meters,
            "heartbeat": self.heartbeat,
            "meter_interval": self.meter_interval,
            "supervisors": len(self.supervisors),
            "mqtt": {"host": q.host, "port": q.port, "tls": q.tls, "client_id": q.client_id,
                     "username": q.username, "topic_prefix": q.topic_prefix, "protocol": q.protocol},
        }


def load_authority_config(path: str | PathLike[str]) -> AuthorityConfig:
    """The link authority's configuration in `path`, checked whole. Raises ConfigError carrying every
    problem."""
    cfg, problems, warnings = _run(path)
    if problems or cfg is None:
        raise ConfigError(str(path), problems or [Problem("", "could not be read")], warnings)
    return cfg


def check_authority_config(path: str | PathLike[str]) -> list[Problem]:
    """Every problem of the link authority's configuration in `path`; an empty list when it is sound."""
    return _run(path)[1]


def is_authority_config(path: str | PathLike[str]) -> bool:
    """Whether `path` reads as a link authority's file (a top-level `authority` key and no `table`) rather
    than a table's. False when it cannot be read or parsed: the table's checks then say why."""
    doc = read_toml(path, "")[0]  # bounded, never blocking: a FIFO or /dev/zero is refused, not read
    return doc is not None and "authority" in doc and "table" not in doc


def _run(path: str | PathLike[str]) -> tuple[AuthorityConfig | None, list[Problem], list[Problem]]:
    p = Path(path)
    doc, problem, st = read_toml(p, "the link authority's TOML configuration file")
    if doc is None:
        return None, [problem or Problem("", "could not be read")], []
    checker = _AuthorityChecker(p.resolve().parent)
    cfg = checker.run(doc, p, st)
    # in the order of the file's sections
    return cfg, in_file_order(doc, checker.problems.items), in_file_order(doc, checker.warnings.items)


class _AuthorityChecker(_Checker):
    """The table's checker, with the authority's file as its whole: its meters are checked by the table's
    `_meter`, its [mqtt], [metrics] and [logging] by the table's own checks."""

    def run(self, doc: dict[str, Any], source: Path,  # type: ignore[override]
            source_stat: stat_result | None = None) -> AuthorityConfig | None:
        for key in doc:
            if key not in AUTHORITY_TOP_KEYS:
                self.add(join("", key), "unknown key", did_you_mean(key, AUTHORITY_TOP_KEYS))
        for key, hint in AUTHORITY_REQUIRED_HINTS.items():
            if key not in doc:
                self.add(key, "is required", hint)
        authority = self._authority_id(doc.get("authority"))
        description = self._text(doc, "description")
        state_dir = self._state_dir(doc.get("state_dir"))
        journal = self._journal(doc.get("journal"))
        tables = self._tables(doc.get("tables"), authority)
        heartbeat = self._heartbeat(doc.get("heartbeat"))
        meter_interval = self._meter_interval(doc.get("meter_interval"), heartbeat)

        if "meters" in doc and (meters := self.table(doc["meters"], "meters", "[meters.main]")) is not None:
            if not meters:
                self.add("meters", "no meter is defined: the authority owns at least one linked meter",
                         AUTHORITY_REQUIRED_HINTS["meters"])
            for mid, raw in meters.items():
                self._authority_meter(mid, raw)
        self._metrics(doc.get("metrics"))
        self._logging(doc.get("logging"))
        if "mqtt" in doc:
            self._authority_mqtt(doc["mqtt"], authority, tables)
        approvers = self._approvers(doc["approvers_file"]) if "approvers_file" in doc else {}
        signing_key = self._signing_key(doc["signing_key_file"]) if "signing_key_file" in doc else None
        self._supervisor_source(doc, source, source_stat)  # the table's own checks, warnings included
        self._anchor(doc.get("anchor"), state_dir)
        self._anchor_off_box(False, authority=True)
        self._report(doc.get("report"))
        if isinstance(doc.get("report"), dict) and "dir" in doc["report"]:
            self.add("report.dir", "the link authority writes no gaming day report (its plots read the journal)",
                     'leave dir out: [report] takes day_starts and time_zone here')

        if self.problems or authority is None or state_dir is None or self.mqtt is None:
            return None
        return AuthorityConfig(
            source=source.resolve(),
            authority=authority,
            state_dir=state_dir,
            tables=tables,
            meters={k: v for k, v in self.meters.items() if isinstance(v, StandaloneMeter)},
            mqtt=self.mqtt,
            heartbeat=heartbeat,
            meter_interval=meter_interval,
            metrics=self.metrics,
            logging=self.logging,
            description=description,
            approvers=approvers,
            signing_key=signing_key,
            anchor=self.anchor,
            report=self.report,
            supervisors=tuple(self.supervisors),
            warnings=tuple(self.warnings.items),
            journal=journal,
        )

    def _supervisors_required(self) -> bool:
        return False  # they only log in to the console: approvals are verified by approvers_file

    # --- top-level values --------------------------------------------------------------------------

    def _authority_id(self, value: object) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.add("authority", f"must be a string, not {show(value)}", 'authority = "link-1"')
            return None
        if not TABLE_ID.fullmatch(value) or len(value) > 32:
            self.add("authority", f"{value!r} is not an authority id", _ID_HINT)
            return None
        return value

    def _journal(self, value: object) -> str | None:
        """journal: a libpq URL of the PostgreSQL database that holds the journal, without a password; the
        authority finds the primary after a failover only with target_session_attrs=read-write (a warning)."""
        if value is None:
            return None
        if not isinstance(value, str) or not value.startswith(("postgresql://", "postgres://")):
            self.add("journal", f"must be a PostgreSQL URL (postgresql://...) in quotes, not {show(value)}", JOURNAL_HINT)
            return None
        from controller.ledger.pgjournal import check_url  # psycopg's own reading of the URL

        try:
            check_url(value)
        except ValueError as e:
            self.add("journal", str(e), JOURNAL_HINT)
            return None
        if "target_session_attrs=read-write" not in value and "target_session_attrs=primary" not in value:
            self.warnings.add("journal", "has no target_session_attrs=read-write: after a failover the authority "
                              "may reach a standby, whose refusal to write stops it", JOURNAL_HINT)
        return value

    def _tables(self, value: object, authority: str | None) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            self.add("tables", f"must be an array of table ids, not {show(value)}", AUTHORITY_REQUIRED_HINTS["tables"])
            return ()
        if not value:
            self.add("tables", "no table is allowed to use the link", AUTHORITY_REQUIRED_HINTS["tables"])
            return ()
        if len(value) > MAX_TABLES:
            self.add("tables", f"{len(value):,} tables, more than the {MAX_TABLES:,} one link authority may serve",
                     "split the tables between link authorities")
            return ()
        seen: dict[str, str] = {}
        for i, t in enumerate(value):
            at = join("tables", i)
            if not isinstance(t, str):
                self.add(at, f"must be a table id in quotes, not {show(t)}", AUTHORITY_REQUIRED_HINTS["tables"])
            elif not TABLE_ID.fullmatch(t) or len(t) > 32:
                self.add(at, f"{t!r} is not a table id", _ID_HINT)
            elif t in seen:
                self.add(at, f"{t!r} is already listed ({seen[t]})", "list each table once")
            elif t == authority:
                self.add(at, f"{t!r} is the authority's own id", "the authority and each table have ids of their own")
            else:
                seen[t] = at
        return tuple(seen)

    def _heartbeat(self, value: object) -> float:
        if value is None:
            return DEFAULT_HEARTBEAT
        hint = f"heartbeat = {DEFAULT_HEARTBEAT} (the default): seconds between the authority's heartbeats"
        if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or (
                isinstance(value, Decimal) and not value.is_finite()):
            self.add("heartbeat", f"must be a number of seconds, not {show(value)}",
                     "write it without quotes" if isinstance(value, str) else hint)
            return DEFAULT_HEARTBEAT
        if not HEARTBEAT_MIN <= value <= HEARTBEAT_MAX:
            self.add("heartbeat", f"must be from {HEARTBEAT_MIN} to {HEARTBEAT_MAX} seconds, not {value}", hint)
            return DEFAULT_HEARTBEAT
        return float(value)

    def _meter_interval(self, value: object, heartbeat: float) -> float:
        """meter_interval: at most one value of each linked meter per this many seconds; the heartbeat carries every
        meter's amount anyway, so a longer one would only hold the signs back."""
        if value is None:
            return DEFAULT_METER_INTERVAL
        hint = (f"meter_interval = {DEFAULT_METER_INTERVAL} (the default), or 0.25 on hundreds of tables: seconds "
                "between two values of a linked meter")
        if isinstance(value, bool) or not isinstance(value, (int, Decimal)) or (
                isinstance(value, Decimal) and not value.is_finite()):
            self.add("meter_interval", f"must be a number of seconds, not {show(value)}",
                     "write it without quotes" if isinstance(value, str) else hint)
            return DEFAULT_METER_INTERVAL
        if not value > 0 or float(value) > heartbeat:
            self.add("meter_interval", f"must be more than 0 and at most the heartbeat ({heartbeat:g} s), not {value}",
                     hint)
            return DEFAULT_METER_INTERVAL
        return float(value)

    def _signing_key(self, ref: object) -> Ed25519PrivateKey | None:
        """signing_key_file: the authority's Ed25519 key in PEM, readable by the daemon's user only (whoever reads
        it can speak as the authority to every table)."""
        at = "signing_key_file"
        path = self.secret_file(ref, at, "the link authority's signing key", limit=MAX_KEY_FILE)
        if path is None:
            return None
        try:
            data = read_file(path, limit=MAX_KEY_FILE).data
        except FileRefused as e:
            self.add(at, f"{show_path(str(ref))}: cannot read it: {e.reason}")
            return None
        try:
            return signing.load_private_pem(data)
        except ValueError as e:
            self.add(at, f"{show_path(str(ref))}: {e}", AUTHORITY_REQUIRED_HINTS[at])
            return None

    def _approvers(self, ref: object) -> dict[str, bytes]:
        """approvers_file: [[approvers]] entries (name, approval_key), in a file only the daemon's user reads
        (whoever reads an approval key can approve payments in that supervisor's name)."""
        at = "approvers_file"
        if not isinstance(ref, str) or not ref.strip():
            self.add(at, f"must be the path of a file, not {show(ref)}", AUTHORITY_REQUIRED_HINTS[at])
            return {}
        got = self.sub_toml(ref, at, "the approvers file")
        if got is None:
            return {}
        path, read, sub_doc = got
        if (exposed := readable_by_others(path, read.stat, APPROVERS)) is not None:
            self.add(at, *exposed)  # keys in clear: refused, as a password file
            return {}
        found: dict[str, bytes] = {}
        names = DistinctNames()
        inner: list[tuple[str, str, str]] = []
        for key in sub_doc:
            if key != "approvers":
                inner.append((key, "unknown key", "an approvers file holds [[approvers]] entries only"))
        raw = sub_doc.get("approvers")
        example = 'the lines `progressivectl approval-key NAME` prints: [[approvers]] name = "..." approval_key = "..."'
        if not isinstance(raw, list) or not raw or not all(isinstance(x, dict) for x in raw):
            inner.append(("approvers", "must list at least one approver ([[approvers]] entries)", example))
            raw = []
        elif len(raw) > MAX_APPROVERS:
            inner.append(("approvers", f"{len(raw):,} approvers, more than the {MAX_APPROVERS:,} allowed", ""))
            raw = []
        for i, entry in enumerate(raw):
            where = join("approvers", i)
            for k in entry:
                if k not in ("name", "approval_key"):
                    inner.append((join(where, k), "unknown key", example))
            name = entry.get("name")
            if not isinstance(name, str):
                inner.append((join(where, "name"), f"must be a supervisor's name as the tables list it, not "
                              f"{show(name)}", example))
                continue
            name = normal(name)
            if (why := refusal(name) or names.clash(name, where)) is not None:
                inner.append((join(where, "name"), why, "list each approver once, as the tables list them"))
                continue
            try:  # the message never repeats the key
                found[name] = decode_key(entry.get("approval_key"))
            except ValueError as e:
                inner.append((join(where, "approval_key"), str(e), example))
        for path_in, message, hint in inner:
            self.add(at, f"{show_path(ref)}: {path_in}: {message}", hint)
        return found if not inner else {}

    # --- meters ------------------------------------------------------------------------------------

    def _authority_meter(self, mid: str, raw: object) -> None:
        """A linked meter the authority owns: the keys of a table's own meter and the same checks.
        `linked` is refused: it is how a table names a meter of an authority."""
        at = join("meters", mid)
        if not METER_ID.fullmatch(mid) or len(mid) > 64:
            self._meter(mid, raw)  # reports the id
            return
        if not isinstance(raw, dict):
            self.meters[mid] = None
            self.table(raw, at, f"[meters.{mid}] with reset, rate and wager_sizes")
            return
        body: dict[str, Any] = {}
        for k, v in raw.items():
            if k == "linked":
                self.add(join(at, k), "an authority owns its meters: linked is how a table names a meter of "
                         "an authority", f'remove linked and give the meter\'s reset, rate and wager_sizes; a table '
                         f'uses it with linked = "{mid}"')
            elif k not in _METER_KEYS:
                self.problems.items.append(unknown_key(join(at, k), k, _METER_KEYS))
            else:
                body[k] = v
        self._meter(mid, body)
        if "linked" in raw:
            self.meters[mid] = None

    # --- the broker ----------------------------------------------------------------------------------

    def _authority_mqtt(self, raw: object, authority: str | None, tables: tuple[str, ...]) -> None:
        body = raw
        if isinstance(raw, dict):
            body = dict(raw)
            for k, (message, hint) in _TABLE_ONLY_MQTT.items():
                if k in body:
                    del body[k]
                    self.add(join("mqtt", k), message, hint)
        start = len(self.problems)
        self._mqtt(body, authority)
        for i in range(start, len(self.problems)):  # the table's example, made the authority's
            p = self.problems.items[i]
            if p.path == "mqtt.username":
                self.problems.items[i] = Problem(p.path, p.message, 'username = "authority"')
        if self.mqtt is not None and self.mqtt.client_id in tables:
            explicit = isinstance(raw, dict) and "client_id" in raw
            self.add("mqtt.client_id" if explicit else "authority",
                     f"{self.mqtt.client_id!r} is also the client id of a table on the link: the broker keeps one "
                     "connection per client id, and the two would disconnect each other",
                     "give the authority a client id of its own" + ("" if explicit else " (mqtt.client_id)"))
            self.mqtt = None


__all__ = ["APPROVERS", "AUTHORITY_REQUIRED_HINTS", "AUTHORITY_TOP_KEYS", "DEFAULT_HEARTBEAT",
           "DEFAULT_METER_INTERVAL", "HEARTBEAT_MAX",
           "HEARTBEAT_MIN", "JOURNAL_HINT", "MAX_APPROVERS", "MAX_KEY_FILE", "MAX_TABLES", "AuthorityConfig", "check_authority_config",
           "is_authority_config", "load_authority_config"]
