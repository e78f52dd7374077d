from __future__ import annotations

from django.apps import AppConfig


class FetchConfig(AppConfig):
    """The fetch pipeline as an app of its own: its tables, its migrations, no knowledge of jobs."""

    name = "fetch"
    label = "fetch"
    verbose_name = "sift fetch pipeline"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: the readings' module needs the app registry, which is ready only now.
        from capacity import caller_budget  # noqa: PLC0415
        from fetch.changes import readings  # noqa: PLC0415

        caller_budget.register(readings.READINGS)
