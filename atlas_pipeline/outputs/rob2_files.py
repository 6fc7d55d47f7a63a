"""The RoB 2 files a review takes away, one row per study × result (``outputs.rob2_results``): Atlas's own table
(answers, judgements proposed and reported, overrides with their reasons, what is missing), RevMan's risk-of-bias
table for RoB 2 (judgement and support per domain), robvis's input (``Study, D1…D5, Overall, Weight``), and the
traffic-light and summary plots as SVG, in robvis's colours.

RevMan Web takes RoB 2 per result in its *Edit risk of bias* dialog; its knowledge base documents no file import
for RoB 2, so the RevMan file follows the risk-of-bias table of RevMan's data packages (``Domain (judgement): …``,
``Domain (support): …``), one row per result, its support text ready to paste. robvis reads the full words ("Low",
"Some concerns", "High"): only fully judged results go in its file (a result still missing an answer is in the
other files, said so), each weighted 1 — set ``Weight`` to the analysis's weights for a weighted summary plot.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

import polars as pl

from atlas_pipeline.core.rob2_module import DOMAIN_CODES, OVERALL, SHORT_NAMES
from atlas_pipeline.outputs.rob2_results import CODES, ResultAssessment

REVMAN_DOMAINS = {
    "D1": "Bias arising from the randomization process",
    "D2": "Bias due to deviations from intended interventions",
    "D3": "Bias due to missing outcome data",
    "D4": "Bias in measurement of the outcome",
    "D5": "Bias in selection of the reported result",
    OVERALL: "Overall bias",
}
REVMAN_JUDGEMENTS = {"Low": "Low risk", "Some concerns": "Some concerns", "High": "High risk"}
COLOURS = {"Low": "#02C100", "Some concerns": "#E2DF07", "High": "#BF0000", None: "#d0d7de"}  # robvis "cochrane"
SYMBOLS = {"Low": "+", "Some concerns": "-", "High": "×", None: ""}
LETTERS = dict(zip(CODES, "ABCDEF", strict=True))  # as RevMan's forest plot names the columns

ATLAS_SCHEMA = {
    "study_id": pl.String,
    "study": pl.String,
    "outcome": pl.String,
    "time_point": pl.String,
    "effect": pl.String,
    "report": pl.String,
    "entry": pl.Int64,
    **{code: pl.String for code in CODES},
    **{f"proposed_{code}": pl.String for code in CODES},
    "overrides": pl.String,
    "missing": pl.String,
    "conflicts": pl.String,
    "paths": pl.String,
    "answers": pl.String,
    **{f"support_{code}": pl.String for code in DOMAIN_CODES},
    "problems": pl.String,
}
REVMAN_COLUMNS = (
    "Study",
    "Outcome",
    "Result",
    *(f"Domain ({part}): {REVMAN_DOMAINS[code]}" for code in CODES for part in ("judgement", "support")),
)
ROBVIS_COLUMNS = ("Study", *DOMAIN_CODES, OVERALL, "Weight")


def _name(assessment: ResultAssessment, labels: Mapping[str, str]) -> str:
    return labels.get(assessment.study_id, assessment.study_id)


def _joined(values: Mapping[str, str]) -> str | None:
    return "; ".join(f"{code}: {text}" for code, text in values.items()) or None


def atlas_frame(assessments: list[ResultAssessment], labels: Mapping[str, str]) -> pl.DataFrame:
    rows = [
        {
            "study_id": a.study_id,
            "study": _name(a, labels),
            "outcome": a.outcome or None,
            "time_point": a.time_point or None,
            "effect": a.effect,
            "report": a.report or None,
            "entry": a.entry or None,
            **{code: a.judgements.get(code) for code in CODES},
            **{f"proposed_{code}": a.proposed.get(code) for code in CODES},
            "overrides": _joined(a.overrides),
            "missing": _joined(a.missing),
            "conflicts": ", ".join(a.conflicts) or None,
            "paths": _joined(a.paths),
            "answers": "; ".join(f"{q}={answer}" for q, answer in a.answers.items()) or None,
            **{f"support_{code}": a.support.get(code) for code in DOMAIN_CODES},
            "problems": "; ".join(a.problems) or None,
        }
        for a in assessments
    ]
    return pl.DataFrame(rows, schema=ATLAS_SCHEMA, orient="row")


def _revman_support(assessment: ResultAssessment, code: str) -> str:
    parts = []
    if code in assessment.overrides:
        proposed = assessment.proposed.get(code) or "none"
        parts.append(f"Judged {assessment.overrides[code]} (the algorithm proposed {proposed}).")
    if code in assessment.missing:
        parts.append(f"Not judged yet: answer {assessment.missing[code]} first.")
    if code == OVERALL and assessment.judgements.get(code):
        parts.append("From the five domains (RoB 2's overall rule).")
    elif assessment.support.get(code):
        parts.append(assessment.support[code] + ".")
    conflicts = [q for q in assessment.conflicts if q.startswith(code[1:] + ".") or q == f"{code} override"]
    if conflicts:
        parts.append(f"Disputed, not counted until settled: {', '.join(conflicts)}.")
    return " ".join(parts)


def revman_rows(assessments: list[ResultAssessment], labels: Mapping[str, str]) -> list[dict[str, str]]:
    rows = []
    for a in assessments:
        row = {"Study": _name(a, labels), "Outcome": a.outcome, "Result": a.time_point}
        for code in CODES:
            judgement = a.judgements.get(code)
            row[f"Domain (judgement): {REVMAN_DOMAINS[code]}"] = REVMAN_JUDGEMENTS.get(judgement or "", "")
            row[f"Domain (support): {REVMAN_DOMAINS[code]}"] = _revman_support(a, code)
        rows.append(row)
    return rows


def robvis_rows(assessments: list[ResultAssessment], labels: Mapping[str, str]) -> list[dict[str, str]]:
    """robvis's rows: the fully judged results, each named by its study and result (robvis needs them unique)."""
    rows = []
    for a in assessments:
        if not a.judged:
            continue
        row = {"Study": f"{_name(a, labels)}: {a.result}" if a.result else _name(a, labels)}
        row |= {code: str(a.judgements[code]) for code in CODES}
        rows.append(row | {"Weight": "1"})
    return rows


