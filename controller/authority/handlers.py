"""The link authority's control socket (docs/operations.md): one function per operation, looked up by its name in
AUTHORITY, what each takes checked against its declaration (controller.service.operations, AUTHORITY_OPERATIONS)
before it runs. Reads, a supervisor's login for the console, and the clearing of a planted anchor on a supervisor's
secret: nothing on it moves a meter. A refusal is raised to the asker, never swallowed here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from controller.authority.table_anchors import AnchorKeeper
from controller.errors import InputError
from controller.ledger import Ledger
from controller.meter.journal import Meters
from controller.service.control import NotAvailable, UnknownOp
from controller.service.operations import AUTHORITY_OPERATIONS, OPERATIONS, check_arguments
from controller.service.reports import MeterSeries
from controller.service.views import meter_json

Args = dict[str, Any]


class Authority(Protocol):
    """What the handlers ask of the link authority (controller.authority.authority.LinkAuthority), which imports
    this module, never the other way round."""

    @property
    def tables(self) -> tuple[str, ...]: ...

    @property
    def ledger(self) -> Ledger[Meters] | None: ...

    @property
    def series(self) -> MeterSeries: ...

    @property
    def keeper(self) -> AnchorKeeper | None: ...

    def status(self) -> dict[str, Any]: ...

    async def supervisor(self, args: Args) -> str: ...


Handler = Callable[[Authority, Args], Awaitable[Any]]  # (the authority, the request's arguments) -> the answer


async def call(d: Authority, op: str, args: Args) -> Any:
    """A request: an operation a table's socket offers is not available here, one nobody offers unknown; its
    arguments checked; nothing answered while the journal is not open."""
    if op not in AUTHORITY_OPERATIONS:
        if op in OPERATIONS:
            raise NotAvailable(f"{op}: not offered by the link authority: its socket answers "
                               f"{', '.join(AUTHORITY_OPERATIONS)} only (it moves no meter)")
        raise UnknownOp(op)
    check_arguments(op, args, AUTHORITY_OPERATIONS)
    if d.ledger is None:
        raise NotAvailable("the link authority is not running its journal (starting or stopping)")
    return await AUTHORITY[op](d, args)


async def status(d: Authority, args: Args) -> Any:
    return d.status()


async def meters(d: Authority, args: Args) -> Any:
    assert d.ledger is not None
    return [meter_json(s) for _m, s in sorted(d.ledger.state.items())]


async def meter_series(d: Authority, args: Args) -> Any:
    """The linked meters' plots, from the authority's journal as a table's from its own."""
    return await d.series.answer(args)


async def authenticate(d: Authority, args: Args) -> Any:
    """The console's login: it opens the page only; nothing here approves or moves."""
    return {"supervisor": await d.supervisor(args)}


async def clear_anchor(d: Authority, args: Args) -> Any:
    """A supervisor clears the anchor kept aside for a table (planted far ahead), journaled with their name: the
    arguments are checked before the secret is, what is kept aside after."""
    table, seq = args.get("table"), args.get("seq")
    if not isinstance(table, str) or table not in d.tables:
        raise InputError("table", f"{table!r} is not a table of this authority ({', '.join(d.tables)})")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq < 2**63:
        raise InputError("seq", "must be the entry number of the anchor kept aside (status: anchor_suspect.seq)")
    who = await d.supervisor(args)
    if d.keeper is None:
        raise NotAvailable("the link authority is not running its journal (starting or stopping)")
    return await d.keeper.clear(table, seq, who)


AUTHORITY: Mapping[str, Handler] = {
    "status": status, "meters": meters, "meter_series": meter_series, "authenticate": authenticate,
    "clear_anchor": clear_anchor,
}


__all__ = ["AUTHORITY", "Args", "Authority", "Handler", "call"]
