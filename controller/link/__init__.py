"""Linked progressives: one meter shared by many tables through a link authority (§ 605a.8)."""
