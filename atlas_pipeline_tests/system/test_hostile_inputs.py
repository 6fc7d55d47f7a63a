"""Hostile and broken inputs, made by the tests themselves: each document ends in its own status with a reason that
names the cause, within its limits, and the rest of the knowledge base goes on."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from atlas_pipeline.parsing import DocumentError, parse_document
from atlas_pipeline.parsing.bounded import ParseLimitError, parse_bounded
from atlas_pipeline_tests.support.corpus import copy_into, corpus_file
from atlas_pipeline_tests.support.helpers import run_atlas
from atlas_pipeline_tests.support.hostile_files import (
    broken_jpeg_pdf,
    huge_page_pdf,
    multipage_tiff,
    page_images,
    page_tree_cycle_pdf,
    text_pdf,
)
from scripted_servers.processes import local_env

# -- reasons that name the cause; what is readable is parsed ------------------------------------------------------


def test_a_page_tree_cycle_keeps_the_readable_page_and_names_the_lost_one():
    parsed = parse_document(page_tree_cycle_pdf(), "cycle.pdf")
    assert "Mortality was lower in the treated group: p < 0.05." in parsed.markdown
    assert parsed.page_count == 2 and parsed.lost == ["page 2 could not be read: cycle in page tree"]


def test_a_broken_embedded_jpeg_does_not_lose_the_text():
    parsed = parse_document(broken_jpeg_pdf(), "broken.pdf")
    assert "the mean difference was -1.65 (95% CI -2.25 to -1.06)" in parsed.markdown
    (note,) = parsed.lost
    assert note.startswith("page 1: layout with OCR: jpeg error") and note.endswith("parsed without OCR")


def test_no_library_exception_escapes_parse_document():
    for data, name in (
        (b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF", "empty_tree.pdf"),
        (page_tree_cycle_pdf()[:400], "truncated.pdf"),
        (b"<?xml version='1.0'?><!DOCTYPE article [<!ENTITY x 'y'>]><article>&x;</article>", "a.nxml"),
        (b"\x00\xff" * 100, "binary.txt"),
    ):
        try:
            parse_document(data, name)
        except DocumentError as error:
            assert error.reason and "Traceback" not in error.reason


def test_documents_with_broken_parts_end_done_with_what_was_not_read(tmp_path, knowledge_base):
    (knowledge_base / "cycle.pdf").write_bytes(page_tree_cycle_pdf())
    (knowledge_base / "broken_jpeg.pdf").write_bytes(broken_jpeg_pdf())
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "cycle.pdf: done" in result.stdout
    status = run_atlas("status", "--documents", env=env, cwd=tmp_path).stdout
    assert "not read: page 2 could not be read: cycle in page tree" in status
    assert "not read: page 1: layout with OCR: jpeg error" in status


@contextlib.contextmanager
def tiny_filesystem(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (the test needs root to mount one)."""
    path.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_is_named_as_the_reason(tmp_path, knowledge_base):
    (pdf,) = copy_into(knowledge_base, "rct/PMC1216327.pdf")
    room = pdf.stat().st_size // 1024 + 24  # the snapshot fits, the parse's text and tables do not
    with tiny_filesystem(tmp_path / "full", f"{room}k") as artifacts:
        env = {
            "DAGSTER_HOME": str(tmp_path / "home"),
            **local_env(tmp_path, knowledge_base),
            "ATLAS_ARTIFACTS": str(artifacts),
        }
        result = run_atlas("run", env=env, cwd=tmp_path)
        assert "PMC1216327.pdf: failed: document_text: OSError: [Errno 28] No space left on device" in result.stdout
        status = run_atlas("status", "--documents", env=env, cwd=tmp_path).stdout
        line = next(line for line in status.splitlines() if line.startswith("PMC1216327.pdf"))
    assert "failed" in line and "No space left on device" in line, status
    assert "Error occurred while executing" not in line


def test_an_unknown_ocr_language_stops_at_start_up(tmp_path, knowledge_base):
    env = {
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_OCR_LANGUAGE": "eng+xyz",
        **local_env(tmp_path, knowledge_base),
    }
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert "ATLAS_OCR_LANGUAGE='eng+xyz'" in result.stderr and "tesseract has no language 'xyz'" in result.stderr


# -- every parse bounded in time and memory ------------------------------------------------------------------------


def test_a_parse_past_its_limits_is_stopped_and_the_next_one_runs():
    started = time.monotonic()
    with pytest.raises(ParseLimitError, match=r"^exceeded the time limit \(5 s\)$"):
        parse_bounded(huge_page_pdf(), "huge.pdf", {}, seconds=5, memory_mb=8000)
    assert time.monotonic() - started < 30
    with pytest.raises(ParseLimitError, match=r"^exceeded the memory limit \(150 MB\)$"):
        parse_bounded(text_pdf("small"), "small.pdf", {}, seconds=120, memory_mb=150)
    parsed = parse_bounded(text_pdf("Mortality was 12%."), "small.pdf", {}, seconds=120, memory_mb=8000)
    assert "Mortality was 12%." in parsed.markdown


