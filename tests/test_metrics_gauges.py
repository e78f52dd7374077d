"""The gauges read from the database at scrape time (docs/metrics.md): the cluster's heartbeats and
the document cache, with the caps beside them."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
import time_machine
from django.test import override_settings
from django.utils import timezone
from prometheus_client import CollectorRegistry

from batch.metrics import QueueCollector
from batch.models import ClusterHeartbeat
from fetch import cache
from fetch.client import Download
from fetch.metrics import CacheCollector


def scraped(collector: object) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(collector)  # type: ignore[arg-type]
    return {sample.name: sample.value for family in registry.collect() for sample in family.samples}


@pytest.mark.django_db
def test_no_heartbeat_ever_is_an_infinite_age_and_no_process():
    values = scraped(QueueCollector())
    assert math.isinf(values["sift_cluster_heartbeat_age_seconds"])
    assert values["sift_cluster_processes"] == 0


@pytest.mark.django_db
def test_the_heartbeat_age_is_the_youngest_beat_and_processes_count_those_within_a_minute():
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        ClusterHeartbeat.objects.create(name="a:1", seen_at=now - timedelta(seconds=12))
        ClusterHeartbeat.objects.create(name="a:2", seen_at=now - timedelta(seconds=40))
        ClusterHeartbeat.objects.create(name="b:1", seen_at=now - timedelta(minutes=5))
        values = scraped(QueueCollector())
    assert values["sift_cluster_heartbeat_age_seconds"] == pytest.approx(12)
    assert values["sift_cluster_processes"] == 2


@pytest.mark.django_db
@override_settings(SIFT_CACHE_MAX_BYTES=1_000_000, SIFT_BATCH_MAX_BYTES=2_000_000)
def test_the_cache_gauges_count_its_documents_and_bytes_beside_the_caps():
    assert scraped(CacheCollector())["sift_cache_entries"] == 0
    for index, size in enumerate((300, 700)):
        page = Download(
            f"https://example.org/{index}",
            f"https://example.org/{index}",
            200,
            {},
            "text/html",
            None,
            b"x" * size,
            5,
        )
        cache.store("fleet", page.url, page)
    values = scraped(CacheCollector())
    assert (values["sift_cache_entries"], values["sift_cache_max_bytes"]) == (2, 1_000_000)
    assert values["sift_cache_bytes"] == 1000
    assert scraped(QueueCollector())["sift_batch_max_bytes"] == 2_000_000
