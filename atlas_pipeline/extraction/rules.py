"""Extraction rules: how a project extracts (skip or llm, strategy, template, custom fields), as seed data."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from atlas_pipeline.core.templates import CustomField, TemplateError


class Rule(BaseModel):
    name: str
    description: str = ""
    postprocess_mode: Literal["skip", "llm"] = "skip"
    template: str = "rct_base"
    strategy: Literal["direct", "chunked", "auto"] = "auto"
    chunk_size_chars: int = Field(60_000, gt=1000)
    chunk_overlap_chars: int = Field(2_000, ge=0)
    max_chunks: int = Field(8, ge=1)
    custom_fields: list[CustomField] = Field(default_factory=list)
    custom_instructions: str = ""
    # RoB 2 per result (``core.rob2_module``): the effect its domain 2 assesses — "assignment" (intention to treat)
    # or "adhering" (per protocol); none: not assessed
    rob2: Literal["assignment", "adhering"] | None = None


def load_rule(rules_dir: Path, name: str) -> Rule:
    path = rules_dir / f"{name}.json"
    if not path.is_file():
        known = sorted(p.stem for p in rules_dir.glob("*.json"))
        raise TemplateError(
            f"rule {name!r} (ATLAS_RULE) not found in {rules_dir} (known: {', '.join(known) or 'none'})"
        )
    try:
        return Rule.model_validate_json(path.read_text("utf-8"))
    except ValueError as error:
        raise TemplateError(f"rule {path} is invalid: {error}") from error
