"""The link's protocol, pure (docs/link-protocol.md): its messages and their schema (`schema.py`), the signed
approval of a linked payment (`approval.py`), the authority's signature on its answers (`signing.py`), how a
table's silence becomes OFFLINE (`liveness.py`), how the authority judges a table's journal anchors
(`anchors.py`). The sessions that carry it are `controller.link` (a table's) and `controller.authority`."""

from typing import TYPE_CHECKING

from controller.exports import lazy_exports

if TYPE_CHECKING:
    from controller.linkproto.anchors import TableAnchors, Verdict, judge
    from controller.linkproto.approval import approval_key, lock_terms
    from controller.linkproto.liveness import Liveness
    from controller.linkproto.schema import (
        Ack,
        Expect,
        Hello,
        Message,
        Op,
        Refused,
        SchemaError,
        Topics,
        decode,
        encode,
        op_digest,
    )
    from controller.linkproto.signing import Signer, Verifier

_EXPORTS = {
    "Ack": "schema",
    "Expect": "schema",
    "Hello": "schema",
    "Liveness": "liveness",
    "Message": "schema",
    "Op": "schema",
    "Refused": "schema",
    "SchemaError": "schema",
    "Signer": "signing",
    "TableAnchors": "anchors",
    "Topics": "schema",
    "Verdict": "anchors",
    "Verifier": "signing",
    "approval_key": "approval",
    "decode": "schema",
    "encode": "schema",
    "judge": "anchors",
    "lock_terms": "approval",
    "op_digest": "schema",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)  # each name imported when first asked for

__all__ = [
    "Ack",
    "Expect",
    "Hello",
    "Liveness",
    "Message",
    "Op",
    "Refused",
    "SchemaError",
    "Signer",
    "TableAnchors",
    "Topics",
    "Verdict",
    "Verifier",
    "approval_key",
    "decode",
    "encode",
    "judge",
    "lock_terms",
    "op_digest",
]
