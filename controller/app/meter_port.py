"""The narrow port through which a table's daemon moves its meters: one kind for the table's own meters (its
ledger), one for its linked meters (the durable outbox to the link authority, controller.link). Bookings,
reversals, closes and every payout of a claim go through the same few calls on either kind, so that every
award, shared ones included, is paid the same way on both.

- `amounts(meter)`: the meter as it stands (units), with its reset amount; a linked meter's as the authority
  last sent it;
- `submit(op, meter, key)`: journal a meter operation under its idempotency key. Local: applied and durable
  on return (the meter's result), or the meter's refusal (RulesError/InputError, nothing journaled), or
  KeyConflict (the key was used for another operation: journaled before). Linked: durable in the outbox on
  return (applied at the authority later, exactly once; a retry under the key is the same operation);
- `lock(op, meter, key, timeout)`: a linked meter's percentage award locked at the authority: its amount in
  cents, or LinkRefused, or TimeoutError (it stays in the outbox: ask again with the same key later);
- `release(op, meter, key)`: give a lock back, if it is held (a lock never sent, or paid or released already, is
  left alone);
- `journaled(meter, key)`, `booking(meter, round_id)`: reads of the journal that keeps the meter, in a thread.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from controller.errors import RulesError
from controller.ledger import Ledger
from controller.ledger.reader import Found, JournalReader, lookup
from controller.link.client import TableLink
from controller.meter.journal import Meters as MeterStates
from controller.meter.journal import op_body
from controller.meter.ops import LockPercentAward, Op, ReleaseLockedAward
from controller.money import UNITS_PER_CENT, parse_cents


class MeterPort(Protocol):
    linked: bool

    def keeps(self, meter: str) -> bool: ...

    def amounts(self, meter: str) -> tuple[int, int]: ...

    async def submit(self, op: Op, meter: str, key: str, approval: dict[str, str] | None = None) -> dict[str, Any]:
        ...

    async def lock(self, op: LockPercentAward, meter: str, key: str, timeout: float) -> tuple[int, int, str]: ...

    async def release(self, op: ReleaseLockedAward, meter: str, key: str, held: bool = False) -> bool: ...

    def pays_later_shares(self) -> bool: ...

    async def journaled(self, meter: str, key: str) -> bool: ...

    async def booking(self, meter: str, round_id: str) -> dict[str, Any] | None: ...

    @property
    def db_path(self) -> Path: ...


class LocalMeters:
    """The table's own meters, in its ledger."""

    linked = False

    def __init__(self, ledger: Ledger[MeterStates]) -> None:
        self.ledger = ledger

    @property
    def db_path(self) -> Path:
        return self.ledger.db_path

    def keeps(self, meter: str) -> bool:
        return meter in self.ledger.state

    def amounts(self, meter: str) -> tuple[int, int]:
        m = self.ledger.state[meter]
        return m.current, m.params.reset_cents * UNITS_PER_CENT

    async def submit(self, op: Op, meter: str, key: str, approval: dict[str, str] | None = None) -> dict[str, Any]:
        receipt = await self.ledger.submit_async(op.kind, op_body(meter, op), key)  # no authority to approve to
        return dict(receipt.result)

    async def lock(self, op: LockPercentAward, meter: str, key: str, timeout: float) -> tuple[int, int, str]:
        raise RulesError("meter", f"meter {meter} is the table's own: its awards are not locked")

    async def release(self, op: ReleaseLockedAward, meter: str, key: str, held: bool = False) -> bool:
        return False  # nothing is locked on a table's own meter

    def pays_later_shares(self) -> bool:
        return True

    async def journaled(self, meter: str, key: str) -> bool:
        return await _found(self.ledger.db_path, key) is not None

    async def booking(self, meter: str, round_id: str) -> dict[str, Any] | None:
        found = await _found(self.ledger.db_path, booking_key(round_id, meter))
        return None if found is None else dict(found.body)


