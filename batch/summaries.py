"""A job as its caller sees it: the summary the API answers and a finished job's webhook carries,
and each of its targets.

Shared by the HTTP surface (``batch/api``, MCP) and the job side (``batch/webhooks/events.py``), so the
two can never describe a job differently (docs/api.md, docs/webhooks.md).
"""

from __future__ import annotations

from typing import Any

from batch.models import BATCH_FINISHED, ApiKey, BatchJob, BatchTarget, WebhookDelivery


def job_summary(job: BatchJob, caller: ApiKey) -> dict[str, Any]:
    """Every job field but ``content_key``, with its webhook's state; ``caller`` spares a query."""
    return {
        "id": job.id,
        "caller": caller.name,
        "caller_class": job.caller_class,
        "status": job.status,
        "error": job.error or None,
        "targets_total": job.targets_total,
        "targets_done": job.targets_done,
        "targets_failed": job.targets_failed,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "last_read_at": job.last_read_at,
        "expires_at": job.expires_at,
        "n_bytes": job.n_bytes,
        "callback_url": job.callback_url or None,
        "webhook": webhook_state(job),
    }


def target_out(target: BatchTarget, *, content: bool = True) -> dict[str, Any]:
    """A target with its result; ``content=False`` leaves the result's content (and screenshot) out."""
    result = target.result
    if result is not None and not content:
        result = {k: v for k, v in result.items() if k not in ("content", "screenshot")}
    return {
        "idx": target.idx,
        "url": target.url,
        "options": target.options,
        "status": target.status,
        "result": result,
        "error": target.error or None,
        "hint": target.hint or None,
        "outcome": target.outcome,
        "attempts": target.attempts,
        "seq": target.seq,
    }


def webhook_state(job: BatchJob) -> dict[str, Any] | None:
    """``None`` without a ``callback_url``; else where delivery stands and every attempt so far."""
    if not job.callback_url:
        return None
    delivery = finished_delivery(job)
    attempts = [] if delivery is None else list(delivery.attempts.all())
    return {
        "url": job.callback_url,
        "state": "waiting" if delivery is None else delivery.state,  # waiting: not finished yet
        "attempts": [
            {"at": attempt.at, "status": attempt.status, "error": attempt.error or None}
            for attempt in attempts
        ],
        "next_attempt_at": None if delivery is None else delivery.due_at,
        "delivered_at": None if delivery is None else delivery.delivered_at,
    }


def finished_delivery(job: BatchJob) -> WebhookDelivery | None:
    """The delivery of the job's ``batch.finished`` event, once it finished; read through
    ``webhook_deliveries`` so that a prefetch serves it."""
    return next((d for d in job.webhook_deliveries.all() if d.event_type == BATCH_FINISHED), None)
