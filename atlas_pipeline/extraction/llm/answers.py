"""What is asked for and what comes back: the response format per structured-output mode, the schema bounded for
grammar-constrained servers, a reply read as JSON valid for the schema, and the one repair request for one that is
not."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from atlas_pipeline.extraction.llm.config import StructuredOutput

# json_schema (OpenAI, vLLM, Ollama) → json_object + schema (llama.cpp) → plain json_object
FORMAT_FALLBACK: dict[StructuredOutput, StructuredOutput] = {
    "json_schema": "json_object_schema",
    "json_object_schema": "json_object",
}


def bounded(schema: dict, quote_chars: int = 600, text_chars: int = 300) -> dict:
    """The schema with length limits on strings, for grammar-constrained servers: a small model that rambles
    inside a quote then stops at the limit instead of running out of tokens mid-string."""
    limited = json.loads(json.dumps(schema))
    for item in limited.get("properties", {}).values():
        for name, limit in (("quote", quote_chars), ("value", text_chars)):
            for option in item.get("properties", {}).get(name, {}).get("anyOf", []):
                if option.get("type") == "string" and "enum" not in option:
                    option["maxLength"] = limit
    return limited


def response_format(schema: dict, form: StructuredOutput) -> dict:
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "extraction", "schema": schema, "strict": True}}
    if form == "json_object_schema":  # llama.cpp: JSON mode constrained by a schema (as a grammar)
        return {"type": "json_object", "schema": bounded(schema)}
    return {"type": "json_object"}


def parse_answer(content: str, model: type[BaseModel]) -> tuple[dict[str, Any], str | None]:
    """The reply as JSON valid for ``model``, or what is wrong with it."""
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:  # strict=False: a raw line break inside a quote is the model's, not broken JSON (small models do it)
        raw = json.loads(text, strict=False)
    except json.JSONDecodeError as error:
        return {}, f"invalid JSON ({error.msg} at line {error.lineno} column {error.colno})"
    if not isinstance(raw, dict):
        return {}, "the JSON is not an object"
    try:
        return model.model_validate(raw).model_dump(mode="json", exclude_unset=True), None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return {}, f"schema mismatch at {where}: {first['msg']}"


def repair_messages(messages: list[dict[str, str]], content: str, problem: str) -> list[dict[str, str]]:
    """The one repair request: the conversation, the invalid reply, and what was wrong with it."""
    return [
        *messages,
        {"role": "assistant", "content": content[:20_000]},
        {
            "role": "user",
            "content": f"Your reply was not valid: {problem}. Reply again with only the JSON object that "
            "matches the schema, with the same content.",
        },
    ]
