"""A person's decision on one extracted value, and the append-only audit log that keeps every one.

Each decision is its own object in the artifact store (``reviews/decisions/<key>/<stamp>-<id>.json``), written once
and never changed: two reviewers, the page and an imported workbook can decide at the same time without a lost
write, re-runs and template changes never touch the log, and ``atlas migrate`` carries it like any other file.

A decision names what it was made on — the document's sha256, the extraction version and the model's value — so a
later extraction can tell whether the decision still applies (``review.outcome``), and a decision made on an
extraction that has changed since it was shown is refused (``decide``).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from atlas_pipeline.extraction.templates import TemplateField
from atlas_pipeline.ops.redaction import redact
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import DECISIONS, decision_path, decisions_dir
from atlas_pipeline.store.records import ExtractionRecord

Action = Literal["approve", "correct", "reject"]
ACTIONS: tuple[str, ...] = ("approve", "correct", "reject")


class DecisionRefused(ValueError):
    """The decision cannot be recorded; the message says why in words a reviewer understands."""


class MadeOn(BaseModel):
    """The extraction a decision was made on."""

    sha256: str
    extraction_version: str
    model_value: Any = None
    tier: str = ""


class Decision(BaseModel):
    id: str
    document: str
    field: str
    action: Action
    value: Any = None  # the corrected value (``correct``)
    quote: str | None = None  # where the reviewer found it (``correct``, optional)
    note: str = ""
    reviewer: str = Field(min_length=1)
    decided_at: str  # ISO 8601, UTC, microseconds: the later decision wins
    made_on: MadeOn
    source: str = "page"  # page | workbook:<file name>

    @field_validator("note", "reviewer")
    @classmethod
    def _mask_secrets(cls, value: str) -> str:
        return redact(value)

    @property
    def order(self) -> tuple[str, str]:
        return self.decided_at, self.id

    def outcome(self) -> str:
        """What the reviewer said, comparable between reviewers: ``approve``, ``reject``, ``correct → 42``."""
        if self.action == "correct":
            return f"correct → {value_text(self.value)}"
        return self.action


def value_text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def same_value(a: Any, b: Any) -> bool:
    """Model values compared as JSON (1 and 1.0 are the same number; key order does not matter)."""
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str) or (
        isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool) and float(a) == float(b)
    )


def coerce_value(raw: Any, field: TemplateField | None) -> Any:
    """A corrected value typed like the template field, or ``DecisionRefused`` saying what is wrong with it."""
    if isinstance(raw, str):
        raw = raw.strip()
    if raw is None or raw == "":
        raise DecisionRefused("a correction needs a value (reject the field if the document does not report it)")
    kind = field.type if field else "string"
    try:
        if kind == "integer":
            number = float(str(raw).replace(",", "")) if not isinstance(raw, int | float) else raw
            if isinstance(number, bool) or float(number) != int(float(number)):
                raise ValueError
            return int(float(number))
        if kind == "number":
            if isinstance(raw, bool):
                raise ValueError
            return float(str(raw).replace("−", "-")) if not isinstance(raw, int | float) else float(raw)
        if kind == "boolean":
            if isinstance(raw, bool):
                return raw
            text = str(raw).lower()
            if text in ("true", "yes", "1"):
                return True
            if text in ("false", "no", "0"):
                return False
            raise ValueError
        if kind == "enum":
            allowed = field.enum or [] if field else []
            if str(raw) not in allowed:
                raise DecisionRefused(f"{raw!r} is not one of {', '.join(allowed)}")
            return str(raw)
        if kind == "date":
            if isinstance(raw, datetime | date):
                return raw.isoformat()[:10]
            return date.fromisoformat(str(raw)).isoformat()
        if kind == "list":
            if isinstance(raw, list):
                return raw
            text = str(raw)
            if text.startswith("["):
                value = json.loads(text)
                if not isinstance(value, list):
                    raise ValueError
                return value
            return [part.strip() for part in text.split(";") if part.strip()]
    except DecisionRefused:
        raise
    except (ValueError, TypeError, json.JSONDecodeError):
        expected = {
            "integer": "a whole number",
            "number": "a number",
            "boolean": "true or false",
            "date": "a date (YYYY-MM-DD)",
            "list": "a list (items separated by ';' or a JSON list)",
        }[kind]
        raise DecisionRefused(f"{raw!r} is not {expected}") from None
    return str(raw)


def now_stamp() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _file_stamp(decided_at: str) -> str:
    return decided_at.replace("-", "").replace(":", "").replace("+0000", "Z").replace("+00:00", "Z")


def decide(
    store: Store,
    record: ExtractionRecord | None,
    field: str,
    action: str,
    *,
    reviewer: str,
    shown: tuple[str, str] | None,
    template_field: TemplateField | None = None,
    value: Any = None,
    quote: str | None = None,
    note: str = "",
    source: str = "page",
) -> Decision:
    """Record one decision on ``field`` of the document's current extraction and return it.

    ``shown``: (sha256, extraction version) of the extraction the reviewer looked at; when the extraction has
    changed since, the decision is refused — deciding on values that are no longer there would be a silent error.
    """
    if record is None:
        raise DecisionRefused("this document has no extraction to review yet")
    if action not in ACTIONS:
        raise DecisionRefused(f"unknown decision {action!r}: use approve, correct or reject")
    extracted = record.fields.get(field)
    if not isinstance(extracted, dict):
        known = ", ".join(name for name, f in record.fields.items() if isinstance(f, dict)) or "none"
        raise DecisionRefused(f"{record.key} has no extracted field {field!r} (fields: {known})")
    if shown is not None and (shown[0] != record.sha256 or shown[1] != record.extraction_version):
        raise DecisionRefused(
            f"the extraction of {record.key} changed since this was shown (made on {shown[0][:12]}/{shown[1]}, now "
            f"{record.sha256[:12]}/{record.extraction_version}): look at the new values and decide again"
        )
    reviewer = (reviewer or "").strip()
    if not reviewer:
        raise DecisionRefused("say who decides: enter your name (or set ATLAS_REVIEWER)")
    corrected = coerce_value(value, template_field) if action == "correct" else None
    decision = Decision(
        id=uuid.uuid4().hex[:12],
        document=record.key,
        field=field,
        action=action,  # type: ignore[arg-type]  # checked against ACTIONS above
        value=corrected,
        quote=(quote or "").strip() or None if action == "correct" else None,
        note=(note or "").strip(),
        reviewer=reviewer,
        decided_at=now_stamp(),
        made_on=MadeOn(
            sha256=record.sha256,
            extraction_version=record.extraction_version,
            model_value=extracted.get("value"),
            tier=str(extracted.get("tier") or ""),
        ),
        source=source,
    )
    store.write_json(f"{decisions_dir(record.key)}/{decision_file(decision)}", decision.model_dump(mode="json"))
    return decision


def decision_file(decision: Decision) -> str:
    """The decision's file name in the log: its time first, so names sort as decisions were made."""
    return decision_path(decision.document, _file_stamp(decision.decided_at), decision.id).rsplit("/", 1)[-1]


def load_decisions(store: Store, key: str) -> list[Decision]:
    """Every decision on a document, oldest first."""
    decisions = [Decision.model_validate(store.read_json(path)) for path in store.files(decisions_dir(key))]
    return sorted(decisions, key=lambda decision: decision.order)


def decision_marks(store: Store) -> dict[str, str]:
    """Per document, the name of its newest decision file: what the review sensor compares between ticks."""
    marks: dict[str, str] = {}
    for path in store.files(DECISIONS):
        parts = path.split("/")
        if len(parts) < 4:
            continue
        key, name = "/".join(parts[2:-1]), parts[-1]
        if name > marks.get(key, ""):
            marks[key] = name
    return marks
