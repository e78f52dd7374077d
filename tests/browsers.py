"""What the rendering tests share: their marks (a real Chromium, skipped without one unless
CI=true) and a listener that counts the connections a browser should never make."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path

import pytest
from django.conf import settings

# The browser sift renders with: the headless shell where installed, else Debian's chromium.
CHROMIUM = Path(settings.SIFT_RENDER_CHROMIUM)
BROWSER_TESTS = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not CHROMIUM.exists() and os.environ.get("CI") != "true",
        reason=f"no Chromium at {CHROMIUM}; apt-get install -y chromium-headless-shell",
    ),
]


def lasting(pids: set[int]) -> set[int]:
    """Of a browser's processes, those its tabs do not take with them: all but the renderers
    (a closed tab's renderer ends with it)."""
    kept = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"--type=renderer" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                kept.add(pid)
    return kept


class Listener:
    """A TCP listener that only counts the connections it is offered (and keeps their first bytes)."""

    def __init__(self, address: str, port: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, port))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.seen: list[bytes] = []
        self.running = True
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.settimeout(0.5)
            with contextlib.suppress(OSError):
                self.seen.append(conn.recv(300))
            conn.close()

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()
