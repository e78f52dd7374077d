from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from batch import retention


class Command(BaseCommand):
    help = (
        "Delete each caller's finished jobs beyond SIFT_BATCH_FINISHED_PER_CALLER, then the oldest "
        "finished jobs until stored results fit the byte budget (docs/workers.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--max-bytes", type=int, default=None, help="budget in bytes (default: SIFT_BATCH_MAX_BYTES)"
        )

    def handle(self, *args: Any, max_bytes: int | None, **options: Any) -> None:
        if max_bytes is not None and max_bytes < 0:
            raise CommandError("--max-bytes must be 0 or more")
        removed = retention.evict_every_callers_oldest() + retention.evict_oldest(max_bytes)
        self.stdout.write(f"evict: {removed}")
