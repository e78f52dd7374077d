"""Signed webhooks when a job finishes: schedule, sign, deliver, retry (docs/webhooks.md).

``job_finished`` runs inside the transaction that finishes a job (the last target stored, a
cancel): it fixes the body the receiver gets and makes the delivery due. A thread in every
cluster worker process (``start_delivery``, at django-q2's ``post_spawn``, like the heartbeat)
claims due deliveries and hands each to one of the process's sender threads: never as a
cluster task and never in a worker slot, so a slow receiver cannot hold up any target. It is
woken at once when a job finishes in its own process or a sender comes free, and polls every
second for the rest (a cancel in the web process, a sender of another process).

Senders are shared deployment-wide: at most ``SIFT_WEBHOOK_SENDING`` attempts in flight in all,
``SIFT_WEBHOOK_PER_CALLER`` per caller and ``SIFT_WEBHOOK_PER_HOST`` per receiving host, and
the next claim goes to the delivery whose caller, then host, has the fewest in flight, oldest due
first. Claims are counted and taken under one row lock, so the counts are never stale; a caller
whose receivers never answer holds its share and no more (docs/webhooks.md).

Like the worker, this module never imports the fetch pipeline: the POST is
``batch.pipeline_bridge.post_webhook``, loaded by name, which goes through the same guarded client as
every fetch. Claims are conditional updates of ``due_at``, so two delivery threads never send
one attempt twice; a thread that dies mid-attempt leaves its claim to expire, and the attempt
is made again (delivery is at least once; receivers dedupe on ``webhook-id``).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.module_loading import import_string
from standardwebhooks import Webhook

from batch.models import ApiKey, BatchJob, WebhookAttempt, WebhookClaimLock, WebhookDelivery
from batch.summaries import job_summary
from fetch.wire.hostnames import canonical_host

log = logging.getLogger(__name__)

EVENT_TYPE = "batch.finished"
# The POST in production, loaded by name so that the job side never imports the fetch pipeline.
SENDER = "batch.pipeline_bridge.post_webhook"
# One attempt's whole deadline: a receiver should answer at once and do its work afterwards.
ATTEMPT_TIMEOUT_SECONDS = 10.0
# A claimed attempt belongs to its thread this long; past it, another thread may try again.
ATTEMPT_LEASE = timedelta(seconds=ATTEMPT_TIMEOUT_SECONDS + 30)
POLL_SECONDS = 1.0
# Backoff doubles at most this many times (5 s times 2^20 is far past any RETRY_FOR).
MAX_DOUBLINGS = 20
ERROR_MAX_CHARS = 500


@dataclass(frozen=True)
class Answer:
    """What one POST came to: the receiver's HTTP status, or why there was none."""

    status: int | None = None
    error: str = ""

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


# (url, body, headers, timeout seconds) -> Answer; never raises for a receiver's failure.
Sender = Callable[[str, bytes, dict[str, str], float], Answer]


# --- scheduling, inside the transaction that finishes a job ---------------------------------


def job_finished(job_id: str, now: datetime | None = None) -> bool:
    """Make the finished job's webhook due, if it has a ``callback_url``; at most once a job.

    Call it inside the transaction that finishes the job, so that a finish and its webhook
    commit together. The body is the job's summary at this moment, and stays the same for
    every attempt (receivers dedupe on ``webhook-id``).
    """
    job = BatchJob.objects.select_related("caller").filter(pk=job_id).exclude(callback_url="").first()
    if job is None:
        return False
    now = now or timezone.now()
    _, created = WebhookDelivery.objects.get_or_create(
        job=job,
        defaults={
            "body": body_of(payload(job, now)),
            "created_at": now,
            "due_at": now,
            "host": host_of(job.callback_url),
        },
    )
    if created:
        transaction.on_commit(wake)
    return created


def host_of(url: str) -> str:
    """The receiving host whose share of the senders an attempt takes: its canonical name, any
    port, so that respelling a host gets no share of its own."""
    return canonical_host(urlsplit(url).hostname or "")


def payload(job: BatchJob, now: datetime) -> dict[str, Any]:
    """The Standard Webhooks envelope: ``type``, ``timestamp`` and the job's summary as ``data``."""
    summary = job_summary(job, job.caller)
    del summary["webhook"]  # how delivery goes is not part of what is delivered
    summary["job_url"] = f"/v1/batch/{job.id}"
    return {"type": EVENT_TYPE, "timestamp": now, "data": summary}


