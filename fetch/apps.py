from __future__ import annotations

from django.apps import AppConfig


class FetchConfig(AppConfig):
    """The fetch pipeline as an app of its own: its tables, its migrations, no knowledge of jobs."""

    name = "fetch"
    label = "fetch"
    verbose_name = "sift fetch pipeline"
    default_auto_field = "django.db.models.BigAutoField"
