"""Public home of ``match_quote`` since the first release; the grading now lives in ``atlas_pipeline.grading``."""

from atlas_pipeline.grading.quotes import APPROXIMATE, VERIFIED, QuoteMatch, match_quote, tier_for
from atlas_pipeline.grading.text import normalize

__all__ = ["APPROXIMATE", "VERIFIED", "QuoteMatch", "match_quote", "normalize", "tier_for"]
