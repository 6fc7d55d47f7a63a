"""A small web site for the collector tests, run as a child process on 127.0.0.1: an RSS feed whose items appear
over time, the documents they link to, robots.txt, and misbehaving paths — all read from a folder the test writes
while it runs, so a test changes the site without restarting it.

The folder holds::

    items.json     [{"id": "a", "title": "…", "file": "a.pdf", "after": 0.0, "path": "/docs/a.pdf"}, …]
                   an item is in the feed once ``after`` seconds have passed since the server started
    docs/<file>    the documents (``path`` defaults to /docs/<file>)
    robots.txt     served when present (404 otherwise)
    control.json   {"fail": ["/path", …], "slow": {"/path": seconds}, "atom": false,
                    "redirect": {"/path": "location"}, "trickle": {"/path": seconds between two bytes}}
    requests.jsonl written by the server: one line per request (path, status, User-Agent, conditional headers)

Usage: ``python -m scripted_servers.feed_server FOLDER PORT``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

STARTED = time.time()


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


class Site(BaseHTTPRequestHandler):
    folder: Path
    base: str

    def log_message(self, *args) -> None:  # requests.jsonl instead
        pass

    def _log(self, status: int) -> None:
        line = {
            "path": self.path,
            "status": status,
            "user_agent": self.headers.get("User-Agent", ""),
            "if_none_match": self.headers.get("If-None-Match", ""),
            "if_modified_since": self.headers.get("If-Modified-Since", ""),
            "at": time.time(),
        }
        with open(self.folder / "requests.jsonl", "a") as log:
            log.write(json.dumps(line) + "\n")

    def _send(self, status: int, body: bytes = b"", content_type: str = "text/plain", headers: dict | None = None):
        self._log(status)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _trickle(self, data: bytes, content_type: str, pause: float) -> None:
        self._log(200)
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            for byte in data:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(pause)
        except (BrokenPipeError, ConnectionResetError):
            return

    def _feed(self) -> bytes:
        items = [
            item for item in _read_json(self.folder / "items.json", []) if time.time() - STARTED >= item.get("after", 0)
        ]
        entries = "".join(
            f"<item><guid>{escape(item['id'])}</guid><title>{escape(item.get('title', item['id']))}</title>"
            f"<link>{self.base}{escape(item.get('path', '/docs/' + item['file']))}</link></item>"
            for item in items
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Trials</title>'
            f"<link>{self.base}/</link><description>new trial reports</description>{entries}</channel></rss>"
        ).encode()

    def do_GET(self) -> None:
        if self.path == "/ready":  # the test's start-up probe, not logged
            self.send_response(204)
            self.end_headers()
            return
        control = _read_json(self.folder / "control.json", {})
        path = self.path.split("?")[0]
        if path in control.get("slow", {}):
            time.sleep(float(control["slow"][path]))
        if path in control.get("fail", []):
            return self._send(503, b"unavailable")
        if path in control.get("redirect", {}):
            return self._send(302, b"moved", headers={"Location": control["redirect"][path]})
        if path == "/robots.txt":
            robots = self.folder / "robots.txt"
            return self._send(200, robots.read_bytes()) if robots.exists() else self._send(404, b"no robots")
        if path == "/feed.xml":
            body = self._feed()
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            if self.headers.get("If-None-Match") == etag:
                return self._send(304, headers={"ETag": etag})
            if path in control.get("trickle", {}):
                return self._trickle(body, "application/rss+xml", float(control["trickle"][path]))
            return self._send(
                200, body, "application/rss+xml", {"ETag": etag, "Last-Modified": formatdate(usegmt=True)}
            )
        for item in _read_json(self.folder / "items.json", []):
            if path == item.get("path", "/docs/" + item["file"]):
                data = (self.folder / "docs" / item["file"]).read_bytes()
                kind = "application/pdf" if item["file"].endswith(".pdf") else "application/xml"
                if path in control.get("trickle", {}):  # headers at once, then a byte now and then
                    return self._trickle(data, kind, float(control["trickle"][path]))
                return self._send(200, data, kind)
        return self._send(404, b"not found")


def main() -> None:
    folder, port = Path(sys.argv[1]), int(sys.argv[2])
    Site.folder = folder
    Site.base = f"http://127.0.0.1:{port}"
    ThreadingHTTPServer(("127.0.0.1", port), Site).serve_forever()


if __name__ == "__main__":
    main()
