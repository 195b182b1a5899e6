"""The table daemons (docs/architecture.md, "The table daemons"): the shell every table shares (`shell.py`), the
card table (`table.py`) and the dice table (`dice_table.py`), each composed of objects with one job, the handlers of
their control sockets (`handlers.py`), their metrics, and the rules and meters they are set up with (`setup.py`)."""

from controller.app.dice_table import DiceTableDaemon
from controller.app.handlers import CARD_TABLE, DICE_TABLE
from controller.app.heap import freeze_when_ready
from controller.app.metrics import Metrics
from controller.app.setup import award_spots, standalone_meters, table_rules
from controller.app.shell import DaemonFailed, TableShell
from controller.app.table import TableDaemon

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
