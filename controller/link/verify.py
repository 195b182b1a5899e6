"""Whether what a table hears is the link authority's, and whether an answer answers what the table asked.

Only what the authority signed is acted on (controller.linkproto.signing): the broker, and anyone with a table's
MQTT password, can publish on every topic the table reads. A signed answer is taken only for the operation it
names by digest, so an answer to another operation under the same number (sent first with the table's
credentials, or an old answer played back) is never taken for the table's own.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.errors import InputError
from controller.link.outbox import Sent
from controller.link.rejections import Rejections
from controller.linkproto import schema, signing


class Verification:
    """The checks of everything heard on the table's topics: its size, the authority's signature, the protocol's
    schema and version; and of each answer: the operation and the claim it names."""

    def __init__(self, table: str, authority_keys: Iterable[str], rejections: Rejections) -> None:
        self.table = table
        self.verifier = signing.Verifier(authority_keys)
        self.rejections = rejections

    def message(self, topic: str, payload: bytes) -> schema.Message | None:
        """The message in `payload` when it is well formed, of this protocol's version and signed by the
        authority; None (counted and logged as rejected) when it is not."""
        reject = self.rejections.reject
        if len(payload) > schema.MAX_PAYLOAD:  # before anything parses it
            reject("bad_schema", "link message dropped", topic=topic,
                   error=f"{len(payload)} bytes, more than {schema.MAX_PAYLOAD}")
            return None
        problem = self.verifier.check(topic, payload)
        try:
            msg = schema.decode(topic, payload)
        except InputError as e:
            if e.field == "v":  # an authority of another version: one clear line, not one per message
                reject("version", "link message of another protocol version: not acted on", topic=topic,
                       error=str(e))
            else:
                reject("bad_schema", "link message dropped", topic=topic, error=str(e))
            return None
        if problem is not None:
            reject("not_signed", "link message not signed by the link authority: not acted on", topic=topic,
                   type=type(msg).__name__, error=problem)
            return None
        return msg

    def same_operation(self, answer: schema.Ack | schema.Refused, sent: Sent) -> bool:
        """Whether `answer` names the digest of `sent`, the operation this table journaled under its number (when
        not, it is rejected and the caller sends the operation again)."""
        if answer.op == schema.op_digest(sent.as_op(self.table)):
            return True
        self.rejections.reject("not_our_operation", "the authority's answer is for another operation under this "
                               "number: not taken; the operation is sent again", seq=answer.seq)
        return False

    def same_claim(self, answer: schema.Ack | schema.Refused, sent: Sent) -> bool:
        """Whether an acknowledged lock of a percentage award names the claim `sent` locks (any other answer
        does); one that names another claim is rejected."""
        if not isinstance(answer, schema.Ack) or sent.kind != "lock-percent-award" or \
                answer.result.get("claim") == sent.body.get("claim"):
            return True
        self.rejections.reject("not_our_operation", "the authority's answer to a lock names another claim: not "
                               "taken", seq=answer.seq, claim=sent.body.get("claim"), answered=answer.result.get("claim"))
        return False


__all__ = ["Verification"]
