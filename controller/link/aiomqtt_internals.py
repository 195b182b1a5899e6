"""Every reach into aiomqtt's (and paho-mqtt's) private state, in one place.

aiomqtt 2.x gives no handle on the paho-mqtt client under it, no way to bound the size of a packet it reads, no
way to close what a failed connect left open, and reports a timeout only by its message. controller.link.mqtt
needs each of these; they are here, each optional where it can be (None, or nothing done, when the internal is not
there), and tests/shell/test_aiomqtt_internals.py fails as soon as the versions installed change any of them.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiomqtt
import paho.mqtt.client as paho

TIMED_OUT = "Operation timed out"  # aiomqtt's MqttError message for a wait that ran out (client.py)


def paho_of(client: aiomqtt.Client) -> paho.Client | None:
    """The paho-mqtt client inside an aiomqtt client (aiomqtt: `Client._client`), or None."""
    inner = getattr(client, "_client", None)
    return inner if isinstance(inner, paho.Client) else None


def limit_packets(inner: paho.Client, limit: int, too_large: type[OSError]) -> None:
    """Make paho-mqtt drop the connection when a packet it reads announces more than `limit` bytes, before it reads
    them: it reads a packet's body with one receive of all that is left of it (`_sock_recv`, with the announced
    length in `_in_packet["remaining_length"]`), and an OSError from its socket read is a lost connection to it."""
    receive = inner._sock_recv

    def bounded(bufsize: int) -> bytes:
        packet = getattr(inner, "_in_packet", None)
        announced = packet.get("remaining_length", 0) if isinstance(packet, dict) else 0
        if bufsize > limit or announced > limit:
            raise too_large(f"the broker sends a packet of {max(bufsize, announced)} bytes, more than {limit}")
        return receive(bufsize)

    inner._sock_recv = bounded  # type: ignore[method-assign]


def close_socket(inner: paho.Client) -> None:
    """Close the socket paho-mqtt holds (a connect cut short leaves it open)."""
    if inner.socket() is not None:
        with contextlib.suppress(Exception):
            inner._sock_close()


def misc_task(client: aiomqtt.Client) -> asyncio.Task[Any] | None:
    """aiomqtt's housekeeping task of a connection (`Client._misc_task`), which a failed connect may leave running."""
    task = getattr(client, "_misc_task", None)
    return task if isinstance(task, asyncio.Task) else None


def timed_out(e: BaseException) -> bool:
    """Whether aiomqtt reported a wait that ran out (it says so only in the message)."""
    return isinstance(e, aiomqtt.MqttError) and str(e) == TIMED_OUT


__all__ = ["TIMED_OUT", "close_socket", "limit_packets", "misc_task", "paho_of", "timed_out"]
