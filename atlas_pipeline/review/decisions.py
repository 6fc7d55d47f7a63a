"""A person's decision on one extracted value, and the append-only audit log that keeps every one.

Each decision is its own object in the artifact store (``reviews/decisions/<key>/<stamp>-<id>.json``), written once
and never changed: two reviewers, the page and an imported workbook can decide at the same time without a lost
write, re-runs and template changes never touch the log, and ``atlas migrate`` carries it like any other file.

A decision names what it was made on — the document's sha256, the extraction version and the model's value — so a
later extraction can tell whether the decision still applies (``review.final_values``), and a decision made on an
extraction that has changed since it was shown is refused (``decide``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from atlas_pipeline.core.clock import now_stamp
from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.core.numbers import NotANumber, read_number
from atlas_pipeline.core.p_values import parse_p
from atlas_pipeline.core.plausibility import MAX_MAGNITUDE, value_problem
from atlas_pipeline.core.redaction import redact
from atlas_pipeline.core.templates import TemplateField, entry_field_name, entry_field_parts
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.review.person_quotes import QuoteCheck, Selection, check_quote
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import DECISIONS, decision_path, decisions_dir
from atlas_pipeline.store.records import NOT_EXTRACTED, ExtractionRecord

LOGGER = logging.getLogger(__name__)
# withdraw: a reviewer's undo (``withdraw``); complete: an extractor marks their extraction of the document complete
# (``review.extraction_team``), recorded on the whole document (``WHOLE_DOCUMENT``), never on a field
Action = Literal["approve", "correct", "reject", "withdraw", "complete"]
ACTIONS: tuple[str, ...] = ("approve", "correct", "reject")
WHOLE_DOCUMENT = "*"  # the field a document-level entry of the log (a completion) is recorded on
Role = Literal["reviewer", "adjudicator"]
# why a value was rejected: the document does not report it, or it does and the value, the quote or the field is wrong
REJECT_REASONS: tuple[str, ...] = ("not_reported", "wrong_value", "wrong_quote", "not_applicable")
# what a reviewer did not see when deciding: other reviewers' decisions, the models' values (an extraction by hand)
BLIND_TO: tuple[str, ...] = ("reviewers", "models")


class DecisionRefused(AtlasError, ValueError):
    """The decision cannot be recorded; the message says why in words a reviewer understands."""


class MadeOn(BaseModel):
    """The extraction a decision was made on."""

    sha256: str
    extraction_version: str
    model_value: Any = None
    tier: str = ""
    entry: dict[str, Any] = Field(default_factory=dict)  # a group entry's identity values (the outcome it was about)


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
    role: Role = "reviewer"  # an adjudicator's decision settles a disagreement between reviewers (consensus)
    blind_to: list[str] = Field(default_factory=list)  # who saw what: hidden when deciding (``BLIND_TO``)
    reason: str = ""  # a rejection's reason (``REJECT_REASONS``)
    withdraws: str = ""  # ``withdraw``: the id of the decision taken back (the log keeps both)
    quote_check: QuoteCheck | None = None  # a correction's quote graded like a model's (``review.person_quotes``)
    extractors: list[str] = Field(default_factory=list)  # ``complete``: the document's extractors at that moment

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

    @property
    def on_a_field(self) -> bool:
        """Whether this is a decision on a value (not a document's completion, not an undo)."""
        return self.action in ACTIONS


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


def _same_text(shown: str, current: str) -> bool:
    """A value as shown (on the page, or read back from a workbook cell) against the model's value now. No value is
    "—" on the page and an empty cell in a workbook: the same."""
    if shown.strip() == current.strip() or {shown.strip(), current.strip()} <= {"", value_text(None)}:
        return True
    try:
        return float(shown) == float(current)
    except ValueError:
        return False


def coerce_value(raw: Any, field: TemplateField | None) -> Any:
    """A corrected value typed like the template field, or ``DecisionRefused`` saying what is wrong with it."""
    if isinstance(raw, str):
        raw = raw.strip()
    if raw is None or raw == "":
        raise DecisionRefused("a correction needs a value (reject the field if the document does not report it)")
    kind = field.type if field else "string"
    if kind == "number" and field is not None and field.name.startswith("p_value") and isinstance(raw, str):
        written = parse_p(raw)
        if written is not None and not written.exact and written.value is not None:
            _plausible(field, written.value)
            return str(written)  # a threshold keeps its sign: "<0.001" is data, never the number 0.001
    try:
        if kind in ("integer", "number"):
            if isinstance(raw, bool):
                raise ValueError
            try:
                number = read_number(str(raw)) if not isinstance(raw, int | float) else raw
            except NotANumber as refused:
                if str(refused).endswith(" is not a number"):
                    raise ValueError from None  # said below as the field's type says it ("not a whole number")
                raise DecisionRefused(str(refused)) from None
            if isinstance(number, float) and math.isnan(number):
                raise ValueError
            if isinstance(number, float) and math.isinf(number) and field is not None:
                raise DecisionRefused(
                    f"{raw!r} is beyond any plausible {field.name} (at most {MAX_MAGNITUDE:.0e} in size)"
                )
            _plausible(field, number)  # beyond any plausible value (inf too): refused with the reason
            if kind == "number":
                return _plausible(field, float(number))
            if float(number) != int(number):
                raise ValueError
            return _plausible(field, int(number))
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
            return datetime.fromisoformat(str(raw)).date().isoformat()  # also an Excel date cell read as text
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
    except (ValueError, TypeError, OverflowError, json.JSONDecodeError):
        expected = {
            "integer": "a whole number",
            "number": "a number",
            "boolean": "true or false",
            "date": "a date (YYYY-MM-DD)",
            "list": "a list (items separated by ';' or a JSON list)",
        }[kind]
        raise DecisionRefused(f"{raw!r} is not {expected}") from None
    return str(raw)


def _plausible(field: TemplateField | None, number: float | int) -> float | int:
    """The number, or ``DecisionRefused`` when it cannot be what the field is (``core.plausibility``)."""
    problem = value_problem(field.name, number, entering=True) if field is not None else None
    if problem is not None:
        raise DecisionRefused(problem)
    return number


def file_stamp(decided_at: str) -> str:
    return decided_at.replace("-", "").replace(":", "").replace("+0000", "Z").replace("+00:00", "Z")


MAX_REVIEWER_CHARS = 80


def reviewer_name(name: str | None) -> str:
    """A reviewer's name as recorded: NFC, trimmed; refused when empty, longer than ``MAX_REVIEWER_CHARS`` or holding
    a control, format or bidirectional character (a right-to-left override shows "alice" for what is stored as
    someone else's name). Until reviewers log in, a name is all the audit log has: it must read as written."""
    name = unicodedata.normalize("NFC", name or "").strip()
    if not name:
        raise DecisionRefused("say who decides: enter your name (or set ATLAS_REVIEWER)")
    if len(name) > MAX_REVIEWER_CHARS:
        raise DecisionRefused(f"a reviewer's name is at most {MAX_REVIEWER_CHARS} characters (this one: {len(name):,})")
    hidden = sorted({f"U+{ord(c):04X}" for c in name if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})
    if hidden:
        raise DecisionRefused(
            f"a reviewer's name cannot hold control or direction characters ({', '.join(hidden[:5])}): type it plainly"
        )
    return name


@dataclass(frozen=True)
class DecisionRequest:
    """One decision as a person (the page, a workbook row) asks for it, before it is checked and recorded.

    ``shown``: (sha256, extraction version) of the extraction the reviewer looked at, and ``shown_value`` the
    model's value as shown (``value_text``); when either has changed since, the decision is refused — deciding on
    values that are no longer there would be a silent error. ``decision_id``: a stable id (a workbook row); a
    decision with that id already in the log, or one saying exactly the same about the same value, is not written
    again. ``role``: ``adjudicator`` settles a disagreement between reviewers; ``blind_to``: what the reviewer did
    not see (``BLIND_TO``), recorded with the decision. ``scope``: the document's text, to grade a correction's quote
    as a model's would be (``selected_on``: the page its words were selected on; ``selection``: the words selected,
    ``scope`` then being those words — ``review.person_quotes``). ``proposed``: a value the review proposes where
    the model gave none (a derived value: ``value``, ``tier``) — the decision is made on it, as on a model's value.
    """

    field: str
    action: str
    reviewer: str
    shown: tuple[str, str] | None
    shown_value: str | None = None
    template_field: TemplateField | None = None
    value: Any = None
    quote: str | None = None
    note: str = ""
    source: str = "page"
    decision_id: str = ""
    identity: Sequence[str] = ()
    role: str = "reviewer"
    blind_to: Sequence[str] = ()
    reason: str = ""
    scope: EvidenceScope | None = None
    selected_on: int | None = None
    proposed: Mapping[str, Any] | None = None
    selection: Selection | None = None


@dataclass
class KnownLog:
    """A document's whole log (withdrawals included) held by a caller that records many decisions on it at once — a
    workbook's rows —: read once, indexed by field, each decision recorded added to it (linear in the rows)."""

    decisions: list[Decision]

    def __post_init__(self) -> None:
        self.ids: set[str] = set()
        self.taken_back: set[str] = set()
        self.by_field: dict[str, list[Decision]] = {}
        self.said: set[tuple] = set()  # what each decision said, on what (``said_key``): a repeat is found at once
        for decision in list(self.decisions):
            self._index(decision)

    def _index(self, decision: Decision) -> None:
        self.ids.add(decision.id)
        if decision.action == "withdraw":
            self.taken_back.add(decision.withdraws)
        self.by_field.setdefault(decision.field, []).append(decision)
        self.said.add(said_key(decision))

    def add(self, decision: Decision) -> None:
        self.decisions.append(decision)
        self._index(decision)

    def on(self, field: str) -> list[Decision]:
        return self.by_field.get(field, [])

    def counts_on(self, field: str) -> bool:
        """Whether a decision that counts (not a withdrawal, not taken back) is on ``field``."""
        return any(d.action != "withdraw" and d.id not in self.taken_back for d in self.on(field))


def said_key(decision: Decision) -> tuple:
    """What a decision says, by whom, on which value: two decisions with one key say the same thing."""
    made_on = decision.made_on
    return _said(
        decision.field,
        decision.reviewer,
        decision.action,
        decision.value,
        (made_on.sha256, made_on.extraction_version),
        made_on.model_value,
    )


def _said(field: str, reviewer: str, action: str, value: Any, on: tuple[str, str], model_value: Any) -> tuple:
    def same(item: Any) -> Any:  # 30 and 30.0 are one number, as ``same_value`` has it
        if isinstance(item, int | float) and not isinstance(item, bool):
            return float(item)
        return json.dumps(item, sort_keys=True, default=str)

    return (field, reviewer, action, same(value), *on, same(model_value))


def decide(
    store: Store, record: ExtractionRecord | None, request: DecisionRequest, known: KnownLog | None = None
) -> Decision | None:
    """Record one decision (``DecisionRequest``) on a field of the document's current extraction and return it; None
    when the log already holds it (the same ``decision_id``, or exactly the same said of the same value). ``known``:
    the document's whole log (withdrawals included) as the caller holds it — read once for many decisions (a
    workbook's rows), the decision recorded appended to it — instead of read again for this one."""
    reason, reviewer, quote = request.reason, request.reviewer, request.quote  # normalised below
    reason = (reason or "").strip().lower().replace(" ", "_")
    if reason and (request.action != "reject" or reason not in REJECT_REASONS):
        raise DecisionRefused(
            f"a reason ({reason!r}) goes with a rejection only, and is one of {', '.join(REJECT_REASONS)}"
        )
    if request.role not in ("reviewer", "adjudicator"):
        raise DecisionRefused(f"unknown role {request.role!r}: reviewer or adjudicator")
    unknown = sorted(set(request.blind_to) - set(BLIND_TO))
    if unknown:
        raise DecisionRefused(f"unknown blindness {', '.join(unknown)}: {' or '.join(BLIND_TO)}")
    if record is None:
        raise DecisionRefused("this document has no extraction to review yet")
    if request.action not in ACTIONS:
        raise DecisionRefused(f"unknown decision {request.action!r}: use approve, correct or reject")
    by_person = request.template_field is not None and request.template_field.by_person
    if by_person and request.action == "correct" and request.value not in (None, "") and not request.note.strip():
        raise DecisionRefused(
            f"{request.field}: a judgement departing from the algorithm's needs its reason (write it in the note)"
        )
    extracted = record.values().get(request.field)
    if request.proposed is not None and (extracted is None or extracted.get("value") is None):
        # a value the review proposes where no model gave one (a derived value), in every mode: decided on as shown
        extracted = {**(extracted or {}), "value": request.proposed.get("value"), "tier": request.proposed.get("tier")}
    if extracted is not None and extracted.get("tier") == NOT_EXTRACTED and request.action == "approve":
        raise DecisionRefused(
            f"no value was extracted for {request.field}: enter the value found in the document (correct), or reject "
            "it as not reported"
        )
    if extracted is None:
        group, entry, _ = entry_field_parts(request.field)
        if not (
            group
            and entry is not None
            and request.template_field is not None
            and request.action in ("correct", "reject")
        ):
            known = ", ".join(record.values()) or "none"
            raise DecisionRefused(f"{record.key} has no extracted field {request.field!r} (fields: {known})")
        # an entry the model missed, added by a person (``correct``), or such a value taken back (``reject``)
        if known is not None:
            unknown = not known.counts_on(request.field)
        else:
            unknown = not any(d.field == request.field for d in load_decisions(store, record.key))
        # nothing to reject — but an adjudicator may settle on "not reported"
        if request.action == "reject" and request.role != "adjudicator" and unknown:
            raise DecisionRefused(f"{request.field} was neither extracted nor added: nothing to reject")
        extracted = {}
    if request.shown is not None and (
        request.shown[0] != record.sha256 or request.shown[1] != record.extraction_version
    ):
        raise DecisionRefused(
            f"the extraction of {record.key} changed since this was shown (made on "
            f"{request.shown[0][:12]}/{request.shown[1]}, now {record.sha256[:12]}/{record.extraction_version}): look "
            "at the new values and decide again"
        )
    if request.shown_value is not None and not _same_text(request.shown_value, value_text(extracted.get("value"))):
        raise DecisionRefused(
            f"the model's value of {request.field} changed since this was shown ({request.shown_value!r}, now "
            f"{value_text(extracted.get('value'))!r}): look at the new value and decide again"
        )
    reviewer = reviewer_name(reviewer)
    corrected = coerce_value(request.value, request.template_field) if request.action == "correct" else None
    quote = (quote or "").strip() or None if request.action == "correct" else None
    checked = (
        check_quote(
            request.scope,
            request.field,
            request.template_field,
            corrected,
            quote,
            request.selected_on,
            request.selection,
        )
        if request.scope and quote
        else None
    )
    if known is not None:  # the log in hand, indexed: a repeat found at once (linear in a workbook's rows)
        on = (record.sha256, record.extraction_version)
        said = _said(request.field, reviewer, request.action, corrected, on, extracted.get("value"))
        if request.decision_id in known.ids or said in known.said:
            return None  # already in the log: an import run again, or the same workbook row dropped twice
        earlier_ones: list[Decision] = []
    else:
        earlier_ones = (
            load_decisions(store, record.key, withdrawn=True) if request.decision_id or request.source != "page" else []
        )
    for earlier in earlier_ones:
        repeated = (
            earlier.field == request.field
            and (earlier.reviewer, earlier.action, earlier.value) == (reviewer, request.action, corrected)
            and (earlier.made_on.sha256, earlier.made_on.extraction_version)
            == (record.sha256, record.extraction_version)
            and same_value(earlier.made_on.model_value, extracted.get("value"))
        )
        if earlier.id == request.decision_id or repeated:
            return None  # already in the log: an import run again, or the same workbook row dropped twice
    decision = Decision(
        id=request.decision_id or uuid.uuid4().hex[:12],
        document=record.key,
        field=request.field,
        action=request.action,  # type: ignore[arg-type]  # checked against ACTIONS above
        value=corrected,
        quote=quote,
        quote_check=checked,
        note=(request.note or "").strip(),
        reviewer=reviewer,
        decided_at=now_stamp(),
        made_on=MadeOn(
            sha256=record.sha256,
            extraction_version=record.extraction_version,
            model_value=extracted.get("value"),
            tier=str(extracted.get("tier") or ""),
            entry=entry_identity(record.fields, request.field, request.identity),
        ),
        source=request.source,
        role=request.role,  # type: ignore[arg-type]  # checked above
        blind_to=sorted(set(request.blind_to)),
        reason=reason,
    )
    store.write_json(f"{decisions_dir(record.key)}/{decision_file(decision)}", decision.model_dump(mode="json"))
    if known is not None:
        known.add(decision)
    return decision


def entry_identity(fields: dict[str, Any], name: str, identity: Sequence[str]) -> dict[str, Any]:
    """The identity values (``identity``: the group's identity fields) of the entry a field belongs to, as
    extracted; empty for a single-valued field or an entry the model did not give."""
    group, entry, _ = entry_field_parts(name)
    if entry is None:
        return {}
    values = {key: (fields.get(entry_field_name(group, entry, key)) or {}).get("value") for key in identity}
    return values if any(value is not None for value in values.values()) else {}


def decision_file(decision: Decision) -> str:
    """The decision's file name in the log: its time first, so names sort as decisions were made."""
    return decision_path(decision.document, file_stamp(decision.decided_at), decision.id).rsplit("/", 1)[-1]


def load_decisions(store: Store, key: str, *, withdrawn: bool = False) -> list[Decision]:
    """Every readable decision on a document that counts, oldest first (a damaged file is logged and left out, never
    fatal). ``withdrawn``: also the decisions taken back and the withdrawals themselves (the whole audit log)."""
    decisions = []
    for path in store.files(decisions_dir(key)):
        try:
            decisions.append(Decision.model_validate(store.read_json(path)))
        except (ValueError, OSError) as error:
            LOGGER.warning("review decision %s cannot be read and is left out: %s", path, error)
    decisions.sort(key=lambda decision: decision.order)
    return decisions if withdrawn else counting(decisions)


def counting(decisions: list[Decision]) -> list[Decision]:
    """The decisions that count: withdrawals and the decisions they took back left out."""
    taken_back = {decision.withdraws for decision in decisions if decision.action == "withdraw"}
    return [d for d in decisions if d.action != "withdraw" and d.id not in taken_back]


def withdraw(
    store: Store, record: ExtractionRecord, field: str, *, reviewer: str, among: list[Decision] | None = None
) -> Decision:
    """Undo: take back ``reviewer``'s last decision on ``field`` that still counts — by a withdrawal added to the log
    (nothing is deleted); the decision before it, if any, counts again. ``among``: the decisions on ``field`` as the
    review lines them up (an added entry's decisions on the entry it matches), else the log's own."""
    reviewer = reviewer_name(reviewer)
    decided = among if among is not None else [d for d in load_decisions(store, record.key) if d.field == field]
    mine = [d for d in decided if d.reviewer == reviewer]
    if not mine:
        raise DecisionRefused(f"{reviewer} has no decision on {field} to undo")
    last = mine[-1]
    decision = Decision(
        id=uuid.uuid4().hex[:12],
        document=record.key,
        field=last.field,  # where it is in the log
        action="withdraw",
        reviewer=reviewer,
        decided_at=now_stamp(),
        made_on=last.made_on,
        withdraws=last.id,
        note=f"undo of {last.outcome()}",
    )
    store.write_json(f"{decisions_dir(record.key)}/{decision_file(decision)}", decision.model_dump(mode="json"))
    return decision


def stable_id(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:12]


def decision_marks(store: Store, keys: list[str] | None = None) -> dict[str, str]:
    """Per document (every one, or those of ``keys``), a mark of its decision log (how many files, and a hash of
    their names) that changes with every decision added, whatever its time stamp: what the review sensor, ``atlas
    run`` and the pages compare with the mark of the merged review."""
    names: dict[str, list[str]] = {}
    paths = store.files(DECISIONS) if keys is None else [p for key in keys for p in store.files(decisions_dir(key))]
    for path in paths:
        parts = path.split("/")
        if len(parts) >= 4:
            names.setdefault("/".join(parts[2:-1]), []).append(parts[-1])
    return {key: log_mark(files) for key, files in names.items()}


def log_mark(file_names: list[str]) -> str:
    return f"{len(file_names)}-{stable_id(*sorted(file_names))}"
