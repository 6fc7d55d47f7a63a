"""The answer schema of a template: every field is ``{"value": <typed or null>, "quote": <verbatim or null>}``.

One JSON schema (sent to the endpoint for structured output) and one pydantic model (to validate what comes back)
are built from the same template, so they cannot disagree.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model

from atlas_pipeline.extraction.templates import Template, TemplateField

_JSON_TYPES = {
    "string": {"type": "string"},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "date": {"type": "string", "description": "ISO 8601 date (YYYY-MM-DD) as written or normalised"},
    "list": {"type": "array", "items": {"type": "string"}},
}
_PY_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int | float,  # 30.5 for a count is kept and flagged by the template's checks, not a broken answer
    "number": float,
    "boolean": bool,
    "date": str,
    "list": list[str],
}


def _value_schema(field: TemplateField) -> dict:
    if field.type == "enum":
        return {"anyOf": [{"type": "string", "enum": list(field.enum or [])}, {"type": "null"}]}
    return {"anyOf": [_JSON_TYPES[field.type], {"type": "null"}]}


def json_schema(template: Template) -> dict:
    """Strict JSON schema of the answer (OpenAI ``json_schema`` response format compatible)."""
    properties = {}
    for field in template.fields:
        properties[field.name] = {
            "type": "object",
            "description": field.description + (f" (unit: {field.unit})" if field.unit else ""),
            "properties": {
                "value": _value_schema(field),
                "quote": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["value", "quote"],
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


def answer_model(template: Template) -> type[BaseModel]:
    """A pydantic model that validates (and coerces) one answer. Dump it with ``exclude_unset=True``: a field the
    model left out stays out (it counts against completeness), an explicit null stays null (not reported)."""
    fields: dict[str, Any] = {}
    for field in template.fields:
        value_type = Literal[tuple(field.enum or [""])] if field.type == "enum" else _PY_TYPES[field.type]
        item = create_model(
            f"{field.name}_answer", __base__=_Lenient, value=(value_type | None, None), quote=(str | None, None)
        )
        fields[field.name] = (item | None, None)
    return create_model(f"{template.code}_answer", __base__=_Lenient, **fields)
