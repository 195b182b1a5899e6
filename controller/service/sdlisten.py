"""sd_listen_fds(3) in a few lines: the listening sockets systemd passed (socket activation).

A ``.socket`` unit opens the port and holds it while the service is down; the service inherits it as fd 3
onward, with ``$LISTEN_FDS`` (how many) and ``$LISTEN_PID`` (for which process: a child that inherited the
environment must not take them). The variables are unset once read, as sd_listen_fds(unset_environment=1) does.
"""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping

FIRST_FD = 3  # SD_LISTEN_FDS_START
_NAMES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def listen_fds(env: MutableMapping[str, str] | None = None) -> list[int]:
    """The inherited descriptors (none when not socket-activated, or activated for another process); each made
    close-on-exec. ValueError naming the variable when they are malformed."""
    env = os.environ if env is None else env
    pid, count = env.get("LISTEN_PID"), env.get("LISTEN_FDS")
    for name in _NAMES:
        env.pop(name, None)
    if pid is None and count is None:
        return []
    if pid is None or not pid.isdigit():
        raise ValueError(f"LISTEN_PID={pid!r}: not a process id")
    if int(pid) != os.getpid():
        return []  # meant for the process that ran us
    if count is None or not count.isdigit() or not 1 <= int(count) <= 64:
        raise ValueError(f"LISTEN_FDS={count!r}: not a count of sockets")
    fds = list(range(FIRST_FD, FIRST_FD + int(count)))
    for fd in fds:
        try:
            os.set_inheritable(fd, False)
        except OSError as e:
            raise ValueError(f"LISTEN_FDS={count}: fd {fd} is not open ({e.strerror})") from None
    return fds


def tcp_listener(fd: int) -> socket.socket:
    """The socket of `fd` if it is a listening TCP stream socket (IPv4 or IPv6); ValueError saying what it is
    otherwise (the descriptor is then left alone)."""
    try:
        copy = os.dup(fd)
    except OSError as e:
        raise ValueError(f"fd {fd}: not open ({e.strerror})") from None
    try:
        probe = socket.socket(fileno=copy)
    except OSError as e:
        os.close(copy)
        raise ValueError(f"fd {fd}: not a socket ({e.strerror})") from None
    with probe:
        if probe.family not in (socket.AF_INET, socket.AF_INET6) or probe.type != socket.SOCK_STREAM:
            raise ValueError(f"fd {fd}: not a TCP stream socket ({probe.family.name}, {probe.type.name})")
        if not probe.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise ValueError(f"fd {fd}: a TCP socket that is not listening")
    return socket.socket(fileno=fd)


__all__ = ["FIRST_FD", "listen_fds", "tcp_listener"]
