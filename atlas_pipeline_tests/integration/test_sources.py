"""Collectors against a real local web site (a child process): new feed items over time, conditional GET,
robots.txt, a source failing until it is paused, a slow source hitting its timeout — and under the daemon, the
collected documents taken by the knowledge-base sensor."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.sources.collector import Collector
from atlas_pipeline.sources.config import Source, SourcesError, load_sources
from atlas_pipeline.sources.pace import pace_factor
from atlas_pipeline.sources.politeness import Politeness
from atlas_pipeline.sources.state import load_state, resume
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import provenance_path
from atlas_pipeline_tests.support.corpus import corpus_file
from scripted_servers.processes import feed_site

AGENT = "AtlasPipeline-test/1.0 (+mailto:tests@example.org)"


@pytest.fixture
def site(tmp_path):
    with feed_site(tmp_path / "site") as value:
        yield value


def collector(tmp_path: Path, **fields) -> tuple[Collector, Store, Path]:
    kb = tmp_path / "kb"
    kb.mkdir(parents=True, exist_ok=True)
    store = Store(str(tmp_path / "artifacts"))
    source = Source(
        name="trials", target="collected/trials", min_domain_interval_seconds=0, poll_minutes=0.001, **fields
    )
    return Collector(source, store, Store(str(kb)), Politeness(AGENT, 50 * 1024 * 1024)), store, kb


def test_feed_items_are_collected_as_they_appear_with_conditional_get_and_provenance(site, tmp_path):
    first = site.publish("pmc-1", corpus_file("rct/PMC1216327.pdf"))
    site.publish("pmc-2", corpus_file("rct_jats/PMC1475568.nxml"), after=3.0)
    pass_, store, kb = collector(tmp_path, feed=site.feed)

    report = pass_.run()
    assert report.collected == ["collected/trials/PMC1216327.pdf"], report.summary()
    assert (kb / "collected/trials/PMC1216327.pdf").read_bytes() == corpus_file("rct/PMC1216327.pdf").read_bytes()
    state = load_state(store, "trials")
    sha = state.items["pmc-1"].sha256
    provenance = store.read_json(provenance_path(sha))
    assert provenance["source"] == "trials" and provenance["url"] == first and provenance["fetched_at"] > 0

    time.sleep(0.1)
    again = pass_.run()  # nothing new yet: the feed answers 304 to our ETag
    assert again.polled == "not modified" and again.collected == []
    feed_requests = [r for r in site.requests() if r["path"] == "/feed.xml"]
    assert feed_requests[-1]["status"] == 304 and feed_requests[-1]["if_none_match"]
    assert {r["user_agent"] for r in site.requests()} == {AGENT}

    time.sleep(3.2)
    later = pass_.run()  # the second item is published now
    assert later.collected == ["collected/trials/PMC1475568.xml"], later.summary()
    assert sorted(p.name for p in (kb / "collected/trials").iterdir()) == ["PMC1216327.pdf", "PMC1475568.xml"]
    # each document fetched exactly once
    assert sum(r["path"].startswith("/docs/") for r in site.requests()) == 2


def test_robots_txt_disallowing_a_path_is_honoured_and_not_a_failure(site, tmp_path):
    site.robots("User-agent: *\nDisallow: /private/\n")
    site.publish("open", corpus_file("rct/PMC1216327.pdf"))
    site.publish("closed", corpus_file("rct/PMC1574360.pdf"), path="/private/PMC1574360.pdf")
    pass_, store, _kb = collector(tmp_path, feed=site.feed)
    report = pass_.run()
    assert report.collected == ["collected/trials/PMC1216327.pdf"] and report.disallowed == 1
    state = load_state(store, "trials")
    assert state.items["closed"].outcome == "disallowed" and "robots.txt" in state.items["closed"].reason
    assert state.consecutive_failures == 0 and not state.paused
    assert not any(r["path"].startswith("/private/") for r in site.requests())


def test_a_source_failing_three_times_is_paused_with_its_reason_until_resumed(site, tmp_path):
    site.publish("a", corpus_file("rct/PMC1216327.pdf"))
    site.control(fail=["/feed.xml"])
    pass_, store, _kb = collector(tmp_path, feed=site.feed)
    for _ in range(3):
        report = pass_.run()
        assert report.failures and "HTTP 503" in report.failures[0]
        time.sleep(0.1)
    state = load_state(store, "trials")
    assert state.paused and "3 consecutive failures" in state.paused_reason and "503" in state.paused_reason
    requests_before = len(site.requests())
    paused = pass_.run()  # paused: asks nothing
    assert paused.paused and "atlas sources resume trials" in paused.summary()
    assert len(site.requests()) == requests_before

    site.control()  # the site recovers; a person resumes the source
    resume(store, "trials")
    time.sleep(0.1)
    assert pass_.run().collected == ["collected/trials/PMC1216327.pdf"]
    assert load_state(store, "trials").consecutive_failures == 0


def test_a_slow_source_hits_its_timeout_and_counts_as_a_failure(site, tmp_path):
    site.publish("slow", corpus_file("rct/PMC1216327.pdf"))
    site.control(slow={"/docs/PMC1216327.pdf": 5})
    pass_, store, kb = collector(tmp_path, feed=site.feed, timeout_seconds=1.0)
    started = time.monotonic()
    report = pass_.run()
    assert time.monotonic() - started < 4.5
    assert report.collected == [] and "timed out" in report.failures[0]
    state = load_state(store, "trials")
    assert state.consecutive_failures == 1 and state.items["slow"].attempts == 1 and not state.items["slow"].outcome
    assert not (kb / "collected/trials/PMC1216327.pdf").exists()


def test_a_trickling_server_meets_a_deadline_for_the_whole_answer(site, tmp_path):
    """A byte now and then never hits the read timeout: the whole answer has a deadline (three timeouts)."""
    site.publish("trickle", corpus_file("rct/PMC1216327.pdf"))
    site.control(trickle={"/docs/PMC1216327.pdf": 0.2})
    pass_, store, kb = collector(tmp_path, feed=site.feed, timeout_seconds=1.0)
    started = time.monotonic()
    report = pass_.run()
    assert time.monotonic() - started < 8
    assert report.collected == [] and "took longer than 3 s in all" in report.failures[0]
    assert load_state(store, "trials").consecutive_failures == 1  # a failure of the source: three pause it
    assert not (kb / "collected/trials/PMC1216327.pdf").exists()


def test_a_pass_with_a_budget_ends_in_time_however_slow_the_server(site, tmp_path):
    """A sensor's pass has a budget well under Dagster's 60 s sensor timeout: a trickling server with a long read
    timeout cannot hold the tick (nor the sensors after it); the request's deadline is cut to what is left."""
    site.publish("trickle", corpus_file("rct/PMC1216327.pdf"))
    site.publish("next", corpus_file("rct/PMC1574360.pdf"))
    site.control(trickle={"/docs/PMC1216327.pdf": 0.2, "/docs/PMC1574360.pdf": 0.2})
    pass_, store, _kb = collector(tmp_path, feed=site.feed, timeout_seconds=30.0)
    started = time.monotonic()
    report = pass_.run(budget_seconds=3)
    assert time.monotonic() - started < 6, report.summary()
    assert report.collected == [] and "took longer than" in report.failures[0]
    assert load_state(store, "trials").consecutive_failures == 1


