"""The desk's RoB 2 answers saved (``review_page.rob2_panel`` shows them): one domain of one result at a time, a
decision per answer changed, as any value — the model's proposal kept as it is approved, another answer corrects it
(a quote and a note — for "No information", what was looked for — go with it), an emptied answer is rejected — and
the domain's override with its reason; every answer checked before any is recorded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import quote as url_quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from atlas_pipeline.core.rob2_module import (
    DOMAIN_CODES,
    GROUP,
    OVERALL,
    judgement_of,
    override_field,
    question_field,
    tool_of,
)
from atlas_pipeline.core.templates import entry_field_name, entry_in_range
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.review.decisions import DecisionRefused, DecisionRequest, coerce_value, decide, same_value
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.review_page.common import (
    BLINDNESS,
    MAX_FORM_FIELDS,
    document_key_or_404,
    document_refused,
    quote_evidence,
    standing_for,
)
from atlas_pipeline.review_page.page_state import ReviewPage
from atlas_pipeline.review_page.rob2_panel import decided


def _back(key: str, message: str, form: Any, entry: int) -> RedirectResponse:
    blind = f"&blind={form.get('blind')}" if form.get("blind") in BLINDNESS else ""
    anchor = f"#rob2-{entry}"
    return RedirectResponse(f"/documents/{url_quote(key)}?message={url_quote(message)}{blind}{anchor}", status_code=303)


async def save_rob2(request: Request) -> Response:
    """One domain of one result saved: each changed answer a decision (approve the model's proposal as it is,
    correct it, reject an emptied one), and the domain's override with its reason — all checked before any is
    recorded."""
    page: ReviewPage = request.app.state.page
    key = document_key_or_404(request)
    if isinstance(key, Response):
        return key
    template = page.template()
    module = template.rob2
    raw_entry = request.path_params["entry"]
    if module is None:
        return PlainTextResponse('this review does not assess RoB 2 (its rule sets no "rob2")', status_code=404)
    entry = int(raw_entry) if str(raw_entry).isdecimal() else 0
    if not entry_in_range(entry, module.max_entries):
        return PlainTextResponse(f"no RoB 2 entry {raw_entry}", status_code=404)
    form = await request.form(max_fields=MAX_FORM_FIELDS)
    code = str(form.get("domain") or "")
    tool = tool_of(module)
    if code not in DOMAIN_CODES and code != OVERALL:
        return PlainTextResponse(f"no RoB 2 domain {code!r}", status_code=404)
    record = reviewed_extraction(page.store, key)
    reviewer = page.reviewer(request, form)
    shown = (str(form.get("sha256") or ""), str(form.get("extraction_version") or ""))
    try:
        standing = standing_for(page, request, key, "reviewer", form)
        review = review_document(
            record, standing.visible, page.deployment.accepted_tiers(), page.deployment.derivations()
        )
        fields = review.fields if review else {}
        requests = []
        questions = tool.domain(code).questions if code != OVERALL else ()
        for question in questions:
            bare = question_field(question.id)
            name = entry_field_name(GROUP, entry, bare)
            if f"answer:{question.id}" not in form:
                continue  # not asked given the answers above (the page does not send it): left as it is
            value = str(form.get(f"answer:{question.id}") or "").strip().upper()
            was = str(form.get(f"was:{question.id}") or "").strip().upper()
            quote = str(form.get(f"quote:{question.id}") or "").strip()
            note = str(form.get(f"note:{question.id}") or "").strip()
            if value == was and not quote and not note:
                continue
            definition = module.field_definition(bare)
            final = fields.get(name)
            if not value:
                if was:
                    requests.append(DecisionRequest(name, "reject", reviewer, shown, template_field=definition))
                continue
            coerce_value(value, definition)  # an answer the question does not offer is refused here
            proposal = final is not None and not decided(final) and same_value(final.model_value, value)
            action = "approve" if proposal and not quote else "correct"
            evidence = quote_evidence(page, key, quote, None, None) if quote and action == "correct" else {}
            requests.append(
                DecisionRequest(
                    name,
                    action,
                    reviewer,
                    shown,
                    template_field=definition,
                    value=value if action == "correct" else None,
                    note=note or "answered on the RoB 2 panel",
                    **evidence,
                )
            )
        judgement = str(form.get(f"override:{code}") or "").strip()
        was_override = str(form.get(f"was_override:{code}") or "").strip()
        reason = str(form.get(f"reason:{code}") or "").strip()
        name = entry_field_name(GROUP, entry, override_field(code))
        definition = module.field_definition(override_field(code))
        if judgement != was_override or (judgement and reason and reason != str(form.get(f"was_reason:{code}") or "")):
            if judgement:
                if judgement_of(judgement) is None:
                    raise DecisionRefused(f"{judgement!r} is no RoB 2 judgement: Low, Some concerns or High")
                if not reason:
                    raise DecisionRefused(f"{code}: a judgement departing from the algorithm's needs its reason")
                requests.append(
                    DecisionRequest(
                        name, "correct", reviewer, shown, template_field=definition, value=judgement, note=reason
                    )
                )
            elif was_override:
                requests.append(
                    DecisionRequest(
                        name, "reject", reviewer, shown, template_field=definition, note="override withdrawn"
                    )
                )
        for asked in requests:
            decide(
                page.store,
                record,
                replace(asked, identity=module.identity, role=standing.role, blind_to=standing.blind_to),
            )
    except DecisionRefused as refused:
        return document_refused(request, key, str(refused), form=form)
    said = f"RoB 2 {code} of result {entry}: {len(requests)} answer(s) recorded by {reviewer}"
    return _back(key, said, form, entry)
