"""match_quote on real corpus text: what ``verified`` promises, every way of changing a quote's meaning, typography
that must not matter, broken PDF text layers, and the human evidence quotes of the corpus."""

from __future__ import annotations

import json
import random
from functools import cache

import pytest

from atlas_pipeline.extraction.quotes import match_quote as public_match_quote
from atlas_pipeline.grading.quotes import DECIMAL_NOTE, UNREADABLE_NOTE, match_quote, tier_for
from atlas_pipeline.grading.text import normalize, tokenize
from atlas_pipeline_tests.support.corpus import CORPUS, corpus_file, corpus_scope
from eval.perturbations import MEANING_CHANGES, NEEDS_OTHERS, TYPOGRAPHY_CHANGES

# the only human quote whose text is not in its PDF: the annotator ran into the next figure's label ("Fig. 2")
NOT_IN_THE_SOURCE = {"No significant change in the IL-6 and TNF-α levels among three groups (Fig.\xa05).Fig. 2"}


scope = corpus_scope


@cache
def evidence_rows() -> list[dict]:
    return [json.loads(line) for line in corpus_file("gold/evidence_spans.jsonl").read_text().splitlines()]


@cache
def documents() -> dict[str, tuple[str, list[str]]]:
    """pmcid → (scope, distinct human quotes): our parse of the PDF where the corpus has it, else the article text."""
    found: dict[str, tuple[str, list[str]]] = {}
    for row in evidence_rows():
        pmcid = row["pmcid"]
        if pmcid not in found:
            pdf = CORPUS / "rct" / f"{pmcid}.pdf"
            text = scope(pmcid) if pdf.exists() else corpus_file(f"gold/evidence_txt/{pmcid}.txt").read_text()
            found[pmcid] = (text, [])
        if row["evidence_text"] not in found[pmcid][1]:
            found[pmcid][1].append(row["evidence_text"])
    return found


def source_text(pmcid: str) -> str:
    return corpus_file(f"gold/evidence_txt/{pmcid}.txt").read_text()


@cache
def folded_texts(pmcid: str) -> str:
    """The article's text and our scope, folded as quotes are compared: made once per document, not once per
    perturbation kind (the sweeps below would otherwise tokenize every article fourteen times)."""
    return tokenize(source_text(pmcid)).joined + tokenize(documents()[pmcid][0]).joined


# -- what verified promises, on one real document ------------------------------------------------------------------


def test_exact_quote_is_verified_with_its_span():
    text = scope("PMC1216327")
    quote = "The mean body weight gain was greater among patients receiving WGJ (+ 50.7 gm)"
    match = match_quote(quote, text)
    assert (match.confidence, match.tier, match.method) == (1.0, "verified", "exact")
    assert text[match.start : match.end] == quote[:-1]  # letters and digits, not the closing parenthesis
    assert public_match_quote is match_quote  # the library API's import path


@pytest.mark.parametrize("kind", sorted(TYPOGRAPHY_CHANGES))
def test_typography_never_matters(kind):
    rng = random.Random(kind)
    text = scope("PMC1216327")
    quote = (
        "The duration of the illness was longer in the infants fed juice as compared with those given WA (p = 0.006)"
    )
    changed = TYPOGRAPHY_CHANGES[kind](quote, rng) or quote.replace("fi", "\ufb01")
    assert match_quote(changed, text).tier == "verified", changed


def test_typography_examples():
    text = scope("PMC1216327")
    for quote in (
        "CONTROLLED, DOUBLE-BLIND, RANDOMIZED\nclinical trial",  # case, line break
        "Controlled, double-\nblind, randomized clinical trial",  # hyphenated at a line end
        "**Controlled**, double‐blind, randomized clinical trial",  # markup, a Unicode hyphen
        "Age (months) | 10.27 | 4.75 | 10.27 | 4.14",  # table cell separators
        "mean age of 10 +/- 4.28 months",  # ± written as +/-
    ):
        assert match_quote(quote, text).tier == "verified", quote


