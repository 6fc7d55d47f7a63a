"""Value ↔ quote on real corpus sentences: a value must be written in (supported by) its own quote."""

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import TemplateField, load_template
from atlas_pipeline.extraction.extractor import _merge
from atlas_pipeline.grading.fields import apply_plausibility, grade_field
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.grading.values import clean_value, numbers_in, support_of, value_support
from atlas_pipeline.parsing.regions import non_study_regions, reference_list, region_at
from atlas_pipeline_tests.support.corpus import corpus_scope, parsed_corpus

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


def test_labels_need_their_own_token_with_its_case_or_an_agreed_synonym():
    odds = {"OR": ["odds ratio"]}
    sentence = "metformin vs placebo – OR (95 % CI), 5.2 (1.3–20.7), P value = 0.019"  # PMC4987981
    assert value_support("OR", sentence, "label", odds) == ""
    assert value_support("OR", "odds ratio 1.21, 95% confidence interval 0.70 to 2.10", "label", odds) == ""
    for quote in ("Patients were randomised to two groups.", "pregnant or nursing women", "treated with ORS"):
        assert value_support("OR", quote, "label", odds).startswith("value not in its quote"), quote
    assert support_of("or", "pregnant or nursing women", "label").cap == "unverified"  # a stop-word says nothing
    assert support_of("the", "the patients were randomised", "text").cap == "unverified"
    assert support_of("....", "Funding was provided by the NIH.", "text").cap == "unverified"
    assert support_of([], "anything", "list").cap == "unverified"


def test_judgments_are_never_verified_by_a_word_and_free_text_needs_its_words_together():
    high = support_of("high", "products defined as high in saturated fat", "judgment")
    assert high.cap == "approximate" and high.problem.startswith("a judgment ('high')")
    assert support_of("low", "allocation was concealed adequately", "judgment").cap == "approximate"
    long = "Patients in the control group were seen by the study nurse every four weeks and followed up for a year"
    assert support_of("patients", long, "text").problem  # one common word of a long quote
    assert not support_of("placebo", "the control group received an identical placebo capsule daily", "text").problem
    scattered = "Juice was given to the first group, and after many weeks of follow-up the other group received water"
    assert "scattered" in support_of("juice water", scattered, "text").problem
    assert not support_of("Valois 2005", "© 2005 Valois et al", "text").problem


def test_values_are_cleaned_of_markup_and_the_raw_answer_is_kept():
    assert clean_value("Geoff W Melville<sup>1</sup>") == "Geoff W Melville"
    assert clean_value("**White Grape Juice**") == "White Grape Juice"
    assert clean_value(["_Lactobacillus_ GG", "<b>placebo</b>"]) == ["Lactobacillus GG", "placebo"]
    assert clean_value(12.5) == 12.5
    evidence = EvidenceScope(corpus_scope("PMC1216327"))
    answer = {"value": "Sandra Valois<sup>1</sup>", "quote": "Sandra Valois<sup>1</sup> , Hugo Costa-Ribeiro"}
    result = grade_field("study_id", "string", "metadata", answer, evidence)
    assert (result.value, result.raw_value, result.tier) == ("Sandra Valois", answer["value"], "verified")


def test_a_quote_from_the_reference_list_or_a_running_header_supports_no_study_field():
    parsed = parsed_corpus("rct/PMC1216327.pdf")
    references = reference_list(parsed.markdown)
    assert references is not None
    assert parsed.markdown[references.start : references.end].lstrip().startswith("## **References**")
    assert "Welch's Inc" not in parsed.markdown[references.start : references.end]  # the acknowledgements before
    evidence = EvidenceScope(parsed.markdown, parsed.tables)
    cited = {"value": "Ribeiro H", "quote": "Ribeiro H, Ribeiro TC, Valois S, Mattos A, Lifshitz F"}
    result = grade_field("study_id", "string", "metadata", cited, evidence)
    assert result.tier == "approximate" and "quoted from the reference list" in result.note
    header = {
        "value": "Nutrition Journal",
        "quote": "Nutrition Journal 2005, 4 :23 http://www.nutritionj.com/content/4/1/23",
    }
    result = grade_field("funding_source", "string", "metadata", header, evidence)
    assert "running header" in result.note
    body = {"value": "Welch's Inc.", "quote": "Supported in part by Welch's Inc. and Pediatric Sunshine Academics"}
    assert grade_field("funding_source", "string", "metadata", body, evidence).tier == "verified"
    # a heading inside a table of contents, a dot leader: not the study's text either
    toc = "# Contents\n\nMethods .......... 3\n\nResults ........ 7\n\n# Methods\n\nWe randomised 40 patients."
    kinds = {region.kind for region in non_study_regions(toc)}
    assert kinds == {"a table of contents"}
    assert region_at(non_study_regions(toc), toc.index("We randomised")) is None


