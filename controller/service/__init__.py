"""What every process of the shell serves, below the daemons that use them (`controller.app`,
`controller.authority`, `controller.console`): the control socket and its client (`control.py`), the declared
operations (`operations.py`), supervisors' secrets and approvals (`auth.py`), logging (`logs.py`), the journal's
anchoring (`anchoring.py`), the day's reports on their schedule and the files they write (`reports.py`,
`report_files.py`), the JSON views of meters (`views.py`), systemd's notify and socket activation
(`sdnotify.py`, `sdlisten.py`)."""