def test_unicode_letters_are_kept():
    assert normalize("5 µg/ml") == normalize("5 μg/ml") != normalize("5 ug/ml")
    text = "Результаты: смертность снизилась на 12%. 结果显示死亡率降低了12%。Ελληνικά: μ-οπιοειδή"
    assert match_quote("смертность снизилась на 12%", text).tier == "verified"
    assert match_quote("смертность выросла на 12%", text).tier == "unverified"
    assert match_quote("死亡率降低了12%", text).tier == "verified"
    assert match_quote("死亡率升高了12%", text).tier == "unverified"
    assert match_quote("u-οπιοειδή", text).tier != "verified"


# -- what is never verified: the cases on real sentences -------------------------------------------------


def test_a_flipped_negation_is_never_verified():
    text, _ = documents()["PMC4675066"]
    genuine = "No differences were identified between groups in any secondary outcomes"
    assert match_quote(genuine, text).tier == "verified"
    for changed in (
        "differences were identified between groups in any secondary outcomes",
        "Differences were identified between groups",
    ):
        match = match_quote(changed, text)
        assert match.tier == "unverified" and "negation" in match.note, changed


def test_a_word_added_or_swapped_is_never_verified():
    text = scope("PMC1216327")
    cases = {
        "The duration of the illness was shorter in the infants fed juice": "'shorter' where the source has 'longer'",
        "The duration of the illness was not longer in the infants fed juice": "negation",
        "The mean body weight gain was lower among patients receiving WGJ": "'lower' where the source has 'greater'",
    }
    for quote, why in cases.items():
        match = match_quote(quote, text)
        assert match.tier == "unverified" and why in match.note, (quote, match)


def test_numbers_signs_and_comparators_must_match_exactly():
    text = scope("PMC5777645")
    assert match_quote("Mean BMI change was -1.65 kg/m2", text).tier == "verified"
    dropped = match_quote("Mean BMI change was 1.65 kg/m2", text)
    assert dropped.tier == "unverified" and "'1.65' where the source has '-1.65'" in dropped.note
    assert match_quote("p = 0.0005", text).tier == "verified"
    assert match_quote("p = 0.000", text).tier == "unverified"  # a number cut short is not inside 0.0005
    juice = scope("PMC1216327")
    assert match_quote("Kruskal-Wallis p < 0.05", juice).tier == "verified"
    flipped = match_quote("Kruskal-Wallis p > 0.05", juice)
    assert flipped.tier == "unverified" and "'>' where the source has '<'" in flipped.note
    left_out = match_quote("0.05. Water vs Juice groups", juice)
    assert left_out.tier == "unverified" and "comparator '<'" in left_out.note
    # number boundaries: "12" is not in "2012", "5" is not in "4.75"
    assert match_quote("12:13", "BMC Urology 2012, 12:13").tier == "verified"
    assert match_quote("BMC Urology 12", "BMC Urology 2012, 12:13").tier == "unverified"
    assert match_quote("10.27 | 4.7", juice).tier == "unverified"


def test_sentences_are_not_stitched_but_page_breaks_are_crossed():
    text = scope("PMC5777645")
    across_the_page = (
        "Mean waist circumference decreased by 3.34 cm (SD = 9.3; CI95%: -5.56;-1.13) in the intervention group"
    )
    match = match_quote(across_the_page, text)
    assert match.tier == "verified" and match.method == "segmented"  # page 1's foot and page 2's head between
    assert tokenize(text).page_of(match.start) == 1 and tokenize(text).page_of(match.end) == 2
    juice = scope("PMC1216327")
    stitched = "The fecal losses were also increased in the infants fed juice as compared with those given WA"
    assert match_quote(stitched, juice).tier == "unverified"
    # two paragraphs of running text are not an interruption of each other
    first = "Half of the patients in each group were well nourished"
    second = "Worldwide, acute diarrhea represents one of the leading causes of death in children"
    assert match_quote(first, juice).tier == match_quote(second, juice).tier == "verified"
    assert match_quote(f"{first} {second}", juice).tier == "unverified"


