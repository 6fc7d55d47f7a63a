"""The model's proposed RoB 2 answers: one request per domain for the whole report, every result of it in view,
each answer with the quote it rests on — graded like any quote, and a person's to settle (a judgment is never
verified by a word).

The results assessed are the report's analysed outcomes: each distinct outcome × time point of the entries the
extraction found (the first group with ``outcome`` and ``time_point``). The text sent is the paper's methods and
results (``methods_and_results``): the whole text when it fits the rule's chunk size, else its sections whose
headings say methods, results, participants, randomisation … — a domain is judged from what the trial did, not from
its discussion. "No information" carries what was looked for: the model writes it in the quote as ``looked for:
…``, which Atlas keeps as the answer's note, never as a quote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from atlas_pipeline.core.rob2_module import GROUP, IDENTITY, RESULT_OF, question_field, tool_of
from atlas_pipeline.core.rob2_tool import Answer, Domain
from atlas_pipeline.core.templates import Template, TemplateField, TemplateModule, entry_field_name, entry_field_parts
from atlas_pipeline.extraction.llm.client import LLMClient
from atlas_pipeline.extraction.llm.errors import LLMError, LLMQueuedError
from atlas_pipeline.extraction.llm.usage import Usage
from atlas_pipeline.extraction.prompt import PromptSources, build_messages, neutralise
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.schema import answer_model, json_schema
from atlas_pipeline.grading.fields import FieldResult, grade_field
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.parsing.model import Table

LOOKED_FOR = re.compile(r"^\s*looked\s+for\s*:\s*", re.IGNORECASE)
_HEADING = re.compile(r"^#{1,6}\s+(.*)$|^\*\*([^*\n]{3,80})\*\*\s*$", re.MULTILINE)
_STUDY_SECTIONS = re.compile(
    r"abstract|summary|method|material|design|setting|participant|patient|subject|random|allocat|conceal|blind|mask|"
    r"intervention|procedure|outcome|measure|assess|follow|statistic|analys|sample size|result|finding|"
    r"registration|protocol|adverse|flow|baseline|ethic|trial",
    re.IGNORECASE,
)


@dataclass
class Proposal:
    """The RoB 2 entries the model proposed (record field name → graded result), what they cost and what to say."""

    fields: dict[str, FieldResult] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    results: int = 0
    failed: list[str] = field(default_factory=list)  # "D3: <the endpoint's reason>"

    @property
    def reason(self) -> str:
        if not self.results:
            return "RoB 2: no result to assess (no outcome entry with a time point found): add one on the desk"
        answered = sum(
            1 for name, r in self.fields.items() if r.value is not None and entry_field_parts(name)[2] not in IDENTITY
        )
        said = f"RoB 2: {answered} answer(s) proposed for {self.results} result(s), each a person's to settle"
        if self.failed:
            said += f"; not proposed: {'; '.join(self.failed)} (answer by hand)"
        return said


def results_to_assess(template: Template, fields: dict[str, FieldResult], limit: int) -> list[dict[str, FieldResult]]:
    """The results of the report: each distinct (outcome, time point) of the first group naming both, in the order
    found, with the extraction's own graded values (RoB 2's identity field → the result's; at most ``limit``)."""
    source = next(
        (g for g in template.groups if not g.rob2 and all(g.field_definition(name) for name in RESULT_OF)), None
    )
    if source is None:
        return []
    entries: dict[int, dict[str, FieldResult]] = {}
    for name, result in fields.items():
        group, entry, bare = entry_field_parts(name)
        if group == source.name and entry is not None and bare in RESULT_OF:
            entries.setdefault(entry, {})[bare] = result
    found: dict[tuple[str, ...], dict[str, FieldResult]] = {}
    for number in sorted(entries):
        given = entries[number]
        outcome = given.get(RESULT_OF[0])
        if outcome is None or outcome.value in (None, ""):
            continue
        key = tuple(" ".join(str(getattr(given.get(n), "value", "") or "").split()).casefold() for n in RESULT_OF)
        named = {
            ours: given.get(theirs) or _empty("not given") for ours, theirs in zip(IDENTITY, RESULT_OF, strict=True)
        }
        found.setdefault(key, named)
    return list(found.values())[:limit]


def _empty(note: str) -> FieldResult:
    return FieldResult(GROUP, None, None, 0.0, "not_reported", answered=False, note=note)


