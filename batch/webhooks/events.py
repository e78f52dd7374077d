"""Events whose webhooks are delivered: a delivery made due in the transaction that records the
event, its body fixed then (docs/webhooks.md).

``schedule_event`` is all a source of events needs: who is told (the caller, whose secret signs and
whose share of the senders it takes), where, what type and what data. ``job_finished`` is today's
source (``batch.finished``); a monitor's ``monitor.changed`` calls it the same way. Delivery never
looks at the type.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from batch.models import BATCH_FINISHED, ApiKey, BatchJob, WebhookDelivery
from batch.summaries import job_summary
from fetch.wire.hostnames import canonical_host


def schedule_event(
    caller: ApiKey,
    url: str,
    event_type: str,
    data: dict[str, Any],
    *,
    event_id: str = "",
    job: BatchJob | None = None,
    now: datetime | None = None,
) -> bool:
    """Make the event's signed webhook due now; ``False`` if the event was scheduled before.

    Call it inside the transaction that records the event, so that the two commit together. The
    body is ``{type, timestamp, data}`` as of ``now`` and stays the same on every attempt.
    ``event_id`` is the ``webhook-id`` receivers dedupe on (a fresh one when empty); ``job`` is
    the job the event concerns, if any.
    """
    now = now or timezone.now()
    _, created = WebhookDelivery.objects.get_or_create(
        event_id=event_id or new_event_id(),
        defaults={
            "event_type": event_type,
            "caller": caller,
            "url": url,
            "host": host_of(url),
            "body": body_of({"type": event_type, "timestamp": now, "data": data}),
            "job": job,
            "created_at": now,
            "due_at": now,
        },
    )
    return created


def job_finished(job_id: str, now: datetime | None = None) -> bool:
    """Make the finished job's ``batch.finished`` webhook due, if it has a ``callback_url``; at
    most once a job (its event id is the job's). Called in the transaction that finishes it."""
    job = BatchJob.objects.select_related("caller").filter(pk=job_id).exclude(callback_url="").first()
    if job is None:
        return False
    summary = job_summary(job, job.caller)
    del summary["webhook"]  # how delivery goes is not part of what is delivered
    summary["job_url"] = f"/v1/batch/{job.id}"
    return schedule_event(
        job.caller, job.callback_url, BATCH_FINISHED, summary, event_id=f"msg_{job.id}", job=job, now=now
    )


def new_event_id() -> str:
    return f"msg_{secrets.token_hex(16)}"


def host_of(url: str) -> str:
    """The receiving host whose share of the senders an attempt takes: its canonical name, any
    port, so that respelling a host gets no share of its own."""
    return canonical_host(urlsplit(url).hostname or "")


def body_of(event: dict[str, Any]) -> str:
    # The encoder the API's answers go through, so times read exactly as in GET /v1/batch/{id}.
    return json.dumps(event, cls=DjangoJSONEncoder)
