"""A forest plot per outcome and measure, from the studies' escalc rows (``outputs.analysis_files``) — so that a
reviewer sees at a glance the study whose effect stands apart, and checks its numbers first.

Each study's effect is computed as metafor's ``escalc`` computes it (log risk ratio from counts, with 0.5 added to
every cell of a table with a zero; mean difference from means and SDs; ``yi``/``vi`` as reported for an estimate with
its CI), pooled by DerSimonian and Laird's random-effects method (RevMan's default; the R tests check it against
``rma(method = "DL")``): the squares are sized by the random-effects weights, each row shows its weight %, and the
plot gives τ², I² and Cochran's Q with its p. A study with no events in either arm is shown as not estimable and not
pooled (as RevMan does). A plot in which a study appears more than once (several time points or comparisons of one
outcome) is drawn but not pooled, naming the study and what differs: the same participants would count twice. The
plot is an SVG: in the review page each row links to its evidence; beside the exports it is a file any browser opens.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from atlas_pipeline.outputs.analysis_files import entry_key
from atlas_pipeline.outputs.analysis_files import evidence_field as field_of_cell
from atlas_pipeline.outputs.rob2_files import COLOURS, LETTERS, SYMBOLS
from atlas_pipeline.outputs.rob2_results import CODES, ResultAssessment

ResultKey = tuple[str, str, str]  # (study id, outcome, time point), folded

RATIO_MEASURES = frozenset({"RR", "OR", "HR"})
Z = 1.959964  # the 97.5th percentile of the normal distribution
MEASURE_NAMES = {"RR": "risk ratio", "OR": "odds ratio", "HR": "hazard ratio", "MD": "mean difference"}
MEASURE_NAMES |= {"SMD": "standardised mean difference", "RD": "risk difference"}


@dataclass(frozen=True)
class Effect:
    study_id: str
    document_key: str
    entry: int
    time_point: str
    estimate: float  # yi: on the log scale for a ratio (NaN: not estimable)
    variance: float  # vi
    evidence_field: str  # the field whose evidence the row links to
    note: str = ""  # "not estimable: no events in either arm", or the study's other entries
    derived: str = ""  # the derived values the effect rests on
    label: str = ""  # the study's name as every file and page gives it (``outputs.study_labels``)

    @property
    def name(self) -> str:
        return self.label or self.study_id

    @property
    def estimable(self) -> bool:
        return math.isfinite(self.estimate) and self.variance > 0

    @property
    def lower(self) -> float:
        return self.estimate - Z * math.sqrt(self.variance)

    @property
    def upper(self) -> float:
        return self.estimate + Z * math.sqrt(self.variance)


@dataclass(frozen=True)
class Pooled:
    estimate: float
    se: float
    tau2: float
    k: int
    q: float = 0.0
    i2: float = 0.0  # percent
    weights: tuple[float, ...] = ()  # random-effects weights, in the order of the pooled effects

    @property
    def lower(self) -> float:
        return self.estimate - Z * self.se

    @property
    def upper(self) -> float:
        return self.estimate + Z * self.se

    @property
    def q_p(self) -> float:
        """The p of Cochran's Q on k − 1 degrees of freedom (1 with one study)."""
        from scipy import stats  # only where a heterogeneity p is computed

        return float(stats.chi2.sf(self.q, self.k - 1)) if self.k > 1 else 1.0


@dataclass
class ForestPlot:
    outcome: str
    measure: str
    effects: list[Effect] = field(default_factory=list)
    pooled: Pooled | None = None
    note: str = ""
    slug: str = ""

    @property
    def ratio(self) -> bool:
        return self.measure in RATIO_MEASURES

    def shown(self, value: float) -> float:
        """A value as a reader reads it: a ratio back from the log scale."""
        return math.exp(value) if self.ratio else value

    def weight(self, effect: Effect) -> float | None:
        """The effect's share of the pooled estimate, in percent (None: not pooled)."""
        if self.pooled is None or not effect.estimable:
            return None
        pooled = [e for e in self.effects if e.estimable]
        weight = self.pooled.weights[pooled.index(effect)]
        return 100 * weight / sum(self.pooled.weights)


