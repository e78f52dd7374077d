from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from batch import retention


class Command(BaseCommand):
    help = "Delete jobs not read for longer than SIFT_BATCH_TTL, with their targets."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(f"sweep: {retention.sweep_expired_jobs()}")
