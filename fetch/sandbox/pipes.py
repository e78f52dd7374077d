"""One sandbox child and its two pipes (``fetch/sandbox/pool.py`` keeps a pool of them): how it is
started, the framed protocol it speaks (``child.py``), and what its end means.
"""

from __future__ import annotations

import os
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from fetch.outcomes import Outcome
from fetch.sandbox.child import MEMORY_EXIT_STATUS

MAX_REPLY_HEADER_BYTES = 64 << 10
CHILD_SCRIPT = Path(__file__).with_name("child.py")
_LENGTH = struct.Struct(">I")


class ChildTimedOut(Exception):
    pass


class ChildEnded(Exception):
    pass


class ChildMisbehaved(Exception):
    pass


class Child:
    """One warm child and its two pipes, used by one thread at a time."""

    def __init__(self, memory_bytes: int, environ: dict[str, str]) -> None:
        # -I: no PYTHON* variables, no user site, no script folder on sys.path. env: nothing of
        # this process's environment but ``environ`` (how to log). close_fds: only the three
        # standard descriptors survive; its log lines go to this process's stderr.
        self.proc = subprocess.Popen(  # noqa: S603 — our own script, run by our own interpreter
            [sys.executable, "-I", str(CHILD_SCRIPT), str(memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environ,
            cwd="/",
            close_fds=True,
            start_new_session=True,
        )
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self.requests = 0
        self.idle_since = 0.0  # time.monotonic() when it last went idle

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, deadline: float) -> None:
        """Wait for the frame the child sends once its imports and limits are in place."""
        self._read_frame(deadline, MAX_REPLY_HEADER_BYTES)

    def send(self, header: bytes, payload: bytes, deadline: float) -> None:
        self.requests += 1
        for frame in (header, payload):
            self._write(_LENGTH.pack(len(frame)), deadline)
            self._write(frame, deadline)

    def receive(self, deadline: float, max_reply: int) -> tuple[bytes, bytes]:
        reply_header = self._read_frame(deadline, MAX_REPLY_HEADER_BYTES)
        return reply_header, self._read_frame(deadline, max_reply)

    def _wait(self, fd: int, event: int, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        poller = select.poll()
        poller.register(fd, event)
        if remaining <= 0 or not poller.poll(remaining * 1000):
            raise ChildTimedOut

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            self._wait(self._in, select.POLLOUT, deadline)
            try:
                written = os.write(self._in, view[: 1 << 20])
            except BlockingIOError:
                continue
            except BrokenPipeError:
                raise ChildEnded from None
            view = view[written:]

    def _read_exact(self, size: int, deadline: float) -> bytes:
        buffer = bytearray()
        while len(buffer) < size:
            self._wait(self._out, select.POLLIN, deadline)
            try:
                chunk = os.read(self._out, min(size - len(buffer), 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise ChildEnded
            buffer += chunk
        return bytes(buffer)

    def _read_frame(self, deadline: float, limit: int) -> bytes:
        (length,) = _LENGTH.unpack(self._read_exact(_LENGTH.size, deadline))
        if length > limit:
            raise ChildMisbehaved(f"reply frame of {length} bytes over {limit}")
        return self._read_exact(length, deadline)

    def end_status(self) -> int | None:
        """The child's exit status once it has ended on its own; None when it closed its pipe
        but had not ended after a grace second (then it is killed)."""
        try:
            return self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.stop()
            return None

    def stop(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def forget(self) -> None:
        """In a forked process: drop the pipes without touching the parent's child."""
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.proc.returncode = 0


def ending(status: int | None, cpu_seconds: float) -> tuple[Outcome, str]:
    """The outcome of a child that ended mid-request with ``status``, and why, in words."""
    if status == -signal.SIGXCPU:
        return Outcome.FILTER_TIMEOUT, f"ran out of CPU time ({cpu_seconds:.0f} s)"
    if status == MEMORY_EXIT_STATUS:
        return Outcome.MEMORY_LIMIT, "ran out of memory"
    if status is not None and status < 0:
        # PDFium and jq abort (SIGABRT) when an allocation fails under RLIMIT_AS, a native
        # parser may fault on one it did not check, and the kernel's OOM killer sends SIGKILL.
        name = signal.Signals(-status).name if -status in signal.valid_signals() else str(-status)
        return Outcome.MEMORY_LIMIT, f"ran out of memory (ended by {name})"
    return Outcome.INTERNAL, "failed"


def outcome_hint(outcome: Outcome, time_hint: str, memory_hint: str | None) -> str:
    if outcome is Outcome.FILTER_TIMEOUT:
        return time_hint
    if outcome is Outcome.MEMORY_LIMIT:
        return memory_hint or Outcome.MEMORY_LIMIT.hint
    return "Retry later; this is a fault in sift."
