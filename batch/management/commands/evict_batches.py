from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from batch import runner


class Command(BaseCommand):
    help = "Delete the oldest finished jobs until stored results fit the byte budget (SPEC §3.6)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--max-bytes", type=int, default=None, help="budget in bytes (default: SIFT_BATCH_MAX_BYTES)"
        )

    def handle(self, *args: Any, max_bytes: int | None, **options: Any) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise CommandError("--max-bytes must be 0 or more")
        self.stdout.write(f"evict: {runner.evict_oldest(max_bytes)}")
