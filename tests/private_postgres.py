"""A throwaway PostgreSQL server of our own, for restarting it under a running sift.

The shared server (127.0.0.1:5432) serves every other test and benchmark; restarting it would
break them. This one lives in a temporary directory, listens on a free loopback port, trusts
``postgres`` and skips fsync; ``restart()`` is what an operator's ``pg_ctl restart -m fast``
does to sift. Run as root, the server runs as the ``postgres`` user (it refuses root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def postgres_bin() -> Path | None:
    """Where ``pg_ctl`` and ``initdb`` are: on PATH, or Debian's versioned directory."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivatePostgres:
    def __init__(self, bin_dir: Path, directory: Path) -> None:
        self.bin = bin_dir
        self.dir = directory
        self.data = directory / "data"
        self.port = _free_port()

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def _ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", "-o", options, *args
        )

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
        self._ctl("start")

    def restart(self) -> None:
        """Fast shutdown (every session is cut), then start again; returns once it accepts."""
        self._ctl("-m", "fast", "restart")

    def stop(self) -> None:
        self._ctl("-m", "immediate", "stop")

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")


@contextmanager
def private_postgres(bin_dir: Path) -> Iterator[PrivatePostgres]:
    """A started server, stopped and deleted on the way out."""
    # Not under pytest's tmp_path: the server's user must be able to reach its directory.
    server = PrivatePostgres(bin_dir, Path(tempfile.mkdtemp(prefix="sift-pg-")))
    os.chmod(server.dir, 0o755)
    try:
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # it never started
            server.stop()
        shutil.rmtree(server.dir, ignore_errors=True)
