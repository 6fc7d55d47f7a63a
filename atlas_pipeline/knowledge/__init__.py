"""The knowledge base: listing its documents, the catalog of what was found (keys, fingerprints, removals,
duplicates) and the partition keys derived from source paths."""
