"""Hand ranking: five-card Poker, three-card and Four Card Poker hands."""
