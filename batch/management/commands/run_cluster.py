from __future__ import annotations

import argparse
import sys
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from batch import stopping
from batch.supervisor import Supervisor


class Command(BaseCommand):
    help = (
        "Run the django-q2 cluster (qcluster) so that SIGTERM or Ctrl-C stops it within 20 s and "
        "nothing of it outlives this process (docs/workers.md, 'Stopping'). Use this, not qcluster."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        # The child this command starts: qcluster itself, in processes that die with process PID.
        parser.add_argument("--child-of", type=int, metavar="PID", help=argparse.SUPPRESS)

    def handle(self, *args: Any, child_of: int | None = None, **options: Any) -> None:
        if child_of is None:
            sys.exit(Supervisor().run())
        stopping.cluster_dies_with(child_of)
        call_command("qcluster")
