"""The shape of each table of the configuration file, as pydantic models.

Every model forbids unknown keys (a typo must not be silently ignored) and is strict (a number in
quotes is a mistake, not a number). Each section is validated on its own, so that one bad section
does not hide the problems of another; meaning across sections is checked in the check_*.py modules.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from fractions import Fraction
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, create_model

from controller.config.fields import Money, Rate, Seconds, custom, show
from controller.config.model import MQTT_PROTOCOLS, MqttProtocol
from controller.meter.params import DEFAULT_HISTORY
from controller.money import format_dollars_human
from controller.paytables.load import (
    MAX_WAGER_CENTS,  # one limit of a wager: a paytable's Envy Bonus rows, a meter's sizes
)

# The limits of the numbers of a configuration: beyond them a value is a typo or an attack (a history of
# 10**23 hits, a wager of a million dollars), refused with the limit named.
MAX_TABLE_SEATS = 16  # the most any game has (Hot Roller Craps: 16 wager positions, § 623c.1(a)(2)(i))
MAX_METER_CENTS = 100_000_000_00  # $100,000,000.00: a reset or a ceiling
MAX_WAGER_SIZES = 32  # accepted wager amounts of one meter
MAX_HISTORY_SIZE = 10_000  # hits kept in a meter's history
MAX_STUB_COUNT_ROUNDS = 1_000  # rounds between stub counts, with a counting shuffler
# A line-protocol device's settings (drivers.line.LineSettings checks their consistency, not their size).
LINE_LIMITS: dict[str, dict[str, Any]] = {
    "baud": {"ge": 300, "le": 1_000_000},
    "retries": {"ge": 0, "le": 10},
    "ack_timeout": {"le": 60},
    "heartbeat_interval": {"le": 60},
    "heartbeat_timeout": {"le": 300},
    "backoff_initial": {"le": 60},
    "backoff_cap": {"le": 300},
    "max_frame": {"le": 128},  # the line protocol's longest frame (drivers/line/core/frame.py MAX_FRAME)
    "open_timeout": {"le": 60},
}


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _at_most(limit: int, what: str) -> Any:
    def check(cents: int) -> int:
        if cents > limit:
            raise custom(f"{format_dollars_human(cents)} is more than {format_dollars_human(limit)}, the most "
                         f"{what}", f"at most {format_dollars_human(limit)}")
        return cents
    return AfterValidator(check)


Seat = Annotated[int, Field(ge=1, le=MAX_TABLE_SEATS)]
MeterAmount = Annotated[Money, _at_most(MAX_METER_CENTS, "a meter's reset or ceiling may be")]
WagerSize = Annotated[Money, _at_most(MAX_WAGER_CENTS, "an accepted wager may be")]


class WagerModel(Section):
    paytable: str = Field(min_length=1)
    meter: str | None = None


class StandaloneMeterModel(Section):
    reset: MeterAmount
    rate: Rate
    wager_sizes: list[WagerSize] = Field(min_length=1, max_length=MAX_WAGER_SIZES)
    reserve_rate: Rate = Fraction(0)
    ceiling: MeterAmount | None = None
    history_size: int = Field(DEFAULT_HISTORY, le=MAX_HISTORY_SIZE)
    description: str = ""


_LINK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _link_id(value: str) -> str:
    if not _LINK_ID.fullmatch(value):
        raise custom(f"{value!r} is not a meter id of a link authority",
                     "1 to 64 letters, digits, '.', '_' or '-', as the link authority names the meter")
    return value


class LinkedMeterModel(Section):
    linked: Annotated[str, AfterValidator(_link_id)]
    wager_sizes: list[WagerSize] = Field([], max_length=MAX_WAGER_SIZES)
    description: str = ""


STANDALONE_ONLY = ("reset", "rate", "reserve_rate", "ceiling", "history_size")


class CardsModel(Section):
    source: Literal["shoe", "dealer"]
    shuffler: Literal["counting", "non-counting", "none"]
    stub_count_every: int | None = Field(None, ge=1, le=MAX_STUB_COUNT_ROUNDS)
    two_decks: bool = False


class DeviceCommon(Section):
    """Keys every device may have; the transport's own keys are checked by ModbusFields or LineFields."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    kind: Literal["seat", "lockout", "sign", "card-counter", "dice-entry"]
    transport: Literal["rtu", "tcp", "line"]
    seats: list[Seat] = []
    roles: list[Literal["shuffler", "shoe"]] = []
    reads_cards: bool = False
    description: str = ""
    model: str | None = Field(None, min_length=1, max_length=64)


