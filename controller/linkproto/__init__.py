"""The link's protocol, pure (docs/link-protocol.md): its messages and their schema (`schema.py`), the signed
approval of a linked payment (`approval.py`), the authority's signature on its answers (`signing.py`), how a
table's silence becomes OFFLINE (`liveness.py`), how the authority judges a table's journal anchors
(`anchors.py`). The sessions that carry it are `controller.link` (a table's) and `controller.authority`."""
