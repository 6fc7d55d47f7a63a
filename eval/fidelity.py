"""How much of what is in the PDFs survives into our text, tables and verified quotes.

Run from the repository root: ``python -m eval.fidelity`` (``make eval``). It parses every corpus PDF that has gold
with ``parse_document`` (default options) and prints, then writes ``eval/reports/fidelity.md``:

- grounding: human evidence quotes found by ``match_quote`` in our text (≥ 0.95 verified, ≥ 0.80 found), and the
  share of digit-altered copies wrongly accepted;
- tables: per RCT PDF, publisher table cells (``gold/jats_tables``, image-only tables excluded) whose text appears in
  the matching table we extracted, and the share of tables found;
- locatability: human gold outcome numbers (events, group sizes, means, SDs) that occur in markdown + table text;
- tabula: cells of tabula-java's expected CSVs that appear in our tables.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import time
from pathlib import Path

from atlas_pipeline.extraction.extractor import numbers_in
from atlas_pipeline.extraction.quotes import match_quote, normalize
from atlas_pipeline.parsing import ParsedDocument, parse_document
from atlas_pipeline.settings import PROJECT_ROOT
from bench.report import table, write_report

CORPUS = Path(os.environ.get("ATLAS_TEST_CORPUS", PROJECT_ROOT.parent / "shared" / "corpus"))
REPORT = PROJECT_ROOT / "eval" / "reports" / "fidelity.md"
GOALS = {"grounding": 0.98, "altered": 0.01, "cells": 0.90, "locatability": 0.95}
OUTCOME_NUMBERS = (
    "intervention_events",
    "intervention_group_size",
    "comparator_events",
    "comparator_group_size",
    "intervention_mean",
    "intervention_standard_deviation",
    "comparator_mean",
    "comparator_standard_deviation",
)


def squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def jsonl(relative: str) -> list[dict]:
    return [json.loads(line) for line in (CORPUS / relative).read_text().splitlines() if line.strip()]


class Parses:
    """Each PDF parsed once, with the time it took."""

    def __init__(self) -> None:
        self.cache: dict[str, ParsedDocument] = {}
        self.seconds = 0.0

    def get(self, relative: str) -> ParsedDocument:
        if relative not in self.cache:
            path = CORPUS / relative
            started = time.perf_counter()
            self.cache[relative] = parse_document(path.read_bytes(), path.name)
            self.seconds += time.perf_counter() - started
        return self.cache[relative]


def scope_of(parsed: ParsedDocument) -> str:
    return parsed.markdown + "\n\n" + parsed.tables_text


def longest_found_prefix(quote: str, scope: str) -> tuple[str, str]:
    """The longest start of the (normalised) quote found verbatim in the (normalised) scope, and the rest: says
    where a quote stops being in our text."""
    needle, haystack = normalize(quote).text, normalize(scope).text
    low, high = 0, len(needle)
    while low < high:  # the largest n such that needle[:n] occurs
        middle = (low + high + 1) // 2
        if needle[:middle] in haystack:
            low = middle
        else:
            high = middle - 1
    return needle[:low], needle[low:]


def grounding(parses: Parses) -> tuple[list[list[object]], dict[str, float]]:
    rows, verified, found, total, accepted, altered = [], 0, 0, 0, 0, 0
    rng = random.Random(7)
    misses = []
    for row in jsonl("gold/evidence_spans.jsonl"):
        relative = f"rct/{row['pmcid']}.pdf"
        if not (CORPUS / relative).exists():
            continue
        scope = scope_of(parses.get(relative))
        quote = row["evidence_text"]
        match = match_quote(quote, scope)
        total += 1
        verified += match.confidence >= 0.95
        found += match.confidence >= 0.80
        if match.confidence < 0.80:
            found_part, rest = longest_found_prefix(quote, scope)
            misses.append(
                f"{row['pmcid']}: {quote[:90]!r} — normalised, our text has the first {len(found_part)} of "
                f"{len(found_part) + len(rest)} characters (…{found_part[-30:]!r}); not there after it: {rest[:40]!r}"
            )
        digits = [i for i, char in enumerate(quote) if char.isdigit()]
        for position in rng.sample(digits, min(5, len(digits))):
            other = rng.choice([d for d in "0123456789" if d != quote[position]])
            altered += 1
            accepted += match_quote(quote[:position] + other + quote[position + 1 :], scope).confidence >= 0.80
    rows.append(["evidence quotes verified (≥ 0.95)", f"{verified}/{total}", verified / total])
    rows.append(["evidence quotes found (≥ 0.80)", f"{found}/{total}", found / total])
    rows.append(["digit-altered copies accepted (≥ 0.80)", f"{accepted}/{altered}", accepted / altered])
    return rows, {"grounding": found / total, "altered": accepted / altered, "misses": misses}


def table_cells(parses: Parses) -> tuple[list[list[object]], dict[str, float]]:
    rows = []
    all_cells = all_hits = all_tables = all_found = 0
    for path in sorted((CORPUS / "gold" / "jats_tables").glob("*.tables.json")):
        pmcid = path.name.split(".")[0]
        relative = f"rct/{pmcid}.pdf"
        if not (CORPUS / relative).exists():
            continue
        gold = [t for t in json.loads(path.read_text())["tables"] if not t.get("graphic_only")]
        if not gold:
            continue
        ours = [squash(t.text) for t in parses.get(relative).tables]
        cells = hits = found = 0
        for gold_table in gold:
            texts = [squash(cell["text"]) for row in gold_table["rows"] for cell in row if squash(cell["text"])]
            best = max((sum(text in candidate for text in texts) for candidate in ours), default=0)
            cells += len(texts)
            hits += best
            found += bool(texts) and best >= 0.5 * len(texts)
        rows.append([pmcid, len(gold), len(ours), found / len(gold), hits / cells if cells else 0.0])
        all_cells, all_hits, all_tables, all_found = (
            all_cells + cells,
            all_hits + hits,
            all_tables + len(gold),
            all_found + found,
        )
    rows.append(["all", all_tables, "", all_found / all_tables, all_hits / all_cells])
    return rows, {"cells": all_hits / all_cells, "tables": all_found / all_tables}


def locatability(parses: Parses) -> tuple[list[list[object]], dict[str, float]]:
    present = total = 0
    missing = []
    for row in jsonl("gold/outcome_values.jsonl"):
        relative = row.get("pdf_path") or f"rct/PMC{row['pmcid']}.pdf"
        if not (CORPUS / relative).exists():
            continue
        numbers = set(numbers_in(scope_of(parses.get(relative))))
        for name in OUTCOME_NUMBERS:
            value = row.get(name)
            if value is None:
                continue
            total += 1
            number = float(str(value).replace(",", ""))
            if number in numbers or abs(number) in numbers:
                present += 1
            else:
                missing.append(f"PMC{row['pmcid']} {name}={value}")
    rows = [["gold outcome numbers in text + tables", f"{present}/{total}", present / total]]
    return rows, {"locatability": present / total, "missing": missing}


def tabula(parses: Parses) -> tuple[list[list[object]], dict[str, float]]:
    rows = []
    cells_total = hits_total = 0
    for expected in sorted((CORPUS / "tables" / "tabula").glob("*.expected.csv")):
        pdf = expected.with_name(expected.name.replace(".expected.csv", ".pdf"))
        if not pdf.exists():
            continue
        parsed = parses.get(str(pdf.relative_to(CORPUS)))
        ours = squash(parsed.tables_text)
        with expected.open(newline="", encoding="utf-8", errors="replace") as handle:
            texts = [squash(cell) for line in csv.reader(handle) for cell in line if squash(cell)]
        hits = sum(text in ours for text in texts)
        rows.append([pdf.stem, len(parsed.tables), len(texts), hits / len(texts) if texts else 0.0])
        cells_total, hits_total = cells_total + len(texts), hits_total + hits
    rows.append(["all", "", cells_total, hits_total / cells_total])
    return rows, {"tabula": hits_total / cells_total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args()
    parses = Parses()
    grounding_rows, g = grounding(parses)
    table_rows, t = table_cells(parses)
    locate_rows, loc = locatability(parses)
    tabula_rows, _ = tabula(parses)
    goals = [
        goal("grounding: evidence quotes found", g["grounding"], GOALS["grounding"]),
        goal("grounding: digit-altered accepted", g["altered"], GOALS["altered"], at_most=True),
        goal("tables: publisher cells recovered", t["cells"], GOALS["cells"]),
        goal("locatability: gold numbers present", loc["locatability"], GOALS["locatability"]),
    ]
    write_report(
        args.report,
        "Fidelity evaluation",
        [
            ("Goals", table(["measure", "goal", "ours", "met"], goals)),
            ("Grounding (human evidence quotes)", table(["measure", "count", "share"], grounding_rows)),
            ("Quotes not found (how far each one is in our text)", bullets(g["misses"])),
            ("Tables (publisher JATS tables)", table(TABLE_HEADERS, table_rows)),
            ("Locatability (gold outcome numbers)", table(["measure", "count", "share"], locate_rows)),
            ("Gold numbers not found", bullets(loc["missing"])),
            ("Tabula expected CSVs", table(["pdf", "our tables", "expected cells", "cells found"], tabula_rows)),
            ("Parsing", f"{len(parses.cache)} documents parsed in {parses.seconds:.1f} s with default options."),
        ],
    )


TABLE_HEADERS = ["pmcid", "gold tables", "our tables", "tables found", "cells recovered"]


def goal(name: str, value: float, target: float, at_most: bool = False) -> list[object]:
    met = value <= target if at_most else value >= target
    return [name, f"{'≤' if at_most else '≥'} {target:.0%}", f"{value:.1%}", "yes" if met else "NO"]


def bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) or "none"


if __name__ == "__main__":
    main()
