"""Webhook deliveries: one signed event to one caller's URL, each attempt, and the lock every claim
holds (docs/webhooks.md)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from batch.models.coordination import SingleRowLock
from batch.models.jobs import ApiKey, BatchJob

# The one event type today: a job finished (docs/webhooks.md, "What arrives").
BATCH_FINISHED = "batch.finished"


class WebhookDelivery(models.Model):
    """The delivery of one event (``batch.finished``, later ``monitor.changed``) to its caller's URL.

    Made when the event happens, in the transaction that records it, with the body fixed then.
    ``due_at`` is the next attempt; ``manage.py deliver_webhooks`` claims it by moving ``due_at``
    and ``sending_until`` to the end of the attempt's lease, and clears both when the receiver
    answered 2xx or ``SIFT_WEBHOOK_RETRY_FOR`` ran out. An attempt in flight counts against its
    caller's and its ``host``'s shares of the senders until ``sending_until``.

    ``job`` is the job the event concerns, if any. Deleting the job keeps an undelivered event (it
    is still delivered: its body needs no job); once ended, a delivery of no job is deleted by the
    command (docs/decisions.md, "A webhook belongs to an event").
    """

    # The Standard Webhooks ``webhook-id``: one event, one message, the same on every attempt.
    event_id = models.CharField(max_length=100, unique=True)
    event_type = models.CharField(max_length=100)
    # The caller whose secret signs it and whose share of the senders it takes.
    caller = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="webhook_deliveries")
    url = models.TextField()
    # The callback URL's host name in its canonical form: receivers on one host share its senders.
    host = models.CharField(max_length=255, blank=True, default="")
    body = models.TextField()
    job = models.ForeignKey(
        BatchJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="webhook_deliveries"
    )
    created_at = models.DateTimeField()
    due_at = models.DateTimeField(null=True, blank=True)
    attempt_count = models.PositiveIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)
    sending_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["due_at"], name="webhook_due"),
            models.Index(fields=["sending_until"], name="webhook_sending"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(due_at__isnull=False, delivered_at__isnull=True, gave_up_at__isnull=True)
                | Q(due_at__isnull=True, delivered_at__isnull=False, gave_up_at__isnull=True)
                | Q(due_at__isnull=True, delivered_at__isnull=True, gave_up_at__isnull=False),
                name="webhook_due_delivered_or_given_up",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} {self.event_id}"

    @property
    def state(self) -> str:
        """``delivered``, ``failed`` (given up) or ``sending`` (an attempt due or in flight)."""
        if self.delivered_at is not None:
            return "delivered"
        if self.gave_up_at is not None:
            return "failed"
        return "sending"


class WebhookClaimLock(SingleRowLock):
    """Every webhook claim holds it, so that the attempts in flight it counts, in all, per caller
    and per host, are never stale (docs/webhooks.md)."""


class WebhookAttempt(models.Model):
    """One POST of a delivery: when, and the HTTP status or why there was none."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempts")
    at = models.DateTimeField()
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        verbose_name = "webhook attempt"
        ordering = ["delivery", "at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__isnull=False) | ~Q(error=""), name="webhook_attempt_status_or_error"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.delivery_id} at {self.at:%Y-%m-%d %H:%M:%S}"
