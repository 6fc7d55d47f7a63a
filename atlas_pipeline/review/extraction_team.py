"""Who extracts a document, and whether their independent extractions are complete: the team behind dual extraction.

Systematic reviewers extract every study twice, independently, and a third person settles where the two differ
(the Cochrane Handbook; Covidence's flow). A document's *extractors* are the people assigned to it (``assign``:
``atlas users assign`` or the Team page, two per study by default), or else the first who start on it (up to
``ATLAS_REVIEW_EXTRACTORS`` of them). Each marks their own extraction complete (``complete``: an entry of the
decision log on the whole document, naming the extractors at that moment, so a review merged from the log alone knows
when to compare). Until every extractor of the document has completed, an extractor sees no other person's values
(and, when the team chooses so, no model's): the review page enforces it (``Team.blind_to``) and records it with
each decision. Once all have completed, the comparison is open: every difference — fields and repeating-group
entries — waits for an adjudicator (``review.final_values``).

Assignments are append-only files too (``reviews/assignments/<stamp>-<id>.json``, the latest per document counts).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from atlas_pipeline.core.clock import now_stamp
from atlas_pipeline.review.decisions import (
    WHOLE_DOCUMENT,
    Decision,
    DecisionRefused,
    MadeOn,
    decision_file,
    decision_marks,
    file_stamp,
    load_decisions,
    reviewer_name,
    withdraw,
)
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import ASSIGNMENTS, decisions_dir
from atlas_pipeline.store.records import ExtractionRecord

MODELS, REVIEWERS = "models", "reviewers"


@dataclass
class Team:
    """A document's extractors and where their independent extractions stand."""

    key: str
    size: int  # how many extractors a document takes (assigned, or the first to start)
    assigned: list[str] = field(default_factory=list)
    assigned_by: str = ""
    started: list[str] = field(default_factory=list)  # who decided on it as a reviewer, first to start first
    completed: dict[str, list[str]] = field(default_factory=dict)  # extractor → what they did not see (``blind_to``)

    @property
    def extractors(self) -> list[str]:
        return list(self.assigned) if self.assigned else self.started[: self.size]

    @property
    def full(self) -> bool:
        return bool(self.assigned) or len(self.started) >= self.size

    @property
    def open(self) -> bool:
        """The comparison is open: every extractor of a full team has completed."""
        return self.full and bool(self.extractors) and all(name in self.completed for name in self.extractors)

    def state_of(self, name: str) -> str:
        """``completed``, ``started``, ``assigned`` or "" (not an extractor of this document)."""
        if name in self.completed:
            return "completed"
        if name in self.started and name in self.extractors:
            return "started"
        return "assigned" if name in self.assigned else ""

    def refusal(self, name: str) -> str | None:
        """Why ``name`` may not record an extractor's decision on this document now, or None."""
        if self.open:  # each extraction is what it was at completion: the differences are the adjudicator's
            return (
                f"{self.key} is compared: {' and '.join(self.extractors)} have completed their extractions, and what "
                "they differ on is settled by an adjudicator (the Disagreements page)"
            )
        if name in self.completed:
            return (
                f"you marked your extraction of {self.key} complete: reopen it (before the comparison opens) to change "
                "a value"
            )
        if name in self.extractors or not self.full:
            return None
        how = f"assigned by {self.assigned_by}" if self.assigned else "the first to start"
        return (
            f"{self.key} has its extractors already: {' and '.join(self.extractors)} ({how}). An adjudicator can "
            "assign you on the Team page."
        )

    def blind_to(self, name: str, role: str, hide_models: bool) -> tuple[str, ...]:
        """What ``name`` (with ``role``) may not see of this document now: other people's values (and the models',
        when the team hides them) for an extractor — of this document, or anyone of the extractor role — until the
        comparison opens; nothing for an adjudicator who does not extract it, nor once the comparison is open."""
        if self.open or (role != "extractor" and name not in self.extractors):
            return ()
        return (MODELS, REVIEWERS) if hide_models else (REVIEWERS,)


def team_of(key: str, decisions: Sequence[Decision], assignment: Assignment | None, size: int) -> Team:
    """The team of one document from its decision log (the decisions that count, oldest first) and its assignment."""
    team = Team(key=key, size=size)
    if assignment is not None:
        team.assigned, team.assigned_by = list(assignment.extractors), assignment.by
    for decision in decisions:
        if decision.role == "adjudicator":
            continue
        if decision.reviewer not in team.started:
            team.started.append(decision.reviewer)
        if decision.action == "complete":
            team.completed[decision.reviewer] = list(decision.blind_to)
    return team


def comparison(decisions: Iterable[Decision]) -> dict[str, list[str]] | None:
    """The extractors to compare (extractor → what they did not see) once every extractor named by the latest
    completion has completed, else None — read from the log alone, so every merge of it agrees."""
    completions = [d for d in decisions if d.action == "complete"]
    if not completions:
        return None
    completed = {d.reviewer: list(d.blind_to) for d in completions}
    extractors = completions[-1].extractors or sorted(completed)
    if len(extractors) < 2 or any(name not in completed for name in extractors):
        return None
    return {name: completed[name] for name in extractors}


