"""Connection settings, one object per bus: an RS-485 line (Modbus RTU) or a Modbus TCP connection.

Retries, timeouts and reconnects are ours (drivers/modbus/bus.py), not pymodbus': the client is built with
``retries=0`` and ``reconnect_delay=0`` (pymodbus 3.16: ``retries`` repeats a request inside ``execute``
with no silence between attempts and no way to count why each failed; a non-zero ``reconnect_delay``
starts its own reconnect task after a lost connection, which would race the bus' backoff), and with
``set_max_no_responses`` raised so that pymodbus does not close a TCP connection on its own after a few
unanswered requests (one muted unit behind a gateway must not cut off the others).
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drivers.modbus.frames import t35


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(0.25, gt=0, le=10, description="seconds to wait for each reply")
    # 2: measured with faults injected on the rig (docs/benchmarks.md, "Retries"): with 1, a line losing a fifth of a
    # device's replies took it down about 75-100 times in 1,000 polls (and refused the chips placed meanwhile); with 2,
    # none to 20; a device that dies then holds the line 3 x timeout once before it is probed alone.
    retries: int = Field(2, ge=0, le=5, description="attempts after the first when a reply is missing or bad")
    backoff_initial: float = Field(0.1, gt=0, le=60)
    backoff_cap: float = Field(5.0, gt=0, le=300)
    reconnect_after: int = Field(
        5, ge=1, le=1000,
        description="failed transactions in a row, with no reply from any unit between them, before the "
                    "port or connection is closed and opened again")
    lockout_every: int = Field(
        2, ge=2, le=100,
        description="while betting, the lock-out button is read at least every this many reads (devices' "
                    "turns, not transactions; drivers/modbus/core/schedule.py): 2, after every other read")
    health_interval: float = Field(
        2.0, gt=0, le=60,
        description="seconds between the reads no phase needs fast: seats and the lock-out while dealing")

    @model_validator(mode="after")
    def _backoff_order(self) -> Self:
        if self.backoff_initial > self.backoff_cap:
            raise ValueError("backoff_initial must not exceed backoff_cap")
        return self


class SerialBusSettings(_Common):
    """An RS-485 bus. Modbus over Serial Line v1.02 §2.5.1: 8 data bits, even parity by default (no parity
    needs two stop bits to keep the 11-bit character)."""

    port: str = Field(min_length=1)
    baud: int = Field(19200, gt=0, le=1_000_000)
    parity: Literal["N", "E", "O"] = "E"
    stopbits: Literal[1, 2] = 1
    bytesize: Literal[7, 8] = 8
    precise_timing: bool = Field(
        True,
        description="wait out the last part of the inter-frame silence with a blocking sleep (under 1.2 ms, "
                    "once per transaction) instead of an event-loop timer, which wakes on whole milliseconds "
                    "and would stretch t3.5 (1.75 ms above 19200 baud) by up to 1 ms per transaction")

    @property
    def char_bits(self) -> int:
        return 1 + self.bytesize + (0 if self.parity == "N" else 1) + self.stopbits

    @property
    def char_time(self) -> float:
        return self.char_bits / self.baud

    @property
    def silence(self) -> float:
        """t3.5, the silence that ends a frame (§2.5.1.1)."""
        return t35(self.baud, self.char_bits)

    def describe(self) -> str:
        return f"{self.port}@{self.baud}"


class TcpSettings(_Common):
    host: str = Field(min_length=1)
    port: int = Field(502, ge=1, le=65535)
    timeout: float = Field(0.5, gt=0, le=10)
    reconnect_after: int = Field(3, ge=1, le=1000)
    # 100: a serial-to-TCP gateway or a small PLC keeps up; uncapped, the rig's seven-seat table ran at about 300
    # (docs/benchmarks.md, "Rate cap on TCP").
    max_rate: float = Field(
        100, gt=0, le=10_000,
        description="transactions a second at most on this connection (reads, writes and retries); the "
                    "scheduler keeps the lock-out's cadence first and spreads the other reads")

    def describe(self) -> str:
        return f"{self.host}:{self.port}"


BusSettings = SerialBusSettings | TcpSettings


__all__ = ["BusSettings", "SerialBusSettings", "TcpSettings"]
