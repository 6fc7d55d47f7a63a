"""The RoB 2 files and plots: RevMan's table one row per result with judgement and support per domain (overrides
said beside the proposal, a result not judged saying what it waits for), robvis's input only with what is judged, in
the words robvis reads, and each forest-plot row with its result's judgements as RevMan draws them."""

import csv
import io
import math

from atlas_pipeline.outputs.forest_plots import Effect, ForestPlot, forest_svg, risk_of_bias_by_result
from atlas_pipeline.outputs.revman_files import csv_bytes
from atlas_pipeline.outputs.rob2_files import (
    REVMAN_COLUMNS,
    ROBVIS_COLUMNS,
    atlas_frame,
    revman_rows,
    robvis_rows,
    summary_svg,
    traffic_light_svg,
)
from atlas_pipeline.outputs.rob2_results import ResultAssessment

JUDGED = ResultAssessment(
    study_id="s1",
    label="rob2[Pain | 6 weeks]",
    outcome="Pain",
    time_point="6 weeks",
    effect="assignment",
    report="a.pdf",
    entry=1,
    answers={"1.1": "Y", "1.2": "Y", "1.3": "N"},
    judgements={"D1": "Low", "D2": "Low", "D3": "High", "D4": "Low", "D5": "Some concerns", "Overall": "High"},
    proposed={"D1": "Low", "D2": "Low", "D3": "Some concerns", "D4": "Low", "D5": "Some concerns", "Overall": "High"},
    paths={"D1": "1.2=Y, 1.1=Y, 1.3=N"},
    overrides={"D3": "High (Dan, 2026-11-27): 40% lost in one arm only"},
    support={"D1": '1.1 Y: "computer-generated list"'},
)
WAITING = ResultAssessment(
    study_id="s2",
    label="rob2[Pain | —]",
    outcome="Pain",
    time_point="",
    effect="assignment",
    judgements={code: None for code in ("D1", "D2", "D3", "D4", "D5", "Overall")},
    missing={"D1": "1.2", "Overall": "D1, D2, D3, D4, D5"},
    conflicts=["1.2"],
)
LABELS = {"s1": "Smith 2020", "s2": "Wang 2021"}


def _read(data: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))


def test_revman_has_a_row_per_result_and_robvis_only_what_is_judged():
    rows = _read(csv_bytes(REVMAN_COLUMNS, revman_rows([JUDGED, WAITING], LABELS)))
    assert [(r["Study"], r["Outcome"], r["Result"]) for r in rows] == [
        ("Smith 2020", "Pain", "6 weeks"),
        ("Wang 2021", "Pain", ""),
    ]
    assert rows[0]["Domain (judgement): Bias due to missing outcome data"] == "High risk"
    support = rows[0]["Domain (support): Bias due to missing outcome data"]
    assert "40% lost in one arm only" in support and "the algorithm proposed Some concerns" in support
    assert (
        rows[0]["Domain (support): Bias arising from the randomization process"] == '1.1 Y: "computer-generated list".'
    )
    assert rows[1]["Domain (judgement): Overall bias"] == ""
    waiting = rows[1]["Domain (support): Bias arising from the randomization process"]
    assert "Not judged yet: answer 1.2 first" in waiting and "Disputed, not counted until settled: 1.2" in waiting

    robvis = _read(csv_bytes(ROBVIS_COLUMNS, robvis_rows([JUDGED, WAITING], LABELS)))
    assert robvis == [
        {
            "Study": "Smith 2020: Pain · 6 weeks",
            "D1": "Low",
            "D2": "Low",
            "D3": "High",
            "D4": "Low",
            "D5": "Some concerns",
            "Overall": "High",
            "Weight": "1",
        }
    ]
    table = atlas_frame([JUDGED, WAITING], LABELS)
    assert table["Overall"].to_list() == ["High", None] and table["proposed_D3"].to_list() == ["Some concerns", None]


def test_the_plots_draw_every_result_in_robvis_colours():
    light = traffic_light_svg([JUDGED, WAITING], LABELS)
    assert light.count('fill="#BF0000"') == 2 + 1  # D3 and overall high, and the legend's
    assert "Wang 2021: Pain" in light and "answer 1.2 first" in light
    summary = summary_svg([JUDGED, WAITING])
    assert "2 result(s)" in summary and "1 of 2 High" in summary and "1 of 2 not judged yet" in summary


def test_a_forest_plot_row_carries_its_result_s_judgements():
    effects = [
        Effect("s1", "a.pdf", 1, "6 weeks", math.log(0.8), 0.04, "outcomes[1].events_intervention", label="Smith 2020"),
        Effect("s3", "c.pdf", 1, "6 weeks", math.log(1.1), 0.05, "outcomes[1].events_intervention", label="Lee 2019"),
    ]
    plot = ForestPlot("Pain", "RR", effects, slug="pain_rr")
    plain = forest_svg(plot)
    assert 'class="rob2"' not in plain and "rob2-legend" not in plain  # no assessment: the plot as it was
    drawn = forest_svg(plot, rob2=risk_of_bias_by_result([JUDGED, WAITING]))
    assert drawn.count('class="rob2"') == 6  # Smith's row: A–F; Lee's result was not assessed
    assert 'data-domain="D3" data-judgement="High"' in drawn and "(F) overall" in drawn
    assert plain.split('width="')[1].split('"')[0] != drawn.split('width="')[1].split('"')[0]  # room for A–F
