"""The model's answer and the people's decisions merged into final values, each with where it came from.

Provenance of a final value:

- ``model_verified``: no one decided, and the team's policy accepts the field's tier as it is (``verified`` by
  default; never a flagged field);
- ``reviewer_approved`` / ``reviewer_corrected`` / ``rejected``: the latest decision on the field;
- ``reviewer_added``: a value a person entered where the model gave none (a field extracted by hand, a cell the
  model left empty, a repeating group's row a person added);
- ``awaiting_review``: a person has to look;
- ``recheck``: a person decided, but the model's value has changed since (new model, template or bytes): the old
  decision is shown with the old and the new value and a person decides again. A decision whose value did not
  change keeps applying, whatever else changed.

Every decision stays in the audit log; the latest one wins. When reviewers' latest decisions on a field differ (a
team that double-extracts), the field lists the disagreement, and the document is not approved until an adjudicator
settles it. Once a document's extractors have all marked their extraction complete (``review.extraction_team``),
every field and group entry is compared between them — a value one of them entered and the other did not is a
difference too — and the same outcome added by both is one entry (``review.entry_alignment``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, Field

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.templates import entry_field_parts
from atlas_pipeline.review.decisions import (
    Decision,
    counting,
    decision_file,
    entry_identity,
    load_decisions,
    log_mark,
    same_value,
)
from atlas_pipeline.review.derivations import DERIVED_TIER, Derivations
from atlas_pipeline.review.entry_alignment import align_entries
from atlas_pipeline.review.extraction_team import comparison
from atlas_pipeline.review.finality import FinalState, Process, process_of, settle
from atlas_pipeline.review.person_quotes import QuoteCheck
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record

Provenance = Literal[
    "model_verified",
    "reviewer_approved",
    "reviewer_corrected",
    "reviewer_added",
    "rejected",
    "awaiting_review",
    "recheck",
]
PROVENANCES: tuple[str, ...] = (
    "model_verified",
    "reviewer_approved",
    "reviewer_corrected",
    "reviewer_added",
    "rejected",
    "awaiting_review",
    "recheck",
)
FINAL: frozenset[str] = frozenset(
    {"model_verified", "reviewer_approved", "reviewer_corrected", "reviewer_added", "rejected"}
)
_BY_ACTION = {"approve": "reviewer_approved", "correct": "reviewer_corrected", "reject": "rejected"}


class FinalField(BaseModel):
    field: str
    module: str = ""
    provenance: Provenance
    final_value: Any = None
    model_value: Any = None
    tier: str = ""
    quote: str | None = None
    flags: list[str] = Field(default_factory=list)
    reviewer: str = ""
    decided_at: str = ""
    decision: str = ""  # approve | correct | reject (the one that counts)
    decision_id: str = ""
    note: str = ""
    corrected_quote: str | None = None
    quote_check: QuoteCheck | None = None  # the corrected quote graded, and where it is (``review.person_quotes``)
    previous_model_value: Any = None  # recheck: the value the decision was made on
    decisions: int = 0  # how many decisions the audit log holds on this field
    disagreement: dict[str, str] = Field(default_factory=dict)  # reviewer → latest outcome, when they differ
    reviewer_outcomes: dict[str, str] = Field(default_factory=dict)  # reviewer → latest outcome, two or more of them
    reviewer_values: dict[str, Any] = Field(default_factory=dict)  # reviewer → the value their decision results in
    adjudicated_by: str = ""  # the adjudicator whose decision settled the reviewers' disagreement
    reject_reason: str = ""  # why the value counting now was rejected (``decisions.REJECT_REASONS``)
    # a value the paper does not write, derived from accepted ones (``review.derived_values``): formula, inputs with
    # their quotes, arithmetic — or why it could not be (refused: an input not accepted; flagged: a cautioned method)
    derivation: dict[str, Any] | None = None
    # the team's process (``review.finality``): ``final`` only when it made the value final; else what it waits for
    final_state: FinalState = "awaiting_review"
    waiting: str = ""  # not final: what it waits for and who can settle it
    set_aside: list[str] = Field(default_factory=list)  # adjudicators whose decision came before the comparison

    @property
    def decided(self) -> bool:
        """Someone decided (or the policy accepted) it — final or not: what the page shows as decided."""
        return self.provenance in FINAL

    @property
    def is_final(self) -> bool:
        """The one test every reader of final values applies (``review.finality``)."""
        return self.final_state == "final"

    @property
    def final_or_none(self) -> Any:
        """The final value when the process made it final, else None (a reader of final values sees no other)."""
        return self.final_value if self.is_final else None

    @property
    def waits_for_person(self) -> bool:
        """Awaiting a first look, a re-check, or an adjudicator between two reviewers' values."""
        return self.provenance in ("awaiting_review", "recheck") or bool(self.disagreement)