def body_of(event: dict[str, Any]) -> str:
    # The encoder the API's answers go through, so times read exactly as in GET /v1/batch/{id}.
    return json.dumps(event, cls=DjangoJSONEncoder)


# --- signing ---------------------------------------------------------------------------------


def message_id(job_id: str) -> str:
    """``webhook-id``: one message per job, the same on every attempt."""
    return f"msg_{job_id}"


def signed_headers(secret: str, msg_id: str, body: str, at: datetime) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with the caller's ``whsec_`` secret."""
    timestamp = math.floor(at.timestamp())
    signature = Webhook(secret).sign(msg_id, datetime.fromtimestamp(timestamp, tz=UTC), body)
    return {
        "Content-Type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }


# --- delivering ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    job_id: str
    url: str
    body: str
    secret: str
    created_at: datetime
    attempts: int
    claimed_until: datetime


def load_sender() -> Sender:
    func: Sender = import_string(SENDER)
    return func


def deliver_due(send: Sender, now: datetime | None = None) -> int:
    """Make every attempt that is due now; return how many were made."""
    made = 0
    while (claimed := claim_due(now)) is not None:
        attempt(claimed, send)
        made += 1
    return made


def claim_due(now: datetime | None = None) -> Claimed | None:
    """Take the fairest due delivery for one attempt, or ``None`` when nothing is due that a
    free share of the senders allows."""
    now = now or timezone.now()
    claimed_until = now + ATTEMPT_LEASE
    while True:
        with transaction.atomic():
            WebhookClaimLock.hold()
            due = fairest_due(now)
            if due is None:
                return None
            # Conditional: a late record() of an expired claim may have moved due_at since the read.
            if WebhookDelivery.objects.filter(pk=due.pk, due_at=due.due_at).update(
                due_at=claimed_until, sending_until=claimed_until
            ):
                return Claimed(
                    job_id=due.job_id,
                    url=due.job.callback_url,
                    body=due.body,
                    secret=due.job.caller.webhook_secret,
                    created_at=due.created_at,
                    attempts=due.attempts,
                    claimed_until=claimed_until,
                )


def fairest_due(now: datetime) -> WebhookDelivery | None:
    """The due delivery to attempt next, within every share of the senders; ``None`` if none.

    Shares are counted over attempts in flight (claimed, lease not run out) deployment-wide. Of
    the deliveries whose caller and host are under their shares, the one whose caller has the
    fewest in flight goes first, then whose host has, then the oldest due.
    """
    if WebhookDelivery.objects.filter(sending_until__gt=now).count() >= settings.SIFT_WEBHOOK_SENDING:
        return None
    return (
        WebhookDelivery.objects.filter(due_at__lte=now)
        .annotate(
            caller_sending=_in_flight_alike("job__caller_id", now), host_sending=_in_flight_alike("host", now)
        )
        .filter(
            caller_sending__lt=settings.SIFT_WEBHOOK_PER_CALLER,
            host_sending__lt=settings.SIFT_WEBHOOK_PER_HOST,
        )
        .select_related("job__caller")
        .order_by("caller_sending", "host_sending", "due_at", "pk")
        .first()
    )


def _in_flight_alike(field: str, now: datetime) -> Coalesce:
    """How many attempts are in flight with the same ``field`` (caller or host) as the row's."""
    alike = WebhookDelivery.objects.filter(sending_until__gt=now, **{field: OuterRef(field)})
    counted = alike.order_by().values(field).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted), 0)


def attempt(claimed: Claimed, send: Sender) -> Answer:
    """POST once, outside any transaction, then record the attempt and what comes next."""
    at = timezone.now()
    body = claimed.body
    headers = signed_headers(claimed.secret, message_id(claimed.job_id), body, at)
    try:
        answer = send(claimed.url, body.encode(), headers, ATTEMPT_TIMEOUT_SECONDS)
    except Exception:
        log.exception("job %s webhook: the sender raised", claimed.job_id)
        answer = Answer(error="internal error while sending")
    record(claimed, answer, at)
    return answer


