"""The ``sift_*`` Prometheus series (docs/metrics.md).

Counters and histograms are plain prometheus_client metrics; with ``PROMETHEUS_MULTIPROC_DIR``
set (the Makefile and the Procfile environment set it) every process — gunicorn workers, cluster
workers, ``deliver_webhooks`` — writes them to files in that directory and ``/metrics`` adds them
up. Gauges that describe the queue, the cluster's heartbeats and the webhooks' backlog are read
from the database at scrape time instead, so they are right whichever process changed them and
never drift when one dies.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, Q, Sum
from django.utils import timezone
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from batch.models import (
    BATCH_FINISHED,
    LIVE_STATUSES,
    BatchJob,
    BatchTarget,
    ClusterHeartbeat,
    Monitor,
    TargetStatus,
    WebhookDelivery,
)

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
WEBHOOK_DELIVERIES = Counter(
    "sift_webhook_deliveries", "Webhook events delivered (a 2xx answer), by event type", ["event_type"]
)
WEBHOOK_FAILURES = Counter(
    "sift_webhook_failures", "Webhook attempts that failed (no 2xx answer), by event type", ["event_type"]
)
WEBHOOK_RETRIES = Counter(
    "sift_webhook_retries", "Failed webhook attempts to be made again after a backoff", ["event_type"]
)
WEBHOOK_GIVEN_UP = Counter(
    "sift_webhook_given_up", "Webhook deliveries given up after SIFT_WEBHOOK_RETRY_FOR", ["event_type"]
)

MONITOR_RUNS = Counter(
    "sift_monitor_runs", "Monitor runs stored, by outcome (ok or a failure outcome)", ["outcome"]
)
MONITOR_CHANGES = Counter("sift_monitor_changes", "Monitor runs that found the page changed")
MONITOR_FAILURES = Counter(
    "sift_monitor_failures", "Monitor runs that failed (the site, the guard, a timeout)"
)
MONITOR_RUN_SECONDS = Histogram(
    "sift_monitor_run_seconds",
    "Seconds a worker spent on one monitor run",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, float("inf")),
)
# A monitor due this long and not yet run is overdue.
OVERDUE_AFTER = timedelta(minutes=1)
# The webhook series exist from the start at 0 (as fetch/metrics.py's): a first give-up is then
# an increase an alert sees.
for _counter in (WEBHOOK_DELIVERIES, WEBHOOK_FAILURES, WEBHOOK_RETRIES, WEBHOOK_GIVEN_UP):
    _counter.labels(BATCH_FINISHED)


class QueueCollector(Collector):
    """Queue and webhook backlog gauges computed from the database when ``/metrics`` is scraped."""

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
        yield GaugeMetricFamily(
            "sift_batch_max_bytes",
            "SIFT_BATCH_MAX_BYTES, the stored results' cap",
            value=settings.SIFT_BATCH_MAX_BYTES,
        )
        yield from cluster_heartbeats()
        yield from webhook_backlog()
        yield from monitor_gauges()


def monitor_gauges() -> Iterator[Metric]:
    now = timezone.now()
    counts = Monitor.objects.aggregate(
        every=Count("pk"),
        paused=Count("pk", filter=Q(due_at__isnull=True)),
        overdue=Count("pk", filter=Q(due_at__lt=now - OVERDUE_AFTER)),
    )
    yield GaugeMetricFamily("sift_monitors", "Monitors, paused ones included", value=counts["every"])
    yield GaugeMetricFamily("sift_monitors_paused", "Monitors paused", value=counts["paused"])
    yield GaugeMetricFamily(
        "sift_monitors_overdue",
        "Monitors due more than a minute ago and not run yet",
        value=counts["overdue"],
    )


# A cluster process that has not beaten for this long is counted as gone (as /healthz says).
HEARTBEAT_FRESH = timedelta(minutes=1)


def cluster_heartbeats() -> Iterator[Metric]:
    now = timezone.now()
    beats = ClusterHeartbeat.objects.aggregate(
        last=Max("seen_at"), fresh=Count("pk", filter=Q(seen_at__gte=now - HEARTBEAT_FRESH))
    )
    last = beats["last"]
    yield GaugeMetricFamily(
        "sift_cluster_heartbeat_age_seconds",
        "Seconds since a cluster worker process last wrote its heartbeat; +Inf when none ever did",
        value=(now - last).total_seconds() if last else math.inf,
    )
    yield GaugeMetricFamily(
        "sift_cluster_processes",
        "Cluster worker processes that wrote a heartbeat within a minute",
        value=beats["fresh"],
    )


def webhook_backlog() -> Iterator[Metric]:
    now = timezone.now()
    undelivered = WebhookDelivery.objects.filter(due_at__isnull=False)
    backlog = undelivered.aggregate(
        undelivered=Count("pk"),
        due=Count("pk", filter=Q(due_at__lte=now)),
        sending=Count("pk", filter=Q(sending_until__gt=now)),
        oldest_due=Min("due_at", filter=Q(due_at__lte=now)),
    )
    oldest = backlog["oldest_due"]
    yield GaugeMetricFamily(
        "sift_webhook_due", "Webhook attempts due now and not in flight", value=backlog["due"]
    )
    yield GaugeMetricFamily("sift_webhook_sending", "Webhook attempts in flight", value=backlog["sending"])
    yield GaugeMetricFamily(
        "sift_webhook_undelivered",
        "Webhook deliveries neither delivered nor given up (due, in flight or waiting to retry)",
        value=backlog["undelivered"],
    )
    yield GaugeMetricFamily(
        "sift_webhook_oldest_due_seconds",
        "Seconds the oldest due webhook attempt has waited; 0 when none is due",
        value=(now - oldest).total_seconds() if oldest else 0,
    )
