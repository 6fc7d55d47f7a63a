"""The analysis files from studies, without a pipeline: each study counted once — its reports and the entries people
typed for one outcome are one entry —, the same numbers in metafor's file, RevMan's and the forest plot (on random
study sets, and through R), implausible values left out and named, and a forest plot a statistician would publish."""

import csv
import html
import io
import math
import random
import re
import shutil
import subprocess

import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.outputs.analysis_files import escalc_frames, escalc_rows, study_entries
from atlas_pipeline.outputs.export_files import REVMAN_STEMS
from atlas_pipeline.outputs.forest_plots import dersimonian_laird, forest_plots, forest_svg, log_risk_ratio
from atlas_pipeline.outputs.revman_files import revman_files
from atlas_pipeline.outputs.study_labels import study_labels
from atlas_pipeline.outputs.study_report import studies
from atlas_pipeline_tests.support.records import accepted_report

TEMPLATE = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")


def _named(number: int, outcome: str, **values) -> dict:
    """An entry of the outcomes group: its identity (drug vs placebo at 12 weeks unless said) and ``values``."""
    values = {"outcome": outcome, "time_point": "12 weeks", "intervention": "drug", "comparator": "placebo", **values}
    return {f"outcomes[{number}].{name}": value for name, value in values.items()}


def _entry(number: int, outcome: str, counts: tuple[int, int, int, int], **more) -> dict:
    e1, n1, e2, n2 = counts
    counted = {"events_intervention": e1, "total_intervention": n1, "events_comparator": e2, "total_comparator": n2}
    return _named(number, outcome, **counted, **more)


def _files(states, choices=None):
    found = studies(states, TEMPLATE, choices or {})
    entries, excluded = study_entries(found, TEMPLATE)
    escalc = escalc_rows(entries)
    revman = revman_files(found, TEMPLATE, entries, escalc)
    results = list(csv.DictReader(io.StringIO(revman[REVMAN_STEMS["study_results"]].decode("utf-8-sig"))))
    return escalc, forest_plots(escalc, study_labels(found)), results, excluded


def test_two_reports_and_two_peoples_entries_of_one_outcome_are_one_study_entry():
    pdf = accepted_report("trial.pdf", _entry(1, "Relapse", (10, 50, 20, 50)), "NCT1")
    # the JATS of the same trial, and two reviewers who each typed the outcome on its grid (case and spacing aside)
    jats = {**_entry(1001, "relapse", (10, 50, 20, 50)), **_entry(1002, " Relapse ", (10, 50, 20, 50))}
    escalc, plots, results, excluded = _files([pdf, accepted_report("trial.nxml", jats, "NCT1")])
    (row,) = escalc["dichotomous"]
    assert (row["study_id"], row["ai"], row["n1i"], row["ci"], row["n2i"]) == ("NCT1", 10, 50, 20, 50)
    assert row["reports"] == "trial.nxml entry 1001; trial.nxml entry 1002; trial.pdf" and not excluded
    (plot,) = plots
    assert [effect.study_id for effect in plot.effects] == ["NCT1"] and plot.pooled.k == 1
    assert [(r["Arm"], r["Cases"], r["Sample size"]) for r in results] == [
        ("drug", "10", "50"),
        ("placebo", "20", "50"),
    ]


def test_two_peoples_entries_that_differ_are_a_conflict_not_two_entries():
    typed = {**_entry(1001, "Relapse", (10, 50, 20, 50)), **_entry(1002, "Relapse", (11, 50, 20, 50))}
    escalc, plots, results, excluded = _files([accepted_report("trial.pdf", typed, "NCT1")])
    assert escalc["dichotomous"] == [] and plots == [] and results == []
    (left_out,) = excluded
    assert left_out.field == "events_intervention" and "trial.pdf entry 1001: 10" in left_out.reason
    assert "choose one on the study's page" in left_out.reason


def test_several_time_points_of_one_study_are_named_and_not_pooled():
    both = {**_entry(1, "Relapse", (10, 50, 20, 50)), **_entry(2, "Relapse", (15, 50, 25, 50), time_point="1 year")}
    escalc, (plot,), _, _ = _files([accepted_report("trial.pdf", both, "NCT1")])
    assert len(escalc["dichotomous"]) == 2
    assert all("one of 2 entries of this study" in row["note"] for row in escalc["dichotomous"])
    assert "1 year" in escalc["dichotomous"][1]["note"] or "1 year" in escalc["dichotomous"][0]["note"]
    assert plot.pooled is None and "NCT1 appear(s) more than once" in plot.note