def log_risk_ratio(ai: int, bi: int, ci: int, di: int) -> tuple[float, float]:
    """yi and vi of a log risk ratio from a 2×2 table (0.5 added to each cell when one is 0, as escalc does); NaN
    when neither arm has an event (RevMan's "not estimable")."""
    if ai == 0 and ci == 0:
        return math.nan, math.nan
    if 0 in (ai, bi, ci, di):
        ai, bi, ci, di = ai + 0.5, bi + 0.5, ci + 0.5, di + 0.5
    n1, n2 = ai + bi, ci + di
    return math.log((ai / n1) / (ci / n2)), 1 / ai - 1 / n1 + 1 / ci - 1 / n2


def dersimonian_laird(effects: list[Effect]) -> Pooled | None:
    """The random-effects pooled estimate (DerSimonian and Laird's τ²) with Q and I²; None without an effect."""
    if not effects:
        return None
    weights = [1 / effect.variance for effect in effects]
    total = sum(weights)
    fixed = sum(w * e.estimate for w, e in zip(weights, effects, strict=True)) / total
    q = sum(w * (e.estimate - fixed) ** 2 for w, e in zip(weights, effects, strict=True))
    c = total - sum(w * w for w in weights) / total
    tau2 = max(0.0, (q - (len(effects) - 1)) / c) if c > 0 else 0.0
    random = tuple(1 / (effect.variance + tau2) for effect in effects)
    estimate = sum(w * e.estimate for w, e in zip(random, effects, strict=True)) / sum(random)
    i2 = max(0.0, 100 * (q - (len(effects) - 1)) / q) if q > 0 else 0.0
    return Pooled(estimate, math.sqrt(1 / sum(random)), tau2, len(effects), q, i2, random)


def _slug(outcome: str, measure: str, taken: set[str]) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", outcome.lower()).strip("-")[:60] or "outcome"
    slug, number = f"{words}_{measure.lower()}", 2
    while slug in taken:  # two outcomes whose names differ only in punctuation: two files, never one
        slug, number = f"{words}-{number}_{measure.lower()}", number + 1
    taken.add(slug)
    return slug


def forest_plots(escalc: dict[str, list[dict]], labels: Mapping[str, str] | None = None) -> list[ForestPlot]:
    """One plot per outcome (its name as written, case and spacing aside) and measure, from the escalc rows
    (``analysis_files.escalc_rows``: one row per study entry); ``labels``: each study's name as RevMan's files give
    it (``study_labels``), else its id."""
    labels = labels or {}
    plots: dict[tuple[str, str], ForestPlot] = {}

    def plot_for(row: dict, measure: str) -> ForestPlot:
        name = " ".join(str(row["outcome"] or "outcome not named").split())
        if row.get("values") == "change from baseline":  # apart from final values, as RevMan keeps them
            name += " (change from baseline)"
        return plots.setdefault((name.lower(), measure), ForestPlot(name, measure))

    def add(row: dict, measure: str, yi: float, vi: float, evidence: str, why: str = "") -> None:
        if math.isnan(yi) or (vi > 0 and math.isfinite(yi) and math.isfinite(vi)):
            note = "; ".join(part for part in (why, row.get("note") or "") if part)
            effect = Effect(
                row["study_id"], row["document_key"], row["entry"], row["time_point"] or "", yi, vi, evidence,
                note, row.get("derived") or "", labels.get(row["study_id"], ""),
            )  # fmt: skip
            plot_for(row, measure).effects.append(effect)

    for row in escalc["dichotomous"]:
        yi, vi = log_risk_ratio(row["ai"], row["bi"], row["ci"], row["di"])
        why = "not estimable: no events in either arm" if math.isnan(yi) else ""
        add(row, "RR", yi, vi, field_of_cell(row["entry"], "events_intervention"), why)
    for row in escalc["continuous"]:
        if row["n1i"] > 0 and row["n2i"] > 0:
            vi = row["sd1i"] ** 2 / row["n1i"] + row["sd2i"] ** 2 / row["n2i"]
            add(row, "MD", row["m1i"] - row["m2i"], vi, field_of_cell(row["entry"], "mean_intervention"))
    counted = {entry_key(row) for kind in ("dichotomous", "continuous") for row in escalc[kind]}
    for row in escalc["generic"]:
        if entry_key(row) not in counted:  # arm data first, else the estimate
            add(row, row["measure"], row["yi"], row["vi"], field_of_cell(row["entry"], "effect_estimate"))
    taken: set[str] = set()
    for plot in sorted(plots.values(), key=lambda plot: (plot.outcome.lower(), plot.measure)):
        plot.slug = _slug(plot.outcome, plot.measure, taken)
        plot.effects.sort(key=lambda effect: (effect.name.casefold(), effect.time_point, effect.entry))
        estimable = [effect for effect in plot.effects if effect.estimable]
        counts: dict[str, int] = {}
        for effect in estimable:
            counts[effect.study_id] = counts.get(effect.study_id, 0) + 1
        repeated = sorted(labels.get(study) or study for study, count in counts.items() if count > 1)
        if repeated:
            plot.note = (
                f"not pooled: {', '.join(repeated)} appear(s) more than once (several time points or comparisons "
                "of this outcome; see each row)"
            )
        else:
            plot.pooled = dersimonian_laird(estimable)
    return sorted(plots.values(), key=lambda plot: (-len(plot.effects), plot.outcome.lower(), plot.measure))


