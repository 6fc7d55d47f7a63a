"""Every file the exports hold, named once: its stem, its formats and what a row of it is.

The writers take their names from here, ``atlas run``'s summary lists the files from here, ``export_files`` (what
must be there for the exports to be whole) is made from here, and a test holds the documentation to it
(``docs/how-it-works.md`` names every file).
"""

from __future__ import annotations

from dataclasses import dataclass

from atlas_pipeline.store.layout import export_path

ROWS = ("csv", "parquet", "jsonl")  # the formats of a table read by tools
FORMATS = ("xlsx", *ROWS)  # and the workbook, for the documents


@dataclass(frozen=True)
class ExportFile:
    """One export: ``stem`` in each of ``formats``; ``holds``: what it holds, as ``atlas run`` and the docs say it;
    ``always``: written by every refresh (the exports are not whole without it)."""

    stem: str
    formats: tuple[str, ...]
    holds: str
    always: bool = True

    def path(self, fmt: str | None = None) -> str:
        return export_path(self.stem, fmt or self.formats[0])

    def paths(self) -> list[str]:
        return [export_path(self.stem, fmt) for fmt in self.formats]


DOCUMENTS = ExportFile("atlas_documents", FORMATS, "one row per document (the xlsx is the workbook)")
FIELDS = ExportFile("atlas_fields", ROWS, "one row per field: final value and provenance beside the model's")
APPROVED = ExportFile("atlas_approved", ROWS, "approved values: one typed row per approved document")
OUTCOMES = ExportFile("atlas_outcomes", ROWS, "one row per document × outcome entry")
STUDIES = ExportFile("atlas_studies", ROWS, "studies: each trial's values reconciled across its reports")
ARMS = ExportFile("atlas_arms", ROWS, "meta-analysis: one row per study × outcome × time point × arm")
ESCALC = {
    kind: ExportFile(f"atlas_escalc_{kind}", ("csv",), f"metafor's escalc input, {kind} outcomes (each study once)")
    for kind in ("dichotomous", "continuous", "generic")
}
REVMAN = {
    part: ExportFile(f"atlas_revman_{part}", ("csv",), f"RevMan Web's import: {part.replace('_', ' ')}")
    for part in ("study_information", "study_arms", "study_results", "risk_of_bias")
}
EXCLUDED = ExportFile("atlas_analysis_excluded", ("csv",), "values left out of the analysis files, with the reason")
QUALITY = ExportFile("atlas_review_quality", ("csv",), "how often reviewers kept the model's value, per field and tier")
AGREEMENT = ExportFile("atlas_agreement", ("csv",), "agreement per field (model A vs B, model vs person, reviewers)")
ROB2 = {
    part: ExportFile(stem, (fmt,), holds, always=False)  # written when the rule assesses RoB 2
    for part, stem, fmt, holds in (
        ("table", "atlas_rob2_results", "csv", "RoB 2 per study × result: answers, judgements, overrides with reasons"),
        ("revman", "atlas_revman_rob2", "csv", "RevMan: RoB 2 judgement and support per domain, a row per result"),
        ("robvis", "atlas_robvis_rob2", "csv", "robvis's RoB 2 input: Study, D1–D5, Overall, Weight"),
        ("traffic_light", "atlas_rob2_traffic_light", "svg", "RoB 2 traffic-light plot: a row per result"),
        ("summary", "atlas_rob2_summary", "svg", "RoB 2 summary plot: each domain's judgements in shares"),
    )
}
EVALUATION = ExportFile("atlas_evaluation", ("md",), "accuracy against the gold file (ATLAS_GOLD)", always=False)
FOREST_FOLDER = "forest_plots"  # beside the exports: one <outcome>_<measure>.svg per plot

EXPORTS = (
    DOCUMENTS,
    FIELDS,
    APPROVED,
    OUTCOMES,
    STUDIES,
    ARMS,
    *ESCALC.values(),
    *REVMAN.values(),
    EXCLUDED,
    QUALITY,
    AGREEMENT,
    *ROB2.values(),
    EVALUATION,
)

# the stems by their old names, for the writers
EXPORT_STEM, FIELDS_STEM, APPROVED_STEM, OUTCOMES_STEM = DOCUMENTS.stem, FIELDS.stem, APPROVED.stem, OUTCOMES.stem
STUDIES_STEM, ARMS_STEM, EXCLUDED_STEM = STUDIES.stem, ARMS.stem, EXCLUDED.stem
QUALITY_STEM, AGREEMENT_STEM, EVALUATION_STEM = QUALITY.stem, AGREEMENT.stem, EVALUATION.stem
ESCALC_STEMS = {kind: file.stem for kind, file in ESCALC.items()}
REVMAN_STEMS = {part: file.stem for part, file in REVMAN.items()}


def export_files() -> list[str]:
    """Every file a refresh of the exports writes, relative to the exports store (the forest plots aside: as many
    as there are outcomes)."""
    return [path for file in EXPORTS if file.always for path in file.paths()]
