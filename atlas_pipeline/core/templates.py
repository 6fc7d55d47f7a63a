"""Extraction templates: modules of typed fields and consistency checks, loaded from seed data, with a content hash.

Every extraction records the hash of the template it used, so a changed template makes old extractions stale
instead of silently mixing two versions in one export. An enum field may agree synonyms for its values (the words a
quote may use to support ``low`` risk of bias, say); ``checks`` declare what must hold between values
(``grading.consistency``).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from atlas_pipeline.core.consistency_rules import ConsistencyCheck, check_fields_exist
from atlas_pipeline.core.conversions import FORMULAS
from atlas_pipeline.core.errors import AtlasError

RESERVED_SHEETS = frozenset({"documents", "extractions", "fields", "approved", "review_quality", "task_completion"})
FieldType = Literal["string", "integer", "number", "boolean", "enum", "date", "list"]
# how a quote supports a value (``grading.values``): a label is its own token or an agreed synonym; a judgment (risk
# of bias, a design classification) is never written verbatim, so its quote is evidence a person weighs
ValueKind = Literal["number", "label", "judgment", "text", "date", "boolean"]
_KIND_OF_TYPE: dict[str, ValueKind] = {
    "integer": "number",
    "number": "number",
    "enum": "label",
    "string": "text",
    "list": "text",
    "date": "date",
    "boolean": "boolean",
}


class TemplateField(BaseModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    type: FieldType
    description: str
    required: bool = False
    unit: str | None = None
    enum: list[str] | None = None
    synonyms: dict[str, list[str]] = Field(
        default_factory=dict, description="enum value → words a quote may use for it (agreed by the team)"
    )
    judgment: bool = Field(
        False, description="a reviewer's judgment (risk of bias, a classification): never verified by a word"
    )
    pattern: str | None = Field(None, description="a regular expression the whole value must match (plausibility)")
    minimum: float | None = Field(None, description="smallest plausible number")
    maximum: float | None = Field(None, description="largest plausible number")
    detail: bool = Field(
        False, description="a value most entries leave empty (an input of a derivation): the grid shows it on demand"
    )
    by_person: bool = Field(
        False, description="a value only a person gives (an override of a judgement, with its reason): never asked"
    )

    @property
    def kind(self) -> ValueKind:
        """How a quote supports this field's value (``grading.values.value_support``)."""
        return "judgment" if self.judgment else _KIND_OF_TYPE[self.type]

    @model_validator(mode="after")
    def _pattern_compiles(self) -> TemplateField:
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as error:
                message = f"field {self.name!r}: pattern {self.pattern!r} is not a regular expression: {error}"
                raise ValueError(message) from error
        return self


class DerivationRule(BaseModel):
    """How a field's value may be derived when the paper does not write it (``review.derived_values``): a named
    formula (``core.conversions.FORMULAS``) whose inputs are other fields of the same module (of the same entry, in a
    repeating one) — ``"mean_intervention - mean_comparator"`` names a difference of two — used only when every
    input is an accepted value, and only when ``when`` holds (``{"effect_measure": ["MD"]}``)."""

    field: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    formula: str
    inputs: dict[str, str]
    when: dict[str, list[str]] = Field(default_factory=dict)
    # inputs used when given and accepted, the formula's default otherwise (``{"level": "ci_level"}``: a CI's level)
    optional: dict[str, str] = Field(default_factory=dict)

    def input_fields(self) -> list[str]:
        return [name.strip() for spec in self.inputs.values() for name in spec.split(" - ")]


