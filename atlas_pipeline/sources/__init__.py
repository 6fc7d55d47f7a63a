"""Collectors: sources declared as data (RSS / Atom feeds, lists of URLs) that bring new documents into the
knowledge base politely — the knowledge-base sensor then takes them as any other file."""
