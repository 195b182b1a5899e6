"""sd_notify over a real Unix datagram socket, as systemd provides it."""

from __future__ import annotations

import os
import socket

from controller.service.sdnotify import Notifier, watchdog_interval


def test_messages_reach_the_socket(tmp_path):
    path = str(tmp_path / "notify")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind(path)
    srv.settimeout(5)
    n = Notifier(path)
    try:
        assert n.ready("serving table t1")
        assert srv.recv(4096) == b"READY=1\nSTATUS=serving table t1"
        assert n.watchdog()
        assert srv.recv(4096) == b"WATCHDOG=1"
        assert n.stopping()
        assert srv.recv(4096) == b"STOPPING=1"
    finally:
        n.close()
        srv.close()


def test_abstract_socket_name():
    name = f"progressive-test-{os.getpid()}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    srv.bind("\0" + name)
    srv.settimeout(5)
    n = Notifier("@" + name)
    try:
        assert n.status("up")
        assert srv.recv(4096) == b"STATUS=up"
    finally:
        n.close()
        srv.close()


def test_without_systemd_nothing_happens(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    n = Notifier()
    assert not n.enabled and n.ready() and n.watchdog()


def test_a_vanished_socket_is_reported_not_raised(tmp_path):
    n = Notifier(str(tmp_path / "gone"))
    assert n.ready() is False
    n.close()


def test_watchdog_interval_is_half_of_the_timeout():
    assert watchdog_interval({"WATCHDOG_USEC": "20000000"}) == 10.0
    assert watchdog_interval({"WATCHDOG_USEC": "20000000", "WATCHDOG_PID": str(os.getpid())}) == 10.0
    assert watchdog_interval({"WATCHDOG_USEC": "20000000", "WATCHDOG_PID": "1"}) is None
    assert watchdog_interval({}) is None
    assert watchdog_interval({"WATCHDOG_USEC": "x"}) is None
