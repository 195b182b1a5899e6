"""The authority's terms are taken only from an expect that answers a recent hello of this table."""

from __future__ import annotations

import pytest

from controller.link.rejections import Rejections
from controller.link.terms import HELLO_EVERY_S, HELLO_NONCES, AuthorityTerms
from controller.linkproto import schema


def terms(ticks: list[float]) -> AuthorityTerms:
    return AuthorityTerms("cs-01", Rejections("cs-01"), clock=lambda: ticks[0])


def test_an_authority_not_heard_yet_takes_the_base_operations_only():
    t = terms([0.0])
    assert all(t.accepts(k) for k in schema.BASE_OPS) and not t.accepts("floor") and t.approvers is None


def test_the_expect_to_a_hello_sets_what_the_authority_takes():
    t = terms([0.0])
    hello = t.hello(12)
    assert (hello.table, hello.next_seq) == ("cs-01", 12) and hello.nonce != t.hello(12).nonce
    expect = schema.Expect(12, frozenset({*schema.BASE_OPS, "floor"}), hello=hello.nonce,
                           approvers=frozenset({"floor-1"}))
    assert t.answers_hello(expect)
    t.take(expect)
    assert t.accepts("floor") and t.approvers == {"floor-1"}
    t.take(schema.Expect(12, None, hello=hello.nonce))  # an older authority's
    assert t.kinds == schema.BASE_OPS and t.approvers is None


def test_an_expect_to_no_recent_hello_is_played_back():
    t = terms([0.0])
    first = t.hello(1)
    for _ in range(HELLO_NONCES):
        t.hello(1)
    assert not t.answers_hello(schema.Expect(1, None, hello=first.nonce))  # too old
    assert not t.answers_hello(schema.Expect(1, None, hello="recorded"))
    assert t.rejections.counts == {"played_back": 2}


def test_hellos_at_the_authoritys_online_status_at_most_every_second():
    ticks = [100.0]
    t = terms(ticks)
    assert t.hello_due() and not t.hello_due()
    ticks[0] += HELLO_EVERY_S - 0.01
    assert not t.hello_due()
    ticks[0] += 0.01
    assert t.hello_due()


def test_an_online_status_too_soon_after_a_hello_owes_one_hello_when_it_is_due():
    """An authority that restarts within a second of the last hello: its new terms are asked for once the second is
    up (before, never: the table kept the approvers of the authority before it), one hello however many statuses."""
    ticks = [100.0]
    t = terms(ticks)
    assert t.hello_due()
    ticks[0] += 0.3
    assert not t.hello_due()
    assert t.defer_hello() == pytest.approx(HELLO_EVERY_S - 0.3)
    assert t.defer_hello() is None  # played back again meanwhile: still the one
    ticks[0] += 0.7
    t.deferred_hello_due()
    assert not t.hello_due()  # the owed hello counts as the last
    assert t.defer_hello() == pytest.approx(HELLO_EVERY_S)
