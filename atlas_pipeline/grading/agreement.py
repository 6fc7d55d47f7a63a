"""Agreement between two independent extractions of one document, value by value, and how often two extractors
agree per field.

``verified`` proves the document says what the quote says, not that the value is the right one for its field; a
second, independent extraction is how systematic reviewers catch the rest (the Cochrane Handbook asks for two). Two
values *agree* when they are the same after normalisation: numbers equal as written (``1.20`` is ``1.2``, ``1.23``
is not), labels equal up to case, text equal up to typography, case and word order (``grading.text`` tokens),
lists equal as sets. The entries of a repeating group (one per outcome × comparison × time point) are matched by
their identity fields first, so the same outcome listed in another order still lines up.

Each value gets a state: ``agreed``, ``disagreed``, ``only_one`` (one extractor found it, the other did not — most
extraction errors are omissions) or ``neither``. ``agreement_statistics`` gives, per field, the share of values both
found on which they agree and Cohen's kappa (for labels and yes/no fields, where chance agreement is worth
correcting for).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.grading.text import BOUNDARY, tokenize

AgreementState = Literal["agreed", "disagreed", "only_one", "neither"]
AGREEMENT_STATES: tuple[AgreementState, ...] = ("agreed", "disagreed", "only_one", "neither")
KAPPA_KINDS = frozenset({"label", "boolean", "judgment"})


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or value == []


_GROUPED = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d+)?$")  # 1,200 or 12,345.6: thousands, not a decimal comma


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    text = str(value).strip().replace("\u2212", "-")
    try:
        return Decimal(text.replace(",", "") if _GROUPED.match(text) else text)
    except InvalidOperation:
        return None


def _text(value: Any) -> tuple[str, ...]:
    """The value's tokens, folded (case, typography) and in any order; sentence boundaries (``;``) do not count."""
    return tuple(sorted(token.text for token in tokenize(str(value)).tokens if token.kind != BOUNDARY))


def same_value(first: Any, second: Any, kind: str = "text") -> bool:
    """Whether two present values are the same for a field of this value ``kind`` (``TemplateField.kind``)."""
    if isinstance(first, list) or isinstance(second, list):
        items = [first if isinstance(first, list) else [first], second if isinstance(second, list) else [second]]
        return {_text(item) for item in items[0]} == {_text(item) for item in items[1]}
    if kind == "number" or (isinstance(first, int | float) and isinstance(second, int | float)):
        a, b = _number(first), _number(second)
        if a is not None and b is not None:
            return a == b
    if kind == "boolean" or isinstance(first, bool) or isinstance(second, bool):
        return str(first).strip().casefold() == str(second).strip().casefold()
    if kind == "label":
        return " ".join(str(first).split()).casefold() == " ".join(str(second).split()).casefold()
    return _text(first) == _text(second)


def agreement_state(first: Any, second: Any, kind: str = "text") -> AgreementState:
    """The state of one value extracted twice (None, "" or [] for a value an extractor did not find)."""
    if _missing(first) and _missing(second):
        return "neither"
    if _missing(first) or _missing(second):
        return "only_one"
    return "agreed" if same_value(first, second, kind) else "disagreed"


@dataclass(frozen=True)
class ValueAgreement:
    """One value of the document as two extractors gave it. ``field``: the field's name as extractor A numbered it
    (``outcomes[2].mean_intervention``; an entry only B found is numbered after A's); ``second_field``: B's name for
    it ("" when B has no such entry)."""

    field: str
    state: AgreementState
    first: Any
    second: Any
    second_field: str


def _value(fields: Mapping[str, Mapping[str, Any]], name: str) -> Any:
    result = fields.get(name)
    return None if result is None else result.get("value")


def _entries(fields: Mapping[str, Mapping[str, Any]], group: str) -> dict[int, dict[str, Any]]:
    """Entry number → {field: value} of one repeating group."""
    entries: dict[int, dict[str, Any]] = {}
    for name in fields:
        entry_group, number, bare = entry_field_parts(name)
        if entry_group == group and number is not None:
            entries.setdefault(number, {})[bare] = _value(fields, name)
    return entries


def _identity(entry: Mapping[str, Any], identity: list[str]) -> tuple[tuple[str, ...], ...]:
    return tuple(_text(entry.get(name)) if not _missing(entry.get(name)) else () for name in identity)


