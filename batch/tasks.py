"""django-q2 entry points: thin wrappers around the worker, the runner and the wake-ups."""

from __future__ import annotations

from django.conf import settings

from batch import jobs, wakeups, worker
from batch.wakeups import Wake


def drain_targets() -> int:
    """Run targets for one drain budget; hand over to a fresh task if work is left."""
    ran = worker.drain(worker.fetch_func(), budget=settings.SIFT_BATCH_DRAIN_SECONDS)
    wakeups.ensure_workers(Wake.HAND_OVER)
    return ran


def wake_stranded_work() -> int:
    """The per-minute schedule: queue drains if work waits and no drain does."""
    return wakeups.ensure_workers(Wake.SCHEDULE)


def sweep_and_evict() -> str:
    swept = jobs.sweep_expired_jobs()
    evicted = jobs.evict_every_callers_oldest() + jobs.evict_oldest()
    return f"sweep: {swept}; evict: {evicted}"