def methods_and_results(markdown: str, limit: int) -> str:
    """The text a domain is judged from: all of it when it fits ``limit`` characters, else the sections whose
    headings name the trial's methods and results (in order, up to ``limit``), else its beginning."""
    if len(markdown) <= limit:
        return markdown
    marks = list(_HEADING.finditer(markdown))
    if not marks:
        return markdown[:limit]
    kept, size = [], 0
    lead = markdown[: marks[0].start()]
    if lead.strip():
        kept.append(lead[: limit // 4])
        size += len(kept[-1])
    for index, mark in enumerate(marks):
        heading = mark.group(1) or mark.group(2) or ""
        if re.search(r"reference|acknowledg|conflict|competing|funding|supplementar", heading, re.IGNORECASE):
            continue
        end = marks[index + 1].start() if index + 1 < len(marks) else len(markdown)
        if not _STUDY_SECTIONS.search(heading):
            continue
        section = markdown[mark.start() : end]
        if size + len(section) > limit:
            section = section[: max(0, limit - size)]
        if section:
            kept.append(section)
            size += len(section)
        if size >= limit:
            break
    return "\n\n".join(kept) if kept else markdown[:limit]


def domain_template(domain: Domain, module: TemplateModule, results: int) -> Template:
    """The answer a domain's request asks for: per result (its number in the list), every question of the domain."""
    fields = [
        TemplateField(name="result", type="integer", description=f"the result's number in the list (1-{results})"),
        *[module.field_definition(question_field(q.id)) for q in domain.questions],
    ]
    group = TemplateModule(
        name=GROUP,
        description=f"RoB 2 {domain.code}: {domain.name}",
        fields=[f for f in fields if f is not None],
        repeating=True,
        identity=["result"],
        max_entries=max(1, results),
    )
    return Template(code="rob2", name="RoB 2", version=domain.code, modules=[group])


def _instruction(domain: Domain, results: list[dict[str, FieldResult]]) -> str:
    listed = "\n".join(
        f"{number}. {' | '.join(str(r[name].value or '—') for name in IDENTITY)}" for number, r in enumerate(results, 1)
    )
    questions = "\n".join(
        f"- {q.id} {q.text}" + (f" ({q.condition_text()})" if q.asked_when or q.if_applicable else "")
        for q in domain.questions
    )
    return (
        "This request assesses risk of bias with Cochrane's RoB 2 tool, one domain only: "
        f"{domain.code} {domain.name}.\nAnswer its signalling questions for each result below (one entry per result, "
        "'result' its number), from what the document says the trial did:\n"
        f"{questions}\n"
        "Answers: Y yes, PY probably yes, PN probably no, N no, NI no information (the document does not say). A "
        "conditional question whose condition your earlier answers do not meet is NA (or null). Every answer's quote "
        "is the VERBATIM sentence it rests on; for NI, write in the quote what you looked for, starting with "
        "'looked for: ' (e.g. 'looked for: how the allocation sequence was concealed').\n"
        f"Results (outcome | time point):\n{neutralise(listed)}"
    )


def _grade(name: str, answer: Any, scope: EvidenceScope, definition: TemplateField) -> FieldResult:
    answer = answer if isinstance(answer, dict) else None
    given = answer.get("value") if answer is not None else None
    if given is not None and given not in (definition.enum or []):  # an answer that passed the schema's check
        return FieldResult(
            GROUP,
            None,
            None,
            0.0,
            "not_reported",
            answered=False,
            note=f"the model answered "
            f"{given!r}, not one of this question's answers ({', '.join(definition.enum or [])})",
        )
    looked_for = ""
    if answer is not None and isinstance(answer.get("quote"), str) and LOOKED_FOR.match(answer["quote"]):
        looked_for = LOOKED_FOR.sub("", answer["quote"]).strip()
        answer = {**answer, "quote": None}
    result = grade_field(name, "enum", GROUP, answer, scope, definition.synonyms, definition.kind)
    if looked_for:
        said = "No information; looked for: " if result.value == "NI" else "looked for: "
        result.note = said + looked_for + (f" ({result.note})" if result.note and result.value != "NI" else "")
    return result


def domain_request(
    domain: Domain,
    module: TemplateModule,
    results: Sequence[dict[str, FieldResult]] | int,
    text: str,
    tables_html: list[str],
    rule: Rule,
    sources: PromptSources | None,
) -> tuple[list[dict[str, str]], dict, Template]:
    """One domain's request: its messages, answer schema and the template they are made from (``results``: the
    report's results, or — for an estimate before any is known — how many to count)."""
    count = results if isinstance(results, int) else len(results)
    listed = [] if isinstance(results, int) else list(results)
    template = domain_template(domain, module, count)
    schema = json_schema(template)
    messages = build_messages(
        template,
        text,
        tables_html,
        rule.custom_instructions,
        schema=schema,
        sources=sources,
        instruction=_instruction(domain, listed),
    )
    return messages, schema, template


def _ask(
    client: LLMClient,
    domain: Domain,
    module: TemplateModule,
    results: list[dict[str, FieldResult]],
    text: str,
    tables_html: list[str],
    rule: Rule,
    sources: PromptSources | None,
    usage: Usage,
) -> list[Any]:
    messages, schema, template = domain_request(domain, module, results, text, tables_html, rule, sources)
    try:
        answer = client.complete(messages, schema, answer_model(template))
    except LLMError as error:
        usage.add(error.usage)
        raise error.costing(Usage()) from error
    usage.add(answer.usage)
    return [entry for entry in answer.data.get(GROUP) or [] if isinstance(entry, dict)]


def propose_rob2(
    client: LLMClient,
    template: Template,
    fields: dict[str, FieldResult],
    rule: Rule,
    markdown: str,
    tables: Sequence[Table],
    sources: PromptSources | None = None,
) -> Proposal:
    """The RoB 2 entries for the report whose extraction found ``fields``: one request per domain (at the same time,
    the endpoint's gate deciding how many are in flight). A domain whose request fails leaves its questions
    unanswered, said in the reason (a person answers them); a request queued at a Batch API waits like the rest."""
    module = template.rob2
    proposal = Proposal()
    if module is None:
        return proposal
    results = results_to_assess(template, fields, module.max_entries)
    proposal.results = len(results)
    if not results:
        return proposal
    tool = tool_of(module)
    scope = EvidenceScope(markdown, tables)
    text = methods_and_results(markdown, rule.chunk_size_chars)
    tables_html = [table.html for table in tables]

    spent = {domain.code: Usage() for domain in tool.domains}  # one each: the requests run at the same time

    def ask(domain: Domain) -> list[Any] | LLMError:
        try:
            return _ask(client, domain, module, results, text, tables_html, rule, sources, spent[domain.code])
        except LLMError as error:
            return error

    with ThreadPoolExecutor(max_workers=max(1, min(5, client.config.concurrency)), thread_name_prefix="rob2") as pool:
        answers = list(pool.map(ask, tool.domains))
    for usage in spent.values():
        proposal.usage.add(usage)
    queued = next((a for a in answers if isinstance(a, LLMQueuedError)), None)
    if queued is not None:
        raise queued.costing(proposal.usage)
    for number, identity in enumerate(results, 1):
        for name in IDENTITY:  # the outcomes entry's value and quote, as this group's own
            proposal.fields[entry_field_name(GROUP, number, name)] = replace(identity[name], module=GROUP)
    for domain, answer in zip(tool.domains, answers, strict=True):
        if isinstance(answer, LLMError):
            proposal.failed.append(f"{domain.code}: {answer.reason}")
        by_result: dict[int, dict[str, Any]] = {}
        for entry in answer if not isinstance(answer, LLMError) else []:
            number = (entry.get("result") or {}).get("value") if isinstance(entry.get("result"), dict) else None
            whole = isinstance(number, int | float) and not isinstance(number, bool) and float(number).is_integer()
            if whole and 1 <= int(number) <= len(results):
                by_result.setdefault(int(number), entry)  # a result answered twice: the first answer counts
        for number in range(1, len(results) + 1):
            entry = by_result.get(number)
            graded: dict[str, FieldResult] = {}
            for question in domain.questions:
                bare = question_field(question.id)
                definition = module.field_definition(bare)
                assert definition is not None
                if entry is None or bare not in entry:
                    why = f"the {domain.code} request failed" if isinstance(answer, LLMError) else "not answered"
                    graded[question.id] = _empty(why)
                    continue
                graded[question.id] = _grade(entry_field_name(GROUP, number, bare), entry[bare], scope, definition)
            given = {qid: Answer(r.value) for qid, r in graded.items() if r.value in Answer.__members__.values()}
            asked = domain.asked(given)
            for qid, result in graded.items():
                if asked[qid] is False:
                    continue  # not asked given the answers above (NA, or an answer to no question): nothing to settle
                if result.value == "NA" and not domain.question(qid).if_applicable:
                    result = _empty("the model answered NA where the answers above ask this question")
                proposal.fields[entry_field_name(GROUP, number, question_field(qid))] = result
    return proposal
