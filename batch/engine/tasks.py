"""django-q2 entry points: thin wrappers around the worker, the jobs service and the wake-ups."""

from __future__ import annotations

from django.conf import settings

from batch import retention
from batch.engine import seam, wakeups, worker


def drain_targets() -> int:
    """Run targets for one drain budget; if work is left, make sure drains are queued to go on."""
    ran = worker.drain(seam.fetch_func(), budget=settings.SIFT_BATCH_DRAIN_SECONDS)
    wakeups.wake_workers()
    return ran


def wake_stranded_work() -> int:
    """The per-minute schedule: queue drains if work waits and no drain does."""
    return wakeups.wake_workers()


def sweep_and_evict() -> str:
    swept = retention.sweep_expired_jobs()
    evicted = retention.evict_every_callers_oldest() + retention.evict_oldest()
    return f"sweep: {swept}; evict: {evicted}"
