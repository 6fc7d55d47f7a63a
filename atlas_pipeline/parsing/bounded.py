"""Parsing with a time and a memory limit per document: one hostile file must not hang or starve a run.

MuPDF cannot be interrupted from Python (a PDF with one huge page of tiny text keeps it busy for hours, and SIGTERM
waits for it), so documents are parsed in a child process that the parent can kill: when a parse runs past
``seconds`` or the child's resident memory passes ``memory_mb``, the child is killed and the document fails with
"exceeded the time limit (N s)" / "exceeded the memory limit (N MB)"; the next document gets a fresh child. The child
is a fresh interpreter (nothing inherited from a parent with threads), started once and reused while it behaves, so
the layout model loads once per process, not once per document; it dies with its parent.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from atlas_pipeline.parsing.errors import (
    DocumentError,
    LockedDocumentError,
    UnreadableDocumentError,
    UnsupportedDocumentError,
)
from atlas_pipeline.parsing.model import ParsedDocument

POLL_SECONDS = 0.2
_ERRORS: dict[str, type[DocumentError]] = {
    cls.__name__: cls for cls in (UnreadableDocumentError, LockedDocumentError, UnsupportedDocumentError)
}


@dataclass(frozen=True)
class ParseLimits:
    """Per-document parse limits (``ATLAS_PARSE_TIMEOUT_SECONDS``, ``ATLAS_PARSE_MEMORY_MB``); where none are given
    a document is parsed in the calling process without limits (the library's own behaviour)."""

    seconds: float = 600.0
    memory_mb: float = 4096.0  # resident memory of the process parsing one document


class ParseLimitError(UnreadableDocumentError):
    """The parse ran past its time or memory limit and was stopped."""


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies (even by SIGKILL)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _serve(connection: Connection) -> None:
    """The child: parse what the parent sends until the parent goes away."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    from atlas_pipeline.parsing import ParseOptions, parse_document

    while True:
        try:
            data, filename, options = connection.recv()
        except (EOFError, OSError):
            return
        try:
            parsed = parse_document(data, filename, ParseOptions(**options))
            reply: tuple[Any, ...] = ("ok", parsed.model_dump(mode="json"))
        except DocumentError as error:
            reply = ("document", type(error).__name__, error.reason)
        except BaseException as error:  # reported to the parent; the child stays usable
            reply = ("error", f"{type(error).__name__}: {error}")
        connection.send(reply)


def resident_mb(pid: int) -> float:
    """Resident memory of a process in MB (Linux /proc; 0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class _Worker:
    """The child: ``python -m atlas_pipeline.parsing.bounded FD`` speaking over a socket pair (stdout stays free
    for whatever MuPDF prints; no main module is re-imported, as multiprocessing's spawn would)."""

    def __init__(self) -> None:
        parent, child = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "atlas_pipeline.parsing.bounded", str(child.fileno())],
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            close_fds=True,
        )
        child.close()
        self.connection = Connection(parent.detach())

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.close()
        if self.alive():
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=10)


_LOCK = threading.Lock()
_STATE: dict[str, _Worker] = {}


def _worker() -> _Worker:
    worker = _STATE.get("worker")
    if worker is None or not worker.alive():
        worker = _STATE["worker"] = _Worker()
    return worker


def _discard() -> None:
    worker = _STATE.pop("worker", None)
    if worker is not None:
        worker.stop()


atexit.register(_discard)


def parse_bounded(
    data: bytes, filename: str, options: dict[str, Any], *, seconds: float, memory_mb: float
) -> ParsedDocument:
    """``parse_document`` in the child process, stopped at ``seconds`` or ``memory_mb``; raises a
    ``DocumentError`` (``ParseLimitError`` for a limit) like ``parse_document`` does."""
    with _LOCK:
        worker = _worker()
        try:
            worker.connection.send((data, filename, dict(options)))
        except (OSError, ValueError):  # the child went away between two documents: start another
            _discard()
            worker = _worker()
            worker.connection.send((data, filename, dict(options)))
        deadline = time.monotonic() + seconds
        while not worker.connection.poll(POLL_SECONDS):
            if not worker.alive():
                code = worker.process.returncode
                _discard()
                signal_name = signal.Signals(-code).name if code is not None and code < 0 else f"exit {code}"
                raise UnreadableDocumentError(f"the parser crashed on this document ({signal_name})")
            if resident_mb(worker.pid) > memory_mb:
                _discard()
                raise ParseLimitError(f"exceeded the memory limit ({memory_mb:g} MB)")
            if time.monotonic() > deadline:
                _discard()
                raise ParseLimitError(f"exceeded the time limit ({seconds:g} s)")
        try:
            reply = worker.connection.recv()
        except (EOFError, OSError):
            _discard()
            raise UnreadableDocumentError("the parser crashed on this document") from None
    if reply[0] == "ok":
        return ParsedDocument.model_validate(reply[1])
    if reply[0] == "document":
        raise _ERRORS.get(reply[1], UnreadableDocumentError)(reply[2])
    raise UnreadableDocumentError(f"could not be parsed ({reply[1]})")


def stop_parser() -> None:
    """Stop the child process now (tests, and a process that is shutting down)."""
    with _LOCK:
        _discard()


__all__ = ["ParseLimitError", "parse_bounded", "resident_mb", "stop_parser"]

if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])))
