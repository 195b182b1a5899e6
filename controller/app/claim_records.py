"""What the table's journals hold of a round's claims: the last record of each claim (a restart finds them there)
and the round's draws as its booking recorded them at lock-out (a claim pays on what was recorded)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.app.meter_port import Meters, booking_key
from controller.errors import RulesError
from controller.ledger import Ledger
from controller.ledger.reader import JournalReader
from controller.meter.journal import Meters as MeterStates
from controller.round.claims import Claim, Draws, claim_from_json
from controller.round.journal import CLAIM


class ClaimRecords:
    """A round's claims and draws read from the table's journals (its own, and the link's)."""

    def __init__(self, meters: Meters, ledger: Ledger[MeterStates]) -> None:
        self._meters = meters
        self._ledger = ledger

    def claims(self, round_id: str) -> tuple[list[Claim], int]:
        """The last record of each claim of the round in the table's journal, in the order they were claimed,
        and the number the round's next claim takes (after any claim number either journal holds). Blocking:
        from a thread."""
        prefix = f"{round_id}-c"
        last: dict[str, Claim] = {}
        order: list[str] = []
        number = 0
        for port in self._meters.ports():
            with JournalReader(port.db_path) as r:
                for key in r.keys(prefix):
                    n = key[len(prefix):].split(":", 1)[0]
                    number = max(number, int(n)) if n.isdigit() else number
                if port is self._meters.local:
                    for _key, found in r.entries(prefix):
                        if found.kind != CLAIM:
                            continue
                        c = claim_from_json(found.body["claim"])
                        if c.id not in last:
                            order.append(c.id)
                        last[c.id] = c
        return [last[i] for i in order], number + 1

    async def draws(self, rid: str, meter: str) -> Draws:
        """The Magic Card and Lucky Bonus position of round `rid` as its booking on `meter` recorded them in the
        journal at lock-out (§ 639a.1): a claim pays on what was recorded, also after a restart."""
        body = await self._meters.port(meter).booking(meter, rid)
        if body is None:
            if rid in self._open_rounds(meter):
                raise RulesError("claim", f"the booking of round {rid} on meter {meter} is not in the journal under "
                                          f"{booking_key(rid, meter)!r}: its Magic Card and Lucky Bonus cannot be "
                                          "read; settle by hand")
            return Draws()  # nothing booked on the meter: no wager to pay
        return Draws.from_booking(body, booking_key(rid, meter))

    def _open_rounds(self, meter: str) -> Mapping[str, Any]:
        if self._meters.is_linked(meter):
            assert self._meters.linked is not None
            return self._meters.linked.link.outbox.open_rounds.get(meter, {})
        return self._ledger.state[meter].open_rounds


__all__ = ["ClaimRecords"]