def complete(store: Store, record: ExtractionRecord, team: Team, reviewer: str, blind_to: Sequence[str]) -> Decision:
    """Mark ``reviewer``'s extraction of the document complete (``blind_to``: what they did not see)."""
    reviewer = reviewer_name(reviewer)
    refusal = team.refusal(reviewer)
    if refusal:
        raise DecisionRefused(refusal)
    extractors = team.extractors if reviewer in team.extractors else [*team.extractors, reviewer]
    decision = Decision(
        id=uuid.uuid4().hex[:12],
        document=record.key,
        field=WHOLE_DOCUMENT,
        action="complete",
        reviewer=reviewer,
        decided_at=now_stamp(),
        made_on=MadeOn(sha256=record.sha256, extraction_version=record.extraction_version),
        blind_to=sorted(set(blind_to)),
        extractors=extractors,
        note="extraction complete",
    )
    store.write_json(f"{decisions_dir(record.key)}/{decision_file(decision)}", decision.model_dump(mode="json"))
    return decision


def reopen(store: Store, record: ExtractionRecord, team: Team, reviewer: str) -> Decision:
    """Take back ``reviewer``'s completion while the comparison is not open (they have seen no one's values)."""
    if reviewer not in team.completed:
        raise DecisionRefused(f"{reviewer} has not marked {record.key} complete")
    if team.open:
        raise DecisionRefused(
            f"the comparison of {record.key} is open: you have seen the other extraction, so yours can no longer be "
            "reopened — the adjudicator settles the differences"
        )
    return withdraw(store, record, WHOLE_DOCUMENT, reviewer=reviewer)


@dataclass(frozen=True)
class Assignment:
    extractors: tuple[str, ...]
    by: str
    at: str


def load_assignments(store: Store) -> dict[str, Assignment]:
    """Per document, its latest assignment (an empty one: back to whoever starts first)."""
    latest: dict[str, Assignment] = {}
    for path in store.files(ASSIGNMENTS):
        data = store.read_json_or(path, None)
        if not isinstance(data, dict):
            continue
        for key, names in (data.get("documents") or {}).items():
            latest[key] = Assignment(tuple(names), str(data.get("by") or ""), str(data.get("at") or ""))
    return {key: assignment for key, assignment in latest.items() if assignment.extractors}


def assign(store: Store, documents: Mapping[str, Sequence[str]], by: str) -> int:
    """Record who extracts which document (document → names; no names: whoever starts first); one file per call."""
    clean = {}
    for key, names in documents.items():
        people = list(dict.fromkeys(reviewer_name(name) for name in names))
        clean[key] = people
    if clean:
        at = now_stamp()
        store.write_json(
            f"{ASSIGNMENTS}/{file_stamp(at)}-{uuid.uuid4().hex[:8]}.json", {"documents": clean, "by": by, "at": at}
        )
    return len(clean)


def extractors_refusal(names: Sequence[str], roles: Mapping[str, str], per_document: int) -> str | None:
    """Why ``names`` cannot be a document's extractors (``roles``: every account's role), or None: each an extractor's
    account, no one twice, and as many as a document takes (none at all: whoever starts first)."""
    if not names:
        return None
    unknown = [name for name in names if name not in roles]
    if unknown:
        return f"no account {', '.join(map(repr, unknown))}: add it with `atlas users add` first"
    others = [f"{name} is an {roles[name]}" for name in names if roles[name] != "extractor"]
    if others:
        return "; ".join(others) + ": extractors extract (an adjudicator settles what they differ on)"
    if len(set(names)) != len(names):
        return "one person named twice: a document takes different extractors"
    if len(names) != per_document:
        return f"a document takes {per_document} extractors (ATLAS_REVIEW_EXTRACTORS); {len(names)} named"
    return None


def round_robin(studies: Sequence[Sequence[str]], extractors: Sequence[str], per_study: int = 2) -> dict[str, list]:
    """Extractors shared out over studies in turn, ``per_study`` each (every report of a study to the same people):
    study 1 to A and B, study 2 to C and A, …"""
    if len(extractors) < per_study:
        raise ValueError(f"{per_study} extractors a study need {per_study} people; there are {len(extractors)}")
    out: dict[str, list] = {}
    turn = 0
    for reports in studies:
        chosen = [extractors[(turn + i) % len(extractors)] for i in range(per_study)]
        turn += per_study
        for key in reports:
            out[key] = chosen
    return out


def teams(store: Store, keys: Iterable[str], size: int) -> dict[str, Team]:
    """The team of each document among ``keys`` (a decision log read only where there is one)."""
    assignments, logged = load_assignments(store), decision_marks(store)
    return {
        key: team_of(key, load_decisions(store, key) if key in logged else [], assignments.get(key), size)
        for key in keys
    }
