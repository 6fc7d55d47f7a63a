"""Value ↔ quote on real corpus sentences: a value must be written in (supported by) its own quote."""

from atlas_pipeline.grading.fields import grade_field
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.grading.values import numbers_in, value_support
from atlas_pipeline_tests.corpus import corpus_scope

# sentences of the corpus' human evidence quotes (PMC3398966, PMC1574360)
HR = "unadjusted hazard ratio [HR] 0.75 [95% CI 0.57–1.00], p = 0.047"
CI = "The amount of saturated fat … was 0.66% lower (95% confidence interval 0.48–0.84, p < 0.001)"


def test_every_number_of_a_range_a_percentage_a_sign_and_thousands():
    assert numbers_in(HR) == [0.75, 95.0, 0.57, 1.0, 0.047]
    for value in (0.75, 0.57, 1.0, 0.047, 95):
        assert value_support(value, HR, "number") == ""
    assert (
        value_support(0.48, CI, "number")
        == value_support(0.84, CI, "number")
        == value_support(0.66, CI, "number")
        == ""
    )
    assert value_support(0.57, "60–69 years", "number") != ""
    assert value_support(1234, "1,234 children", "integer") == ""
    assert value_support(1234, "1 234 children", "integer") == ""
    assert value_support(-1.65, "Mean BMI change was -1.65 kg/m2", "number") == ""
    assert value_support(1.65, "Mean BMI change was -1.65 kg/m2", "number") == (
        "value not in its quote: 1.65 is not written in the quote"
    )
    assert value_support(12, "in 2012 patients", "integer") != ""


def test_text_and_enum_values_need_their_words_or_an_agreed_synonym():
    design = "Controlled, double-blind, randomized clinical trial to evaluate the impact of fruit juice"
    assert value_support("double-blind randomized clinical trial", design, "string") == ""
    assert value_support("double-blind randomized clinical trials", design, "string") == ""  # a plural
    # another spelling is another word here: a person looks (the field ends approximate)
    assert value_support("double-blind randomised clinical trial", design, "string") != ""
    assert value_support("significant difference", "there was no significant difference", "string") != ""
    assert value_support("HER2+", "HER2− breast cancer", "string") != ""
    assert value_support("open-label randomized clinical trial", design, "string") == (
        "value not in its quote: 'openlabel' not in the quote"
    )
    synonyms = {"low": ["low risk", "adequate"], "high": ["not blinded", "open-label"]}
    assert value_support("low", "allocation concealment was adequate", "enum", synonyms) == ""
    assert value_support("high", "the trial was open-label", "enum", synonyms) == ""
    assert value_support("low", design, "enum", synonyms).startswith("value not in its quote: the quote does not say")
    assert value_support("2005-08-09", "Published: 09 August 2005", "date") == ""
    assert value_support(True, "anything", "boolean") == ""


def test_a_null_value_with_a_quote_is_not_reported_and_the_quote_is_kept_as_a_note():
    evidence = EvidenceScope(corpus_scope("PMC1216327"))
    result = grade_field("funding_source", "string", "metadata", {"value": None, "quote": "Sandra Valois"}, evidence)
    assert result.tier == "not_reported" and result.quote is None and "'Sandra Valois'" in result.note
    missing = grade_field("funding_source", "string", "metadata", None, evidence)
    assert missing.tier == "not_reported" and not missing.answered
