"""Linked progressives: one meter shared by many tables through a link authority (§ 605a.8)."""

from typing import TYPE_CHECKING

from controller.exports import lazy_exports

if TYPE_CHECKING:
    from controller.link.client import TableLink
    from controller.link.journal_keys import last_link_seqs
    from controller.link.mqtt import LinkDown, LinkError, MqttLink, MqttSettings, MqttSettingsError
    from controller.link.outbox import Outbox, OutboxReducer
    from controller.link.sender import LinkRefused

_EXPORTS = {
    "LinkDown": "mqtt",
    "LinkError": "mqtt",
    "LinkRefused": "sender",
    "MqttLink": "mqtt",
    "MqttSettings": "mqtt",
    "MqttSettingsError": "mqtt",
    "Outbox": "outbox",
    "OutboxReducer": "outbox",
    "TableLink": "client",
    "last_link_seqs": "journal_keys",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)  # each name imported when first asked for

__all__ = [
    "LinkDown",
    "LinkError",
    "LinkRefused",
    "MqttLink",
    "MqttSettings",
    "MqttSettingsError",
    "Outbox",
    "OutboxReducer",
    "TableLink",
    "last_link_seqs",
]
