"""Each cluster worker process says it is alive, for ``/healthz`` (docs/operations.md).

django-q2 sends ``post_spawn`` in every worker process it starts; a daemon thread there writes
a heartbeat row every few seconds. It only beats: waking workers is ``batch/engine/wakeups.py``'s.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connection
from django.utils import timezone

from batch.models import ClusterHeartbeat

log = logging.getLogger(__name__)

BEAT_SECONDS = 10
FORGET_AFTER = timedelta(hours=1)


def beat(name: str) -> None:
    now = timezone.now()
    ClusterHeartbeat.objects.update_or_create(name=name, defaults={"seen_at": now})
    ClusterHeartbeat.objects.filter(seen_at__lt=now - FORGET_AFTER).delete()


def _beat_forever(name: str) -> None:
    while True:
        try:
            beat(name)
        except DatabaseError:
            log.warning("heartbeat %s: database unavailable", name, exc_info=True)
        finally:
            connection.close()
        time.sleep(BEAT_SECONDS)


def start_heartbeat(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    name = f"{socket.gethostname()}:{os.getpid()}"
    threading.Thread(target=_beat_forever, args=(name,), name="sift-heartbeat", daemon=True).start()
