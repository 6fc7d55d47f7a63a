"""Parsing providers: who turns a PDF (or an image) into markdown and tables.

``pymupdf4llm`` (with tesseract) runs here on the CPU and is the default; ``mineru`` (its local ``mineru-api``
server or the hosted task API) and ``docling`` (docling-serve) are HTTP services a team runs on a GPU. A provider
may supply the whole parse or only its tables (``ATLAS_TABLES_PARSER``; ``combine`` says how the two meet). HTML,
JATS and text are always parsed here: their own markup is exact.
"""

from atlas_pipeline.parsing.providers.base import ParsingProvider, ProviderError, ProviderLimits
from atlas_pipeline.parsing.providers.choice import ParserChoice

__all__ = ["ParserChoice", "ParsingProvider", "ProviderError", "ProviderLimits"]
