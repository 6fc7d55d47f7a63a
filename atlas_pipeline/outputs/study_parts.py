"""Each study's part of the analysis files — its rows of the studies export, its entries (the values every analysis
file is made of) and the values left out, and what the files say of the study (its values, its reports' status,
authors, years and quotes) — made from its reports' states and kept between refreshes beside a stamp of its reports'
own stamps, the team's choices between them and the settings: a refresh makes again only the studies one of whose
reports changed, and the files are written from the parts (``Analysis``).

The parts live in 256 shards of the artifact store (``aggregates/studies/<ab>.json``, a study's shard by its id's
hash), rewritten whole when one of their studies changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.core.redaction import redact
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import Template
from atlas_pipeline.outputs.agreement_report import AgreementInputs, agreement_inputs
from atlas_pipeline.outputs.analysis_files import Entry, Excluded, study_entries
from atlas_pipeline.outputs.rob2_results import ResultAssessment, assess_study
from atlas_pipeline.outputs.study_report import Study, studies, studies_frame
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.study_values import StudyChoice, StudyValue
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import AGGREGATES

LOG = logging.getLogger("atlas.aggregates")
PARTS_FOLDER = f"{AGGREGATES}/studies"


class ReportParse(BaseModel):
    title: str = ""
    authors: list[str] = []
    year: int | None = None


class ReportQuote(BaseModel):
    quote: str | None = None
    corrected_quote: str | None = None


class ReportReview(BaseModel):
    fields: dict[str, ReportQuote] = {}  # its single fields' quotes (the support RevMan's risk of bias cites)


class Report(BaseModel):
    """A study's report as the analysis files read it once the study is made (``Study.reports``)."""

    key: str
    status: DocumentStatus
    parse: ReportParse | None = None
    current_review: ReportReview | None = None


def report_of(state: DocumentState) -> Report:
    parse, review = state.parse, state.current_review
    return Report(
        key=state.key,
        status=state.status,
        parse=ReportParse(title=parse.title or "", authors=list(parse.authors), year=parse.year) if parse else None,
        current_review=ReportReview(
            fields={
                name: ReportQuote(quote=final.quote, corrected_quote=final.corrected_quote)
                for name, final in review.fields.items()
                if "[" not in name
            }
        )
        if review is not None
        else None,
    )


class StudyPart(BaseModel):
    id: str
    stamp: str
    values: dict[str, StudyValue]
    reports: list[Report]
    rows: list[dict[str, Any]]  # its rows of the studies export
    entries: list[Entry]
    excluded: list[Excluded]
    rob2: list[ResultAssessment] = []  # its results' RoB 2 assessments (a template with RoB 2)
    rob2_error: str = ""  # why they could not be made: the RoB 2 files are then not written

    def study(self) -> Study:
        """The study as the analysis files read it (its reports as ``Report``)."""
        return Study(self.id, reports=list(self.reports), values=dict(self.values))  # type: ignore[arg-type]


_SHARD = TypeAdapter(dict[str, StudyPart])


class EntriesError(AtlasError, ValueError):
    """A study's entries could not be made (a value no reader foresaw): the analysis files are not written, the
    studies export is."""


def make_part(study: Study, template: Template, stamp: str, entries: bool = True) -> StudyPart:
    """The study's part (``entries``: False leaves its entries out — when they cannot be made)."""
    rows = studies_frame([study]).rows(named=True)
    try:
        entries, excluded = study_entries([study], template) if entries else ([], [])
    except Exception as error:
        raise EntriesError(redact(f"{type(error).__name__}: {error}")) from error
    try:
        rob2, rob2_error = assess_study(study, template), ""
    except Exception as error:  # a value no reader foresaw: the RoB 2 files are not written, the others are
        rob2, rob2_error = [], redact(f"{study.id}: {type(error).__name__}: {error}")
        LOG.error("RoB 2 of study %s not assessed: %s", study.id, rob2_error)
    return StudyPart(
        id=study.id,
        stamp=stamp,
        values=study.values,
        reports=[report_of(report) for report in study.reports],
        rows=rows,
        entries=entries,
        excluded=excluded,
        rob2=rob2,
        rob2_error=rob2_error,
    )


def study_stamp(
    study_id: str, members: Sequence[tuple[str, str, str]], choices: list[StudyChoice], settings: str
) -> str:
    """``members``: (key, its part's stamp, the work it is a copy of) of every report the study groups."""
    material = [study_id, sorted(members), [choice.model_dump(mode="json") for choice in choices], settings]
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:24]


def read_study_shard(store: Store, shard: str) -> dict[str, StudyPart]:
    """A shard's study parts ({} when there is none or it cannot be read: its studies are made again)."""
    try:
        return _SHARD.validate_json(store.read_bytes(f"{PARTS_FOLDER}/{shard}.json"))
    except FileNotFoundError:
        return {}
    except Exception as error:
        LOG.warning("aggregates: study shard %s unreadable (%s): its studies are made again", shard, error)
        return {}


def write_study_shard(store: Store, shard: str, parts: Mapping[str, StudyPart]) -> None:
    store.write_bytes(f"{PARTS_FOLDER}/{shard}.json", _SHARD.dump_json(dict(parts)))


@dataclass
class Analysis:
    """What the studies export, the analysis files and the agreement report are written from."""

    studies: list[Study] = field(default_factory=list)  # in the studies export's order (reports with several first)
    entries: list[Entry] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)
    study_rows: list[dict[str, Any]] = field(default_factory=list)
    agreement: list[AgreementInputs] = field(default_factory=list)  # each extracted document's part of the report
    error: str = ""  # why the studies could not be made: the studies and analysis files are then not written
    entries_error: str = ""  # why their entries could not be: the analysis files are then not written
    rob2: list[ResultAssessment] = field(default_factory=list)  # every study's results' RoB 2, in the studies' order
    rob2_error: str = ""  # why a study's RoB 2 could not be assessed: the RoB 2 files are then not written


def analysis_of(
    parts: Sequence[StudyPart], agreement: list[AgreementInputs], error: str = "", entries_error: str = ""
) -> Analysis:
    """The analysis from every study's part, in the order ``studies`` gives them."""
    ordered = sorted(parts, key=lambda part: (-len(part.reports), part.id))
    entries = [entry for part in ordered for entry in part.entries]
    entries.sort(key=lambda entry: (entry.study_id, entry.document_key, entry.entry))
    return Analysis(
        studies=[part.study() for part in ordered],
        entries=entries,
        excluded=[excluded for part in ordered for excluded in part.excluded],
        study_rows=[row for part in ordered for row in part.rows],
        agreement=agreement,
        error=error,
        entries_error=entries_error,
        rob2=[assessment for part in ordered for assessment in part.rob2],
        rob2_error=next((part.rob2_error for part in ordered if part.rob2_error), ""),
    )


def analysis_from_states(
    states: list[DocumentState], template: Template | None, choices: Mapping[str, list[StudyChoice]]
) -> Analysis:
    """The analysis made from the states at once (what a refresh assembles from the parts)."""
    if template is None:
        return Analysis()
    agreement = [found for state in states if (found := agreement_inputs(state, template)) is not None]
    try:
        found = studies(states, template, choices)
    except Exception as error:
        return Analysis(agreement=agreement, error=redact(f"{type(error).__name__}: {error}"))
    try:
        parts = [make_part(study, template, "") for study in found]
    except EntriesError as error:
        parts = [make_part(study, template, "", entries=False) for study in found]
        return analysis_of(parts, agreement, entries_error=str(error))
    return analysis_of(parts, agreement)
