"""A scripted HTTP server speaking the OpenAI chat-completions API, for tests (run as a child process).

``POST /v1/chat/completions`` answers with the next scripted step, or the default step when the script is used up:
``{"status": 200, "content": "..."}`` a completion; ``{"status": 429|500|401|400, "message": "..."}`` an API error;
``{"delay": 3}`` waits first (timeouts); ``{"when": "part 2 of"}`` answers only a request that says so;
``{"drop": true}`` closes the connection without an answer; ``{"trickle": 2}`` sends the answer a byte every 2 s;
``{"trickle_headers": 0.3}`` sends its headers a byte every 0.3 s, without end;
``{"endless": true}`` streams a body that never ends (chunked, 64 KiB at a time, until the client goes away);
``{"encode": "gzip"|"deflate"|"raw-deflate"|"br"}`` sends the answer compressed so (``Content-Encoding``);
``{"bomb": "gzip"|"deflate", "inflated_mb": N}`` sends a small compressed body that inflates to N MB (a JSON brace
and blanks);
``{"answer": {...}}`` answers like a model that knows the whole answer: only the fields the request's schema asks
for, and for a group's page request ("at most N in this answer", "Entries already given (K)") entries K+1…K+N.
``"max_tokens": true`` on a step makes the server honour the request's ``max_tokens`` as a real one does: a longer
answer (characters ÷ 4) is cut there with ``finish_reason: "length"``.
``POST /_script`` sets ``{"steps": [...], "default": {...}}`` and forgets earlier requests, files and batches;
with ``"capacity": N`` a request arriving while N are being answered gets a 429 with ``Retry-After:
<"retry_after", default 1>`` (a rate-limited endpoint). ``GET /_requests`` returns the request bodies received since
(``_received``: the time, and ``_refused`` for a capacity 429); ``GET /_stats`` how many were in flight at most and
now.

The Batch API as OpenAI documents it: ``POST /v1/files`` (multipart, purpose ``batch``), ``POST /v1/batches``,
``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``,
``GET /v1/files/{id}/content``. A batch stays ``in_progress`` until the test says
``POST /_batches {"action": "complete"}`` (every request answered by the script, in the output file, or in the error
file when its step is an error), ``{"action": "expire", "answered": N}`` (the first N answered, the rest
``batch_expired``) or ``{"action": "fail"}`` (the input file refused). ``GET /_batches`` lists them.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import itertools
import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"steps": [], "default": {"status": 500, "message": "no script"}, "requests": [], "capacity": 0}
FILES: dict[str, bytes] = {}
BATCHES: dict[str, dict] = {}
FLIGHT = {"now": 0, "most": 0}
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # keep test output clean
        return

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        batch = re.fullmatch(r"/v1/batches/([\w-]+)", self.path)
        content = re.fullmatch(r"/v1/files/([\w-]+)/content", self.path)
        if batch:
            with LOCK:
                found = BATCHES.get(batch.group(1))
                self._send(200, found) if found else self._send(404, {"error": {"message": "no such batch"}})
        elif content:
            with LOCK:
                data = FILES.get(content.group(1))
            if data is None:
                self._send(404, {"error": {"message": "no such file"}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif self.path == "/_batches":
            with LOCK:
                self._send(200, {"batches": list(BATCHES.values())})
        elif self.path == "/_requests":
            with LOCK:
                self._send(200, {"requests": STATE["requests"]})
        elif self.path == "/_stats":
            with LOCK:
                self._send(200, {"in_flight_max": FLIGHT["most"], "in_flight": FLIGHT["now"]})
        else:
            self._send(200, {"ok": True})

    def do_POST(self) -> None:
        if self.path.endswith("/v1/files"):
            self._upload()
            return
        body = self._body()
        if self.path.endswith("/v1/batches"):
            self._create_batch(body)
            return
        if self.path.startswith("/v1/batches/") and self.path.endswith("/cancel"):
            with LOCK:
                batch = BATCHES.get(self.path.split("/")[3])
                if batch is not None:
                    batch["status"] = "cancelled"
            self._send(200 if batch else 404, batch or {"error": {"message": "no such batch", "type": "not_found"}})
            return
        if self.path == "/_batches":
            with LOCK:
                for batch in BATCHES.values():
                    if batch["status"] == "in_progress":
                        _end_batch(batch, body)
            self._send(200, {"ok": True})
            return
        if self.path == "/_script":
            with LOCK:
                STATE["steps"] = list(body.get("steps", []))
                STATE["default"] = body.get("default", STATE["default"])
                STATE["requests"] = []
                FILES.clear()
                BATCHES.clear()
                STATE["capacity"] = int(body.get("capacity") or 0)
                STATE["retry_after"] = str(body.get("retry_after", 1))
                FLIGHT["most"] = FLIGHT["now"]
            self._send(200, {"ok": True})
            return
        if not self.path.endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        with LOCK:
            seen = {**body, "_authorization": self.headers.get("Authorization", ""), "_received": time.time()}
            STATE["requests"].append(seen)
            if STATE["capacity"] and FLIGHT["now"] >= STATE["capacity"]:
                seen["_refused"] = True
                step = {"status": 429, "message": "rate limited", "headers": {"Retry-After": STATE["retry_after"]}}
            else:
                step = _next_step(body)
                FLIGHT["now"] += 1
                FLIGHT["most"] = max(FLIGHT["most"], FLIGHT["now"])
        try:
            seen["_sent"] = self._answer(body, step)
        finally:
            if not seen.get("_refused"):
                with LOCK:
                    FLIGHT["now"] -= 1

    def _upload(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + raw
        )
        parts = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        data = parts["file"].get_payload(decode=True)
        with LOCK:
            file_id = f"file-{len(FILES) + 1}"
            FILES[file_id] = data
        purpose = parts["purpose"].get_payload(decode=True).decode() if "purpose" in parts else ""
        self._send(
            200,
            {
                "id": file_id,
                "object": "file",
                "bytes": len(data),
                "created_at": int(time.time()),
                "filename": parts["file"].get_filename() or "upload.jsonl",
                "purpose": purpose,
                "status": "processed",
            },
        )

    def _create_batch(self, body: dict) -> None:
        with LOCK:
            if body.get("input_file_id") not in FILES:
                self._send(400, {"error": {"message": "no such input file", "type": "invalid_request_error"}})
                return
            total = len(FILES[body["input_file_id"]].splitlines())
            batch = {
                "id": f"batch_{len(BATCHES) + 1}",
                "object": "batch",
                "endpoint": body.get("endpoint"),
                "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window"),
                "status": "in_progress",
                "created_at": int(time.time()),
                "output_file_id": None,
                "error_file_id": None,
                "errors": None,
                "request_counts": {"total": total, "completed": 0, "failed": 0},
            }
            BATCHES[batch["id"]] = batch
        self._send(200, batch)

    def _answer(self, body: dict, step: dict) -> int | None:
        """Answer with the step; a trickled or endless body returns how many bytes went out before the client left."""
        if step.get("delay"):
            time.sleep(float(step["delay"]))
        if step.get("drop"):
            self.close_connection = True
            self.connection.close()
            return
        if step.get("endless"):
            return self._endless()
        if step.get("trickle_headers"):
            return self._trickle_headers(float(step["trickle_headers"]))
        if step.get("bomb"):
            return self._compressed(_bomb(str(step["bomb"]), int(step.get("inflated_mb", 1024))), str(step["bomb"]))
        status, payload = _completion(body, step)
        if step.get("encode"):
            coding = str(step["encode"])
            return self._compressed(_compress(json.dumps(payload).encode(), coding), coding.removeprefix("raw-"))
        if step.get("trickle"):
            return self._trickle(json.dumps(payload).encode(), float(step["trickle"]))
        self._send(status, payload, step.get("headers") if status != 200 else None)
        return None

    def _compressed(self, data: bytes, coding: str) -> int:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", coding)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:  # the client cut it off
            self.close_connection = True
        return len(data)

    def _trickle(self, payload: bytes, every: float) -> int:
        """Headers at once, then the body a byte at a time (each read well within any read timeout)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        return self._drip((payload[index : index + 1] for index in range(len(payload))), every)

    def _trickle_headers(self, every: float) -> int:
        """A status line, then one header's value a byte at a time, never ending."""
        self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        return self._drip(itertools.repeat(b"a"), every)

    def _drip(self, pieces, every: float) -> int:
        """Each piece sent on its own, ``every`` seconds apart; how many went out before the client left."""
        sent = 0
        try:
            for piece in pieces:
                self.wfile.write(piece)
                self.wfile.flush()
                sent += len(piece)
                time.sleep(every)
        except OSError:  # the client cut it off
            self.close_connection = True
        return sent

    def _endless(self) -> int:
        """A JSON body that never ends: an opening brace, then whitespace for ever."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunk, sent = b"{" + b" " * 65_535, 0
        try:
            while True:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                chunk = b" " * 65_536
        except OSError:  # the client cut it off
            self.close_connection = True
        return sent


def _compress(data: bytes, coding: str) -> bytes:
    """``data`` as a server sends it under ``Content-Encoding: coding`` (raw-deflate: deflate without its wrapper)."""
    if coding == "br":
        return b"\x0b\x02\x80" + data  # not real brotli: a client that asked only for gzip and deflate refuses it
    wbits = {"gzip": 31, "deflate": 15, "raw-deflate": -15}[coding]
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


def _bomb(coding: str, inflated_mb: int) -> bytes:
    """A few hundred kilobytes that inflate to ``inflated_mb`` MB: ``{`` and blanks."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31 if coding == "gzip" else 15)
    blanks = b" " * 1_048_576
    parts = [packer.compress(b"{")] + [packer.compress(blanks) for _ in range(inflated_mb)]
    return b"".join(parts) + packer.flush()


def _completion(body: dict, step: dict) -> tuple[int, dict]:
    """The status and body answering a chat-completions request with a scripted step."""
    status = int(step.get("status", 200))
    if status != 200:
        return status, {
            "error": {"message": step.get("message", f"scripted {status}"), "type": "scripted", "code": status}
        }
    content = step.get("content", "")
    if "answer" in step:
        content = json.dumps(_asked_for(step["answer"], body))
    finish = "stop"
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if step.get("max_tokens") and limit and len(content) // 4 > int(limit):
        content, finish = content[: int(limit) * 4], "length"
    prompt_chars = sum(len(m.get("content") or "") for m in body.get("messages", []))
    return 200, {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": len(content) // 4,
            "total_tokens": prompt_chars // 4 + len(content) // 4,
        },
    }


