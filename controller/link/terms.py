"""What the link authority takes from a table, as its `expect` said in answer to the table's `hello`.

At each connection (and when the authority says it is `online` again: it restarted, perhaps with another version
or other approvers) the table says hello with a new random nonce; the authority's `expect` names it, and says which
kinds of operations and messages it takes and whose approvals of linked payments it verifies. An expect that names
no recent hello of this table (a recorded one played back) is not taken.
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable

from controller.link.rejections import Rejections
from controller.linkproto import schema

HELLO_EVERY_S = 1.0  # hellos at the authority's `online` status, at most this often
HELLO_NONCES = 8  # hellos of this table whose `expect` is still taken (the authority may answer an older one late)


class AuthorityTerms:
    """The table's hellos and the terms of the authority's last expect: the kinds it takes (`accepts`; an older
    authority, or one not heard yet, takes BASE_OPS only) and the supervisors whose approvals it verifies."""

    def __init__(self, table: str, rejections: Rejections, *, clock: Callable[[], float]) -> None:
        self.table, self.rejections, self.clock = table, rejections, clock
        self.kinds: frozenset[str] = schema.BASE_OPS
        # Whose approvals of payments the authority verifies, as it last said (None: not heard yet, or an older
        # authority that verifies none).
        self.approvers: frozenset[str] | None = None
        self._nonces: deque[str] = deque(maxlen=HELLO_NONCES)  # this connection's hellos, newest last
        self._hello_at = -HELLO_EVERY_S  # when the last hello at the authority's `online` status was said
        self._deferred = False  # a hello owed to an `online` status heard too soon after the last

    def accepts(self, kind: str) -> bool:
        """Whether the authority, as last heard, takes operations or messages of `kind`."""
        return kind in self.kinds

    def hello(self, next_seq: int) -> schema.Hello:
        """A new hello, its nonce kept for the expect that answers it."""
        nonce = secrets.token_hex(16)
        self._nonces.append(nonce)
        return schema.Hello(self.table, next_seq, nonce)

    def hello_due(self) -> bool:
        """At the authority's `online` status: whether to say hello again now (at most every HELLO_EVERY_S, however
        often a status is played back)."""
        now = self.clock()
        if now - self._hello_at < HELLO_EVERY_S:
            return False
        self._hello_at = now
        return True

    def defer_hello(self) -> float | None:
        """At an `online` status when no hello is due (the authority restarted within HELLO_EVERY_S of the last):
        the seconds until one is, for the one hello owed however many statuses come meanwhile (None: one is owed
        already). Without it, a restart that quick left the table with the terms of the authority before it."""
        if self._deferred:
            return None
        self._deferred = True
        return max(0.0, self._hello_at + HELLO_EVERY_S - self.clock())

    def deferred_hello_due(self) -> None:
        """The owed hello is said now."""
        self._deferred = False
        self._hello_at = self.clock()

    def answers_hello(self, expect: schema.Expect) -> bool:
        """Whether `expect` answers a recent hello of this table; rejected as played back when not."""
        if expect.hello in self._nonces:
            return True
        self.rejections.reject("played_back", "an expect that answers no hello of this table: not taken",
                               hello=expect.hello)
        return False

    def take(self, expect: schema.Expect) -> None:
        """The terms of an expect that answers a hello (`answers_hello`)."""
        self.kinds = expect.kinds if expect.kinds is not None else schema.BASE_OPS
        self.approvers = expect.approvers


__all__ = ["HELLO_EVERY_S", "HELLO_NONCES", "AuthorityTerms"]