def test_implausible_values_are_flagged_with_the_rule():
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    evidence = EvidenceScope("Trial registration NCT0123456 and NCT01234567. Men were 145% of the sample.")
    fields = {
        "nct_number": grade_field(
            "nct_number", "string", "metadata", {"value": "NCT0123456", "quote": "NCT0123456"}, evidence
        ),
        "male_percent": grade_field("male_percent", "number", "baseline", {"value": 145, "quote": "145%"}, evidence),
    }
    good = grade_field("nct_number", "string", "metadata", {"value": "NCT01234567", "quote": "NCT01234567"}, evidence)
    declared = {
        "nct_number": template.field_definition("nct_number"),  # rct_base: NCT + 8 digits (or another registry)
        "male_percent": TemplateField(name="male_percent", type="number", description="-", unit="%", maximum=100),
    }
    messages = apply_plausibility(declared, fields)
    assert len(messages) == 2
    assert fields["nct_number"].flags[0].startswith("nct_number: 'NCT0123456' does not match the pattern")
    assert fields["male_percent"].flags == ["male_percent: 145 is above the plausible maximum 100 %"]
    assert apply_plausibility({"nct_number": template.field_definition("nct_number")}, {"nct_number": good}) == []


def test_chunks_giving_different_values_are_a_conflict_whatever_their_tiers():
    evidence = EvidenceScope(corpus_scope("PMC1216327"))
    verified = grade_field(
        "n_treatment", "integer", "baseline", {"value": 30, "quote": "30 received White Grape Juice"}, evidence
    )
    invented = grade_field("n_treatment", "integer", "baseline", {"value": 31, "quote": "31 received juice"}, evidence)
    assert (verified.tier, invented.tier) == ("verified", "unverified")
    kept = _merge("n_treatment", [(1, verified), (2, invented)])
    assert kept.value == 30 and kept.flags == [
        "chunks disagree on n_treatment: chunk 1: 30 (verified), chunk 2: 31 (unverified)"
    ]


def test_meaning_is_kept_by_labels_text_and_cleaning():
    measures = {"MD": ["mean difference"], "SMD": ["standardized mean difference"], "OR": ["odds ratio"]}
    smd = "The standardized mean difference was 0.4"
    assert support_of("MD", smd, "label", measures).problem and not support_of("SMD", smd, "label", measures).problem
    assert support_of("OR", "DEATH OR DISABILITY AT 6 MONTHS", "label", measures).problem  # a heading in capitals
    assert support_of("OR", "no odds ratio was computed", "label", measures).problem
    assert not support_of("double blind", "a double-blind trial", "label").problem
    assert support_of("difference was significant", "The difference was not significant.", "text").problem
    assert support_of("≥ 65 years", "patients aged < 65 years", "text").problem
    assert not support_of("12,500 participants", "a total of 12 500 participants were enrolled", "text").problem
    for value in (["low"], True, "high"):
        assert support_of(value, "Risk of bias was low", "judgment").cap == "approximate"
    assert clean_value("HbA<sub>1c</sub>") == "HbA1c" and clean_value("BMI 30 kg/m<sup>2</sup>") == "BMI 30 kg/m2"
    assert clean_value("1.5 × 10<sup>9</sup>/L") == "1.5 × 10^9/L" and clean_value("Mean<sup>a</sup>") == "Mean"
    for kept in ("bilirubin <ULN and ALT >2.5 × ULN", "> 65 years", "≥ 18"):
        assert clean_value(kept) == kept
