"""Parent-death signals (``batch/engine/stopping.py``), in forked processes of this test."""

from __future__ import annotations

import os
import signal
import time

from batch.engine import stopping


def _exit_status(child: int) -> int:
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_process_whose_parent_has_already_ended_exits_at_once():
    child = os.fork()
    if child == 0:
        # The process it names is not its parent: as if the parent had ended before the call.
        stopping.die_with_parent(signal.SIGKILL, os.getpid())
        os._exit(0)
    assert _exit_status(child) == 1


def test_a_process_gets_its_signal_when_its_parent_ends():
    to_middle, from_grandchild = os.pipe()
    to_test, from_middle = os.pipe()
    middle = os.fork()
    if middle == 0:
        if os.fork() == 0:
            stopping.die_with_parent(signal.SIGKILL, os.getppid())
            os.write(from_grandchild, f"{os.getpid()}\n".encode())
            time.sleep(60)
            os._exit(0)
        os.write(from_middle, os.read(to_middle, 32))  # once the grandchild's signal is set
        os._exit(0)
    grandchild = int(os.read(to_test, 32))
    assert _exit_status(middle) == 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.05)
    assert not _alive(grandchild), "killed when its parent ended, not after its 60 s"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
