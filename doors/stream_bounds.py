"""The event stream bounds, for the whole deployment: a row per open stream, with a lease.

``SIFT_BATCH_STREAMS_PER_CALLER`` and ``SIFT_BATCH_STREAMS_TOTAL`` count the ``EventStream`` rows
of every web process. A stream is admitted in one transaction that locks the ``StreamLock`` row,
drops the rows whose lease ran out (their process died without deleting them), counts the
caller's rows and all of them, and adds its own if both counts leave room. While the stream is
open its process's job watch renews the leases of all that process's streams in one UPDATE
(``doors/streams.py``); when it ends, however it ends, its row is deleted.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from batch.models import ApiKey, EventStream, StreamLock


def lease() -> timedelta:
    return timedelta(seconds=settings.SIFT_BATCH_STREAM_LEASE)


def admit(caller: ApiKey, job_id: str) -> int | None:
    """The id of a new open stream of ``caller`` following ``job_id``, or ``None`` when the caller
    holds ``SIFT_BATCH_STREAMS_PER_CALLER`` open streams already, or the deployment holds
    ``SIFT_BATCH_STREAMS_TOTAL``."""
    with transaction.atomic():
        StreamLock.hold()
        now = timezone.now()
        EventStream.objects.filter(lease_until__lte=now).delete()
        counts = EventStream.objects.aggregate(all=Count("pk"), callers=Count("pk", filter=Q(caller=caller)))
        if (
            counts["callers"] >= settings.SIFT_BATCH_STREAMS_PER_CALLER
            or counts["all"] >= settings.SIFT_BATCH_STREAMS_TOTAL
        ):
            return None
        stream = EventStream.objects.create(
            caller=caller, job_id=job_id, opened_at=now, lease_until=now + lease()
        )
    return int(stream.pk)


def renew(stream_ids: Collection[int]) -> int:
    """Move the leases of these open streams on; how many rows were still there."""
    return int(EventStream.objects.filter(pk__in=stream_ids).update(lease_until=timezone.now() + lease()))


def close(stream_id: int) -> None:
    EventStream.objects.filter(pk=stream_id).delete()