def test_redirects_are_followed_by_hand_and_each_hop_asks_robots_txt(site, tmp_path):
    """A redirect to a path robots.txt disallows — on the same site or another port of it — is never followed."""
    site.robots("User-agent: *\nDisallow: /private/\n")
    site.publish("moved", corpus_file("rct/PMC1216327.pdf"), path="/docs/moved.pdf")
    site.publish("open", corpus_file("rct/PMC1574360.pdf"), path="/docs/open.pdf")
    site.control(
        redirect={"/docs/moved.pdf": "/private/PMC1216327.pdf", "/docs/open.pdf": "/docs/PMC1574360-final.pdf"}
    )
    site.publish("final", corpus_file("rct/PMC1574360.pdf"), path="/docs/PMC1574360-final.pdf", after=3600)
    pass_, store, _kb = collector(tmp_path, feed=site.feed)
    report = pass_.run()
    state = load_state(store, "trials")
    assert state.items["moved"].outcome == "disallowed" and "redirected from" in state.items["moved"].reason
    assert report.collected == ["collected/trials/open.pdf"]  # an allowed redirect is followed
    assert not any(r["path"].startswith("/private/") for r in site.requests())


def test_per_domain_interval_spaces_requests_and_the_pace_follows_the_backlog(site, tmp_path):
    for name in ("PMC1216327", "PMC1574360"):
        site.publish(name, corpus_file(f"rct/{name}.pdf"))
    pass_, _store, _kb = collector(tmp_path, feed=site.feed)
    pass_.source = pass_.source.model_copy(update={"min_domain_interval_seconds": 1.5, "poll_minutes": 60})
    first = pass_.run()  # the feed is read; the domain is then busy for 1.5 s
    assert first.queued == 2 and first.collected == []
    time.sleep(1.6)
    second = pass_.run()  # one document, then the domain is busy again
    assert len(second.collected) == 1
    time.sleep(1.6)
    assert len(pass_.run().collected) == 1
    downloads = [r["at"] for r in site.requests() if r["path"].startswith("/docs/")]
    assert downloads[1] - downloads[0] >= 1.5

    assert pace_factor(0, 50) < 1 < pace_factor(200, 50) <= 8 and pace_factor(10_000, 50) == 8
    slowed = pass_.run(backlog=400)
    assert slowed.pace == 8 and "pace ×8" in slowed.summary()


