"""What the model is asked for RoB 2: the report's results (each outcome × time point once, from the extraction's
own entries) and its methods and results — the whole text when it fits, else the sections that say what the trial
did, never its references."""

from atlas_pipeline.core.rob2_module import rob2_module
from atlas_pipeline.core.templates import Template, TemplateField, TemplateModule
from atlas_pipeline.extraction.rob2_proposal import methods_and_results, results_to_assess
from atlas_pipeline.grading.fields import FieldResult

PAPER = "\n\n".join(
    [
        "Title of the trial\n\nSome lead text.",
        "## Introduction\n\n" + "Background on the disease. " * 200,
        "## Methods\n\nParticipants were randomised by a computer-generated list held by the pharmacy.",
        "## Results\n\nOf 120 randomised, 112 were analysed.",
        "## Discussion\n\n" + "What it means. " * 200,
        "## References\n\n1. Someone et al. A randomised trial. 2001.",
    ]
)


def test_the_methods_and_results_are_sent_when_the_whole_paper_does_not_fit():
    assert methods_and_results(PAPER, len(PAPER)) == PAPER  # it fits: all of it
    sent = methods_and_results(PAPER, 2_000)
    assert "computer-generated list held by the pharmacy" in sent and "112 were analysed" in sent
    assert "Background on the disease" not in sent and "What it means" not in sent and "Someone et al" not in sent
    assert len(sent) <= 2_000
    assert methods_and_results("no headings at all " * 500, 1_000) == ("no headings at all " * 500)[:1_000]


def _result(value) -> FieldResult:
    return FieldResult("outcomes", value, None, 0.0, "not_reported" if value is None else "verified")


def test_each_outcome_and_time_point_is_one_result_in_the_order_found():
    outcomes = TemplateModule(
        name="outcomes",
        repeating=True,
        identity=["outcome", "time_point", "comparator"],
        fields=[TemplateField(name=n, type="string", description=n) for n in ("outcome", "time_point", "comparator")],
    )
    template = Template(code="t", name="t", version="1", modules=[outcomes, rob2_module("assignment")])
    fields = {
        "outcomes[1].outcome": _result("Pain"),
        "outcomes[1].time_point": _result("6 weeks"),
        "outcomes[2].outcome": _result("pain "),  # another comparison of the same result
        "outcomes[2].time_point": _result("6  Weeks"),
        "outcomes[3].outcome": _result("Function"),
        "outcomes[4].outcome": _result(None),  # no outcome named: no result to assess
        "outcomes[4].time_point": _result("1 year"),
    }
    found = results_to_assess(template, fields, 30)
    named = [(r["result_outcome"].value, r["result_time_point"].value) for r in found]
    assert named == [("Pain", "6 weeks"), ("Function", None)]
    assert found[1]["result_time_point"].note == "not given"
    assert len(results_to_assess(template, fields, 1)) == 1


def test_an_estimate_counts_a_request_per_domain_for_a_rule_with_rob2():
    from atlas_pipeline.config.settings import PROJECT_ROOT
    from atlas_pipeline.core.templates import assemble_template, load_template
    from atlas_pipeline.extraction.estimate import estimate_document
    from atlas_pipeline.extraction.llm import LLMClient, LLMConfig
    from atlas_pipeline.extraction.rules import load_rule

    base = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    with_rob2 = assemble_template(base, [], rob2_module("assignment"))
    rule = load_rule(PROJECT_ROOT / "seeds" / "rules", "rob2")
    client = LLMClient(LLMConfig(base_url="http://127.0.0.1:9", model="m", max_tokens=32000))  # never asked
    plain = estimate_document(client, base, rule, "trial.pdf", PAPER, [], 1000)
    assessed = estimate_document(client, with_rob2, rule, "trial.pdf", PAPER, [], 1000)
    assert assessed.requests == plain.requests + 5  # the data extraction's request is the same, and one per domain
    assert assessed.prompt_tokens > plain.prompt_tokens and assessed.completion_tokens > plain.completion_tokens
