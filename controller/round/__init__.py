"""Rounds at one table: the pure state machine that decides which wagers exist (see machine.py)."""

from .machine import start, step
from .model import *  # noqa: F403 - the machine's vocabulary

__all__ = ["start", "step"]