def match_entries(
    first: Mapping[int, Mapping[str, Any]], second: Mapping[int, Mapping[str, Any]], identity: list[str]
) -> list[tuple[int | None, int | None]]:
    """Pairs (A's entry, B's entry) of one group: entries with the same identity (normalised) are one entry, in A's
    order, then B's entries A did not have; an entry with no identity value at all is never matched."""
    unmatched = {number: _identity(entry, identity) for number, entry in second.items()}
    pairs: list[tuple[int | None, int | None]] = []
    for number, entry in first.items():
        key = _identity(entry, identity)
        match = next((other for other, theirs in unmatched.items() if any(key) and theirs == key), None)
        if match is not None:
            del unmatched[match]
        pairs.append((number, match))
    pairs.extend((None, number) for number in unmatched)
    return pairs


def compare_extractions(
    first: Mapping[str, Mapping[str, Any]], second: Mapping[str, Mapping[str, Any]], template: Template
) -> list[ValueAgreement]:
    """Every value of the template as extractors A and B gave it (``fields`` of two extraction records: name →
    ``{"value": …, …}``): the single fields, then each group's entries matched by identity."""
    results = []
    for definition in template.fields:
        name = definition.name
        a, b = _value(first, name), _value(second, name)
        results.append(ValueAgreement(name, agreement_state(a, b, definition.kind), a, b, name))
    for module in template.groups:
        mine, theirs = _entries(first, module.name), _entries(second, module.name)
        added = max(mine, default=-1)  # an entry only B found is numbered after A's
        for a_number, b_number in match_entries(mine, theirs, list(module.identity)):
            if a_number is None:
                added += 1
            number = a_number if a_number is not None else added
            a_entry = mine.get(a_number, {}) if a_number is not None else {}
            b_entry = theirs.get(b_number, {}) if b_number is not None else {}
            for definition in module.fields:
                b_name = f"{module.name}[{b_number}].{definition.name}" if b_number is not None else ""
                a, b = a_entry.get(definition.name), b_entry.get(definition.name)
                state = agreement_state(a, b, definition.kind)
                results.append(ValueAgreement(f"{module.name}[{number}].{definition.name}", state, a, b, b_name))
    return results


@dataclass(frozen=True)
class FieldAgreement:
    """How two extractors agreed on one field over many documents (entries of a group count once each):
    ``compared`` values both found, ``agreed`` of them, ``only_one`` found by one extractor alone; ``kappa``: Cohen's
    kappa over the compared values (labels and yes/no fields; None where chance agreement is certain)."""

    field: str
    compared: int
    agreed: int
    only_one: int
    kappa: float | None

    @property
    def percent_agreement(self) -> float | None:
        return round(100 * self.agreed / self.compared, 1) if self.compared else None


def cohen_kappa(pairs: Iterable[tuple[Any, Any]]) -> float | None:
    """Cohen's kappa of two raters' labels on the same items: (observed − chance agreement) / (1 − chance). None
    when there is nothing to rate or chance agreement is 1 (both raters gave one and the same label throughout)."""
    pairs = [(str(a).strip().casefold(), str(b).strip().casefold()) for a, b in pairs]
    if not pairs:
        return None
    total = len(pairs)
    observed = sum(a == b for a, b in pairs) / total
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[label] * second[label] for label in first) / (total * total)
    if chance >= 1:
        return None
    return round((observed - chance) / (1 - chance), 4)


def agreement_statistics(documents: Iterable[list[ValueAgreement]], template: Template) -> list[FieldAgreement]:
    """Per field of the template (a group's field counted over its entries), in template order."""
    states: dict[str, list[ValueAgreement]] = {}
    for values in documents:
        for value in values:
            group, _, bare = entry_field_parts(value.field)
            states.setdefault(f"{group}.{bare}" if group else bare, []).append(value)
    rows = []
    for module in template.modules:
        for definition in module.fields:
            name = f"{module.name}.{definition.name}" if module.repeating else definition.name
            values = states.get(name, [])
            both = [value for value in values if value.state in ("agreed", "disagreed")]
            kappa = None
            if definition.kind in KAPPA_KINDS:
                kappa = cohen_kappa((value.first, value.second) for value in both)
            rows.append(
                FieldAgreement(
                    field=name,
                    compared=len(both),
                    agreed=sum(value.state == "agreed" for value in both),
                    only_one=sum(value.state == "only_one" for value in values),
                    kappa=kappa,
                )
            )
    return rows
