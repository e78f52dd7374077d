"""At most once per interval in this process: the pace of periodic database chores."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta


class Every:
    """Says when a chore (a sweep, a look for lost leases) is due again in this process.

    ``due`` is true at most once per ``interval``; a clock that went back (a test travelling in
    time) makes the chore due at once.
    """

    def __init__(self, interval: timedelta) -> None:
        self.interval = interval
        self.lock = threading.Lock()
        self.last: datetime | None = None

    def due(self, now: datetime) -> bool:
        with self.lock:
            if self.last is not None and self.last <= now < self.last + self.interval:
                return False
            self.last = now
            return True
