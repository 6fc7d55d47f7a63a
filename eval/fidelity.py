"""How much of what is in the PDFs survives into our text, tables and verified quotes.

Run from the repository root: ``python -m eval.fidelity`` (``make eval``). It parses every corpus PDF that has gold
with ``parse_document`` (default options) and prints, then writes ``eval/reports/fidelity.md``:

- grounding: human evidence quotes found by ``match_quote`` in our text (verified, or approximate where the PDF's
  text layer is broken) — each one not found listed with what is missing —, and for every kind of alteration
  (``eval.perturbations``: comparators, signs, numbers cut short, negations, polarity words, stitched sentences, …)
  how many altered quotes are verified (must be 0) or accepted, next to typography-only changes (must be verified);
- tables: per RCT PDF, publisher table cells (``gold/jats_tables``, image-only tables excluded) whose text appears in
  the matching table we extracted, and the share of tables found;
- locatability: human gold outcome numbers (events, group sizes, means, SDs) that occur in markdown + table text;
- tabula: cells of tabula-java's expected CSVs that appear in our tables;
- value support: per kind of value (number, text, label, judgment, a reference-list line), how many unsupported
  values are verified (must be 0) and how many genuine ones are (``eval.value_kinds``).
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

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.grading.quotes import match_quote
from atlas_pipeline.grading.text import normalize
from atlas_pipeline.grading.values import numbers_in
from atlas_pipeline.parsing import ParsedDocument, ParseOptions, parse_document
from bench.report import table, write_report
from eval.perturbations import MEANING_CHANGES, NEEDS_OTHERS, TYPOGRAPHY_CHANGES
from eval.value_kinds import HEADERS as VALUE_HEADERS
from eval.value_kinds import rows as value_rows
from eval.value_kinds import value_kinds

CORPUS = Path(os.environ.get("ATLAS_TEST_CORPUS", PROJECT_ROOT.parent / "shared" / "corpus"))
REPORT = PROJECT_ROOT / "eval" / "reports" / "fidelity.md"
GOALS = {"cells": 0.90, "locatability": 0.95}
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

    def __init__(self, options: ParseOptions | None = None) -> None:
        self.cache: dict[str, ParsedDocument] = {}
        self.seconds = 0.0
        self.options = options

    def get(self, relative: str) -> ParsedDocument:
        if relative not in self.cache:
            path = CORPUS / relative
            started = time.perf_counter()
            self.cache[relative] = parse_document(path.read_bytes(), path.name, self.options)
            self.seconds += time.perf_counter() - started
        return self.cache[relative]


def scope_of(parsed: ParsedDocument) -> str:
    """What quotes are graded against in the pipeline: the markdown and each table's text (``EvidenceScope``)."""
    return EvidenceScope(parsed.markdown, parsed.tables).text


def longest_found_prefix(quote: str, scope: str) -> tuple[str, str]:
    """The longest start of the quote (as tokens) found in the scope, and the rest: says where a quote stops being
    in our text."""
    needle = normalize(quote).split()
    haystack = " " + normalize(scope) + " "
    low, high = 0, len(needle)
    while low < high:  # the largest n such that needle[:n] occurs
        middle = (low + high + 1) // 2
        if " " + " ".join(needle[:middle]) + " " in haystack:
            low = middle
        else:
            high = middle - 1
    return " ".join(needle[:low]), " ".join(needle[low:])


def _documents(parses: Parses) -> dict[str, tuple[str, list[str], bool]]:
    """pmcid → (scope, distinct human quotes, from our PDF parse?): the PDF where the corpus has it, else the text."""
    found: dict[str, tuple[str, list[str], bool]] = {}
    for row in jsonl("gold/evidence_spans.jsonl"):
        pmcid = row["pmcid"]
        if pmcid not in found:
            pdf = CORPUS / "rct" / f"{pmcid}.pdf"
            if pdf.exists():
                found[pmcid] = (scope_of(parses.get(f"rct/{pmcid}.pdf")), [], True)
            else:
                found[pmcid] = ((CORPUS / "gold" / "evidence_txt" / f"{pmcid}.txt").read_text(), [], False)
        if row["evidence_text"] not in found[pmcid][1]:
            found[pmcid][1].append(row["evidence_text"])
    return found


def evidence_scopes(parses: Parses) -> dict[str, tuple[EvidenceScope, list[str]]]:
    """pmcid → (the evidence scope quotes are graded against, its distinct human quotes), as ``_documents``."""
    scopes = {}
    for pmcid, (_, quotes, pdf) in _documents(parses).items():
        if pdf:
            parsed = parses.get(f"rct/{pmcid}.pdf")
            scopes[pmcid] = (EvidenceScope(parsed.markdown, parsed.tables), quotes)
        else:
            scopes[pmcid] = (EvidenceScope((CORPUS / "gold" / "evidence_txt" / f"{pmcid}.txt").read_text()), quotes)
    return scopes


