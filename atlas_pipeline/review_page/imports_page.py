"""The review page's workbook imports: the reports, newest first, and a reviewed workbook uploaded by the person
logged in — whose decisions it records, whatever its ``reviewer`` column says (``review.workbook_import``)."""

from __future__ import annotations

import functools
import threading
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from atlas_pipeline.core.hashing import sha256_of
from atlas_pipeline.review.workbook_import import (
    MAX_WORKBOOK_BYTES,
    WORKBOOK_SUFFIXES,
    import_reports,
    import_workbook,
    imported_already,
)
from atlas_pipeline.review_page.page_state import WRITING, ReviewPage

IMPORTS_PER_PAGE = 10
IMPORTING = threading.Lock()
_CHUNK = 1 << 20


def imports(request: Request) -> Response:
    """The workbook imports, newest first, ten a page (each report lists its first rows and counts the rest)."""
    page: ReviewPage = request.app.state.page
    templates: Jinja2Templates = request.app.state.templates
    raw = request.query_params.get("page", "1")
    number = max(1, int(raw)) if raw.isascii() and raw.isdecimal() and 0 < len(raw) < 7 else 1
    user = page.user(request)
    start = (number - 1) * IMPORTS_PER_PAGE
    if user is not None and page.logins() and not user.may_settle():  # an extractor's own: others' rows may be blind
        mine = [report for report in import_reports(page.store)[0] if report.author == user.name]
        reports, total = mine[start : start + IMPORTS_PER_PAGE], len(mine)
    else:
        reports, total = import_reports(page.store, start, IMPORTS_PER_PAGE)
    return templates.TemplateResponse(
        request,
        "imports.html",
        {
            "reports": reports,
            "page_number": number,
            "pages": max(1, -(-total // IMPORTS_PER_PAGE)),
            "total": total,
            "inbox": bool(page.policy.inbox),  # whether there is one; no location shown
            "logins": page.logins(),
            "only_mine": user is not None and page.logins() and not user.may_settle(),
            "reviewer": page.reviewer(request),
            "message": request.query_params.get("message", ""),
        },
    )


async def upload_workbook(request: Request, refused) -> Response:
    """A reviewed workbook uploaded on the page, imported at once as the person logged in (on a page without
    logins, under the name set on the page where a row names no one)."""
    page: ReviewPage = request.app.state.page
    user = page.user(request)
    if user is None and page.logins():
        return refused(request, "a workbook needs an author who logged in", "Log in, then upload it again.")
    form = await request.form(max_files=1)
    item = form.get("workbook")
    if item is None or not hasattr(item, "read"):
        return _back("choose a workbook to upload")
    try:
        name = (item.filename or "workbook.xlsx").rsplit("/", 1)[-1]
        if not name.lower().endswith(WORKBOOK_SUFFIXES):
            return _back(f"{name}: not imported — only the exported workbook (.xlsx) is")
        data = bytearray()
        while chunk := await item.read(_CHUNK):
            data += chunk
            if len(data) > MAX_WORKBOOK_BYTES:
                return _back(f"{name}: not imported — larger than a workbook ({MAX_WORKBOOK_BYTES / 1e6:.0f} MB)")
    finally:
        await item.close()
    author = user.name if user is not None else ""

    @functools.cache  # per document, read again at each slice of rows (``fresh``): the team may move on between
    def may_decide(key: str) -> str | None:
        """A workbook carries an extractor's decisions, within the team's rules; an adjudicator settles on the page."""
        team = page.team(key)
        if user is not None and user.may_settle() and author not in team.extractors:
            return f"{author} is an {user.role}: settle {key} on the Disagreements page (a workbook is an extractor's)"
        return team.refusal(author)

    def run() -> str:
        with IMPORTING:  # one workbook at a time; each of its rows takes the page's write lock on its own
            return imported()

    def imported() -> str:
        if sha256_of(bytes(data))[:16] in imported_already(page.store):
            return f"{name}: imported before (a workbook is applied once)"
        deployment = page.deployment
        report = import_workbook(
            page.store,
            bytes(data),
            name,
            page.template(),
            page.reviewer(request) if user is None else "",
            deployment.derivations(),
            deployment.accepted_tiers(),
            page.policy.workbook_max_rows,
            author=author,
            may_decide=may_decide if user is not None and page.logins() else None,
            writing=WRITING,  # held a slice of rows at a time: another person's decision never waits for a workbook
            fresh=may_decide.cache_clear,
        )
        return report.summary()

    return _back(await run_in_threadpool(run))


def _back(message: str) -> RedirectResponse:
    return RedirectResponse("/imports?" + urlencode({"message": message}), status_code=303)
