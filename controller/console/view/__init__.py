"""The console's pages as pure functions of what a daemon answered: a table's page (`page.py`) and, at a link
authority, the floor view (`floor.py`). No I/O; the server (`controller.console.server`) fetches and serves."""

__all__: list[str] = []  # its modules are imported by name
