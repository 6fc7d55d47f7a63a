"""The one rule of what is final (``review.finality``), merged from real decision logs: solo, a person's decision or
the declared policy, two people who differ a dispute until one comes round or an adjudicator settles; with a team,
nothing before every extraction is complete, then what agrees or what an adjudicator settled after the comparison
opened — an earlier adjudication set aside and named; a disputed input holds a derivation back."""

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.review.decisions import DecisionRequest, decide, load_decisions
from atlas_pipeline.review.derivations import Derivations
from atlas_pipeline.review.extraction_team import complete, team_of
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.files import Store
from atlas_pipeline_tests.support.records import extraction_record

VERIFIED = frozenset({"verified"})
BLIND = ["models", "reviewers"]


def _record(**fields):
    made = {
        name: {"module": "baseline", "value": value, "quote": f"{name} was {value}", "tier": "verified", "flags": []}
        for name, value in fields.items()
    }
    return extraction_record(fields=made)


def _say(store, record, field, who, value=None, role="reviewer"):
    action = "approve" if value is None else "correct"
    shown = (record.sha256, record.extraction_version)
    decide(store, record, DecisionRequest(field, action, reviewer=who, shown=shown, value=value, role=role))


def _field(store, record, name, team=False, derivations=None):
    review = review_document(record, load_decisions(store, record.key), VERIFIED, derivations, team)
    return review.fields[name], review


def test_solo_a_persons_decision_is_final_and_two_people_who_differ_a_dispute_until_settled(tmp_path):
    store, record = Store(str(tmp_path)), _record(n_control=30, n_treatment=31)
    field, review = _field(store, record, "n_control")
    assert field.is_final and field.final_value == 30 and field.provenance == "model_verified"  # the declared policy
    _say(store, record, "n_control", "Ana", 515)
    _say(store, record, "n_control", "Ben", 516)
    field, review = _field(store, record, "n_control")
    assert field.final_state == "disputed" and field.final_or_none is None and not review.approved
    assert "Ana: correct → 515; Ben: correct → 516" in field.waiting and "either of them" in field.waiting
    _say(store, record, "n_control", "Ben", 515)  # one comes round to the other: they agree
    field, _ = _field(store, record, "n_control")
    assert field.is_final and field.final_value == "515"
    _say(store, record, "n_control", "Ben", 21)  # they differ again; an adjudicator settles
    assert _field(store, record, "n_control")[0].final_state == "disputed"
    _say(store, record, "n_control", "Dan", 21, role="adjudicator")
    field, _ = _field(store, record, "n_control")
    assert field.is_final and field.final_value == "21" and field.adjudicated_by == "Dan"


def test_with_a_team_nothing_is_final_before_both_extractions_are_complete(tmp_path):
    store, record = Store(str(tmp_path)), _record(n_control=30, n_treatment=31)
    field, review = _field(store, record, "n_control", team=True)
    assert field.final_state == "extracting" and "no extraction of this document is complete" in field.waiting
    assert field.provenance == "model_verified" and field.final_or_none is None and not review.approved
    _say(store, record, "n_control", "Ana", 29)
    team = team_of(record.key, load_decisions(store, record.key), None, 2)
    complete(store, record, team, "Ana", ["reviewers"])
    field, _ = _field(store, record, "n_control", team=True)
    assert field.final_state == "extracting" and "waiting for a second extractor (Ana completed)" in field.waiting
    field, _ = _field(store, record, "n_control")  # a completion in the log makes it a team's review whatever is said
    assert field.final_state == "extracting"
    _say(store, record, "n_control", "Ben", 29)
    team = team_of(record.key, load_decisions(store, record.key), None, 2)
    complete(store, record, team, "Ben", ["reviewers"])
    field, review = _field(store, record, "n_control", team=True)
    assert field.is_final and field.final_value == "29"  # compared and agreed
    other, _ = _field(store, record, "n_treatment", team=True)
    assert other.is_final and other.final_value == 31  # both left the model's accepted value: they agree


