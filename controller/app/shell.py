"""What every table daemon shares (the card table, controller.app.table; the dice table, controller.app.dice_table):
its devices and their senders, the queue of device events, the sign, the services it runs beside its own work
(drivers, event consumer, sign, drivers' metrics, watchdog, control socket), supervisor checks, and the rule
that no task of its own raises into its TaskGroup.

`spawn` runs each of the daemon's background tasks under a guard: an unexpected exception is logged with its
traceback and counted (`progressive_internal_errors_total`). A task whose failure leaves the table in a state it
cannot go on from (`fatal=True`: a booking, a reversal, a close) then ends the process with that reason
(`DaemonFailed`, exit 70 from progressived): systemd starts it again, and the journal says where the table stands.
A refusal is never such a failure: the code that asks for something handles the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import structlog

from controller.app.handlers import Handler
from controller.app.metrics import Metrics
from controller.app.outputs import DeviceOutputs
from controller.app.sign import Sign
from controller.config.model import TableConfig
from controller.service.auth import SupervisorCheck
from controller.service.control import PEER
from controller.service.control import Handler as ControlHandler
from controller.service.operations import check_arguments
from controller.service.sdnotify import Notifier, watchdog_interval
from drivers import events as ev
from drivers.device import Device
from drivers.modbus.settings import SerialBusSettings

if TYPE_CHECKING:
    from drivers.modbus.bus import ModbusBus

log = structlog.get_logger("table")

DEVICE_METRICS_S = 5.0  # how often the drivers' counters are copied into the metrics
EVENT_QUEUE = 10_000  # device events waiting for the round task (bounded: a babbling device cannot eat memory)


class DaemonFailed(Exception):
    """A task the table cannot go on without failed; its reason and traceback are in the log."""


class ControlService(Protocol):
    """A daemon's control socket as the daemon runs it (controller.service.control.ControlServer)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


ControlFactory = Callable[[ControlHandler], ControlService]  # given the daemon, which answers the socket's requests


# What status says of a device whose model nothing checks (a Modbus device's driver says its own).
LINE_IDENTITY = "not checked: the line protocol reports no model"
UNKNOWN_IDENTITY = "not checked"


@dataclass
class DeviceInfo:
    kind: str
    model: str = ""
    up: bool | None = None
    errors: int = 0  # outages since start
    last_error: str | None = None
    since: str | None = None  # when it last went up or down (UTC, ISO 8601): the console's "down since"