def test_unreadable_glyphs_are_found_but_never_verified():
    # PMC1574360 draws "<" with a glyph its font calls "comma": the parser marks it unreadable
    text = scope("PMC1574360")
    assert "p \ufffd0.001" in text or "p \ufffd 0.001" in text
    match = match_quote("0.66% lower (95% confidence interval 0.48–0.84, p < 0.001)", text)
    assert match.tier == "approximate" and match.note == UNREADABLE_NOTE
    # PMC5777645 draws "≥" from a TeX math font without a Unicode map: recovered from TeX's own encoding, so the
    # quote is verified — and the other comparators are not
    tex = scope("PMC5777645")
    assert "\ufffd" not in tex
    assert match_quote("type 2 diabetes (HbA1c ≥ 8%)", tex).tier == "verified"
    for wrong in ("type 2 diabetes (HbA1c ≤ 8%)", "type 2 diabetes (HbA1c > 8%)", "type 2 diabetes (HbA1c 8%)"):
        assert match_quote(wrong, tex).tier == "unverified", wrong
    # where nothing can be recovered, a quote across the unreadable character is approximate
    assert match_quote("type 2 diabetes (HbA1c ≥ 8%)", "with type 2 diabetes (HbA1c\ufffd8%), treated").tier == (
        "approximate"
    )


def test_a_lost_decimal_point_is_approximate():
    text = scope("PMC4987981")  # the PDF's text has "ESI = 0. 001" where the article says "ESI = 0.001"
    assert "ESI = 0. 001" in text
    quote = "and pioglitazone groups (p vaue – PASI = 0.001, ESI = 0.001). Significant improvement was observed"
    match = match_quote(quote, text)
    assert match.tier == "approximate" and match.note == DECIMAL_NOTE
    assert match_quote(quote.replace("ESI = 0.001", "ESI = 0.011"), text).tier == "unverified"
    assert match_quote("p = 0.038", "the difference (p = 0 038) was").note == DECIMAL_NOTE


def test_ocr_slips_are_approximate_at_most():
    text = scope("PMC1216327")
    slip = match_quote("The mean body weight gain was greater among patlents receiving WGJ", text)
    assert slip.tier == "approximate" and slip.method == "close"
    assert match_quote("The mean body weight gain was greater among patients receiving WJG (+ 50.7 gm)", text).tier != (
        "verified"
    )


def test_empty_quote_and_tiers():
    assert match_quote("", "anything").tier == "unverified"
    assert match_quote("   ", "anything").confidence == 0.0
    assert [tier_for(c) for c in (1.0, 0.95, 0.9, 0.8, 0.79)] == [
        "verified",
        "verified",
        "approximate",
        "approximate",
        "unverified",
    ]


# -- every perturbation kind over every real corpus quote ----------------------------------------------------------


def _perturbed(kind: str, function) -> list[tuple[str, str, str]]:
    """(pmcid, original, altered) for every corpus quote the perturbation applies to, leaving out alterations whose
    text happens to be in the article anyway."""
    rng = random.Random(f"atlas-{kind}")
    altered = []
    for pmcid, (_, quotes) in documents().items():
        clean = folded_texts(pmcid)
        for quote in quotes:
            if quote in NOT_IN_THE_SOURCE:
                continue
            for _ in range(2):
                changed = function(quote, rng, quotes) if kind in NEEDS_OTHERS else function(quote, rng)
                if changed and changed != quote and f" {normalize(changed)} " not in clean:
                    altered.append((pmcid, quote, changed))
    return altered


@cache
def alterations(kind: str) -> list[tuple[str, str, str]]:
    return _perturbed(kind, MEANING_CHANGES[kind])


