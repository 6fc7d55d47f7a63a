"""Answers kept by the request that asked for them: the hash of (model, messages, schema), so asking the same again
costs no call. An entry keeps the tokens the answer cost, so a record made from the cache still says what its
extraction cost; a cut answer is kept as cut (asked again under the same limit it would be cut again)."""

from __future__ import annotations

import hashlib
import json

from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import llm_cache_path


def cache_key(model: str, messages: list[dict[str, str]], schema: dict) -> str:
    material = json.dumps({"model": model, "messages": messages, "schema": schema}, sort_keys=True)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class AnswerCache:
    """The answers of one model in the artifact store (``llm_cache/``)."""

    def __init__(self, store: Store, model: str) -> None:
        self.store = store
        self.model = model

    def read(self, key: str) -> dict | None:
        return self.store.read_json_or(llm_cache_path(key), None)

    def write(self, key: str, entry: dict) -> None:
        self.store.write_json(llm_cache_path(key), entry)

    def answered(self, key: str, data: dict, spent: dict[str, int]) -> None:
        self.write(key, {"model": self.model, "data": data, "usage": spent})

    def cut(self, key: str, reason: str, max_tokens: int, spent: dict[str, int]) -> None:
        self.write(key, {"model": self.model, "cut": reason, "max_tokens": max_tokens, "usage": spent})