class DocumentReview(BaseModel):
    """A document's review: what ``document_review`` materialises and the exports read."""

    key: str
    sha256: str
    extraction_version: str
    extracted_at: str = ""  # the extraction merged (a later one, even of the same bytes and version, is merged anew)
    approved: bool
    reviewable: bool  # False: no values to review (skip mode, failed or skipped document)
    fields: dict[str, FinalField] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict)  # provenance → fields
    decisions: int = 0
    reviewers: list[str] = Field(default_factory=list)
    disagreements: int = 0
    decision_mark: str = ""  # the decision log merged (``decisions.decision_marks``)
    accepted_tiers: list[str] = Field(default_factory=list)  # the team's policy it was made with
    derivation_rules: str = ""  # the derivation rules it was made with (``Derivations.fingerprint``)
    team: bool | None = None  # whether it was merged as a team's review (``review.finality``); None: before the rule
    # derivations refused or flagged in a field the document does not have (an entry a person added without it):
    # field → the derivation and why it was not made — named in the exports, never a value
    unmade_derivations: dict[str, dict[str, Any]] = Field(default_factory=dict)
    reviewed_at: str = ""

    @property
    def to_review(self) -> int:
        """Fields that wait for a person: one count everywhere (summary, pages, ``needs_review`` in the exports)."""
        return sum(1 for field in self.fields.values() if field.waits_for_person)

    @property
    def state(self) -> str:
        if not self.reviewable:
            return "nothing to review"
        return "approved" if self.approved else "awaiting review"

    def summary(self) -> str:
        if not self.reviewable:
            return "nothing to review"
        parts = [f"{count} {name.replace('_', ' ')}" for name, count in self.counts.items() if count]
        head = "approved" if self.approved else f"{self.to_review} field(s) to review"
        return f"{head}: " + ", ".join(parts)


def _needs_person(extracted: dict[str, Any], accepted_tiers: frozenset[str]) -> bool:
    return bool(extracted.get("flags")) or str(extracted.get("tier")) not in accepted_tiers


