"""sift's records: callers, jobs and targets (``jobs``), the rows that coordinate processes
(``coordination``), webhook deliveries (``webhooks``) and monitors (``monitors``). Everything is
imported from here.
"""

from batch.models.coordination import (
    ClusterHeartbeat,
    EventStream,
    SingleRowLock,
    StreamLock,
    SubmitLock,
    WorkerSlot,
)
from batch.models.jobs import (
    FINISHED_STATUSES,
    JOB_ID_PATTERN,
    LIVE_STATUSES,
    MAX_DB_INT,
    OUTCOME_CHOICES,
    REUSABLE_STATUSES,
    WEBHOOK_SECRET_PREFIX,
    ApiKey,
    BatchJob,
    BatchTarget,
    CallerClass,
    IdempotencyKey,
    JobStatus,
    TargetStatus,
    hash_key,
    new_job_id,
    new_webhook_secret,
)
from batch.models.monitors import MONITOR_CHANGED, Monitor, MonitorChange, MonitorLock
from batch.models.webhooks import BATCH_FINISHED, WebhookAttempt, WebhookClaimLock, WebhookDelivery

__all__ = [
    "BATCH_FINISHED",
    "FINISHED_STATUSES",
    "JOB_ID_PATTERN",
    "LIVE_STATUSES",
    "MAX_DB_INT",
    "MONITOR_CHANGED",
    "OUTCOME_CHOICES",
    "REUSABLE_STATUSES",
    "WEBHOOK_SECRET_PREFIX",
    "ApiKey",
    "BatchJob",
    "BatchTarget",
    "CallerClass",
    "ClusterHeartbeat",
    "EventStream",
    "IdempotencyKey",
    "JobStatus",
    "Monitor",
    "MonitorChange",
    "MonitorLock",
    "SingleRowLock",
    "StreamLock",
    "SubmitLock",
    "TargetStatus",
    "WebhookAttempt",
    "WebhookClaimLock",
    "WebhookDelivery",
    "WorkerSlot",
    "hash_key",
    "new_job_id",
    "new_webhook_secret",
]
