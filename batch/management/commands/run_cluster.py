from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand

from batch.supervisor import Supervisor, qcluster_argv


class Command(BaseCommand):
    help = (
        "Run the django-q2 cluster (qcluster) so that SIGTERM or Ctrl-C, to this process or its "
        "whole group, stops it within 20 s: the target in flight is stored or given back for an "
        "immediate retry (docs/workers.md). Use this, not qcluster, in the Procfile and in systemd."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        sys.exit(Supervisor(qcluster_argv()).run())