class LinkedMeters:
    """The table's linked meters (§ 605a.8): owned by the link authority, reached through the table's outbox."""

    linked = True

    def __init__(self, link: TableLink) -> None:
        self.link = link

    @property
    def db_path(self) -> Path:
        assert self.link.ledger is not None
        return self.link.ledger.db_path

    def keeps(self, meter: str) -> bool:
        return meter in self.link.linked

    def amounts(self, meter: str) -> tuple[int, int]:
        value = self.link.values.get(self.link.linked[meter])
        if value is None:
            raise RulesError("claim", f"the link authority's meter {self.link.linked[meter]} has not been heard yet")
        return value.cents * UNITS_PER_CENT, value.reset_cents * UNITS_PER_CENT

    async def submit(self, op: Op, meter: str, key: str, approval: dict[str, str] | None = None) -> dict[str, Any]:
        await self.link.send(op, meter, key, approval)
        return {}

    def is_approver(self, name: str) -> bool:
        """Whether the link authority verifies approvals by `name` (as it last said; True when it has not said: it
        is not reached yet, or predates approvals)."""
        return self.link.approvers is None or name in self.link.approvers

    async def pay(self, op: Op, meter: str, key: str, approval: dict[str, str] | None, timeout: float) -> dict[str, Any]:
        """The authority's result of the payment sent under `key` (sent now if it was not: the same key applies
        once); raises client.LinkRefused when the authority refused it (its approval did not verify), TimeoutError when
        it has not answered yet (asked again, it waits for the same payment's answer)."""
        seq = await self.link.send(op, meter, key, approval)
        return await self.link.answer(seq, timeout)

    async def lock(self, op: LockPercentAward, meter: str, key: str, timeout: float) -> tuple[int, int, str]:
        """The amount of the lock sent under `key`, and the lock's number on the meter and nonce (0 and "" from an
        authority that does not number locks); sent now if it was not (the same key applies once); asked again
        after a TimeoutError, it waits for the same lock's answer."""
        seq = await self.link.send(op, meter, key)
        result = await self.link.answer(seq, timeout)
        number, nonce = result.get("lock", 0), result.get("nonce", "")
        if type(number) is not int or not 0 <= number < 2**63 or not isinstance(nonce, str) or len(nonce) > 64:
            raise ValueError(f"lock: {number!r}, {nonce!r} is not a lock's number and nonce")
        return parse_cents(result["amount"], "amount"), number, nonce

    def pays_later_shares(self) -> bool:
        """Whether the authority takes a later share of a shared award (pay-percent-award): it says so."""
        return self.link.accepts("pay-percent-award")

    async def release(self, op: ReleaseLockedAward, meter: str, key: str, held: bool = False) -> bool:
        """Give a lock back to the meter. `held`: the authority confirmed the lock and refused its payment, so it
        holds it still (the outbox let go of it when the payment was sent)."""
        if op.claim not in self.link.outbox.locks and not held:
            return False  # never sent, or paid or released already
        await self.link.send(op, meter, key)
        return True

    async def journaled(self, meter: str, key: str) -> bool:
        return await _found(self.db_path, key) is not None

    async def booking(self, meter: str, round_id: str) -> dict[str, Any] | None:
        found = await _found(self.db_path, booking_key(round_id, meter))
        return None if found is None else dict(found.body["body"])  # the link journal holds the op in its send


def booking_key(round_id: str, meter: str) -> str:
    return f"{round_id}:book:{meter}"


async def _found(db: Path, key: str) -> Found | None:
    return await asyncio.to_thread(lookup, db, key)


class Meters:
    """Every meter of the table, each through its kind's port."""

    def __init__(self, local: LocalMeters, linked: LinkedMeters | None) -> None:
        self.local = local
        self.linked = linked

    def port(self, meter: str) -> MeterPort:
        if self.linked is not None and self.linked.keeps(meter):
            return self.linked
        return self.local

    def is_linked(self, meter: str) -> bool:
        return self.linked is not None and self.linked.keeps(meter)

    def keeps(self, meter: str) -> bool:
        return self.local.keeps(meter) or self.is_linked(meter)

    def ports(self) -> list[MeterPort]:
        return [self.local, *([self.linked] if self.linked is not None else [])]

    async def keys(self, prefix: str) -> list[str]:
        """Every key with `prefix` in the table's journals (its own and its link journal)."""

        def read() -> list[str]:
            out: list[str] = []
            for port in self.ports():
                with JournalReader(port.db_path) as r:
                    out += r.keys(prefix)
            return out

        return await asyncio.to_thread(read)


__all__ = ["LinkedMeters", "LocalMeters", "MeterPort", "Meters", "booking_key"]