def review_field(
    name: str,
    extracted: dict[str, Any],
    decisions: list[Decision],
    accepted_tiers: frozenset[str],
    fields: dict[str, Any] | None = None,
    compared: dict[str, list[str]] | None = None,
    process: Process | None = None,
) -> FinalField:
    """One field's final value from the model's answer and the decisions on it (oldest first). ``fields``: all the
    extracted fields, to tell whether an entry of a group is still the one a decision was made on. ``compared``: the
    document's extractors once every one has completed (``extraction_team.comparison``; extractor → what they did
    not see): an extractor who left the field undecided counts with what they left — the model's value, or no value
    when they did not see the models — so a value only one of them entered is a difference too. ``process``: the
    team's process on the document: an adjudicator's decision made before its comparison opened is set aside."""
    model_value = extracted.get("value")
    base = FinalField(
        field=name,
        module=str(extracted.get("module") or ""),
        provenance="awaiting_review",
        model_value=model_value,
        tier=str(extracted.get("tier") or ""),
        quote=extracted.get("quote"),
        flags=list(extracted.get("flags") or []),
        decisions=len(decisions),
    )
    # the newest decision counts only if it was made on the value the model gives now; a later decision on another
    # value (the model changed in between) means a person must look again
    current = [d for d in decisions if same_value(d.made_on.model_value, model_value) and _same_entry(d, fields or {})]
    if current and decisions[-1] is not current[-1]:
        current = []
    early = [d for d in current if d.role == "adjudicator" and process is not None and not process.counts(d)]
    if early:  # settled nothing: there was nothing compared to settle
        base.set_aside = sorted({decision.reviewer for decision in early})
        current = [decision for decision in current if all(decision is not other for other in early)]
        decisions = [decision for decision in decisions if all(decision is not other for other in early)]
    latest_by_reviewer: dict[str, Decision] = {}
    for decision in current:
        if decision.role != "adjudicator" and (compared is None or decision.reviewer in compared):
            latest_by_reviewer[decision.reviewer] = decision  # once compared, the extractors' values only
    outcomes = {reviewer: decision.outcome() for reviewer, decision in latest_by_reviewer.items()}
    results = {reviewer: _result(decision, model_value) for reviewer, decision in latest_by_reviewer.items()}
    for extractor, unseen in (compared or {}).items():
        if extractor not in latest_by_reviewer:
            left = None if "models" in unseen else model_value
            outcomes[extractor] = "no value" if left is None else "left the model's value"
            results[extractor] = left
    if len(outcomes) > 1:
        base.reviewer_outcomes, base.reviewer_values = outcomes, results
    adjudications = [decision for decision in current if decision.role == "adjudicator"]
    values = list(results.values())
    differ = any(not _agree(values[0], value) for value in values[1:])  # approve 42 and correct → 42 agree
    if differ and not adjudications:
        base.disagreement = outcomes  # open until an adjudicator settles it (the consensus step)
    if current:
        latest = adjudications[-1] if adjudications else current[-1]
        base.adjudicated_by = latest.reviewer if adjudications else ""
        base.provenance = _BY_ACTION[latest.action]  # type: ignore[assignment]
        if latest.action == "correct" and model_value is None:  # nothing to correct: the person's own value
            base.provenance = "reviewer_added"
        base.final_value = (
            latest.value if latest.action == "correct" else (None if latest.action == "reject" else model_value)
        )
        base.reviewer, base.decided_at, base.decision = latest.reviewer, latest.decided_at, latest.action
        base.decision_id, base.note, base.corrected_quote = latest.id, latest.note, latest.quote
        base.quote_check = latest.quote_check if latest.action == "correct" else None
        base.reject_reason = latest.reason if latest.action == "reject" else ""
        return base
    if decisions:  # decided on a value the model no longer gives
        stale = decisions[-1]
        base.provenance = "recheck"
        base.previous_model_value = stale.made_on.model_value
        base.reviewer, base.decided_at, base.decision = stale.reviewer, stale.decided_at, stale.action
        base.decision_id, base.note = stale.id, stale.note
        return base
    if compared and model_value is not None and all(value is None for value in results.values()):
        # every extractor left it empty without seeing the models: not found by any of them — never the model's value
        base.provenance, base.reject_reason = "rejected", "not_reported"
        base.note = "left empty by every extractor, none of whom saw the model's value (not found)"
        return base
    if not _needs_person(extracted, accepted_tiers):
        base.provenance, base.final_value = "model_verified", model_value
    return base


def _agree(first: Any, second: Any) -> bool:
    """Two reviewers' values agree: the same value, or the same words but for case and spacing ("Water", "water")."""
    if isinstance(first, str) and isinstance(second, str):
        return " ".join(first.split()).casefold() == " ".join(second.split()).casefold()
    return same_value(first, second)


def _result(decision: Decision, model_value: Any) -> Any:
    """The value a decision leaves: the model's (approve), none (reject), the reviewer's (correct)."""
    return {"approve": model_value, "reject": None}.get(decision.action, decision.value)


