"""Errors for bad input: every one names the field, file or frame at fault."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input. `field` is a path such as ``seats[2].cards[1]`` or ``paytable.hands[3]``."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem

    def at(self, prefix: str) -> InputError:
        """The same error with `prefix` put in front of its field path."""
        if not prefix:
            return self
        if not self.field:
            joined = prefix
        elif self.field.startswith("["):
            joined = prefix + self.field
        else:
            joined = f"{prefix}.{self.field}"
        return type(self)(joined, self.problem)


class CardError(InputError):
    """An unknown, malformed or duplicate card."""


class RulesError(InputError):
    """Input that is well formed but that the rules of the game forbid."""


class InvariantViolation(AssertionError):
    """Books that do not balance (a meter's, checked after every operation and at every start): a defect, never
    bad input. The ledger refuses an operation after which its reducer's invariant fails with this, unjournaled."""


__all__ = ["CardError", "InputError", "InvariantViolation", "RulesError"]
