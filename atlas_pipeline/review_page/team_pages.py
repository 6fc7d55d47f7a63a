"""The review page's team: who extracts what (assignments), each extractor's completion of a document, "my next
document", and progress per person — the dual-extraction flow of ``review.extraction_team`` on the page."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote as url_quote
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.knowledge.partition_keys import is_safe_key
from atlas_pipeline.outputs.study_report import studies
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import DecisionRefused, load_decisions
from atlas_pipeline.review.extraction_team import assign, complete, extractors_refusal, reopen, round_robin
from atlas_pipeline.review.final_values import DocumentReview, review_document
from atlas_pipeline.review.progress import ReviewerProgress, reviewer_progress
from atlas_pipeline.review.study_values import load_choices
from atlas_pipeline.review_page.page_state import ReviewPage


@dataclass
class Extractions:
    """One person's documents by where their extraction stands."""

    assigned: list[str] = field(default_factory=list)  # not started yet
    started: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)  # waiting for the other extractor(s)
    consensus: list[str] = field(default_factory=list)  # compared, with differences for the adjudicator
    done: list[str] = field(default_factory=list)  # compared and settled


def fresh_review(page: ReviewPage, state: DocumentState) -> DocumentReview | None:
    """The document's review as its decision log stands now (the stored one may wait for the review sensor)."""
    if state.extraction is None or state.stale:
        return state.current_review
    decisions = load_decisions(page.store, state.key, withdrawn=True)
    deployment = page.deployment
    return review_document(
        state.extraction, decisions, deployment.accepted_tiers(), deployment.derivations(), team=page.logins()
    )


def extractions(page: ReviewPage, states: list[DocumentState]) -> dict[str, Extractions]:
    """Per person, their documents: assigned, started, completed, waiting for consensus, settled."""
    by_key = {state.key: state for state in states}
    people: dict[str, Extractions] = {}
    for key, team in page.teams(list(by_key)).items():
        review = fresh_review(page, by_key[key]) if team.open else None
        for name in dict.fromkeys([*team.extractors, *team.completed]):
            mine = people.setdefault(name, Extractions())
            state = team.state_of(name)
            if state == "completed" and team.open:
                (mine.consensus if review is not None and review.disagreements else mine.done).append(key)
            elif state:
                getattr(mine, state).append(key)
    return people


def team(request: Request, templates: Jinja2Templates) -> Response:
    """Progress per person: decisions, and their extractions assigned, started, completed, waiting for consensus."""
    page: ReviewPage = request.app.state.page
    states = page.states()
    people = reviewer_progress(page.store, [state.key for state in states])
    accounts = page.sessions.accounts()
    for person in people:
        person.role = accounts[person.name].role if person.name in accounts else ""
    for name, account in accounts.items():
        if all(person.name != name for person in people):
            people.append(ReviewerProgress(name=name, role=account.role))
    left = sum(state.current_review.to_review for state in states if state.current_review)
    user = page.user(request)
    shared = extractions(page, states)
    if user is not None and not user.may_settle():  # an extractor sees no trace of the others' work: their own row
        people = [person for person in people if person.name == user.name]
        shared = {name: mine for name, mine in shared.items() if name == user.name}
        left = None
    context = {
        "people": people,
        "extractions": shared,
        "left": left,
        "reviewer": page.reviewer(request),
        "user": user,
        "may_assign": user is not None and user.may_settle(),
        "extractors": [name for name, account in accounts.items() if account.role == "extractor"],
        "documents": [state.key for state in states],
        "per_document": page.policy.extractors,
        "message": request.query_params.get("message", ""),
        "error": request.query_params.get("error", ""),
    }
    return templates.TemplateResponse(request, "team.html", context)