def _same_entry(decision: Decision, fields: dict[str, Any]) -> bool:
    """Whether the entry a decision's field belongs to is still the one it was made on (a re-extraction may give the
    outcomes in another order: entry 2 is then another outcome, and a decision on its old occupant must not apply)."""
    if not decision.made_on.entry:
        return True
    now = entry_identity(fields, decision.field, list(decision.made_on.entry))
    return all(same_value(now.get(key), value) for key, value in decision.made_on.entry.items())


def review_document(
    record: ExtractionRecord | None,
    decisions: list[Decision],
    accepted_tiers: frozenset[str],
    derivations: Derivations | None = None,
    team: bool = False,
) -> DocumentReview | None:
    """The document's review, or None when it has no extraction yet. ``decisions``: its decision log (withdrawals
    included or not: they are applied here; the review's mark is the mark of the log given). ``derivations``: the
    template's rules for values the paper does not write — a value derived from accepted ones is then proposed in
    its empty field, with the tier ``derived``, and decided like any model value. ``team``: people log in, so the
    document's values are final only once its extractions are compared (``review.finality``)."""
    if record is None:
        return None
    log, decisions = decisions, counting(decisions)
    compared = comparison(decisions)  # both extractions complete: their differences wait for the adjudicator
    process = process_of(decisions, team)
    extracted = record.values()  # skip mode: every field empty, for a person to extract by hand
    reviewable = bool(extracted) and record.status.value not in ("failed", "skipped")
    by_field = decisions_by_field(record, decisions, derivations)
    decisions = [decision for field in by_field.values() for decision in field]
    fields = {
        name: review_field(name, field, by_field.get(name, []), accepted_tiers, extracted, compared, process)
        for name, field in extracted.items()
    }
    for name, added in by_field.items():  # entries of a group the model missed, added by a person
        if name in extracted:
            continue
        latest = added[-1]
        if latest.made_on.tier:  # decided on a value the model gave then and no longer gives at all
            fields[name] = FinalField(
                field=name,
                module=entry_field_parts(name)[0],
                provenance="recheck",
                previous_model_value=latest.made_on.model_value,
                reviewer=latest.reviewer,
                decided_at=latest.decided_at,
                decision=latest.action,
                decision_id=latest.id,
                note="the model no longer gives this entry: reject it, or add the value again",
                decisions=len(added),
            )
            continue
        module = {"module": entry_field_parts(name)[0]}
        final = review_field(name, module, added, accepted_tiers, extracted, compared, process)
        if final.provenance == "reviewer_corrected":
            final.provenance = "reviewer_added"
        fields[name] = final
    _settle(fields, process)
    unmade: dict[str, dict[str, Any]] = {}
    if derivations is not None:  # from settled inputs: a disputed one holds a derivation back
        unmade = _propose_derived(fields, extracted, by_field, accepted_tiers, derivations, process, compared)
        _settle(fields, process)
    counts = Counter(field.provenance for field in fields.values())
    return DocumentReview(
        key=record.key,
        sha256=record.sha256,
        extraction_version=record.extraction_version,
        extracted_at=record.extracted_at,
        approved=reviewable and all(field.is_final for field in fields.values()),  # the process made each final
        reviewable=reviewable,
        fields=fields,
        counts={name: counts.get(name, 0) for name in PROVENANCES},
        decisions=len(decisions),
        reviewers=sorted({decision.reviewer for decision in decisions}),
        disagreements=sum(1 for field in fields.values() if field.disagreement),
        decision_mark=log_mark([decision_file(decision) for decision in log]) if log else "",
        accepted_tiers=sorted(accepted_tiers),
        derivation_rules=derivations.fingerprint if derivations is not None else "",
        team=team,
        unmade_derivations=unmade,
        reviewed_at=now_iso(),
    )


def _settle(fields: dict[str, FinalField], process: Process) -> None:
    """Each field's final state under the team's process: the one rule (``review.finality.settle``)."""
    for field in fields.values():
        field.final_state, field.waiting = settle(field, process, field.set_aside)


