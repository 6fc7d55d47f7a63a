"""A scripted parsing provider speaking MinerU's and docling-serve's documented HTTP APIs, run as a child process.

``python -m scripted_servers.provider_server FOLDER PORT``. Its answers are made from the uploaded PDF with
PyMuPDF (page text blocks, ``find_tables`` tables), in each API's own shapes: MinerU's content list and result zip,
docling-serve's Docling document and markdown with the page-break placeholder asked for. ``FOLDER/control.json``
scripts behaviour per uploaded file name (the neutral name Atlas sends): ``{"fail": [name], "hang": [name],
"malformed": [name], "bomb": [name] (docling's result: a gzip body inflating to "inflated_mb", 50 by default),
"endless": [name] (docling's result: a chunked body that never ends), "transient": n (the next n requests get 503),
"polls": n (polls before a task is done),
"token": "...", "api_key": "..."}``. Every request is logged to ``FOLDER/requests.jsonl``.
"""

from __future__ import annotations

import email.parser
import email.policy
import html
import io
import json
import sys
import threading
import time
import uuid
import zipfile
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pymupdf

FOLDER = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
LOCK = threading.Lock()
TASKS: dict[str, dict] = {}  # id → {"name", "data", "polls", "kind"}
STATE = {"transient_used": 0}
VERSION = "2.5.4-scripted"


def control() -> dict:
    path = FOLDER / "control.json"
    return json.loads(path.read_text()) if path.exists() else {}


def behaviour(name: str) -> str:
    rules = control()
    for kind in ("fail", "hang", "malformed", "bomb", "endless"):
        if name in rules.get(kind, []):
            return kind
    return "ok"


def analyse(data: bytes) -> list[dict]:
    """A MinerU-style content list of the PDF: text blocks and tables, page by page."""
    items = []
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        for page in doc:
            found = page.find_tables().tables
            rects = [pymupdf.Rect(table.bbox) for table in found]
            blocks = [b for b in page.get_text("blocks") if b[6] == 0]
            captions = {}
            for table, rect in zip(found, rects, strict=True):
                above = [b for b in blocks if b[3] <= rect.y0 + 2 and b[4].strip().lower().startswith("table")]
                if above:
                    captions[id(table)] = " ".join(max(above, key=lambda b: b[3])[4].split())
            for block in blocks:
                if any(pymupdf.Rect(block[:4]).intersects(rect) for rect in rects):
                    continue
                text = " ".join(block[4].split())
                if text:
                    items.append({"type": "text", "text": text, "page_idx": page.number})
            for table in found:
                rows = table.extract()
                body = (
                    "<table>"
                    + "".join(
                        "<tr>"
                        + "".join(f"<td>{html.escape(' '.join(str(c or '').split()))}</td>" for c in row)
                        + "</tr>"
                        for row in rows
                    )
                    + "</table>"
                )
                caption = captions.get(id(table))
                items.append(
                    {
                        "type": "table",
                        "table_body": body,
                        "table_caption": [caption] if caption else [],
                        "table_footnote": [],
                        "rows": [[" ".join(str(c or "").split()) for c in row] for row in rows],
                        "page_idx": page.number,
                    }
                )
    return items


def markdown_of(items: list[dict], page_break: str = "") -> str:
    pages: dict[int, list[str]] = {}
    for item in items:
        part = item.get("text") or ""
        if item["type"] == "table":
            part = "\n".join("| " + " | ".join(row) + " |" for row in item["rows"])
        pages.setdefault(item["page_idx"], []).append(part)
    count = max(pages, default=0) + 1
    texts = ["\n\n".join(pages.get(n, [])) for n in range(count)]
    return (f"\n\n{page_break}\n\n" if page_break else "\n\n").join(texts)


def docling_document(items: list[dict]) -> dict:
    texts, tables = [], []
    for item in items:
        if item["type"] == "text":
            texts.append({"self_ref": f"#/texts/{len(texts)}", "label": "text", "text": item["text"]})
            continue
        captions = []
        if item["table_caption"]:
            texts.append({"self_ref": f"#/texts/{len(texts)}", "label": "caption", "text": item["table_caption"][0]})
            captions.append({"$ref": texts[-1]["self_ref"]})
        grid = [
            [{"text": cell, "column_header": number == 0} for cell in row] for number, row in enumerate(item["rows"])
        ]
        tables.append(
            {
                "self_ref": f"#/tables/{len(tables)}",
                "prov": [{"page_no": item["page_idx"] + 1}],
                "captions": captions,
                "data": {"num_rows": len(grid), "num_cols": max(map(len, grid), default=0), "grid": grid},
            }
        )
    pages = {str(n + 1): {"page_no": n + 1} for n in {item["page_idx"] for item in items}}
    return {"schema_name": "DoclingDocument", "version": "1.5.0", "texts": texts, "tables": tables, "pages": pages}


