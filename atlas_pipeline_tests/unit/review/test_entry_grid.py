"""A repeating group as a grid by arm, and what a submitted grid changed."""

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.review.entry_grid import CellQuote, arm_of, cell_quotes, entry_grid, grid_edits
from atlas_pipeline.review.final_values import FinalField


def test_the_outcome_grid_has_identity_then_each_outcome_type_by_arm():
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    group = next(g for g in template.groups if g.name == "outcomes")
    fields = {
        "outcomes[2].outcome": FinalField(field="x", provenance="reviewer_approved", final_value="Duration"),
        "outcomes[2].sd_comparator": FinalField(field="x", provenance="awaiting_review", model_value=27.4),
        "outcomes[2].n_comparator": FinalField(field="x", provenance="rejected"),
        "study_id": FinalField(field="x", provenance="awaiting_review", model_value="Valois 2005"),
    }
    grid = entry_grid(group, fields)
    assert [name for arm, name in grid.columns if arm == "identity"] == list(group.identity) == grid.frozen
    kinds = [grid.kinds[name] for _, name in grid.columns]
    order = ["identity", "dichotomous", "continuous", "effect_estimate"]
    assert kinds == sorted(kinds, key=order.index)  # grouped by the outcome type a row needs
    assert [kind for kind, _, more in grid.kind_spans if not more] == order
    for kind in ("dichotomous", "continuous"):  # both arms of each type, the intervention's first
        shown = [(arm, n) for arm, n in grid.columns if grid.kinds[n] == kind and n not in grid.details]
        arms = [arm for arm, _ in shown]
        assert arms.count("intervention") == arms.count("comparator") > 0
        assert arms == sorted(arms, key=["intervention", "comparator"].index)
    assert grid.kinds["events_intervention"] == "dichotomous" and grid.kinds["mean_comparator"] == "continuous"
    assert grid.kinds["effect_estimate"] == grid.kinds["p_value_comparison"] == "effect_estimate"
    # a detail column is shown on demand (medians, quartiles …), until an entry fills it
    assert "median_intervention" in grid.details and "mean_intervention" not in grid.details
    filled = {
        **fields,
        "outcomes[2].median_comparator": FinalField(field="x", provenance="reviewer_added", final_value=4),
    }
    assert "median_comparator" not in entry_grid(group, filled).details
    (row,) = grid.rows
    assert row.entry == 2 and row.cells["outcome"] == "Duration" and row.cells["sd_comparator"] == "27.4"
    assert row.cells["n_comparator"] == "" and row.states["n_comparator"] == "rejected" and not row.rejected
    assert arm_of("events_intervention") == "intervention" and arm_of("p_value_comparison") == "comparison"
    # a row shows only its cells: an SD makes it continuous — no events, the comparison's estimate still offered
    assert row.kind == "continuous"
    assert not row.offers("events_intervention", grid.kinds) and row.offers("effect_estimate", grid.kinds)
    said = {
        **fields,
        "outcomes[2].outcome_type": FinalField(field="x", provenance="reviewer_added", final_value="dichotomous"),
    }
    (typed,) = entry_grid(group, said).rows
    assert typed.kind == "dichotomous" and typed.offers("sd_comparator", grid.kinds)  # a value is never hidden
    assert not typed.offers("mean_intervention", grid.kinds)


def test_a_cells_quote_comes_with_its_edit_and_alone_with_an_unchanged_value():
    form = {
        "cell:1001:mean_intervention": "47.5",
        "was:1001:mean_intervention": "47.5",
        "quote:1001:mean_intervention": "White Grape Juice 47.5 38.9",
        "quote_page:1001:mean_intervention": "5",
        "quote_words:1001:mean_intervention": "10-14",
        "cell:1001:sd_intervention": "38.9",
        "was:1001:sd_intervention": "38.9",
        "quote:new:outcome": "Duration of diarrhea",
    }
    edits, _ = grid_edits("outcomes", form)
    (edit,) = edits
    assert edit.field == "outcomes[1001].mean_intervention" and edit.value == edit.was == "47.5"
    assert edit.quote == CellQuote("White Grape Juice 47.5 38.9", "5", "10-14")
    assert cell_quotes(form)[("new", "outcome")].quote == "Duration of diarrhea"


def test_only_changed_cells_and_a_filled_new_row_count():
    form = {
        "cell:2:sd_comparator": "27.5",
        "was:2:sd_comparator": "27.4",
        "cell:2:mean_comparator": " 26.5 ",
        "was:2:mean_comparator": "26.5",
        "cell:2:n_comparator": "",
        "was:2:n_comparator": "30",
        "cell:new:outcome": "Vomiting",
        "cell:new:time_point": "",
        "cell:x:outcome": "ignored",
        "sha256": "…",
    }
    edits, new_row = grid_edits("outcomes", form)
    assert [(e.field, e.value, e.was) for e in edits] == [
        ("outcomes[2].sd_comparator", "27.5", "27.4"),
        ("outcomes[2].n_comparator", "", "30"),
    ]
    assert new_row == {"outcome": "Vomiting"}
