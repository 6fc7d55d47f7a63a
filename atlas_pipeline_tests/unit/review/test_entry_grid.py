"""A repeating group as a grid by arm, and what a submitted grid changed."""

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.review.entry_grid import arm_of, entry_grid, grid_edits
from atlas_pipeline.review.final_values import FinalField


def test_the_outcome_grid_has_identity_then_arms_then_the_comparison():
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    group = next(g for g in template.groups if g.name == "outcomes")
    fields = {
        "outcomes[2].outcome": FinalField(field="x", provenance="reviewer_approved", final_value="Duration"),
        "outcomes[2].sd_comparator": FinalField(field="x", provenance="awaiting_review", model_value=27.4),
        "outcomes[2].n_comparator": FinalField(field="x", provenance="rejected"),
        "study_id": FinalField(field="x", provenance="awaiting_review", model_value="Valois 2005"),
    }
    grid = entry_grid(group, fields)
    arms = [arm for arm, _ in grid.columns]
    assert arms == sorted(arms, key=["identity", "intervention", "comparator", "comparison"].index)
    assert [name for arm, name in grid.columns if arm == "identity"] == list(group.identity)
    spans = {(arm, more): span for arm, span, more in grid.arms}
    assert spans["intervention", False] == spans["comparator", False]  # every measure for both arms
    assert spans["intervention", True] == spans["comparator", True] > 0  # and every detail, shown on demand
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
