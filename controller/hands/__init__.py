"""Hand ranking: five-card Poker, three-card and Four Card Poker hands."""

__all__: list[str] = []  # its modules are imported by name