async def assignments(request: Request, refused) -> Response:
    """An adjudicator shares out the documents: by round robin (every study not yet assigned or started, to the
    chosen extractors in turn), or one document by hand (no names: back to whoever starts first)."""
    page: ReviewPage = request.app.state.page
    user = page.user(request)
    if user is None or not user.may_settle():
        who = f"{user.name} is an {user.role}" if user else "nobody is logged in"
        return refused(request, f"{who}: assigning extractors takes an adjudicator", "Ask an adjudicator of your team.")
    form = await request.form()
    names = [str(name) for name in form.getlist("extractor") if str(name).strip()]
    roles = {name: account.role for name, account in page.sessions.accounts().items()}
    if page.deployment.page_access().auth_header:  # a trusted proxy names people with no account: extractors
        roles = {name: "extractor" for name in names} | roles
    try:
        if form.get("action") == "round_robin":  # among the extractors chosen: each an extractor's account
            refusal = extractors_refusal(names, roles, len(names)) if names else "choose the extractors to share among"
        else:
            refusal = extractors_refusal(names, roles, page.policy.extractors)
        if refusal:
            raise ValueError(refusal)
        if form.get("action") == "round_robin":
            states = page.states()
            taken = {key for key, t in page.teams([s.key for s in states]).items() if t.assigned or t.started}
            groups = [
                [report.key for report in study.reports]
                for study in studies(states, page.template(), load_choices(page.store))
                if not any(report.key in taken for report in study.reports)
            ]
            shared = round_robin(groups, names, page.policy.extractors)
            count = assign(page.store, shared, by=user.name)
            message = f"{count} document(s) of {len(groups)} study(ies) shared out among {', '.join(names)}"
        else:
            key = str(form.get("key") or "")
            if not is_safe_key(key):
                raise ValueError(f"no document {key!r}")
            if page.team(key).open:
                raise ValueError(f"{key} is compared already: its extractors stay who they were")
            assign(page.store, {key: names}, by=user.name)
            message = f"{key}: " + (f"extracted by {' and '.join(names)}" if names else "whoever starts first")
    except ValueError as problem:
        return RedirectResponse("/team?" + urlencode({"error": str(problem)}), status_code=303)
    return RedirectResponse("/team?" + urlencode({"message": message}), status_code=303)


async def extraction_state(request: Request, refused, document_page) -> Response:
    """An extractor marks their extraction of a document complete, or reopens it while it is not compared yet."""
    page: ReviewPage = request.app.state.page
    key = request.path_params["key"]
    user = page.user(request)
    if user is None or not page.logins():
        return refused(
            request,
            "marking an extraction complete needs a login",
            "Completion belongs to a team whose reviewers log in: add accounts with `atlas users add`.",
        )
    form = await request.form()
    record = reviewed_extraction(page.store, key)
    try:
        if record is None:
            raise DecisionRefused("this document has no extraction yet")
        team = page.team(key)
        if form.get("action") == "reopen":
            reopen(page.store, record, team, user.name)
            message = f"your extraction of {key} is open again"
        else:
            if user.may_settle() and user.name not in team.extractors:
                raise DecisionRefused(
                    f"{user.name} is an {user.role} who does not extract {key}: completing an extraction is an "
                    "extractor's (an adjudicator settles the differences once both are complete)"
                )
            complete(page.store, record, team, user.name, page.blind_to(request, team))
            team = page.team(key)
            waiting = [name for name in team.extractors if name not in team.completed]
            if team.open:
                message = "your extraction is complete: the comparison is open, differences go to the adjudicator"
            else:
                message = "your extraction is complete" + (
                    f": waiting for {' and '.join(waiting)}" if waiting else ": waiting for a second extractor"
                )
    except DecisionRefused as problem:
        return document_page(request, key, str(problem))
    return RedirectResponse(f"/documents/{url_quote(key)}?" + urlencode({"message": message}), status_code=303)


def next_document(request: Request) -> Response:
    """The person's next document: one they started, else one assigned to them, else (an extractor) the first one
    that still takes an extractor."""
    page: ReviewPage = request.app.state.page
    user = page.user(request)
    name = user.name if user is not None else page.reviewer(request)
    states = [s for s in page.states() if s.current_review is not None and s.current_review.reviewable]
    teams = page.teams([state.key for state in states])
    order = {"started": 0, "assigned": 1}
    mine = sorted((order[teams[s.key].state_of(name)], s.key) for s in states if teams[s.key].state_of(name) in order)
    if not mine and (user is None or user.role == "extractor"):
        mine = [(2, s.key) for s in states if not teams[s.key].full and name not in teams[s.key].completed]
    if not mine:
        return RedirectResponse("/?" + urlencode({"message": f"nothing waits for {name} now"}), status_code=303)
    return RedirectResponse(f"/documents/{url_quote(mine[0][1])}", status_code=303)
