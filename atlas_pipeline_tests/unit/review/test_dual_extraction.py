"""Dual extraction by hand: two extractors, their completions, the comparison of fields and group entries (the same
outcome added by both is one entry, compared cell by cell), an adjudicator's settlement, and the agreement figures
with the groups in them."""

import pytest

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.outputs.agreement_report import agreement_rows
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import DecisionRefused, DecisionRequest, decide, load_decisions
from atlas_pipeline.review.extraction_team import (
    assign,
    comparison,
    complete,
    load_assignments,
    reopen,
    round_robin,
    team_of,
)
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord
from atlas_pipeline_tests.support.records import extraction_record

DEPLOYMENT = Deployment.from_environment({})
TEMPLATE = DEPLOYMENT.load_template()
DERIVATIONS = DEPLOYMENT.derivations()
TIERS = frozenset({"verified"})


def _by_hand() -> ExtractionRecord:
    """A skip-mode record: every single field empty, no entries (what the default mode gives a person)."""
    record = extraction_record(fields={"study_id": {"module": "metadata", "value": None, "tier": "not_extracted"}})
    record.fields["n_control"] = {"module": "baseline", "value": None, "tier": "not_extracted"}
    return record.model_copy(update={"mode": "skip"})


def _outcome(store, record, who, number, **values):
    group = TEMPLATE.field_definition("outcomes[1].outcome")
    assert group is not None
    for name, value in values.items():
        field = f"outcomes[{number}].{name}"
        shown = (record.sha256, record.extraction_version)
        decide(
            store,
            record,
            DecisionRequest(
                field,
                "correct",
                reviewer=who,
                shown=shown,
                value=value,
                template_field=TEMPLATE.field_definition(field),
                note=f"{who}'s {name}",
            ),
        )


def _review(store, record):
    return review_document(record, load_decisions(store, record.key, withdrawn=True), TIERS, DERIVATIONS)


def test_two_extractors_complete_then_every_difference_waits_for_the_adjudicator(tmp_path):
    store, record = Store(str(tmp_path)), _by_hand()
    shown = (record.sha256, record.extraction_version)
    n_control = TEMPLATE.field_definition("n_control")
    decide(
        store,
        record,
        DecisionRequest("n_control", "correct", reviewer="ana", shown=shown, value="30", template_field=n_control),
    )
    decide(store, record, DecisionRequest("study_id", "correct", reviewer="ana", shown=shown, value="Valois 2005"))
    decide(
        store,
        record,
        DecisionRequest("n_control", "correct", reviewer="ben", shown=shown, value="29", template_field=n_control),
    )
    arms = {"intervention": "White Grape Juice", "comparator": "Water", "time_point": "after randomization"}
    _outcome(store, record, "ana", 1001, outcome="Duration of diarrhea", **arms, mean_intervention="47.5",
             sd_intervention="38.9")  # fmt: skip
    _outcome(store, record, "ana", 1002, outcome="Stool output", **arms, mean_intervention="1.2")
    # ben types the same outcome with other spacing and case: one entry, whatever its number
    _outcome(store, record, "ben", 1003, outcome="duration of  Diarrhea", **{k: v.lower() for k, v in arms.items()},
             mean_intervention="47.5", sd_intervention="39.8")  # fmt: skip

    team = team_of(record.key, load_decisions(store, record.key), None, 2)
    assert team.extractors == ["ana", "ben"] and team.full and not team.open
    assert "has its extractors already: ana and ben" in team.refusal("cara")
    assert team.blind_to("ana", "extractor", hide_models=True) == ("models", "reviewers")
    assert team.blind_to("dan", "adjudicator", hide_models=False) == ()
    complete(store, record, team, "ana", ["reviewers"])
    review = _review(store, record)
    # before both have completed, a value only one of them entered is no difference yet
    assert review.fields["study_id"].disagreement == {}
    assert review.fields["outcomes[1002].outcome"].disagreement == {}
    assert "reopen it" in team_of(record.key, load_decisions(store, record.key), None, 2).refusal("ana")

    team = team_of(record.key, load_decisions(store, record.key), None, 2)
    complete(store, record, team, "ben", ["reviewers"])
    team = team_of(record.key, load_decisions(store, record.key), None, 2)
    assert team.open and team.blind_to("cara", "extractor", hide_models=False) == ()
    with pytest.raises(DecisionRefused, match="can no longer be reopened"):
        reopen(store, record, team, "ana")

    review = _review(store, record)
    fields = review.fields
    assert "outcomes[1003].outcome" not in fields  # ben's entry is ana's first one
    sd = fields["outcomes[1001].sd_intervention"]
    assert sd.disagreement == {"ana": "correct → 38.9", "ben": "correct → 39.8"}
    assert fields["outcomes[1001].mean_intervention"].disagreement == {}  # both 47.5
    assert fields["outcomes[1002].outcome"].disagreement == {"ana": "correct → Stool output", "ben": "no value"}
    assert fields["study_id"].disagreement == {"ana": "correct → Valois 2005", "ben": "no value"}
    assert fields["n_control"].disagreement == {"ana": "correct → 30", "ben": "correct → 29"}
    assert not review.approved and review.disagreements >= 4

    state = DocumentState(key=record.key, status=record.status, reason="", extraction=record, review=review)
    rows = {row["field"]: row for row in agreement_rows([state], TEMPLATE)}
    assert rows["outcomes.mean_intervention"]["reviewers_agreed"] == 1  # the groups are in the figures
    assert rows["outcomes.sd_intervention"]["reviewers_compared"] == 1
    assert rows["outcomes.sd_intervention"]["reviewers_agreed"] == 0
    assert rows["n_control"]["reviewers_percent"] == 0.0

    # the adjudicator settles a field and a grid cell; the entries stay one
    decide(
        store,
        record,
        DecisionRequest(
            "outcomes[1001].sd_intervention",
            "correct",
            reviewer="dan",
            shown=shown,
            value="38.9",
            role="adjudicator",
            template_field=TEMPLATE.field_definition("outcomes[1].sd_intervention"),
        ),
    )
    decide(
        store,
        record,
        DecisionRequest(
            "n_control",
            "correct",
            reviewer="dan",
            shown=shown,
            value="30",
            role="adjudicator",
            template_field=n_control,
        ),
    )
    fields = _review(store, record).fields
    settled = fields["outcomes[1001].sd_intervention"]
    assert (settled.final_value, settled.adjudicated_by, settled.disagreement) == (38.9, "dan", {})
    assert (fields["n_control"].final_value, fields["n_control"].provenance) == (
        30,
        "reviewer_added",
    )  # by hand: the model gave none
    entries = {name.split(".")[0] for name in fields if name.startswith("outcomes[")}
    assert entries == {"outcomes[1001]", "outcomes[1002]"}