def _random_states(seed: int) -> tuple[list, dict]:
    """Random studies: some with two reports that agree, some with two people's entries, some with several
    outcomes, counts, means and SDs, or an estimate with its CI only."""
    rng = random.Random(seed)
    states = []
    for number in range(rng.randint(3, 9)):
        study = f"NCT{number:08d}"
        values: dict = {}
        n1, n2 = rng.randint(10, 300), rng.randint(10, 300)
        values |= _entry(1, "Death", (rng.randint(0, n1), n1, rng.randint(1, n2), n2))
        if rng.random() < 0.6:
            values |= _named(
                2, "Pain",
                mean_intervention=round(rng.uniform(10, 50), 1), sd_intervention=round(rng.uniform(1, 15), 2),
                n_intervention=n1, mean_comparator=round(rng.uniform(10, 50), 1),
                sd_comparator=round(rng.uniform(1, 15), 2), n_comparator=n2,
            )  # fmt: skip
        if rng.random() < 0.5:
            estimate = round(rng.uniform(0.4, 1.6), 2)
            low, high = round(estimate * rng.uniform(0.5, 0.95), 2), round(estimate * rng.uniform(1.05, 2.0), 2)
            values |= _named(3, "Stroke", effect_measure="HR", effect_estimate=estimate, ci_lower=low, ci_upper=high)
        states.append(accepted_report(f"{study}.pdf", values, study))
        if rng.random() < 0.4:  # a second report saying the same
            states.append(accepted_report(f"{study}.nxml", dict(values), study))
        if rng.random() < 0.3:  # a person typed the deaths again on the grid
            again = {k.replace("outcomes[1]", "outcomes[1001]"): v for k, v in values.items() if "[1]" in k}
            states[-1].review.fields.update(accepted_report("x", again).review.fields)
    return states, {}


@pytest.mark.parametrize("seed", range(12))
def test_metafor_revman_and_the_plot_read_the_same_numbers_on_random_study_sets(seed):
    states, choices = _random_states(seed)
    escalc, plots, results, excluded = _files(states, choices)
    assert not excluded
    studies_ = {state.study_id for state in states}
    deaths = [row for row in escalc["dichotomous"] if row["outcome"] == "Death"]
    assert sorted(row["study_id"] for row in deaths) == sorted(studies_)  # each study once
    by_arm = {(r["Study"], r["Outcome"], r["Arm"]): r for r in results}
    labels = {re.match(r"Atlas study ([^\s:(]+)", r["Footnotes"]).group(1): r["Study"] for r in results}
    for row in escalc["dichotomous"]:
        drug = by_arm[labels[row["study_id"]], "Death (12 weeks)", "drug"]
        placebo = by_arm[labels[row["study_id"]], "Death (12 weeks)", "placebo"]
        assert (int(drug["Cases"]), int(drug["Sample size"])) == (row["ai"], row["n1i"])
        assert (int(placebo["Cases"]), int(placebo["Sample size"])) == (row["ci"], row["n2i"])
    for row in escalc["continuous"]:
        drug = by_arm[labels[row["study_id"]], "Pain (12 weeks)", "drug"]
        assert (float(drug["Mean"]), float(drug["SD"]), int(drug["Sample size"])) == (
            row["m1i"], row["sd1i"], row["n1i"],
        )  # fmt: skip
    for row in escalc["generic"]:
        contrast = next(r for r in results if r["Study"] == labels[row["study_id"]] and r["Effect measure"])
        assert float(contrast["Exp mean"]) == row["estimate"] and float(contrast["Exp CI start"]) == row["ci_lower"]
    plot = next(p for p in plots if p.outcome == "Death")
    assert sorted(e.study_id for e in plot.effects) == sorted(studies_)
    svg = forest_svg(plot)
    for effect in plot.effects:  # one name per study: the plot's row says what RevMan's files say
        assert effect.name == labels[effect.study_id] and f">{html.escape(effect.name)}" in svg
    for effect in plot.effects:
        row = next(r for r in deaths if r["study_id"] == effect.study_id)
        if effect.estimable:
            assert (effect.estimate, effect.variance) == log_risk_ratio(row["ai"], row["bi"], row["ci"], row["di"])


