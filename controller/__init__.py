"""Table progressive controller.

The pure core (cards, hands, games, paytables, settlement, dice, odds, meter, round) knows
nothing of asyncio, devices or storage; the shell (drivers, ledger, config, link, app, cli)
moves events in and effects out (docs/architecture.md).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
