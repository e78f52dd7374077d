"""How the cluster's processes stop: each with its parent, a worker without losing its target.

Each process of the cluster is signalled when its parent ends (Linux's ``PR_SET_PDEATHSIG``):
qcluster's main process when ``run_cluster`` does, the sentinel when the main process does,
pusher, monitor and workers when the sentinel does. So nothing of a cluster goes on once the
process above it is gone, however it went. A worker's signal is SIGTERM, as for a stop: it
takes no new claim, waits up to ``STOP_GRACE_SECONDS`` for the target in flight to be stored,
gives it back for an immediate retry if not (``worker.release_claim``), and exits, rather than
die mid-target and leave the claim to its lease. django-q2 sends SIGTERM to a task past its timeout.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Any

from django.db import DatabaseError, connection

from batch.engine import worker
from batch.engine.monitor_runs import MonitorRun, release_run

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_libc = ctypes.CDLL(None, use_errno=True)
# Shorter than run_cluster's kill deadline, so the worker gives its claim back itself.
STOP_GRACE_SECONDS = 8.0
RELEASE_TRIES = 3
# At most one stop per process; lists, so the handlers need neither a lock nor ``global``.
_stoppers: list[threading.Thread] = []
_forking: list[int] = [0]  # the pid of the process about to fork, for its child to check


def die_with_parent(sig: int, parent: int) -> None:
    """Have the kernel send ``sig`` when ``parent``, this process's parent, ends; exit now if it has."""
    if _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # it ended before: the kernel will never send the signal
        os._exit(1)


def cluster_dies_with(supervisor: int) -> None:
    """In qcluster's main process: SIGKILL when ``supervisor`` ends, and for every process forked
    from now on, here or in a child, when its parent ends (a fork clears the signal)."""
    die_with_parent(signal.SIGKILL, supervisor)
    os.register_at_fork(before=_note_forking, after_in_child=_die_with_forking_process)


def _note_forking() -> None:
    _forking[0] = os.getpid()


def _die_with_forking_process() -> None:
    die_with_parent(signal.SIGKILL, _forking[0])


def install(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """``post_spawn`` receiver, in the worker process's main thread (where handlers are set).
    The worker can now give its target back, so its parent's end sends SIGTERM, not SIGKILL."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    if _forking[0]:  # under run_cluster, not bare qcluster
        die_with_parent(signal.SIGTERM, _forking[0])
    log.info("worker process %d started", os.getpid())


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A handler runs between two bytecodes of the main thread, which may hold any lock (the
    # drain's, a logging handler's): take none here, hand the work to a thread.
    # A second SIGTERM (the parent's death signal beside a signal to every process) may run this
    # handler inside the first: only the stopper that is first in the list starts.
    if _stoppers:
        return
    stopper = threading.Thread(target=stop_worker_process, name="sift-stop", daemon=True)
    _stoppers.append(stopper)
    if _stoppers[0] is stopper:
        stopper.start()


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


def _release(claim: worker.Claim | MonitorRun) -> None:
    for _ in range(RELEASE_TRIES):
        try:
            if isinstance(claim, MonitorRun):
                release_run(claim)
            else:
                worker.release_claim(claim)
            return
        except DatabaseError:
            log.warning("release of %s failed", claim, exc_info=True)
            connection.close()
            time.sleep(0.5)
    # Its lease runs out instead, and recovery counts it as a lost worker.
