"""The reaches into aiomqtt's and paho-mqtt's private state (controller/link/aiomqtt_internals.py) against the
versions installed: this fails as soon as an upgrade renames or reshapes one of them, before the link quietly
loses the size limit, the clean-up of a failed connect, or its reading of a timeout."""

from __future__ import annotations

import inspect

import aiomqtt
import paho.mqtt.client as paho
import pytest

from controller.link import aiomqtt_internals as internals


async def test_the_paho_client_inside_aiomqtt_is_found():
    client = aiomqtt.Client("127.0.0.1", 1883, identifier="t")  # made in a running loop, as the link makes it
    inner = internals.paho_of(client)
    assert isinstance(inner, paho.Client)
    assert internals.misc_task(client) is None  # no connection yet: no housekeeping task
    assert "_misc_task" in vars(client)  # the attribute the clean-up reads exists on this version


def test_the_packet_size_limit_hooks_paho_mqtts_socket_read():
    inner = paho.Client(paho.CallbackAPIVersion.VERSION2)
    assert callable(getattr(inner, "_sock_recv", None)) and callable(getattr(inner, "_sock_close", None))
    assert isinstance(inner._in_packet, dict) and "remaining_length" in inner._in_packet

    class TooLarge(OSError):
        pass

    reads = []
    inner._sock_recv = lambda n: reads.append(n) or b""  # type: ignore[method-assign]
    internals.limit_packets(inner, 100, TooLarge)
    assert inner._sock_recv(100) == b"" and reads == [100]
    with pytest.raises(TooLarge, match="a packet of 101 bytes, more than 100"):
        inner._sock_recv(101)
    inner._in_packet["remaining_length"] = 5000  # announced before its body is read
    with pytest.raises(TooLarge, match="5000 bytes"):
        inner._sock_recv(1)
    internals.close_socket(inner)  # no socket: nothing to do, nothing raised


def test_aiomqtt_still_says_a_wait_ran_out_with_these_words():
    import aiomqtt.client

    assert f'"{internals.TIMED_OUT}"' in inspect.getsource(aiomqtt.client)
    assert internals.timed_out(aiomqtt.MqttError(internals.TIMED_OUT))
    assert not internals.timed_out(aiomqtt.MqttError("Disconnected")) and not internals.timed_out(TimeoutError())
