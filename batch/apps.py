from __future__ import annotations

from django.apps import AppConfig


class BatchConfig(AppConfig):
    name = "batch"
    verbose_name = "Batch jobs"
    default_auto_field = "django.db.models.BigAutoField"
