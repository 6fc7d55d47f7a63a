"""The review page's paper: a document's page (each field beside its evidence) and what its viewer fetches from the
PDF snapshot — a page's image, its words (the selectable text layer), the pages where searched words are. Reads
only; the snapshot never changes, so neither do its pages."""

from __future__ import annotations

import math

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from atlas_pipeline.review.evidence import find_in_document, page_words, render_page
from atlas_pipeline.review_page.common import TEMPLATES, NotFound, document_key
from atlas_pipeline.review_page.document_view import document_context
from atlas_pipeline.review_page.page_state import ReviewPage
from atlas_pipeline.search.entries import MAX_QUERY_CHARS
from atlas_pipeline.store.layout import record_path
from atlas_pipeline.store.records import SnapshotRecord, read_record

CACHED = {"Cache-Control": "private, max-age=3600"}  # a snapshot never changes: its pages neither


def document(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    try:
        key = document_key(request)
    except NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    if not page.store.exists(record_path(key, "snapshot")):
        return PlainTextResponse(f"no document {key!r}", status_code=404)
    return TEMPLATES.TemplateResponse(request, "document.html", document_context(page, request, key))


def _pdf(request: Request) -> bytes | Response:
    """The document's PDF snapshot (immutable), or the 404 that says why there is none."""
    page: ReviewPage = request.app.state.page
    try:
        key = document_key(request)
    except NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    snapshot = read_record(page.store, key, "snapshot", SnapshotRecord)
    if snapshot is None or not snapshot.snapshot_path or not (snapshot.media_type or "").endswith("pdf"):
        return PlainTextResponse("no PDF snapshot for this document", status_code=404)
    return page.store.read_bytes(snapshot.snapshot_path)


async def page_image(request: Request) -> Response:
    pdf = _pdf(request)
    if isinstance(pdf, Response):
        return pdf
    try:
        scale = float(request.query_params.get("scale", "1"))
        scale = min(max(scale, 0.5), 3.0) if math.isfinite(scale) else 1.0
    except ValueError:
        scale = 1.0
    rotate = request.query_params.get("rotate", "0")
    rotate = int(rotate) if rotate.isascii() and rotate.isdecimal() and len(rotate) <= 3 else -1
    try:
        image = await run_in_threadpool(render_page, pdf, int(request.path_params["number"]), scale, rotate)
    except ValueError as error:
        return PlainTextResponse(str(error), status_code=404)
    return Response(image, media_type="image/png", headers=CACHED)


async def page_words_api(request: Request) -> Response:
    """One page's words and their boxes: the viewer's selectable text layer."""
    pdf = _pdf(request)
    if isinstance(pdf, Response):
        return pdf
    try:
        words = await run_in_threadpool(page_words, pdf, int(request.path_params["number"]))
    except ValueError as error:
        return PlainTextResponse(str(error), status_code=404)
    return JSONResponse(words, headers=CACHED)


async def find_api(request: Request) -> Response:
    """Find in the whole document: the pages where the words are, with their boxes."""
    pdf = _pdf(request)
    if isinstance(pdf, Response):
        return pdf
    query = request.query_params.get("q", "")[:MAX_QUERY_CHARS]
    return JSONResponse(await run_in_threadpool(find_in_document, pdf, query))
