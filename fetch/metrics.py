"""The fetch pipeline's Prometheus series; see docs/metrics.md for multi-process mode.

Counters are written where the work happens (web, mcp and cluster processes); the cache's size is
read from the database at scrape time (``CacheCollector``), so it is right whichever process
stored or evicted a document.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Sum
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fetch.models import CachedDocument

REQUESTS = Counter(
    "sift_fetch_requests",
    "Fetches (interactive and batch) and uploads read, by outcome (ok or the failure) and source "
    "(url: fetched; upload: sent by the caller to /v1/read or MCP read)",
    ["outcome", "source"],
)
SECONDS = Histogram(
    "sift_fetch_seconds",
    "Seconds one fetch took, from cache lookup to envelope (an upload: from its bytes to envelope)",
    ["source"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, float("inf")),
)
CACHE_HITS = Counter(
    "sift_cache_hits", "Fetches answered from the document cache (fresh, revalidated or stale)"
)
RENDERS = Counter(
    "sift_render_renders",
    "Renders by outcome: ok, or the failure (timeout, memory_limit, crashed)",
    ["outcome"],
)
BROWSER_RESTARTS = Counter(
    "sift_render_browser_restarts",
    "Browsers stopped under a render, started afresh by the next: reason timeout, memory (killed "
    "past SIFT_RENDER_MAX_MEMORY) or crashed",
    ["reason"],
)
SANDBOX_BUSY = Gauge(
    "sift_sandbox_children_busy",
    "Sandbox children parsing a document now, summed over the live processes",
    multiprocess_mode="livesum",
)
SANDBOX_KILLS = Counter(
    "sift_sandbox_kills",
    "Sandbox children ended mid-parse: filter_timeout (wall or CPU time), memory_limit, internal",
    ["reason"],
)

# Every series an alert or the dashboard watches exists from the start at 0, in every process that
# imports this module: a failure's first occurrence is then an increase (``increase()`` sees no
# step from an absent series), and the series are there before anything failed.
for _outcome in ("ok", "timeout", "memory_limit", "crashed"):
    RENDERS.labels(_outcome)
for _reason in ("timeout", "memory", "crashed"):
    BROWSER_RESTARTS.labels(_reason)
for _reason in ("filter_timeout", "memory_limit", "internal"):
    SANDBOX_KILLS.labels(_reason)


class CacheCollector(Collector):
    """The document cache's size and cap, read from the database when ``/metrics`` is scraped."""

    def collect(self) -> Iterator[Metric]:
        cache = CachedDocument.objects.aggregate(entries=Count("pk"), stored=Sum("n_bytes"))
        yield GaugeMetricFamily(
            "sift_cache_bytes", "Bytes of the documents in the cache", value=cache["stored"] or 0
        )
        yield GaugeMetricFamily("sift_cache_entries", "Documents in the cache", value=cache["entries"])
        yield GaugeMetricFamily(
            "sift_cache_max_bytes",
            "SIFT_CACHE_MAX_BYTES, the cache's cap",
            value=settings.SIFT_CACHE_MAX_BYTES,
        )
