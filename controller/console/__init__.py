"""The pit's web console (`progressive-console`, docs/console.md): a process of its own that talks to the table
daemon over the control socket and serves the floor a page of the table's meters, round, devices, pending
claims and hit history. `page` renders from what the daemon answered (pure); `server` is the shell."""

__all__: list[str] = []  # its modules are imported by name