def _format(plot: ForestPlot, value: float) -> str:
    return f"{plot.shown(value):.2f}"


def _ticks(plot: ForestPlot, low: float, high: float) -> list[float]:
    """Axis ticks a reader reads: 0.1, 0.2, 0.5, 1, 2, 5, 10 … for a ratio (on the log scale), round steps for a
    difference; always the line of no effect."""
    if plot.ratio:
        candidates = [m * 10.0**e for e in range(-4, 5) for m in (1, 2, 5)]
        ticks = [math.log(c) for c in candidates if low <= math.log(c) <= high]
    else:
        raw = (high - low) / 4 or 1.0
        step = 10 ** math.floor(math.log10(raw))
        step = next(step * m for m in (1, 2, 5, 10) if step * m >= raw)
        ticks = [step * i for i in range(math.ceil(low / step), math.floor(high / step) + 1)]
    if len(ticks) > 7:
        ticks = ticks[:: math.ceil(len(ticks) / 7)]
    return sorted(set(ticks) | {0.0})


def _tick_label(plot: ForestPlot, value: float) -> str:
    return f"{plot.shown(value):g}" if plot.ratio else f"{value:g}"


def _fold(text: object) -> str:
    return " ".join(str(text or "").split()).casefold()


def risk_of_bias_by_result(assessments: list[ResultAssessment]) -> dict[ResultKey, dict[str, str | None]]:
    """Each assessed result's RoB 2 judgements (domain code → judgement), by study, outcome and time point."""
    return {(a.study_id, _fold(a.outcome), _fold(a.time_point)): dict(a.judgements) for a in assessments}


def _risk_of_bias(plot: ForestPlot, rob2: Mapping[ResultKey, dict[str, str | None]] | None) -> dict[int, dict]:
    """Each row's RoB 2 judgements (by the effect's id), for the rows whose result was assessed."""
    found = {}
    for effect in plot.effects:
        judged = (rob2 or {}).get((effect.study_id, _fold(plot.outcome), _fold(effect.time_point)))
        if judged is not None:
            found[id(effect)] = judged
    return found


def _rob2_cells(x: float, y: float, judged: dict[str, str | None], name: str) -> str:
    cells = []
    for index, code in enumerate(CODES):
        judgement = judged.get(code)
        tip = html.escape(f"{name} — RoB 2 {code}: {judgement or 'not judged yet'}")
        cells.append(
            f'<g class="rob2" data-domain="{code}" data-judgement="{html.escape(judgement or "")}"><title>{tip}</title>'
            f'<circle cx="{x + 20 * index:.1f}" cy="{y:.1f}" r="7" fill="{COLOURS.get(judgement, COLOURS[None])}" '
            f'stroke="#57606a" stroke-width="0.5"/><text x="{x + 20 * index:.1f}" y="{y + 4:.1f}" '
            f'text-anchor="middle" font-size="11" font-weight="bold">{SYMBOLS.get(judgement or "", "")}</text></g>'
        )
    return "".join(cells)


