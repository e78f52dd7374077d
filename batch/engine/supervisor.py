"""``run_cluster``: run django-q2's ``qcluster`` so that it always stops and never outlives ``run_cluster``.

qcluster runs in a child forked from run_cluster (so the two share the pages of the site they
both loaded), in a session of its own: signals for our process group (Ctrl-C, honcho) never
reach qcluster, whose own handler can hang (django-q2#346), and the session names every process
of the cluster, even one whose parent has died. Each of them dies with its parent
(``batch/engine/stopping.py``), so the cluster ends with whichever of run_cluster, qcluster's main
process and the sentinel ends first. To stop, run_cluster kills qcluster's main process; when
the cluster ends by itself it exits 1, for a process manager to start it again. Either way it
returns once the session is empty, so a new cluster never runs beside an old one.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import time
from pathlib import Path
from types import FrameType
from typing import NamedTuple

from django.core.management import call_command
from django.db import connections

from batch.engine import stopping

log = logging.getLogger(__name__)

# A stop ends within this, whatever the cluster does: the workers give up after
# stopping.STOP_GRACE_SECONDS, and systemd's TimeoutStopSec (docs/operations.md) is longer.
KILL_AFTER_SECONDS = 15.0
POLL_SECONDS = 0.1
# SIGHUP too: a closed terminal must not leave the cluster running without its supervisor.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Supervisor:
    def __init__(self) -> None:
        self.stop_requested = 0  # the signal number; set in a handler, so a plain attribute

    def run(self) -> int:
        """Run the cluster until a stop signal (answers 0) or until it ends by itself (1)."""
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, self._request_stop)
        cluster = _fork_cluster()
        assert cluster.pid is not None
        log.info("run_cluster %d: qcluster started as %d", os.getpid(), cluster.pid)
        while cluster.is_alive() and not self.stop_requested:
            time.sleep(POLL_SECONDS)
        why = signal.Signals(self.stop_requested).name if self.stop_requested else "qcluster exited"
        log.info("run_cluster: %s, ending the cluster", why)
        started = time.monotonic()
        _signal(cluster.pid, signal.SIGKILL)
        cluster.join()
        # A dead session leader's id stays taken while its session has a process: no pid reuse.
        while left := session_processes(cluster.pid):
            if time.monotonic() - started > KILL_AFTER_SECONDS:
                for process in left:
                    _signal(process.pid, signal.SIGKILL)
            time.sleep(POLL_SECONDS)
        log.info("run_cluster: cluster stopped after %.1fs", time.monotonic() - started)
        return 0 if self.stop_requested else 1

    def _request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = self.stop_requested or signum


def _fork_cluster() -> multiprocessing.process.BaseProcess:
    """qcluster's main process, forked from this one (so that the two share the pages of the site
    they both loaded, rather than each importing it), in a session of its own."""
    connections.close_all()  # a connection is never shared across a fork
    gc.freeze()  # the collector's passes would copy the pages both share (sift_site/asgi.py)
    cluster = multiprocessing.get_context("fork").Process(
        target=_run_qcluster, args=(os.getpid(),), name="qcluster"
    )
    cluster.start()
    return cluster


def _run_qcluster(supervisor: int) -> None:
    os.setsid()
    for stop_signal in STOP_SIGNALS:
        signal.signal(stop_signal, signal.SIG_DFL)
    stopping.cluster_dies_with(supervisor)
    call_command("qcluster")  # returns once the sentinel runs; the process waits for it at exit


class ProcessEntry(NamedTuple):
    pid: int
    ppid: int
    session: int


def live_processes() -> list[ProcessEntry]:
    """Every live process, read from /proc (zombies are dead already)."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = stat_file.read_text()
        except OSError:
            continue  # it exited meanwhile
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            found.append(ProcessEntry(int(stat_file.parent.name), int(fields[1]), int(fields[3])))
    return found


def session_processes(session: int) -> list[ProcessEntry]:
    return [process for process in live_processes() if process.session == session]


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        os.kill(pid, sig)
