"""MinerU (opendatalab/MinerU), through its own HTTP APIs.

- ``local``: the ``mineru-api`` server — ``POST /file_parse`` (multipart ``files`` plus form options) answers
  ``{"backend", "version", "results": {<stem>: {"md_content", "content_list"}}}`` when the parse is done;
  ``GET /health`` gives its version.
- ``hosted``: mineru.net's v4 API with a bearer token — ``POST /api/v4/file-urls/batch`` gives a ``batch_id`` and a
  presigned upload URL, the bytes are PUT there (the task starts), ``GET /api/v4/extract-results/batch/<id>`` is
  polled until the file's ``state`` is ``done`` (or ``failed`` with ``err_msg``), then the result zip at
  ``full_zip_url`` holds ``full.md`` and ``<name>_content_list.json``.

The content list (one item per block with its ``page_idx``) becomes the markdown, with the page markers every parse
has, and the tables (``table_body`` is HTML); ``md_content`` alone is used when no content list comes back.
"""

from __future__ import annotations

import io
import json
import time
import zipfile
from typing import Any

from bs4 import BeautifulSoup

from atlas_pipeline.parsing.model import ParsedDocument, Table
from atlas_pipeline.parsing.pages import PAGE_MARKER
from atlas_pipeline.parsing.providers.base import ParsingProvider, ProviderError, ProviderLimits, neutral_name
from atlas_pipeline.parsing.providers.http import Deadline, ProviderHTTP, expect
from atlas_pipeline.parsing.tables import table_from_element

MAX_UNZIPPED_BYTES = 2_000_000_000
MAX_PAGES = 100_000
RUNNING_STATES = ("waiting-file", "pending", "running", "converting")


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        return [str(item) for item in value if str(item).strip()]
    return []


def _markdown_table(table: Table) -> str:
    """A table as markdown rows in the text (the HTML goes to the tables), as the other parsers put them."""
    rows = [line.split(" | ") for line in table.text.splitlines()]
    if not rows:
        return ""
    width = max(len(row) for row in rows)
    lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows]
    lines.insert(1, "|" + "---|" * width)
    return "\n".join(lines)


def content_list_document(items: Any, engine: str) -> tuple[str, list[Table], int]:
    """MinerU's content list → (markdown with page markers, tables, page count)."""
    expect(isinstance(items, list), "mineru", "the content list is not a list")
    parts: list[str] = []
    tables: list[Table] = []
    page = 0
    for item in items:
        expect(isinstance(item, dict), "mineru", "a content-list item is not an object")
        page_idx = item.get("page_idx") or 0
        expect(isinstance(page_idx, int) and 0 <= page_idx < MAX_PAGES, "mineru", f"bad page_idx {page_idx!r}")
        number = page_idx + 1
        while page < number:  # every page gets its marker, also one with nothing on it
            page += 1
            parts.append(PAGE_MARKER.format(number=page))
        kind = item.get("type")
        if kind == "table":
            caption = " ".join(_texts(item.get("table_caption")))
            body = item.get("table_body") or ""
            element = BeautifulSoup(body, "html.parser").find("table") if isinstance(body, str) and body else None
            if caption:
                parts.append(caption)
            if element is not None:
                table = table_from_element(element, index=len(tables), caption=caption)
                table = table.model_copy(update={"page": number})
                tables.append(table)
                parts.append(_markdown_table(table))
            parts.extend(_texts(item.get("table_footnote")))
        elif kind == "image":
            parts.extend(_texts(item.get("image_caption")) + _texts(item.get("image_footnote")))
        elif kind == "list":
            parts.append("\n".join(f"- {text}" for text in _texts(item.get("list_items"))))
        elif kind in ("header", "footer", "page_number", "aside_text", "discarded"):
            continue  # running heads and page numbers: not the document's text
        else:  # text, title, equation, code, ref_text, page_footnote …
            text = str(item.get("text") or item.get("code_body") or "").strip()
            level = item.get("text_level")
            if text:
                parts.append(f"{'#' * min(int(level), 6)} {text}" if isinstance(level, int) and level > 0 else text)
    return "\n\n".join(part for part in parts if part) + "\n", tables, page


