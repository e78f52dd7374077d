"""Hand work to the django-q2 cluster (ORM broker, same database)."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from django_q.models import OrmQ
from django_q.tasks import async_task

DRAIN_TASK = "batch.tasks.drain_targets"


def wake_workers(*, force: bool = False) -> None:
    """Queue drain tasks, one per worker, unless one is already waiting to be picked up.

    Called after a submit commits, so workers start at once instead of at the next schedule.
    A running drain keeps claiming until no work is left, so waiting tasks would add nothing.
    ``force`` queues one regardless: a drain handing over to its successor.
    """
    if force:
        count = 1
    elif OrmQ.objects.filter(key=settings.Q_CLUSTER["name"], lock__lte=timezone.now()).exists():
        return
    else:
        count = settings.SIFT_BATCH_WORKERS
    for _ in range(count):
        async_task(DRAIN_TASK, task_name="drain-targets", group="sift-drain")
