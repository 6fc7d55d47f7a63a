"""A study's values reconciled across its reports: the same value in each is the study's; reports that say
different things are a conflict until a person chooses, and the choice is kept in an append-only log.

Only accepted values count (a report's final value: approved, corrected, added by a person, or verified under the
team's policy; never a rejected or undecided one). An entry of a repeating group is matched across reports by its
identity values (outcome, time point, arms), not by its number, which differs from report to report. A choice
applies while the reports say what they said when it was made; when one of them changes, the conflict opens again.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.review.decisions import (
    DecisionRefused,
    file_stamp,
    now_stamp,
    reviewer_name,
    same_value,
    value_text,
)
from atlas_pipeline.review.final_values import DocumentReview
from atlas_pipeline.store.files import Store

StudyState = Literal["agreed", "single", "conflict", "chosen"]
STUDY_CHOICES = "reviews/studies"


class StudyChoice(BaseModel):
    """A person's choice between the reports' values of one study field."""

    id: str
    study: str
    field: str
    value: object = None
    from_report: str
    reviewer: str
    decided_at: str
    note: str = ""
    values_then: dict[str, str] = Field(default_factory=dict)  # report → its value (text) when the choice was made


class StudyValue(BaseModel):
    field: str
    state: StudyState
    value: object = None  # the study's value (None while in conflict)
    reports: dict[str, object] = Field(default_factory=dict)  # report → its accepted value
    source: str = ""  # the report the value comes from (chosen, single), or "" when all agree
    chosen_by: str = ""
    chosen_at: str = ""
    note: str = ""


def entry_label(group: str, identity: Mapping[str, object]) -> str:
    """A group entry named by what it is, the same in every report: ``outcomes[Duration of diarrhea | 24 h | …]``."""
    return f"{group}[{' | '.join(value_text(value) for value in identity.values())}]"


def report_values(review: DocumentReview | None, template: Template) -> dict[str, object]:
    """A report's accepted values by study field name (single fields by name, entries by their identity)."""
    if review is None:
        return {}
    accepted = {
        name: final.final_value
        for name, final in review.fields.items()
        if final.decided and final.provenance != "rejected" and final.final_value is not None
    }
    values: dict[str, object] = {}
    identities = {group.name: list(group.identity) for group in template.groups}
    for name, value in accepted.items():
        group, entry, bare = entry_field_parts(name)
        if entry is None:
            values[name] = value
            continue
        identity = {key: accepted.get(f"{group}[{entry}].{key}") for key in identities.get(group, [])}
        if bare in identity or not any(v is not None for v in identity.values()):
            continue  # the identity itself names the entry; an entry with none cannot be matched across reports
        values[f"{entry_label(group, identity)}.{bare}"] = value
    return values


def reconcile(
    values_by_report: Mapping[str, Mapping[str, object]], choices: Sequence[StudyChoice]
) -> dict[str, StudyValue]:
    """The study's value of every field some report gives."""
    fields = sorted({name for values in values_by_report.values() for name in values})
    latest: dict[str, StudyChoice] = {}
    for choice in sorted(choices, key=lambda c: (c.decided_at, c.id)):
        latest[choice.field] = choice
    result = {}
    for name in fields:
        given = {key: values[name] for key, values in values_by_report.items() if name in values}
        first = next(iter(given.values()))
        if len(given) == 1:
            source = next(iter(given))
            result[name] = StudyValue(field=name, state="single", value=first, reports=given, source=source)
            continue
        if all(same_value(first, value) for value in given.values()):
            result[name] = StudyValue(field=name, state="agreed", value=first, reports=given)
            continue
        choice = latest.get(name)
        now = {key: value_text(value) for key, value in given.items()}
        if choice is not None and choice.values_then == now:
            result[name] = StudyValue(
                field=name,
                state="chosen",
                value=choice.value,
                reports=given,
                source=choice.from_report,
                chosen_by=choice.reviewer,
                chosen_at=choice.decided_at,
                note=choice.note,
            )
        else:
            result[name] = StudyValue(field=name, state="conflict", reports=given)
    return result


def choose(
    store: Store,
    study: str,
    field: str,
    from_report: str,
    values_by_report: Mapping[str, Mapping[str, object]],
    *,
    reviewer: str,
    note: str = "",
) -> StudyChoice:
    """Record that ``field`` of ``study`` takes ``from_report``'s value (refused when that report gives none)."""
    given = {key: values[field] for key, values in values_by_report.items() if field in values}
    if from_report not in given:
        raise DecisionRefused(f"{from_report} gives no accepted value of {field} in study {study}")
    choice = StudyChoice(
        id=uuid.uuid4().hex[:12],
        study=study,
        field=field,
        value=given[from_report],
        from_report=from_report,
        reviewer=reviewer_name(reviewer),
        decided_at=now_stamp(),
        note=note.strip(),
        values_then={key: value_text(value) for key, value in given.items()},
    )
    path = f"{STUDY_CHOICES}/{study}/{file_stamp(choice.decided_at)}-{choice.id}.json"
    store.write_json(path, choice.model_dump(mode="json"))
    return choice


def load_choices(store: Store) -> dict[str, list[StudyChoice]]:
    """Every study's choices, from one listing of the log (not one listing per study)."""
    choices: dict[str, list[StudyChoice]] = {}
    for path in store.files(STUDY_CHOICES):
        choice = StudyChoice.model_validate(store.read_json(path))
        choices.setdefault(choice.study, []).append(choice)
    return choices
