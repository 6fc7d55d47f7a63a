"""How well an endpoint extracts, measured against a team's own gold standard.

A gold file is JSON lines, one value a line::

    {"document": "PMC1216327.pdf", "field": "n_treatment", "value": 30}
    {"document": "PMC1216327.pdf", "group": "outcomes", "entry": {"outcome": "duration of the illness"},
     "field": "mean_intervention", "value": 47.5}

A single-valued field is compared with the document's extracted value; an entry of a repeating group is first
matched to an extracted entry of the same document by its identity — the group's first identity field (the outcome
name) fuzzily (rapidfuzz token-set ratio ≥ ``NAME_MATCH``), the other identity fields given in the gold only when both
sides have them — one gold entry to one extracted entry, best pairs first. Text and enum values are equal after
normalising case, spacing and punctuation; numbers within a relative ``tolerance``.

Per field: **accuracy** (extracted values equal to gold / values extracted where gold has one), **recall** (gold values
extracted correctly / gold values), **precision of verified** (how often a ``verified`` value equals gold) and accuracy
per tier. The model's values are measured (not reviewers' corrections): this is the endpoint's accuracy.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field
from rapidfuzz import fuzz

from atlas_pipeline.extraction.templates import Template, entry_field_parts
from atlas_pipeline.store.records import ExtractionRecord, read_record

NAME_MATCH = 80.0
DEFAULT_TOLERANCE = 0.005
_NOT_WORD = re.compile(r"[\W_]+")


class GoldValue(BaseModel):
    document: str
    field: str
    value: Any
    group: str = ""
    entry: dict[str, Any] = Field(default_factory=dict)


class GoldError(ValueError):
    """A gold file that cannot be read; the message names the line."""


def read_gold(text: str) -> list[GoldValue]:
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            values.append(GoldValue.model_validate(json.loads(line)))
        except ValueError as error:
            raise GoldError(f"gold line {number}: {error}") from None
    return values


def same(extracted: Any, gold: Any, tolerance: float) -> bool:
    numeric = [isinstance(v, int | float) and not isinstance(v, bool) for v in (extracted, gold)]
    if all(numeric):
        return math.isclose(float(extracted), float(gold), rel_tol=tolerance, abs_tol=1e-12)
    if any(numeric):
        try:
            return math.isclose(float(extracted), float(gold), rel_tol=tolerance, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return _norm(extracted) == _norm(gold)


def _norm(value: Any) -> str:
    return _NOT_WORD.sub(" ", str(value)).strip().casefold()


@dataclass
class FieldScore:
    field: str
    gold: int = 0
    extracted: int = 0
    correct: int = 0
    by_tier: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # tier → [n, ok]

    @property
    def accuracy(self) -> float | None:
        return round(self.correct / self.extracted, 4) if self.extracted else None

    @property
    def recall(self) -> float | None:
        return round(self.correct / self.gold, 4) if self.gold else None

    @property
    def verified_precision(self) -> float | None:
        n, ok = self.by_tier.get("verified", [0, 0])
        return round(ok / n, 4) if n else None

    def row(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "gold": self.gold,
            "extracted": self.extracted,
            "correct": self.correct,
            "accuracy": self.accuracy,
            "recall": self.recall,
            "verified_precision": self.verified_precision,
            **{f"accuracy_{tier}": round(ok / n, 4) for tier, (n, ok) in sorted(self.by_tier.items()) if n},
        }


@dataclass
class Evaluation:
    tolerance: float
    documents: int
    scores: dict[str, FieldScore]
    unmatched_entries: int = 0  # gold entries with no extracted entry of that name
    missing_documents: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        return [self.scores[name].row() for name in sorted(self.scores)]

    def markdown(self) -> str:
        lines = [
            "# Extraction accuracy against the gold standard",
            "",
            f"{self.documents} document(s); numbers equal within a relative tolerance of {self.tolerance:g}, text and "
            "categories after normalising case, spacing and punctuation; outcome entries matched by name "
            f"(token-set similarity ≥ {NAME_MATCH:g}). {self.unmatched_entries} gold entr(y/ies) had no extracted "
            "match (their values count as not found)."
            + (f" Not extracted at all: {', '.join(self.missing_documents)}." if self.missing_documents else ""),
            "",
            "Accuracy = correct / extracted; recall = correct / gold; verified precision = correct / extracted with "
            "tier `verified`.",
            "",
            "| field | gold | extracted | correct | accuracy | recall | verified precision |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in self.rows():
            shown = [_percent(row[k]) for k in ("accuracy", "recall", "verified_precision")]
            lines.append(
                f"| {row['field']} | {row['gold']} | {row['extracted']} | {row['correct']} | "
                + " | ".join(shown)
                + " |"
            )
        return "\n".join(lines) + "\n"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _entries(record: ExtractionRecord, group: str) -> dict[int, dict[str, dict]]:
    entries: dict[int, dict[str, dict]] = defaultdict(dict)
    for name, extracted in record.fields.items():
        group_name, entry, bare = entry_field_parts(name)
        if group_name == group and entry is not None and isinstance(extracted, dict):
            entries[entry][bare] = extracted
    return entries


def _identity_score(gold: dict[str, Any], entry: dict[str, dict], identity: list[str]) -> float:
    if not identity:
        return 0.0
    name = identity[0]
    extracted = (entry.get(name) or {}).get("value")
    if gold.get(name) is None or extracted is None:
        return 0.0
    score = fuzz.token_set_ratio(_norm(gold[name]), _norm(extracted))
    for other in identity[1:]:
        given, found = gold.get(other), (entry.get(other) or {}).get("value")
        if given is not None and found is not None and fuzz.token_set_ratio(_norm(given), _norm(found)) < NAME_MATCH:
            return 0.0
    return score


def evaluate(
    gold: list[GoldValue],
    records: dict[str, ExtractionRecord | None],
    template: Template,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Evaluation:
    """Scores per field of the extracted ``records`` (document key → its extraction) against ``gold``."""
    identity = {group.name: group.identity for group in template.groups}
    scores: dict[str, FieldScore] = {}
    # gold entries: (document, group, identity json) → their values
    gold_entries: dict[tuple[str, str, str], list[GoldValue]] = defaultdict(list)
    singles = []
    for value in gold:
        if value.group:
            gold_entries[(value.document, value.group, json.dumps(value.entry, sort_keys=True))].append(value)
        else:
            singles.append(value)
    matched: dict[tuple[str, str, str], dict[str, dict] | None] = {}
    for (document, group), keys in _by_document_group(gold_entries).items():
        record = records.get(document)
        entries = _entries(record, group) if record else {}
        pairs = sorted(
            (
                (_identity_score(json.loads(key[2]), entry, identity.get(group, [])), key, number)
                for key in keys
                for number, entry in entries.items()
            ),
            key=lambda item: -item[0],
        )
        taken_gold, taken_entry = set(), set()
        for score, key, number in pairs:
            if score < NAME_MATCH or key in taken_gold or number in taken_entry:
                continue
            matched[key] = entries[number]
            taken_gold.add(key)
            taken_entry.add(number)
        for key in keys:
            matched.setdefault(key, None)

    def tally(name: str, extracted: dict | None, expected: Any) -> None:
        if expected is None:
            return
        score = scores.setdefault(name, FieldScore(name))
        score.gold += 1
        value = (extracted or {}).get("value")
        if value is None:
            return
        score.extracted += 1
        ok = same(value, expected, tolerance)
        score.correct += ok
        counts = score.by_tier[str(extracted.get("tier") if extracted else "unknown")]
        counts[0] += 1
        counts[1] += ok

    for value in singles:
        record = records.get(value.document)
        tally(value.field, record.fields.get(value.field) if record else None, value.value)
    for key, values in gold_entries.items():
        entry = matched.get(key)
        for value in values:
            tally(f"{value.group}.{value.field}", (entry or {}).get(value.field), value.value)
    documents = sorted({value.document for value in gold})
    return Evaluation(
        tolerance=tolerance,
        documents=len(documents),
        scores=scores,
        unmatched_entries=sum(1 for entry in matched.values() if entry is None),
        missing_documents=[document for document in documents if records.get(document) is None],
    )


def _by_document_group(entries: dict[tuple[str, str, str], list[GoldValue]]) -> dict[tuple[str, str], list]:
    grouped: dict[tuple[str, str], list] = defaultdict(list)
    for key in entries:
        grouped[(key[0], key[1])].append(key)
    return grouped


def evaluate_gold(atlas: Any, gold_location: str, tolerance: float) -> Evaluation:
    """Read the gold file and the extraction records of its documents from ``atlas``'s stores (an
    ``AtlasResource``), and evaluate."""
    gold = read_gold(read_location(gold_location))
    store = atlas.store()
    records = {key: read_record(store, key, "extraction", ExtractionRecord) for key in {g.document for g in gold}}
    return evaluate(gold, records, atlas.load_template(), tolerance)


def read_location(location: str) -> str:
    """A local file or an ``s3://`` object as text."""
    import posixpath

    from atlas_pipeline.store.files import Store

    folder, name = posixpath.split(location.rstrip("/"))
    try:
        return Store(folder).read_text(name)
    except FileNotFoundError:
        raise GoldError(f"gold file not found: {location}") from None
