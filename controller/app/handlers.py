"""The control socket's operations as each daemon answers them: one function per operation, looked up by its name
in the daemon's table (CARD_TABLE, DICE_TABLE). What they take is declared in operations.py and checked before a
handler runs (TableShell.call); docs/operations.md has their arguments and results. A refusal is raised to the
asker (InputError, RulesError, PermissionError, NotAvailable), never swallowed here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from controller.app.claim_desk import ClaimDesk
from controller.app.journal import RoundJournal
from controller.app.shoe import Shoe
from controller.config.model import TableConfig
from controller.errors import InputError, RulesError
from controller.ledger import Ledger
from controller.meter.journal import Meters
from controller.report.day import parse_span
from controller.round import model as rm
from controller.service.auth import SupervisorCheck
from controller.service.control import PEER, NotAvailable
from controller.service.reports import MeterSeries
from controller.service.views import hit_json, hit_kind, meter_json

Handler = Callable[[Any, dict[str, Any]], Awaitable[Any]]  # (the daemon, the request's arguments) -> the answer
Args = dict[str, Any]


# What a daemon gives its handlers, as protocols: the daemons (controller.app.table, dice_table) import this
# module, never the other way round.
class Table(Protocol):
    """Every table daemon (controller.app.shell.TableShell)."""

    @property
    def cfg(self) -> TableConfig: ...

    def status(self) -> dict[str, Any]: ...

    def round_info(self) -> dict[str, Any]: ...

    async def supervisor(self, args: dict[str, Any]) -> str: ...


class CardTable(Table, Protocol):
    """The card table (controller.app.table.TableDaemon): its round, journal, claims and shoe."""

    @property
    def ledger(self) -> Ledger[Meters] | None: ...

    @property
    def state(self) -> rm.TableState | None: ...

    @property
    def desk(self) -> ClaimDesk | None: ...

    @property
    def journal(self) -> RoundJournal | None: ...

    @property
    def shoe(self) -> Shoe | None: ...

    @property
    def series(self) -> MeterSeries: ...

    @property
    def supervisors(self) -> SupervisorCheck: ...

    def act(self, event: rm.Input) -> None: ...

    def round_id(self) -> str: ...

    def paid_refusal(self) -> str | None: ...

    def void(self, reason: str) -> None: ...


class DiceTable(Table, Protocol):
    """The dice table (controller.app.dice_table.DiceTableDaemon)."""

    def block_closed(self, who: str, closed: bool) -> None: ...


# --- every table -------------------------------------------------------------------------------------

async def status(d: Table, args: Args) -> Any:
    return d.status()


async def round_info(d: Table, args: Args) -> Any:
    return d.round_info()


async def authenticate(d: Table, args: Args) -> Any:
    return {"supervisor": await d.supervisor(args)}


def _reason(args: Args, why: str) -> str:
    reason = args.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise InputError("reason", why)
    return reason


# --- the card table ----------------------------------------------------------------------------------

async def meters(d: CardTable, args: Args) -> Any:
    assert d.ledger is not None
    return [meter_json(s) for _m, s in sorted(d.ledger.state.items())]


async def history(d: CardTable, args: Args) -> Any:
    """As `history --state` reads it from the journal; with kinds, what each payout is."""
    assert d.ledger is not None
    kinds = args.get("kinds") is True
    return [hit_json(m, h, hit_kind(d.cfg, m, h) if kinds else None)
            for m, s in sorted(d.ledger.state.items()) for h in s.history]


async def meter_series(d: CardTable, args: Args) -> Any:
    return await d.series.answer(args)


async def settle(d: CardTable, args: Args) -> Any:
    who = await d.supervisor(args) if "supervisor" in args else None
    assert d.state is not None and d.desk is not None and d.shoe is not None and d.journal is not None
    round_id = args.get("round_id")
    rid = d.round_id()
    if round_id != rid:
        shown = round_id if isinstance(round_id, str) else repr(round_id)
        raise RulesError("round_id", f"round {shown} is not the current round {rid}")
    left = await d.shoe.unclaimed(rid)
    why = d.desk.refusal_to_settle()
    if left:  # named, whatever else holds the round: a settle never drops them
        hits = "; ".join(h.describe() for h in left)
        unclaimed = (f"the shoe's detected hit{'s' if len(left) > 1 else ''} of round {rid} not claimed yet: "
                     f"{hits} (claimed one at a time, each after the one before is settled; or a supervisor "
                     "voids the round)")
        why = f"{why}; then {unclaimed}" if why else unclaimed
    if why is not None:
        raise RulesError("round_id", why)
    if who is not None and d.state.void_requested is not None and d.paid_refusal() is None:
        raise RulesError("round_id", f"round {rid} is to be voided ({d.state.void_requested}) and can be: a "
                                     "supervisor settles such a round only where its void cannot be (an award "
                                     "of it was paid)")
    wagers = len(d.state.accepted)
    d.act(rm.RoundSettled(rid, who))
    await d.journal.durable(rid)
    counted = f"{wagers} wager" + ("" if wagers == 1 else "s")
    return {"message": f"round {rid} settled ({counted}); round {d.round_id()} open for betting"}


async def void(d: CardTable, args: Args) -> Any:
    who = await d.supervisor(args)
    reason = _reason(args, "say why the round is voided")
    assert d.state is not None and d.desk is not None and d.journal is not None
    rid = d.round_id()
    if "round_id" in args and args["round_id"] != rid:  # checked after the secret's hash
        shown = args["round_id"] if isinstance(args["round_id"], str) else repr(args["round_id"])
        raise RulesError("round_id", f"round {shown} is not the current round {rid}: nothing voided")
    wagers = len(d.state.accepted)
    voided = [c.id for c in d.desk.state.claims if c.status in ("locking", "pending")]
    d.void(f"{reason} (by {who})")
    await d.journal.durable(rid)
    if d.round_id() == rid:  # the meter refused the reversal: the round is dealt again
        raise RulesError("round_id", f"round {rid} was not voided: the meter refused to reverse it (the log says "
                                     "why); it is dealt again")
    claims = f"; claims voided with it: {', '.join(voided)}" if voided else ""
    return {"message": f"round {rid} voided: {wagers} wagers returned{claims}", "claims_voided": voided}


async def deck_replaced(d: CardTable, args: Args) -> Any:
    who = await d.supervisor(args)
    assert d.journal is not None
    d.act(rm.DeckReplaced(who))
    await d.journal.kept_durable()
    return {"message": f"new deck confirmed by {who}"}


async def stub_count(d: CardTable, args: Args) -> Any:
    """The dealer's stub count (§ 667a.8(f)); with a supervisor's credential, the supervisor's recount."""
    who = await d.supervisor(args) if "supervisor" in args else None
    assert d.journal is not None
    d.act(rm.StubCounted(args.get("stub"), args.get("dealt"), who))
    await d.journal.kept_durable()
    assert d.state is not None
    if not d.state.blocks.get(rm.Block.DECK):
        return {"message": "stub count recorded: 52 cards", "deck_ok": True}
    if d.state.void_requested is not None:
        return {"message": f"stub count wrong: wagering is disabled and round {d.round_id()} is to be voided "
                           "(§ 667a.8(h)): a supervisor confirms the void (progressivectl void), or recounts",
                "deck_ok": False, "void_requested": True}
    return {"message": "stub count wrong: the deck is removed (§ 667a.8(h))", "deck_ok": False}


