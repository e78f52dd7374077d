"""The fetch pipeline's Prometheus series; see docs/metrics.md for multi-process mode."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUESTS = Counter(
    "sift_fetch_requests", "Fetches (interactive and batch) by outcome (ok or the failure)", ["outcome"]
)
SECONDS = Histogram(
    "sift_fetch_seconds",
    "Seconds one fetch took, from cache lookup to envelope",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, float("inf")),
)
CACHE_HITS = Counter(
    "sift_cache_hits", "Fetches answered from the document cache (fresh, revalidated or stale)"
)
