"""Table progressive controller.

The pure core (cards, hands, games, paytables, settlement, dice, odds) knows nothing of
asyncio, devices or storage; the shell (drivers, store, link, app) moves events in and
effects out.
"""

__version__ = "0.1.0"
