"""Linked progressives: one meter shared by many tables through a link authority (§ 605a.8)."""

from controller.link.client import LinkRefused, TableLink
from controller.link.journal_keys import last_link_seqs
from controller.link.mqtt import LinkDown, LinkError, MqttLink, MqttSettings, MqttSettingsError
from controller.link.outbox import Outbox, OutboxReducer

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
