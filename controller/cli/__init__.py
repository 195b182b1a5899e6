"""The command lines: `progressived` (`daemon.py`) and `progressivectl` (`ctl.py`, its command groups one module
each). Each is imported by its module's name; the package exports nothing of its own."""

__all__: list[str] = []  # its modules are imported by name
