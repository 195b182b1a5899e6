"""The link's idempotency keys in a journal: ``link:<table>:<seq>`` for each table's operation at the authority.

The link authority learns from its journal which operation of each table it applied last (the journal is
read through controller.ledger.reader).
"""

from __future__ import annotations

from controller.ledger.reader import JournalReader
from controller.linkproto.schema import LINK_KEY_PREFIX as PREFIX


def last_link_seqs(reader: JournalReader) -> dict[str, int]:
    """table -> the highest sequence number of its operations in the journal."""
    last: dict[str, int] = {}
    for key in reader.keys(PREFIX):
        table, _, seq = key[len(PREFIX):].rpartition(":")
        if table and seq.isdigit():
            last[table] = max(last.get(table, 0), int(seq))
    return last


__all__ = ["last_link_seqs"]
