"""The machine's one render process (``server.py``): started, reached and stopped.

Two ways to run it, the same script either way. The Procfile's ``render`` line (``manage.py
run_render``, ``run_line``) keeps it for the deployment's life: Python and Playwright are loaded
once, and the browser is started by the first render and closed after ``SIFT_RENDER_IDLE``
without one. Where no line runs it (tests, benchmarks, a deployment without the line), the first
render that finds nothing on ``SIFT_RENDER_SOCKET`` starts one, which ends itself, browser and
all, after ``SIFT_RENDER_IDLE`` or once every process that started it or rendered with it has
ended (the deployment stopped). Either way it runs with an environment of ``PATH`` (and Node's
compile cache, and how to log) only and, where the platform allows, in a network namespace of its own; a file
lock beside the socket makes two starters one.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from django.conf import settings

from fetch import limits
from fetch.sandbox.proctree import alive, tree_pids
from sift_site.log_lines import handed_on

SERVER = Path(__file__).with_name("server.py")
# How long a render may take to reach a render process (started if none listens: Python and
# Playwright's import) and have its browser and context ready (the browser's launch): the render's
# own deadline starts after that. Stopping a render process asks it its pid for this long at most.
START_SECONDS = limits.RENDER_START_SECONDS
PROBE_SECONDS = 2.0
# How long a render past its deadline waits for the render process to close its context alone
# (server.ABANDON_CLOSE_SECONDS, and the answer's way back), before the tree is killed instead.
ABANDON_SECONDS = 3.0
# How long a stopped render process's tree may take to go after SIGKILL, and the render line's
# process to hear that its browser is gone.
KILL_WAIT_SECONDS = 5.0
RESET_SECONDS = 0.5
# Beside the socket while the render process's browser runs (server.py makes it).
BROWSER_MARK = ".browser"
UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
NAMESPACE_COMMAND = [UNSHARE, "--user", "--map-root-user", "--net", "--"]
logger = logging.getLogger(__name__)
# The render process this process last reached: its pid, and whether it is the render line's.
_last: list[tuple[int, bool]] = []


class RenderCrashed(Exception):
    """The browser or the render process died before answering; the render may be tried again."""


@cache
def namespace_possible() -> bool:
    """Whether this platform lets an unprivileged process have a network namespace of its own."""
    try:
        done = subprocess.run([*NAMESPACE_COMMAND, "true"], capture_output=True, timeout=10, check=False)  # noqa: S603
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def network_mode() -> str:
    """``namespace`` (the browser has no route at all) or ``proxy`` (the fail-closed proxy only)."""
    return "namespace" if settings.SIFT_RENDER_NAMESPACE and namespace_possible() else "proxy"


def start_soon() -> None:
    """Have the browser starting while the caller downloads the page to render, so that its start
    overlaps the download: a render process is started where none listens, and one whose browser
    is down (the render line's after an idle time: no mark beside the socket) is asked to start
    it. ``render`` waits for that start, never making a second."""
    path = Path(settings.SIFT_RENDER_SOCKET)
    if not path.exists():
        start: Callable[[float], None] = _start_server
    elif not Path(f"{path}{BROWSER_MARK}").exists():
        start = _start_browser
    else:
        return
    until = time.monotonic() + START_SECONDS
    threading.Thread(target=start, args=(until,), daemon=True, name="render-start").start()


def _start_browser(until: float) -> None:
    if not _tell({"start": True, "chromium": settings.SIFT_RENDER_CHROMIUM}, until, heard=False):
        _start_server(until)  # the socket was a killed process's


def connect(until: float) -> tuple[socket.socket, int]:
    """A connection to the render process, which is started if none listens; and its pid; by
    ``until`` (a ``time.monotonic()`` value) or ``RenderCrashed``."""
    for _ in range(3):
        connected = _try_connect(until)
        if connected is not None:
            return connected
        _start_server(until)
    raise RenderCrashed("the render process did not start")


def _try_connect(until: float) -> tuple[socket.socket, int] | None:
    left = until - time.monotonic()
    if left <= 0:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(left)
        sock.connect(settings.SIFT_RENDER_SOCKET)
        hello = b""
        while not hello.endswith(b"\n"):
            chunk = sock.recv(1)
            if not chunk:
                raise ConnectionError("the render process closed the connection")
            hello += chunk
        sock.settimeout(None)
        said = json.loads(hello)
        pid = int(said["pid"])
    except (OSError, ValueError, KeyError):
        sock.close()
        return None
    _last[:] = [(pid, bool(said.get("line")))]
    return sock, pid


def _command(path: Path, line_lock: int | None = None) -> tuple[list[str], dict[str, str], str]:
    """The render process's command line, environment and network mode; ``line_lock``, for the
    render line: the starter's lock, which the process releases once it listens."""
    mode = network_mode()
    idle = str(float(settings.SIFT_RENDER_IDLE))
    command = [sys.executable, "-I", str(SERVER), str(path), idle, settings.SIFT_RENDER_CHROMIUM]
    # Started for a render, it lives for this process and those that render with it after.
    command += ["for", str(os.getpid())] if line_lock is None else ["line", str(line_lock)]
    # Node keeps the driver's compiled code beside the socket, so its next start compiles nothing.
    env = {
        "PATH": "/usr/bin:/bin",
        "NODE_COMPILE_CACHE": str(path.parent / "node-compile-cache"),
        **handed_on(settings.LOG_FORMAT, settings.LOG_LEVEL),
    }
    return ([*NAMESPACE_COMMAND, *command] if mode == "namespace" else command), env, mode


def _log_start(pid: int, mode: str, how: str) -> None:
    logger.info(
        "render process %s %s; its browser: %s; its network: %s",
        pid,
        how,
        settings.SIFT_RENDER_CHROMIUM,
        mode,
    )


def _start_server(until: float) -> None:
    path = Path(settings.SIFT_RENDER_SOCKET)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as lock:
        if not _lock_by(lock.fileno(), until):  # one starter at a time, machine-wide
            return
        if listening_pid(until) is not None:
            return
        path.unlink(missing_ok=True)
        command, env, mode = _command(path)
        process = subprocess.Popen(  # noqa: S603 — our own script, run by our own interpreter
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # its log lines go to this process's stderr
            env=env,
            start_new_session=True,
            cwd="/",
        )
        threading.Thread(target=process.wait, daemon=True).start()  # reaped when it ends
        while not path.exists() and process.poll() is None and time.monotonic() < until:
            time.sleep(0.005)
        _log_start(process.pid, mode, "started for a render")


def run_line() -> NoReturn:
    """Become the render line's render process (``manage.py run_render``): this process's pid,
    so the process manager's stop reaches it. A render process listening before it (started on
    demand, or another line's left by a process manager killed whole) is stopped first; the
    starters' lock is held until the new one listens."""
    path = Path(settings.SIFT_RENDER_SOCKET)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = os.open(f"{path}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    stop_server(line_too=True)  # one started on demand, or a line of a deployment killed whole
    path.unlink(missing_ok=True)
    os.set_inheritable(lock, True)
    command, env, mode = _command(path, line_lock=lock)
    _log_start(os.getpid(), mode, "runs as the render line")
    os.chdir("/")
    os.execve(command[0], command, env)  # noqa: S606 — our own script, as _start_server runs it


def _lock_by(descriptor: int, until: float) -> bool:
    """Whether the exclusive lock on ``descriptor`` was had by ``until``."""
    while True:
        with suppress(BlockingIOError):
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        if time.monotonic() >= until:
            return False
        time.sleep(0.02)


def listening_pid(until: float | None = None) -> int | None:
    """The pid of the render process listening on the socket, as it says on connecting (which
    also makes it the one ``stop_server`` stops); by ``until``, or within ``PROBE_SECONDS``."""
    connected = _try_connect(time.monotonic() + PROBE_SECONDS if until is None else until)
    if connected is None:
        return None
    connected[0].close()
    return connected[1]


def running_pids() -> set[int]:
    """The render process, if the last one this process talked to still runs."""
    return {pid for pid, _ in _last if alive(pid)}


def stop_server(line_too: bool = False) -> None:
    """Kill the machine's render process, if one listens, with every process under it; the render
    line's process itself is left (the browser and driver under it go, and its next render starts
    them again), since the process manager would stop the whole deployment were it to end, unless
    ``line_too`` (a new line takes its place). Within ``limits.RENDER_STOP_SECONDS``."""
    listening_pid()  # learns the pid of one another process started
    for pid, line in list(_last):
        spared = line and not line_too
        members = tree_pids(pid) - ({pid} if spared else set())
        for member in members:
            with suppress(OSError):
                os.kill(member, signal.SIGKILL)
        give_up = time.monotonic() + KILL_WAIT_SECONDS
        while any(alive(member) for member in members) and time.monotonic() < give_up:
            time.sleep(0.02)
        if spared:
            # It drops them at once, so its next render starts both again rather than failing
            # once on the dead driver.
            _tell({"reset": True}, time.monotonic() + RESET_SECONDS, heard=True)
    _last.clear()


def _tell(message: dict[str, Any], until: float, heard: bool) -> bool:
    """Send the render process ``message`` on a connection of its own, unless none listens
    (``False``); with ``heard``, wait (up to ``until``) until it has acted on it and closed the
    connection."""
    connected = _try_connect(until)
    if connected is None:
        return False
    sock = connected[0]
    with sock, suppress(OSError):
        sock.sendall(json.dumps(message).encode() + b"\n")
        if heard:
            sock.settimeout(max(0.01, until - time.monotonic()))
            sock.recv(1)
    return True
