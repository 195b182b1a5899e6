"""What every process of the shell serves, below the daemons that use them (`controller.app`,
`controller.authority`, `controller.console`): the control socket and its client (`control.py`), the declared
operations (`operations.py`), supervisors' secrets and approvals (`auth.py`), logging (`logs.py`), the journal's
anchoring (`anchoring.py`), the day's reports on their schedule and the files they write (`reports.py`,
`report_files.py`), the JSON views of meters (`views.py`), systemd's notify and socket activation
(`sdnotify.py`, `sdlisten.py`)."""

from typing import TYPE_CHECKING

from controller.exports import lazy_exports

if TYPE_CHECKING:
    from controller.service.anchoring import Anchoring
    from controller.service.auth import SupervisorCheck
    from controller.service.control import (
        ControlClient,
        ControlError,
        ControlServer,
        DaemonUnavailable,
        NotAvailable,
        UnknownOp,
        socket_path,
    )
    from controller.service.logs import configure
    from controller.service.operations import AUTHORITY_OPERATIONS, OPERATIONS, Operation, check_arguments
    from controller.service.reports import DayReports, MeterSeries
    from controller.service.sdnotify import Notifier

_EXPORTS = {
    "AUTHORITY_OPERATIONS": "operations",
    "OPERATIONS": "operations",
    "Anchoring": "anchoring",
    "ControlClient": "control",
    "ControlError": "control",
    "ControlServer": "control",
    "DaemonUnavailable": "control",
    "DayReports": "reports",
    "MeterSeries": "reports",
    "NotAvailable": "control",
    "Notifier": "sdnotify",
    "Operation": "operations",
    "SupervisorCheck": "auth",
    "UnknownOp": "control",
    "check_arguments": "operations",
    "configure": "logs",
    "socket_path": "control",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)  # each name imported when first asked for

__all__ = [
    "AUTHORITY_OPERATIONS",
    "OPERATIONS",
    "Anchoring",
    "ControlClient",
    "ControlError",
    "ControlServer",
    "DaemonUnavailable",
    "DayReports",
    "MeterSeries",
    "NotAvailable",
    "Notifier",
    "Operation",
    "SupervisorCheck",
    "UnknownOp",
    "check_arguments",
    "configure",
    "socket_path",
]