class TemplateModule(BaseModel):
    """A group of fields. A repeating module (``repeating: true``) holds a list of entries — one per outcome ×
    comparison × time point, say — each with every field of the module, identified by its ``identity`` fields
    (entries from several chunks with the same identity are one entry), at most ``max_entries`` of them."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    fields: list[TemplateField]
    repeating: bool = False
    identity: list[str] = Field(default_factory=list)
    max_entries: int = Field(30, ge=1, le=500)
    derivations: list[DerivationRule] = Field(default_factory=list)
    # a RoB 2 assessment (``core.rob2_module``): its answers are asked domain by domain, per result, and judged by
    # the guidance's algorithms; the value is the effect its domain 2 assesses
    rob2: Literal["assignment", "adhering"] | None = None

    def field_definition(self, name: str) -> TemplateField | None:
        return next((field for field in self.fields if field.name == name), None)

    @model_validator(mode="after")
    def _derivations_name_fields(self) -> TemplateModule:
        types = {field.name: field.type for field in self.fields}
        for rule in self.derivations:
            where = f"module {self.name!r}: derivation of {rule.field!r}"
            if rule.formula not in FORMULAS:
                raise ValueError(f"{where}: unknown formula {rule.formula!r} (one of {', '.join(sorted(FORMULAS))})")
            named = [rule.field, *rule.input_fields(), *rule.when, *rule.optional.values()]
            unknown = [name for name in named if name not in types]
            if unknown:
                raise ValueError(f"{where}: {', '.join(unknown)} not among the module's fields")
            numbers = [rule.field, *rule.input_fields(), *rule.optional.values()]
            numeric = [name for name in numbers if types[name] not in ("integer", "number")]
            if numeric:
                raise ValueError(f"{where}: {', '.join(numeric)} must be numbers")
        return self

    @model_validator(mode="after")
    def _identity_in_module(self) -> TemplateModule:
        names = {field.name for field in self.fields}
        unknown = [name for name in self.identity if name not in names]
        if unknown:
            raise ValueError(f"module {self.name!r}: identity field(s) {', '.join(unknown)} not among its fields")
        if self.repeating and not self.identity:
            raise ValueError(f"repeating module {self.name!r} needs an identity (the fields that tell entries apart)")
        if self.repeating and (self.name in RESERVED_SHEETS or len(self.name) > 31):
            raise ValueError(
                f"repeating module {self.name!r}: its export sheet needs a name of at most 31 characters other than "
                f"{', '.join(sorted(RESERVED_SHEETS))}"
            )
        return self


class Template(BaseModel):
    code: str
    name: str
    version: str
    description: str = ""
    modules: list[TemplateModule]
    checks: list[ConsistencyCheck] = Field(default_factory=list)

    @model_validator(mode="after")
    def _checks_name_numeric_fields(self) -> Template:
        every = [field for module in self.modules for field in module.fields]
        names = [field.name for field in every] + [module.name for module in self.groups]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"field and group names must be unique across modules: {', '.join(repeated)}")
        problems = check_fields_exist(self.checks, {field.name: field.type for field in every})
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def fields(self) -> list[TemplateField]:
        """The single-valued fields (every module that does not repeat)."""
        return [field for module in self.modules if not module.repeating for field in module.fields]

    @property
    def groups(self) -> list[TemplateModule]:
        """The repeating modules."""
        return [module for module in self.modules if module.repeating]

    @property
    def rob2(self) -> TemplateModule | None:
        """The RoB 2 assessment module, if the template has one."""
        return next((module for module in self.modules if module.rob2), None)

    def asked_at_once(self) -> Template:
        """What one extraction request asks for: every module but a RoB 2 assessment (asked domain by domain,
        ``extraction.rob2_proposal``) and without the fields only a person gives."""
        modules = [
            module.model_copy(update={"fields": [field for field in module.fields if not field.by_person]})
            for module in self.modules
            if not module.rob2
        ]
        return self.model_copy(update={"modules": [module for module in modules if module.fields]})

    def identity_for(self, name: str) -> list[str]:
        """The identity fields of the group an entry field (``outcomes[2].x``) belongs to; [] for a single field."""
        group = entry_field_parts(name)[0]
        return next((list(module.identity) for module in self.groups if module.name == group), [])

    def field_definition(self, name: str) -> TemplateField | None:
        """A field by its name, or by its name in an entry of a group (``outcomes[2].mean_intervention``) whose
        number the group can hold (``entry_in_range``); None for any other name."""
        group, entry, bare = entry_field_parts(name)
        if "[" in name and entry is None:
            return None
        for module in self.modules:
            if group and module.name == group and not entry_in_range(entry, module.max_entries):
                return None
            if (module.name == group) if group else not module.repeating:
                for field in module.fields:
                    if field.name == bare:
                        return field
        return None

    def subset(self, module_names: list[str]) -> Template:
        """The template asking for these modules only (an answer too long for one request is asked in parts); its
        checks are left to the whole template, which grades the merged answer."""
        modules = [module for module in self.modules if module.name in module_names]
        return self.model_copy(update={"modules": modules, "checks": []})

    @property
    def content_hash(self) -> str:
        # derivation rules say how to compute a missing value after extraction: not part of what is extracted
        extracted = self.model_dump(mode="json", exclude={"modules": {"__all__": {"derivations"}}})
        for module in extracted["modules"]:  # keys added later, left out while unset: a template's hash stays
            if module.get("rob2") is None:
                module.pop("rob2", None)
            for item in module["fields"]:
                if not item.get("by_person"):
                    item.pop("by_person", None)
        canonical = json.dumps(extracted, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


ADDED_FROM = 1001  # a person's entries are numbered from here: above any group's max_entries (≤ 500)


def entry_in_range(entry: int | None, max_entries: int) -> bool:
    """Whether an entry number is one a group holds: a model's (1…``max_entries``) or a person's (``ADDED_FROM`` and
    the ``max_entries`` after it)."""
    return entry is not None and (1 <= entry <= max_entries or ADDED_FROM <= entry < ADDED_FROM + max_entries)


def entry_field_name(group: str, entry: int, field: str) -> str:
    """How a field of one entry of a repeating group is named in records, exports and decisions."""
    return f"{group}[{entry}].{field}"


def entry_field_parts(name: str) -> tuple[str, int | None, str]:
    """(group, entry, field) of an entry's field name; ("", None, name) for a single-valued field."""
    if "[" not in name:
        return "", None, name
    group, rest = name.split("[", 1)
    number, _, field = rest.partition("].")
    return group, int(number) if number.isdigit() else None, field