def _end_batch(batch: dict, control: dict) -> None:
    """End a batch as the test says: answered (output and error files), expired after N answers, or failed."""
    if control.get("action") == "fail":
        batch["status"] = "failed"
        batch["errors"] = {"object": "list", "data": [{"code": "invalid_file", "message": "the input file is invalid"}]}
        return
    lines = [json.loads(line) for line in FILES[batch["input_file_id"]].splitlines() if line.strip()]
    answered = len(lines) if control.get("action") != "expire" else int(control.get("answered", 0))
    output, errors = [], []
    for number, line in enumerate(lines):
        record = {"id": f"batch_req_{number}", "custom_id": line["custom_id"], "response": None, "error": None}
        if number >= answered:
            record["error"] = {"code": "batch_expired", "message": "not executed before the window expired"}
            errors.append(record)
            continue
        STATE["requests"].append({**line["body"], "_batch": batch["id"], "_received": time.time()})
        status, payload = _completion(line["body"], _next_step(line["body"]))
        record["response"] = {"status_code": status, "request_id": f"req_{number}", "body": payload}
        (output if status == 200 else errors).append(record)
    for kind, records in (("output_file_id", output), ("error_file_id", errors)):
        if records:
            file_id = f"file-{len(FILES) + 1}"
            FILES[file_id] = "\n".join(json.dumps(record) for record in records).encode()
            batch[kind] = file_id
    batch["status"] = "expired" if control.get("action") == "expire" else "completed"
    batch["request_counts"] = {"total": len(lines), "completed": len(output), "failed": len(errors)}


