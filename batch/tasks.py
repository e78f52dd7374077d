"""django-q2 entry points: thin wrappers around the worker and the runner (SPEC §3.4, §3.6)."""

from __future__ import annotations

from django.conf import settings

from batch import queue, runner, worker


def drain_targets() -> int:
    """Run targets for one drain budget; hand over to a fresh task if work is left."""
    ran = worker.drain(worker.fetch_func(), budget=settings.SIFT_BATCH_DRAIN_SECONDS)
    if worker.has_unfinished_work():
        queue.wake_workers(force=True)
    return ran


def sweep_and_evict() -> str:
    swept = runner.sweep_expired_jobs()
    evicted = runner.evict_every_callers_oldest() + runner.evict_oldest()
    return f"sweep: {swept}; evict: {evicted}"