def grounding(parses: Parses) -> tuple[list[list[object]], dict]:
    """Genuine human quotes found, and per kind of alteration how many altered quotes are verified / accepted."""
    documents = _documents(parses)
    rows, misses, approximate_notes = [], [], []
    for from_pdf, label in ((True, "on our PDF parses"), (False, "on the articles' text (text-only subset)")):
        total = verified = found = 0
        for pmcid, (scope, quotes, pdf) in documents.items():
            if pdf != from_pdf:
                continue
            for quote in quotes:
                match = match_quote(quote, scope)
                total += 1
                verified += match.tier == "verified"
                found += match.tier != "unverified"
                if match.tier == "approximate":
                    approximate_notes.append(f"{pmcid}: {quote[:70]!r} — {match.note}")
                if match.tier == "unverified":
                    found_part, rest = longest_found_prefix(quote, scope)
                    misses.append(
                        f"{pmcid}: {quote[:90]!r} — our text has its first {len(found_part.split())} of "
                        f"{len(found_part.split()) + len(rest.split())} words (…{found_part[-40:]!r}); "
                        f"not in the source after that: {rest[:40]!r}"
                    )
        rows.append([f"human quotes verified {label}", f"{verified}/{total}", verified / total])
        rows.append([f"human quotes found (verified or approximate) {label}", f"{found}/{total}", found / total])
    kinds, wrongly_verified = [], []
    rng = random.Random(7)
    worst_verified = 0
    for kind, function in {**MEANING_CHANGES, **TYPOGRAPHY_CHANGES}.items():
        altered = verified = accepted = skipped = 0
        for pmcid, (scope, quotes, _) in documents.items():
            article = " " + normalize((CORPUS / "gold" / "evidence_txt" / f"{pmcid}.txt").read_text()) + " "
            article += " " + normalize(scope) + " "
            for quote in quotes:
                for _ in range(3):
                    changed = function(quote, rng, quotes) if kind in NEEDS_OTHERS else function(quote, rng)
                    if not changed or changed == quote:
                        continue
                    if kind in MEANING_CHANGES and f" {normalize(changed)} " in article:
                        skipped += 1  # the altered text is in the article anyway
                        continue
                    match = match_quote(changed, scope)
                    altered += 1
                    verified += match.tier == "verified"
                    if kind in MEANING_CHANGES and match.tier == "verified":
                        wrongly_verified.append(f"{kind}, {pmcid}: {changed!r} (original: {quote!r})")
                    accepted += match.tier != "unverified"
        meaning = kind in MEANING_CHANGES
        if meaning:
            worst_verified = max(worst_verified, verified)
        kinds.append([kind, "changes meaning" if meaning else "typography only", altered, verified, accepted, skipped])
    return rows, {
        "misses": misses,
        "approximate": approximate_notes,
        "kinds": kinds,
        "wrongly_verified": wrongly_verified,
        "meaning_verified": worst_verified,
        "found": sum(1 for r in rows if "found" in r[0] and r[2] == 1.0) == 2,
    }


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


def headline(parses: Parses) -> dict[str, float]:
    """The fidelity figures a parser change must keep (``make bench-ingest`` prints them for each engine)."""
    grounding_rows, g = grounding(parses)
    found = next(row for row in grounding_rows if row[0].startswith("human quotes found") and "PDF" in row[0])
    return {
        "meaning-changed verified": g["meaning_verified"],
        "cells": table_cells(parses)[1]["cells"],
        "locatability": locatability(parses)[1]["locatability"],
        "quotes found": found[2],
        "quotes found (count)": found[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args()
    parses = Parses()
    grounding_rows, g = grounding(parses)
    table_rows, t = table_cells(parses)
    locate_rows, loc = locatability(parses)
    tabula_rows, _ = tabula(parses)
    kinds = value_kinds(evidence_scopes(parses))
    unsupported_verified = sum(tally.unsupported_verified for tally in kinds.values())
    genuine_found = [row for row in grounding_rows if "found" in row[0]]
    goals = [
        [
            "grounding: meaning-changed quotes verified (worst kind)",
            "0",
            str(g["meaning_verified"]),
            "yes" if g["meaning_verified"] == 0 else "NO",
        ],
        *(
            [f"grounding: {row[0]}", "all but quotes not in the source", row[1], "yes" if row[1] else "NO"]
            for row in genuine_found
        ),
        [
            "value support: unsupported values verified (every kind)",
            "0",
            str(unsupported_verified),
            "yes" if unsupported_verified == 0 else "NO",
        ],
        goal("tables: publisher cells recovered", t["cells"], GOALS["cells"]),
        goal("locatability: gold numbers present", loc["locatability"], GOALS["locatability"]),
    ]
    write_report(
        args.report,
        "Fidelity evaluation",
        [
            ("Goals", table(["measure", "goal", "ours", "met"], goals)),
            ("Grounding (human evidence quotes)", table(["measure", "count", "share"], grounding_rows)),
            ("Human quotes not found: their text is not in the source", bullets(g["misses"])),
            ("Human quotes found as approximate, and why", bullets(g["approximate"])),
            (
                "Altered quotes, per kind (verified must be 0 for every meaning-changing kind)",
                table(["alteration", "kind", "altered quotes", "verified", "accepted (≥ 0.80)", "skipped"], g["kinds"])
                + "\n\n*skipped*: the altered text happens to be in the article, so it is not an alteration.",
            ),
            ("Meaning-changed quotes graded verified", bullets(g["wrongly_verified"])),
            (
                "Value support, per kind of value (unsupported verified must be 0)",
                table(VALUE_HEADERS, value_rows(kinds))
                + "\n\nPairs of (value, quote) on the human quotes found verified, graded by `grade_field` as the "
                "pipeline does (`eval/value_kinds.py` says how each kind's values are made). A judgment is never "
                "verified by design; a reference-list line supports no study field.",
            ),
            (
                "Unsupported values graded verified",
                bullets([item for tally in kinds.values() for item in tally.wrongly_verified]),
            ),
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
