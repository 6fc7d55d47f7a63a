"""Printing result tables and writing markdown reports with the machine, date and versions they were measured on."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

PACKAGES = ("dagster", "pymupdf", "pymupdf4llm", "pymupdf-layout", "rapidfuzz", "polars")


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        memory = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        memory = 0
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{cpu} ({os.cpu_count()} cores)",
        "memory": f"{memory} GiB",
        "python": platform.python_version(),
        "versions": ", ".join(f"{name} {version(name)}" for name in PACKAGES),
    }


def table(headers: list[str], rows: list[list[object]]) -> str:
    """A markdown table (also readable when printed)."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def write_report(path: Path, title: str, sections: list[tuple[str, str]]) -> None:
    """Print the sections and write them, with the machine facts, to ``path``."""
    facts = machine()
    header = [f"# {title}", "", *(f"- {key}: {value}" for key, value in facts.items()), ""]
    body = []
    for heading, text in sections:
        body += [f"## {heading}", "", text, ""]
        print(f"\n{heading}\n{text}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header + body))
    print(f"\nreport written to {path}")
