"""One extracted field graded for a reviewer, and what a document's fields add up to (completeness and status).

Tiers — what each promises:

- ``verified``: the quote is in the document exactly, up to typography, in a part that reports the study, and the
  value is written in it (numbers, labels) or supported by it (text) — ``grading.values``. A reviewer may skip it —
  unless a check flags it. It does not say the value is the right one for its field: that is a person's (or a second
  extractor's) to confirm.
- ``approximate``: close but not exact (a letter-level slip, an unreadable character in the PDF's text, a lost
  decimal point), a text or label its quote does not plainly say, a judgment (never verified by a word), or a quote
  from the reference list, a table of contents or a running header. A person looks.
- ``unverified``: the quote is not in the document, differs in a number, sign, comparator, negation or meaning, the
  value is a number that its quote does not contain, or a value with no content (stop-words, punctuation). A person
  must check.
- ``not_reported``: the model says the document does not report it (a quote it gave anyway is kept in the note).

Completeness is the weighted share (required fields twice) of fields that are verified, or explicitly not reported
for an optional field; a required field not found, a field the model left out of its answer, and a field flagged by a
consistency check count against it. ≥ 0.9 ``done``, ≥ 0.5 ``partial``, below ``incomplete``; an answer with no value
at all is ``incomplete``. ``done`` also needs every required value verified and no unverified value, no flagged
field (consistency violation, implausible value, chunks that disagree): otherwise ``partial``, the counts in the
reason.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from atlas_pipeline.core.consistency_rules import ConsistencyCheck
from atlas_pipeline.core.plausibility import as_number, value_problem
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import entry_field_name, entry_field_parts
from atlas_pipeline.grading.consistency import Violation, evaluate
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.grading.values import clean_value, support_of

DONE_AT = 0.9
PARTIAL_AT = 0.5
REVIEW_TIERS = ("unverified", "approximate")
TIER_RANK = {"verified": 3, "approximate": 2, "unverified": 1, "not_reported": 0}


@dataclass
class FieldResult:
    """One extracted field as a reviewer sees it: value, quote, grade, and where the evidence is."""

    module: str
    value: Any
    quote: str | None
    confidence: float
    tier: str  # verified | approximate | unverified | not_reported
    start: int | None = None  # span in document.md
    end: int | None = None
    method: str = "none"  # exact | segmented | close | none
    note: str = ""
    page: int | None = None
    table: int | None = None  # index in tables.json when the quote is in a table
    row: int | None = None  # 1-based row of that table
    answered: bool = True  # False: the model's answer left this field out
    flags: list[str] = field(default_factory=list)  # consistency violations and chunk disagreements
    chunk: int | None = None  # chunked strategy: the chunk (1-based) the kept value came from
    candidates: list[dict[str, Any]] = field(default_factory=list)  # chunked: other chunks' differing values
    raw_value: Any = None  # the model's value as it gave it, when cleaning its markup changed it
    agreement: str = ""  # two extractors: agreed | disagreed | only_one | neither (``grading.agreement``)

    @property
    def needs_review(self) -> bool:
        return self.tier in REVIEW_TIERS or bool(self.flags)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _add_note(result: FieldResult, note: str) -> None:
    result.note = f"{result.note}; {note}" if result.note else note


def grade_field(
    name: str,
    field_type: str,
    module: str,
    answer: dict[str, Any] | None,
    scope: EvidenceScope,
    synonyms: dict[str, list[str]] | None = None,
    kind: str | None = None,
) -> FieldResult:
    """Grade the model's ``{"value": …, "quote": …}`` for one field against the document's evidence scope: is the
    quote in the document (``match_quote``), in a part that reports the study (not the reference list, a table of
    contents or a running header), and does it support the value for the field's value ``kind`` (the template's
    ``TemplateField.kind``; by default the one of ``field_type``)?"""
    if answer is None:
        return FieldResult(module, None, None, 0.0, "not_reported", answered=False, note="no answer for this field")
    value, quote = answer.get("value"), answer.get("quote")
    if isinstance(quote, str) and not quote.strip():
        quote = None
    if value in (None, "", []):
        result = FieldResult(module, None, None, 1.0, "not_reported")
        if quote:
            result.note = f"not reported; the model gave a quote without a value (kept as a note): {quote!r}"
        return result
    raw_value, value = value, clean_value(value)
    raw = raw_value if value != raw_value else None
    if not quote:
        return FieldResult(module, value, None, 0.0, "unverified", note="no quote given", raw_value=raw)
    evidence = scope.find(quote)
    match = evidence.match
    result = FieldResult(
        module,
        value,
        quote,
        match.confidence,
        match.tier,
        evidence.start,
        evidence.end,
        match.method,
        match.note,
        evidence.page,
        evidence.table,
        evidence.row,
        raw_value=raw,
    )
    if evidence.region and result.tier != "unverified":
        _add_note(result, f"quoted from {evidence.region}, which reports no study data")
        result.confidence, result.tier = min(result.confidence, 0.9), "approximate"
    support = support_of(value, quote, kind or field_type, synonyms)
    if support.problem:
        _add_note(result, support.problem)
        if support.cap == "unverified":
            result.confidence, result.tier = 0.0, "unverified"
        elif result.tier == "verified":
            result.confidence, result.tier = min(result.confidence, 0.9), "approximate"
    elif result.tier == "unverified" and not result.note:
        result.note = "quote not found in the document"
    return result


def apply_plausibility(fields_of: dict[str, Any], fields: dict[str, FieldResult]) -> list[str]:
    """Flag every value outside what its template field declares plausible — a ``pattern`` the whole value must match
    (``NCT`` + 8 digits), a ``minimum`` or ``maximum`` for a number. ``fields_of``: field name → its
    ``TemplateField`` (entries' fields included). Returns the messages."""
    messages = []
    for name, result in fields.items():
        definition = fields_of.get(name)
        value = result.value
        if definition is None or value is None or result.tier == "not_reported":
            continue
        message = ""
        if definition.pattern and not isinstance(value, bool) and not re.fullmatch(definition.pattern, str(value)):
            message = f"{name}: {value!r} does not match the pattern the template declares ({definition.pattern})"
        numeric = definition.type in ("integer", "number") or isinstance(value, int | float)
        number = as_number(value) if numeric else None
        unit = f" {definition.unit}" if definition.unit else ""
        problem = value_problem(definition.name, number, entering=True) if number is not None else None
        if number is not None and definition.minimum is not None and number < definition.minimum and not problem:
            message = f"{name}: {number:g} is below the plausible minimum {definition.minimum:g}{unit}"
        elif number is not None and definition.maximum is not None and number > definition.maximum:
            message = f"{name}: {number:g} is above the plausible maximum {definition.maximum:g}{unit}"
        elif problem:  # what no value of this field can be (a group of 10^29, an SD of 1e308): a person decides
            message = f"{name}: {problem}"
        if message and message not in result.flags:
            result.flags.append(message)
            messages.append(message)
    return messages


def apply_checks(
    checks: list[ConsistencyCheck], fields: dict[str, FieldResult], group_of: dict[str, str] | None = None
) -> list[Violation]:
    """Evaluate the template's checks on the extracted values and flag every field each violation involves.

    A check naming a field of a repeating group (``group_of``: field → group) holds per entry: it is evaluated on
    each entry's values (with the document's single values beside them), and its violations name the entry's
    fields (``outcomes[2].events_intervention``)."""
    group_of = group_of or {}
    single = {name: result.value for name, result in fields.items() if "[" not in name}
    entries: dict[tuple[str, int], dict[str, Any]] = {}
    for name, result in fields.items():
        group, entry, bare = entry_field_parts(name)
        if entry is not None:
            entries.setdefault((group, entry), {})[bare] = result.value
    violations: list[Violation] = []
    for check in checks:
        groups = {group_of[name] for name in check.fields if name in group_of}
        if not groups:
            violations += evaluate([check], single)
            continue
        for (group, entry), values in sorted(entries.items()):
            if group not in groups:
                continue
            for violation in evaluate([check], {**single, **values}):
                named = [entry_field_name(group, entry, n) if group_of.get(n) == group else n for n in violation.fields]
                violations.append(
                    violation.model_copy(
                        update={
                            "fields": named,
                            "values": dict(zip(named, violation.values.values(), strict=True)),
                            "message": f"{group}[{entry}]: {violation.message}",
                        }
                    )
                )
    for violation in violations:
        for name in violation.fields:
            if violation.message not in fields[name].flags:
                fields[name].flags.append(violation.message)
    return violations


def completeness(required: dict[str, bool], fields: dict[str, FieldResult]) -> float:
    """Weighted share (required fields count twice) of fields that count as complete (see the module docstring)."""
    total = good = 0
    for name, is_required in required.items():
        weight = 2 if is_required else 1
        total += weight
        result = fields[name]
        complete = not result.flags and (
            result.tier == "verified" or (result.tier == "not_reported" and result.answered and not is_required)
        )
        good += weight if complete else 0
    return round(good / total, 4) if total else 1.0


def document_status(
    required: dict[str, bool], fields: dict[str, FieldResult], violations: list[Violation]
) -> tuple[DocumentStatus, float, str]:
    """Status, completeness and the reason a person reads. ``done`` means every required value is verified and
    nothing in the answer is unsupported, flagged or contradicting: an answer with an unverified value (a quote not in
    the document, a value its quote does not say), a flagged field (a consistency violation, a value outside its
    plausible range, chunks that disagree) or a required value that is not verified is at best ``partial``, with the
    counts in the reason."""
    score = completeness(required, fields)
    found = [result for result in fields.values() if result.tier != "not_reported"]
    review = [name for name, result in fields.items() if result.needs_review]
    missing = [name for name, is_required in required.items() if is_required and fields[name].tier == "not_reported"]
    unsupported = [name for name, result in fields.items() if result.tier == "unverified"]
    flagged = [name for name, result in fields.items() if result.flags]
    unsure = [
        name
        for name, is_required in required.items()
        if is_required and fields[name].tier not in ("verified", "not_reported", "unverified")
    ]
    if not found:
        return DocumentStatus.INCOMPLETE, score, "the model reported no value for any field"
    status = (
        DocumentStatus.DONE
        if score >= DONE_AT
        else DocumentStatus.PARTIAL
        if score >= PARTIAL_AT
        else DocumentStatus.INCOMPLETE
    )
    if status == DocumentStatus.DONE and (violations or flagged or unsupported or missing or unsure):
        status = DocumentStatus.PARTIAL  # never done with a value nobody can stand behind
    parts = [f"completeness {score:.0%}"]
    if review:
        parts.append(f"{len(review)} field(s) need review")
    if unsupported:
        parts.append(f"{len(unsupported)} unsupported value(s): " + ", ".join(unsupported[:5]))
    if flagged:
        parts.append(f"{len(flagged)} flagged field(s)")
    if unsure:
        parts.append(f"required not verified: {', '.join(unsure[:5])}")
    if missing:
        parts.append(f"required not found: {', '.join(missing)}")
    if violations:
        parts.append(f"{len(violations)} consistency violation(s): " + "; ".join(v.message for v in violations[:3]))
    if not review and not missing and not violations:
        parts.append("every value verified or not reported")
    return status, score, "; ".join(parts)