def test_a_huge_page_fails_within_its_limit_while_the_others_finish(tmp_path, knowledge_base):
    (knowledge_base / "huge_page.pdf").write_bytes(huge_page_pdf())
    copy_into(knowledge_base, "rct/PMC1216327.pdf", "html/plos_one_article.html")
    env = {
        "DAGSTER_HOME": str(tmp_path / "home"),
        **local_env(tmp_path, knowledge_base),
        "ATLAS_PARSE_TIMEOUT_SECONDS": "20",
    }
    started = time.monotonic()
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert time.monotonic() - started < 240, result.stdout
    assert "huge_page.pdf: failed: parse: exceeded the time limit (20 s)" in result.stdout, result.stdout
    assert "PMC1216327.pdf: done" in result.stdout and "plos_one_article.html: done" in result.stdout
    assert "3 documents: 3 finished, 0 open" in result.stdout


# -- what the listing meets: symlinks, sizes, names that lie --------------------------------------------------------


def test_symlinks_never_stop_the_listing_and_never_leave_the_knowledge_base(tmp_path, knowledge_base):
    secret = tmp_path / "outside" / "shadow.txt"
    secret.parent.mkdir()
    secret.write_text("root:$6$saltsalt$hashedpasswordvalue:19000:0:99999:7:::\n")
    copy_into(knowledge_base, "html/plos_one_article.html")
    (knowledge_base / "folder").mkdir()
    (knowledge_base / "folder" / "notes.txt").write_text("Mortality was 12% in the treated arm.")
    (knowledge_base / "link_to_folder").symlink_to(knowledge_base / "folder")
    (knowledge_base / "loop").symlink_to(knowledge_base / "loop")
    (knowledge_base / "passwords.txt").symlink_to(secret)
    (knowledge_base / "dangling.pdf").symlink_to(tmp_path / "nowhere.pdf")
    (knowledge_base / "inside.txt").symlink_to(knowledge_base / "folder" / "notes.txt")
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "passwords.txt: skipped: snapshot: symlink to a file outside the knowledge base; not followed" in out
    assert "link_to_folder: skipped: snapshot: symlink to a directory; not followed" in out
    assert "loop: skipped: snapshot: symlink loop; not followed" in out
    assert "dangling.pdf: skipped: snapshot: broken symlink" in out
    assert "plos_one_article.html: done" in out and "notes.txt: done" in out
    assert "scan: 6 new, 0 edited, 0 removed, 1 duplicate" in out  # inside.txt is notes.txt again
    for path in (tmp_path / "artifacts").rglob("*"):
        if path.is_file():
            assert b"hashedpasswordvalue" not in path.read_bytes(), path


def test_the_sensor_lists_a_folder_with_hostile_links(tmp_path, knowledge_base, instance, settings_for, atlas_for):
    from atlas_pipeline_tests.support.helpers import SensorHarness

    copy_into(knowledge_base, "html/plos_one_article.html")
    (knowledge_base / "loop").symlink_to(knowledge_base / "loop")
    (knowledge_base / "up").symlink_to(tmp_path)
    harness = SensorHarness(instance, settings_for(knowledge_base), atlas_for(knowledge_base))
    result = harness.tick()
    assert sorted(request.partition_key for request in result.run_requests) == [
        "loop",
        "plos_one_article.html",
        "up",
    ]


def test_a_file_over_the_size_limit_is_never_read(tmp_path, knowledge_base):
    big = knowledge_base / "huge_scan.pdf"
    with big.open("wb") as handle:  # 300 MB on paper, sparse on disk
        handle.write(b"%PDF-1.4\n")
        handle.truncate(300_000_000)
    copy_into(knowledge_base, "html/plos_one_article.html")
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base), "ATLAS_MAX_DOCUMENT_MB": "5"}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert (
        "huge_scan.pdf: skipped: snapshot: too large: 300.0 MB (limit ATLAS_MAX_DOCUMENT_MB=5); not read"
        in result.stdout
    )
    catalog = json.loads((tmp_path / "artifacts" / "catalog" / "documents.json").read_text())
    assert catalog["entries"]["huge_scan.pdf"]["sha256"] == ""  # never hashed, so never read
    snapshots = [p for p in (tmp_path / "artifacts" / "snapshots").rglob("*") if p.is_file()]
    assert len(snapshots) == 1 and all(p.stat().st_size < 1_000_000 for p in snapshots)


def test_images_are_read_by_ocr(tmp_path, knowledge_base):
    pictures = page_images("Mortality was 12 percent in the treated arm.", pages=2)
    (knowledge_base / "photo.png").write_bytes(pictures[0].tobytes("png"))
    (knowledge_base / "photo.jpg").write_bytes(pictures[1].tobytes("jpeg"))
    (knowledge_base / "scan.tiff").write_bytes(multipage_tiff(pictures))
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert "3 documents: 3 finished, 0 open" in result.stdout and "  done        3" in result.stdout, result.stdout
    documents = pl.read_parquet(tmp_path / "exports" / "atlas_documents.parquet")
    tiff = documents.filter(pl.col("document_key") == "scan.tiff").row(0, named=True)
    assert (tiff["media_type"], tiff["pages"], tiff["ocr_pages"]) == ("image/tiff", 2, 2)
    text = (tmp_path / "artifacts" / tiff["text_path"]).read_text()
    assert "Mortality was 12 percent in the treated arm. Page 2." in text


