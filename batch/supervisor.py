"""Run django-q2's ``qcluster`` under a supervisor that can always stop it (``run_cluster``).

``qcluster`` cannot be stopped reliably by signals: its main process stops the cluster from
inside the signal handler by setting a ``multiprocessing.Event`` and joining the sentinel
(upstream django-q2#346). When SIGTERM reaches the whole process group (systemd's default
``KillMode=control-group``, honcho), the sentinel dies at once from the same signal while it
waits on that event, and the main process blocks forever in the event's ``set()``, waiting for
the dead sentinel to wake up; the worker processes die mid-target. Sentinel and workers ignore
SIGINT, so Ctrl-C stops the cluster only once every running drain has ended (minutes).

So ``qcluster`` runs as a child in a session of its own, where signals for our group never
reach it. On SIGTERM, SIGINT or SIGHUP the supervisor sends SIGTERM to the cluster's
processes itself, the sentinel first and never to the main process, which exits once the
sentinel is gone: sentinel, pusher and monitor die at once; each worker finishes or gives back
its target (``batch/stopping.py``). A main process left alone for a second is stuck (under
``KillMode=control-group`` it got the signal too) and is killed; whatever is left after
``KILL_AFTER_SECONDS`` is killed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from django.conf import settings

log = logging.getLogger(__name__)

# A stop ends within this, whatever the cluster does: the workers give up after
# stopping.STOP_GRACE_SECONDS, and systemd's TimeoutStopSec (docs/operations.md) is longer.
KILL_AFTER_SECONDS = 15.0
POLL_SECONDS = 0.1
# SIGHUP too: a closed terminal must not leave the cluster running without its supervisor.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# qcluster's main process exits within milliseconds of its sentinel, unless it is stuck.
ALONE_SECONDS = 1.0


class Supervisor:
    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.stop_requested = 0  # the signal number; set in a handler, so a plain attribute
        self.cluster: subprocess.Popen[bytes] | None = None

    def run(self) -> int:
        for stop_signal in STOP_SIGNALS:
            signal.signal(stop_signal, self._request_stop)
        self.cluster = subprocess.Popen(self.argv, start_new_session=True)  # noqa: S603 - our own command
        log.info("run_cluster %d: qcluster started as %d", os.getpid(), self.cluster.pid)
        while self.cluster.poll() is None and not self.stop_requested:
            time.sleep(POLL_SECONDS)
        if self.stop_requested:
            log.info("run_cluster: %s, stopping the cluster", signal.Signals(self.stop_requested).name)
            self._stop(self.cluster)
            return 0
        # The cluster ended by itself (a crash): leave nothing behind, say so in the exit status.
        self._kill_the_rest(self.cluster.pid)
        return self.cluster.returncode or 1

    def _request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = self.stop_requested or signum

    def _stop(self, cluster: subprocess.Popen[bytes]) -> None:
        started = time.monotonic()
        signalled: set[int] = set()
        alone_since: float | None = None
        while time.monotonic() - started < KILL_AFTER_SECONDS:
            others = [p for p in session_processes(cluster.pid) if p.pid != cluster.pid]
            if not others and cluster.poll() is not None:
                break
            for process in sorted(others, key=lambda p: p.ppid != cluster.pid):  # the sentinel first
                if process.pid not in signalled:
                    _signal(process.pid, signal.SIGTERM)
                    signalled.add(process.pid)
            alone_since = (alone_since or time.monotonic()) if not others else None
            if alone_since is not None and time.monotonic() - alone_since > ALONE_SECONDS:
                # Its sentinel is gone, so it has nothing left to do: it was stopped before the
                # sentinel existed, or it got the signal too and hangs in its handler.
                _signal(cluster.pid, signal.SIGKILL)
            time.sleep(POLL_SECONDS)
        self._kill_the_rest(cluster.pid)
        log.info("run_cluster: cluster stopped after %.1fs", time.monotonic() - started)

    def _kill_the_rest(self, session: int) -> None:
        for process in session_processes(session):
            _signal(process.pid, signal.SIGKILL)
        if self.cluster is not None:
            self.cluster.wait()


@dataclass(frozen=True)
class ProcessEntry:
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


def qcluster_argv() -> list[str]:
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "qcluster"]
