"""``--workers N``: N processes answering on the same ports, one lifecycle, one copy of weights."""
