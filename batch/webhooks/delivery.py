"""Delivering due webhooks: claim fairly, POST outside any transaction, record, retry with backoff
(docs/webhooks.md). ``manage.py deliver_webhooks`` runs it; nothing else does.

Senders are shared deployment-wide: at most ``SIFT_WEBHOOK_SENDING`` attempts in flight in all,
``SIFT_WEBHOOK_PER_CALLER`` per caller and ``SIFT_WEBHOOK_PER_HOST`` per receiving host, and the
next claim goes to the delivery whose caller, then host, has the fewest in flight, oldest due
first. Claims are counted and taken under one row lock, so the counts are never stale; a caller
whose receivers never answer holds its share and no more.

A claim is a conditional update of ``due_at`` that also serves as the attempt's lease: two
processes never make one attempt at once, and an attempt whose process died is made again once
its lease runs out (delivery is at least once; receivers dedupe on ``webhook-id``). The POST is
``batch.pipeline_bridge.post_webhook``, loaded by name: this module never imports the pipeline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.module_loading import import_string

from batch import metrics
from batch.engine.reconnect import database_went_away, wait_for_database
from batch.models import WebhookAttempt, WebhookClaimLock, WebhookDelivery
from batch.webhooks.signing import signed_headers
from sift_site.log_lines import concerning

log = logging.getLogger(__name__)

# The POST in production, loaded by name so that the job side never imports the fetch pipeline.
SENDER = "batch.pipeline_bridge.post_webhook"
# One attempt's whole deadline: a receiver should answer at once and do its work afterwards.
ATTEMPT_TIMEOUT_SECONDS = 10.0
# A claimed attempt belongs to its sender this long; past it, another may try again.
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


@dataclass(frozen=True)
class Claimed:
    delivery_id: int
    event_id: str
    event_type: str
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
    """Make every attempt that is due now, one after another in this thread; return how many."""
    made = 0
    while (claimed := claim_due(now)) is not None:
        attempt(claimed, send)
        made += 1
    return made


# --- claiming ---------------------------------------------------------------------------------


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
                    delivery_id=due.pk,
                    event_id=due.event_id,
                    event_type=due.event_type,
                    url=due.url,
                    body=due.body,
                    secret=due.caller.webhook_secret,
                    created_at=due.created_at,
                    attempts=due.attempt_count,
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
            caller_sending=_in_flight_alike("caller_id", now), host_sending=_in_flight_alike("host", now)
        )
        .filter(
            caller_sending__lt=settings.SIFT_WEBHOOK_PER_CALLER,
            host_sending__lt=settings.SIFT_WEBHOOK_PER_HOST,
        )
        .select_related("caller")
        .order_by("caller_sending", "host_sending", "due_at", "pk")
        .first()
    )


def _in_flight_alike(field: str, now: datetime) -> Coalesce:
    """How many attempts are in flight with the same ``field`` (caller or host) as the row's."""
    alike = WebhookDelivery.objects.filter(sending_until__gt=now, **{field: OuterRef(field)})
    counted = alike.order_by().values(field).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted), 0)


# --- one attempt ------------------------------------------------------------------------------


def attempt(claimed: Claimed, send: Sender) -> Answer:
    """POST once, outside any transaction, then record the attempt and what comes next."""
    at = timezone.now()
    headers = signed_headers(claimed.secret, claimed.event_id, claimed.body, at)
    try:
        answer = send(claimed.url, claimed.body.encode(), headers, ATTEMPT_TIMEOUT_SECONDS)
    except Exception:
        log.exception("webhook %s: the sender raised", claimed.event_id)
        answer = Answer(error="internal error while sending")
    record_surviving_a_restart(claimed, answer, at)
    return answer


def record_surviving_a_restart(claimed: Claimed, answer: Answer, at: datetime) -> bool:
    """``record``, again once the database is back if it went away, while the claim is ours."""
    try:
        return record(claimed, answer, at)
    except DatabaseError as error:
        if not database_went_away(error):
            raise
        lease_left = (claimed.claimed_until - timezone.now()).total_seconds()
        log.warning("webhook %s: database unavailable; recording when it is back", claimed.event_id)
        if not wait_for_database(time.monotonic() + lease_left):
            raise
        return record(claimed, answer, at)  # conditional: a first try that committed is not repeated


def record(claimed: Claimed, answer: Answer, at: datetime) -> bool:
    """Store the attempt and the next due time (or the end), if the claim is still ours."""
    number = claimed.attempts + 1
    ended = timezone.now()
    next_due = None if answer.delivered else next_attempt(claimed.created_at, number, ended)
    with transaction.atomic():
        ours = WebhookDelivery.objects.filter(pk=claimed.delivery_id, due_at=claimed.claimed_until).update(
            attempt_count=number,
            due_at=next_due,
            sending_until=None,
            delivered_at=ended if answer.delivered else None,
            gave_up_at=ended if not answer.delivered and next_due is None else None,
        )
        if ours:
            WebhookAttempt.objects.create(
                delivery_id=claimed.delivery_id,
                at=at,
                status=answer.status,
                error=answer.error[:ERROR_MAX_CHARS],
            )
    outcome = "delivered" if answer.delivered else ("retry" if next_due else "given up")
    if ours:
        _count(claimed.event_type, outcome)
    status = answer.status or "none"
    log.info(
        "webhook %s %s attempt %d status=%s %s", claimed.event_id, claimed.event_type, number, status, outcome
    )
    return bool(ours)


