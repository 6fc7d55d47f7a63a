"""The living knowledge base under the real daemon for a long time: memory, throughput and whether the counts add up.

``python -m bench.soak [--minutes 30] [--documents 120]`` (``make bench-soak``); writes ``bench/reports/soak.md``.
A local feed publishes ``--documents`` items evenly over ``--minutes`` (the corpus's RCT PDFs and JATS articles,
cycled as distinct copies: other bytes, the same works — so duplicate groups grow too); a collector brings them in,
the knowledge-base sensor has them extracted, the aggregates group and index them. The issue's goals: no crash,
memory of the daemon and everything it starts under 2 GB, nothing stuck, every published item collected, extracted
and indexed. The memory column compares the last quarter of the run with the first (a leak shows as a ratio > 1).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
from pathlib import Path

from atlas_pipeline_tests.support.juice_trial import answer
from atlas_pipeline_tests.support.soak import distinct_copy, run_soak
from bench.report import table, write_report
from eval.fidelity import CORPUS
from scripted_servers.processes import scripted_openai_server

REPORT = Path(__file__).resolve().parent / "reports" / "soak.md"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--documents", type=int, default=120)
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument(
        "--llm-latency",
        type=float,
        default=0,
        help="LLM mode: a scripted OpenAI-compatible endpoint answering after this many seconds (0: skip mode)",
    )
    args = parser.parse_args()
    originals = sorted((CORPUS / "rct_jats").glob("*.nxml")) + sorted((CORPUS / "rct").glob("PMC*.pdf"))
    with tempfile.TemporaryDirectory() as folder:
        copies = Path(folder) / "copies"
        copies.mkdir()
        documents = [
            distinct_copy(originals[n % len(originals)], n // len(originals), copies) for n in range(args.documents)
        ]
        with contextlib.ExitStack() as stack:
            extra, setup = {}, "skip mode (no LLM)"
            if args.llm_latency:
                endpoint = stack.enter_context(scripted_openai_server(Path(folder)))
                endpoint.script(default={"content": answer(), "delay": args.llm_latency})
                extra = {"ATLAS_LLM_BASE_URL": endpoint.base_url, "ATLAS_LLM_MODEL": "gpt-4o-mini"}
            result = run_soak(
                Path(folder) / "soak",
                documents,
                args.minutes * 60,
                settle_seconds=900,
                extra_env=extra,
                every_seconds=300,
                review_every_seconds=60 if args.llm_latency else 0,
            )
            if args.llm_latency:
                setup = (
                    f"LLM mode: a scripted OpenAI-compatible endpoint answering in {args.llm_latency:g} s, "
                    f"{len(endpoint.requests())} requests answered; ATLAS_LLM_CONCURRENCY at its default; a reviewer "
                    "approves a value of an extracted document every minute, as on the review page"
                )
    samples = result.rss_samples
    quarter = max(1, len(samples) // 4)
    first, last = statistics.mean(samples[:quarter]), statistics.mean(samples[-quarter:])
    goals = [
        ["daemon never died", "yes", "yes" if result.daemon_alive else "NO"],
        [
            "peak memory (daemon + code server + runs) < 2048 MB",
            f"{result.peak_rss_mb:.0f} MB",
            "yes" if result.peak_rss_mb < 2048 else "NO",
        ],
        [
            "every item collected, extracted and indexed",
            f"{result.published} / {result.collected} / {result.finished} / {result.indexed}",
            "yes" if result.published == result.collected == result.finished == result.indexed else "NO",
        ],
        [
            "every decision in the fields export (LLM mode)",
            f"{result.decisions_exported} of {result.decisions}",
            "yes" if result.decisions_exported == result.decisions else "NO",
        ],
        [
            "nothing stuck or failed",
            f"{result.runs_unfinished} unfinished, {result.runs_failed} failed runs, "
            f"{result.documents_failed} failed documents",
            "yes" if not (result.runs_unfinished or result.runs_failed or result.documents_failed) else "NO",
        ],
    ]
    write_report(
        args.report,
        "Soak: the living knowledge base under the daemon",
        [
            ("Setup", f"{args.documents} documents published over {args.minutes:g} minutes; {setup}."),
            ("Goals", table(["goal", "measured", "met"], goals)),
            (
                "Figures",
                table(
                    [
                        "seconds",
                        "documents",
                        "per minute",
                        "duplicates found",
                        "memory first quarter MB",
                        "memory last quarter MB",
                        "ratio last/first",
                    ],
                    [
                        [
                            round(result.seconds),
                            result.published,
                            round(result.indexed / (result.seconds / 60), 1),
                            result.duplicates,
                            round(first),
                            round(last),
                            round(last / first, 2) if first else "-",
                        ]
                    ],
                ),
            ),
            (
                "Over time",
                table(
                    [
                        "minute",
                        "memory MB",
                        "collected",
                        "finished",
                        "failed documents",
                        "failed runs",
                        "decisions",
                        "decisions exported",
                    ],
                    result.timeline,
                ),
            ),
            ("Summary", result.summary()),
            ("Items not collected", "\n".join(f"- {p}" for p in result.problems) or "none"),
        ],
    )


if __name__ == "__main__":
    main()
