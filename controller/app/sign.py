"""The one owner of what the table's meter signs show.

Everything that has something to show tells this object, and only this object sends to the signs: the meters'
amounts, whether progressive wagering is disabled (OFFLINE), the claim awaiting a supervisor (PENDING with the
table, the seat and the amount, for as long as it waits) and wins (WIN with the table, the seat and the amount,
for WIN_DISPLAY_S: several states want the winning table and amount shown within 30 s, then the new amount).
What it shows is worked out from all of them each time (`face`), so a refresh can never cut a message short:

1. the newest of the messages in force: PENDING while a claim waits, and each WIN until its time is up. A claim
   of this table waits only once the claims before it are settled, so its PENDING outranks every WIN of this
   table, whenever that WIN came (a win is shown once its payment is journaled, which may be a moment after the
   next claim's PENDING: before, that win hid the new PENDING for WIN_DISPLAY_S); a win at another table of the
   link is newer than a PENDING that waits here, and PENDING comes back when that win's time is up;
2. else OFFLINE while progressive wagering is disabled;
3. else, while seats are disabled (their wagering device does not answer) and the rest of the table wagers,
   OFFLINE with the seat for SEAT_SHOWN_S of every SEAT_EVERY_S, each such seat in turn (a seat just disabled at
   once): the players see the meters the rest of the time;
4. else the amounts.

`run` works it out again when a win's time is up (and at least every SIGN_REFRESH_S). A sign that comes back
after an outage is sent its face again by its sender (outputs.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.app.outputs import DeviceOutputs
from drivers import events as ev

WIN_DISPLAY_S = 10.0  # the sign shows a win this long, then the new amount (several states: within 30 s)
SIGN_REFRESH_S = 10.0  # the face is worked out again at least this often
SEAT_SHOWN_S = 2.0  # a disabled seat is named this long ...
SEAT_EVERY_S = 10.0  # ... once in this many seconds (the meters shown the rest of the time)


@dataclass(frozen=True)
class _Message:
    command: ev.ShowMessage
    since: float
    until: float | None  # None: until it is withdrawn


class Sign:
    def __init__(self, table: str, outputs: Iterable[DeviceOutputs], *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.table = table
        self._outputs = list(outputs)
        self._clock = clock
        self._amounts: tuple[tuple[str, int], ...] = ()
        self._offline = False
        self._seats: tuple[int, ...] = ()  # disabled seats, in the order they are named
        self._seats_since = 0.0  # when the seats began to be named
        self._pending: _Message | None = None
        self._wins: list[_Message] = []
        self._changed = asyncio.Event()
        self._last: ev.Command | None = None
        self._seq = 0.0

    # --- what there is to show ---------------------------------------------------------------------

    def meters(self, amounts: tuple[tuple[str, int], ...]) -> None:
        self._amounts = tuple(amounts)
        self.show()

    def offline(self, disabled: bool) -> None:
        self._offline = disabled
        self.show()

    def seats_disabled(self, seats: Iterable[int]) -> None:
        """The seats whose wagering device does not answer (the rest of the table wagers)."""
        now = set(seats)
        if now == set(self._seats):
            return
        added = sorted(now - set(self._seats))
        if added:  # named at once, the seats just disabled first
            self._seats_since = self._clock()
            self._seats = (*added, *(s for s in self._seats if s in now))
        else:
            self._seats = tuple(s for s in self._seats if s in now)
        self.show()

    def pending(self, seat: int | None, amount_cents: int | None = None) -> None:
        """PENDING for the claim that awaits a supervisor at `seat` (0: the dealer's hand), or None: none waits."""
        if seat is None:
            self._pending = None
        else:
            cmd = ev.ShowMessage(ev.SignMessage.PENDING, table=self.table, seat=seat, amount_cents=amount_cents)
            if self._pending is None or self._pending.command != cmd:
                self._pending = _Message(cmd, self._now(), None)
        self.show()

    def win(self, table: str, seat: int, amount_cents: int) -> None:
        """A win (here, or at another table of the link): WIN for WIN_DISPLAY_S."""
        now = self._now()
        cmd = ev.ShowMessage(ev.SignMessage.WIN, table=table, seat=seat, amount_cents=amount_cents)
        self._wins.append(_Message(cmd, now, now + WIN_DISPLAY_S))
        self.show()

    # --- what is shown -----------------------------------------------------------------------------

    def face(self) -> ev.Command:
        now = self._clock()
        self._wins = [w for w in self._wins if w.until is not None and w.until > now]
        messages = [*self._wins, *([self._pending] if self._pending is not None else [])]
        if self._pending is not None:  # this table's wins are of claims before the one that waits
            messages = [m for m in messages if m is self._pending or m.command.table != self.table]
        if messages:
            return max(messages, key=lambda m: m.since).command
        if self._offline:
            return ev.ShowMessage(ev.SignMessage.OFFLINE, table=self.table)
        if self._seats:
            turn, into = divmod(now - self._seats_since, SEAT_EVERY_S)
            if into < SEAT_SHOWN_S:
                return ev.ShowMessage(ev.SignMessage.OFFLINE, table=self.table,
                                      seat=self._seats[int(turn) % len(self._seats)])
        return ev.ShowAmounts(self._amounts)

    def _next_seat_change(self, now: float) -> float | None:
        """When the face changes from a seat's name to the meters or back, while seats are disabled."""
        if not self._seats:
            return None
        into = (now - self._seats_since) % SEAT_EVERY_S
        return now + (SEAT_SHOWN_S - into if into < SEAT_SHOWN_S else SEAT_EVERY_S - into)

    def show(self) -> None:
        face = self.face()
        self._last = face
        for out in self._outputs:
            out.want("sign", face)
        self._changed.set()

    @property
    def shown(self) -> ev.Command | None:
        return self._last

    async def run(self) -> None:
        """Work the face out again when a win's time is up, when a disabled seat is named or no longer, and at
        least every SIGN_REFRESH_S."""
        while True:
            self._changed.clear()
            now = self._clock()
            ends = [w.until for w in self._wins if w.until is not None and w.until > now]
            seat_change = self._next_seat_change(now)
            if seat_change is not None:
                ends.append(seat_change)
            wait = min([SIGN_REFRESH_S, *(t - now for t in ends)])
            try:
                async with asyncio.timeout(max(wait, 0.0)):
                    await self._changed.wait()
                continue  # something changed: work out the next wake-up again
            except TimeoutError:
                pass
            self.show()

    def _now(self) -> float:
        # strictly increasing, so that of two messages given in the same clock tick the later is the newer
        now = max(self._clock(), self._seq + 1e-9)
        self._seq = now
        return now


__all__ = ["SEAT_EVERY_S", "SEAT_SHOWN_S", "SIGN_REFRESH_S", "WIN_DISPLAY_S", "Sign"]
