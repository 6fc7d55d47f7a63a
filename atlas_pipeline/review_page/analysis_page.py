"""The review page's analysis: a forest plot per outcome and measure from the final values (``outputs.forest_plots``),
each study's row linking to the evidence of its numbers — the study that stands apart is the one to check first."""

from __future__ import annotations

import logging
from urllib.parse import quote as url_quote

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from atlas_pipeline.core.redaction import redact
from atlas_pipeline.outputs.analysis_files import escalc_rows, study_entries
from atlas_pipeline.outputs.forest_plots import Effect, forest_plots, forest_svg, risk_of_bias_by_result
from atlas_pipeline.outputs.rob2_files import summary_svg, traffic_light_svg
from atlas_pipeline.outputs.rob2_results import ResultAssessment, assess_study
from atlas_pipeline.outputs.study_labels import study_labels
from atlas_pipeline.outputs.study_report import studies
from atlas_pipeline.review.study_values import load_choices
from atlas_pipeline.review_page.page_state import ReviewPage

LOG = logging.getLogger("atlas.review")


def _evidence(effect: Effect) -> str:
    return f"/documents/{url_quote(effect.document_key)}?field={url_quote(effect.evidence_field)}"


def analysis(request: Request, templates: Jinja2Templates) -> Response:
    page: ReviewPage = request.app.state.page
    template = page.template()
    states = page.visible_states(request)  # where the person extracts blind: their own values only
    found = studies(states, template, load_choices(page.store))
    entries, excluded = study_entries(found, template)
    plots, problems = [], []
    labels = study_labels(found)
    rob2: list[ResultAssessment] = []
    if template.rob2 is not None:
        for study in found:
            try:
                rob2 += assess_study(study, template)
            except Exception as error:  # one study's RoB 2 that cannot be judged never takes the page down
                LOG.exception("RoB 2 of %s not assessed", study.id)
                problems.append(
                    f"RoB 2 of {study.id}: not assessed ({type(error).__name__}: {redact(str(error))[:200]})"
                )
    judged = risk_of_bias_by_result(rob2)
    for plot in forest_plots(escalc_rows(entries), labels):  # studies named as RevMan's files name them
        try:
            plots.append((plot, Markup(forest_svg(plot, link=_evidence, rob2=judged))))
        except Exception as error:  # one plot that cannot be drawn never takes the page down: said in its place
            LOG.exception("forest plot of %s not drawn", plot.outcome)
            problems.append(f"{plot.outcome}: not drawn ({type(error).__name__}: {redact(str(error))[:200]})")
    context = {
        "rob2": template.rob2,
        "rob2_results": rob2,
        "rob2_plots": [Markup(traffic_light_svg(rob2, labels)), Markup(summary_svg(rob2))] if template.rob2 else [],
        "plots": plots,
        "problems": problems,
        "arms": 2 * len(entries),
        "excluded": excluded,
        "reviewer": page.reviewer(request),
    }
    return templates.TemplateResponse(request, "analysis.html", context)