async def close_table(d: CardTable, args: Args) -> Any:
    who = await d.supervisor(args)
    d.act(rm.BlockRaised(rm.Block.CLOSED, who))
    return {"message": f"table {d.cfg.table} closed by {who}: no progressive wagers"}


async def open_table(d: CardTable, args: Args) -> Any:
    who = await d.supervisor(args)
    assert d.state is not None
    for holder in list(d.state.blocks.get(rm.Block.CLOSED, ())):
        d.act(rm.BlockCleared(rm.Block.CLOSED, holder))
    return {"message": f"table {d.cfg.table} opened by {who}"}


async def claim(d: CardTable, args: Args) -> Any:
    assert d.desk is not None
    return await d.desk.claim(args)


async def approve(d: CardTable, args: Args) -> Any:
    assert d.desk is not None
    if d.desk.needs_approval_key(args.get("claim_id")):  # a linked meter: the authority verifies it
        who, key = await d.supervisors.check_and_derive(args.get("supervisor"), args.get("secret"),
                                                        PEER.get().get("peer_uid"))
        return await d.desk.approve(args.get("claim_id"), who, key)
    who = await d.supervisor(args)
    return await d.desk.approve(args.get("claim_id"), who)


async def reject(d: CardTable, args: Args) -> Any:
    reason = _reason(args, "say why the claim is rejected")
    who = await d.supervisor(args)
    assert d.desk is not None
    return await d.desk.reject(args.get("claim_id"), who, reason)


CARD_TABLE: Mapping[str, Handler] = {
    "status": status, "round": round_info, "meters": meters, "history": history, "meter_series": meter_series,
    "settle": settle, "void": void, "deck_replaced": deck_replaced, "stub_count": stub_count,
    "close_table": close_table, "open_table": open_table, "claim": claim, "approve": approve, "reject": reject,
    "authenticate": authenticate,
}


# --- the dice table ----------------------------------------------------------------------------------

async def no_meters(d: DiceTable, args: Args) -> Any:
    return []  # no meter at a dice table


async def no_meter_series(d: DiceTable, args: Args) -> Any:
    parse_span(args.get("span"), "span")  # a wrong span is refused here as at a card table
    return []


async def close_dice_table(d: DiceTable, args: Args) -> Any:
    who = await d.supervisor(args)
    d.block_closed(who, True)
    return {"message": f"table {d.cfg.table} closed by {who}: no new dice wagers recognized"}


async def open_dice_table(d: DiceTable, args: Args) -> Any:
    who = await d.supervisor(args)
    d.block_closed(who, False)
    return {"message": f"table {d.cfg.table} opened by {who}"}


def _card_table_only(op: str) -> Handler:
    async def refuse(d: DiceTable, args: Args) -> Any:
        raise NotAvailable(f"{op}: not at a dice table ({d.cfg.game.title}): the table pays its dice wagers at the "
                           "paytable's odds, without rounds, meters or claims")
    return refuse


CARD_TABLE_OPS = ("settle", "void", "deck_replaced", "stub_count", "claim", "approve", "reject")

DICE_TABLE: Mapping[str, Handler] = {
    "status": status, "round": round_info, "meters": no_meters, "history": no_meters,
    "meter_series": no_meter_series, "authenticate": authenticate, "close_table": close_dice_table,
    "open_table": open_dice_table, **{op: _card_table_only(op) for op in CARD_TABLE_OPS},
}


__all__ = ["CARD_TABLE", "CARD_TABLE_OPS", "DICE_TABLE", "CardTable", "DiceTable", "Handler", "Table"]
