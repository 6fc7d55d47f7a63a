"""Every LLM answer within a total time and a size: the transport lives in ``core.bounded_http`` (the parsing
providers' client is bounded by it too); this path stays for the code and tests that import it from here."""

from atlas_pipeline.core.bounded_http import BOUNDED_PATH, AnswerCutOff, BoundedTransport, bounded_client

__all__ = ["BOUNDED_PATH", "AnswerCutOff", "BoundedTransport", "bounded_client"]
