"""An upload to the review page is streamed: spooled to disk by the form parser, copied into the knowledge base in
chunks with the size limit counted as they come — a file over the limit is refused with the reason, in bounded
memory, and nothing of it lands in the knowledge base (an upload declared far past the limit is refused unread)."""

from __future__ import annotations

import resource
import urllib.parse

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review_page.app import create_app
from atlas_pipeline_tests.support.helpers import http_request, multipart, serve


def test_a_large_upload_is_refused_in_bounded_memory(knowledge_base, settings_for, instance):
    settings = settings_for(knowledge_base, max_document_mb="5")
    with serve(create_app(Deployment.from_settings(settings), instance=lambda: instance)) as site:
        body, headers = multipart("documents", "big.pdf", b"%PDF-1.4\n" + bytes(60 << 20))  # 60 MB
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        status, page = http_request(f"{site}/upload", body, headers)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert status == 200 and "big.pdf is too large: over 5 MB" in urllib.parse.unquote_plus(page), page[:500]
        assert not (knowledge_base / "uploads" / "big.pdf").exists()
        assert grown < 40_000, grown  # KB: the 60 MB never held whole (the test's own body aside)
        small, headers = multipart("documents", "trial.md", b"# A trial\n\nWe randomised 40 adults.\n")
        status, page = http_request(f"{site}/upload", small, headers)
        assert status == 200 and "added uploads/trial.md" in page
        assert (knowledge_base / "uploads" / "trial.md").read_bytes().startswith(b"# A trial")
