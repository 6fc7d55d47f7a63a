"""The one rule of what is final: a value (or a RoB 2 judgement) reaches an analysis, a plot, a table or an export of
final values only when the team's process made it so.

- **With a team** (people log in, or the document's log shows a dual extraction: an extractor marked theirs
  complete): only once every extractor of the document has completed, and then where their values agree, or where an
  adjudicator settled the difference *after* the comparison opened. Before that every value waits — for the
  extractions, not for a reviewer — whoever decided it, the model's policy included; an adjudicator's decision made
  before the comparison opened does not count (it is named, so that it is settled again on Disagreements).
- **Solo** (no logins, no completion): the person's decision, or the team's declared policy for a value nobody
  decided (``ATLAS_REVIEW_ACCEPT_TIERS``); two people whose latest decisions on one value differ are a dispute until
  one of them comes round to the other or an adjudicator settles it.

Everything else is *not final*: it is left out of every file and page that pools or reports values and named, with
what it waits for and who can settle it (``FinalField.final_state`` / ``waiting``). ``review.final_values`` applies the
rule while it merges a document's log, so that every reader — the studies, the analysis files, RevMan's files, the
forest plots, the RoB 2 files, the typed exports, the pages — reads the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from atlas_pipeline.review.decisions import Decision

FINALITY_RULE = "1"  # the rule's version: part of the final-values policy, so a change of it makes every export again
FinalState = Literal["final", "extracting", "disputed", "awaiting_review", "recheck"]
FINAL_STATES: tuple[str, ...] = ("final", "extracting", "disputed", "awaiting_review", "recheck")
# what each state means, in words a reviewer reads (the exports' ``final_state`` column, the pages)
STATE_WORDS = {
    "final": "final",
    "extracting": "waiting for the extractions",
    "disputed": "disputed",
    "awaiting_review": "awaiting review",
    "recheck": "to re-check",
}


class FinalField(Protocol):
    """What the rule reads of a merged field (``review.final_values.FinalField``)."""

    provenance: str
    reviewer: str

    @property
    def disagreement(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class Process:
    """Where the team's process stands on one document, read from its decision log alone (and whether the review
    is a team's): every merge of the same log agrees."""

    team: bool  # a team's review: extractions are compared before anything is final
    extractors: tuple[str, ...] = ()  # named by the latest completion
    completed: tuple[str, ...] = ()
    opened_at: str | None = None  # when the last extractor completed (the comparison opened); None: not open

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    def counts(self, adjudication: Decision) -> bool:
        """Whether an adjudicator's decision settles anything: with a team, only one made after the comparison
        opened (an early one was made on nothing to compare)."""
        if not self.team:
            return True
        return self.opened_at is not None and adjudication.decided_at >= self.opened_at

    def waiting_for_extractions(self) -> str:
        """Who the values wait for while the comparison is not open."""
        missing = [name for name in self.extractors if name not in self.completed]
        if self.completed and missing:
            return (
                f"waiting for {' and '.join(missing)} to complete their extraction "
                f"({', '.join(self.completed)} completed): the values are compared then"
            )
        if self.completed:
            return f"waiting for a second extractor ({', '.join(self.completed)} completed)"
        return "no extraction of this document is complete: its two extractors extract it, then the values are compared"


def process_of(decisions: Sequence[Decision], team: bool) -> Process:
    """The process of one document from its decisions that count (oldest first). ``team``: people log in — a
    document nobody has completed is then still being extracted. A completion in the log makes it a team's review
    whatever ``team`` says (a dual extraction was started on it). The comparison opens when every extractor the
    latest completion names — two at least, as ``extraction_team.comparison`` reads it — has completed."""
    completions = [decision for decision in decisions if decision.action == "complete"]
    if not completions:
        return Process(team=team)
    completed = {decision.reviewer: decision.decided_at for decision in completions}
    extractors = tuple(completions[-1].extractors or sorted(completed))
    done = len(extractors) >= 2 and all(name in completed for name in extractors)  # dual extraction: two at least
    opened = max(completed[name] for name in extractors) if done else None
    return Process(team=True, extractors=extractors, completed=tuple(completed), opened_at=opened)


def settle(field: FinalField, process: Process, early: Sequence[str] = ()) -> tuple[FinalState, str]:
    """A field's final state and, when it is not final, what it waits for and who can settle it. ``early``: the
    adjudicators whose decision on it does not count (made before the comparison opened)."""
    note = ""
    if early:
        note = f" ({', '.join(early)}'s adjudication before the comparison opened does not count)"
    if process.team and not process.open:
        return "extracting", process.waiting_for_extractions() + note
    if field.provenance == "recheck":
        return "recheck", f"the model's value changed since {field.reviewer} decided: a person decides again" + note
    if field.disagreement:
        said = "; ".join(f"{who}: {what}" for who, what in field.disagreement.items())
        who = "an adjudicator" if process.team else "either of them, or an adjudicator,"
        return "disputed", f"disputed ({said}): {who} settles it on the Disagreements page" + note
    if field.provenance == "awaiting_review":
        who = "an adjudicator" if process.team else "a reviewer"
        return "awaiting_review", f"nobody accepted it yet: {who} decides it on the document's page" + note
    return "final", ""
