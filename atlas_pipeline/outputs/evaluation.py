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
per tier. Either the model's values are measured (the endpoint's accuracy), or the **final** values — what people
decided and the team's policy accepted, entries people added by hand included — the accuracy of the review itself
(the default when no model extracted: extraction by hand). Gold values the annotators computed rather than read are
reported apart (``outputs.gold_formats``).
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

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.outputs.gold_formats import is_yun_row, yun_values
from atlas_pipeline.review.derivations import Derivations
from atlas_pipeline.review.final_values import DocumentReview, current_review
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record

Fields = dict[str, Any]  # field name → {"value": …, "tier": …} as a record holds them
VALUES = ("auto", "model", "final")

NAME_MATCH = 80.0
DEFAULT_TOLERANCE = 0.005
_NOT_WORD = re.compile(r"[\W_]+")


class GoldValue(BaseModel):
    document: str
    field: str
    value: Any
    group: str = ""
    entry: dict[str, Any] = Field(default_factory=dict)
    derived: bool = False  # computed by the annotator (an SD from a CI, events from a percentage), not printed
    median: bool = False  # a median (and its IQR or range) the annotator put where the mean (and SD) go


class GoldError(AtlasError, ValueError):
    """A gold file that cannot be read; the message names the line."""


def read_gold(text: str) -> list[GoldValue]:
    """Gold lines in Atlas's format (one value a line) or Yun et al.'s outcome rows (``outputs.gold_formats``), as
    the file has them — the two may be mixed."""
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            rows = yun_values(data) if isinstance(data, dict) and is_yun_row(data) else [data]
            values += [GoldValue.model_validate(row) for row in rows]
        except (ValueError, KeyError, TypeError) as error:
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
    # two extractors: agreement state (``grading.agreement``) → [n, ok]
    by_agreement: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    # gold values the paper prints (written) and those the annotators computed (derived) → [gold, found correct]
    by_origin: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

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
            **{f"accuracy_{state}": round(ok / n, 4) for state, (n, ok) in sorted(self.by_agreement.items()) if n},
            **{f"recall_{origin}": round(ok / n, 4) for origin, (n, ok) in sorted(self.by_origin.items()) if n},
        }


