"""Two independent extractors: the same document extracted twice, and the second answer set beside the first.

``verified`` proves the document says what the quote says, not that the value is the right one for its field. As
two people do in a systematic review, a second extractor (another model, another endpoint, or the same model) reads
the document on its own — the fields in another order, no sight of the first answer — and every value is compared
(``grading.agreement``). The first extractor's values stay the record's values; each gets its agreement state, and
where the two differ a flag (so it goes to a person whatever the team's tiers) and the second extractor's value with
its quote and tier as a candidate a reviewer can take. An entry of a group only the second extractor found is added,
flagged, so nothing either found is lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rapidfuzz import fuzz

from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.extraction.extractor import ExtractionOutcome, extract_with_llm
from atlas_pipeline.extraction.llm.client import LLMClient
from atlas_pipeline.extraction.llm.errors import LLMError
from atlas_pipeline.extraction.prompt import PromptSources
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.grading.agreement import compare_extractions
from atlas_pipeline.grading.fields import FieldResult
from atlas_pipeline.parsing import Table

SECOND = "B"


def independent_template(template: Template) -> Template:
    """The template the second extractor is asked with: the same fields, modules and fields in reverse order (an
    independent prompt: another order of attention, another request, its own cache entry)."""
    modules = [module.model_copy(update={"fields": list(reversed(module.fields))}) for module in template.modules]
    return template.model_copy(update={"modules": list(reversed(modules))})


def extract_twice(
    first: LLMClient,
    second: LLMClient,
    template: Template,
    rule: Rule,
    markdown: str,
    tables: Sequence[Table],
    sources: PromptSources | None = None,
) -> tuple[ExtractionOutcome | LLMError, ExtractionOutcome | LLMError]:
    """Both extractions at once (each its own requests, cache entries and usage); an extractor that fails gives its
    ``LLMError`` instead of an outcome."""

    def run(client: LLMClient, asked_with: Template) -> ExtractionOutcome | LLMError:
        try:
            return extract_with_llm(client, asked_with, rule, markdown, tables, sources)
        except LLMError as error:
            return error

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="extractor") as pool:
        answers = pool.submit(run, first, template), pool.submit(run, second, independent_template(template))
        return answers[0].result(), answers[1].result()


def _show(value: Any) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def _candidate(result: FieldResult | None, model: str) -> dict[str, Any]:
    if result is None:
        return {"extractor": SECOND, "model": model, "value": None, "quote": None, "tier": "not_reported"}
    return {
        "extractor": SECOND,
        "model": model,
        "value": result.value,
        "quote": result.quote,
        "tier": result.tier,
        "page": result.page,
    }


def set_beside(
    first: dict[str, FieldResult], second: dict[str, FieldResult], template: Template, model: str
) -> tuple[dict[str, FieldResult], Counter[str]]:
    """The first extractor's fields with the second's set beside them: each value's ``agreement``, a flag and the
    second's candidate where they differ, and the entries only the second found (numbered after the first's).
    Returns the fields and the count of values per agreement state."""
    plain = {name: {"value": result.value} for name, result in first.items()}
    theirs = {name: {"value": result.value} for name, result in second.items()}
    fields = dict(first)
    counts: Counter[str] = Counter()
    for value in compare_extractions(plain, theirs, template):
        counts[value.state] += 1
        mine = fields.get(value.field)
        other = second.get(value.second_field) if value.second_field else None
        if mine is None:  # an entry only the second extractor found: kept, for a person to confirm
            if other is None:
                continue
            group, _, _ = entry_field_parts(value.field)
            mine = FieldResult(**{**other.to_dict(), "module": other.module or group, "candidates": []})
            mine.flags = [*mine.flags, f"only model {SECOND} ({model}) found this entry"]
            fields[value.field] = mine
        mine.agreement = value.state
        if value.state == "disagreed":
            mine.flags = [*mine.flags, f"model {SECOND} ({model}) gives {_show(value.second)}"]
        elif value.state == "only_one" and other is not None and value.first is None:
            mine.flags = [*mine.flags, f"only model {SECOND} ({model}) found a value: {_show(value.second)}"]
        elif value.state == "only_one":
            mine.flags = [*mine.flags, f"model {SECOND} ({model}) found no value"]
        if value.state in ("disagreed", "only_one"):
            mine.candidates = [*mine.candidates, _candidate(other, model)]
    return fields, counts


SECOND_LOOK = "found on the second look"
PASSAGES_PER_FIELD = 2
PASSAGE_CHARS = 240


def omissions(fields: dict[str, FieldResult], template: Template) -> Template | None:
    """The part of the template neither extractor found: required single fields with no value from either, and
    groups with a required field where neither found an entry — as a template to ask again with, or None."""
    modules = []
    for module in template.modules:
        if module.repeating:
            has_entries = any(entry_field_parts(name)[0] == module.name for name in fields)
            if not has_entries and any(field.required for field in module.fields):
                modules.append(module)
            continue
        missing = [
            field
            for field in module.fields
            if field.required and fields.get(field.name) is not None and fields[field.name].agreement == "neither"
        ]
        if missing:
            modules.append(module.model_copy(update={"fields": missing}))
    return template.model_copy(update={"modules": modules}) if modules else None


def likely_passages(markdown: str, template: Template) -> list[str]:
    """The paragraphs most likely to hold each field of ``template`` (its name and description against the
    paragraph, rapidfuzz's token-set ratio), a few per field, cut short: what the follow-up request points to."""
    paragraphs = [p.strip() for p in markdown.split("\n\n") if len(p.strip()) > 40]
    chosen: list[str] = []
    for module in template.modules:
        for field in module.fields:
            words = f"{field.name.replace('_', ' ')} {field.description}"
            ranked = sorted(paragraphs, key=lambda p: -fuzz.token_set_ratio(words, p[:2000]))
            for paragraph in ranked[:PASSAGES_PER_FIELD]:
                passage = " ".join(paragraph.split())[:PASSAGE_CHARS]
                if passage not in chosen:
                    chosen.append(passage)
    return chosen


def second_look(
    client: LLMClient,
    missing: Template,
    rule: Rule,
    markdown: str,
    tables: Sequence[Table],
    sources: PromptSources | None = None,
) -> ExtractionOutcome:
    """One follow-up request that names just the fields neither extractor found, pointing at the parts of the
    document most likely to hold them; its answer is graded like any other (``extract_with_llm``)."""
    names = [module.name if module.repeating else field.name for module in missing.modules for field in module.fields]
    passages = "\n".join(f"- {passage}" for passage in likely_passages(markdown, missing))
    follow_up = (
        f"A first reading of this document found no value for: {', '.join(dict.fromkeys(names))}. Read the "
        "document again for just these; give a value only with its verbatim quote, and null where the document "
        f"does not report it. The parts most likely to hold them begin:\n{passages}"
    )
    instructions = f"{rule.custom_instructions.strip()}\n\n{follow_up}".strip()
    asked = rule.model_copy(update={"custom_instructions": instructions, "strategy": "direct"})
    return extract_with_llm(client, missing, asked, markdown, tables, sources)


def take_second_look(fields: dict[str, FieldResult], found: dict[str, FieldResult]) -> list[str]:
    """Set what the follow-up request found into ``fields`` (entries numbered after any there), each flagged for a
    person and noted as found on the second look; returns the names set."""
    taken = []
    numbers: dict[str, dict[int, int]] = {}
    for name, result in found.items():
        if result.value is None or result.value == [] or result.value == "":
            continue
        group, number, bare = entry_field_parts(name)
        if number is not None:
            used = {entry_field_parts(n)[1] for n in fields if entry_field_parts(n)[0] == group} - {None}
            renumbered = numbers.setdefault(group, {})
            if number not in renumbered:
                renumbered[number] = max(used | set(renumbered.values()), default=-1) + 1
            name = f"{group}[{renumbered[number]}].{bare}"
        elif name in fields and fields[name].value not in (None, "", []):
            continue
        result.agreement = result.agreement or "only_one"
        result.note = f"{result.note}; {SECOND_LOOK}" if result.note else SECOND_LOOK
        result.flags = [*result.flags, f"{SECOND_LOOK}: neither extractor found it at first"]
        fields[name] = result
        taken.append(name)
    return taken
