"""A table's link counts every message it does not act on, and logs each reason once within its budget."""

from __future__ import annotations

from structlog.testing import capture_logs

from controller.link.rejections import Rejections


def test_every_rejection_is_counted_and_each_reason_logged_once_within_the_budget():
    told: list[str] = []
    rejections = Rejections("cs-01", told.append)
    with capture_logs() as logs:
        for _ in range(3):
            rejections.reject("not_signed", "link message not signed", topic="t")
        rejections.reject("bad_topic", "a link message on another topic", topic="u")
    assert rejections.counts == {"not_signed": 3, "bad_topic": 1}
    assert told == ["not_signed"] * 3 + ["bad_topic"]
    assert [(line["event"], line["reason"], line["table"], line["topic"]) for line in logs] == [
        ("link message not signed", "not_signed", "cs-01", "t"),
        ("a link message on another topic", "bad_topic", "cs-01", "u")]
    assert all(line["log_level"] == "error" for line in logs)