@pytest.mark.parametrize("kind", sorted(MEANING_CHANGES))
def test_every_meaning_change_is_tried_on_enough_real_quotes(kind):
    assert len(alterations(kind)) >= 40, f"too few quotes to alter for {kind}"


SHARDS = 4  # the articles in four parts, each graded against every kind: an article is tokenized once, not per kind


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_meaning_changing_alteration_is_verified(shard):
    verified = []
    for pmcid in sorted(documents())[shard::SHARDS]:
        scope = documents()[pmcid][0]
        for kind in sorted(MEANING_CHANGES):
            for _, _, changed in (item for item in alterations(kind) if item[0] == pmcid):
                match = match_quote(changed, scope)
                if match.tier == "verified":
                    verified.append((kind, changed, match.note))
    assert verified == [], verified[:3]


def test_genuine_corpus_quotes_are_all_found():
    missing, approximate = [], 0
    for _, (text, quotes) in documents().items():
        for quote in quotes:
            match = match_quote(quote, text)
            approximate += match.tier == "approximate"
            if match.tier == "unverified":
                missing.append(quote)
    assert set(missing) == NOT_IN_THE_SOURCE
    # across an unreadable glyph (1), a lost decimal point (1), quotes that start or end inside a word (3)
    assert approximate <= 5


NEVER_VERIFIED = [  # (quote, source): each changes what the source says
    ("ER+/HER2+ breast cancer", "Patients with ER+/HER2− breast cancer were enrolled."),
    ("CD4+CD25+ cells were depleted", "CD4−CD25− cells were depleted in 12 patients."),
    ("mean difference was 0.5", "the mean difference was\u22120.5 (95% CI)"),
    ("103 cells per litre", "a count of 10³ cells per litre"),
    ("p = 0.042", "p = 0.04² for the comparison"),
    ("age 11 2 years", "children of age 1½ years"),
    ("500 patients were enrolled", "In total, 12\u2009500 patients were enrolled."),
    ("500 patients were enrolled", "In total, 12 500 patients were enrolled."),
    ("ALT <ULN in 99 patients and >ULN in 12", "ALT <ULN in 45 patients and >ULN in 12 patients."),
    ("> 65 years", "patients aged 65 years were included"),
    ("a significant reduction in mortality", "The drug did not show a significant reduction in mortality."),
    ("significant difference in mortality", "There was no statistically significant difference in mortality."),
    ("significant difference in mortality", "There was no\nsignificant difference in mortality."),
    ("0.001 for the comparison", "p <\n0.001 for the comparison"),
    ("Adverse events were not", "Adverse events were noted in 12 patients."),
    ("normal liver function tests were observed", "abnormal liver function tests were observed in 3 patients"),
    ("indicated in patients with renal impairment", "Drug X is contraindicated in patients with renal impairment."),
    ("increased expression of CD4", "increased expression of CD40 on B cells"),
    ("in the control group 30 patients", "Death in the control group. 30 patients in the intervention group"),
    ("p 0.05", "p ≮ 0.05"),
    ("eighty patients were randomised", "eight patients were randomised"),
    ("given 5 mg tid for 7 days", "given 5 mg bid for 7 days"),
    ("received 50 mcg daily", "received 50 mg daily"),
    ("patients received prednisolone daily", "patients received prednisone daily"),
    ("mortality 10.5 per 1000", "mortality \ufffd0.5 per 1000"),
]
ALWAYS_VERIFIED = [  # typography only
    ("BMI 30 kg/m2", "BMI 30 kg/m<sup>2</sup>"),
    ("BMI 30 kg/m²", "BMI 30 kg/m<sup>2</sup>"),
    ("HbA1c of 7%", "HbA<sub>1c</sub> of 7%"),
    ("platelets 150 × 10⁹/L", "platelets 150 × 10<sup>9</sup>/L"),
    ("p < 0.001", "p\u00a0<\u00a00.001"),
    ("p = 0.05", "p=0·05"),
    ("60-69 years", "60–69 years"),
    ("p < 0.05", "ｐ ＜ ０．０５"),
    ("HER2- breast cancer", "HER2− breast cancer"),
    ("CD4-CD25- cells", "CD4−CD25− cells"),
    ("randomised controlled", "random-\nised controlled"),
]


