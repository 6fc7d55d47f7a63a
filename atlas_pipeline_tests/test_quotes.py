"""match_quote: grading quotes against real document text, and the human evidence quotes of the corpus."""

import json
import random

import pytest

from atlas_pipeline.extraction.quotes import match_quote, normalize, tier_for
from atlas_pipeline_tests.conftest import CORPUS, corpus_file, parsed_corpus

SCOPE = (
    "Results\n\nThe mean body weight gain was greater among patients receiving WGJ (+ 50.7 gm) as compared with "
    "the patients in the AJ group (+ 18.3 gm).\n\nBMC Urology 2012, 12:13 "
    "http://www.biomedcentral.com/1471-2490/12/13"
    "\n\nPage 3 of 7\n\nThe pain score decreased by −1.13 points (95% CI −2.05 to −0.21) "
    "with lido\u00adcaine, an ef\ufb01cient analgesic.\n\nApple Juice n | = 30 | 10.27 | 4.75"
)


def test_exact_quote_is_verified_with_its_span():
    quote = "greater among patients receiving WGJ (+ 50.7 gm)"
    match = match_quote(quote, SCOPE)
    assert (match.confidence, match.tier, match.method) == (1.0, "verified", "exact")
    assert SCOPE[match.start : match.end] == quote[:-1]  # the span covers letters and digits, not the ")"


def test_typography_is_absorbed_but_signs_are_kept():
    # unicode minus vs hyphen, a soft hyphen inside a word, the "fi" ligature, different spacing
    quote = "decreased by -1.13 points (95% CI -2.05 to -0.21) with lidocaine, an efficient analgesic"
    match = match_quote(quote, SCOPE)
    assert match.tier == "verified" and match.method == "exact"
    assert SCOPE[match.start : match.end].startswith("decreased by −1.13")
    unsigned = "decreased by 1.13 points (95% CI 2.05 to 0.21) with lidocaine"
    assert match_quote(unsigned, SCOPE).tier != "verified"


def test_decimal_point_is_kept():
    assert normalize("0·5 vs 0.5, 1.13 vs 11.3").text == "0.5vs0.51.13vs11.3"
    assert match_quote("pain score decreased by -11.3 points", SCOPE).tier == "unverified"


def test_quote_across_a_page_footer_is_found_in_parts():
    quote = "the patients in the AJ group (+ 18.3 gm). The pain score decreased by -1.13 points"
    match = match_quote(quote, SCOPE)
    assert match.method == "segmented" and match.tier == "verified" and match.confidence == 0.95
    assert SCOPE[match.start : match.end].startswith("the patients in the AJ group")
    assert "Page 3 of 7" in SCOPE[match.start : match.end]


def test_small_wording_slip_is_approximate_or_verified():
    quote = "The mean body weight gain was greater among patient receiving WGJ (+ 50.7 gm)"
    match = match_quote(quote, SCOPE)
    assert match.method == "fuzzy" and 0.95 <= match.confidence < 1.0


def test_changed_digit_is_never_accepted():
    for quote in (
        "The mean body weight gain was greater among patients receiving WGJ (+ 50.1 gm)",
        "the patients in the AJ group (+ 18.8 gm). The pain score decreased by -1.13 points",
        "Apple Juice n = 31",
    ):
        match = match_quote(quote, SCOPE)
        assert match.tier == "unverified" and match.start is None, quote


def test_fabricated_quote_is_unverified():
    match = match_quote("The hazard ratio for death was 0.42 (95% CI 0.30 to 0.58).", SCOPE)
    assert (match.confidence, match.tier, match.start) == (0.0, "unverified", None)


def test_table_cells_match_through_the_separators():
    assert match_quote("Apple Juice n = 30", SCOPE).tier == "verified"


def test_empty_quote_and_tiers():
    assert match_quote("", SCOPE).tier == "unverified"
    assert match_quote("   ", SCOPE).confidence == 0.0
    assert [tier_for(c) for c in (1.0, 0.95, 0.9, 0.8, 0.79)] == [
        "verified",
        "verified",
        "approximate",
        "approximate",
        "unverified",
    ]


@pytest.fixture(scope="module")
def evidence():
    """Human evidence quotes whose PDF is in the corpus, with the scope our own parser extracts from that PDF."""
    rows = [json.loads(line) for line in corpus_file("gold/evidence_spans.jsonl").read_text().splitlines()]
    scopes = {}
    selected = []
    for row in rows:
        if not (CORPUS / "rct" / f"{row['pmcid']}.pdf").exists():
            continue
        if row["pmcid"] not in scopes:
            parsed = parsed_corpus(f"rct/{row['pmcid']}.pdf")
            scopes[row["pmcid"]] = parsed.markdown + "\n\n" + parsed.tables_text
        selected.append((row["evidence_text"], scopes[row["pmcid"]]))
    assert len(selected) >= 40
    return selected


def test_human_evidence_quotes_are_found(evidence):
    found = [quote for quote, scope in evidence if match_quote(quote, scope).confidence >= 0.80]
    share = len(found) / len(evidence)
    print(f"\nevidence quotes found at >= 0.80: {len(found)}/{len(evidence)} = {share:.1%}")
    assert share >= 0.95


def test_digit_altered_evidence_quotes_are_rejected(evidence):
    rng = random.Random(20261122)
    accepted = total = 0
    for quote, scope in evidence:
        positions = [i for i, char in enumerate(quote) if char.isdigit()]
        for position in rng.sample(positions, min(5, len(positions))):
            digit = rng.choice([d for d in "0123456789" if d != quote[position]])
            altered = quote[:position] + digit + quote[position + 1 :]
            total += 1
            accepted += match_quote(altered, scope).confidence >= 0.80
    print(f"\ndigit-altered quotes accepted: {accepted}/{total}")
    assert total >= 150
    assert accepted / total <= 0.01