R_POOL = """
library(metafor)
args <- commandArgs(trailingOnly = TRUE)
dat <- read.csv(args[1])
dat <- dat[dat$outcome == "Death", ]
es <- escalc(measure = "RR", ai = ai, bi = bi, ci = ci, di = di, n1i = n1i, n2i = n2i, data = dat, drop00 = TRUE)
fit <- rma(yi, vi, data = es, method = "DL")
cat(sprintf("%.12f %.12f %.12f %.12f %.12f %d\\n", coef(fit)[[1]], fit$se, fit$tau2, fit$QE, fit$I2, fit$k))
"""


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_r_pools_the_escalc_file_to_the_plots_estimate_and_heterogeneity(seed, tmp_path):
    assert shutil.which("Rscript"), "scripts/install_system_deps.sh --tests installs r-base-core and r-cran-metafor"
    states, _ = _random_states(seed)
    escalc, plots, _, _ = _files(states)
    path = tmp_path / "atlas_escalc_dichotomous.csv"
    escalc_frames(escalc)["dichotomous"].write_csv(path)
    done = subprocess.run(["Rscript", "-e", R_POOL, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    estimate, se, tau2, q, i2, k = (float(part) for part in done.stdout.split())
    pooled = next(p for p in plots if p.outcome == "Death").pooled
    assert pooled.k == int(k)
    assert pooled.estimate == pytest.approx(estimate, abs=1e-9) and pooled.se == pytest.approx(se, abs=1e-9)
    assert pooled.tau2 == pytest.approx(tau2, abs=1e-9) and pooled.q == pytest.approx(q, abs=1e-8)
    assert pooled.i2 == pytest.approx(i2, abs=1e-6)


def test_each_plausibility_rule_leaves_the_value_out_and_names_it():
    cases = {
        "total_intervention": (0, "a group size is above 0"),
        "sd_intervention": (-1.5, "a standard deviation or error is above 0"),
        "percent_comparator": (140, "a percentage is between 0 and 100"),
        "events_comparator": (60, "more events than participants"),
        "ci_lower": (2.5, "the CI's lower limit is above its upper"),
        "ci_upper": (0.2 + 1e-16, "a confidence interval has (almost) no width"),
        "n_comparator": (99999999999999999999999999999, "beyond any plausible"),
        "mean_intervention": (1e308, "beyond any plausible"),
    }
    for field, (value, reason) in cases.items():
        values = _entry(1, "Death", (10, 50, 20, 50))
        values |= {"outcomes[1].effect_measure": "RR", "outcomes[1].effect_estimate": 0.5}
        values |= {"outcomes[1].ci_lower": 0.2, "outcomes[1].ci_upper": 0.9}
        values |= {"outcomes[1].mean_intervention": 3.0, "outcomes[1].sd_intervention": 1.0}
        values |= {"outcomes[1].n_comparator": 50}
        values[f"outcomes[1].{field}"] = value
        escalc, _, _, excluded = _files([accepted_report("trial.pdf", values, "NCT1")])
        named = [item for item in excluded if field in item.field or reason in item.reason]
        assert named and reason in named[0].reason, (field, excluded)
        written = [row for kind in escalc.values() for row in kind]
        for row in written:  # nothing implausible reached a file
            for column in ("n1i", "n2i", "ai", "ci", "sd1i", "m1i"):
                if column in row and row[column] is not None:
                    assert abs(row[column]) < 1e15 and (column not in ("n1i", "n2i") or row[column] > 0)
        svg = "".join(forest_svg(plot) for plot in forest_plots(escalc))  # and no plot crashed on it
        assert "nan" not in svg.lower()


def test_no_events_in_either_arm_is_not_estimable_and_weights_are_random_effects():
    states = [
        accepted_report("a.pdf", _entry(1, "Death", (0, 40, 0, 38)), "A"),
        accepted_report("b.pdf", _entry(1, "Death", (5, 100, 15, 100)), "B"),
        accepted_report("c.pdf", _entry(1, "Death", (30, 200, 20, 210)), "C"),
        accepted_report("d.pdf", _entry(1, "Death", (2, 20, 9, 21)), "D"),
    ]
    _, (plot,), _, _ = _files(states)
    zero = next(effect for effect in plot.effects if effect.study_id == "A")
    assert not zero.estimable and "no events in either arm" in zero.note
    assert plot.pooled.k == 3
    pooled = [effect for effect in plot.effects if effect.estimable]
    assert plot.pooled.tau2 > 0  # heterogeneous: random-effects weights differ from inverse-variance ones
    weights = [plot.weight(effect) for effect in pooled]
    expected = [1 / (effect.variance + plot.pooled.tau2) for effect in pooled]
    assert weights == pytest.approx([100 * w / sum(expected) for w in expected])
    assert sum(weights) == pytest.approx(100)
    assert dersimonian_laird(pooled).i2 == plot.pooled.i2 and 0 < plot.pooled.i2 < 100
    svg = forest_svg(plot)
    assert "not estimable" in svg and "I² = " in svg and "τ² = " in svg and "Q = " in svg and "%</text>" in svg
    assert math.isfinite(plot.pooled.q_p) and f"p = {plot.pooled.q_p:.3g}" in svg


def test_two_outcome_names_never_write_one_file():
    states = [
        accepted_report("a.pdf", {**_entry(1, "Pain (VAS)", (5, 50, 9, 50)), **_entry(2, "Pain VAS", (4, 50, 9, 50))})
    ]
    _, plots, _, _ = _files(states)
    assert len({plot.slug for plot in plots}) == len(plots) == 2


def test_the_primary_outcomes_in_single_fields_are_analysed_too():
    values = {
        "treatment_name": "drug",
        "control_name": "placebo",
        "event_treatment": 12,
        "total_treatment": 60,
        "event_control": 20,
        "total_control": 61,
        "endpoint_name": "Overall survival",
        "hr_value": 0.72,
        "hr_ci_lower": 0.55,
        "hr_ci_upper": 0.94,
    }
    escalc, plots, results, _ = _files([accepted_report("trial.pdf", values, "NCT1")])
    (counts,) = escalc["dichotomous"]
    assert (counts["outcome"], counts["intervention"], counts["ai"], counts["n2i"]) == (
        "Primary binary outcome",
        "drug",
        12,
        61,
    )
    (hazard,) = escalc["generic"]
    assert (hazard["outcome"], hazard["measure"], hazard["estimate"]) == ("Overall survival", "HR", 0.72)
    assert hazard["yi"] == pytest.approx(math.log(0.72))
    assert {plot.outcome for plot in plots} == {"Primary binary outcome", "Overall survival"}
    assert any(effect.evidence_field == "hr_value" for plot in plots for effect in plot.effects)
    cases = next(r for r in results if r["Arm"] == "drug" and r["Cases"])
    assert cases["Cases"] == "12" and "(trial.pdf event_treatment)" in cases["Footnotes"]


def test_what_a_statistician_reading_the_files_would_catch():
    # a three-arm trial: its control, shared by two comparisons, is one row in RevMan's file
    three_arms = {**_entry(1, "Death", (5, 50, 9, 50)), **_entry(2, "Death", (7, 50, 9, 50), intervention="drug B")}
    _, (plot,), results, _ = _files([accepted_report("trial.pdf", three_arms, "NCT1")])
    assert [r["Arm"] for r in results].count("placebo") == 1 and plot.pooled is None  # not pooled: shared control
    # a hazard ratio typed both in the survival fields and as an outcome entry counts once
    both = {"endpoint_name": "Overall survival", "hr_value": 0.8, "hr_ci_lower": 0.6, "hr_ci_upper": 0.95}
    both |= _named(1, "overall survival", effect_measure="HR", effect_estimate=0.8, ci_lower=0.6, ci_upper=0.95)
    escalc, _, _, excluded = _files([accepted_report("trial.pdf", both, "NCT1")])
    assert len(escalc["generic"]) == 1 and "counted once, there" in excluded[0].reason
    # final values and changes from baseline are separate plots, as in RevMan
    final = _named(1, "Pain", mean_intervention=3, sd_intervention=1, n_intervention=20, mean_comparator=4,
                   sd_comparator=1, n_comparator=20)  # fmt: skip
    change = _named(1, "Pain", mean_change_intervention=-2, sd_change_intervention=1.5, n_intervention=25,
                    mean_change_comparator=-1, sd_change_comparator=1.4, n_comparator=25)  # fmt: skip
    states = [accepted_report("a.pdf", final, "A"), accepted_report("b.pdf", change, "B")]
    escalc, plots, results, _ = _files(states)
    assert sorted(plot.outcome for plot in plots) == ["Pain", "Pain (change from baseline)"]
    assert {row["values"] for row in escalc["continuous"]} == {"final", "change from baseline"}
    # a small trial's mean difference: RevMan gets the SE escalc uses (2 × t(38) wide, not 3.92)
    small = _named(1, "Pain", effect_measure="MD", effect_estimate=-2, ci_lower=-4, ci_upper=0, n_intervention=20,
                   n_comparator=20)  # fmt: skip
    escalc, _, results, _ = _files([accepted_report("a.pdf", small, "A")])
    (row,) = escalc["generic"]
    assert math.sqrt(row["vi"]) == pytest.approx(4 / (2 * 2.024394), rel=1e-5)
    assert float(results[0]["SE"]) == pytest.approx(math.sqrt(row["vi"]), rel=1e-9)
    # no events in either arm: said in the file, as escalc(…, drop00 = TRUE) and RevMan treat it
    escalc, _, _, _ = _files([accepted_report("a.pdf", _entry(1, "Death", (0, 30, 0, 31)), "A")])
    assert "no events in either arm" in escalc["dichotomous"][0]["note"]
    # a value no analysis can read is named, not silently dropped
    odd = {**_entry(1, "Death", (5, 50, 9, 50)), "outcomes[1].total_comparator": "1,050 (95%)"}
    escalc, _, _, excluded = _files([accepted_report("a.pdf", odd, "A")])
    assert escalc["dichotomous"] == [] and "not a number the analysis can read" in excluded[0].reason