def test_html_text_outside_paragraphs_and_jats_with_an_internal_subset_are_read(tmp_path, knowledge_base):
    (knowledge_base / "layout.html").write_bytes(
        "<html><head><meta charset='windows-1251'><title>Исследование</title></head><body>"
        "<div>Смертность снизилась на 12%.</div><div><span>n = 30</span> per arm</div></body></html>".encode("cp1251")
    )
    jats = corpus_file("rct_jats/PMC1216327.nxml").read_bytes()
    subset = b'<!DOCTYPE article PUBLIC "-//NLM//DTD JATS" "x.dtd" [ <!ENTITY trial "WGJ"> ]>'
    (knowledge_base / "subset.nxml").write_bytes(re.sub(rb"<!DOCTYPE[^>]*>", subset, jats, count=1))
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert "2 documents: 2 finished, 0 open" in result.stdout and "  done        2" in result.stdout, result.stdout
    documents = pl.read_parquet(tmp_path / "exports" / "atlas_documents.parquet")
    html = documents.filter(pl.col("document_key") == "layout.html").row(0, named=True)
    text = (tmp_path / "artifacts" / html["text_path"]).read_text()
    assert "# Исследование" in text and "Смертность снизилась на 12%." in text and "n = 30 per arm" in text
    jats_row = documents.filter(pl.col("document_key") == "subset.nxml").row(0, named=True)
    assert jats_row["characters"] > 20_000


def test_the_same_bytes_under_two_names_take_the_name_that_fits(tmp_path, knowledge_base):
    (knowledge_base / "x.pdf").write_text("Mortality was 12% in the treated arm.\n")
    (knowledge_base / "x.txt").write_text("Mortality was 12% in the treated arm.\n")
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert "scan: 1 new, 0 edited, 0 removed, 1 duplicate" in result.stdout
    assert "[1/1] x.txt: done" in result.stdout, result.stdout


def test_a_knowledge_base_that_is_a_file_or_an_unwritable_home_is_a_clear_error(tmp_path):
    a_file = tmp_path / "paper.pdf"
    a_file.write_bytes(text_pdf("x"))
    env = {"DAGSTER_HOME": str(tmp_path / "home"), "ATLAS_KNOWLEDGE_BASE": str(a_file)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert f"the knowledge base must be a folder or prefix, not a file: {a_file}" in result.stderr
    env = {"DAGSTER_HOME": str(a_file / "home"), "ATLAS_KNOWLEDGE_BASE": str(tmp_path)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"DAGSTER_HOME={a_file / 'home'} cannot be used: Not a directory" in result.stderr


# -- stopping: a signal or a killed process never leaves a document extracting ------------------------------------


def _start_run(tmp_path: Path, knowledge_base: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    # the second document (in key order) is long — 17 pages, 10 of them tables — so it is mid-parse at the signal
    copy_into(knowledge_base, "rct/PMC1216327.pdf", "rct/PMC4144850.pdf", "rct/PMC4987981.pdf", "rct/PMC5154016.pdf")
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "atlas"), "run"],
        env={**os.environ, **env},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return process, env


def _wait_for_line(process: subprocess.Popen, prefix: str, seen: list[str]) -> None:
    for line in process.stdout:  # type: ignore[union-attr]
        seen.append(line)
        if line.startswith(prefix):
            return
    raise AssertionError("".join(seen))


def test_sigterm_stops_atlas_run_cleanly(tmp_path, knowledge_base):
    process, env = _start_run(tmp_path, knowledge_base)
    seen: list[str] = []
    _wait_for_line(process, "[1/4]", seen)
    time.sleep(1.5)  # the second document is being parsed
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=120)
    output = "".join(seen) + rest
    assert process.returncode in (130, 143), output
    assert "stopped:" in output and "none is left extracting" in output
    status = run_atlas("status", "--documents", env=env, cwd=tmp_path).stdout
    assert "extracting" not in status.split("documents:", 1)[1], status
    assert "interrupted: its run was stopped" in status
    again = run_atlas("run", env=env, cwd=tmp_path)
    assert "unchanged document(s) already extracted with this version" in again.stdout
    assert "4 documents: 4 finished, 0 open" in again.stdout, again.stdout


def test_a_killed_atlas_run_leaves_no_document_extracting(tmp_path, knowledge_base):
    process, env = _start_run(tmp_path, knowledge_base)
    seen: list[str] = []
    _wait_for_line(process, "[1/4]", seen)
    time.sleep(1.5)
    process.kill()
    process.wait(timeout=60)
    status = run_atlas("status", "--documents", env=env, cwd=tmp_path).stdout
    rows = [line for line in status.splitlines() if line.startswith("PMC")]
    assert len(rows) == 4 and not any(" extracting " in row for row in rows), status
    assert any("pending     interrupted: its run was stopped" in row for row in rows), status
