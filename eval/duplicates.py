"""How well duplicates are recognised on the corpus: precision and recall over pairs of documents.

Run from the repository root: ``python -m eval.duplicates`` (part of ``make eval``); writes
``eval/reports/duplicates.md``. Documents: every corpus article we can parse (RCT PDFs, their JATS XML, other JATS
articles, HTML articles, other PDFs) and, to test more than identifiers, two harder variants of the same set:

- *without identifiers*: every DOI, PMCID, PMID and trial registration removed from every text — only the text can
  tell (the same article from a source that strips them);
- *re-downloaded*: each RCT PDF re-saved with other metadata (other bytes, the same work) added to the set.

Truth: an RCT's PDF and its JATS XML (same PMCID) are one work, and a re-saved PDF is one work with its original;
every other pair is two works. Goal: precision and recall ≥ 0.9 in every scenario.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import time
from pathlib import Path

import pymupdf

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.knowledge.duplicates import Member, fingerprint, group_duplicates
from atlas_pipeline.parsing import parse_document
from bench.report import table, write_report

CORPUS = Path(os.environ.get("ATLAS_TEST_CORPUS", PROJECT_ROOT.parent / "shared" / "corpus"))
REPORT = PROJECT_ROOT / "eval" / "reports" / "duplicates.md"
GOAL = 0.9
FOLDERS = {"rct": "*.pdf", "rct_jats": "*.nxml", "html": "*.html", "other_pdfs": "*.pdf"}
IDENTIFIERS = re.compile(
    r"10\.\d{4,9}/\S+|\bPMC\s?\d+|\bPMID:?\s*\d+|\bNCT\d{8}|\bISRCTN\s?\d+|\bACTRN\d+|\bDOI:?", re.IGNORECASE
)


def work_of(name: str) -> str:
    """The work a corpus file is (its PMCID when it has one; otherwise the file itself)."""
    name = name.replace("-resaved.", ".")
    stem = name.split("/")[-1].split(".")[0]
    return stem if stem.startswith("PMC") else name


def resaved(data: bytes) -> bytes:
    document = pymupdf.open(stream=data, filetype="pdf")
    document.set_metadata({"title": "downloaded again", "producer": "another repository", "author": ""})
    return document.tobytes(garbage=1)


def load(limit: int | None) -> tuple[dict[str, tuple[str, str]], float]:
    """name → (media type, markdown) of every corpus document, plus re-saved RCT PDFs; and the parse seconds."""
    started = time.perf_counter()
    texts: dict[str, tuple[str, str]] = {}
    for folder, pattern in FOLDERS.items():
        for path in sorted((CORPUS / folder).glob(pattern))[:limit]:
            data = path.read_bytes()
            try:
                parsed = parse_document(data, path.name)
            except Exception as error:  # a corpus file we cannot parse is not part of this measure
                print(f"skipped {folder}/{path.name}: {error}")
                continue
            texts[f"{folder}/{path.name}"] = (parsed.media_type, parsed.markdown)
            if folder == "rct":
                again = parse_document(resaved(data), path.name)
                texts[f"{folder}/{path.stem}-resaved.pdf"] = (again.media_type, again.markdown)
    return texts, time.perf_counter() - started


def measure(texts: dict[str, tuple[str, str]], strip: bool, with_resaved: bool) -> dict:
    names = [n for n in texts if with_resaved or "-resaved" not in n]
    members = [
        Member(n, fingerprint(n, IDENTIFIERS.sub(" ", texts[n][1]) if strip else texts[n][1]), texts[n][0])
        for n in names
    ]
    started = time.perf_counter()
    groups = group_duplicates(members)
    seconds = time.perf_counter() - started
    group_of = {key: index for index, group in enumerate(groups) for key in group.members}
    tp = fp = fn = 0
    wrong, missed = [], []
    for a, b in itertools.combinations(names, 2):
        truth = work_of(a) == work_of(b)
        found = a in group_of and group_of.get(a) == group_of.get(b)
        tp += truth and found
        fp += found and not truth
        fn += truth and not found
        if found and not truth:
            wrong.append(f"{a} ~ {b}")
        if truth and not found:
            missed.append(f"{a} ~ {b}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return {
        "documents": len(names),
        "pairs": tp + fn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": precision,
        "recall": recall,
        "seconds": seconds,
        "wrong": wrong,
        "missed": missed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--limit", type=int, default=None, help="documents per folder (default all)")
    args = parser.parse_args()
    texts, parse_seconds = load(args.limit)
    scenarios = {
        "as collected (PDF + JATS + HTML + other PDFs)": measure(texts, strip=False, with_resaved=False),
        "without identifiers (text only)": measure(texts, strip=True, with_resaved=False),
        "with re-downloaded PDFs (other metadata)": measure(texts, strip=False, with_resaved=True),
        "re-downloaded, without identifiers": measure(texts, strip=True, with_resaved=True),
    }
    rows = [
        [
            name,
            m["documents"],
            m["pairs"],
            m["tp"],
            m["fp"],
            m["fn"],
            round(m["precision"], 3),
            round(m["recall"], 3),
            "yes" if m["precision"] >= GOAL and m["recall"] >= GOAL else "NO",
            round(m["seconds"], 2),
        ]
        for name, m in scenarios.items()
    ]
    errors = [f"- {name}: wrongly grouped {pair}" for name, m in scenarios.items() for pair in m["wrong"]]
    errors += [f"- {name}: missed {pair}" for name, m in scenarios.items() for pair in m["missed"]]
    write_report(
        args.report,
        "Duplicate recognition on the corpus",
        [
            (
                "Precision and recall over pairs (goal ≥ 0.9 both)",
                table(
                    [
                        "scenario",
                        "documents",
                        "true pairs",
                        "found",
                        "wrong",
                        "missed",
                        "precision",
                        "recall",
                        "met",
                        "grouping s",
                    ],
                    rows,
                ),
            ),
            ("Errors", "\n".join(errors) or "none"),
            ("Parsing", f"{len(texts)} texts parsed in {parse_seconds:.1f} s with default options."),
        ],
    )


if __name__ == "__main__":
    main()
