"""What every route module of the review page shares: its templates, the document a path names, the refusal a person
reads, and who decides as what (a reviewer extracting, blind or not, or an adjudicator settling) — one place, so a
rule about standing or refusal reads the same on every route."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.templating import Jinja2Templates

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.knowledge.partition_keys import is_safe_key
from atlas_pipeline.review.decisions import DecisionRefused, load_decisions, value_text
from atlas_pipeline.review.person_quotes import Selection, document_scope, selected_words
from atlas_pipeline.review_page.document_view import document_context
from atlas_pipeline.review_page.page_state import ReviewPage

BLINDNESS = {"1": ("reviewers",), "models": ("reviewers", "models")}  # the page's independent passes → ``blind_to``
MAX_FORM_FIELDS = 100_000

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
TEMPLATES.env.filters["value"] = value_text


def document_key(request: Request) -> str:
    key = request.path_params["key"]
    if not is_safe_key(key):
        raise NotFound(f"no document {key!r}")
    return key


class NotFound(AtlasError):
    pass


def document_key_or_404(request: Request) -> str | Response:
    """The document key of the path, or the 404 that says it names no document."""
    try:
        return document_key(request)
    except NotFound as error:
        return PlainTextResponse(str(error), status_code=404)


def quote_evidence(page: ReviewPage, key: str, quote: Any, on_page: Any, words: Any) -> dict[str, Any]:
    """A person's quote as a ``DecisionRequest`` takes it (a field's or a grid cell's): words selected on a page
    graded on themselves and recorded with their places, a typed (or edited) quote found in the document's text
    (``review.person_quotes``); nothing when no quote was given."""
    quote = str(quote or "").strip()
    if not quote:
        return {}
    number = page_number_of(on_page)
    selection = Selection.parse(number, str(words or ""))
    chosen = selected_words(page.store, key, selection, quote) if selection else None
    return {
        "quote": quote,
        "scope": chosen or document_scope(page.store, key),
        "selected_on": number,
        "selection": selection if chosen is not None else None,
    }


@dataclass(frozen=True)
class Standing:
    """How a person's decision on a document is recorded: as a reviewer (extractor) or an adjudicator, what they did
    not see, and the decisions they may see (their own only, while they extract blind)."""

    role: str
    blind_to: tuple[str, ...]
    visible: list


def standing_for(page: ReviewPage, request: Request, key: str, role: str, form: Any) -> Standing:
    """With logins, the server's say (``DecisionRefused`` when the person may not decide on ``key`` now): an
    adjudicator or admin who is not one of its extractors settles — never before every extraction is complete (an
    assigned document not started, an unassigned one: nothing compared yet); an extractor extracts, within the team's
    rules (``Team.refusal``). Without logins, what the reviewer chose (``role``, the independent pass in ``form``)."""
    decisions = load_decisions(page.store, key)
    user = page.user(request)
    if user is None or not page.logins():
        blind = BLINDNESS.get(str(form.get("blind") or ""), ())
        return Standing(
            role, blind, [d for d in decisions if d.reviewer == page.reviewer(request, form)] if blind else decisions
        )
    team = page.team(key)
    if role == "adjudicator" or (user.may_settle() and user.name not in team.extractors):
        if user.name in team.extractors and not team.open:
            raise DecisionRefused(
                f"you extract {key} yourself: its differences are settled once every extraction is complete"
            )
        if not team.open:  # an adjudicator settles what was compared: before that there is nothing to settle
            waiting = [name for name in team.extractors if name not in team.completed]
            if not team.extractors:
                raise DecisionRefused(
                    f"no extraction of {key} is complete yet: an adjudicator settles its values once its extractors "
                    "have extracted and compared them (assign two on the Team page)"
                )
            raise DecisionRefused(
                f"{key} is being extracted by {' and '.join(team.extractors)}: an adjudicator settles it once every "
                f"extraction is complete (waiting for {' and '.join(waiting) or 'a second extractor'})"
            )
        return Standing("adjudicator", (), decisions)
    refusal = team.refusal(user.name)
    if refusal:
        raise DecisionRefused(refusal)
    blind_to = page.blind_to(request, team)
    return Standing("reviewer", blind_to, [d for d in decisions if d.reviewer == user.name] if blind_to else decisions)


def refused_page(request: Request, why: str, what: str, status: int = 403) -> Response:
    """A refusal a person reads: what was refused, why, and what to do instead."""
    page: ReviewPage = request.app.state.page
    context = {"why": why, "what": what, "reviewer": page.reviewer(request)}
    return TEMPLATES.TemplateResponse(request, "refused.html", context, status_code=status)


def document_refused(request: Request, key: str, error: str, field: str = "", form: Any = None) -> Response:
    """The document's page again, with why the change to it was refused (409): on the field and in the pass the
    post was made from (the post's address names neither), so the next decision is made where this one was."""
    page: ReviewPage = request.app.state.page
    blind = str(form.get("blind") or "") if form is not None else ""
    context = document_context(page, request, key, error=error, field=field, blind=blind if blind in BLINDNESS else "")
    return TEMPLATES.TemplateResponse(request, "document.html", context, status_code=409)


def not_adjudicator(request: Request, what: str) -> Response | None:
    """With logins, a study's choices and links are an adjudicator's: the refusal page for anyone else."""
    page: ReviewPage = request.app.state.page
    user = page.user(request)
    if user is None or user.may_settle():
        return None
    return refused_page(
        request,
        f"{user.name} is an {user.role}: {what} takes an adjudicator",
        "Note what you found on the document's page (a decision's note) and ask an adjudicator to settle the study.",
    )


def page_number_of(raw: Any) -> int | None:
    """A page number a form gave (1 to 99,999), else None."""
    text = str(raw or "").strip()
    return int(text) if text.isascii() and text.isdecimal() and 0 < int(text) < 100_000 else None
