"""Trial registrations of every WHO ICTRP primary registry are recognised in a paper's text and written one way, so two
reports of one trial are one study whatever spelling each uses."""

import pytest

from atlas_pipeline.knowledge.identifiers import REGISTRIES, find_identifiers, registry_name
from atlas_pipeline.knowledge.studies import Report, group_studies

# (the text as papers write it, the kind, the one way it is written)
WRITTEN = [
    ("registered at ClinicalTrials.gov (NCT 00352508)", "nct", "NCT00352508"),
    ("Trial registration: ISRCTN 66587262.", "isrctn", "ISRCTN66587262"),
    ("ANZCTR: ACTRN12610000123456", "actrn", "ACTRN12610000123456"),
    ("Chinese Clinical Trial Registry (ChiCTR-TRC-12002345)", "chictr", "ChiCTR-TRC-12002345"),
    ("registered with chictr2000029308 on 2 Feb 2020", "chictr", "ChiCTR2000029308"),
    ("German Clinical Trials Register DRKS00012345", "drks", "DRKS00012345"),
    ("Clinical Trials Registry-India (CTRI/2018/05/013741).", "ctri", "CTRI/2018/05/013741"),
    ("UMIN Clinical Trials Registry (JPRN-UMIN000012345)", "jprn", "UMIN000012345"),
    ("jRCT: jRCTs031180001", "jprn", "jRCTs031180001"),
    ("Iranian Registry of Clinical Trials: IRCT20170228032806N1", "irct", "IRCT20170228032806N1"),
    ("registered (IRCT201104206234N1) before enrolment", "irct", "IRCT201104206234N1"),
    ("Clinical Research Information Service KCT0001234", "kct", "KCT0001234"),
    ("Pan African Clinical Trials Registry PACTR201901234567890", "pactr", "PACTR201901234567890"),
    ("Brazilian Registry of Clinical Trials RBR-4H7CVD", "rebec", "RBR-4h7cvd"),
    ("Thai Clinical Trials Registry TCTR20180504003", "tctr", "TCTR20180504003"),
    ("Sri Lanka Clinical Trials Registry SLCTR/2019/001", "slctr", "SLCTR/2019/001"),
    ("Cuban Public Registry RPCEC00000123", "rpcec", "RPCEC00000123"),
    ("Lebanon Clinical Trials Registry LBCTR2019010178", "lbctr", "LBCTR2019010178"),
    ("ITMCTR2024000123", "itmctr", "ITMCTR2024000123"),
    ("Peruvian Clinical Trial Registry PER-012-18", "repec", "PER-012-18"),
    ("Netherlands Trial Register NTR4321; NL-OMON23456", "ntr", "NTR4321"),
    ("EudraCT number: 2012-003456-78", "euctr", "EUCTR2012-003456-78"),
]


@pytest.mark.parametrize(("text", "kind", "canonical"), WRITTEN, ids=[w[2] for w in WRITTEN])
def test_each_registrys_numbers_are_recognised_and_written_one_way(text, kind, canonical):
    found = find_identifiers(f"Methods\n\n{text}\n\nResults")
    assert found[kind][0] == canonical
    assert kind in REGISTRIES and registry_name(kind) != kind


def test_sixteen_registries_and_the_reference_list_is_not_the_papers_own():
    assert len({kind for _, kind, _ in WRITTEN}) >= 16
    text = "Trial registration IRCT20170228032806N1.\n\nReferences\n\n1. Another trial. ChiCTR2000029308; DRKS00012345."
    assert find_identifiers(text) == {"irct": ["IRCT20170228032806N1"]}


def test_numbers_that_only_look_like_registrations_are_not_taken():
    text = "The values 2012-003456-78 and NCT0035 and RBR- and PER-12 were noted; CTRI/20/05 too."
    assert find_identifiers(text) == {}
    assert find_identifiers("given per-100-20 mg; protecteu ct 2004-001234-12; ntr1234 kct0001234") == {}
    assert find_identifiers("jRCTs031180001 and JPRN-JRCTS031180001")["jprn"] == ["jRCTs031180001"]


def test_a_registry_read_later_never_renames_a_study():
    """Studies were named by NCT, ISRCTN or ACTRN numbers before the other registries were read: a report that also
    names a EudraCT or DRKS number keeps its study's name, and the choices kept under it."""
    reports = [
        Report("results.pdf", find_identifiers("NCT00352508; EudraCT 2005-001234-12; DRKS00012345")),
        Report("protocol.pdf", find_identifiers("ClinicalTrials.gov NCT00352508")),
        Report("chinese.pdf", find_identifiers("ChiCTR2000029308 and IRCT20170228032806N1")),
    ]
    studies = group_studies(reports)
    assert studies["results.pdf"] == studies["protocol.pdf"] == "NCT00352508"
    assert studies["chinese.pdf"] == "ChiCTR2000029308"  # among the others, by their text


def test_two_spellings_of_one_registration_are_one_study_named_as_the_registry_writes_it():
    reports = [
        Report("results.pdf", find_identifiers("Registered at chictr2000029308.")),
        Report("protocol.pdf", find_identifiers("Registration: ChiCTR2000029308")),
        Report("japan.pdf", find_identifiers("JPRN-UMIN000012345")),
        Report("japan-2.pdf", find_identifiers("UMIN000012345 (UMIN-CTR)")),
        Report("old-record.pdf", {"irct": ["irct20170228032806n1"]}),  # a record written before this rule
        Report("new-record.pdf", find_identifiers("IRCT20170228032806N1")),
    ]
    studies = group_studies(reports)
    assert studies["results.pdf"] == studies["protocol.pdf"] == "ChiCTR2000029308"
    assert studies["japan.pdf"] == studies["japan-2.pdf"] == "UMIN000012345"
    assert studies["old-record.pdf"] == studies["new-record.pdf"] == "IRCT20170228032806N1"
