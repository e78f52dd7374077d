from __future__ import annotations

import sys
from typing import Any

from batch.engine.supervisor import Supervisor
from sift_site.long_running import LoggedChecksCommand


class Command(LoggedChecksCommand):
    help = (
        "Run the django-q2 cluster (qcluster) so that SIGTERM or Ctrl-C stops it within 20 s and "
        "nothing of it outlives this process (docs/workers.md, 'Stopping'). Use this, not qcluster."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        sys.exit(Supervisor().run())