def _count(event_type: str, outcome: str) -> None:
    if outcome == "delivered":
        metrics.WEBHOOK_DELIVERIES.labels(event_type).inc()
        return
    metrics.WEBHOOK_FAILURES.labels(event_type).inc()
    (metrics.WEBHOOK_RETRIES if outcome == "retry" else metrics.WEBHOOK_GIVEN_UP).labels(event_type).inc()


def next_attempt(created_at: datetime, attempts: int, now: datetime) -> datetime | None:
    """After ``attempts`` failed tries: wait RETRY_WAIT, doubling each time, within RETRY_FOR.

    The last try falls on the RETRY_FOR mark itself; after it, delivery gives up (``None``).
    """
    give_up_at = created_at + timedelta(seconds=settings.SIFT_WEBHOOK_RETRY_FOR)
    if now >= give_up_at:
        return None
    wait = settings.SIFT_WEBHOOK_RETRY_WAIT * 2 ** min(attempts - 1, MAX_DOUBLINGS)
    return min(now + timedelta(seconds=wait), give_up_at)


def release(claimed: Claimed) -> bool:
    """Give an unfinished attempt back, due at once, if the claim is still ours (a stop)."""
    return bool(
        WebhookDelivery.objects.filter(pk=claimed.delivery_id, due_at=claimed.claimed_until).update(
            due_at=timezone.now(), sending_until=None
        )
    )


# --- between rounds ---------------------------------------------------------------------------


def seconds_until_due(after: datetime) -> float:
    """How long the loop may sleep: until the next attempt falling due after ``after``, at most a
    poll. ``after`` is when the round that claimed all it could began: what was due then and is
    still unclaimed waits for a share, which a sender coming free wakes; what fell due since is
    claimed by the next round, at once. Events made by other processes are seen within a poll."""
    next_due = (
        WebhookDelivery.objects.filter(due_at__gt=after)
        .order_by("due_at")
        .values_list("due_at", flat=True)
        .first()
    )
    if next_due is None:
        return POLL_SECONDS
    return min(max((next_due - timezone.now()).total_seconds(), 0.0), POLL_SECONDS)


def delete_ended_without_job() -> int:
    """Delete deliveries that ended (delivered or given up) and concern no job any more: a job's
    delivery lives as long as its job, and one whose job was deleted as long as it is undelivered."""
    deleted, _ = WebhookDelivery.objects.filter(job__isnull=True, due_at__isnull=True).delete()
    return deleted


class Senders:
    """This process's senders: at most ``count`` attempts at once, each in a thread of its own.

    Sender threads are daemons: a stop that does not wait for an attempt gives its claim back
    (``release_unfinished``) and leaves the thread behind. ``inline`` makes each attempt in the
    caller's thread instead, one after another (the tests' in-process loop).
    """

    def __init__(self, count: int, send: Sender, *, inline: bool = False) -> None:
        self._free = threading.BoundedSemaphore(count)
        self._send = send
        self._inline = inline
        self._lock = threading.Lock()
        self._in_flight: dict[int, Claimed] = {}
        self.freed = threading.Event()  # set when a sender comes free: the loop looks again at once
        self.tally = {"attempts": 0, "delivered": 0, "failed": 0}

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
            with self._lock:
                self._in_flight[claimed.delivery_id] = claimed
            if self._inline:
                self._attempt(claimed)
            else:
                threading.Thread(
                    target=self._attempt, args=(claimed,), name="sift-webhook", daemon=True
                ).start()
            started += 1
        return started

    def _attempt(self, claimed: Claimed) -> None:
        outcome = ""
        try:
            with concerning(webhook=claimed.event_id):
                answer = attempt(claimed, self._send)
            outcome = "delivered" if answer.delivered else "failed"
        except DatabaseError:
            log.warning(
                "webhook %s: not recorded; made again after its lease", claimed.event_id, exc_info=True
            )
        finally:
            if not self._inline:
                connection.close()  # senders keep no connection open between attempts
            with self._lock:
                self._in_flight.pop(claimed.delivery_id, None)
                self.tally["attempts"] += 1
                if outcome:
                    self.tally[outcome] += 1
            self._free.release()
            self.freed.set()

    def in_flight(self) -> list[Claimed]:
        with self._lock:
            return list(self._in_flight.values())

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every attempt in flight to be recorded."""
        deadline = time.monotonic() + timeout
        while self.in_flight():
            if time.monotonic() >= deadline:
                return False
            self.freed.wait(min(0.1, max(deadline - time.monotonic(), 0.0)))
            self.freed.clear()
        return True

    def release_unfinished(self) -> int:
        """Give back every attempt still in flight, due at once; return how many were ours."""
        released = 0
        for claimed in self.in_flight():
            try:
                released += release(claimed)
            except DatabaseError:
                log.warning("webhook %s: release failed; its lease runs out", claimed.event_id, exc_info=True)
        return released
