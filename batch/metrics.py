"""The ``sift_*`` Prometheus series (docs/metrics.md).

Counters and histograms are plain prometheus_client metrics; with ``PROMETHEUS_MULTIPROC_DIR``
set (the Makefile and the Procfile environment set it) every process — gunicorn workers and
cluster workers alike — writes them to files in that directory and ``/metrics`` adds them up.
Gauges that describe the queue are read from the database at scrape time instead, so they are
right whichever process changed the queue and never drift when a process dies.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Q, Sum
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from batch.models import LIVE_STATUSES, BatchJob, BatchTarget, TargetStatus

JOBS = Counter(
    "sift_batch_jobs", "Batch jobs by outcome: created, reused, done, partial, failed, cancelled", ["outcome"]
)
TARGETS = Counter(
    "sift_batch_targets", "Finished batch targets by outcome (ok or a failure outcome)", ["outcome"]
)
JOB_SECONDS = Histogram(
    "sift_batch_job_seconds",
    "Seconds from submit to finished",
    buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, float("inf")),
)
TARGET_SECONDS = Histogram(
    "sift_batch_target_seconds",
    "Seconds a worker spent on one target attempt",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf")),
)
EVICTED = Counter("sift_batch_evicted", "Finished jobs deleted to fit SIFT_BATCH_MAX_BYTES")
SWEPT = Counter("sift_batch_swept", "Jobs deleted after their TTL")
MCP_CALLS = Counter(
    "sift_mcp_calls", "MCP tool calls by tool and outcome (ok, or the error code)", ["tool", "outcome"]
)


class QueueCollector(Collector):
    """Queue gauges computed from the database when ``/metrics`` is scraped."""

    def collect(self) -> Iterator[Metric]:
        jobs = BatchJob.objects.aggregate(
            live=Count("pk", filter=Q(status__in=LIVE_STATUSES)), stored=Sum("n_bytes")
        )
        inflight = BatchTarget.objects.filter(status=TargetStatus.RUNNING).count()
        yield GaugeMetricFamily(
            "sift_batch_queue_depth", "Live (queued or running) batch jobs", value=jobs["live"]
        )
        yield GaugeMetricFamily(
            "sift_batch_targets_inflight", "Batch targets being fetched now", value=inflight
        )
        yield GaugeMetricFamily(
            "sift_batch_result_bytes", "Stored result bytes of all batch jobs", value=jobs["stored"] or 0
        )
