"""Values a paper does not write but gives the inputs for — an SD from an SE, events from a percentage — derived by
the template's rules (``core.templates.DerivationRule``) with the Handbook's formulas (``core.conversions``).

A derivation is made only from *accepted* final values (verified and accepted by the team's policy, or decided by a
person), never from a value awaiting review or rejected: it is then ``refused``, saying which input holds it back.
It fills only a field with no value: a value the paper writes always wins. A conversion the Handbook warns against
(an SD from a range or an IQR) is ``flagged`` unless the team opted in to it by name (``ATLAS_DERIVE_OPT_IN``).
Every derivation keeps its formula, its inputs with their quotes, and the arithmetic written out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from atlas_pipeline.core.conversions import CAUTIONED, FORMULAS, ConversionError
from atlas_pipeline.core.p_values import exactness
from atlas_pipeline.core.templates import DerivationRule, Template, TemplateModule, entry_field_name, entry_field_parts

ACCEPTED = frozenset({"model_verified", "reviewer_approved", "reviewer_corrected", "reviewer_added"})
DERIVED_TIER = "derived"


class FinalField(Protocol):
    """What a derivation reads of a final value (``review.final_values.FinalField``)."""

    final_value: Any
    model_value: Any
    provenance: str
    quote: str | None
    corrected_quote: str | None
    final_state: str  # ``review.finality``: a disputed input holds a derivation back


class DerivationInput(BaseModel):
    role: str
    field: str  # the record's name (``outcomes[2].se_intervention``)
    value: Any = None
    provenance: str = ""
    quote: str | None = None


class DerivedValue(BaseModel):
    field: str  # the record's name of the value derived
    module: str
    entry: int | None = None
    formula: str
    state: Literal["derived", "refused", "flagged"]
    value: float | int | None = None
    arithmetic: str = ""
    source: str = ""
    reason: str = ""  # refused / flagged: why, in words
    inputs: list[DerivationInput] = Field(default_factory=list)

    @property
    def tier(self) -> str:
        return DERIVED_TIER


def _scopes(fields: Mapping[str, FinalField], module: TemplateModule) -> dict[int | None, dict[str, FinalField]]:
    """The fields of each entry of a repeating module (by entry number), or of the module itself (None)."""
    if not module.repeating:
        names = {field.name for field in module.fields}
        return {None: {name: value for name, value in fields.items() if name in names}}
    scopes: dict[int | None, dict[str, FinalField]] = defaultdict(dict)
    for name, value in fields.items():
        group, entry, bare = entry_field_parts(name)
        if group == module.name and entry is not None:
            scopes[entry][bare] = value
    return dict(sorted(scopes.items()))


def _has_value(final: FinalField | None) -> bool:
    return final is not None and final.final_value not in (None, "")


def _given(final: FinalField | None) -> bool:
    """A value is there — accepted or not (a value awaiting review holds a derivation back; none gives nothing)."""
    return _has_value(final) or (
        final is not None and final.model_value not in (None, "") and final.provenance != "rejected"
    )


def _accepted(final: FinalField) -> bool:
    """An input a derivation may use: accepted, and not disputed between two people (``review.finality``: a value
    still being extracted by a team is compared with the derived value later, so it may be used)."""
    return final.provenance in ACCEPTED and final.final_state != "disputed"


def _state_words(final: FinalField) -> str:
    return "disputed" if final.final_state == "disputed" else final.provenance.replace("_", " ")


def _quote(final: FinalField) -> str | None:
    return final.corrected_quote or final.quote


def _number(value: Any) -> float:
    """A final value as a number, an integer kept whole (a percentage's written precision matters)."""
    text = str(value).replace("−", "-").strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else float(text)


def _derive(
    module: TemplateModule,
    entry: int | None,
    fields: dict[str, FinalField],
    rule: DerivationRule,
    opted_in: frozenset[str],
) -> DerivedValue | None:
    """The rule applied to one scope; None when an input is not given at all (nothing to derive from)."""
    name = (lambda bare: entry_field_name(module.name, entry, bare)) if entry is not None else (lambda bare: bare)
    if any(not _given(fields.get(bare)) for bare in rule.input_fields()):
        return None
    for bare, allowed in rule.when.items():
        final = fields.get(bare)
        shown = final.final_value if _has_value(final) else final.model_value if final is not None else None
        if not _given(final) or str(shown) not in allowed:
            return None
    base = {"field": name(rule.field), "module": module.name, "entry": entry, "formula": rule.formula}
    # an optional input (a CI's level) counts once it is there: a level awaiting review holds the derivation back
    given_optional = [bare for bare in rule.optional.values() if _given(fields.get(bare))]
    used = [bare for bare in [*rule.input_fields(), *rule.when, *given_optional]]
    inputs = [
        DerivationInput(
            role=role if bare in spec else bare,
            field=name(bare),
            value=fields[bare].final_value if _has_value(fields[bare]) else fields[bare].model_value,
            provenance=fields[bare].provenance,
            quote=_quote(fields[bare]),
        )
        for role, spec in [*rule.inputs.items(), *((bare, bare) for bare in rule.when)]
        for bare in [part.strip() for part in spec.split(" - ")]
    ]
    held = [bare for bare in dict.fromkeys(used) if not _accepted(fields[bare])]
    if held:
        said = ", ".join(f"{name(bare)} is {_state_words(fields[bare])}" for bare in held)
        return DerivedValue(**base, state="refused", inputs=inputs, reason=f"not from an unaccepted input: {said}")
    for role, spec in rule.inputs.items():
        if role == "p":  # a threshold ("p < 0.001") is no number to compute with, wherever it says so
            final = fields[spec.strip()]
            why = exactness(final.final_value, [final.corrected_quote, final.quote])
            if why is not None:
                reason = f"{name(spec.strip())}: {why}"
                return DerivedValue(**base, state="refused", inputs=inputs, reason=reason)
    arguments: dict[str, float] = {}
    try:
        for role, spec in rule.inputs.items():
            parts = [_number(fields[part.strip()].final_value) for part in spec.split(" - ")]
            arguments[role] = parts[0] - parts[1] if len(parts) == 2 else parts[0]
    except ValueError:
        return DerivedValue(**base, state="refused", inputs=inputs, reason="an input is not a number")
    try:
        for role, field in rule.optional.items():
            if field in given_optional:
                arguments[role] = _number(fields[field].final_value)
    except ValueError:
        return DerivedValue(**base, state="refused", inputs=inputs, reason=f"{name(field)} is not a number")
    try:
        conversion = FORMULAS[rule.formula](**arguments)
    except (ConversionError, ValueError) as error:
        return DerivedValue(**base, state="refused", inputs=inputs, reason=str(error))
    definition = module.field_definition(rule.field)
    value: float | int = conversion.value
    value = round(value) if definition is not None and definition.type == "integer" else round(value, 4)
    if rule.formula in CAUTIONED and rule.formula not in opted_in:
        reason = f"{conversion.caution}: derived only when the team opts in (ATLAS_DERIVE_OPT_IN={rule.formula})"
        return DerivedValue(
            **base, state="flagged", value=value, arithmetic=conversion.arithmetic, source=conversion.source,
            reason=reason, inputs=inputs,
        )  # fmt: skip
    return DerivedValue(
        **base, state="derived", value=value, arithmetic=conversion.arithmetic, source=conversion.source, inputs=inputs
    )


class Derivations:
    """A template's derivation rules and the cautioned conversions the team opted in to: what a review derives."""

    def __init__(self, template: Template, opted_in: frozenset[str] = frozenset()) -> None:
        self.template, self.opted_in = template, frozenset(opted_in)
        rules = [[rule.model_dump() for rule in module.derivations] for module in template.modules]
        canonical = json.dumps({"rules": rules, "opted_in": sorted(self.opted_in)}, sort_keys=True)
        self.fingerprint = hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def derive(self, fields: Mapping[str, FinalField]) -> list[DerivedValue]:
        """Every derivation the rules allow on a document's final values: for each field with no value, the first
        rule whose inputs are all given — derived, or refused/flagged with the reason (the next rule is then tried,
        so a sound conversion is preferred to a refused one)."""
        out: list[DerivedValue] = []
        for module in self.template.modules:
            if not module.derivations:
                continue
            for entry, scope in _scopes(fields, module).items():
                for target in dict.fromkeys(rule.field for rule in module.derivations):
                    if _has_value(scope.get(target)):
                        continue  # written (or awaiting a person's decision on what the model read): never replaced
                    tried = [
                        outcome
                        for rule in module.derivations
                        if rule.field == target
                        and (outcome := _derive(module, entry, scope, rule, self.opted_in)) is not None
                    ]
                    chosen = next((outcome for outcome in tried if outcome.state == "derived"), None)
                    if chosen is not None or tried:
                        out.append(chosen or tried[0])
        return out
