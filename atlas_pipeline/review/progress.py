"""Progress per reviewer, read from the decision logs: how much each person has decided, on how many documents, and
when they last did — what a team lead looks at to share out the work."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline.store.files import Store


@dataclass
class ReviewerProgress:
    name: str
    role: str = ""
    decisions: int = 0  # that count now (undone ones left out)
    by_action: dict[str, int] = field(default_factory=dict)  # approve / correct / reject → count
    fields: int = 0  # distinct fields decided
    documents: int = 0
    undone: int = 0
    last_decision: str = ""


def reviewer_progress(store: Store, keys: Iterable[str]) -> list[ReviewerProgress]:
    """One row per person who decided anything on these documents, the most active first."""
    people: dict[str, ReviewerProgress] = {}
    seen: dict[str, tuple[set[str], set[tuple[str, str]]]] = {}
    for key in keys:
        log = load_decisions(store, key, withdrawn=True)
        counting = {d.id for d in load_decisions(store, key)}
        for decision in log:
            person = people.setdefault(decision.reviewer, ReviewerProgress(decision.reviewer))
            documents, fields = seen.setdefault(decision.reviewer, (set(), set()))
            person.last_decision = max(person.last_decision, decision.decided_at)
            if decision.action == "withdraw":
                person.undone += 1
                continue
            if decision.id not in counting or not decision.on_a_field:
                continue  # undone, or a document's completion (``review.extraction_team``)
            person.decisions += 1
            person.by_action[decision.action] = person.by_action.get(decision.action, 0) + 1
            documents.add(key)
            fields.add((key, decision.field))
    for name, person in people.items():
        person.documents, person.fields = len(seen[name][0]), len(seen[name][1])
    return sorted(people.values(), key=lambda p: (-p.decisions, p.name))