def record(claimed: Claimed, answer: Answer, at: datetime) -> bool:
    """Store the attempt and the next due time (or the end), if the claim is still ours."""
    number = claimed.attempts + 1
    ended = timezone.now()
    next_due = None if answer.delivered else next_attempt(claimed.created_at, number, ended)
    with transaction.atomic():
        ours = WebhookDelivery.objects.filter(pk=claimed.job_id, due_at=claimed.claimed_until).update(
            attempts=number,
            due_at=next_due,
            sending_until=None,
            delivered_at=ended if answer.delivered else None,
            gave_up_at=ended if not answer.delivered and next_due is None else None,
        )
        if ours:
            WebhookAttempt.objects.create(
                job_id=claimed.job_id, at=at, status=answer.status, error=answer.error[:ERROR_MAX_CHARS]
            )
    outcome = "delivered" if answer.delivered else ("retry" if next_due else "given up")
    log.info(
        "job %s webhook attempt %d status=%s %s", claimed.job_id, number, answer.status or "none", outcome
    )
    return bool(ours)


def next_attempt(created_at: datetime, attempts: int, now: datetime) -> datetime | None:
    """After ``attempts`` failed tries: wait RETRY_WAIT, doubling each time, within RETRY_FOR.

    The last try falls on the RETRY_FOR mark itself; after it, delivery gives up (``None``).
    """
    give_up_at = created_at + timedelta(seconds=settings.SIFT_WEBHOOK_RETRY_FOR)
    if now >= give_up_at:
        return None
    wait = settings.SIFT_WEBHOOK_RETRY_WAIT * 2 ** min(attempts - 1, MAX_DOUBLINGS)
    return min(now + timedelta(seconds=wait), give_up_at)


def rotate_secret(api_key: ApiKey) -> str:
    """A new secret for the caller: the next attempt of any of its webhooks is signed with it."""
    secret = api_key.rotate_webhook_secret()
    log.info("caller %s webhook secret rotated", api_key.name)
    return secret


# --- the delivery thread of a cluster worker process -----------------------------------------

_wake = threading.Event()


def wake() -> None:
    """A job finished or a sender came free in this process: its delivery thread looks at once."""
    _wake.set()


def seconds_until_due(after: datetime) -> float:
    """How long the delivery thread may sleep: until the next attempt falling due after
    ``after``, at most a poll. ``after`` is when the round that claimed all it could began: what
    was due then and is still unclaimed waits for a share, which a sender coming free wakes;
    what fell due since is claimed by the next round, at once."""
    next_due = (
        WebhookDelivery.objects.filter(due_at__gt=after)
        .order_by("due_at")
        .values_list("due_at", flat=True)
        .first()
    )
    if next_due is None:
        return POLL_SECONDS
    return min(max((next_due - timezone.now()).total_seconds(), 0.0), POLL_SECONDS)


class Senders:
    """This process's sender threads: each makes one claimed attempt at a time, in parallel."""

    def __init__(self, count: int, send: Sender) -> None:
        self._free = threading.BoundedSemaphore(count)
        self._pool = ThreadPoolExecutor(count, thread_name_prefix="sift-webhook")
        self._send = send

    def start_due(self) -> int:
        """Hand due attempts to free senders while there are both; return how many were handed."""
        started = 0
        while self._free.acquire(blocking=False):
            try:
                claimed = claim_due()
            except BaseException:
                self._free.release()
                raise
            if claimed is None:
                self._free.release()
                break
            self._pool.submit(self._attempt, claimed)
            started += 1
        return started

    def _attempt(self, claimed: Claimed) -> None:
        try:
            attempt(claimed, self._send)
        except DatabaseError:
            # Not recorded: the claim's lease runs out and the attempt is made again.
            log.warning("job %s webhook: database unavailable", claimed.job_id, exc_info=True)
        finally:
            # Senders sit idle between attempts: they keep no connection open meanwhile.
            connection.close()
            self._free.release()
            wake()


def _deliver_forever() -> None:
    senders = Senders(settings.SIFT_WEBHOOK_SENDING, load_sender())
    while True:
        _wake.clear()  # before looking: a finish or a free sender meanwhile wakes the next round
        began = timezone.now()
        try:
            connection.close_if_unusable_or_obsolete()
            senders.start_due()
            pause = seconds_until_due(began)
        except DatabaseError:
            log.warning("webhooks: database unavailable; trying again", exc_info=True)
            connection.close()
            pause = POLL_SECONDS
        _wake.wait(pause)


def start_delivery(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """``post_spawn`` receiver: this worker process delivers webhooks from a thread of its own."""
    threading.Thread(target=_deliver_forever, name="sift-webhooks", daemon=True).start()
