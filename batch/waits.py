"""Bounded waits for ``GET /v1/batch/{id}?wait=N`` (``docs/decisions.md``, "Bounded waits"), and
bounded reads of large jobs.

A wait holds a request thread of the web process until the job finishes, so it takes one of the
process's thread shares (``batch.threads``) first: at most ``SIFT_BATCH_WAITS_PER_CALLER`` per
caller and ``SIFT_BATCH_WAITS_TOTAL`` in all, the total kept below the threads of a worker. A
request that finds no free share answers at once with the job as it is and
``wait_cut_short: true``.

A job too large to answer whole is written in pieces for as long as its client takes to read it
(``doors/rest/job_body.py``): each such read holds one of ``SIFT_BATCH_READS_PER_CALLER`` read
shares of its caller in the process until its answer ends, so that clients who do not read
cannot hold many; a read without one is refused ``caller_busy``.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from dataclasses import dataclass

from django.conf import settings

from batch.models import ApiKey, BatchJob
from batch.threads import ThreadShares

# How often a held wait looks at its job again: cheap (one primary-key read), and an agent
# never learns of a finished job more than this late.
POLL_SECONDS = 0.2

WAITS = ThreadShares(lambda: settings.SIFT_BATCH_WAITS_PER_CALLER, lambda: settings.SIFT_BATCH_WAITS_TOTAL)
READS = ThreadShares(lambda: settings.SIFT_BATCH_READS_PER_CALLER, lambda: None)


@dataclass(frozen=True)
class Waited:
    job: BatchJob
    # True when the caller asked to wait for a live job and got no wait slot.
    cut_short: bool


def wait_slot(caller: ApiKey) -> AbstractContextManager[bool]:
    """Whether this request may hold its thread to wait; the slot is freed on exit."""
    return WAITS.share(caller.pk)


def until_finished(caller: ApiKey, job: BatchJob, seconds: float) -> Waited:
    """The job once it has finished or ``seconds`` have passed; at once when no slot is free."""
    if seconds <= 0 or not job.is_live:
        return Waited(job, cut_short=False)
    with wait_slot(caller) as granted:
        if not granted:
            return Waited(job, cut_short=True)
        deadline = time.monotonic() + seconds
        while job.is_live and time.monotonic() < deadline:
            time.sleep(min(POLL_SECONDS, max(deadline - time.monotonic(), 0)))
            fresh = BatchJob.objects.filter(pk=job.pk).first()
            if fresh is None:  # deleted meanwhile (evicted or swept): nothing more to wait for
                break
            job = fresh
    return Waited(job, cut_short=False)