def test_an_extractor_reopens_only_before_the_comparison_and_assignments_count(tmp_path):
    store, record = Store(str(tmp_path)), _by_hand()
    assign(store, {record.key: ["ana", "ben"]}, by="dan")
    assignment = load_assignments(store)[record.key]
    team = team_of(record.key, [], assignment, 2)
    assert team.extractors == ["ana", "ben"] and "assigned by dan" in team.refusal("cara")
    assert team.refusal("ben") is None and team.state_of("ana") == "assigned"
    complete(store, record, team, "ana", ["reviewers"])
    team = team_of(record.key, load_decisions(store, record.key), assignment, 2)
    assert team.state_of("ana") == "completed" and not team.open
    reopen(store, record, team, "ana")
    team = team_of(record.key, load_decisions(store, record.key), assignment, 2)
    assert team.state_of("ana") == "assigned" and comparison(load_decisions(store, record.key)) is None
    assign(store, {record.key: []}, by="dan")  # back to whoever starts first
    assert record.key not in load_assignments(store)


def test_round_robin_gives_every_study_two_extractors_in_turn():
    shared = round_robin([["a.pdf", "a.xml"], ["b.pdf"], ["c.pdf"]], ["ana", "ben", "cara"])
    assert shared == {
        "a.pdf": ["ana", "ben"],
        "a.xml": ["ana", "ben"],
        "b.pdf": ["cara", "ana"],
        "c.pdf": ["ben", "cara"],
    }
    with pytest.raises(ValueError, match="need 2 people"):
        round_robin([["a.pdf"]], ["ana"])


def test_an_entry_added_by_hand_lines_up_with_the_models_and_stays_one_when_edited(tmp_path):
    """A model extracted outcome 1; Ben, blind to the models, types the same outcome as 1001: his values meet the
    model's entry cell by cell (not a recheck, not a second entry), and his later edit of the lined-up row, or an
    undo of it, keeps it one entry."""
    from atlas_pipeline.review.decisions import withdraw
    from atlas_pipeline.review.final_values import decisions_by_field

    identity = {"outcome": "Stool output", "intervention": "WGJ", "comparator": "Water", "time_point": "day 3"}
    fields = {
        f"outcomes[1].{name}": {"module": "outcomes", "value": value, "tier": "verified", "quote": str(value)}
        for name, value in {**identity, "mean_intervention": 4.0}.items()
    }
    record = extraction_record(fields=fields)
    store, shown = Store(str(tmp_path)), (record.sha256, record.extraction_version)
    decide(store, record, DecisionRequest("outcomes[1].mean_intervention", "approve", reviewer="ana", shown=shown))
    _outcome(store, record, "ben", 1001, **identity, mean_intervention="5")
    for who in ("ana", "ben"):
        team = team_of(record.key, load_decisions(store, record.key), None, 2)
        complete(store, record, team, who, ["models", "reviewers"] if who == "ben" else ["reviewers"])
    fields = _review(store, record).fields
    mean = fields["outcomes[1].mean_intervention"]
    assert mean.disagreement == {"ana": "approve", "ben": "correct → 5.0"} and mean.provenance != "recheck"
    assert fields["outcomes[1].outcome"].disagreement == {}  # the same outcome, as both wrote it
    assert not [name for name in fields if name.startswith("outcomes[1001]")]

    # Ben edits the lined-up row (the grid shows it as entry 1), then takes it back: still one entry
    decide(
        store,
        record,
        DecisionRequest("outcomes[1].mean_intervention", "correct", reviewer="ben", shown=shown, value="4"),
    )
    assert not [name for name in _review(store, record).fields if name.startswith("outcomes[1001]")]
    aligned = decisions_by_field(record, load_decisions(store, record.key), DERIVATIONS)
    withdraw(
        store, record, "outcomes[1].mean_intervention", reviewer="ben", among=aligned["outcomes[1].mean_intervention"]
    )
    assert not [name for name in _review(store, record).fields if name.startswith("outcomes[1001]")]
    # a third person's value, once compared, is not one of the extractions
    decide(
        store,
        record,
        DecisionRequest(
            "outcomes[1].mean_intervention",
            "correct",
            reviewer="carla",
            shown=shown,
            value="9",
            template_field=TEMPLATE.field_definition("outcomes[1].mean_intervention"),
        ),
    )
    assert "carla" not in _review(store, record).fields["outcomes[1].mean_intervention"].reviewer_outcomes