@dataclass
class Evaluation:
    tolerance: float
    documents: int
    scores: dict[str, FieldScore]
    unmatched_entries: int = 0  # gold entries with no extracted entry of that name
    extra_entries: int = 0  # extracted entries that match no gold entry (their values count as wrong)
    missing_documents: list[str] = field(default_factory=list)
    measured: str = "model"  # whose values: the model's, or the final ones (people's decisions and the policy)

    def rows(self) -> list[dict[str, Any]]:
        return [self.scores[name].row() for name in sorted(self.scores)]

    def markdown(self) -> str:
        lines = [
            "# Extraction accuracy against the gold standard",
            "",
            (
                "Measured: the final values (people's decisions, entries added by hand, values the team's policy "
                "accepted, derived values once accepted)."
                if self.measured == "final"
                else "Measured: the model's values (the endpoint's accuracy, before any review)."
            ),
            "",
            f"{self.documents} document(s); numbers equal within a relative tolerance of {self.tolerance:g}, text and "
            "categories after normalising case, spacing and punctuation; outcome entries matched by name "
            f"(token-set similarity ≥ {NAME_MATCH:g}, numbers in names equal). {self.unmatched_entries} gold "
            f"entr(y/ies) had no extracted match (their values count as not found); {self.extra_entries} extracted "
            "entr(y/ies) matched no gold entry (their values count as wrong). Counts must be exact."
            + (f" Not extracted at all: {', '.join(self.missing_documents)}." if self.missing_documents else ""),
            "",
            "Accuracy = correct / extracted; recall = correct / gold; verified precision = correct / extracted with "
            "tier `verified`.",
            "",
            "Recall of written / derived / median: correct / gold among the values the paper prints, among those "
            "the annotators computed (an SD from a CI or an SE, events from a percentage) and among medians put "
            "where a mean goes (Yun et al.'s notes say which).",
            "",
            "| field | gold | extracted | correct | accuracy | recall | verified precision | accuracy by tier "
            "| recall of written / derived / median |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines[1:1] = self._agreement_lines()
        for row in self.rows():
            shown = [_percent(row[k]) for k in ("accuracy", "recall", "verified_precision")]
            tiers = self.scores[row["field"]].by_tier
            by_tier = ", ".join(f"{tier} {ok / n:.0%} ({n})" for tier, (n, ok) in sorted(tiers.items()) if n) or "—"
            counts = f"| {row['field']} | {row['gold']} | {row['extracted']} | {row['correct']} | "
            origins = self.scores[row["field"]].by_origin
            by_origin = " / ".join(_recall(origins.get(origin, [0, 0])) for origin in ("written", "derived", "median"))
            lines.append(counts + " | ".join(shown) + f" | {by_tier} | {by_origin} |")
        return "\n".join(lines) + "\n"

    def accuracy_by_agreement(self) -> dict[str, tuple[int, int]]:
        """Over every field: agreement state of the two extractors → (values extracted, correct)."""
        totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for score in self.scores.values():
            for state, (n, ok) in score.by_agreement.items():
                totals[state][0] += n
                totals[state][1] += ok
        return {state: (n, ok) for state, (n, ok) in sorted(totals.items()) if n}

    def _agreement_lines(self) -> list[str]:
        """Two extractors: whether routing works — how often values the two agreed on were right, and the rest."""
        totals = self.accuracy_by_agreement()
        if not totals:
            return []
        words = {"agreed": "agreed", "disagreed": "disagreed", "only_one": "found by one model only"}
        parts = [f"{words.get(state, state)} {ok / n:.1%} correct ({n})" for state, (n, ok) in totals.items()]
        return ["", "Two extractors, values by agreement: " + "; ".join(parts) + "."]


def _recall(counts: list[int]) -> str:
    n, ok = counts
    return f"{ok / n:.0%} ({n})" if n else "—"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _fields(record: ExtractionRecord | Fields) -> Fields:
    return record.fields if isinstance(record, ExtractionRecord) else record


def final_fields(review: DocumentReview, template: Template) -> Fields:
    """A review's final values as a record's fields: a person's or the policy's value, nothing for one awaiting
    review or rejected; the provenance as the tier (what the report breaks accuracy down by). Entries of one group
    that name the same outcome with the same values (two people who typed it) are one entry, as in the analysis."""
    fields = {
        name: {"value": final.final_value if final.decided and final.provenance != "rejected" else None,
               "tier": final.provenance}
        for name, final in review.fields.items()
    }  # fmt: skip
    for group in template.groups:
        entries = _entries(fields, group.name)
        kept: dict[str, dict[str, Any]] = {}
        for number in sorted(entries):
            key = _entry_identity(entries[number], list(group.identity))
            values = {bare: cell.get("value") for bare, cell in entries[number].items() if bare not in group.identity}
            if key in kept and kept[key] == values:
                fields = {n: f for n, f in fields.items() if entry_field_parts(n)[:2] != (group.name, number)}
            else:
                kept.setdefault(key, values)
    return fields


def _entry_identity(entry: dict[str, dict], identity: list[str]) -> str:
    return json.dumps([_norm((entry.get(name) or {}).get("value") or "") for name in identity])


def _entries(record: ExtractionRecord | Fields, group: str) -> dict[int, dict[str, dict]]:
    entries: dict[int, dict[str, dict]] = defaultdict(dict)
    for name, extracted in _fields(record).items():
        group_name, entry, bare = entry_field_parts(name)
        if group_name == group and entry is not None and isinstance(extracted, dict):
            entries[entry][bare] = extracted
    return entries


_DIGITS = re.compile(r"\d+(?:\.\d+)?")


def _similar(gold: Any, extracted: Any) -> float:
    """How alike two identity values are (0–100): fuzzy on words, but their numbers must agree ("6 months" is not
    "12 months"), and an exact match ranks above a fuzzy one."""
    a, b = _norm(gold), _norm(extracted)
    if a == b:
        return 101.0
    if sorted(_DIGITS.findall(a)) != sorted(_DIGITS.findall(b)):
        return 0.0
    return fuzz.token_set_ratio(a, b)


def _identity_score(gold: dict[str, Any], entry: dict[str, dict], identity: list[str]) -> float:
    """Whether an extracted entry is the gold entry: the first identity field (the outcome name) must match
    (≥ ``NAME_MATCH``), every other identity field given on both sides too; the pair's score adds them all."""
    if not identity:
        return 0.0
    total = 0.0
    for position, name in enumerate(identity):
        given, found = gold.get(name), (entry.get(name) or {}).get("value")
        if given is None or found is None:
            if position == 0:
                return 0.0
            continue
        score = _similar(given, found)
        if score < NAME_MATCH:
            return 0.0
        total += score
    return total


def _entry_key(value: GoldValue, identity: list[str]) -> str:
    """One gold entry however its lines spell it: its identity values, normalised."""
    return json.dumps(
        [_norm(value.entry.get(name)) if value.entry.get(name) is not None else None for name in identity]
    )


def _origin(value: GoldValue) -> str:
    """Where a gold value comes from: printed (written), computed by the annotator (derived), or a median."""
    return "median" if value.median else "derived" if value.derived else "written"


def evaluate(
    gold: list[GoldValue],
    records: dict[str, ExtractionRecord | Fields | None],
    template: Template,
    tolerance: float = DEFAULT_TOLERANCE,
    measured: str = "model",
) -> Evaluation:
    """Scores per field of the extracted ``records`` (document key → its extraction, or its fields: the final ones
    with ``measured="final"``) against ``gold``; a gold line
    naming a field or group the template does not have, or an entry without its first identity field, is a
    ``GoldError``. The gold is taken as complete for its documents: values of extracted entries that match no gold
    entry, and values where the gold says null, count as extracted and wrong."""
    groups = {group.name: group for group in template.groups}
    scores: dict[str, FieldScore] = {}
    gold_entries: dict[tuple[str, str, str], dict[str, GoldValue]] = defaultdict(dict)
    singles: dict[tuple[str, str], GoldValue] = {}
    for value in gold:  # the same line twice counts once
        if value.group:
            group = groups.get(value.group)
            if group is None or group.field_definition(value.field) is None:
                raise GoldError(f"gold for {value.document}: the template has no {value.group}.{value.field}")
            if value.entry.get(group.identity[0]) is None:
                raise GoldError(f"gold for {value.document}: a {value.group} entry needs its {group.identity[0]}")
            key = (value.document, value.group, _entry_key(value, group.identity))
            gold_entries[key].setdefault(value.field, value)
            gold_entries[key].setdefault("__entry__", value)
        else:
            if template.field_definition(value.field) is None:
                raise GoldError(f"gold for {value.document}: the template has no field {value.field}")
            singles.setdefault((value.document, value.field), value)
    matched: dict[tuple[str, str, str], dict[str, dict] | None] = {}
    unmatched_extracted: list[tuple[str, dict[str, dict]]] = []
    documents_groups = {(key[0], key[1]) for key in gold_entries}  # where the team gave this group's gold
    for document, group in sorted(documents_groups):
        keys = [key for key in gold_entries if key[:2] == (document, group)]
        record = records.get(document)
        entries = _entries(record, group) if record else {}
        identity = groups[group].identity
        pairs = sorted(
            (
                (_identity_score(gold_entries[key]["__entry__"].entry, entry, identity), key, number)
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
        unmatched_extracted += [(group, entry) for number, entry in entries.items() if number not in taken_entry]

    def tally(name: str, field_type: str, extracted: dict | None, expected: Any, origin_name: str = "written") -> None:
        score = scores.setdefault(name, FieldScore(name))
        score.gold += expected is not None
        origin = score.by_origin[origin_name]
        origin[0] += expected is not None
        value = (extracted or {}).get("value")
        if value is None:
            return
        score.extracted += 1
        exact = field_type == "integer"  # a count is right or wrong: no tolerance
        ok = expected is not None and same(value, expected, 0.0 if exact else tolerance)
        score.correct += ok
        origin[1] += ok
        counts = score.by_tier[str((extracted or {}).get("tier") or "unknown")]
        counts[0] += 1
        counts[1] += ok
        state = (extracted or {}).get("agreement")
        if state:
            agreement = score.by_agreement[str(state)]
            agreement[0] += 1
            agreement[1] += ok

    for (document, name), value in singles.items():
        record = records.get(document)
        kind = getattr(template.field_definition(name), "type", "")
        tally(name, kind, _fields(record).get(name) if record else None, value.value, _origin(value))
    for key, values in gold_entries.items():
        entry, group = matched.get(key), groups[key[1]]
        for name, value in values.items():
            if name != "__entry__":
                kind = getattr(group.field_definition(name), "type", "")
                tally(f"{group.name}.{name}", kind, (entry or {}).get(name), value.value, _origin(value))
    for group_name, entry in unmatched_extracted:  # an outcome the gold does not have: every value of it is wrong
        group = groups[group_name]
        for item in group.fields:
            if item.name not in group.identity and f"{group_name}.{item.name}" in scores:
                tally(f"{group_name}.{item.name}", item.type, entry.get(item.name), None)
    documents = sorted({value.document for value in gold})
    return Evaluation(
        tolerance=tolerance,
        documents=len(documents),
        scores=scores,
        unmatched_entries=sum(1 for entry in matched.values() if entry is None),
        extra_entries=len(unmatched_extracted),
        missing_documents=[document for document in documents if records.get(document) is None],
        measured=measured,
    )


def evaluate_gold(
    store: Store,
    template: Template,
    gold_location: str,
    tolerance: float,
    values: str = "auto",
    accepted_tiers: frozenset[str] = frozenset({"verified"}),
    derivations: Derivations | None = None,
) -> Evaluation:
    """Read the gold file and its documents' values from ``store``, and evaluate. ``values``: ``model`` (the model's
    values), ``final`` (people's decisions and the team's policy: ``accepted_tiers``, ``derivations``) or ``auto``
    (final when no model extracted the documents — the default mode — else the model's)."""
    if values not in VALUES:
        raise GoldError(f"values to measure: {' or '.join(VALUES)} (not {values!r})")
    gold = read_gold(read_location(gold_location))
    records = {key: reviewed_extraction(store, key) for key in {g.document for g in gold}}
    found = [record for record in records.values() if record is not None]
    by_hand = bool(found) and all(record.mode == "skip" for record in found)
    if values == "model" or (values == "auto" and not by_hand):
        return evaluate(gold, dict(records), template, tolerance)
    finals: dict[str, ExtractionRecord | Fields | None] = {}
    for key, record in records.items():
        stored = read_record(store, key, "review", DocumentReview)
        review = current_review(store, record, stored, accepted_tiers, derivations)
        finals[key] = final_fields(review, template) if review is not None else None
    return evaluate(gold, finals, template, tolerance, measured="final")


def read_location(location: str) -> str:
    """A local file or an ``s3://`` object as text."""
    import posixpath

    folder, name = posixpath.split(location.rstrip("/"))
    try:
        return Store(folder).read_text(name)
    except FileNotFoundError:
        raise GoldError(f"gold file not found: {location}") from None
