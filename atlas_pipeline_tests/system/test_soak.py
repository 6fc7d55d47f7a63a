"""A short soak (about 45 s) of the living knowledge base under the real daemon (the long one is
``make bench-soak``): a local feed publishes documents over time — an article as PDF and as JATS among them —; each
is collected, extracted, grouped and indexed; the daemon never dies, memory stays under 2 GB, nothing is stuck, the
counts add up."""

import pytest

from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.soak import run_soak

pytestmark = pytest.mark.daemon
DOCUMENTS = (
    "rct_jats/PMC1216327.nxml",
    "rct/PMC1216327.pdf",
    "rct_jats/PMC1475568.nxml",
    "rct/PMC3508963.pdf",
    "rct_jats/PMC3648394.nxml",
    "html/plos_one_article.html",
)


def test_living_knowledge_base_soak(tmp_path):
    result = run_soak(tmp_path, [corpus_file(path) for path in DOCUMENTS], publish_seconds=20, settle_seconds=240)
    print(result.summary())
    assert result.daemon_alive, result.log_tail
    assert result.published == result.collected == result.partitions == result.finished == result.indexed == 6, (
        result.summary() + "\n" + "\n".join(result.problems) + "\n" + result.log_tail
    )
    assert result.duplicates == 1  # the JATS of PMC1216327 is the PDF's work
    assert result.runs_failed == 0 and result.runs_unfinished == 0, result.summary()
    assert result.peak_rss_mb < 2048, result.summary()
    assert len(result.rss_samples) > 10
