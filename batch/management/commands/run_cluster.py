from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand

from batch.engine.supervisor import Supervisor


class Command(BaseCommand):
    help = (
        "Run the django-q2 cluster (qcluster) so that SIGTERM or Ctrl-C stops it within 20 s and "
        "nothing of it outlives this process (docs/workers.md, 'Stopping'). Use this, not qcluster."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        sys.exit(Supervisor().run())
