"""Reports grouped into studies: copies of one work, a shared trial registration, a person's links."""

from atlas_pipeline.knowledge.studies import Link, Report, StudyLinks, group_studies, link, load_links, unlink
from atlas_pipeline.store.files import Store


def test_copies_and_a_shared_registration_make_one_study_named_by_its_registration():
    reports = [
        Report("trial.pdf", {"nct": ["NCT00352508"], "doi": ["10.1/a"]}),
        Report("trial.nxml", {"doi": ["10.1/a"]}, duplicate_of="trial.pdf"),  # the same article, no NCT in its text
        Report("protocol.pdf", {"nct": ["NCT00352508"]}),  # another report of the trial
        Report("other.pdf", {"nct": ["NCT99999999"]}),
        Report("unregistered.pdf"),
    ]
    studies = group_studies(reports)
    assert {studies[k] for k in ("trial.pdf", "trial.nxml", "protocol.pdf")} == {"NCT00352508"}
    assert studies["other.pdf"] == "NCT99999999" and studies["unregistered.pdf"] == "unregistered.pdf"


def test_a_persons_link_outweighs_what_the_text_says():
    reports = [Report("a.pdf", {"nct": ["NCT00000001"]}), Report("b.pdf", {"nct": ["NCT00000001"]}), Report("c.pdf")]
    links = StudyLinks(
        links={"b.pdf": Link(to="", by="ana", at=0.0), "c.pdf": Link(to="a.pdf", by="ana", at=0.0)}
    )  # b set apart (it only cites the trial), c joined to a (a secondary report without the registration)
    studies = group_studies(reports, links)
    assert studies["a.pdf"] == studies["c.pdf"] == "NCT00000001"
    copy = [*reports, Report("b.nxml", {}, duplicate_of="b.pdf")]  # the set-apart report's own copy goes with it
    assert group_studies(copy, links)["b.nxml"] == group_studies(copy, links)["b.pdf"] == "b.nxml"
    assert studies["b.pdf"] == "b.pdf"  # a study of its own, never under the other's name


def test_links_are_kept_in_the_store_and_taken_back(tmp_path):
    store = Store(str(tmp_path))
    link(store, "c.pdf", "a.pdf", by="ana", note="the 12-month follow-up")
    assert load_links(store).links["c.pdf"].to == "a.pdf"
    assert unlink(store, "c.pdf") and not unlink(store, "c.pdf")
    try:
        link(store, "a.pdf", "a.pdf", by="ana")
    except ValueError as error:
        assert "itself" in str(error)
    else:
        raise AssertionError("a report was linked to itself")
