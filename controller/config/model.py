"""A table's configuration once validated: plain frozen values the daemon starts from.

`controller.config.load.load_config` builds a `TableConfig` only from a file without a single problem.
The values are resolved: paytables loaded, meter parameters built (`MeterParams`), paths absolute,
register maps read, driver settings built (the drivers' own `SerialBusSettings`, `TcpSettings` and
`LineSettings`). The TOML format is in docs/configuration.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import time, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from controller.config.credentials import Credential
from controller.games import Game, Wager
from controller.meter.params import MeterParams
from controller.paytables.model import Paytable
from controller.tomlfile.problems import Problem

if TYPE_CHECKING:  # the drivers are imported when a configuration is checked, not by this module
    from drivers.line import LineSettings
    from drivers.modbus import RegisterMap, SerialBusSettings, TcpSettings

DeviceKind = Literal["seat", "lockout", "sign", "card-counter", "dice-entry"]
DEVICE_KINDS: tuple[str, ...] = ("seat", "lockout", "sign", "card-counter", "dice-entry")
Transport = Literal["rtu", "tcp", "line"]
TRANSPORTS: tuple[str, ...] = ("rtu", "tcp", "line")
CardCounterRole = Literal["shuffler", "shoe"]
CARD_COUNTER_ROLES: tuple[str, ...] = ("shuffler", "shoe")
CardSource = Literal["shoe", "dealer"]
ShufflerKind = Literal["counting", "non-counting", "none"]
MqttProtocol = Literal["5", "3.1.1"]
MQTT_PROTOCOLS: tuple[str, ...] = ("5", "3.1.1")  # what the link speaks (controller.link.mqtt.PROTOCOLS)
MAX_STUB_COUNT_EVERY = 5  # § 667a.8(f), § 643a.8(f): at least once every 5 rounds of play


@dataclass(frozen=True)
class WagerConfig:
    """A wager offered at the table, with the paytable selected for it and its meter (if progressive)."""

    id: str
    wager: Wager
    paytable: Paytable
    paytable_ref: str  # as written: a built-in id or a path relative to the configuration file
    meter: str | None = None


@dataclass(frozen=True)
class StandaloneMeter:
    """A meter this table owns."""

    id: str
    params: MeterParams

    linked = False

    @property
    def wager_sizes(self) -> tuple[int, ...]:
        return self.params.wager_sizes


@dataclass(frozen=True)
class LinkedMeter:
    """A meter owned by a link authority (§ 605a.8); its parameters are the authority's.
    ``wager_sizes`` (cents) are the sizes this table accepts, if stated."""

    id: str
    linked_id: str
    wager_sizes: tuple[int, ...] = ()

    linked = True


MeterConfig = StandaloneMeter | LinkedMeter


@dataclass(frozen=True)
class CardsConfig:
    """Where the cards come from and how the deck is proven whole."""

    source: CardSource
    shuffler: ShufflerKind
    stub_count_every: int | None  # rounds between stub counts; None with a counting shuffler
    two_decks: bool  # two decks alternated through the shuffler, § 667a.3(b)


@dataclass(frozen=True)
class BusConfig:
    name: str
    transport: Literal["rtu", "tcp"]
    settings: SerialBusSettings | TcpSettings


@dataclass(frozen=True)
class DeviceConfig:
    name: str
    kind: DeviceKind
    transport: Transport
    seats: tuple[int, ...] = ()  # table seats (positions) a seat device serves
    roles: tuple[CardCounterRole, ...] = ()  # card-counter: shuffler and/or shoe
    reads_cards: bool = False  # a card-reading shoe: reports each card as dealt
    description: str = ""
    # Modbus (rtu, tcp)
    bus: str | None = None
    unit: int | None = None
    register_map_path: Path | None = None
    register_map: RegisterMap | None = None
    poll_interval: float | None = None
    writes: str = "auto"  # "auto", "multiple" or "single" (drivers/modbus/devices.py)
    read_back: bool = True
    # line protocol
    line: LineSettings | None = None
    model: str = ""  # the device's model: its register map's, or (line protocol) as configured


    @property
    def first_seat(self) -> int:
        """The table seat of the register map's first local seat (the Modbus seat driver's offset)."""
        if not self.seats:
            return 1
        local: list[int] = list(getattr(self.register_map, "seats", None) or [1])
        return self.seats[0] - local[0] + 1


@dataclass(frozen=True)
class Supervisor:
    name: str
    credential: Credential


@dataclass(frozen=True)
class MetricsConfig:
    host: str = "127.0.0.1"
    port: int = 9464

    @property
    def listen(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class AnchorConfig:
    """[anchor]: where the journal's head is anchored (controller.service.anchoring). `file` None: beside the state
    directory (STATE_DIR-anchor/anchor); `key_file` None: the anchor is not keyed; `syslog` None: not sent to
    a remote syslog."""

    file: Path | None = None
    key_file: Path | None = None
    syslog: tuple[str, int] | None = None

    def file_for(self, state_dir: Path) -> Path:
        return self.file if self.file is not None else state_dir.parent / f"{state_dir.name}-anchor" / "anchor"


@dataclass(frozen=True)
class ReportConfig:
    """[report]: when the gaming day starts (a local time of day in an IANA time zone), and where the daemon writes
    each day's report. `dir` None: STATE_DIR/reports."""

    day_starts: time = time(6, 0)
    time_zone: str = "America/New_York"
    dir: Path | None = None

    @property
    def zone(self) -> tzinfo:
        from zoneinfo import ZoneInfo

        return ZoneInfo(self.time_zone)  # checked when the file was (check_report.py)

    def dir_for(self, state_dir: Path) -> Path:
        return self.dir if self.dir is not None else state_dir / "reports"