def test_an_adjudication_before_the_comparison_is_set_aside_and_named(tmp_path):
    store, record = Store(str(tmp_path)), _record(n_control=30)
    _say(store, record, "n_control", "Dan", 999, role="adjudicator")  # before anyone extracted
    field, _ = _field(store, record, "n_control", team=True)
    assert field.final_state == "extracting" and field.final_or_none is None and field.set_aside == ["Dan"]
    assert "Dan's adjudication before the comparison opened does not count" in field.waiting
    for who, value in (("Ana", 61), ("Ben", 62)):
        _say(store, record, "n_control", who, value)
    for who in ("Ana", "Ben"):
        complete(store, record, team_of(record.key, load_decisions(store, record.key), None, 2), who, ["reviewers"])
    field, review = _field(store, record, "n_control", team=True)
    assert field.final_state == "disputed" and field.disagreement and review.disagreements == 1
    assert field.final_or_none is None and "Dan's adjudication" in field.waiting
    _say(store, record, "n_control", "Dan", 61, role="adjudicator")  # after the comparison: it settles
    field, review = _field(store, record, "n_control", team=True)
    assert field.is_final and field.final_value == "61" and field.adjudicated_by == "Dan"


def test_a_disputed_input_holds_a_derivation_back(tmp_path):
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    store = Store(str(tmp_path))
    values = {"outcomes[1].outcome": "Relapse", "outcomes[1].percent_intervention": 42}
    values["outcomes[1].total_intervention"] = 59
    made = {
        name: {"module": "outcomes", "value": v, "quote": f"{v}", "tier": "verified", "flags": []}
        for name, v in values.items()
    }
    record = extraction_record(fields=made)
    derivations = Derivations(template)
    field, _ = _field(store, record, "outcomes[1].events_intervention", derivations=derivations)
    assert field.final_value == 25 or field.model_value == 25  # derived from accepted inputs
    _say(store, record, "outcomes[1].total_intervention", "Ana", 59)
    _say(store, record, "outcomes[1].total_intervention", "Ben", 60)
    review = review_document(record, load_decisions(store, record.key), VERIFIED, derivations)
    assert "outcomes[1].events_intervention" not in review.fields  # no value derived from a disputed input …
    unmade = review.unmade_derivations["outcomes[1].events_intervention"]  # … and it says why
    assert unmade["state"] == "refused" and "outcomes[1].total_intervention is disputed" in unmade["reason"]


def test_a_value_every_extractor_left_empty_without_seeing_the_models_is_never_the_models(tmp_path):
    """With the models hidden, two extractors who both left a field empty agree it is not found: the model's
    verified value (which none of them saw) is not what the team made final."""
    store, record = Store(str(tmp_path)), _record(n_control=94)
    for who in ("Ana", "Ben"):
        complete(store, record, team_of(record.key, load_decisions(store, record.key), None, 2), who, BLIND)
    field, _ = _field(store, record, "n_control", team=True)
    assert field.is_final and field.final_or_none is None and field.provenance == "rejected"
    assert field.model_value == 94 and "none of whom saw the model's value" in field.note


def test_an_entry_whose_name_is_disputed_gives_the_analysis_nothing_and_is_named(tmp_path):
    from atlas_pipeline.core.statuses import DocumentStatus
    from atlas_pipeline.outputs.analysis_files import study_entries
    from atlas_pipeline.outputs.study_report import studies
    from atlas_pipeline.read_model.document_state import DocumentState

    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    store = Store(str(tmp_path))
    values = {"outcome": "Relapse", "time_point": "6 months", "intervention": "drug", "comparator": "placebo"}
    values |= {"events_intervention": 10, "total_intervention": 50, "events_comparator": 20, "total_comparator": 50}
    made = {
        f"outcomes[1].{name}": {"module": "outcomes", "value": v, "quote": f"{v}", "tier": "verified", "flags": []}
        for name, v in values.items()
    }
    record = extraction_record(fields=made)
    _say(store, record, "outcomes[1].time_point", "Ana", "6 months")
    _say(store, record, "outcomes[1].time_point", "Ben", "12 months")  # which time point the counts are is disputed
    review = review_document(record, load_decisions(store, record.key), VERIFIED, Derivations(template))
    state = DocumentState(key=record.key, status=DocumentStatus.DONE, reason="", extraction=record, review=review)
    entries, excluded = study_entries(studies([state], template, {}), template)
    assert entries == []  # pooled under neither time point
    named = [item for item in excluded if item.field == "time_point"]
    assert named and "disputed (Ana: correct → 6 months; Ben: correct → 12 months)" in named[0].reason
