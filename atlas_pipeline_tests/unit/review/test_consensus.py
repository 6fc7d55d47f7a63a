"""Two reviewers and an adjudicator: a disagreement stays open until an adjudicator's decision settles it, and each
decision records what its reviewer did not see."""

import pytest

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.decisions import (
    DecisionRefused,
    DecisionRequest,
    decide,
    decision_marks,
    load_decisions,
    withdraw,
)
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord
from atlas_pipeline_tests.support.records import extraction_record


def _record() -> ExtractionRecord:
    field = {"module": "baseline", "value": 30, "quote": "30 were given water", "tier": "verified", "flags": []}
    return extraction_record(fields={"n_control": field})


def test_an_adjudicator_settles_what_two_reviewers_disagree_on(tmp_path):
    store, record = Store(str(tmp_path)), _record()
    shown = (record.sha256, record.extraction_version)
    decide(
        store,
        record,
        DecisionRequest(
            "n_control", "correct", reviewer="ana", shown=shown, value=29, blind_to=["models", "reviewers"]
        ),
    )
    decide(store, record, DecisionRequest("n_control", "approve", reviewer="ben", shown=shown, blind_to=["reviewers"]))
    final = review_document(record, load_decisions(store, record.key), frozenset({"verified"})).fields["n_control"]
    assert final.disagreement == {"ana": "correct → 29", "ben": "approve"} and final.adjudicated_by == ""
    assert final.final_value == 30 and final.reviewer == "ben"  # until settled, the later decision counts

    decide(
        store,
        record,
        DecisionRequest("n_control", "correct", reviewer="dan", shown=shown, value=29, role="adjudicator"),
    )
    decide(
        store, record, DecisionRequest("n_control", "approve", reviewer="ben", shown=shown)
    )  # ben again, after the adjudication
    review = review_document(record, load_decisions(store, record.key), frozenset({"verified"}))
    final = review.fields["n_control"]
    assert (final.final_value, final.provenance, final.adjudicated_by) == ("29", "reviewer_corrected", "dan")
    assert final.disagreement == {} and review.disagreements == 0
    assert final.reviewer_outcomes == {"ana": "correct → 29", "ben": "approve"}  # the adjudicator is no reviewer
    blind = {d.reviewer: d.blind_to for d in load_decisions(store, record.key)}
    assert blind["ana"] == ["models", "reviewers"] and blind["dan"] == []


def test_unknown_roles_and_blindness_are_refused(tmp_path):
    store, record = Store(str(tmp_path)), _record()
    shown = (record.sha256, record.extraction_version)
    with pytest.raises(DecisionRefused, match="unknown role"):
        decide(store, record, DecisionRequest("n_control", "approve", reviewer="ana", shown=shown, role="boss"))
    with pytest.raises(DecisionRefused, match="unknown blindness"):
        decide(
            store, record, DecisionRequest("n_control", "approve", reviewer="ana", shown=shown, blind_to=["everything"])
        )


def test_a_value_the_model_left_empty_can_be_filled_in_or_confirmed_from_a_workbook(tmp_path):
    """A workbook cell shows no value as empty, the page as "—": neither is taken for a changed model value."""
    store, record = Store(str(tmp_path)), _record()
    record.fields["p_value"] = {"module": "outcome", "value": None, "quote": None, "tier": "not_reported", "flags": []}
    shown = (record.sha256, record.extraction_version)
    filled = decide(
        store, record, DecisionRequest("p_value", "correct", reviewer="ana", shown=shown, shown_value="", value="0.006")
    )
    confirmed = decide(
        store, record, DecisionRequest("p_value", "reject", reviewer="ben", shown=shown, shown_value="—")
    )
    assert filled.value == "0.006" and confirmed.action == "reject"
    with pytest.raises(DecisionRefused, match="changed since this was shown"):
        decide(
            store, record, DecisionRequest("n_control", "approve", reviewer="ana", shown=shown, shown_value="")
        )  # 30 is a value


def test_a_rejection_says_why(tmp_path):
    store, record = Store(str(tmp_path)), _record()
    shown = (record.sha256, record.extraction_version)
    decide(store, record, DecisionRequest("n_control", "reject", reviewer="ana", shown=shown, reason="not reported"))
    final = review_document(record, load_decisions(store, record.key), frozenset({"verified"})).fields["n_control"]
    assert (final.provenance, final.reject_reason) == ("rejected", "not_reported")
    with pytest.raises(DecisionRefused, match="goes with a rejection only"):
        decide(
            store, record, DecisionRequest("n_control", "approve", reviewer="ana", shown=shown, reason="wrong_value")
        )
    with pytest.raises(DecisionRefused, match="one of not_reported"):
        decide(store, record, DecisionRequest("n_control", "reject", reviewer="ana", shown=shown, reason="boring"))


def test_undo_takes_back_ones_own_last_decision_and_keeps_the_log(tmp_path):
    store, record = Store(str(tmp_path)), _record()
    shown = (record.sha256, record.extraction_version)
    decide(store, record, DecisionRequest("n_control", "correct", reviewer="ana", shown=shown, value=29))
    decide(store, record, DecisionRequest("n_control", "reject", reviewer="ana", shown=shown, reason="wrong_value"))
    with pytest.raises(DecisionRefused, match="ben has no decision on n_control"):
        withdraw(store, record, "n_control", reviewer="ben")
    withdraw(store, record, "n_control", reviewer="ana")
    final = review_document(record, load_decisions(store, record.key), frozenset({"verified"})).fields["n_control"]
    assert (final.provenance, final.final_value) == ("reviewer_corrected", "29")  # the one before counts again
    assert [d.action for d in load_decisions(store, record.key, withdrawn=True)] == ["correct", "reject", "withdraw"]
    # the review made from the whole log carries the log's mark: nothing is left to merge after an undo
    merged = review_document(record, load_decisions(store, record.key, withdrawn=True), frozenset({"verified"}))
    assert merged.decision_mark == decision_marks(store)[record.key]


def test_reviewers_who_leave_the_same_value_agree_whatever_they_clicked(tmp_path):
    store, record = Store(str(tmp_path)), _record()
    shown = (record.sha256, record.extraction_version)
    n_control = Deployment.from_environment({}).load_template().field_definition("n_control")  # a whole number
    decide(
        store,
        record,
        DecisionRequest("n_control", "correct", reviewer="ana", shown=shown, value="30", template_field=n_control),
    )
    decide(store, record, DecisionRequest("n_control", "approve", reviewer="ben", shown=shown))
    final = review_document(record, load_decisions(store, record.key), frozenset({"verified"})).fields["n_control"]
    assert final.disagreement == {} and final.reviewer_outcomes == {"ana": "correct → 30", "ben": "approve"}