def markdown_document(markdown: str) -> tuple[str, list[Table]]:
    """``md_content`` alone: its HTML tables become the tables."""
    soup = BeautifulSoup(markdown, "html.parser")
    tables = [table_from_element(element, index=n) for n, element in enumerate(soup.find_all("table"))]
    return markdown, tables


def to_document(content_list: Any, md_content: Any, engine: str, task_id: str, version: str) -> ParsedDocument:
    if isinstance(content_list, str) and content_list.strip():
        try:
            content_list = json.loads(content_list)
        except json.JSONDecodeError as error:
            raise ProviderError(f"mineru: malformed result: the content list is not JSON ({error})") from None
    if content_list:
        markdown, tables, pages = content_list_document(content_list, engine)
    elif isinstance(md_content, str) and md_content.strip():
        (markdown, tables), pages = markdown_document(md_content), 0
    else:
        raise ProviderError("mineru: malformed result: neither a content list nor markdown came back")
    if not markdown.replace("<!-- page", "").strip() and not tables:
        raise ProviderError("mineru: no text in the result (an empty document, or a scan MinerU could not read)")
    return ParsedDocument(
        media_type="",
        markdown=markdown,
        tables=tables,
        page_count=pages,
        engine=engine,
        provider="mineru",
        provider_task_id=task_id,
        provider_version=version,
    )


class MinerULocal(ParsingProvider):
    """MinerU's own ``mineru-api`` server (``ATLAS_MINERU_API=local``)."""

    name = "mineru"

    def __init__(self, url: str, backend: str, language: str, limits: ProviderLimits, version_label: str = ""):
        super().__init__(version_label)
        self.url, self.backend, self.language, self.limits = url, backend, language, limits

    def options(self) -> dict[str, Any]:
        return {"api": "local", "backend": self.backend, "language": self.language}

    def form(self) -> dict[str, Any]:
        """Exactly the form fields sent beside the file."""
        return {
            "backend": self.backend,
            "lang_list": [self.language],
            "parse_method": "auto",
            "formula_enable": "true",
            "table_enable": "true",
            "return_md": "true",
            "return_content_list": "true",
            "return_middle_json": "false",
            "return_model_output": "false",
            "return_images": "false",
            "response_format_zip": "false",
        }

    def parse(self, data: bytes, filename: str, media_type: str) -> ParsedDocument:
        name = neutral_name(data, media_type)
        deadline = Deadline(self.limits.max_seconds)
        http = ProviderHTTP("mineru", self.url, self.limits)
        started = time.perf_counter()
        try:
            answer = http.json(
                "POST",
                "/file_parse",
                deadline,
                "parse",
                synchronous=True,
                files={"files": (name, data, media_type)},
                data=self.form(),
            )
        finally:
            http.close()
        expect(isinstance(answer, dict) and isinstance(answer.get("results"), dict), "mineru", "no 'results' object")
        results = answer["results"]
        result = results.get(name.rsplit(".", 1)[0]) or (next(iter(results.values())) if len(results) == 1 else None)
        expect(isinstance(result, dict), "mineru", f"no result for the document (results for: {list(results)[:3]})")
        version = str(answer.get("version") or "")
        engine = f"mineru {version or '?'} ({answer.get('backend') or self.backend}, local API)"
        parsed = to_document(result.get("content_list"), result.get("md_content"), engine, "", version)
        parsed.timings = {"provider_seconds": round(time.perf_counter() - started, 3)}
        return parsed


