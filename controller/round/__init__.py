"""Rounds at one table: the pure state machine that decides which wagers exist (see machine.py)."""

from controller.round.machine import start, step
from controller.round.model import *  # noqa: F403 - the machine's vocabulary

__all__ = ["start", "step"]