def decisions_by_field(
    record: ExtractionRecord, decisions: list[Decision], derivations: Derivations | None = None
) -> dict[str, list[Decision]]:
    """The decisions on values that count (oldest first) by the field they decide — a person-added entry's on the
    entry it lines up with (``review.entry_alignment``, when ``derivations`` gives the template)."""
    decided = [decision for decision in counting(decisions) if decision.on_a_field]
    if derivations is not None:  # one outcome added by two people is one entry
        decided = align_entries(decided, record.values(), derivations.template.groups)
    by_field: dict[str, list[Decision]] = {}
    for decision in decided:
        by_field.setdefault(decision.field, []).append(decision)
    return by_field


def _propose_derived(
    fields: dict[str, FinalField],
    extracted: dict[str, Any],
    by_field: dict[str, list[Decision]],
    accepted_tiers: frozenset[str],
    derivations: Derivations,
    process: Process,
    compared: dict[str, list[str]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each value derivable from the accepted ones, in its empty field, decided like a model value of tier
    ``derived`` (a decision is made on the value shown: a derivation whose result changes asks for a recheck);
    a refused or flagged derivation is kept on the field, its value unchanged, saying why — or, where the document
    has no such field, returned (field → the derivation)."""
    unmade: dict[str, dict[str, Any]] = {}
    for derived in derivations.derive(fields):
        current = fields.get(derived.field)
        if derived.state != "derived":
            if current is not None:
                current.derivation = derived.model_dump()
            else:
                unmade[derived.field] = derived.model_dump()
            continue
        proposal = {
            "value": derived.value,
            "tier": DERIVED_TIER,
            "quote": derived.arithmetic,
            "module": derived.module,
        }
        decided = by_field.get(derived.field, [])  # compared like any value: one extractor's change is a difference
        final = review_field(derived.field, proposal, decided, accepted_tiers, extracted, compared, process)
        final.derivation = derived.model_dump()
        fields[derived.field] = final
    return unmade


def applies_to(
    review: DocumentReview | None,
    record: ExtractionRecord | None,
    accepted_tiers: frozenset[str] | None = None,
    derivations: Derivations | None = None,
    team: bool | None = None,
) -> bool:
    """Whether a stored review was made from this very extraction (and with this policy, these derivation rules and
    as a team's review or not, when given)."""
    return (
        review is not None
        and record is not None
        and (review.sha256, review.extraction_version) == (record.sha256, record.extraction_version)
        and review.extracted_at in ("", record.extracted_at)  # "": a review stored before it was recorded
        and (accepted_tiers is None or set(review.accepted_tiers) == set(accepted_tiers))
        and (derivations is None or review.derivation_rules == derivations.fingerprint)
        and (team is None or review.team is team)
    )


def current_review(
    store: Store,
    record: ExtractionRecord | None,
    stored: DocumentReview | None,
    accepted_tiers: frozenset[str],
    derivations: Derivations | None = None,
    decision_mark: str | None = None,
    team: bool = False,
) -> DocumentReview | None:
    """The stored review when it was made from this extraction with this policy and rules (and, given the decision
    log's ``decision_mark``, from these decisions), else one merged now (an extraction made before reviews existed, a
    policy changed since, a decision made since): the exports and the pages never wait for a run."""
    fresh = decision_mark is None or (stored is not None and stored.decision_mark == decision_mark)
    if fresh and applies_to(stored, record, accepted_tiers, derivations, team):
        return stored
    if record is None:
        return None
    decisions = load_decisions(store, record.key, withdrawn=True)
    return review_document(record, decisions, accepted_tiers, derivations, team)


def merged_marks(store: Store, keys: Iterable[str]) -> dict[str, str]:
    """Per document among ``keys`` with a stored review, the mark of the decision log that review merged (what the
    planner compares with ``decision_marks`` to find the reviews to merge)."""
    marks = {}
    for key in keys:
        review = read_record(store, key, "review", DocumentReview)
        if review is not None:  # one merged before the finality rule: merged again once (its mark matches nothing)
            marks[key] = review.decision_mark if review.team is not None else ""
    return marks
