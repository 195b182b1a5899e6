"""Exit statuses shared by the programs (sysexits.h where a name fits). A program's own statuses (progressivectl's
1 for no daemon, the rig's 69) stay with it; these mean the same in every one."""

EXIT_BAD_INPUT = 2  # bad input: one line names the field, file or argument
EXIT_INTERNAL = 70  # EX_SOFTWARE: a fault of the program (its traceback is in the log)
EXIT_STORAGE = 74  # EX_IOERR: the journal's disk failed or is full (the ledger exits with it itself)


__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_STORAGE"]
