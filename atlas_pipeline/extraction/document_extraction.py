"""The extraction step of one document: its markdown and tables through the rule's post-processor (skip wrapper or
LLM), recorded with the extraction version; and what extracting a set of documents would cost (``atlas run
--estimate``)."""

from __future__ import annotations

import time

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import Template
from atlas_pipeline.extraction.estimate import RunEstimate, answer_tokens_guess, estimate_document, seconds_per_answer
from atlas_pipeline.extraction.kept_extraction import keep_last_good
from atlas_pipeline.extraction.llm.client import LLMClient
from atlas_pipeline.extraction.modes import ExtractionInput, mode_for
from atlas_pipeline.extraction.prompt import PromptSources
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.version import ExtractionVersion, extraction_version
from atlas_pipeline.knowledge.catalog import CatalogEntry
from atlas_pipeline.knowledge.listing import KnowledgeBase, SourceMissingError
from atlas_pipeline.parsing import (
    DocumentError,
)
from atlas_pipeline.parsing.document_parse import load_markdown, load_tables
from atlas_pipeline.parsing.media import detect_media_type
from atlas_pipeline.parsing.pages import quick_text
from atlas_pipeline.parsing.providers import ParserChoice
from atlas_pipeline.parsing.providers.local import LocalParser
from atlas_pipeline.store import layout
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import (
    ExtractionRecord,
    ParseRecord,
    SnapshotRecord,
    read_record,
    write_record,
)


def extract_document(
    store: Store,
    snapshot: SnapshotRecord,
    parse: ParseRecord,
    template: Template,
    rule: Rule,
    *,
    mode: str = "skip",
    llm: LLMClient | None = None,
    version: ExtractionVersion | None = None,
    second: LLMClient | None = None,
) -> ExtractionRecord:
    """Apply the rule to a parsed document: skip mode writes the JSON wrapper, llm mode extracts and grades every
    field against the document (``second``: a second, independent extractor whose answer is set beside the first,
    ``extraction.dual``). Document problems and LLM failures become statuses with reasons."""
    started = time.perf_counter()
    if version is None:  # the default parser's (a deployment passes its own: ``AtlasResource.extraction_version``)
        parser = ParserChoice(LocalParser()).describe()
        model, second_model = (llm.config.model if llm else ""), (second.config.model if second else "")
        version = extraction_version(template, rule, mode, model, parser, second_model)
    record = ExtractionRecord(
        key=snapshot.key,
        sha256=snapshot.sha256,
        status=DocumentStatus.DONE,
        reason="",
        mode=mode,
        rule=rule.name,
        template_code=template.code,
        template_version=template.version,
        template_hash=template.content_hash,
        extraction_version=version.tag,
        version_parts=version.parts,
        text_path=parse.text_path,
        tables_path=parse.tables_path,
        parser=parse.parser,
        extracted_at=now_iso(),
    )
    problem = parse.problem or snapshot.problem
    if problem:
        record.status, record.reason = DocumentStatus(problem.status), f"{problem.stage}: {problem.reason}"
        record.retryable, record.stopped_at = problem.retryable, problem.stage
    else:
        inputs = ExtractionInput(
            snapshot=snapshot,
            parse=parse,
            template=template,
            rule=rule,
            version=version,
            markdown=lambda: load_markdown(store, parse),
            tables=lambda: load_tables(store, parse),
        )
        output = mode_for(mode, llm, second).run(inputs, record)
        if output is not None:
            record.extraction_path = layout.extraction_output_path(snapshot.key)
            store.write_json(record.extraction_path, output)
    if parse.lost and not problem:
        record.reason += f"; not read: {'; '.join(parse.lost[:3])}" + (" …" if len(parse.lost) > 3 else "")
    record.seconds = round(time.perf_counter() - started, 4)
    record.processing_seconds = round(snapshot.seconds + parse.seconds + record.seconds, 4)
    keep_last_good(store, snapshot.key, record)  # a failed re-extraction never takes people's decisions away
    write_record(store, snapshot.key, "extraction", record)
    return record


def estimate_extractions(
    knowledge_base: KnowledgeBase,
    store: Store,
    entries: list[CatalogEntry],
    template: Template,
    rule: Rule,
    llm: LLMClient,
) -> RunEstimate:
    """What extracting ``entries`` would send and cost, nothing sent: a document parsed before is counted from its
    parse; one not parsed yet from its words read quickly (``parsing.pages.quick_text``; its tables then not
    counted)."""
    records = [read_record(store, entry.key, "extraction", ExtractionRecord) for entry in entries]
    known = [record for record in records if record is not None]
    answer_tokens, basis = answer_tokens_guess(template.asked_at_once(), known, llm.config.max_tokens)
    table = RunEstimate(llm.config.model, llm.currency, answer_tokens, basis)
    table.seconds_per_answer = seconds_per_answer(known)
    for entry in entries:
        parse = read_record(store, entry.key, "parse", ParseRecord)
        if entry.problem:
            continue  # never read, never sent
        if parse is not None and parse.sha256 == entry.sha256 and parse.problem is None:
            markdown, tables, note = load_markdown(store, parse), load_tables(store, parse), ""
            sources = PromptSources.of_parse(parse.provider)
        else:
            try:
                data = knowledge_base.read(entry.source_path)
            except SourceMissingError:
                continue
            try:
                media_type = detect_media_type(data, entry.source_path)
            except DocumentError:
                continue
            markdown, tables, sources = quick_text(data, media_type), [], None
            note = "not parsed yet: its words read quickly, tables not counted"
            if not markdown.strip():
                note = "not parsed yet and no text layer (a scan): counted after OCR"
        estimate = estimate_document(llm, template, rule, entry.key, markdown, tables, answer_tokens, store, sources)
        estimate.note = note
        table.documents.append(estimate)
    return table
