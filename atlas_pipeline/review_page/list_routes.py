"""The review page's lists: the documents with their statuses (and the live refresh's API), the search box's results
and the disagreements waiting for an adjudicator — plus what is posted from the list itself, a document uploaded to
the knowledge base and the reviewer's name without logins."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote as url_quote
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response

from atlas_pipeline.core.templates import entry_field_parts
from atlas_pipeline.outputs.agreement_report import agreement_rows
from atlas_pipeline.parsing.citation import short_authors
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import counting, load_decisions, value_text
from atlas_pipeline.review.extraction_team import comparison
from atlas_pipeline.review.final_values import decisions_by_field
from atlas_pipeline.review_page.common import TEMPLATES, refused_page
from atlas_pipeline.review_page.document_view import consensus_candidates
from atlas_pipeline.review_page.page_state import REVIEWER_COOKIE, ReviewPage
from atlas_pipeline.search.entries import MAX_QUERY_CHARS, QueryTooLongError

LOG = logging.getLogger("atlas.review")
MAX_UPLOAD_FILES = 20


def _state_row(state: DocumentState) -> dict[str, Any]:
    review = state.current_review
    parse = state.parse
    return {
        "key": state.key,
        "title": parse.title if parse else "",
        "authors": short_authors(parse.authors) if parse else "",
        "year": parse.year if parse else None,
        "status": state.status.value,
        "reason": state.reason,
        "to_review": review.to_review if review else None,
        "recheck": review.counts.get("recheck", 0) if review else 0,
        "decisions": review.decisions if review else 0,
        "reviewers": ", ".join(review.reviewers) if review else "",
        "disagreements": review.disagreements if review else 0,
        "review_state": review.state if review else "",
    }


def _priority(row: dict[str, Any]) -> tuple:
    """What needs a person first: re-checks, then most fields to review, then the rest by name."""
    waiting = row["to_review"] or 0
    return (-(row["recheck"] or 0), -waiting, row["status"] == "approved", row["key"])


def documents(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    rows = sorted(_state_rows(page, request), key=_priority)
    status, needs = request.query_params.get("status", ""), request.query_params.get("needs") == "review"
    statuses = sorted({row["status"] for row in rows})
    shown = [r for r in rows if (not status or r["status"] == status) and (not needs or (r["to_review"] or 0) > 0)]
    return TEMPLATES.TemplateResponse(
        request,
        "documents.html",
        {
            "rows": shown,
            "total": len(rows),
            "statuses": statuses,
            "status": status,
            "needs": needs,
            "reviewer": page.reviewer(request),
            "message": request.query_params.get("message", ""),
        },
    )


def documents_api(request: Request) -> Response:
    """Statuses for the list's live refresh (pending → extracting → done / failed with the reason)."""
    page: ReviewPage = request.app.state.page
    return JSONResponse(_state_rows(page, request))


def _state_rows(page: ReviewPage, request: Request) -> list[dict[str, Any]]:
    """The list's rows; where the person is extracting blind, nothing that tells how others' values compare."""
    states = page.states()
    hidden = page.hidden_documents(request, [state.key for state in states])
    rows = [_state_row(state) for state in states]
    user = page.user(request)
    for row in rows:
        if row["key"] in hidden:  # no trace of the others' work: their counts, their names, what is left after them
            mine = [d for d in counting(load_decisions(page.store, row["key"])) if user and d.reviewer == user.name]
            row |= {
                "to_review": None,
                "recheck": 0,
                "decisions": sum(1 for decision in mine if decision.on_a_field),
                "reviewers": user.name if user and mine else "",
                "disagreements": 0,
                "review_state": "extracting independently",
            }
    return rows


async def set_reviewer(request: Request) -> Response:
    if request.app.state.page.user(request) is not None:
        return PlainTextResponse("refused: decisions are recorded under your login", status_code=403)
    form = await request.form()
    name = str(form.get("reviewer") or "").strip()
    back = str(form.get("back") or "/")
    response = RedirectResponse(back if back.startswith("/") and not back.startswith("//") else "/", status_code=303)
    if name:
        secure = request.app.state.page.sessions.cookies_secure(request)
        response.set_cookie(REVIEWER_COOKIE, url_quote(name), httponly=True, samesite="strict", secure=secure)
    else:
        response.delete_cookie(REVIEWER_COOKIE)
    return response


