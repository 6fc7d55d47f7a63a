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

from atlas_pipeline.core.rob2_judgements import Override
from atlas_pipeline.core.rob2_module import (
    DOMAIN_CODES,
    GROUP,
    OVERALL,
    entry_answers,
    judge_entry,
    judgement_of,
    override_field,
    question_field,
    tool_of,
)
from atlas_pipeline.core.templates import entry_field_name, entry_field_parts, entry_in_range
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.review.decisions import DecisionRefused, DecisionRequest, coerce_value, decide, same_value
from atlas_pipeline.review.final_values import FinalField, review_document
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
        user = page.user(request)
        role = "adjudicator" if form.get("role") == "adjudicator" else "reviewer"
        if role == "adjudicator" and user is not None and not user.may_settle():
            raise DecisionRefused(
                f"{user.name} is an {user.role}: settling reviewers' differences takes an adjudicator"
            )
        standing = standing_for(page, request, key, role, form)
        tiers, derivations = page.deployment.accepted_tiers(), page.deployment.derivations()
        review = review_document(record, standing.visible, tiers, derivations)  # as the person saw it
        fields = review.fields if review else {}
        own = [final for name, final in fields.items() if entry_field_parts(name)[:2] == (GROUP, entry)]
        if not own or all(final.provenance == "rejected" for final in own):
            raise DecisionRefused(f"{key} has no RoB 2 entry {entry}: add the result first")
        blind_to_models = "models" in standing.blind_to
        extracted = record.fields if record is not None else {}

        def evidence(question: str, quote: str) -> dict[str, Any]:  # words selected on a page, or a typed quote
            return quote_evidence(
                page, key, quote, form.get(f"quote_page:{question}"), form.get(f"quote_words:{question}")
            )

        who = (reviewer, shown)
        requests, answers = _answers(module, code, entry, form, fields, extracted, blind_to_models, who, evidence)
        requests += _stale(tool, module, code, entry, fields, answers, who)
        requests += _override(tool, module, code, entry, form, answers, fields, who)
        for asked in requests:
            asked = replace(asked, identity=module.identity, role=standing.role, blind_to=standing.blind_to)
            decide(page.store, record, asked)
    except DecisionRefused as refused:
        return document_refused(request, key, str(refused), form=form)
    said = f"RoB 2 {code} of result {entry}: {len(requests)} decision(s) recorded by {reviewer}"
    return _back(key, said, form, entry)


Who = tuple[str, tuple[str, str]]  # (reviewer, the extraction shown: sha256, version)


def _final_answers(fields: dict[str, FinalField], entry: int) -> dict[str, Any]:
    """The entry's answers that stand (decided, not rejected), by bare field name."""
    prefix = f"{GROUP}[{entry}]."
    return {
        name.removeprefix(prefix): final.final_value
        for name, final in fields.items()
        if name.startswith(prefix) and decided(final) and not final.disagreement  # disputed: none until settled
    }


def _answers(
    module, code: str, entry: int, form, fields, extracted, blind_to_models: bool, who: Who, evidence
) -> tuple[list[DecisionRequest], dict[str, Any]]:
    """A decision per answer of the domain changed in the form — the model's proposal kept as shown is approved
    (never in a pass blind to the models: the person chose it without seeing it), another answer corrects it, an
    answer emptied is rejected —, every one checked; and the entry's answers once they are recorded."""
    reviewer, shown = who
    answers = _final_answers(fields, entry)
    requests = []
    questions = tool_of(module).domain(code).questions if code != OVERALL else ()
    for question in questions:
        bare = question_field(question.id)
        name = entry_field_name(GROUP, entry, bare)
        if f"answer:{question.id}" not in form:
            continue  # not asked given the answers above (the page does not send it): see ``_stale``
        value = str(form.get(f"answer:{question.id}") or "").strip().upper()
        was = str(form.get(f"was:{question.id}") or "").strip().upper()
        on_page = str(form.get(f"shown:{question.id}") or "").strip().upper()
        quote = str(form.get(f"quote:{question.id}") or "").strip()
        note = str(form.get(f"note:{question.id}") or "").strip()
        disputed = form.get(f"disputed:{question.id}") == "1"
        definition = module.field_definition(bare)
        final = fields.get(name)
        if not value:
            if was or on_page or disputed:  # a person's answer, a proposal shown, or a dispute settled on none
                requests.append(DecisionRequest(name, "reject", reviewer, shown, template_field=definition))
                answers.pop(bare, None)
            continue
        if value == was and not quote and not note:
            continue
        coerce_value(value, definition)  # an answer the question does not offer is refused here
        if value == "NA" and not question.if_applicable:
            raise DecisionRefused(f"{question.id}: 'Not applicable' is for a question its condition does not ask")
        proposal = final is not None and not decided(final) and same_value(final.model_value, value)
        action = "approve" if proposal and not quote and not blind_to_models else "correct"
        if value == "NI" and not note:  # what was looked for: the person's, kept from their NI, or the model's
            kept = final.note if final is not None and decided(final) and final.final_value == "NI" else ""
            model_note = str((extracted.get(name) or {}).get("note") or "") if action == "approve" else ""
            note = kept or (model_note if model_note.startswith(("No information", "looked for")) else "")
            if not note:
                why = "'No information' says what was looked for (write it in the note)"
                raise DecisionRefused(f"{question.id}: {why}")
        requests.append(
            DecisionRequest(
                name,
                action,
                reviewer,
                shown,
                template_field=definition,
                value=value if action == "correct" else None,
                note=note,
                **(evidence(question.id, quote) if action == "correct" else {}),
            )
        )
        answers[bare] = value
    return requests, answers


