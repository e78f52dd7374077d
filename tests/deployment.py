"""Run sift for real beside a test: the Procfile's processes (the cluster, the webhooks line,
gunicorn, mcp, render) as subprocesses on the test database."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from email.message import Message
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from batch.engine.supervisor import live_processes, session_processes
from fetch.render import server_process

ROOT = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    """The URL of the database this test runs on, for the subprocesses to share it."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def process_tree(pid: int) -> set[int]:
    """``pid`` and its live descendants."""
    tree: set[int] = {pid}
    while children := {entry.pid for entry in live_processes() if entry.ppid in tree} - tree:
        tree |= children
    return tree


def kill_pids(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def kill_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``process`` and its descendants: ``run_cluster`` puts qcluster in a session of its
    own, so killing the test's process group alone would leave the cluster running on."""
    kill_pids(process_tree(process.pid))
    process.wait()


def procfile_command(process: str) -> str:
    """The command of one Procfile line, so tests start exactly what a deployment starts."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == process:
            return command.strip()
    raise AssertionError(f"the Procfile has no {process!r} line")


def spawn_procfile(process: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start one Procfile line as honcho would: through a shell, with this virtualenv's scripts
    first on ``PATH``, in its own session, logging to ``log``."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    with open(log, "ab") as out:
        return subprocess.Popen(
            ["sh", "-c", "exec " + procfile_command(process)],
            cwd=ROOT,
            env={**env, "PATH": path},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


class Deployment:
    """Start and stop the Procfile's processes with a given environment, logging to ``tmp``."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp = tmp
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("SIFT_", "DATABASE_URL", "PROMETHEUS"))
            },
            "DATABASE_URL": test_database_url(),
            "PROMETHEUS_MULTIPROC_DIR": str(tmp / "metrics"),
            "SIFT_TEST_FETCH_DIR": str(tmp),
            "SIFT_TEST_FETCH_FUNC": "tests.fetchers.scripted",
            "SIFT_FETCH_ONLY_ALLOWED": "true",
            "SIFT_RENDER_SOCKET": settings.SIFT_RENDER_SOCKET,
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        (tmp / "metrics").mkdir(exist_ok=True)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.left_behind: set[int] = set()  # what stopped processes started, for stop_all
        self.port = free_port()

    def _spawn(self, name: str, args: list[str], **env: str) -> None:
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        self.processes[name] = subprocess.Popen(
            args,
            cwd=ROOT,
            env={**self.env, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def start_cluster(self, name: str = "cluster") -> None:
        # As the Procfile does: qcluster under the supervisor that can always stop it.
        self._spawn(name, [sys.executable, "manage.py", "run_cluster"])

    def start_webhooks(self, **env: str) -> None:
        """The Procfile's ``webhooks`` line (``deliver_webhooks``); returns once it delivers."""
        self.start_procfile("webhooks", **env)
        wait_for(
            lambda: "deliver_webhooks: running" in self.log("webhooks"), 60, "the webhooks line to start"
        )

    def start_web(self, workers: int = 2) -> None:
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        bind = f"127.0.0.1:{self.port}"
        self._spawn("web", [gunicorn, "sift_site.wsgi", "--bind", bind, "--workers", str(workers)])
        wait_for(self._web_answers, what="gunicorn to answer")

    def start_procfile(self, process: str, **env: str) -> None:
        """Start the Procfile's ``process`` line as written, with ``env`` added to this environment."""
        self.processes[process] = spawn_procfile(process, {**self.env, **env}, self.tmp / f"{process}.log")

    def start_render_line(self, **env: str) -> int:
        """The Procfile's ``render`` line; returns its pid once it listens (a socket file left by
        a render process killed earlier is no sign of that)."""
        self.start_procfile("render", **env)
        pid = self.processes["render"].pid
        wait_for(lambda: server_process.listening_pid() == pid, what="the render line to listen")
        return pid

    def start_procfile_web(self) -> None:
        """The Procfile's ``web`` line on this deployment's port; returns once it answers."""
        self.start_procfile("web", PORT=str(self.port))
        wait_for(self._web_answers, what="the Procfile's gunicorn to answer")

    def start_mcp(self) -> str:
        """The Procfile's ``mcp`` line as written, on a free ``MCP_PORT``; answers the endpoint's URL."""
        self.mcp_port = free_port()
        self.start_procfile("mcp", MCP_PORT=str(self.mcp_port))
        url = f"http://127.0.0.1:{self.mcp_port}/mcp"
        wait_for(lambda: self._answers(url), timeout=60, what="the mcp process to answer")
        return url

    def _answers(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # 401 without a key: it is up
        except OSError:
            return False

    def _web_answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1):
                return True
        except OSError:
            return False

    def get(self, path: str, key: str | None = None) -> bytes:
        return self.request(path, key)[1]

    def request(self, path: str, key: str | None = None, timeout: float = 60) -> tuple[int, bytes, Message]:
        """GET ``path``; answer (status, body, headers) for error statuses too. Header names are
        looked up regardless of case, as HTTP says (uvicorn's httptools sends them lower-cased)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}")
        if key:
            request.add_header("Authorization", f"Bearer {key}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, bytes(response.read()), response.headers
        except urllib.error.HTTPError as error:
            return error.code, bytes(error.read()), error.headers

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        process = self.processes.pop(name, None)
        if process is None:
            return
        # Its descendants are noted first: one that outlives its parent (a gunicorn worker whose
        # master a test killed, say) is reparented to init, out of any later walk of the tree; so
        # is what stays in the session it started. Some may outlive it by design (a render process
        # started on demand serves the other web processes), so they are killed by ``stop_all``.
        self.left_behind |= process_tree(process.pid) - {process.pid}
        if process.poll() is None:
            # Signal the main process only: run_cluster and gunicorn stop their children in order.
            process.send_signal(sig)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                kill_tree(process)
        self.left_behind |= {entry.pid for entry in session_processes(process.pid)}

    def kill(self, name: str) -> None:
        """SIGKILL the process and everything it started, whatever session it moved to."""
        process = self.processes.pop(name, None)
        if process is not None:
            kill_tree(process)

    def stop_all(self) -> None:
        """Stop every process, then kill whatever they left running."""
        for name in list(self.processes):
            self.stop(name)
        kill_pids({entry.pid for entry in live_processes() if entry.pid in self.left_behind})
        self.left_behind.clear()

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""
