"""A batch fetched for real: the production FetchFunc through a real qcluster.

How targets run: docs/workers.md; how each is fetched: docs/fetch-pipeline.md.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time

import pytest
from werkzeug import Response

from batch import jobs
from batch.models import BatchJob
from doors.validation import validate_targets

from .deployment import Deployment, wait_for
from .fixtures.pdf_writer import build_pdf
from .upstream import ARTICLE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.cluster]


def test_a_mixed_job_ends_partial_with_each_result_and_the_429_retried_after_retry_after(
    tmp_path, agent, httpserver
):
    caller, _ = agent
    asked_at: list[float] = []

    def rate_limited(request):
        asked_at.append(time.monotonic())
        if len(asked_at) <= 2:
            return Response("slow down", status=429, headers={"Retry-After": "2"})
        return Response("finally here", content_type="text/plain")

    httpserver.expect_request("/tides").respond_with_data(ARTICLE, content_type="text/html")
    pdf = build_pdf([[f"This is page {n}."] for n in range(1, 6)])
    httpserver.expect_request("/doc.pdf").respond_with_data(pdf, content_type="application/pdf")
    httpserver.expect_request("/data").respond_with_json({"items": [{"name": "alpha"}, {"name": "beta"}]})
    httpserver.expect_request("/busy").respond_with_handler(rate_limited)
    deployment = Deployment(
        tmp_path,
        {
            "SIFT_TEST_FETCH_FUNC": "",  # the fetch pipeline, as in production
            "SIFT_FETCH_ALLOW_CIDRS": "127.0.0.0/8",
            "SIFT_BATCH_RETRY_WAIT": "0.5s",
        },
    )
    deployment.start_cluster()
    try:
        job = jobs.submit(
            caller,
            validate_targets(
                [
                    httpserver.url_for("/tides"),
                    {"url": httpserver.url_for("/doc.pdf"), "options": {"pages": "2-3"}},
                    {"url": httpserver.url_for("/data"), "options": {"jq": ".items[1].name"}},
                    "http://10.0.0.1/internal",
                    httpserver.url_for("/busy"),
                ]
            ),
        ).job
        wait_for(lambda: not BatchJob.objects.get(pk=job.pk).is_live, timeout=60, what="the job to finish")
    finally:
        deployment.stop_all()
    job.refresh_from_db()
    assert (job.status, job.targets_done, job.targets_failed) == ("partial", 5, 1)
    html, pdf_target, data, blocked, busy = job.targets.order_by("idx")
    assert "Spring tides happen" in html.result["content"]
    assert html.result["meta"]["title"] == "Tides explained"
    # One slice: the whole text, its version, and no cursor.
    assert (
        html.result["meta"]["content_sha256"] == hashlib.sha256(html.result["content"].encode()).hexdigest()
    )
    assert html.result["meta"]["total_chars"] == len(html.result["content"])
    assert "next_cursor" not in html.result["meta"]
    assert (pdf_target.result["meta"]["pages_total"], pdf_target.result["meta"]["pages"]) == (5, [2, 3])
    assert "This is page 2." in pdf_target.result["content"]
    assert json.loads(data.result["content"]) == "beta"
    assert (blocked.status, blocked.outcome, blocked.result) == ("failed", "blocked", None)
    assert blocked.hint
    assert "10.0.0.1" not in blocked.error + blocked.hint
    assert (busy.status, busy.attempts, busy.result["content"]) == ("done", 3, "finally here")
    assert all(later - earlier >= 2 for earlier, later in itertools.pairwise(asked_at))
    assert job.n_bytes == sum(t.n_bytes for t in (html, pdf_target, data, busy)) > 0
