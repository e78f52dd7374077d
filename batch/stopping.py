"""How a cluster worker process stops on SIGTERM: finish the target in flight, or give it back.

django-q2 leaves SIGTERM at its default in worker processes, so a worker dies at once,
mid-target, and its claim waits for the lease to run out and counts toward ``worker_lost``.
Instead, from ``post_spawn`` on, SIGTERM makes the worker take no new claim, wait up to
``STOP_GRACE_SECONDS`` for the target in flight to be stored, give it back for an immediate
retry if it is not (``worker.release_claim``), and exit. ``run_cluster`` sends that SIGTERM; so
does django-q2 when a task outlives its timeout. See docs/workers.md, "Stopping".
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Any

from django.db import DatabaseError, connection

from batch import worker

log = logging.getLogger(__name__)

# Shorter than run_cluster's kill deadline, so the worker gives its claim back itself.
STOP_GRACE_SECONDS = 8.0
RELEASE_TRIES = 3

# At most one stop per process; a list, so the handler needs neither a lock nor ``global``.
_stoppers: list[threading.Thread] = []


def install(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """``post_spawn`` receiver: runs in the worker process's main thread, where handlers are set."""
    signal.signal(signal.SIGTERM, _on_sigterm)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A handler runs between two bytecodes of the main thread, which may hold any lock (the
    # drain's, a logging handler's): take none here, hand the work to a thread.
    if not _stoppers:
        _stoppers.append(threading.Thread(target=stop_worker_process, name="sift-stop", daemon=True))
        _stoppers[0].start()


def stop_worker_process(grace: float = STOP_GRACE_SECONDS) -> None:
    deadline = time.monotonic() + grace
    worker.stop_claiming(grace)
    while worker.IN_FLIGHT.claim is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    # The lock: a store finishing in the main thread now clears the claim before we read it.
    acquired = worker.IN_FLIGHT.lock.acquire(timeout=1)
    claim = worker.IN_FLIGHT.claim
    if claim is not None:
        _release(claim)
    log.info("worker process %d stopped", os.getpid())
    if acquired:
        worker.IN_FLIGHT.lock.release()
    # Not sys.exit: the main thread is in the fetch, or blocked on django-q2's task queue.
    os._exit(0)


def _release(claim: worker.Claim) -> None:
    for _ in range(RELEASE_TRIES):
        try:
            worker.release_claim(claim)
            return
        except DatabaseError:
            log.warning(
                "job %s target %d: could not release the claim", claim.job_id, claim.idx, exc_info=True
            )
            connection.close()
            time.sleep(0.5)
    # Its lease runs out instead, and recovery counts it as a lost worker.
