"""Hand work to the django-q2 cluster (ORM broker, same database)."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from django_q.models import OrmQ
from django_q.tasks import async_task

DRAIN_TASK = "batch.tasks.drain_targets"


def wake_workers(*, force: bool = False) -> None:
    """Queue a drain task unless one is already waiting to be picked up.

    Called after a submit commits, so a worker starts at once instead of at the next schedule.
    A running drain keeps claiming until no work is left, so one waiting task is enough.
    """
    waiting = OrmQ.objects.filter(key=settings.Q_CLUSTER["name"], lock__lte=timezone.now())
    if force or not waiting.exists():
        async_task(DRAIN_TASK, task_name="drain-targets", group="sift-drain")