@pytest.mark.parametrize(("quote", "source"), NEVER_VERIFIED)
def test_what_changes_meaning_is_never_verified(quote, source):
    assert match_quote(quote, source).tier != "verified"


@pytest.mark.parametrize(("quote", "source"), ALWAYS_VERIFIED)
def test_what_is_typography_stays_verified(quote, source):
    assert match_quote(quote, source).tier == "verified"


def test_a_quote_never_runs_from_the_text_into_a_table():
    from atlas_pipeline.grading.locations import EvidenceScope
    from atlas_pipeline.parsing.model import Table

    table = Table(index=0, html="<table/>", text="Placebo | 30 | 12", rows=1, columns=3)
    scope = EvidenceScope("Mortality was lower in the group given", [table])
    assert match_quote("Mortality was lower in the group given Placebo 30 12", scope.text).tier != "verified"
    assert scope.find("Placebo | 30 | 12").table == 0


def test_a_symbol_mapped_to_a_fraction_is_unreadable_where_the_context_makes_it_certain():
    # some publishers' fonts map "=" to "¼" (and "<" to "½"): "p ¼ 0.05" never passes for a quote, never lost
    source = "The mean difference was 2.1 (95% CI 0.4 to 3.8; p ¼ 0.02), n ¼ 120; about ¼ of the children vomited."
    for quote in ("2.1 (95% CI 0.4 to 3.8; p = 0.02)", "2.1 (95% CI 0.4 to 3.8; p ¼ 0.02)", "n = 120"):
        match = match_quote(quote, source)
        assert match.tier == "approximate" and match.note == UNREADABLE_NOTE, quote
    assert match_quote("2.1 (95% CI 0.4 to 3.8; p = 0.03)", source).tier == "unverified"
    assert match_quote("about ¼ of the children vomited", source).tier == "verified"  # a real quarter
    assert match_quote("about 1/4 of the children vomited", source).tier == "verified"


def test_sentence_punctuation_inside_markup_is_kept():
    source = "text before\n\n**Table 1.** Baseline characteristics of the participants\n\n|a|b|"
    assert match_quote("Table 1. Baseline characteristics of the participants", source).tier == "verified"
    assert match_quote("_the end._ Next one", "It was the end. Next one began.").tier == "verified"


def test_a_sentence_cut_by_figure_text_in_the_column_flow_is_found_and_nothing_else_is_skipped():
    # a two-column PDF page read in order puts a figure's own text (ticks, axis label, legend) inside the sentence
    head = "The duration of the illness was longer in the infants fed juice as compared"
    tail = "with those given WA (p = 0.006), the mean +/- SD duration in hours was 49.4"
    quote = f"{head} {tail}"
    figure = "0 24 48 72 96\n\nHours\n\nApple Juice White Grape Juice Water"
    assert match_quote(quote, f"Results. {head}\n\n{figure}\n\n{tail} hours.").tier == "verified"
    # a skipped block may not hold a negation or a comparator, nor be running text, nor end a sentence before it
    for between in (
        "No",
        "p < 0.05",
        "All patients improved while ingesting juice and none of them developed it.",
        "placebo",  # a lone word is never taken for a figure
        "apple juice group but worsened in the",  # running text cut by a column
        "12 infants in the control group",
    ):
        assert match_quote(quote, f"Results. {head}\n\n{between}\n\n{tail} hours.").tier == "unverified", between
    assert match_quote(quote, f"Results. {head}.\n\n{figure}\n\nWith those given WA (p = 0.006), the mean").tier == (
        "unverified"
    )
