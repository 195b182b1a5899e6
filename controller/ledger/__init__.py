"""The ledger: an append-only, hash-chained journal in SQLite from which the meters are derived.

    from controller.ledger import Ledger, software_digest
    ledger = Ledger.open("/var/lib/progressive", reducer, software_digest=software_digest())
    receipt = ledger.submit("contribution", {"cents": 500}, key="table-7:1234")  # durable on return
    await ledger.submit_async(...)                                              # the same, for asyncio
    ledger.state                                                                # derived, as of the last COMMIT

See docs/meters.md, section "Ledger".
"""

from controller.errors import InvariantViolation
from controller.exits import EXIT_STORAGE
from controller.ledger.errors import (
                     FatalStorageError,
                     KeyConflict,
                     LedgerBusy,
                     LedgerClosed,
                     LedgerDamaged,
                     LedgerError,
)
from controller.ledger.ledger import Head, Ledger, Startup
from controller.ledger.reducer import Reducer
from controller.ledger.software import software_digest
from controller.ledger.verify import Problem, Report, verify_state_dir
from controller.ledger.writer import Receipt, exit_process

__all__ = [
    "EXIT_STORAGE", "FatalStorageError", "Head", "InvariantViolation", "KeyConflict", "Ledger", "LedgerBusy",
    "LedgerClosed", "LedgerDamaged", "LedgerError", "Problem", "Receipt", "Reducer", "Report", "Startup",
    "exit_process", "software_digest", "verify_state_dir",
]