def _circle(x: float, y: float, judgement: str | None, tip: str, radius: float = 9) -> str:
    colour = COLOURS.get(judgement, COLOURS[None])
    symbol = SYMBOLS.get(judgement or "", "")
    return (
        f'<g class="judgement" data-judgement="{html.escape(judgement or "")}"><title>{html.escape(tip)}</title>'
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="{colour}" stroke="#57606a" stroke-width="0.5"/>'
        f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle" font-weight="bold" fill="#000">{symbol}</text></g>'
    )


def _legend(y: float) -> str:
    parts, x = [], 8.0
    for judgement in ("Low", "Some concerns", "High", None):
        parts.append(_circle(x + 9, y, judgement, judgement or "not judged yet", 7))
        text = judgement or "not judged yet (an answer missing)"
        parts.append(f'<text x="{x + 22:.1f}" y="{y + 4:.1f}" font-size="12">{html.escape(text)}</text>')
        x += 34 + 7 * len(text)
    return "".join(parts)


def traffic_light_svg(assessments: list[ResultAssessment], labels: Mapping[str, str]) -> str:
    """A row per study × result, a column per domain and the overall judgement (robvis's traffic-light plot)."""
    left, step, top = 360, 34, 56
    width = left + step * len(CODES) + 24
    height = top + step * max(1, len(assessments)) + 90
    title = "Risk of bias (RoB 2) per result"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rob2-traffic-light" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" aria-label="{title}">',
        f'<text x="8" y="20" font-weight="bold">{title}</text>',
    ]
    for index, code in enumerate(CODES):
        x = left + step * index + step / 2
        parts.append(f'<text x="{x:.1f}" y="{top - 12}" text-anchor="middle" font-weight="bold">{code}</text>')
    for row, a in enumerate(assessments):
        y = top + step * row + step / 2
        name = f"{_name(a, labels)}: {a.result}" if a.result else _name(a, labels)
        parts.append(
            f'<g class="result" data-study="{html.escape(a.study_id)}">'
            f'<text x="8" y="{y + 4:.1f}">{html.escape(name[:48])}</text>'
        )
        for index, code in enumerate(CODES):
            judgement = a.judgements.get(code)
            tip = f"{name} — {SHORT_NAMES[code]}: {judgement or 'not judged yet'}"
            if code in a.missing:
                tip += f" (answer {a.missing[code]} first)"
            if code in a.overrides:
                tip += f" — overridden: {a.overrides[code]}"
            parts.append(_circle(left + step * index + step / 2, y, judgement, tip))
        parts.append("</g>")
    if not assessments:
        parts.append(f'<text x="8" y="{top + 16}" fill="#57606a">No result assessed yet.</text>')
    bottom = top + step * max(1, len(assessments)) + 20
    names = "; ".join(f"{code} {SHORT_NAMES[code].lower()}" for code in DOMAIN_CODES)
    parts.append(f'<text x="8" y="{bottom}" font-size="11" fill="#57606a">{html.escape(names)}</text>')
    parts.append(_legend(bottom + 26))
    parts.append("</svg>")
    return "".join(parts)


def summary_svg(assessments: list[ResultAssessment]) -> str:
    """Per domain, the share of results at each judgement (robvis's summary plot, unweighted)."""
    left, bar, step, top = 330, 420, 30, 40
    width, height = left + bar + 24, top + step * len(CODES) + 70
    title = f"Risk of bias (RoB 2): {len(assessments)} result(s)"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="rob2-summary" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" aria-label="{title}">',
        f'<text x="8" y="20" font-weight="bold">{html.escape(title)}</text>',
    ]
    for row, code in enumerate(CODES):
        y = top + step * row
        parts.append(f'<text x="8" y="{y + 17}">{html.escape(f"{code} {SHORT_NAMES[code]}")}</text>')
        x = float(left)
        total = len(assessments) or 1
        for judgement in ("Low", "Some concerns", "High", None):
            count = sum(1 for a in assessments if a.judgements.get(code) == judgement)
            if not count:
                continue
            share = bar * count / total
            tip = f"{SHORT_NAMES[code]}: {count} of {len(assessments)} {judgement or 'not judged yet'}"
            parts.append(
                f'<g class="share" data-judgement="{html.escape(judgement or "")}"><title>{html.escape(tip)}</title>'
                f'<rect x="{x:.1f}" y="{y + 2}" width="{share:.1f}" height="{step - 8}" '
                f'fill="{COLOURS[judgement]}" stroke="#ffffff"/>'
                f'<text x="{x + share / 2:.1f}" y="{y + 17}" text-anchor="middle" font-size="11">'
                f"{100 * count / total:.0f}%</text></g>"
            )
            x += share
    parts.append(_legend(top + step * len(CODES) + 30))
    parts.append("</svg>")
    return "".join(parts)
