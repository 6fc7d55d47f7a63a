"""RoB 2 answered by hand on the desk, in a real browser (Debian's chromium driven by playwright), on a corpus trial
in the default mode (no model): a person adds a result, sees domain 2's conditional questions appear and go as the
answers above them change, answers domain 1 with a quote that is checked against the paper, reads the judgement the
guidance's algorithm makes and its path, and overrides it — refused without a reason, kept beside the proposal with
one."""

from atlas_pipeline.core.rob2_module import GROUP
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline_tests.support.browser import browser_page, drag_across, shoot
from atlas_pipeline_tests.support.by_hand import processed_by_hand
from atlas_pipeline_tests.support.helpers import serve
from atlas_pipeline_tests.support.juice_trial import KEY

WHO = {"rule": "rob2", "reviewer": "Ana"}


def test_a_domain_answered_by_hand_shows_its_questions_as_the_answers_ask_them(
    knowledge_base, settings_for, atlas_for, instance
):
    from atlas_pipeline.review_page.app import create_app

    settings, atlas = settings_for(knowledge_base, **WHO), atlas_for(knowledge_base, **WHO)
    processed_by_hand(knowledge_base, settings, atlas, instance)
    with (
        serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site,
        browser_page() as page,
    ):
        page.goto(f"{site}/documents/{KEY}")
        page.wait_for_selector("#rob2-none")
        page.fill("#rob2-add input[name=result_outcome]", "Duration of diarrhea")
        page.fill("#rob2-add input[name=result_time_point]", "after randomization")
        page.click("#rob2-add-result")
        result = page.wait_for_selector("[id='rob2-1001']")
        assert "Duration of diarrhea · after randomization" in result.inner_text()

        d2 = page.locator("[id='rob2-1001-D2']")
        question = d2.locator("tr[data-question='2.3']")
        assert not question.is_visible()  # asked only once 2.1 or 2.2 says so
        assert d2.locator("tr[data-question='2.6']").is_visible()  # always asked
        d2.locator("select[name='answer:2.1']").select_option("Y")
        assert question.is_visible() and not d2.locator("tr[data-question='2.4']").is_visible()
        d2.locator("select[name='answer:2.3']").select_option("PY")
        assert d2.locator("tr[data-question='2.4']").is_visible()  # deviations: were they likely to matter?
        d2.locator("select[name='answer:2.1']").select_option("N")
        d2.locator("select[name='answer:2.2']").select_option("PN")
        assert not question.is_visible() and not d2.locator("tr[data-question='2.4']").is_visible()
        d2.locator("select[name='answer:2.6']").select_option("NI")
        assert d2.locator("tr[data-question='2.7']").is_visible()  # 2.6 NI: the impact of not analysing as randomised

        d1 = page.locator("[id='rob2-1001-D1']")
        d1.locator("select[name='answer:1.1']").select_option("Y")
        d1.locator("input[name='quote:1.1']").fill("permuted blocks of variable length")  # typed: found in the text
        d1.locator("select[name='answer:1.2']").select_option("NI")
        d1.locator("select[name='answer:1.3']").select_option("N")
        page.click("[id='save-rob2-1001-D1']")  # "No information" without what was looked for: refused, nothing kept
        page.wait_for_selector("text=1.2: 'No information' says what was looked for")
        assert not [d for d in load_decisions(atlas.store(), KEY) if d.field.startswith(f"{GROUP}[1001].q")]
        d1 = page.locator("[id='rob2-1001-D1']")
        d1.locator("select[name='answer:1.1']").select_option("Y")
        d1.locator("input[name='quote:1.1']").click()  # the answer's quote box chosen: the words selected go there
        assert "D1 1.1" not in page.inner_text("#quote-target") and "quote 1.1" in page.inner_text("#quote-target")
        page.fill("#find-text", "permuted blocks")
        page.click("#find-button")
        page.locator(".find-hit").first.click()
        page.wait_for_selector("#words .word[title='permuted']")
        drag_across(page, "permuted", "length,")
        page.click("#use-selection")
        assert (
            d1.locator("input[name='quote:1.1']").input_value() == "permuted blocks of vari- able length,"
        )  # as printed, broken at the line
        d1.locator("select[name='answer:1.2']").select_option("NI")
        d1.locator("input[name='note:1.2']").fill("looked for: sealed envelopes, central allocation")
        d1.locator("select[name='answer:1.3']").select_option("N")
        shoot(page, "rob2-domain.png")
        page.click("[id='save-rob2-1001-D1']")
        page.wait_for_selector("text=RoB 2 D1 of result 1001: 3 decision(s) recorded by Ana")
        verdict = page.locator("[id='rob2-1001-D1'] .rob2-verdict").inner_text()
        assert "algorithm: Some concerns (1.2=NI, 1.3=N)" in verdict  # the path the guidance takes
        # domain 2 was changed but not saved: its answers are not recorded, nothing judged there
        assert "not judged yet: answer 2.1, 2.2" in page.locator("[id='rob2-1001-D2'] .rob2-verdict").inner_text()

        decisions = {d.field: d for d in load_decisions(atlas.store(), KEY)}
        answer = decisions[f"{GROUP}[1001].q1_1"]
        assert (answer.action, answer.value, answer.reviewer) == ("correct", "Y", "Ana")
        assert (
            answer.quote == "permuted blocks of vari- able length,"
        )  # as printed, broken at the line and answer.quote_check is not None
        assert (
            answer.quote_check.tier == "approximate" and answer.quote_check.selected_on == 2
        )  # found where selected; a judgment
        assert decisions[f"{GROUP}[1001].q1_2"].note == "looked for: sealed envelopes, central allocation"

        page.locator("[id='rob2-1001-D1'] select[name='override:D1']").select_option("Low")
        page.click("[id='save-rob2-1001-D1']")
        page.wait_for_selector("text=needs its reason")
        assert f"{GROUP}[1001].d1_override" not in {d.field for d in load_decisions(atlas.store(), KEY)}
        page.goto(f"{site}/documents/{KEY}")
        d3 = page.locator("[id='rob2-1001-D3']")  # an override departs from a judgement: none before one
        d3.locator("select[name='override:D3']").select_option("Low")
        d3.locator("input[name='reason:D3']").fill("everyone followed up")
        page.click("[id='save-rob2-1001-D3']")
        page.wait_for_selector("text=D3 is not judged yet (answer 3.1, 3.2, 3.3, 3.4 first)")  # 3.2 on may be asked
        page.goto(f"{site}/documents/{KEY}")
        form = page.locator("[id='rob2-1001-D1']")
        form.locator("select[name='override:D1']").select_option("Low")
        form.locator("input[name='reason:D1']").fill("central pharmacy coded the bottles (protocol, table 1)")
        page.click("[id='save-rob2-1001-D1']")
        page.wait_for_selector("text=RoB 2 D1 of result 1001: 1 decision(s) recorded by Ana")
        verdict = page.locator("[id='rob2-1001-D1'] .rob2-verdict").inner_text()
        assert "algorithm: Some concerns" in verdict  # the proposal stays in view beside the override
        assert page.locator("[id='rob2-1001-D1'] select[name='override:D1']").input_value() == "Low"
        override = {d.field: d for d in load_decisions(atlas.store(), KEY)}[f"{GROUP}[1001].d1_override"]
        assert (override.value, override.note) == ("Low", "central pharmacy coded the bottles (protocol, table 1)")
