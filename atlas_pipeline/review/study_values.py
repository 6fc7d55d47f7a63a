"""A study's values reconciled across its reports: the same value in each is the study's; reports that say
different things are a conflict until a person chooses, and the choice is kept in an append-only log.

Only final values count (``review.finality``: approved, corrected, added by a person, or verified under the team's
policy — and, with a team, compared and agreed or settled; never a rejected, undecided, disputed or uncompared
one). An entry of a repeating group is matched across reports by its identity values (outcome, time point, arms),
not by its number, which differs from report to report. A choice applies while the reports say what they said when
it was made; when one of them changes, the conflict opens again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, Field

from atlas_pipeline.core.clock import now_stamp
from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.review.decisions import DecisionRefused, file_stamp, reviewer_name, same_value, value_text
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


def _label_text(value: object) -> str:
    """An identity value as it names an entry: spacing folded, so that two people typing one outcome name one entry."""
    return " ".join(value_text(value).split())


def entry_label(group: str, identity: Mapping[str, object]) -> str:
    """A group entry named by what it is, the same in every report: ``outcomes[Duration of diarrhea | 24 h | …]``."""
    return f"{group}[{' | '.join(_label_text(value) for value in identity.values())}]"


def report_fields(review: DocumentReview | None, template: Template, report: str) -> dict[str, dict[str, str]]:
    """Where a report's accepted values are: source → study field name → the record's field name.

    A source is the report itself, or ``"<report> entry <n>"`` for each of several entries of one group that name
    the same entry (two people who typed the same outcome): each is then a candidate for the study's one entry,
    compared like the reports are. An entry is named by its identity values (accepted, or as the model gave them
    while awaiting review: a name, not a number the analysis reads); an entry with none is named by its number.
    """
    if review is None:
        return {}

    def accepted(name: str) -> bool:  # final as the team's process made it (``review.finality``): nothing else
        final = review.fields.get(name)
        return final is not None and final.is_final and final.provenance != "rejected" and final.final_value is not None

    def label_value(name: str) -> object:
        final = review.fields.get(name)
        if final is None or final.provenance == "rejected":
            return None
        return final.final_value if final.final_value is not None else final.model_value

    identities = {group.name: list(group.identity) for group in template.groups}

    def unsettled(group: str, entry: int) -> bool:  # what the entry is, disputed: none of its values is the study's
        names = (review.fields.get(f"{group}[{entry}].{key}") for key in identities.get(group, []))
        return any(final is not None and final.final_state in ("disputed", "recheck") for final in names)

    single: dict[str, str] = {}
    entries: dict[tuple[str, int], dict[str, str]] = {}  # (group, entry) → bare field → the record's name
    labels: dict[tuple[str, int], str] = {}
    for name in review.fields:
        group, entry, bare = entry_field_parts(name)
        if entry is None:
            if accepted(name):
                single[name] = name
            continue
        if (group, entry) not in labels:
            identity = {key: label_value(f"{group}[{entry}].{key}") for key in identities.get(group, [])}
            named = any(value not in (None, "") for value in identity.values())
            labels[(group, entry)] = entry_label(group, identity) if named else f"{group}[#{entry} of {report}]"
        if bare not in identities.get(group, []) and accepted(name) and not unsettled(group, entry):
            entries.setdefault((group, entry), {})[bare] = name
    sources: dict[str, dict[str, str]] = {report: single}
    by_label: dict[str, list[tuple[str, int]]] = {}
    first: dict[str, str] = {}  # folded label → the label as first written
    for key in sorted(labels, key=lambda item: item[1]):
        folded = labels[key].casefold()
        first.setdefault(folded, labels[key])
        by_label.setdefault(folded, []).append(key)
    for folded, found in by_label.items():
        for group, entry in found:
            source = report if len(found) == 1 else f"{report} entry {entry}"
            named = {f"{first[folded]}.{bare}": record for bare, record in entries.get((group, entry), {}).items()}
            sources.setdefault(source, {}).update(named)
    return sources


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


def choices_changed_at(store: Store) -> float:
    """When a person last chose a study's value (from the log's file names alone, nothing read), or 0: the aggregates
    are made again after a choice, as after a decision (``atlas run``, the review sensor)."""
    newest = max((path.rsplit("/", 1)[-1].split("-", 1)[0] for path in store.files(STUDY_CHOICES)), default="")
    try:
        return datetime.strptime(newest, "%Y%m%dT%H%M%S.%fZ").replace(tzinfo=UTC).timestamp() if newest else 0.0
    except ValueError:
        return time.time()  # a name this version did not write: count it as new


def load_choices(store: Store) -> dict[str, list[StudyChoice]]:
    """Every study's choices, from one listing of the log (not one listing per study)."""
    choices: dict[str, list[StudyChoice]] = {}
    for path in store.files(STUDY_CHOICES):
        choice = StudyChoice.model_validate(store.read_json(path))
        choices.setdefault(choice.study, []).append(choice)
    return choices
