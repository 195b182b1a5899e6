"""The table daemons (docs/architecture.md, "The table daemons"): the shell every table shares (`shell.py`), the
card table (`table.py`) and the dice table (`dice_table.py`), each composed of objects with one job, the handlers of
their control sockets (`handlers.py`), their metrics, and the rules and meters they are set up with (`setup.py`)."""

from typing import TYPE_CHECKING

from controller.exports import lazy_exports

if TYPE_CHECKING:
    from controller.app.dice_table import DiceTableDaemon
    from controller.app.handlers import CARD_TABLE, DICE_TABLE
    from controller.app.heap import freeze_when_ready
    from controller.app.metrics import Metrics
    from controller.app.setup import award_spots, standalone_meters, table_rules
    from controller.app.shell import DaemonFailed, TableShell
    from controller.app.table import TableDaemon

_EXPORTS = {
    "CARD_TABLE": "handlers",
    "DICE_TABLE": "handlers",
    "DaemonFailed": "shell",
    "DiceTableDaemon": "dice_table",
    "Metrics": "metrics",
    "TableDaemon": "table",
    "TableShell": "shell",
    "award_spots": "setup",
    "freeze_when_ready": "heap",
    "standalone_meters": "setup",
    "table_rules": "setup",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)  # each name imported when first asked for

__all__ = [
    "CARD_TABLE",
    "DICE_TABLE",
    "DaemonFailed",
    "DiceTableDaemon",
    "Metrics",
    "TableDaemon",
    "TableShell",
    "award_spots",
    "freeze_when_ready",
    "standalone_meters",
    "table_rules",
]
