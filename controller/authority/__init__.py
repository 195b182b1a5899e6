"""The link authority's process (docs/link-protocol.md): it applies every linked table's meter operations once,
in the order each table numbered them, journals them, signs its answers, and serves its control socket. Its
objects, one job each, are listed in docs/architecture.md ("The link authority").

It sits beside `controller.app` (the table daemons) and imports only downward: the link's protocol
(`controller.linkproto`), the MQTT session (`controller.link`), the shell's services (`controller.service`),
the journal (`controller.ledger`) and its configuration (`controller.config.authority`)."""

from typing import TYPE_CHECKING

from controller.exports import lazy_exports

if TYPE_CHECKING:
    from controller.authority.authority import LinkAuthority
    from controller.authority.metrics import AuthorityMetrics

_EXPORTS = {
    "AuthorityMetrics": "metrics",
    "LinkAuthority": "authority",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)  # each name imported when first asked for

__all__ = [
    "AuthorityMetrics",
    "LinkAuthority",
]
