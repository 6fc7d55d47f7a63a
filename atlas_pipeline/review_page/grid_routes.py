"""The review page's entries of a repeating group (an outcome's rows): an entry the model missed added, a group
edited as a grid (each changed cell a decision, its quote taken by selection), an entry that is not one rejected
whole — every value checked before any is recorded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote as url_quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from atlas_pipeline.core.templates import ADDED_FROM, entry_field_name, entry_field_parts, entry_in_range
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.review.decisions import DecisionRefused, DecisionRequest, coerce_value, decide, load_decisions
from atlas_pipeline.review.entry_grid import NEW_ROW, CellQuote, cell_quotes, entry_refusal, grid_edits
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.review_page.common import (
    BLINDNESS,
    MAX_FORM_FIELDS,
    NotFound,
    Standing,
    document_key,
    document_key_or_404,
    document_refused,
    quote_evidence,
    standing_for,
)
from atlas_pipeline.review_page.page_state import ReviewPage
from atlas_pipeline.store.records import ExtractionRecord


def _group(page: ReviewPage, name: str):
    return next((group for group in page.template().groups if group.name == name), None)


def _back(key: str, message: str, form) -> RedirectResponse:
    blind = f"&blind={form.get('blind')}" if form.get("blind") in BLINDNESS else ""
    return RedirectResponse(f"/documents/{url_quote(key)}?message={url_quote(message)}{blind}", status_code=303)


def _check_entry(group, given: dict[str, str]) -> list:
    """The (field, value) pairs of a new entry, every value checked (refused: no identity, a value of the wrong
    type) before anything is recorded."""
    values = [(field, given[field.name]) for field in group.fields if given.get(field.name)]
    if not any(field.name == group.identity[0] for field, _ in values):
        raise DecisionRefused(f"a new {group.name} entry needs at least its {group.identity[0]}")
    typed = {f"{group.name}[0].{field.name}": coerce_value(value, field) for field, value in values}
    refusal = entry_refusal({}, typed)
    if refusal:
        raise DecisionRefused(refusal.replace(f"{group.name}[0]", f"the new {group.name} entry"))
    return values


def _cell_evidence(page: ReviewPage, key: str, given: CellQuote | None) -> dict[str, Any]:
    return quote_evidence(page, key, given.quote, given.page, given.words) if given is not None else {}


def _next_entry(page: ReviewPage, key: str, record, reviewer: str, standing: Standing) -> int:
    """The number a person's new entry takes. A person's entries are numbered from ADDED_FROM (a model's entry never
    takes their number later). An extractor working blind takes every n-th number of their own (the n extractors
    interleaved, in the team's order): the number says nothing of how many entries the others added."""
    taken = {entry_field_parts(name)[1] for name in (record.fields if record else {})}
    taken |= {entry_field_parts(d.field)[1] for d in load_decisions(page.store, key)}
    team = page.team(key)
    if "reviewers" not in standing.blind_to:  # nothing to keep from them: the next number after everyone's
        return max((n for n in taken if n is not None and n >= ADDED_FROM), default=ADDED_FROM - 1) + 1
    stride = max(len(team.assigned), team.size, 1)  # fixed for the document: the series never shift
    # an extractor's slot in the team's order; one about to become one of the first to start: the slot they take
    slot = team.extractors.index(reviewer) if reviewer in team.extractors else min(len(team.started), stride - 1)
    number = ADDED_FROM + slot
    while number in taken:  # (a number someone else took in this series: skipped, never shared)
        number += stride
    return number


def _add_entry(
    page: ReviewPage,
    key: str,
    record,
    group,
    given: dict[str, str],
    reviewer: str,
    form,
    standing: Standing,
    quotes: dict[str, CellQuote] | None = None,
) -> int:
    """Record a person's new entry of ``group`` (``given``: field → value) on the next free entry number; every
    value is checked before any is recorded. Returns the entry's number."""
    values = _check_entry(group, given)
    number = _next_entry(page, key, record, reviewer, standing)
    if not entry_in_range(number, group.max_entries):
        raise DecisionRefused(f"{group.name} holds at most {group.max_entries} entries added by people")
    for field, value in values:
        decide(
            page.store,
            record,
            DecisionRequest(
                entry_field_name(group.name, number, field.name),
                "correct",
                reviewer=reviewer,
                shown=(str(form.get("sha256") or ""), str(form.get("extraction_version") or "")),
                template_field=field,
                value=value,
                note=str(form.get("note") or ""),
                role=standing.role,
                blind_to=standing.blind_to,
                **_cell_evidence(page, key, (quotes or {}).get(field.name)),
            ),
        )
    return number


@dataclass(frozen=True)
class _GroupPost:
    """A POST about one repeating group of one document, from the page itself."""

    page: ReviewPage
    key: str
    group: Any  # a TemplateModule
    form: Any
    record: ExtractionRecord | None
    reviewer: str


async def _group_post(request: Request) -> _GroupPost | Response:
    """The post, or the refusal: about an unknown document or group (404)."""
    page: ReviewPage = request.app.state.page
    key = document_key_or_404(request)
    if isinstance(key, Response):
        return key
    group = _group(page, request.path_params["group"])
    if group is None:
        return PlainTextResponse(f"no repeating group {request.path_params['group']!r}", status_code=404)
    form = await request.form(max_fields=MAX_FORM_FIELDS)
    record = reviewed_extraction(page.store, key)
    return _GroupPost(page, key, group, form, record, page.reviewer(request, form))


async def add_entry(request: Request) -> Response:
    """A person adds an entry the model missed (an outcome of the report): one ``correct`` decision per value
    given, on the next free entry number of the group; all values are checked before any is recorded."""
    post = await _group_post(request)
    if isinstance(post, Response):
        return post
    page, key, group, form, record, reviewer = post.page, post.key, post.group, post.form, post.record, post.reviewer
    fields = [field for field in group.fields if not group.rob2 or field.name in group.identity]  # RoB 2: the result
    given = {field.name: str(form.get(field.name) or "").strip() for field in fields}
    try:
        standing = standing_for(page, request, key, "reviewer", form)
        number = _add_entry(page, key, record, group, given, reviewer, form, standing)
    except DecisionRefused as refused:
        return document_refused(request, key, str(refused), form=post.form)
    return _back(key, f"entry {number} of {group.name} added by {reviewer}", form)


async def save_grid(request: Request) -> Response:
    """A repeating group edited as a grid: each changed cell a decision (a new value corrects it, an emptied cell is
    rejected as not reported), the filled new row an added entry; every value checked before any is recorded."""
    post = await _group_post(request)
    if isinstance(post, Response):
        return post
    page, key, group, form, record, reviewer = post.page, post.key, post.group, post.form, post.record, post.reviewer
    if group.rob2:  # its answers go with their notes and its overrides with their reasons: on the panel only
        return document_refused(request, key, "RoB 2 is answered on its panel, a domain at a time", form=form)
    edits, new_row = grid_edits(group.name, form)
    definitions = {field.name: field for field in group.fields}
    shown = (str(form.get("sha256") or ""), str(form.get("extraction_version") or ""))
    try:
        standing = standing_for(page, request, key, "reviewer", form)
        review = review_document(  # the grid the person saw: their own decisions while they extract blind
            record, standing.visible, page.deployment.accepted_tiers(), page.deployment.derivations()
        )
        fields = review.fields if review else {}
        entries = {entry_field_parts(name)[1] for name in fields if entry_field_parts(name)[0] == group.name}
        changes = {}
        for edit in edits:
            if edit.bare not in definitions:
                raise DecisionRefused(f"{group.name} has no field {edit.bare!r}")
            if entry_field_parts(edit.field)[1] not in entries:
                raise DecisionRefused(f"{key} has no entry {entry_field_parts(edit.field)[1]} of {group.name}")
            changes[edit.field] = coerce_value(edit.value, definitions[edit.bare]) if edit.value else None
        refusal = entry_refusal(fields, changes)
        if refusal:
            raise DecisionRefused(refusal)
        if new_row:
            _check_entry(group, new_row)  # the new row too, before any cell is recorded
        for edit in edits:
            decide(
                page.store,
                record,
                DecisionRequest(
                    edit.field,
                    "correct" if edit.value else "reject",
                    reviewer=reviewer,
                    shown=shown,
                    template_field=definitions[edit.bare],
                    identity=group.identity,
                    value=edit.value or None,
                    reason="" if edit.value else "not_reported",
                    note=("edited in the grid" if edit.value != edit.was else "quoted in the grid")
                    if edit.value
                    else "emptied in the grid",
                    role=standing.role,
                    blind_to=standing.blind_to,
                    **_cell_evidence(page, key, edit.quote),
                ),
            )
        quotes = {bare: quote for (entry, bare), quote in cell_quotes(form).items() if entry == NEW_ROW}
        number = _add_entry(page, key, record, group, new_row, reviewer, form, standing, quotes) if new_row else None
    except DecisionRefused as refused:
        return document_refused(request, key, str(refused), form=post.form)
    said = [f"{len(edits)} cell(s) changed"] + ([f"entry {number} added"] if number else [])
    return _back(key, f"{group.name} grid: {', '.join(said)} by {reviewer}", form)


async def reject_entry(request: Request) -> Response:
    """A person deletes an entry (not an outcome of this report, a duplicate): every value of it rejected."""
    page: ReviewPage = request.app.state.page
    try:
        key = document_key(request)
    except NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    group, number = request.path_params["group"], int(request.path_params["entry"])
    form = await request.form()
    record = reviewed_extraction(page.store, key)
    reviewer = page.reviewer(request, form)
    template = page.template()
    try:
        standing = standing_for(page, request, key, "reviewer", form)
        tiers, derivations = page.deployment.accepted_tiers(), page.deployment.derivations()
        review = review_document(record, standing.visible, tiers, derivations)  # the entry as the person saw it
        names = [n for n in (review.fields if review else {}) if entry_field_parts(n)[:2] == (group, number)]
        if not names:
            raise DecisionRefused(f"{key} has no entry {number} of {group}")
        for name in names:
            if review and review.fields[name].provenance == "rejected":
                continue
            decide(
                page.store,
                record,
                DecisionRequest(
                    name,
                    "reject",
                    reviewer=reviewer,
                    shown=(str(form.get("sha256") or ""), str(form.get("extraction_version") or "")),
                    template_field=template.field_definition(name),
                    identity=template.identity_for(name),
                    note=str(form.get("note") or "") or "the whole entry rejected",
                    role=standing.role,
                    blind_to=standing.blind_to,
                ),
            )
    except DecisionRefused as refused:
        return document_refused(request, key, str(refused), form=form)
    return _back(key, f"entry {number} of {group} rejected by {reviewer}", form)