class TableShell:
    """The part of a table daemon that is not its game: subclasses give `on_device_event`, `device_changed`,
    `healthy`, `status`, `round_info` and their `handlers`, and run `start_services` inside their TaskGroup."""

    def __init__(self, cfg: TableConfig, devices: dict[str, Device], *, buses: dict[str, ModbusBus] | None = None,
                 metrics: Metrics | None = None, notifier: Notifier | None = None,
                 control: ControlFactory | None = None) -> None:
        self.cfg = cfg
        self.devices = devices
        self.buses = buses or {}
        self.metrics = metrics or Metrics(cfg.table)
        self.notifier = notifier or Notifier()
        self._control_factory = control
        self._events: asyncio.Queue[ev.Event] = asyncio.Queue(EVENT_QUEUE)
        # a Modbus device read back: its outputs wait for its first answer, then go in as few requests as it takes
        self._outputs = {name: DeviceOutputs(d, hold_until_up=name in cfg.devices and cfg.devices[name].transport != "line"
                                             and cfg.devices[name].read_back) for name, d in devices.items()}
        self._info = {name: DeviceInfo(cfg.devices[name].kind, cfg.devices[name].model) if name in cfg.devices
                      else DeviceInfo("?") for name in devices}
        for name, info in self._info.items():
            self.metrics.device_info.labels(name, info.model).set(1)
        self._seat_device: dict[int, str] = {}
        for d in cfg.devices.values():
            if d.kind == "seat":
                for s in d.seats:
                    self._seat_device[s] = d.name
                    self.metrics.seat_device.labels(str(s), d.name).set(1)
        # a device on a Modbus bus shares its wire; a line device's serial line is its own
        self._bus_of = {name: (cfg.devices[name].bus or name) if name in cfg.devices else name for name in devices}
        for name, bus in self._bus_of.items():
            self.metrics.device_bus.labels(name, bus).set(1)
        self._writes: dict[str, str] = {}  # the writes mode each Modbus device's metric says
        for name in devices:
            dc = cfg.devices.get(name)
            if dc is not None and dc.transport != "line":
                self.metrics.device_read_back.labels(name).set(1 if dc.read_back else 0)
                self._writes_metric(name)
        self.sign = Sign(cfg.table, [self._outputs[d.name] for d in cfg.devices_of("sign") if d.name in self._outputs])
        self.supervisors = SupervisorCheck(cfg.supervisors, self.metrics.auth)
        self._tasks: asyncio.TaskGroup | None = None
        self.ready = asyncio.Event()
        self.started_at = time.monotonic()

    # --- what a daemon gives ------------------------------------------------------------------------

    def on_device_event(self, e: ev.Event) -> None:
        raise NotImplementedError

    def device_changed(self, name: str, up: bool) -> None:
        """A device went down or came back (its info is up to date). Its seats (`seats_of`) say what it disables."""

    def healthy(self) -> bool:
        """Whether the watchdog may ping systemd: the daemon's own health path works."""
        return True

    handlers: ClassVar[Mapping[str, Handler]] = {}  # the control socket's operations, by name (handlers.py)

    async def call(self, op: str, args: dict[str, Any]) -> Any:
        """A request on the control socket: checked against the operation's declaration (operations.py), then
        answered by the daemon's handler of that name; LookupError for an operation it does not know."""
        check_arguments(op, args)
        handler = self.handlers.get(op)
        if handler is None:
            raise LookupError(op)
        return await handler(self, args)

    def status(self) -> dict[str, Any]:
        raise NotImplementedError

    def round_info(self) -> dict[str, Any]:
        raise NotImplementedError

    # --- tasks -------------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, *, fatal: bool = False) -> asyncio.Task[Any]:
        """Run `coro` in the daemon's TaskGroup, guarded (module docstring). RuntimeError (and `coro` closed)
        when the TaskGroup is not running: not yet started (a link message at start-up) or shutting down."""
        if self._tasks is None:
            coro.close()
            raise RuntimeError(f"{name}: the daemon's tasks are not running")
        guarded = self._guarded(coro, name, fatal)
        try:
            task = self._tasks.create_task(guarded, name=name)
        except RuntimeError:  # the TaskGroup is shutting down: neither coroutine will run
            guarded.close()
            coro.close()
            raise
        task.add_done_callback(lambda _: coro.close())  # cancelled before it started: `coro` never runs either
        return task

    async def _guarded(self, coro: Coroutine[Any, Any, Any], name: str, fatal: bool) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except Exception as e:
            task = name.split(":", 1)[0]
            self.metrics.internal_errors.labels(task).inc()
            if fatal:
                log.exception("task failed: the controller stops (systemd starts it again from the journal)",
                              task=name, error=f"{type(e).__name__}: {e}")
                raise DaemonFailed(f"{name}: {type(e).__name__}: {e}") from e
            log.exception("task failed", task=name, error=f"{type(e).__name__}: {e}")
            return None

    async def start_services(self, tg: asyncio.TaskGroup, consumer: str) -> None:
        """The tasks every table daemon runs: each device's driver and output sender, the consumer of device
        events, the sign, the drivers' metrics, the systemd watchdog and the control socket."""
        self._tasks = tg
        for name, dev in self.devices.items():  # a driver that died unseen would leave its device looking up
            self.spawn(dev.run(self.emit_for(name)), f"device:{name}", fatal=True)
            self.spawn(self._outputs[name].run(), f"outputs:{name}", fatal=True)
        self.spawn(self._consume(), consumer, fatal=True)
        self.spawn(self.sign.run(), "sign")
        self.spawn(self._device_metrics(), "device-metrics")
        interval = watchdog_interval()
        if interval:
            self.spawn(self._watchdog(interval), "watchdog", fatal=True)
        control = self._control_factory(self) if self._control_factory else None
        if control is not None:
            await control.start()
            tg.create_task(_stop_on_cancel(control), name="control")

    async def stop_services(self) -> None:
        """At shutdown, whatever stopped it: systemd told, the supervisors' checks and the buses closed."""
        self.notifier.stopping()
        self.supervisors.close()
        await close_buses(self.buses)

    def emit_for(self, name: str) -> Callable[[ev.Event], None]:
        def emit(event: ev.Event) -> None:
            try:
                self._events.put_nowait(event)
            except asyncio.QueueFull:
                log.error("event queue full: device event dropped", device=name, event=repr(event))
        return emit

    async def _consume(self) -> None:
        while True:
            event = await self._events.get()
            try:
                match event:
                    case ev.DeviceDown(reason=reason):
                        self._device_state(event.device, False, reason)
                    case ev.DeviceUp():
                        self._device_state(event.device, True, "")
                    case _:
                        self.on_device_event(event)
            except Exception:
                self.metrics.internal_errors.labels("device-event").inc()
                log.exception("device event failed", event=repr(event))

    def _device_state(self, name: str, up: bool, reason: str) -> None:
        info = self._info.setdefault(name, DeviceInfo("?"))
        if info.up is not up:
            info.since = datetime.now(UTC).isoformat(timespec="seconds")
        info.up = up
        self.metrics.device_up.labels(name, info.kind).set(1 if up else 0)
        bus = self._bus_of.setdefault(name, name)
        self.metrics.bus_up.labels(bus).set(
            1 if any(self._info[d].up for d, b in self._bus_of.items() if b == bus and d in self._info) else 0)
        if name in self._outputs:
            self._outputs[name].up = up
        if up:
            if name in self._outputs:
                self._outputs[name].resend_all()
        else:
            info.errors += 1
            info.last_error = reason
        self.device_changed(name, up)

    async def _watchdog(self, interval: float) -> None:
        while True:
            if self.healthy():
                self.notifier.watchdog()
            await asyncio.sleep(interval)

    def _writes_metric(self, name: str) -> None:
        """`progressive_device_writes_info`: one mode a device, the driver's now (auto turns to single (detected))."""
        mode = getattr(self.devices.get(name), "writes_mode", None)
        if not isinstance(mode, str) or self._writes.get(name) == mode:
            return
        if name in self._writes:
            self.metrics.device_writes.remove(name, self._writes[name])
        self._writes[name] = mode
        self.metrics.device_writes.labels(name, mode).set(1)

    async def _device_metrics(self) -> None:
        """Copy each driver's own counters into the metrics (Prometheus counters only go up: add the
        difference since the last look)."""
        seen: dict[tuple[str, str], int] = {}
        while True:
            for name, dev in self.devices.items():
                if name in self._writes:
                    self._writes_metric(name)
                health = getattr(dev, "health", None)
                errors = dict(getattr(health, "errors", None) or {})
                get = getattr(dev, "metrics", None)
                m = get() if callable(get) else None
                if m is not None:
                    errors = dict(m.errors)
                    if m.last_poll_s is not None:
                        self.metrics.device_poll.labels(name).observe(m.last_poll_s)
                for kind, n in errors.items():
                    before = seen.get((name, kind), 0)
                    if n > before:
                        self.metrics.device_errors.labels(name, kind).inc(n - before)
                        seen[(name, kind)] = n
            await asyncio.sleep(DEVICE_METRICS_S)

    # --- a device down: its seats, or the table ---------------------------------------------------

    def seats_of(self, name: str) -> tuple[int, ...]:
        """The seats whose wagering a device's outage disables: a seat's wagering device, its own (§ 639a.2(c)(1));
        any other (the lock-out, the sign, a card counter, the dice entry) none: it disables the whole table."""
        d = self.cfg.devices.get(name)
        return tuple(d.seats) if d is not None and d.kind == "seat" else ()

    def show_seats_disabled(self, seats_down: Mapping[str, Iterable[int]]) -> None:
        """The seats disabled by their device (device -> seats), on the metrics and the sign."""
        seats = {seat for served in seats_down.values() for seat in served}
        for seat in range(1, self.cfg.seats + 1):
            self.metrics.seat_disabled.labels(str(seat)).set(1 if seat in seats else 0)
        self.sign.seats_disabled(seats)

    def seats_disabled_json(self, seats_down: Mapping[str, Iterable[int]]) -> list[dict[str, Any]]:
        """For `status`: each seat disabled, by which device, and why that device is down."""
        return sorted(({"seat": seat, "device": name, "reason": self._info[name].last_error if name in self._info
                        else None} for name, served in seats_down.items() for seat in served),
                      key=lambda x: (x["seat"], x["device"]))

    # --- outputs -----------------------------------------------------------------------------------

    def win_light(self, seat: int, on: bool) -> None:
        name = self._seat_device.get(seat)
        if name in self._outputs:
            self._outputs[name].want(("win", seat), ev.SetWinLight(seat, on))

    def accepted_light(self, seat: int, spot: str, on: bool) -> None:
        name = self._seat_device.get(seat)
        if name in self._outputs:
            self._outputs[name].want(("accepted", seat, spot), ev.SetAcceptedLight(seat, spot, on))

    def lights_off(self, spots: Iterable[str]) -> None:
        """Every light of the seats off (at start-up: a restarted controller owns its outputs, and lights the
        stopped one left on would tell players a wager was accepted or a hand won). `spots`: the table's spots,
        each lit on a line-protocol device, which has a light for every spot of its seats."""
        for d in self.cfg.devices_of("seat"):
            if d.name not in self._outputs:
                continue
            rmap = d.register_map
            if rmap is not None:
                offset = d.first_seat - 1
                accepted = [(p.seat + offset, p.spot) for p in rmap.points("accepted_light") if p.seat and p.spot]
                wins = [p.seat + offset for p in rmap.points("win_light") if p.seat]
            else:
                accepted = [(seat, spot) for seat in d.seats for spot in spots]
                wins = list(d.seats)
            for seat, spot in accepted:
                self.accepted_light(seat, spot, False)
            for seat in wins:
                self.win_light(seat, False)

    def lamp(self, on: bool) -> None:
        for d in self.cfg.devices_of("lockout"):
            if d.name in self._outputs:
                self._outputs[d.name].want("lamp", ev.SetLockoutLamp(on))

    # --- the control socket's helpers ----------------------------------------------------------------

    async def supervisor(self, args: dict[str, Any]) -> str:
        """The name of the supervisor whose credential `args` carries (`supervisor`, `secret`): checked off the
        event loop, one at a time, wrong guesses throttled (controller.service.auth); PermissionError otherwise."""
        return await self.supervisors.check(args.get("supervisor"), args.get("secret"), PEER.get().get("peer_uid"))

    def devices_json(self) -> list[dict[str, Any]]:
        return [{"id": n, "kind": i.kind, "model": i.model, "identity": self._identity(n), "up": i.up,
                 "errors": i.errors, "last_error": i.last_error, "since": i.since, **self._cabled(n),
                 **self._capabilities(n)} for n, i in sorted(self._info.items())]

    def _identity(self, name: str) -> str:
        """Whether the device's model was checked: "checked", why not, or what the device said instead."""
        said = getattr(self.devices.get(name), "identity_status", None)
        if isinstance(said, str):
            return said
        d = self.cfg.devices.get(name)
        return LINE_IDENTITY if d is not None and d.transport == "line" else UNKNOWN_IDENTITY

    def _capabilities(self, name: str) -> dict[str, Any]:
        """A Modbus device's writes ("multiple", "single", "single (detected)") and whether its outputs are read
        back: with `read_back` false, what it shows is not verified (None for a line device)."""
        d = self.cfg.devices.get(name)
        if d is None or d.transport == "line":
            return {"writes": None, "read_back": None}
        mode = getattr(self.devices.get(name), "writes_mode", None)
        return {"writes": mode if isinstance(mode, str) else d.writes, "read_back": d.read_back}

    def _cabled(self, name: str) -> dict[str, Any]:
        """Where a device hangs (its bus and port): one unplugged cable takes down every device on it."""
        d = self.cfg.devices.get(name)
        if d is None:
            return {"bus": None, "port": None}
        if d.bus is not None and d.bus in self.cfg.buses:
            settings = self.cfg.buses[d.bus].settings
            port = settings.port if isinstance(settings, SerialBusSettings) else settings.describe()
            return {"bus": d.bus, "port": port}
        return {"bus": None, "port": d.line.port if d.line is not None else None}

    def lights_json(self) -> dict[str, Any]:
        """The seats' lights as the daemon last told the devices to show them (a device down shows them again when
        it is back): each seat's spots whose accepted light is on, and the seats whose win light is on."""
        accepted: dict[int, list[str]] = {}
        win: list[int] = []
        for outputs in self._outputs.values():
            for command in outputs.desired():
                if isinstance(command, ev.SetAcceptedLight) and command.on:
                    accepted.setdefault(command.seat, []).append(command.spot)
                elif isinstance(command, ev.SetWinLight) and command.on:
                    win.append(command.seat)
        return {"accepted": [{"seat": seat, "spots": sorted(spots)} for seat, spots in sorted(accepted.items())],
                "win": sorted(win)}

    def uptime(self) -> float:
        return round(time.monotonic() - self.started_at, 1)


async def close_buses(buses: dict[str, ModbusBus]) -> None:
    for bus in buses.values():
        with contextlib.suppress(Exception):  # closing: nothing left to protect
            await bus.close()


async def _stop_on_cancel(control: ControlService) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await control.stop()


__all__ = ["DEVICE_METRICS_S", "EVENT_QUEUE", "ControlFactory", "ControlService", "DaemonFailed", "DeviceInfo",
           "TableShell", "close_buses"]