def test_dead_links_and_bad_urls_are_given_up_at_once_without_pausing_the_source(site, tmp_path):
    url = site.publish("x", corpus_file("html/plos_one_article.html"), path="/docs/article.html")
    missing, broken = site.url + "/docs/missing.pdf", "http://[::1/not-a-url"
    pass_, store, _kb = collector(tmp_path, urls=[missing, broken, site.url + "/docs/gone.pdf", url])
    report = pass_.run()
    assert report.collected == ["collected/trials/article.html"], report.summary()
    state = load_state(store, "trials")
    assert state.items[missing].outcome == "failed" and "HTTP 404" in state.items[missing].reason
    assert state.items[broken].outcome == "failed" and "not a URL" in state.items[broken].reason
    assert state.consecutive_failures == 0 and not state.paused  # three dead links are not a sick source
    assert pass_.run().collected == [] and sum(r["path"] == "/docs/missing.pdf" for r in site.requests()) == 1


def test_a_feed_address_serving_a_web_page_fails_and_relative_links_are_resolved(site, tmp_path):
    page, _, _ = collector(tmp_path, feed=site.url + "/docs/page.html")
    site.publish("page", corpus_file("html/plos_one_article.html"), path="/docs/page.html")
    report = page.run()
    assert report.failures and "not a readable RSS/Atom feed" in report.failures[0]

    relative = tmp_path / "relative.xml"  # a feed whose links are relative to its own address
    relative.write_text(
        '<?xml version="1.0"?><rss version="2.0"><channel><title>t</title><item><guid>r1</guid>'
        "<link>/docs/PMC1216327.pdf</link></item></channel></rss>"
    )
    site.publish("feed", relative, path="/relative.xml")
    site.publish("pdf", corpus_file("rct/PMC1216327.pdf"))
    feed, _, _ = collector(tmp_path / "second", feed=site.url + "/relative.xml")
    assert feed.run().collected == ["collected/trials/PMC1216327.pdf"]


def test_sources_file_errors_name_the_source(tmp_path):
    path = tmp_path / "sources.toml"
    path.write_text('[[source]]\nname = "a b"\nfeed = "ftp://x"\ntarget = "../out"\n')
    with pytest.raises(SourcesError) as error:
        load_sources(path)
    assert "source a b" in str(error.value) and "target" in str(error.value) and "http(s)" in str(error.value)
    path.write_text('[[source]]\nname = "a"\nurls = ["https://x/a.pdf"]\ntarget = "in"\n' * 2)
    with pytest.raises(SourcesError, match="unique"):
        load_sources(path)
    path.write_text(
        '[[source]]\nname = "a-b"\nurls = ["https://x/a.pdf"]\ntarget = "in"\n'
        '[[source]]\nname = "a_b"\nurls = ["https://x/b.pdf"]\ntarget = "in"\n'
    )
    with pytest.raises(SourcesError, match="unique"):  # one sensor name, source_a_b, for both
        load_sources(path)
    example = load_sources(PROJECT_ROOT / "seeds" / "sources.example.toml")
    assert [s.sensor_name for s in example] == ["source_pubmed_diabetes_rcts", "source_europepmc_open_access_rcts"]
    assert all(source.min_domain_interval_seconds >= 300 and source.feed for source in example)


def test_a_broken_sources_file_stops_no_other_part_of_the_pipeline(tmp_path, settings_for):
    from atlas_pipeline.definitions import build_definitions

    broken = tmp_path / "sources.toml"
    broken.write_text("[[source]]\nname = ")
    kb = tmp_path / "kb"
    kb.mkdir()
    defs = build_definitions(settings_for(kb, sources=str(broken)))
    sensor = defs.resolve_sensor_def("sources_file_error")
    assert "not valid TOML" in sensor.description
    assert defs.resolve_sensor_def("knowledge_base_sensor") is not None
