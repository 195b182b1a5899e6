"""The tests' broker (tests/support/broker.py) when the free port it chose is taken before it listens: many tests
pick ports at once, and one run lost a test to "Address already in use". A first start moves to another port; it
reports started only once Mosquitto itself listens (not whatever else holds the port)."""

from __future__ import annotations

import socket
from pathlib import Path

from broker import Broker, require_mosquitto


def test_a_first_start_whose_port_was_taken_moves_to_another(tmp_path: Path) -> None:
    require_mosquitto()
    b = Broker(tmp_path, ["t1"])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", b.port))  # another process took it meanwhile
        busy.listen()
        taken = b.port
        b.start()
        try:
            assert b.port != taken and b.proc is not None and b.proc.poll() is None
            with socket.create_connection((b.host, b.port), timeout=5):
                pass
        finally:
            b.stop()