class MinerUHosted(ParsingProvider):
    """mineru.net's task API (``ATLAS_MINERU_API=hosted``, ``ATLAS_MINERU_TOKEN``)."""

    name = "mineru"

    def __init__(
        self, url: str, token: str, backend: str, language: str, limits: ProviderLimits, version_label: str = ""
    ):
        super().__init__(version_label)
        self.url, self.token, self.backend, self.language, self.limits = url, token, backend, language, limits

    def options(self) -> dict[str, Any]:
        return {"api": "hosted", "backend": self.backend, "language": self.language}

    def batch_request(self, name: str) -> dict[str, Any]:
        """Exactly the JSON sent to ask for an upload URL (the task's options)."""
        return {
            "files": [{"name": name, "data_id": name.rsplit(".", 1)[0]}],
            "model_version": self.backend,
            "language": self.language,
            "enable_table": True,
            "enable_formula": True,
        }

    def _data(self, answer: Any, what: str) -> dict[str, Any]:
        expect(isinstance(answer, dict), "mineru", f"{what} answered something that is not an object")
        if answer.get("code") not in (0, "0", None):
            raise ProviderError(f"mineru: {what} refused: {answer.get('msg') or 'code ' + str(answer.get('code'))}")
        data = answer.get("data")
        expect(isinstance(data, dict), "mineru", f"{what} answered no 'data' object")
        return data

    def parse(self, data: bytes, filename: str, media_type: str) -> ParsedDocument:
        name = neutral_name(data, media_type)
        deadline = Deadline(self.limits.max_seconds)
        http = ProviderHTTP("mineru", self.url, self.limits, headers={"Authorization": f"Bearer {self.token}"})
        started = time.perf_counter()
        try:
            submitted = self._data(
                http.json(
                    "POST",
                    "/api/v4/file-urls/batch",
                    deadline,
                    "submit",
                    starts_work=True,
                    json=self.batch_request(name),
                ),
                "submit",
            )
            batch_id, urls = submitted.get("batch_id"), submitted.get("file_urls")
            expect(
                isinstance(batch_id, str) and bool(batch_id) and isinstance(urls, list) and len(urls) == 1,
                "mineru",
                "no batch_id / upload URL",
            )
            expect(isinstance(urls[0], str) and urls[0].startswith(("http://", "https://")), "mineru", "bad upload URL")
            http.request("PUT", urls[0], deadline, "upload", content=data)
            uploaded = time.perf_counter()
            state, entry = "pending", {}
            while True:
                result = self._data(
                    http.json("GET", f"/api/v4/extract-results/batch/{batch_id}", deadline, "poll"), "poll"
                )
                entries = result.get("extract_result") or []
                expect(isinstance(entries, list), "mineru", "'extract_result' is not a list")
                entry = next((e for e in entries if isinstance(e, dict) and e.get("file_name") == name), {})
                entry = entry or (entries[0] if len(entries) == 1 and isinstance(entries[0], dict) else {})
                state = str(entry.get("state") or "pending")
                if state == "done":
                    break
                if state == "failed":
                    raise ProviderError(f"mineru: task {batch_id} failed: {entry.get('err_msg') or 'no message'}")
                expect(state in RUNNING_STATES, "mineru", f"unknown task state {state!r}")
                deadline.wait_to_poll(self.limits, f"mineru: task {batch_id}", f"state: {state}")
            parsed_at = time.perf_counter()
            zip_url = entry.get("full_zip_url")
            expect(isinstance(zip_url, str) and bool(zip_url), "mineru", "a done task without 'full_zip_url'")
            archive = http.request("GET", zip_url, deadline, "download").content
        finally:
            http.close()
        md_content, content_list = read_result_zip(archive)
        engine = f"mineru ({self.backend}, hosted API)"
        parsed = to_document(content_list, md_content, engine, str(batch_id), "")
        parsed.timings = {
            "upload_seconds": round(uploaded - started, 3),
            "queue_and_parse_seconds": round(parsed_at - uploaded, 3),
            "provider_seconds": round(time.perf_counter() - started, 3),
        }
        return parsed


def read_result_zip(archive: bytes) -> tuple[str, Any]:
    """``full.md`` and the content list from MinerU's result zip (bounded: a zip bomb is refused)."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as bundle:
            members = bundle.infolist()
            if sum(member.file_size for member in members) > MAX_UNZIPPED_BYTES:
                raise ProviderError("mineru: malformed result: the result zip unpacks to more than 2 GB")
            names = [member.filename for member in members]
            markdown = next((n for n in names if n.rsplit("/", 1)[-1] == "full.md"), None)
            listing = next((n for n in names if n.endswith("content_list.json")), None)
            md = bundle.read(markdown).decode("utf-8", "replace") if markdown else ""
            content = bundle.read(listing).decode("utf-8", "replace") if listing else ""
    except zipfile.BadZipFile:
        raise ProviderError("mineru: malformed result: the result is not a zip file") from None
    if not md and not content:
        raise ProviderError("mineru: malformed result: the result zip has neither full.md nor a content list")
    return md, content