def forest_svg(
    plot: ForestPlot,
    link: Callable[[Effect], str] | None = None,
    rob2: Mapping[ResultKey, dict[str, str | None]] | None = None,
) -> str:
    """The plot as SVG text: a row per study (square sized by its random-effects weight, its 95% CI, the weight %),
    the pooled diamond with τ², I² and Q, the line of no effect. ``link``: each study row's target (the review page's
    evidence of its values); ``rob2``: the results' RoB 2 judgements (``risk_of_bias_by_result``), drawn beside each
    row as RevMan draws them (A–E the domains, F overall) when any row's result was assessed."""
    rows = len(plot.effects) + (1 if plot.pooled else 0)
    judged = _risk_of_bias(plot, rob2)
    width, left, middle, top, step = 900 + (140 if judged else 0), 250, 300, 44, 26
    height = top + step * rows + 64 + (16 if plot.pooled else 0) + (16 if plot.note else 0) + (32 if judged else 0)
    values = [v for e in plot.effects if e.estimable for v in (e.lower, e.upper)]
    values += [plot.pooled.lower, plot.pooled.upper] if plot.pooled else []
    low, high = min([*values, 0.0]), max([*values, 0.0])
    pad = (high - low) * 0.05 or 1.0
    low, high = low - pad, high + pad

    def x(value: float) -> float:
        return left + (value - low) / (high - low) * middle

    weights = {id(e): plot.weight(e) for e in plot.effects}
    fallback = {id(e): 1 / e.variance for e in plot.effects if e.estimable}  # not pooled: inverse variance
    sizes = {key: value for key, value in weights.items() if value is not None} or fallback
    heaviest = max(sizes.values(), default=1.0)
    name = MEASURE_NAMES.get(plot.measure, plot.measure)
    title = html.escape(f"{plot.outcome} — {name} (95% CI)")
    estimate_x, weight_x = left + middle + 16, left + middle + 200
    rob_x = weight_x + 80
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="forest-plot" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" aria-label="{title}">',
        f'<text x="8" y="20" font-weight="bold">{title}</text>',
        f'<text x="8" y="38" fill="#57606a">study</text>'
        f'<text x="{estimate_x}" y="38" fill="#57606a">{html.escape(plot.measure)} [95% CI]</text>'
        f'<text x="{weight_x}" y="38" fill="#57606a">weight</text>',
        "".join(
            f'<text x="{rob_x + 20 * index}" y="38" fill="#57606a" text-anchor="middle">{LETTERS[code]}</text>'
            for index, code in enumerate(CODES)
        )
        if judged
        else "",
        f'<line x1="{x(0):.1f}" y1="{top - 4}" x2="{x(0):.1f}" y2="{top + step * rows}" stroke="#8c959f"/>',
    ]
    for number, effect in enumerate(plot.effects):
        y = top + step * number + step / 2
        label = effect.name + (f" · {effect.time_point}" if effect.time_point else "")
        label += " *" if effect.derived else ""
        tip = f"{effect.document_key}: {plot.outcome}" + (f" — {effect.note}" if effect.note else "")
        tip += f" — derived: {effect.derived}" if effect.derived else ""
        row = (
            f'<g class="study" data-study="{html.escape(effect.study_id)}" '
            f'data-document="{html.escape(effect.document_key)}"><title>{html.escape(tip)}</title>'
            f'<rect x="0" y="{y - step / 2:.1f}" width="{width}" height="{step}" fill="#0969da" fill-opacity="0"/>'
            f'<text x="8" y="{y + 4:.1f}">{html.escape(label[:34])}</text>'
        )
        if id(effect) in judged:
            row += _rob2_cells(rob_x, y, judged[id(effect)], effect.name)
        if effect.estimable:
            size = 4 + 8 * math.sqrt(sizes.get(id(effect), heaviest) / heaviest)
            weight = weights[id(effect)]
            row += (
                f'<line x1="{x(effect.lower):.1f}" y1="{y:.1f}" x2="{x(effect.upper):.1f}" y2="{y:.1f}" '
                f'stroke="#24292f"/><rect x="{x(effect.estimate) - size / 2:.1f}" y="{y - size / 2:.1f}" '
                f'width="{size:.1f}" height="{size:.1f}" fill="#0969da"/>'
                f'<text x="{estimate_x}" y="{y + 4:.1f}">{_format(plot, effect.estimate)} '
                f"[{_format(plot, effect.lower)}, {_format(plot, effect.upper)}]</text>"
                f'<text x="{weight_x}" y="{y + 4:.1f}" class="weight">'
                f"{'' if weight is None else f'{weight:.1f}%'}</text></g>"
            )
        else:
            row += f'<text x="{estimate_x}" y="{y + 4:.1f}" fill="#57606a">not estimable</text></g>'
        parts.append(f'<a href="{html.escape(link(effect))}">{row}</a>' if link else row)
    axis = top + step * rows + 18
    if plot.pooled:
        pooled = plot.pooled
        y = top + step * len(plot.effects) + step / 2
        points = (
            f"{x(pooled.lower):.1f},{y:.1f} {x(pooled.estimate):.1f},{y - 7:.1f} "
            f"{x(pooled.upper):.1f},{y:.1f} {x(pooled.estimate):.1f},{y + 7:.1f}"
        )
        heterogeneity = (
            f"Heterogeneity: τ² = {pooled.tau2:.4g}; Q = {pooled.q:.2f}, df = {pooled.k - 1}, "
            f"p = {pooled.q_p:.3g}; I² = {pooled.i2:.0f}%"
        )
        parts.append(
            f'<g class="pooled"><text x="8" y="{y + 4:.1f}" font-weight="bold">Random effects (k = {pooled.k})</text>'
            f'<polygon points="{points}" fill="#8250df"/>'
            f'<text x="{estimate_x}" y="{y + 4:.1f}" font-weight="bold">{_format(plot, pooled.estimate)} '
            f"[{_format(plot, pooled.lower)}, {_format(plot, pooled.upper)}]</text>"
            f'<text x="{weight_x}" y="{y + 4:.1f}" font-weight="bold">100%</text></g>'
            f'<text class="heterogeneity" x="8" y="{axis + 36}" fill="#57606a" font-size="12">'
            f"{html.escape(heterogeneity)} (DerSimonian–Laird)</text>"
        )
    for value in _ticks(plot, low, high):
        parts.append(
            f'<line x1="{x(value):.1f}" y1="{axis - 14}" x2="{x(value):.1f}" y2="{axis - 10}" stroke="#8c959f"/>'
            f'<text x="{x(value):.1f}" y="{axis}" text-anchor="middle" fill="#57606a">{_tick_label(plot, value)}</text>'
        )
    parts.append(
        f'<text x="{x(0) - 6:.1f}" y="{axis + 18}" text-anchor="end" fill="#57606a" font-size="11">'
        f'lower with the intervention</text><text x="{x(0) + 6:.1f}" y="{axis + 18}" fill="#57606a" '
        'font-size="11">higher with the intervention</text>'
    )
    bottom = axis + (52 if plot.pooled else 36)
    if any(effect.derived for effect in plot.effects):
        parts.append(
            f'<text x="{estimate_x}" y="{axis + 36}" fill="#57606a" font-size="11">* rests on derived values</text>'
        )
    if plot.note:
        parts.append(f'<text x="8" y="{bottom}" fill="#cf222e" font-size="11">{html.escape(plot.note)}</text>')
    if judged:
        legend = (
            "Risk of bias (RoB 2): (A) randomization process, (B) deviations from intended interventions, (C) missing "
            "outcome data, (D) measurement of the outcome, (E) selection of the reported result, (F) overall; "
            "+ low, - some concerns, × high"
        )
        parts.append(
            f'<text class="rob2-legend" x="8" y="{bottom + (16 if plot.note else 0) + 16}" fill="#57606a" '
            f'font-size="11">{html.escape(legend)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
