"""A finished job's webhook: its delivery, each attempt, and the lock its claims hold (docs/webhooks.md)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from batch.models.coordination import SingleRowLock
from batch.models.jobs import BatchJob


class WebhookDelivery(models.Model):
    """The webhook of one finished job: its body, fixed at the finish, and when to try next.

    Made in the transaction that finishes the job. ``due_at`` is the next attempt; a delivery
    thread claims it by moving ``due_at`` and ``sending_until`` to the end of the attempt's
    lease, and clears both when the receiver answered 2xx or ``SIFT_WEBHOOK_RETRY_FOR`` ran out
    (docs/webhooks.md). An attempt in flight counts against its caller's and its ``host``'s
    shares of the senders until ``sending_until``.
    """

    job = models.OneToOneField(BatchJob, primary_key=True, on_delete=models.CASCADE, related_name="webhook")
    body = models.TextField()
    created_at = models.DateTimeField()
    due_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)
    # The callback URL's host name, lower case: receivers on one host share its senders.
    host = models.CharField(max_length=255, blank=True, default="")
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
        return f"webhook of {self.job_id}"


class WebhookClaimLock(SingleRowLock):
    """Every webhook claim holds it, so that the attempts in flight it counts, in all, per caller
    and per host, are never stale (docs/webhooks.md)."""


class WebhookAttempt(models.Model):
    """One POST of a job's webhook: when, and the HTTP status or why there was none."""

    job = models.ForeignKey(BatchJob, on_delete=models.CASCADE, related_name="webhook_attempts")
    at = models.DateTimeField()
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        verbose_name = "webhook attempt"
        ordering = ["job", "at", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__isnull=False) | ~Q(error=""), name="webhook_attempt_status_or_error"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} at {self.at:%Y-%m-%d %H:%M:%S}"