def _stale(tool, module, code: str, entry: int, fields, answers: dict[str, Any], who: Who) -> list[DecisionRequest]:
    """The model's proposals to questions the answers now recorded no longer ask: rejected, so that nothing waits
    for a person on a question that is not part of the assessment."""
    reviewer, shown = who
    if code == OVERALL:
        return []
    domain = tool.domain(code)
    given = entry_answers(tool, answers)[code]
    asked = domain.asked(given)
    stale = []
    for question in domain.questions:
        name = entry_field_name(GROUP, entry, question_field(question.id))
        final = fields.get(name)
        if asked[question.id] is False and final is not None and final.waits_for_person and not decided(final):
            definition = module.field_definition(question_field(question.id))
            note = "not asked given the answers above (RoB 2)"
            stale.append(DecisionRequest(name, "reject", reviewer, shown, template_field=definition, note=note))
    return stale


def _override(tool, module, code: str, entry: int, form, answers, fields, who: Who) -> list[DecisionRequest]:
    """The domain's override as the form sets it: with its reason, and only of a domain the algorithm judges from
    the answers recorded (an override departs from a judgement); withdrawn when emptied."""
    reviewer, shown = who
    judgement = str(form.get(f"override:{code}") or "").strip()
    was_override = str(form.get(f"was_override:{code}") or "").strip()
    reason = str(form.get(f"reason:{code}") or "").strip()
    disputed = form.get(f"override_disputed:{code}") == "1"  # settled by any choice, "none" too
    changed = judgement != was_override or (judgement and reason != str(form.get(f"was_reason:{code}") or ""))
    if not changed and not disputed:
        return []
    name = entry_field_name(GROUP, entry, override_field(code))
    definition = module.field_definition(override_field(code))
    if not judgement:
        note = "override withdrawn" if not disputed else "no override (settled)"
        return [DecisionRequest(name, "reject", reviewer, shown, template_field=definition, note=note)]
    if judgement_of(judgement) is None:
        raise DecisionRefused(f"{judgement!r} is no RoB 2 judgement: Low, Some concerns or High")
    if not reason:
        raise DecisionRefused(f"{code}: a judgement departing from the algorithm's needs its reason")
    overrides = {}
    for other in (*DOMAIN_CODES, OVERALL):  # the overall judgement follows the domains' overrides
        final = fields.get(entry_field_name(GROUP, entry, override_field(other)))
        found = judgement_of(final.final_value) if other != code and decided(final) else None
        if found is not None and final is not None:
            overrides[other] = Override(found, final.note or "-")
    judged = {j.domain: j for j in judge_entry(tool, answers, overrides)[0]}
    if judged[code].proposed is None:
        missing = ", ".join(judged[code].missing)
        raise DecisionRefused(
            f"{code} is not judged yet (answer {missing} first): an override departs from a judgement"
        )
    value = judgement_of(judgement).value
    return [DecisionRequest(name, "correct", reviewer, shown, template_field=definition, value=value, note=reason)]
