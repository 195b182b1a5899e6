"""[buses] and [devices] together: what no device can say alone (buses used, units and ports, every seat
served, the devices a table needs)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.config.check import Checker
from controller.config.model import DeviceConfig
from controller.games import Game
from controller.tomlfile.problems import join

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


class WiringChecks(Checker):
    """The buses and devices that each passed alone (controller.config.check_devices), checked together."""

    def _devices_together(self) -> None:
        """What no device can say alone: buses, units, ports, seats served, the devices a table needs."""
        g, n = self.game, self.seats
        all_valid = all(d is not None for d in self.devices.values())
        devices = {k: d for k, d in self.devices.items() if d is not None}
        ports = self._serial_bus_ports()
        self._tcp_gateways()
        used_buses = self._devices_wired(devices, ports)
        if all_valid:
            for name in self.buses:
                if name not in used_buses and self.buses[name] is not None:
                    self.add(join("buses", name), "no device is on this bus",
                             f'remove it, or set bus = "{name}" on the devices wired to it')
        if g is None:
            return

        # Seats served: each seat by one seat device at most; at a card table every seat has one. These
        # checks use each device's kind and seats, known even when the rest of the device is wrong.
        commons = self.device_common
        complete = set(commons) == set(self.devices)
        served = self._seats_served(commons, n)
        if not complete:
            return  # a device whose kind or seats are unknown may be the one that seems missing
        system = self._system_source()
        if n is not None:
            self._seats_without_device(g, n, served, system)
        self._devices_needed(g, commons, system)

    def _serial_bus_ports(self) -> dict[str, str]:
        """Each serial bus on a port of its own: port -> the bus's path."""
        from drivers.modbus import SerialBusSettings

        ports: dict[str, str] = {}
        for b in self.buses.values():
            if b is not None and isinstance(b.settings, SerialBusSettings):
                port = b.settings.port
                where = join("buses", b.name)
                if port in ports:
                    self.add(join(where, "port"), f"{port} is already the port of {ports[port]}",
                             "devices on one RS-485 line share one bus: put them all on that bus")
                ports.setdefault(port, where)
        return ports

    def _tcp_gateways(self) -> None:
        """Each TCP bus to a gateway of its own."""
        from drivers.modbus import TcpSettings

        gateways: dict[tuple[str, int], str] = {}
        for b in self.buses.values():
            if b is not None and isinstance(b.settings, TcpSettings):
                s = b.settings
                key = (s.host, s.port)
                if key in gateways:
                    self.add(join("buses", b.name), f"{s.host}:{s.port} is already {gateways[key]}",
                             "devices behind one gateway share one bus")
                gateways.setdefault(key, join("buses", b.name))

    def _devices_wired(self, devices: Mapping[str, DeviceConfig], ports: dict[str, str]) -> set[str]:
        """Each Modbus device on a bus that is defined, of its transport, under a unit of its own; each line
        device on a port of its own (`ports`: the buses' already). The buses used."""
        used_buses: set[str] = set()
        units: dict[tuple[str, int], str] = {}
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
        return used_buses

    def _seats_served(self, commons: Mapping[str, Any], n: int | None) -> dict[int, str]:
        """Each seat in range, served by one seat device at most: seat -> the device's path."""
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
        return served

    def _seats_without_device(self, g: Game, n: int, served: Mapping[int, str], system: str | None) -> None:
        """At a card table every seat has a seat device; at a dice table every wager position or none."""
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

    def _devices_needed(self, g: Game, commons: Mapping[str, Any], system: str | None) -> None:
        """The devices of the table's kind of game: dice entry or lock-out and card counters, and a sign."""
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


def _seats_text(seats: list[int]) -> str:
    if len(seats) == 1:
        return f"seat {seats[0]} is"
    return "seats " + ", ".join(str(s) for s in seats[:-1]) + f" and {seats[-1]} are"


__all__ = ["FIVE_CARD_HAND_BONUS_SYSTEM_SOURCE", "PROGRESSIVE_SYSTEM_SOURCE", "WiringChecks"]