class ModbusFields(Section):
    bus: str = Field(min_length=1)
    unit: int
    register_map: str = Field(min_length=1)
    poll_interval: Seconds | None = Field(None, ge=0, le=3600)
    writes: Literal["auto", "multiple", "single"] = "auto"  # functions 15/16, or 5/6 one output a request
    read_back: bool = True  # false: outputs never read back (1, 3), written again every second


@cache
def line_fields() -> type[BaseModel]:
    """The keys of a line-protocol device: exactly the fields of the driver's LineSettings, with its
    defaults (so a setting the driver gains is a setting the configuration has)."""
    from drivers.line import LineSettings

    hints = typing.get_type_hints(LineSettings)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(LineSettings):
        annotation = hints[f.name]
        if annotation is float:
            annotation = Seconds
        default = ... if f.default is dataclasses.MISSING else f.default
        limits = LINE_LIMITS.get(f.name)
        fields[f.name] = (annotation, Field(default, **limits) if limits else default)
    return create_model(
        "LineFields", __config__=ConfigDict(extra="forbid", strict=True, frozen=True), **fields
    )


class SupervisorModel(Section):
    name: str = Field(min_length=1, max_length=64)
    credential: str


class MetricsModel(Section):
    listen: str = "127.0.0.1:9464"


class AnchorModel(Section):
    file: str | None = Field(None, min_length=1)
    key_file: str | None = Field(None, min_length=1)
    syslog: str | None = Field(None, min_length=1, max_length=300)


class ReportModel(Section):
    day_starts: str = Field("06:00", min_length=1, max_length=5)
    time_zone: str = Field("America/New_York", min_length=1, max_length=64)
    dir: str | None = Field(None, min_length=1)


class LoggingModel(Section):
    format: Literal["json", "console"] = "json"
    level: Literal["debug", "info", "warning", "error"] = "info"


def _mqtt_protocol(value: object) -> str:
    # Not pydantic's Literal check: refusing protocol = 5 (an integer) must say to write it in quotes.
    if isinstance(value, str) and value in MQTT_PROTOCOLS:
        return value
    allowed = " or ".join(f'"{p}"' for p in MQTT_PROTOCOLS)
    raise custom(f"must be {allowed}, not {show(value)}",
                 'the MQTT version, in quotes: protocol = "5" (the default) or protocol = "3.1.1"')


class MqttModel(Section):
    host: str = Field(min_length=1, max_length=253)
    port: int | None = Field(None, ge=1, le=65535)
    tls: bool = True
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    client_id: str | None = Field(None, min_length=1, max_length=64)
    username: str | None = Field(None, min_length=1, max_length=128)
    password_file: str | None = None
    topic_prefix: str = "progressive/v1"
    link_timeout: Seconds = Field(10.0, gt=0, le=300)
    authority_keys: list[str] | None = Field(None, max_length=8)
    protocol: Annotated[MqttProtocol, PlainValidator(_mqtt_protocol)] = "5"


__all__ = ["LINE_LIMITS", "MAX_HISTORY_SIZE", "MAX_METER_CENTS", "MAX_STUB_COUNT_ROUNDS", "MAX_TABLE_SEATS",
           "MAX_WAGER_SIZES", "STANDALONE_ONLY", "AnchorModel", "CardsModel", "DeviceCommon", "LinkedMeterModel",
           "LoggingModel", "MeterAmount", "MetricsModel", "ModbusFields", "MqttModel", "ReportModel", "Seat", "Section",
           "StandaloneMeterModel", "SupervisorModel", "WagerModel", "WagerSize", "line_fields"]