async def upload(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    user = page.user(request)
    if user is not None and user.role != "admin":
        return refused_page(
            request,
            f"{user.name} is an {user.role}: adding documents to the knowledge base takes an admin",
            "Ask an admin of your team to upload it, or to drop it into the knowledge base folder.",
        )
    knowledge_base = page.deployment.open_knowledge_base()
    limit = knowledge_base.max_bytes
    declared = request.headers.get("content-length", "")
    if limit is not None and declared.isdigit() and int(declared) > MAX_UPLOAD_FILES * limit + 1_000_000:
        message = f"refused: at most {MAX_UPLOAD_FILES} files of {limit / 1e6:g} MB an upload (ATLAS_MAX_DOCUMENT_MB)"
        return RedirectResponse("/?" + urlencode({"message": message}), status_code=303)
    form = await request.form(max_files=MAX_UPLOAD_FILES)  # files spooled to disk as they arrive, not to memory
    added, problems = [], []
    for item in form.getlist("documents"):
        if not hasattr(item, "read"):
            continue
        try:  # read in chunks, the limit counted as they come
            added.append(await run_in_threadpool(knowledge_base.add, item.filename or "", item.file))
        except (ValueError, OSError) as error:
            problems.append(str(error))
        finally:
            await item.close()
    message = (f"added {', '.join(added)}: the sensor picks them up on its next scan. " if added else "") + " ".join(
        problems
    )
    return RedirectResponse("/?" + urlencode({"message": message.strip() or "no file chosen"}), status_code=303)


def disagreements(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    rows, differences = [], []
    states = page.states()
    user, template = page.user(request), page.template()
    teams = page.teams([state.key for state in states]) if user is not None else {}
    hidden = {key for key, team in teams.items() if page.blind_to(request, team)}  # an extractor's own in progress
    states = [state for state in states if state.key not in hidden]
    for state in states:
        team = teams.get(state.key)
        if team is not None and team.started and not team.open:
            continue  # extractions in progress: compared once every extractor has completed
        review = state.current_review  # merged with every decision made so far (``document_states``)
        disputed = [(name, final) for name, final in (review.fields.items() if review else []) if final.disagreement]
        log = load_decisions(page.store, state.key) if disputed and state.extraction is not None else []
        by_field = decisions_by_field(state.extraction, log, page.deployment.derivations()) if log else {}
        extractors = comparison(log) or {}
        for name, final in disputed:
            extracted = state.extraction.fields.get(name) if state.extraction is not None else None
            candidates = consensus_candidates(extracted or {}, by_field.get(name, []), extractors)
            rows.append(
                {
                    "key": state.key,
                    "field": name,
                    "final": final,
                    "candidates": candidates,
                    "entry": _entry_label(review, name, template.identity_for(name)),
                }
            )
        extracted = state.extraction.fields if state.extraction is not None and not state.stale else {}
        for name, field in extracted.items():
            final = review.fields.get(name) if review else None
            differs = isinstance(field, dict) and field.get("agreement") in ("disagreed", "only_one")
            if differs and (final is None or not final.decided):
                differences.append({"key": state.key, "field": name, "extracted": field})
    context = {
        "rows": rows,
        "hidden": len(hidden),
        "may_settle": user is None or user.may_settle(),
        "records": {state.key: state.extraction for state in states if state.extraction is not None},
        "differences": differences,
        "agreement": agreement_rows(states, template),
        "reviewer": page.reviewer(request),
    }
    return TEMPLATES.TemplateResponse(request, "disagreements.html", context)


def _entry_label(review, name: str, identity: list[str]) -> str:
    """A group entry's identity as the adjudicator reads it ("Duration of diarrhea · after randomization"), else ""."""
    group, number, _ = entry_field_parts(name)
    if group is None or review is None:
        return ""
    prefix = f"{group}[{number}]."
    values = [
        value_text(final.final_value if final.decided else final.model_value)
        for part in identity
        if (final := review.fields.get(prefix + part)) is not None
    ]
    return " · ".join(value for value in values if value != "—")


def search(request: Request) -> Response:
    """Search box results: every document's text, tables and values, ranked, each a link to its review."""
    page: ReviewPage = request.app.state.page
    query = request.query_params.get("q", "").strip()
    filters = {name: request.query_params.get(name, "").strip() for name in ("status", "field", "source")}
    hits, error, total = [], "", 0
    if query:
        try:
            with page.deployment.search_index(page.instance()) as index:
                hits = index.search(query, limit=50, **filters)
                total = index.count()
        except QueryTooLongError as problem:
            error = str(problem)
        except Exception as problem:  # said on the page in a few words (never SQL, never a stack trace), logged whole
            LOG.exception("search failed")
            error = f"search unavailable ({type(problem).__name__}); the review page's log has the details"
    hidden = page.hidden_documents(request, sorted({hit.key for hit in hits if hit.part == "field"}))
    hits = [hit for hit in hits if not (hit.part == "field" and hit.key in hidden)]  # values of a blind extraction
    user = page.user(request)
    return TEMPLATES.TemplateResponse(
        request,
        "search.html",
        {
            "search_query": query[:MAX_QUERY_CHARS],  # a query past the limit is not echoed whole
            "filters": filters,
            "hits": hits,
            "blind_note": user is not None and page.logins() and user.role == "extractor",  # said always, never counted
            "total": total,
            "error": error,
            "reviewer": page.reviewer(request),
        },
    )
