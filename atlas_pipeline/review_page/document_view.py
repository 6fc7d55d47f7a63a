"""What the document page shows: each field with its model value, final value, decisions and evidence (the quote
marked in its text, or its rectangles on the PDF page)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request

from atlas_pipeline.core.templates import entry_field_parts
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.review.decisions import (
    Decision,
    load_decisions,
)
from atlas_pipeline.review.derivations import DERIVED_TIER
from atlas_pipeline.review.entry_grid import KIND_LABELS, entry_grid
from atlas_pipeline.review.evidence import locate_quote, reader_html, selected_evidence
from atlas_pipeline.review.final_values import DocumentReview, FinalField, decisions_by_field, review_document
from atlas_pipeline.review_page.page_state import ReviewPage
from atlas_pipeline.review_page.rob2_panel import rob2_panel
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, SnapshotRecord, read_record

NEEDS_PERSON = ("awaiting_review", "recheck")
PROVENANCE_MEANINGS = {  # what each final value's badge says when pointed at
    "model_verified": "accepted by the team's policy: the model's quote holds; no person decided",
    "reviewer_approved": "accepted by a person: the model's value, approved",
    "reviewer_corrected": "a person's value in place of the model's",
    "reviewer_added": "a person's value where the model gave none",
    "rejected": "rejected by a person (with the reason)",
    "awaiting_review": "waits for a person",
    "recheck": "a person decided on a value the model no longer gives: decide again",
}


def _field_view(final: FinalField, extracted: dict[str, Any], history: list[Decision]) -> dict[str, Any]:
    return {
        "name": final.field,
        "final": final,
        # a derived value is proposed in a field the model left empty: it is what a decision is made on
        "model_value": final.model_value if final.tier == DERIVED_TIER else extracted.get("value"),
        "tier": final.tier,
        "quote": final.quote,
        "note": "" if final.tier == DERIVED_TIER else extracted.get("note") or "",
        "flags": final.flags,
        "agreement": extracted.get("agreement") or "",
        # another extractor's value where the two differ (``extraction.dual``): a person may take it as it is
        "candidates": [c for c in extracted.get("candidates") or [] if c.get("extractor")],
        "needs_person": final.provenance in NEEDS_PERSON,
        "history": list(reversed(history)),
    }


def document_context(
    page: ReviewPage, request: Request, key: str, error: str = "", field: str = "", blind: str = ""
) -> dict[str, Any]:
    """The document page's context; ``field`` and ``blind``: the field shown and the pass the person is in, where
    the request's address does not say them (a refused post, shown at the post's address)."""
    store = page.store
    record = reviewed_extraction(store, key)
    states = page.states(only=[key])
    state = states[0] if states else None
    decisions = load_decisions(store, key)
    me = page.reviewer(request)
    blind = blind or request.query_params.get("blind", "")
    blind = blind if blind in ("1", "models") else ""  # other reviewers hidden; "models": the models' values too
    team = page.team(key) if page.logins() else None
    forced = page.blind_to(request, team) if team is not None else ()
    if forced:  # the server's, not the page's: an extractor cannot leave it before the comparison opens
        blind = "models" if "models" in forced or blind == "models" else "1"
    seen = [d for d in decisions if d.reviewer == me and d.on_a_field] if blind else decisions
    review: DocumentReview | None = review_document(
        record, seen, page.deployment.accepted_tiers(), page.deployment.derivations()
    )
    template = page.template()
    by_field = decisions_by_field(record, seen, page.deployment.derivations()) if record is not None else {}
    modules: dict[str, dict[str, Any]] = {}
    modules_of = {field.name: module.name for module in template.modules for field in module.fields}
    order = [field.name for field in template.fields]
    names = sorted(review.fields, key=lambda n: order.index(n) if n in order else len(order)) if review else []
    views = []
    for name in names:
        final = review.fields[name] if review else None
        if final is None or record is None:
            continue
        view = _field_view(final, record.fields.get(name) or {}, by_field.get(name, []))
        view["definition"] = template.field_definition(name)
        views.append(view)
        if entry_field_parts(name)[1] is None:  # a repeating group's entries are shown in its grid
            label = final.module or modules_of.get(name) or "fields"
            modules.setdefault(label, {"label": label, "views": []})["views"].append(view)
    grids = [entry_grid(group, review.fields if review else {}) for group in template.groups if not group.rob2]
    panel = template.rob2.name if template.rob2 is not None else None  # RoB 2's answers wait on its panel
    waiting = [v["name"] for v in views if v["needs_person"] and entry_field_parts(v["name"])[0] != panel]
    selected_name = field or request.query_params.get("field") or (waiting[0] if waiting else "")
    selected = next((v for v in views if v["name"] == selected_name), None)
    after = names[names.index(selected_name) + 1 :] if selected_name in names else names
    next_field = next((n for n in after if n in waiting), waiting[0] if waiting else "")
    return {
        "key": key,
        "state": state,
        "record": record,
        "review": review,
        "modules": list(modules.values()),
        "groups": template.groups,
        "grids": grids,
        "rob2": template.rob2,  # the RoB 2 panel (``review_page.rob2_panel``): its entries are shown there
        "rob2_waiting": sum(1 for v in views if v["needs_person"] and entry_field_parts(v["name"])[0] == panel),
        "rob2_results": rob2_panel(template, review.fields if review else {}, blind, record.fields if record else {}),
        "kind_labels": KIND_LABELS,
        "meanings": PROVENANCE_MEANINGS,
        "by_hand": record is not None and record.mode == "skip",
        "selected": selected,
        "evidence": _evidence(page, key, record, selected, _page_asked(request), blind == "models")
        if selected
        else None,
        "next_field": next_field,
        "reviewer": me,
        "blind": blind,
        "forced_blind": bool(forced),
        "team": team,
        "my_state": team.state_of(me) if team is not None else "",
        "user": page.user(request),
        "error": error,
        "message": request.query_params.get("message", ""),
        # links name the document's page in full: a refusal is shown at the address of the post it refused
        "query": lambda **changes: (
            f"/documents/{quote(key)}?" + urlencode({k: v for k, v in {"blind": blind, **changes}.items() if v})
        ),
    }


def _page_asked(request: Request) -> int | None:
    """The page the viewer is asked to open on (``?page=N``: a candidate's quote on the Disagreements page)."""
    raw = request.query_params.get("page", "")
    return int(raw) if raw.isascii() and raw.isdecimal() and 0 < int(raw) < 100_000 else None


def _evidence(
    page: ReviewPage,
    key: str,
    record: ExtractionRecord | None,
    view: dict[str, Any],
    at: int | None = None,
    unmarked: bool = False,
) -> dict[str, Any]:
    """Where the field's evidence is: the PDF page and the quote's boxes, or the text with its span marked
    (``unmarked``: extracting blind to the models — the text, nothing of where a model found the value)."""
    store = page.store
    snapshot = read_record(store, key, "snapshot", SnapshotRecord)
    parse = read_record(store, key, "parse", ParseRecord)
    extracted = record.values().get(view["name"], {}) if record else {}
    final = view["final"]
    quote = view["quote"] or final.corrected_quote  # a person's quote where the model gave none
    inputs = [i["quote"] for i in (final.derivation or {}).get("inputs", []) if i.get("quote")]
    if final.tier == DERIVED_TIER and not final.corrected_quote:  # the inputs' quotes, not the arithmetic
        quote = inputs[0] if inputs else None
    if snapshot and snapshot.snapshot_path and (snapshot.media_type or "").endswith("pdf"):
        hint = extracted.get("page") or (final.quote_check.page if final.quote_check else None)
        unfound = (  # the grader found the model's quote nowhere in the document
            view["quote"] and extracted.get("tier") == "unverified" and extracted.get("start") is None
        ) and extracted.get("table") is None
        pdf = store.read_bytes(snapshot.snapshot_path)
        checked = final.quote_check
        if quote and quote == final.corrected_quote and checked is not None and checked.words and checked.page:
            # the person's words as they selected them on their page: exactly those words light up
            located = selected_evidence(pdf, checked.page, *checked.words)
        else:
            located = locate_quote(pdf, quote, hint, pieces=not unfound)
        rects = list(located.rects)
        if final.tier == DERIVED_TIER:  # every input's quote found on the same page lights up too
            for other in inputs[1:]:
                also = locate_quote(pdf, other, located.page, pieces=False)
                rects += also.rects if also.page == located.page and also.match == "whole" else []
        if at is not None and at != located.page and at <= located.pages:  # asked for another page: open there
            return {"kind": "pdf", "page": at, "pages": located.pages, "rects": [], "boxes": [], "match": "asked"}
        boxes = [[round(r.left, 5), round(r.top, 5), round(r.width, 5), round(r.height, 5)] for r in rects]
        return {
            "kind": "pdf",
            "page": located.page,
            "pages": located.pages,
            "rects": rects,
            "boxes": boxes,  # the same, for the viewer's script (turned with the page, kept across fields)
            "match": located.match,
        }
    text = store.read_text(parse.text_path) if parse and parse.text_path and store.exists(parse.text_path) else ""
    return {
        "kind": "text",
        "html": reader_html(text, None, None, None)
        if unmarked
        else reader_html(text, extracted.get("start"), extracted.get("end"), quote),
        "found": extracted.get("start") is not None or bool(quote and quote in text),
    }


AUTOMATIC_NOTES = ("edited in the grid", "emptied in the grid")  # what the page writes, not what a person said


def consensus_candidates(
    extracted: dict[str, Any], decisions: list[Decision], extractors: Mapping[str, list[str]] | None = None
) -> list[dict[str, Any]]:
    """Every candidate value of one disputed field, side by side for an adjudicator: model A's and model B's (when a
    model gave one), each reviewer's latest with their quote, its page and their note, and each of ``extractors`` who
    left it empty — with the decision that would settle on it and who saw what."""
    candidates = []
    if extracted.get("value") is not None or extracted.get("quote"):  # a model that gave nothing is no candidate
        candidates.append(
            {
                "who": "model A",
                "value": extracted.get("value"),
                "quote": extracted.get("quote"),
                "page": extracted.get("page"),
                "action": "approve",
                "saw": "",
                "note": "",
            }
        )
    for other in extracted.get("candidates") or []:
        if other.get("extractor"):
            who = f"model {other['extractor']} ({other.get('model', '')})"
            candidates.append(
                {
                    "who": who,
                    "value": other.get("value"),
                    "quote": other.get("quote"),
                    "page": other.get("page"),
                    "action": "correct",
                    "saw": "",
                    "note": "",
                }
            )
    latest: dict[str, Decision] = {}
    for decision in decisions:
        if decision.role != "adjudicator":
            latest[decision.reviewer] = decision
    for reviewer, decision in latest.items():
        value = decision.value if decision.action == "correct" else extracted.get("value")
        checked = decision.quote_check if decision.action == "correct" else None
        candidates.append(
            {
                "who": reviewer,
                "value": None if decision.action == "reject" else value,
                "quote": decision.quote if decision.action == "correct" else extracted.get("quote"),
                "page": checked.page if checked is not None else extracted.get("page"),
                "tier": checked.tier if checked is not None else "",
                "action": decision.action,
                "saw": f"blind to {' and '.join(decision.blind_to)}" if decision.blind_to else "saw everything",
                "note": decision.note if decision.note not in AUTOMATIC_NOTES else "",
                "reason": decision.reason,
            }
        )
    if extractors:  # compared: the extractors' values, not a third person's
        latest = {name: decision for name, decision in latest.items() if name in extractors}
        candidates = [c for c in candidates if c["who"].startswith("model ") or c["who"] in latest]
    for name, unseen in (extractors or {}).items():  # an extractor who completed without deciding on it
        if name in latest:
            continue
        if "models" not in unseen and extracted.get("value") is not None:  # they saw the model's value, left it
            candidates.append(
                {
                    "who": name,
                    "value": extracted.get("value"),
                    "quote": extracted.get("quote"),
                    "page": extracted.get("page"),
                    "action": "approve",
                    "saw": "left the model's value",
                    "note": "",
                    "reason": "",
                }
            )
        else:  # "not found" is their answer
            candidates.append(
                {
                    "who": name,
                    "value": None,
                    "quote": None,
                    "page": None,
                    "action": "reject",
                    "saw": "",
                    "note": "",
                    "reason": "left empty",
                }
            )
    return candidates
