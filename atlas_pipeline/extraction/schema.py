"""The answer schema of a template: every field is ``{"value": <typed or null>, "quote": <verbatim or null>}``,
and a repeating group is a list of entries, each an object of its fields in that same form.

One JSON schema (sent to the endpoint for structured output) and one pydantic model (to validate what comes back)
are built from the same template, so they cannot disagree.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model

from atlas_pipeline.core.templates import Template, TemplateField

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


def _field_schema(field: TemplateField) -> dict:
    return {
        "type": "object",
        "description": field.description + (f" (unit: {field.unit})" if field.unit else ""),
        "properties": {
            "value": _value_schema(field),
            "quote": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["value", "quote"],
        "additionalProperties": False,
    }


def _object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def json_schema(template: Template) -> dict:
    """Strict JSON schema of the answer (OpenAI ``json_schema`` response format compatible: no ``maxItems``, so a
    group's cap is in its description and enforced when the answer is graded)."""
    properties = {field.name: _field_schema(field) for field in template.fields}
    for group in template.groups:
        properties[group.name] = {
            "type": "array",
            "description": f"{group.description} — one entry per {' × '.join(group.identity)}, at most "
            f"{group.max_entries}; an empty list when the document reports none",
            "items": _object({field.name: _field_schema(field) for field in group.fields}),
        }
    return _object(properties)


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


def answer_model(template: Template) -> type[BaseModel]:
    """A pydantic model that validates (and coerces) one answer. Dump it with ``exclude_unset=True``: a field the
    model left out stays out (it counts against completeness), an explicit null stays null (not reported)."""
    fields: dict[str, Any] = {field.name: (_item_model(field) | None, None) for field in template.fields}
    for group in template.groups:
        entry = create_model(
            f"{group.name}_entry", __base__=_Lenient, **{f.name: (_item_model(f) | None, None) for f in group.fields}
        )
        # an item that is not an object is dropped when the entries are graded, not a reason to refuse the answer
        fields[group.name] = (list[entry | Any] | None, None)
    return create_model(f"{template.code}_answer", __base__=_Lenient, **fields)


def _item_model(field: TemplateField) -> type[BaseModel]:
    value_type = Literal[tuple(field.enum or [""])] if field.type == "enum" else _PY_TYPES[field.type]
    return create_model(
        f"{field.name}_answer", __base__=_Lenient, value=(value_type | None, None), quote=(str | None, None)
    )
