"""A forest plot per outcome and measure, from the arm-level final values — so that a reviewer sees at a glance the
study whose effect stands apart, and checks its numbers first.

Each study's effect is computed as metafor's ``escalc`` computes it (log risk ratio from counts, with 0.5 added to
every cell of a table with a zero; mean difference from means and SDs; ``yi``/``vi`` as reported for an estimate with
its CI), pooled by DerSimonian and Laird's random-effects method (RevMan's default; the R test checks it against
``rma(method = "DL")``). A plot in which a study appears more than once (several time points of one outcome) is drawn
but not pooled: the same participants would count twice. The plot is an SVG: in the review page each row links to
its evidence; beside the exports it is a file any browser or document opens.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from atlas_pipeline.outputs.analysis_files import escalc_rows

FOREST_FOLDER = "forest_plots"  # beside the exports: one <outcome>_<measure>.svg per plot
RATIO_MEASURES = frozenset({"RR", "OR", "HR"})
Z = 1.959964  # the 97.5th percentile of the normal distribution


@dataclass(frozen=True)
class Effect:
    study_id: str
    document_key: str
    entry: int
    time_point: str
    estimate: float  # yi: on the log scale for a ratio
    variance: float  # vi
    evidence_field: str  # the field whose evidence the row links to

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

    @property
    def lower(self) -> float:
        return self.estimate - Z * self.se

    @property
    def upper(self) -> float:
        return self.estimate + Z * self.se


@dataclass
class ForestPlot:
    outcome: str
    measure: str
    effects: list[Effect] = field(default_factory=list)
    pooled: Pooled | None = None
    note: str = ""

    @property
    def ratio(self) -> bool:
        return self.measure in RATIO_MEASURES

    @property
    def slug(self) -> str:
        words = re.sub(r"[^a-z0-9]+", "-", self.outcome.lower()).strip("-")[:60] or "outcome"
        return f"{words}_{self.measure.lower()}"

    def shown(self, value: float) -> float:
        """A value as a reader reads it: a ratio back from the log scale."""
        return math.exp(value) if self.ratio else value


def log_risk_ratio(ai: int, bi: int, ci: int, di: int) -> tuple[float, float]:
    """yi and vi of a log risk ratio from a 2×2 table (0.5 added to each cell when one is 0, as escalc does)."""
    if 0 in (ai, bi, ci, di):
        ai, bi, ci, di = ai + 0.5, bi + 0.5, ci + 0.5, di + 0.5
    n1, n2 = ai + bi, ci + di
    return math.log((ai / n1) / (ci / n2)), 1 / ai - 1 / n1 + 1 / ci - 1 / n2


def dersimonian_laird(effects: list[Effect]) -> Pooled | None:
    """The random-effects pooled estimate (DerSimonian and Laird's τ²); None without an effect."""
    if not effects:
        return None
    weights = [1 / effect.variance for effect in effects]
    total = sum(weights)
    fixed = sum(w * e.estimate for w, e in zip(weights, effects, strict=True)) / total
    q = sum(w * (e.estimate - fixed) ** 2 for w, e in zip(weights, effects, strict=True))
    c = total - sum(w * w for w in weights) / total
    tau2 = max(0.0, (q - (len(effects) - 1)) / c) if c > 0 else 0.0
    random = [1 / (effect.variance + tau2) for effect in effects]
    estimate = sum(w * e.estimate for w, e in zip(random, effects, strict=True)) / sum(random)
    return Pooled(estimate, math.sqrt(1 / sum(random)), tau2, len(effects))


def forest_plots(arms: list[dict]) -> list[ForestPlot]:
    """One plot per outcome (its name as written, case and spacing aside) and measure, from the arm table's rows."""
    plots: dict[tuple[str, str], ForestPlot] = {}

    def plot_for(row: dict, measure: str) -> ForestPlot:
        name = " ".join(str(row["outcome"] or "outcome not named").split())
        return plots.setdefault((name.lower(), measure), ForestPlot(name, measure))

    def add(row: dict, measure: str, yi: float, vi: float, evidence: str) -> None:
        if vi > 0 and math.isfinite(yi) and math.isfinite(vi):
            effect = Effect(
                row["study_id"], row["document_key"], row["entry"], row["time_point"] or "", yi, vi, evidence
            )
            plot_for(row, measure).effects.append(effect)

    rows = escalc_rows(arms)
    for row in rows["dichotomous"]:
        yi, vi = log_risk_ratio(row["ai"], row["bi"], row["ci"], row["di"])
        add(row, "RR", yi, vi, f"outcomes[{row['entry']}].events_intervention")
    for row in rows["continuous"]:
        if row["n1i"] > 0 and row["n2i"] > 0:
            vi = row["sd1i"] ** 2 / row["n1i"] + row["sd2i"] ** 2 / row["n2i"]
            add(row, "MD", row["m1i"] - row["m2i"], vi, f"outcomes[{row['entry']}].mean_intervention")
    counted = {(row["document_key"], row["entry"]) for kind in ("dichotomous", "continuous") for row in rows[kind]}
    for row in rows["generic"]:
        if (row["document_key"], row["entry"]) not in counted:  # arm data first; the reported estimate otherwise
            add(row, row["measure"], row["yi"], row["vi"], f"outcomes[{row['entry']}].effect_estimate")
    for plot in plots.values():
        plot.effects.sort(key=lambda effect: (effect.study_id, effect.time_point, effect.entry))
        studies = [effect.study_id for effect in plot.effects]
        if len(set(studies)) < len(studies):
            plot.note = "a study appears more than once (several time points or comparisons): not pooled"
        else:
            plot.pooled = dersimonian_laird(plot.effects)
    return sorted(plots.values(), key=lambda plot: (-len(plot.effects), plot.outcome.lower(), plot.measure))


def _format(plot: ForestPlot, value: float) -> str:
    return f"{plot.shown(value):.2f}"


def forest_svg(plot: ForestPlot, link: Callable[[Effect], str] | None = None) -> str:
    """The plot as SVG text: a row per study (square sized by weight, its 95% CI), the pooled diamond, the line of
    no effect. ``link``: each study row's target (the review page's evidence of its values)."""
    rows = len(plot.effects) + (1 if plot.pooled else 0)
    width, left, middle, top, step = 760, 250, 300, 44, 26
    height = top + step * rows + (62 if plot.note else 46)
    values = [v for e in plot.effects for v in (e.lower, e.upper)]
    values += [plot.pooled.lower, plot.pooled.upper] if plot.pooled else []
    low, high = min([*values, 0.0]), max([*values, 0.0])
    pad = (high - low) * 0.05 or 1.0
    low, high = low - pad, high + pad

    def x(value: float) -> float:
        return left + (value - low) / (high - low) * middle

    weights = [1 / e.variance for e in plot.effects]
    heaviest = max(weights, default=1.0)
    name = "risk ratio" if plot.measure == "RR" else "mean difference" if plot.measure == "MD" else plot.measure
    title = html.escape(f"{plot.outcome} — {name} (95% CI)")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="forest-plot" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" aria-label="{title}">',
        f'<text x="8" y="20" font-weight="bold">{title}</text>',
        f'<text x="8" y="38" fill="#57606a">study</text>'
        f'<text x="{left + middle + 16}" y="38" fill="#57606a">{html.escape(plot.measure)} [95% CI]</text>',
        f'<line x1="{x(0):.1f}" y1="{top - 4}" x2="{x(0):.1f}" y2="{top + step * rows}" stroke="#8c959f"/>',
    ]
    for number, (effect, weight) in enumerate(zip(plot.effects, weights, strict=True)):
        y = top + step * number + step / 2
        size = 4 + 8 * math.sqrt(weight / heaviest)
        label = effect.study_id + (f" · {effect.time_point}" if effect.time_point else "")
        row = (
            f'<g class="study" data-study="{html.escape(effect.study_id)}" '
            f'data-document="{html.escape(effect.document_key)}">'
            f"<title>{html.escape(effect.document_key)}: {html.escape(plot.outcome)}</title>"
            f'<rect x="0" y="{y - step / 2:.1f}" width="{width}" height="{step}" fill="#0969da" fill-opacity="0"/>'
            f'<text x="8" y="{y + 4:.1f}">{html.escape(label[:34])}</text>'
            f'<line x1="{x(effect.lower):.1f}" y1="{y:.1f}" x2="{x(effect.upper):.1f}" y2="{y:.1f}" stroke="#24292f"/>'
            f'<rect x="{x(effect.estimate) - size / 2:.1f}" y="{y - size / 2:.1f}" width="{size:.1f}" '
            f'height="{size:.1f}" fill="#0969da"/>'
            f'<text x="{left + middle + 16}" y="{y + 4:.1f}">{_format(plot, effect.estimate)} '
            f"[{_format(plot, effect.lower)}, {_format(plot, effect.upper)}]</text></g>"
        )
        parts.append(f'<a href="{html.escape(link(effect))}">{row}</a>' if link else row)
    if plot.pooled:
        pooled = plot.pooled
        y = top + step * len(plot.effects) + step / 2
        points = (
            f"{x(pooled.lower):.1f},{y:.1f} {x(pooled.estimate):.1f},{y - 7:.1f} "
            f"{x(pooled.upper):.1f},{y:.1f} {x(pooled.estimate):.1f},{y + 7:.1f}"
        )
        parts.append(
            f'<g class="pooled"><text x="8" y="{y + 4:.1f}" font-weight="bold">Random effects (k = {pooled.k})</text>'
            f'<polygon points="{points}" fill="#8250df"/>'
            f'<text x="{left + middle + 16}" y="{y + 4:.1f}" font-weight="bold">{_format(plot, pooled.estimate)} '
            f"[{_format(plot, pooled.lower)}, {_format(plot, pooled.upper)}]</text></g>"
        )
    axis = top + step * rows + 18
    for value in (low + pad, 0.0, high - pad):
        parts.append(
            f'<text x="{x(value):.1f}" y="{axis}" text-anchor="middle" fill="#57606a">{_format(plot, value)}</text>'
        )
    parts.append(
        f'<text x="{left}" y="{axis + 18}" fill="#57606a" font-size="11">'
        "← lower with the intervention · higher →</text>"
    )
    if plot.note:
        parts.append(f'<text x="8" y="{axis + 34}" fill="#cf222e" font-size="11">{html.escape(plot.note)}</text>')
    parts.append("</svg>")
    return "".join(parts)
