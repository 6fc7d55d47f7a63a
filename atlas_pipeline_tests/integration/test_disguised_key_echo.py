"""An endpoint that echoes the API key disguised — base64 (alone, of ``Bearer <key>``, inside a longer base64 text),
URL-encoded, or cut to its first 12 characters — in its answer's values and quotes and in an error body (#40).
Through the real ``atlas run``, as ``test_llm_extraction.test_atlas_run_prints_no_key_an_endpoint_echoes`` does for
the key in plain text: one document answered with the forms, one refused with them."""

import base64
import json
import sqlite3
import zipfile
from pathlib import Path
from urllib.parse import quote, quote_plus

import polars as pl
import pytest

from atlas_pipeline_tests.support.helpers import run_atlas
from atlas_pipeline_tests.support.juice_trial import answer
from scripted_servers.processes import local_env

# "/", "+", "=" and a space: quote(safe=""), quote() and quote_plus() each give a different form
KEY = "sk-Echo/Key+d41d8cd98f00b204=9Zq x7"


def b64(data: bytes, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


def in_blob(before: bytes) -> tuple[str, str]:
    """A base64 text holding the key after ``before``, and its characters that carry only the key's bits."""
    blob = b64(before + KEY.encode() + b'"}')
    return blob, blob[-(-8 * len(before) // 6) : 8 * (len(before) + len(KEY)) // 6]


MIME_BEFORE = b'{"request": {"api_key": "'
BLOBS = [in_blob(b'{"k":"'[:offset]) for offset in (3, 4, 5)]  # the three alignments
ECHOED = {
    "base64": b64(KEY.encode()),
    "base64 of the bearer header": b64(f"Bearer {KEY}".encode()),
    "url-safe base64, unpadded": b64(KEY.encode(), urlsafe=True).rstrip("="),
    "quote, safe=''": quote(KEY, safe=""),
    "quote": quote(KEY),
    "quote_plus": quote_plus(KEY),
    "first 12 characters": KEY[:12],
    **{f"inside base64 at alignment {n}": blob for n, (blob, _) in enumerate(BLOBS)},
    "upper case": KEY.upper(),  # round five (#59): the key shouted, in base32, in MIME's 76-character lines
    "base32": base64.b32encode(KEY.encode()).decode(),
    "MIME base64": base64.encodebytes(
        b'{"request": {"api_key": "' + KEY.encode() + b'"}, "pad": "' + b"x" * 80
    ).decode(),
}
MIME_KEY = b64(b'{"request": {"api_key": "' + KEY.encode())[-(-8 * 26 // 6) : 8 * (26 + len(KEY)) // 6]
# what must be nowhere: the key, any 8 characters of its start, each echoed form, the key's part of each blob (and of
# the MIME lines, read joined)
NEEDLES = {KEY, KEY[:8], *ECHOED.values(), *(inner for _, inner in BLOBS), MIME_KEY}


def texts_of(path: Path) -> list[bytes]:
    """The bytes of a file, and what it holds readably: a zip's (xlsx) members, a parquet's rows, a SQLite dump."""
    data = path.read_bytes()
    texts = [data, data.replace(b"\r", b"").replace(b"\n", b"").replace(b"\\n", b"")]  # lines read joined too
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            texts += [archive.read(name) for name in archive.namelist()]
    elif path.suffix == ".parquet":
        texts.append(json.dumps(pl.read_parquet(path).rows(), default=str).encode())
    elif data.startswith(b"SQLite format 3\x00"):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as database:
            texts.append("\n".join(database.iterdump()).encode())
    return texts


def leaks(paths: list[Path], root: Path) -> list[str]:
    """Each file under ``paths`` holding a form of the key, with the form."""
    found = []
    for path in paths:
        texts = texts_of(path)
        found += [f"{path.relative_to(root)}: {n}" for n in NEEDLES if any(n.encode() in text for text in texts)]
    return sorted(found)


@pytest.fixture(scope="module")
def echoed(llm_server, tmp_path_factory):
    """``atlas run`` over two documents: ``alpha.md`` answered with every form in values and quotes (and the plain
    key), ``bravo.md`` refused with every form in the error body. Returns the folder and the command's output."""
    root = tmp_path_factory.mktemp("echoed")
    knowledge_base = root / "kb"
    knowledge_base.mkdir()
    (knowledge_base / "alpha.md").write_text("# ALPHA TRIAL\n\nWe randomised 40 adults to juice or water.\n")
    (knowledge_base / "bravo.md").write_text("# BRAVO TRIAL\n\nWe randomised 60 children to milk or water.\n")
    forms = list(ECHOED.values())
    echoing = answer(
        study_id={"value": f"Echo {forms[0]}", "quote": f"id {forms[1]}"},
        study_design={"value": f"design {forms[2]}", "quote": f"design {forms[3]}"},
        funding_source={"value": f"funded {forms[4]}", "quote": f"funded by {forms[5]}"},
        treatment_name={"value": f"juice {forms[6]}", "quote": f"juice {forms[7]}"},
        control_name={"value": f"water {forms[8]}", "quote": f"water {forms[9]}"},
        endpoint_name={"value": f"key {KEY}", "quote": f"Bearer {KEY}"},
        nct_number={"value": f"NCT {forms[10]}", "quote": f"registered {forms[11]}"},
        rob_randomization={"value": "unclear", "quote": f"random\n{forms[12]}\nend"},
    )
    refusal = "Invalid credentials: " + "; ".join(f"{name} {form}" for name, form in ECHOED.items())
    llm_server.script(*[{"when": "ALPHA TRIAL", "content": echoing}] * 3, default={"status": 400, "message": refusal})
    env = {
        **local_env(root, knowledge_base),
        "DAGSTER_HOME": str(root / "home"),
        "ATLAS_LLM_GATE_DIR": str(root / "llm-gate"),
        "ATLAS_LLM_BASE_URL": llm_server.base_url,
        "ATLAS_LLM_API_KEY": KEY,
    }
    result = run_atlas("run", env=env, cwd=root)
    assert all(request["_authorization"] == f"Bearer {KEY}" for request in llm_server.requests())
    return root, result.stdout + result.stderr


def test_the_key_echoed_disguised_is_in_no_export_run_database_or_output(echoed):
    root, output = echoed
    assert "bravo.md: failed: extract: LLM request rejected (HTTP 400): Invalid credentials: base64 ***" in output
    assert [form for form in NEEDLES if form in output] == []
    fields = pl.read_parquet(root / "exports" / "atlas_fields.parquet").filter(pl.col("document_key") == "alpha.md")
    exported = dict(zip(fields["field"], fields["model_value"], strict=True))
    # masked as the answer arrives (the grader then reads "***" as markdown emphasis: what is left is no key)
    assert exported["study_id"].startswith("Echo *") and exported["endpoint_name"].startswith("key *"), exported
    exports = [path for path in (root / "exports").rglob("*") if path.is_file()]
    assert {".xlsx", ".parquet", ".csv", ".jsonl"} <= {path.suffix for path in exports}
    assert leaks(exports, root) == []
    history = [path for path in (root / "home" / "history").rglob("*") if path.is_file()]  # Dagster's SQLite
    dumps = [texts_of(path)[-1] for path in history if path.suffix == ".db"]
    assert any(b"Invalid credentials: base64 ***" in dump for dump in dumps)  # the refusal is there, masked
    assert leaks(history, root) == []


def test_the_key_echoed_in_an_answer_is_in_no_artifact_or_search_index(echoed):
    root, _ = echoed
    refused = root / "artifacts" / "documents" / "bravo.md"
    assert leaks([path for path in refused.rglob("*") if path.is_file()], root) == []  # the error body: masked
    stored = [path for path in (root / "artifacts").rglob("*") if path.is_file()]
    stored += [path for path in (root / "home").rglob("*") if path.is_file()]
    assert leaks(stored, root) == []