def _next_step(body: dict) -> dict:
    """The first scripted step meant for this request (a step with ``"when": "…"`` answers only a request whose
    messages contain that text — chunks asked at the same time arrive in any order), else the default."""
    text = "\n".join(str(message.get("content") or "") for message in body.get("messages", []))
    for index, step in enumerate(STATE["steps"]):
        if "when" not in step or step["when"] in text:
            return STATE["steps"].pop(index)
    return STATE["default"]


def _asked_for(answer: dict, body: dict) -> dict:
    """The part of a whole answer that a request asks for: the fields of its schema, and a page of a group."""
    form = body.get("response_format") or {}
    schema = (form.get("json_schema") or {}).get("schema") or form.get("schema") or {}
    wanted = schema.get("properties") or answer
    asked = {name: value for name, value in answer.items() if name in wanted}
    prompt = (body.get("messages") or [{}])[-1].get("content") or ""
    page = re.search(r"at most (\d+) in this answer", prompt)
    if page:
        given = re.search(r"Entries already given \((\d+)\)", prompt)
        start = int(given.group(1)) if given else 0
        for name, value in asked.items():
            if isinstance(value, list):
                asked[name] = value[start : start + int(page.group(1))]
    return asked


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    ThreadingHTTPServer.request_queue_size = 128  # many senders at once (the concurrency benchmark)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
