"""The artifact store: files under a folder or an ``s3://`` prefix, where each artifact lives in it (``layout``),
and the per-document records written there."""
