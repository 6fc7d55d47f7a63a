"""The extraction version: everything that changes what an extraction says, computed in one place.

It drives Dagster's code version of ``document_extraction`` (so the UI shows old extractions stale), the data
version of each extraction, the knowledge-base sensor's run keys (a new version requests every document again),
staleness in the statuses and exports (an old version's values are withheld until re-extracted), and the record of
every extraction (``extraction_version`` and its parts, so a stale status says what changed). The LLM response cache
is keyed by the request itself (model, messages, schema), which covers every part that reaches the model.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from atlas_pipeline.core.templates import Template
from atlas_pipeline.extraction.prompt import PROMPT_VERSION
from atlas_pipeline.extraction.rules import Rule

GRADING_VERSION = "3"  # bump when grading rules change what a tier means (re-grades every extraction)
SKIP_WRAPPER_VERSION = "1"


@dataclass(frozen=True)
class ExtractionVersion:
    """A short tag (``x…``) and the parts it is made of."""

    tag: str
    parts: dict[str, str] = field(default_factory=dict)

    def changes_from(self, old_parts: dict[str, str]) -> list[str]:
        """The names of the parts that differ from an older version's parts."""
        names = sorted(set(self.parts) | set(old_parts))
        return [name for name in names if self.parts.get(name) != old_parts.get(name)]


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def extraction_version(
    template: Template, rule: Rule, mode: str, model: str = "", parser: str = "", second_model: str = ""
) -> ExtractionVersion:
    """The version of extractions made with this template (custom fields included), rule, mode and ``parser`` (who
    parses a PDF and the parser fingerprint: another parser gives another text, so extractions made from the old
    one are stale) — and, in llm mode, model (and the second extractor's, when one is declared), strategy, custom
    instructions, prompt and grading."""
    parts = {"template": template.content_hash, "mode": mode}
    if parser:
        parts["parser"] = parser
    if mode == "llm":
        parts |= {
            "model": model,
            "strategy": f"{rule.strategy}/{rule.chunk_size_chars}/{rule.chunk_overlap_chars}/{rule.max_chunks}",
            "custom_instructions": _short_hash(rule.custom_instructions.strip()),
            "prompt": PROMPT_VERSION,
            "grading": GRADING_VERSION,
        }
        if second_model:
            parts["second_model"] = second_model
    else:
        parts["wrapper"] = SKIP_WRAPPER_VERSION
    material = json.dumps(parts, sort_keys=True)
    return ExtractionVersion(tag="x" + _short_hash(material), parts=parts)
