from __future__ import annotations

from django.apps import AppConfig


class BatchConfig(AppConfig):
    name = "batch"
    verbose_name = "sift"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: both need the app registry, which is ready only now.
        from django_q.signals import post_spawn  # noqa: PLC0415

        # checks registers the rules between settings (sift.E001, ...) as it is imported.
        from batch import checks  # noqa: F401, PLC0415
        from batch.engine import stopping, wakeups  # noqa: PLC0415
        from batch.engine.heartbeat import start_heartbeat  # noqa: PLC0415

        # The monitors' admin registers itself as it is imported (batch/admin.py holds the rest).
        from batch.monitors import admin, budget  # noqa: F401, PLC0415

        budget.register()  # monitor changes count in their caller's change bytes
        post_spawn.connect(start_heartbeat, dispatch_uid="sift-heartbeat")
        post_spawn.connect(wakeups.wake_on_process_start, dispatch_uid="sift-wake-on-start")
        post_spawn.connect(stopping.install, dispatch_uid="sift-stopping")