def strip_rows(items: list[dict]) -> list[dict]:
    return [{k: v for k, v in item.items() if k != "rows"} for item in items]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _log(self, extra: dict) -> None:
        entry = {
            "method": self.command,
            "path": urlsplit(self.path).path,
            "host": self.headers.get("Host", ""),
            "authorization": bool(self.headers.get("Authorization")),
            "api_key": bool(self.headers.get("X-Api-Key")),
            "at": time.time(),
            **extra,
        }
        with LOCK, (FOLDER / "requests.jsonl").open("a") as log:
            log.write(json.dumps(entry) + "\n")

    def _send(self, status: int, body: object, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _bomb(self, inflated_mb: int) -> None:
        """A small gzip body (no length said: chunked) that inflates to ``inflated_mb`` MB."""
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        data = packer.compress(b'{"document": {"md_content": "') + b"".join(
            packer.compress(b" " * 1_048_576) for _ in range(inflated_mb)
        )
        data += packer.flush()
        self._chunked([data], {"Content-Encoding": "gzip"})

    def _endless(self) -> None:
        self._chunked(iter(lambda: b" " * 65_536, None), {})

    def _chunked(self, pieces, headers: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for piece in pieces:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client cut it off
            self.close_connection = True

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _form(self, body: bytes) -> tuple[dict[str, list[str]], tuple[str, bytes] | None]:
        head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        fields: dict[str, list[str]] = {}
        upload = None
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            filename = part.get_filename()
            payload = part.get_payload(decode=True)
            if filename:
                upload = (filename, payload)
            else:
                fields.setdefault(name, []).append(payload.decode())
        return fields, upload

    def _transient(self) -> bool:
        with LOCK:
            if STATE["transient_used"] < int(control().get("transient", 0)):
                STATE["transient_used"] += 1
                return True
        return False

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self._log({})
        if path == "/ready":
            return self._send(200, {"ok": True})
        if path == "/health":
            return self._send(200, {"status": "ok", "version": VERSION})
        if self._transient():
            return self._send(503, {"error": "Server is at maximum capacity: 1. Please try again later."})
        if path.startswith("/api/v4/extract-results/batch/"):
            return self._mineru_poll(path.rsplit("/", 1)[-1])
        if path.startswith("/zips/"):
            return self._mineru_zip(path.rsplit("/", 1)[-1].removesuffix(".zip"))
        if path.startswith("/v1/status/poll/"):
            return self._docling_poll(path.rsplit("/", 1)[-1])
        if path.startswith("/v1/result/"):
            return self._docling_result(path.rsplit("/", 1)[-1])
        return self._send(404, {"detail": "Not Found"})

    def do_PUT(self) -> None:
        body = self._body()
        path = urlsplit(self.path).path
        self._log({"size": len(body)})
        if path.startswith("/upload/"):
            task_id = path.split("/")[2]
            with LOCK:
                if task_id in TASKS:
                    TASKS[task_id]["data"] = body
            return self._send(200, b"", "text/plain")
        return self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = self._body()
        path = urlsplit(self.path).path
        if path == "/api/v4/file-urls/batch":
            request = json.loads(body or b"{}")
            self._log({"json": request})
            if self._transient():
                return self._send(503, {"msg": "busy"})
            token = control().get("token")
            if token and self.headers.get("Authorization") != f"Bearer {token}":
                return self._send(200, {"code": "A0202", "msg": "token error: the token is invalid or expired"})
            name = request["files"][0]["name"]
            task_id = uuid.uuid4().hex
            with LOCK:
                TASKS[task_id] = {"name": name, "data": None, "polls": 0}
            upload = f"http://localhost:{self.server.server_port}/upload/{task_id}/{name}"
            return self._send(200, {"code": 0, "msg": "ok", "data": {"batch_id": task_id, "file_urls": [upload]}})
        fields, upload = self._form(body) if body else ({}, None)
        self._log({"fields": fields, "file": upload[0] if upload else None, "size": len(upload[1]) if upload else 0})
        if self._transient():
            return self._send(503, {"error": "Server is at maximum capacity: 1. Please try again later."})
        if path == "/file_parse":
            return self._mineru_local(upload)
        if path == "/v1/convert/file/async":
            key = control().get("api_key")
            if key and self.headers.get("X-Api-Key") != key:
                return self._send(401, {"detail": "Invalid API key"})
            task_id = uuid.uuid4().hex
            with LOCK:
                TASKS[task_id] = {"name": upload[0], "data": upload[1], "polls": 0}
            return self._send(200, {"task_id": task_id, "task_type": "convert", "task_status": "pending"})
        return self._send(404, {"detail": "Not Found"})

    def _mineru_local(self, upload: tuple[str, bytes] | None) -> None:
        name, data = upload
        kind = behaviour(name)
        if kind == "fail":
            return self._send(500, {"error": "Failed to process file: scripted failure (the PDF could not be read)"})
        if kind == "hang":
            time.sleep(float(control().get("hang_seconds", 30)))
        stem = name.rsplit(".", 1)[0]
        if kind == "malformed":
            return self._send(200, {"backend": "pipeline", "version": VERSION, "results": {stem: {"md_content": None}}})
        items = analyse(data)
        result = {"md_content": markdown_of(items), "content_list": json.dumps(strip_rows(items))}
        return self._send(200, {"backend": "pipeline", "version": VERSION, "results": {stem: result}})

    def _poll(self, task_id: str) -> tuple[dict | None, str]:
        with LOCK:
            task = TASKS.get(task_id)
            if task is None:
                return None, "missing"
            task["polls"] += 1
            polls = task["polls"]
        kind = behaviour(task["name"])
        if kind == "hang" or polls <= int(control().get("polls", 1)):
            return task, "running"
        return task, "failed" if kind == "fail" else "done"

    def _mineru_poll(self, task_id: str) -> None:
        task, state = self._poll(task_id)
        if task is None:
            return self._send(200, {"code": -60012, "msg": "task not found"})
        entry = {"file_name": task["name"], "state": state, "err_msg": ""}
        if state == "running":
            entry["extract_progress"] = {"extracted_pages": 1, "total_pages": 9}
        if state == "failed":
            entry["err_msg"] = "scripted failure: the file could not be parsed"
        if state == "done":
            entry["full_zip_url"] = f"http://localhost:{self.server.server_port}/zips/{task_id}.zip"
        return self._send(200, {"code": 0, "msg": "ok", "data": {"batch_id": task_id, "extract_result": [entry]}})

    def _mineru_zip(self, task_id: str) -> None:
        task = TASKS.get(task_id)
        if task is None:
            return self._send(404, {"detail": "Not Found"})
        if behaviour(task["name"]) == "malformed":
            return self._send(200, b"this is not a zip file", "application/zip")
        items = analyse(task["data"])
        stem = task["name"].rsplit(".", 1)[0]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as bundle:
            bundle.writestr(f"{stem}/full.md", markdown_of(items))
            bundle.writestr(f"{stem}/{stem}_content_list.json", json.dumps(strip_rows(items)))
            bundle.writestr(f"{stem}/layout.json", "{}")
        return self._send(200, buffer.getvalue(), "application/zip")

    def _docling_poll(self, task_id: str) -> None:
        task, state = self._poll(task_id)
        if task is None:
            return self._send(404, {"detail": "Task not found."})
        status = {"running": "started", "failed": "failure", "done": "success"}[state]
        return self._send(200, {"task_id": task_id, "task_type": "convert", "task_status": status})

    def _docling_result(self, task_id: str) -> None:
        task = TASKS.get(task_id)
        if task is None:
            return self._send(404, {"detail": "Task result not found."})
        if behaviour(task["name"]) == "malformed":
            document = {"md_content": "", "json_content": None}
            return self._send(200, {"document": document, "status": "success", "errors": []})
        if behaviour(task["name"]) == "bomb":
            return self._bomb(int(control().get("inflated_mb", 50)))
        if behaviour(task["name"]) == "endless":
            return self._endless()
        items = analyse(task["data"])
        document = {
            "filename": task["name"],
            "md_content": markdown_of(items, page_break="<!-- atlas:page-break -->"),
            "json_content": docling_document(items),
        }
        answer = {"document": document, "status": "success", "errors": [], "processing_time": 0.5, "timings": {}}
        return self._send(200, answer)


def main() -> None:
    port = int(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