class CustomField(BaseModel):
    """A project's own field: name, type and an instruction for the extractor."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    type: FieldType = "string"
    instruction: str
    enum: list[str] | None = None


def assemble_template(
    template: Template, custom_fields: list[CustomField], assessment: TemplateModule | None = None
) -> Template:
    """The template a project extracts with: the base modules plus a ``custom`` module of its own fields, and a RoB 2
    assessment per result when the rule asks for one (``assessment``: ``core.rob2_module.rob2_module``)."""
    if assessment is not None:
        if template.rob2 is not None or any(module.name == assessment.name for module in template.modules):
            raise TemplateError(f"template {template.code!r} has a module named {assessment.name} already")
        try:  # checked as a template file is: names unique across modules
            template = Template.model_validate({**template.model_dump(), "modules": [*template.modules, assessment]})
        except ValueError as error:
            raise TemplateError(f"template {template.code!r} with RoB 2: {error}") from error
    if not custom_fields:
        return template
    taken = {field.name for module in template.modules for field in module.fields}
    taken |= {module.name for module in template.modules} | {"custom"}
    clashes = sorted(field.name for field in custom_fields if field.name in taken)
    if clashes:
        raise TemplateError(f"custom fields clash with template fields: {', '.join(clashes)}")
    module = TemplateModule(
        name="custom",
        description="Project-specific fields",
        fields=[TemplateField(name=f.name, type=f.type, description=f.instruction, enum=f.enum) for f in custom_fields],
    )
    return template.model_copy(update={"modules": [*template.modules, module]})


class TemplateError(AtlasError, ValueError):
    """A template or rule file is missing or invalid."""


def load_template(templates_dir: Path, code: str) -> Template:
    path = templates_dir / f"{code}.json"
    if not path.is_file():
        known = sorted(p.stem for p in templates_dir.glob("*.json"))
        raise TemplateError(f"template {code!r} not found in {templates_dir} (known: {', '.join(known) or 'none'})")
    try:
        return Template.model_validate_json(path.read_text("utf-8"))
    except ValueError as error:
        raise TemplateError(f"template {path} is invalid: {error}") from error