@dataclass(frozen=True)
class LoggingConfig:
    format: Literal["json", "console"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"


@dataclass(frozen=True)
class MqttConfig:
    host: str
    port: int
    tls: bool
    client_id: str
    topic_prefix: str
    link_timeout: float
    protocol: MqttProtocol = "5"
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    username: str | None = None
    password_file: Path | None = None
    # A table's: the link authority's public keys ("ed25519:<hex>", controller.linkproto.signing) under which every
    # message it acts on must verify; more than one while the authority's key is being replaced.
    authority_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableConfig:
    source: Path  # the configuration file
    table: str
    game: Game
    seats: int
    state_dir: Path
    wagers: dict[str, WagerConfig]
    meters: dict[str, MeterConfig]
    buses: dict[str, BusConfig]
    devices: dict[str, DeviceConfig]
    cards: CardsConfig | None  # None at a dice table
    supervisors: tuple[Supervisor, ...]
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    mqtt: MqttConfig | None = None
    anchor: AnchorConfig = field(default_factory=AnchorConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    description: str = ""
    allow_example_paytables: bool = False
    warnings: tuple[Problem, ...] = ()  # what works but should not stay so (check-config prints, the daemon logs)

    def devices_of(self, kind: str) -> list[DeviceConfig]:
        return [d for d in self.devices.values() if d.kind == kind]

    def supervisor(self, name: str) -> Supervisor | None:
        return next((s for s in self.supervisors if s.name == name), None)

    def summary(self) -> dict[str, Any]:
        """What the configuration sets up, for people and scripts (``check-config``)."""
        from controller.meter.params import format_rate
        from controller.money import format_cents

        kinds: dict[str, int] = {}
        for d in self.devices.values():
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        meters: dict[str, Any] = {}
        for m in self.meters.values():
            if isinstance(m, LinkedMeter):
                meters[m.id] = {"linked": m.linked_id,
                                "wager_sizes": [format_cents(c) for c in m.wager_sizes]}
            else:
                p = m.params
                meters[m.id] = {
                    "reset": format_cents(p.reset_cents), "rate": format_rate(p.rate),
                    "reserve_rate": format_rate(p.reserve_rate),
                    "ceiling": None if p.ceiling_cents is None else format_cents(p.ceiling_cents),
                    "wager_sizes": [format_cents(c) for c in p.wager_sizes],
                }
        return {
            "table": self.table,
            "game": self.game.id,
            "game_title": self.game.title,
            "seats": self.seats,
            "dice": self.game.dice,  # seats are then wager positions
            "wagers": {w.id: {"paytable": w.paytable.id, "meter": w.meter} for w in self.wagers.values()},
            "meters": meters,
            "devices": {"total": len(self.devices), "by_kind": kinds, "buses": len(self.buses)},
            "cards": None if self.cards is None else {
                "source": self.cards.source, "shuffler": self.cards.shuffler,
                "stub_count_every": self.cards.stub_count_every, "two_decks": self.cards.two_decks,
            },
            "supervisors": len(self.supervisors),
            "linked": self.mqtt is not None,
        }


__all__ = ["CARD_COUNTER_ROLES", "DEVICE_KINDS", "MAX_STUB_COUNT_EVERY", "MQTT_PROTOCOLS", "TRANSPORTS", "AnchorConfig",
           "BusConfig", "CardCounterRole", "CardSource", "CardsConfig", "DeviceConfig", "DeviceKind", "LinkedMeter",
           "LoggingConfig", "MeterConfig", "MetricsConfig", "MqttConfig", "MqttProtocol", "ReportConfig",
           "ShufflerKind", "StandaloneMeter", "Supervisor", "TableConfig", "Transport", "WagerConfig"]
